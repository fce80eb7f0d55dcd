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
    SACConfig,
    TrainerConfig,
    config_from_dict,
    config_to_dict,
    load_config,
    register_configs,
)
from rlpace.trainers._logging import RunLogger, read_log
from rlpace.trainers._plots import plot_learning_curve
from rlpace.trainers._ppo import PPOTrainer
from rlpace.trainers._sac import SACTrainer
from rlpace.trainers._timing import TimingStats, timeit
from rlpace.trainers._trainer import HOOK_POINTS, Trainer

__all__ = [
    "HOOK_POINTS",
    "CheckpointError",
    "ConfigError",
    "EnvConfig",
    "PPOConfig",
    "PPOTrainer",
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
