"""Where the trainers get their collector and replay buffer: rlpace's own.

Collection goes through ``rlpace.collectors.Collector`` and SAC's replay through
``rlpace.data.ReplayBuffer`` over a process-local ``TensorStorage``. The backend names
are written to every run's ``config.yaml``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["buffer_backend", "collector_backend", "make_collector", "make_replay_buffer"]


def collector_backend() -> str:
    """The collector in use: always ``"rlpace"`` (``rlpace.collectors.Collector``).

    Example:
        >>> collector_backend()
        'rlpace'
    """
    return "rlpace"


def buffer_backend() -> str:
    """The replay buffer in use: always ``"rlpace"`` (``rlpace.data.ReplayBuffer``).

    Example:
        >>> buffer_backend()
        'rlpace'
    """
    return "rlpace"


def make_collector(
    env_fn: Callable[[], Any], policy: Any, *, frames_per_batch: int, total_frames: int
) -> Any:
    """rlpace's synchronous collector yielding ``frames_per_batch``-frame TensorDicts.

    Example:
        >>> from torch import nn
        >>> from rlpace.trainers._envs import make_actor, make_env
        >>> actor = make_actor(make_env("CartPole-v1", 0), (8,), nn.Tanh)
        >>> c = make_collector(lambda: make_env("CartPole-v1", 0), actor,
        ...                    frames_per_batch=8, total_frames=16)
        >>> [b.numel() for b in c]
        [8, 8]
        >>> c.shutdown()
    """
    from rlpace.collectors import Collector

    return Collector(env_fn, policy, frames_per_batch=frames_per_batch, total_frames=total_frames)


def make_replay_buffer(
    capacity: int,
    batch_size: int,
    *,
    prioritized: bool = False,
    alpha: float = 0.7,
    beta: float = 0.5,
) -> Any:
    """rlpace's replay buffer over ``capacity`` transitions: uniform sampling, or
    prioritized (``PrioritizedSampler(capacity, alpha, beta)``) with ``prioritized``.

    The storage is process-local (``shared=False``): the trainer samples in the process
    that collects, so nothing needs to live in ``/dev/shm``.

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> rb = make_replay_buffer(100, batch_size=4)
        >>> len(rb.extend(TensorDict({"x": torch.arange(10)}, [10])))
        10
        >>> rb.sample()["x"].shape
        torch.Size([4])
        >>> sorted(make_replay_buffer(100, 4, prioritized=True).extend(
        ...     TensorDict({"x": torch.arange(10)}, [10])).tolist())[:3]
        [0, 1, 2]
    """
    from rlpace.data import PrioritizedSampler, RandomSampler, ReplayBuffer, TensorStorage

    sampler = PrioritizedSampler(capacity, alpha=alpha, beta=beta) if prioritized else None
    return ReplayBuffer(
        storage=TensorStorage(capacity, shared=False),
        sampler=sampler or RandomSampler(),
        batch_size=batch_size,
    )
