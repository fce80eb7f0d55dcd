"""Checkpoints: exact resume, Ctrl-C, refusal of foreign, newer and incompatible files."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from rlpace.trainers import (
    CheckpointError,
    PPOTrainer,
    SACTrainer,
    load_checkpoint,
    read_log,
)


def _losses(rows):
    return [{k: v for k, v in r.items() if k.startswith("losses/") or k == "frames"} for r in rows]


@pytest.mark.parametrize("algo", ["ppo", "sac", "sac-prioritized"])
def test_resume_reproduces_the_uninterrupted_runs_next_losses_exactly(
    algo, tiny_ppo, tiny_sac, tmp_path
):
    make, trainer_cls = (tiny_ppo, PPOTrainer) if algo == "ppo" else (tiny_sac, SACTrainer)
    if algo == "sac-prioritized":  # the priorities travel in the checkpoint too
        make = lambda: tiny_sac(prioritized=True)  # noqa: E731
    whole = trainer_cls(make(), run_dir=tmp_path / "whole")
    whole.train()
    whole_rows = read_log(tmp_path / "whole")
    assert len(whole_rows) == 4

    resumed = trainer_cls(make(), run_dir=tmp_path / "resumed")
    resumed.resume(tmp_path / "whole" / "checkpoints" / "batch_000002.pt")
    fpb = resumed.config.trainer.frames_per_batch
    assert (resumed.frames, resumed.batches) == (2 * fpb, 2)
    resumed.train()
    assert resumed.frames == whole.frames
    resumed_rows = read_log(tmp_path / "resumed")
    assert _losses(resumed_rows) == _losses(whole_rows[2:])
    assert resumed.episodes == whole.episodes
    for a, b in zip(resumed.loss_module.parameters(), whole.loss_module.parameters(), strict=True):
        assert torch.equal(a, b)


def test_ctrl_c_writes_a_final_checkpoint_that_resumes(tiny_ppo, tmp_path):
    cfg = tiny_ppo(trainer={"checkpoint_every_batches": 0})
    trainer = PPOTrainer(cfg, run_dir=tmp_path / "run")

    def interrupt(t, batch):
        if t.batches == 2:
            raise KeyboardInterrupt

    trainer.register_hook("post_batch", interrupt)
    with pytest.raises(KeyboardInterrupt):
        trainer.train()
    final = tmp_path / "run" / "checkpoints" / "final.pt"
    state = load_checkpoint(final)
    assert state["frames"] == 2 * cfg.trainer.frames_per_batch
    again = PPOTrainer(cfg, run_dir=tmp_path / "run")
    again.resume(final)
    again.train()
    assert again.frames == cfg.trainer.total_frames
    # the log continued rather than restarted; batch 2 was interrupted before its row
    assert [r["frames"] for r in read_log(tmp_path / "run")] == [256.0, 768.0, 1024.0]


def test_resuming_across_incompatible_configs_names_the_keys(tiny_sac, tmp_path):
    trainer = SACTrainer(tiny_sac(), run_dir=tmp_path / "a")
    path = trainer.save(tmp_path / "a.pt")
    wider = SACTrainer(tiny_sac(hidden_sizes=(64, 64)), run_dir=tmp_path / "b")
    with pytest.raises(CheckpointError, match=r"hidden_sizes \(checkpoint \[32, 32\], this run"):
        wider.resume(path)


def test_resuming_a_checkpoint_of_another_algorithm_fails_before_loading(
    tiny_sac, tiny_ppo, tmp_path
):
    path = SACTrainer(tiny_sac(), run_dir=tmp_path / "a").save(tmp_path / "sac.pt")
    ppo = PPOTrainer(tiny_ppo(), run_dir=tmp_path / "b")
    before = [p.clone() for p in ppo.loss_module.parameters()]
    with pytest.raises(CheckpointError, match="algo \\(checkpoint 'sac', this run 'ppo'\\)"):
        ppo.resume(path)
    assert all(torch.equal(a, b) for a, b in zip(before, ppo.loss_module.parameters()))
    assert ppo.frames == 0


def test_foreign_and_newer_files_are_refused(tiny_ppo, tmp_path):
    torch.save({"model": {}}, tmp_path / "foreign.pt")
    with pytest.raises(CheckpointError, match="expected an rlpace trainer checkpoint"):
        load_checkpoint(tmp_path / "foreign.pt")
    trainer = PPOTrainer(tiny_ppo(), run_dir=tmp_path / "r")
    state = trainer.state_dict()
    torch.save({"format": "rlpace.trainers.checkpoint", "version": 99, **state}, tmp_path / "n.pt")
    with pytest.raises(CheckpointError, match="upgrade rlpace"):
        trainer.resume(tmp_path / "n.pt")
    with pytest.raises(FileNotFoundError, match="no such checkpoint"):
        trainer.resume(tmp_path / "missing.pt")


def test_checkpoint_carries_config_counters_and_rng(tiny_ppo, tmp_path):
    cfg = tiny_ppo()
    trainer = PPOTrainer(cfg, run_dir=tmp_path / "r")
    trainer.train()
    state = load_checkpoint(tmp_path / "r" / "checkpoints" / "final.pt")
    assert state["frames"] == cfg.trainer.total_frames
    assert state["config"]["seed"] == cfg.seed
    assert set(state["rng"]) == {"torch", "numpy", "python"}
    assert dataclasses.asdict(cfg)["hidden_sizes"] == tuple(state["config"]["hidden_sizes"])
