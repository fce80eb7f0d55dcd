"""Options every collector shares: their checks, the batch post-processing, the state.

``max_frames_per_traj``, ``init_random_frames``, ``postproc`` and ``split_trajs``
mean the same in every collector (torchrl's meanings); ``len(collector)`` and the
``state_dict`` layout too. Plain functions, bound or called by each collector.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from tensordict import TensorDictBase

#: Version of the dict ``state_dict()`` returns; ``load_state_dict`` checks it.
STATE_FORMAT = 1


def check_max_frames_per_traj(value: int | None, who: str) -> int | None:
    """The step limit per trajectory, ``None`` for none (``None`` or ``<= 0``, as torchrl).

    Example:
        >>> check_max_frames_per_traj(-1, "Collector") is None
        True
        >>> check_max_frames_per_traj(5, "Collector")
        5
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(
            f"{who}: max_frames_per_traj must be an int (steps before a trajectory is "
            f"truncated) or None; got {type(value).__name__}"
        )
    return value if value > 0 else None


def random_batches(init_random_frames: int | None, frames_per_batch: int, who: str) -> int:
    """Batches collected with random actions: ``init_random_frames`` rounded up to batches.

    Example:
        >>> random_batches(None, 8, "Collector"), random_batches(20, 8, "Collector")
        (0, 3)
    """
    if init_random_frames in (None, -1, 0):
        return 0
    if isinstance(init_random_frames, bool) or not isinstance(init_random_frames, int):
        raise TypeError(
            f"{who}: init_random_frames must be an int number of frames or None; "
            f"got {type(init_random_frames).__name__}"
        )
    if init_random_frames < 0:
        raise ValueError(
            f"{who}: init_random_frames must be >= 0 (or -1/None for none); got {init_random_frames}"
        )
    return -(-init_random_frames // frames_per_batch)


def check_postproc(postproc: Any, who: str) -> None:
    if postproc is not None and not callable(postproc):
        raise TypeError(
            f"{who}: postproc must be a callable TensorDict -> TensorDict (e.g. a torchrl "
            f"Transform or MultiStep); got {type(postproc).__name__}"
        )


def finish_batch(
    batch: TensorDictBase,
    postproc: Callable[[TensorDictBase], TensorDictBase] | None,
    split_trajs: bool,
) -> TensorDictBase:
    """``split_trajs`` (padded ``[trajectories, steps]`` with a mask), then ``postproc``.

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> batch = TensorDict({("collector", "traj_ids"): torch.tensor([0, 0, 1]),
        ...                     ("next", "done"): torch.tensor([[False], [True], [False]])},
        ...                    batch_size=[3])
        >>> out = finish_batch(batch, None, split_trajs=True)
        >>> out["collector", "mask"].tolist()
        [[True, True], [True, False]]
    """
    if split_trajs:
        from torchrl.collectors.utils import split_trajectories

        batch = split_trajectories(batch)
    if postproc is not None:
        batch = postproc(batch)
    return batch


def batches_in(collector: Any) -> int:
    """``len(collector)``: the batches a finite collector yields in all (torchrl's meaning).

    Example:
        >>> class Finite:
        ...     total_frames, frames_per_batch = 20, 8
        >>> batches_in(Finite())
        3
    """
    if collector.total_frames == -1:
        raise TypeError(
            f"{type(collector).__name__} was built with total_frames=-1 (endless) and has "
            "no length; pass total_frames= to iterate a known number of batches"
        )
    return -(-collector.total_frames // collector.frames_per_batch)


def policy_state(policy: Any) -> dict[str, Any] | None:
    """A copy of the policy's ``state_dict`` (``None`` for a plain callable)."""
    if not isinstance(policy, torch.nn.Module):
        return None
    return {k: v.detach().clone() for k, v in policy.state_dict().items()}


def collector_state(collector: Any, **extra: Any) -> dict[str, Any]:
    """The common part of every collector's ``state_dict``."""
    return {
        "format": STATE_FORMAT,
        "collector": type(collector).__name__,
        "frames": collector.frames,
        "policy_version": collector.policy_version,
        "policy": policy_state(collector.policy),
        **extra,
    }


def check_state(state: Any, who: str) -> dict[str, Any]:
    """``state`` if it is a collector state this version reads; a clear error otherwise."""
    if not isinstance(state, dict) or "format" not in state or "frames" not in state:
        raise ValueError(
            f"{who}.load_state_dict: expected the dict a collector's state_dict() returned "
            f"(keys 'format', 'frames', 'policy', ...); got "
            f"{type(state).__name__} with keys {sorted(state) if isinstance(state, dict) else '-'}"
        )
    if state["format"] != STATE_FORMAT:
        raise ValueError(
            f"{who}.load_state_dict: state format {state['format']} is not the format "
            f"{STATE_FORMAT} this rlpace reads; save it again with this version"
        )
    return state
