"""Short fixed-seed runs: the return improves (the full targets are `make learn`'s job)."""

from __future__ import annotations

import statistics

from rlpace.trainers import EnvConfig, PPOConfig, PPOTrainer, SACConfig, SACTrainer, TrainerConfig


def _mean(returns):
    return statistics.fmean(returns)


def test_ppo_improves_cartpole_return(tmp_path):
    cfg = PPOConfig(
        env=EnvConfig("CartPole-v1", num_envs=8),
        trainer=TrainerConfig(
            total_frames=16_384, frames_per_batch=1024, plot=False, progress=False
        ),
        mini_batch_size=256,
        seed=1,
    )
    trainer = PPOTrainer(cfg, run_dir=tmp_path)
    trainer.train()
    returns = [r for _, r in trainer.episodes]
    first, last = _mean(returns[:20]), _mean(returns[-10:])
    assert last > 2 * first and last > 60, (first, last)


def test_sac_improves_pendulum_return(tmp_path):
    # 2000 frames, 1800 gradient steps at a high learning rate: ~40% cheaper than 3000
    # frames at lr 1e-3, still +300 to +400 between the first episodes and the last
    # (seeds 1 and 2 measured), against a +200 bar
    cfg = SACConfig(
        trainer=TrainerConfig(total_frames=2000, frames_per_batch=200, plot=False, progress=False),
        hidden_sizes=(64, 64),
        batch_size=64,
        lr=3e-3,
        init_random_frames=200,
        seed=1,
    )
    trainer = SACTrainer(cfg, run_dir=tmp_path)
    trainer.train()
    returns = [r for _, r in trainer.episodes]
    assert len(returns) == 10
    first, last = _mean(returns[:5]), _mean(returns[-3:])
    assert last > first + 200, (first, last)
