"""Checkpoint files: a versioned dict of module, optimizer, buffer and RNG states."""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch

__all__ = ["CHECKPOINT_VERSION", "CheckpointError", "load_checkpoint", "save_checkpoint"]

CHECKPOINT_FORMAT = "rlpace.trainers.checkpoint"
CHECKPOINT_VERSION = 1


class CheckpointError(ValueError):
    """A checkpoint that cannot be resumed here: foreign, from a newer version, or incompatible.

    Example:
        >>> raise CheckpointError("run.pt: expected algo 'ppo', got 'sac'; resume with algo=sac")
        Traceback (most recent call last):
        ...
        rlpace.trainers._checkpoint.CheckpointError: run.pt: expected algo 'ppo', got 'sac'; resume with algo=sac
    """


def rng_states() -> dict[str, Any]:
    """Every RNG a CPU run draws from: torch, numpy's global and Python's ``random``.

    Example:
        >>> sorted(rng_states())
        ['numpy', 'python', 'torch']
    """
    return {
        "torch": torch.get_rng_state(),
        "numpy": np.random.get_state(),
        "python": random.getstate(),
    }


def set_rng_states(states: dict[str, Any]) -> None:
    """Restore what :func:`rng_states` captured.

    Example:
        >>> s = rng_states(); a = torch.rand(1); set_rng_states(s)
        >>> bool(torch.rand(1) == a)
        True
    """
    torch.set_rng_state(states["torch"])
    np.random.set_state(states["numpy"])
    random.setstate(states["python"])


def save_checkpoint(path: str | Path, state: dict[str, Any]) -> Path:
    """Write ``state`` (plus format and version tags) atomically to ``path``.

    Example:
        >>> import tempfile, os
        >>> with tempfile.TemporaryDirectory() as d:
        ...     p = save_checkpoint(os.path.join(d, "c.pt"), {"frames": 10})
        ...     load_checkpoint(p)["frames"]
        10
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save({"format": CHECKPOINT_FORMAT, "version": CHECKPOINT_VERSION, **state}, tmp)
    os.replace(tmp, path)
    return path


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Read a checkpoint written by :func:`save_checkpoint`, refusing foreign or newer files.

    Example:
        >>> import tempfile, os
        >>> with tempfile.TemporaryDirectory() as d:
        ...     torch.save({"weights": 1}, os.path.join(d, "x.pt"))
        ...     load_checkpoint(os.path.join(d, "x.pt"))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        rlpace.trainers._checkpoint.CheckpointError: ...x.pt: expected an rlpace trainer checkpoint ...
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(
            f"{path}: no such checkpoint; expected a file written by Trainer.save "
            "(e.g. {run_dir}/checkpoints/final.pt)"
        )
    state = torch.load(path, map_location="cpu", weights_only=False)
    if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(
            f"{path}: expected an rlpace trainer checkpoint (format {CHECKPOINT_FORMAT!r}), "
            f"got {type(state).__name__} without that tag; pass a file written by Trainer.save"
        )
    if state.get("version", 0) > CHECKPOINT_VERSION:
        raise CheckpointError(
            f"{path}: expected checkpoint version <= {CHECKPOINT_VERSION}, got "
            f"{state['version']}; upgrade rlpace to read it"
        )
    return state
