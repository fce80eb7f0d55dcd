"""The loop's setup/shutdown hooks, the optimisation-step count, PPO's entropy log and
SAC's prioritized replay (the features torchrl's trainer users look for)."""

from __future__ import annotations

import math

import pytest
import torch

from rlpace.data import PrioritizedSampler, RandomSampler
from rlpace.trainers import (
    ConfigError,
    PPOConfig,
    PPOTrainer,
    SACConfig,
    SACTrainer,
    load_config,
    read_log,
)


def test_shutdown_hooks_run_when_the_loop_fails(tiny_ppo, tmp_path):
    trainer = PPOTrainer(tiny_ppo(), run_dir=tmp_path / "r")
    seen = []
    trainer.register_hook("setup", lambda t, run_dir: seen.append(("setup", run_dir)))
    trainer.register_hook("shutdown", lambda t, scalars: seen.append(("shutdown", t.frames)))

    def fail(t, batch):
        raise RuntimeError("a user hook failed")

    trainer.register_hook("post_batch", fail)
    with pytest.raises(RuntimeError, match="a user hook failed"):
        trainer.train()
    assert seen == [("setup", tmp_path / "r"), ("shutdown", 256)]
    assert trainer._collector is None  # the collector was shut down before the hook


def test_optimisation_steps_are_counted_logged_and_checkpointed(tiny_ppo, tmp_path):
    cfg = tiny_ppo()
    trainer = PPOTrainer(cfg, run_dir=tmp_path / "r")
    trainer.train()
    per_batch = cfg.epochs * (cfg.trainer.frames_per_batch // cfg.mini_batch_size)
    logged = [r["charts/optim_steps"] for r in read_log(tmp_path / "r")]
    assert logged == [per_batch * b for b in (1, 2, 3, 4)]
    assert trainer.optim_steps == 4 * per_batch
    resumed = PPOTrainer(cfg, run_dir=tmp_path / "again")
    resumed.resume(tmp_path / "r" / "checkpoints" / "batch_000002.pt")
    assert resumed.optim_steps == 2 * per_batch


def test_sac_counts_only_the_steps_after_init_random_frames(tiny_sac, tmp_path):
    cfg = tiny_sac(init_random_frames=128)  # 4 batches of 64 frames; learning from the 2nd
    trainer = SACTrainer(cfg, run_dir=tmp_path / "r")
    trainer.train()
    assert [r["charts/optim_steps"] for r in read_log(tmp_path / "r")] == [
        0.0,
        *(float(cfg.updates_per_batch * k) for k in (1, 2, 3)),
    ]


def test_ppo_entropy_default_is_a_bonus_and_the_log_is_the_policys_entropy(tiny_ppo, tmp_path):
    assert PPOConfig().entropy_coeff == 0.01
    assert load_config(["algo=ppo"]).entropy_coeff == 0.01  # the preset agrees
    for coeff in (0.0, 0.01):
        trainer = PPOTrainer(tiny_ppo(entropy_coeff=coeff), run_dir=tmp_path / f"c{coeff}")
        scalars = trainer.train()
        # CartPole's two actions: a near-uniform policy has entropy close to ln 2
        assert 0.3 < scalars["losses/entropy"] <= math.log(2) + 1e-6
        assert scalars["losses/entropy_loss"] == pytest.approx(
            -coeff * scalars["losses/entropy"], rel=1e-5, abs=1e-9
        )


def test_sac_prioritized_replay_updates_priorities_from_the_td_error(
    tiny_sac, tmp_path, monkeypatch
):
    cfg = tiny_sac(prioritized=True, priority_alpha=0.6, priority_beta=0.4)
    trainer = SACTrainer(cfg, run_dir=tmp_path / "r")
    sampler = trainer.buffer.sampler
    assert isinstance(sampler, PrioritizedSampler) and (sampler.alpha, sampler.beta) == (0.6, 0.4)
    samples, updates = [], []
    trainer.register_hook("pre_optim", lambda t, sample: samples.append(sample))
    real_update = trainer.buffer.update_priority

    def spy(index, priority):
        updates.append((index.clone(), priority.clone()))
        real_update(index, priority)

    monkeypatch.setattr(trainer.buffer, "update_priority", spy)
    trainer.train()
    assert len(updates) == len(samples) == trainer.optim_steps == 4 * cfg.updates_per_batch
    for sample, (index, priority) in zip(samples, updates):
        assert torch.equal(index, sample["index"])
        assert torch.equal(priority, sample["td_error"])  # |Q - target| from SACLoss
        assert bool((priority >= 0).all()) and priority.unique().numel() > 1
        assert bool(((sample["weight"] > 0) & (sample["weight"] <= 1)).all())
    # the loss reads the importance weights the sampler writes
    assert trainer.loss_module.tensor_keys.priority_weight == "weight"
    # and the priorities steer sampling: of the last step's transitions, the one with the
    # largest TD error is drawn far more often than the one with the smallest
    last_index, last_priority = updates[-1]
    top, bottom = int(last_index[last_priority.argmax()]), int(last_index[last_priority.argmin()])
    assert (last_priority.max() / last_priority.min()) ** cfg.priority_alpha > 4
    draws = trainer.buffer.sample(20_000)["index"]
    assert int((draws == top).sum()) > 2 * int((draws == bottom).sum())


def test_uniform_sac_is_unchanged_and_prioritized_settings_are_checked(tiny_sac, tmp_path):
    trainer = SACTrainer(tiny_sac(), run_dir=tmp_path / "r")
    assert isinstance(trainer.buffer.sampler, RandomSampler)
    assert load_config(["algo=sac", "prioritized=true"]).prioritized is True
    with pytest.raises(ConfigError, match="priority_beta: expected a float in"):
        SACConfig(priority_beta=2.0)
    with pytest.raises(ConfigError, match="priority_alpha: expected a float >= 0"):
        SACConfig(priority_alpha=-1.0)
