"""Trainers: the training loop, PPO and SAC, structured configs, timing and checkpoints.

Example:
    >>> from rlpace.trainers import PPOConfig, TrainerConfig
    >>> cfg = PPOConfig(trainer=TrainerConfig(total_frames=4096, frames_per_batch=512))
    >>> cfg.trainer.num_batches, cfg.env.name
    (8, 'CartPole-v1')
"""

from rlpace.trainers._checkpoint import CheckpointError, load_checkpoint
from rlpace.trainers._config import (
    ConfigError,
    EnvConfig,
    PPOConfig,
    RunConfig,
    SACConfig,
    TrainerConfig,
    config_from_dict,
    config_to_dict,
    load_config,
    register_configs,
)
from rlpace.trainers._logging import RunLogger, read_log
from rlpace.trainers._plots import plot_learning_curve
from rlpace.trainers._timing import TimingStats, timeit

# The trainers import torchrl, whose import sets multiprocessing's start method; they load
# on first use so that ``import rlpace.trainers`` leaves the process as it found it.
_LAZY = {
    "HOOK_POINTS": "rlpace.trainers._trainer",
    "Trainer": "rlpace.trainers._trainer",
    "PPOTrainer": "rlpace.trainers._ppo",
    "SACTrainer": "rlpace.trainers._sac",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'rlpace.trainers' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "HOOK_POINTS",
    "CheckpointError",
    "ConfigError",
    "EnvConfig",
    "PPOConfig",
    "PPOTrainer",
    "RunConfig",
    "RunLogger",
    "SACConfig",
    "SACTrainer",
    "TimingStats",
    "Trainer",
    "TrainerConfig",
    "config_from_dict",
    "config_to_dict",
    "load_checkpoint",
    "load_config",
    "plot_learning_curve",
    "read_log",
    "register_configs",
    "timeit",
]
