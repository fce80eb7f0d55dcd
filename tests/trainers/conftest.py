"""Tiny configs shared by the trainer tests: seconds, not minutes, per run."""

from __future__ import annotations

import pytest

from rlpace.trainers import EnvConfig, PPOConfig, SACConfig, TrainerConfig


@pytest.fixture
def tiny_ppo(tmp_path):
    """A 4-batch PPO run on CartPole (2 envs) that checkpoints every 2 batches."""

    def make(**overrides):
        trainer = dict(
            total_frames=1024,
            frames_per_batch=256,
            checkpoint_every_batches=2,
            plot=False,
            progress=False,
            run_dir=str(tmp_path / "ppo"),
        )
        trainer.update(overrides.pop("trainer", {}))
        return PPOConfig(
            env=EnvConfig("CartPole-v1", num_envs=2),
            trainer=TrainerConfig(**trainer),
            mini_batch_size=64,
            epochs=2,
            seed=7,
            **overrides,
        )

    return make


@pytest.fixture
def tiny_sac(tmp_path):
    """A 4-batch SAC run on Pendulum with small networks, checkpointing every 2 batches."""

    def make(**overrides):
        trainer = dict(
            total_frames=256,
            frames_per_batch=64,
            checkpoint_every_batches=2,
            plot=False,
            progress=False,
            run_dir=str(tmp_path / "sac"),
        )
        trainer.update(overrides.pop("trainer", {}))
        kwargs = dict(hidden_sizes=(32, 32), batch_size=32, init_random_frames=64, utd_ratio=0.25)
        kwargs.update(overrides)
        return SACConfig(trainer=TrainerConfig(**trainer), seed=5, **kwargs)

    return make
