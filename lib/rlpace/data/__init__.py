"""Replay buffers whose shared-memory or memory-mapped storage many processes extend and sample.

The data layer knows nothing of environments, collectors or trainers: batches are
TensorDicts addressed by key.

Example:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from rlpace.data import ReplayBuffer, MemmapStorage
    >>> rb = ReplayBuffer(storage=MemmapStorage(21), batch_size=4)
    >>> _ = rb.extend(TensorDict({"a": torch.zeros(10)}, [10]))
    >>> len(rb), rb.sample()["a"].shape
    (10, torch.Size([4]))
"""

from rlpace.data._buffer import ReplayBuffer
from rlpace.data._list_storage import ListStorage
from rlpace.data._prioritized import PrioritizedSampler
from rlpace.data._samplers import (
    EmptyBufferError,
    RandomSampler,
    Sampler,
    SamplerWithoutReplacement,
)
from rlpace.data._slices import SliceSampler
from rlpace.data._storage import MemmapStorage, TensorStorage
from rlpace.data._writers import RoundRobinWriter

__all__ = [
    "EmptyBufferError",
    "ListStorage",
    "MemmapStorage",
    "PrioritizedSampler",
    "RandomSampler",
    "ReplayBuffer",
    "RoundRobinWriter",
    "Sampler",
    "SamplerWithoutReplacement",
    "SliceSampler",
    "TensorStorage",
]
