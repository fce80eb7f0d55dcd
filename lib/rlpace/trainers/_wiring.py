"""Where the trainers get their collector and replay buffer: rlpace's own.

Collection always goes through ``rlpace.collectors.Collector``. ``rlpace.data``'s
``ReplayBuffer`` is built on its own branch; until it is merged here,
:func:`make_replay_buffer` falls back to torchrl's public ``ReplayBuffer`` with the same
call shape, so SAC stays testable. :func:`buffer_backend` says which one is in use
(written to every run's ``config.yaml``).
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
    """``"rlpace"`` when ``rlpace.data.ReplayBuffer`` exists, else ``"torchrl"``.

    Example:
        >>> buffer_backend() in ("rlpace", "torchrl")
        True
    """
    try:
        from rlpace.data import RandomSampler, ReplayBuffer, TensorStorage  # noqa: F401
    except ImportError:
        return "torchrl"
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


def make_replay_buffer(capacity: int, batch_size: int) -> Any:
    """A uniform-sampling replay buffer over ``capacity`` transitions.

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> rb = make_replay_buffer(100, batch_size=4)
        >>> import logging; logging.getLogger("torchrl").setLevel(logging.WARNING)
        >>> len(rb.extend(TensorDict({"x": torch.arange(10)}, [10])))
        10
        >>> rb.sample()["x"].shape
        torch.Size([4])
    """
    if buffer_backend() == "rlpace":
        from rlpace.data import RandomSampler, ReplayBuffer, TensorStorage

        return ReplayBuffer(
            storage=TensorStorage(capacity), sampler=RandomSampler(), batch_size=batch_size
        )
    from torchrl.data import LazyTensorStorage, RandomSampler, ReplayBuffer

    return ReplayBuffer(
        storage=LazyTensorStorage(capacity), sampler=RandomSampler(), batch_size=batch_size
    )
