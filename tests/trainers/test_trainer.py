"""The loop: hook order and payloads, run directory contents, evaluation, target stop."""

from __future__ import annotations

import pytest
import yaml

from rlpace.trainers import HOOK_POINTS, PPOTrainer, SACTrainer, read_log


def test_hooks_fire_in_loop_order_with_their_payloads(tiny_ppo, tmp_path):
    cfg = tiny_ppo(trainer={"total_frames": 512, "eval_every_batches": 2, "eval_episodes": 1})
    trainer = PPOTrainer(cfg, run_dir=tmp_path / "r")
    calls = []
    for point in HOOK_POINTS:
        trainer.register_hook(point, lambda t, payload, p=point: calls.append((p, payload)))
    trainer.train()
    names = [p for p, _ in calls]
    steps_per_batch = cfg.epochs * (cfg.trainer.frames_per_batch // cfg.mini_batch_size)
    one_batch = ["pre_batch"] + ["pre_optim", "post_loss", "post_optim"] * steps_per_batch
    assert names == [
        "setup",
        *one_batch,
        "post_batch",
        *one_batch,
        "post_batch",
        "post_eval",
        "post_checkpoint",  # batch_000002.pt
        "shutdown",
        "post_checkpoint",  # final.pt
    ]
    payloads = dict(calls)
    assert payloads["setup"] == tmp_path / "r"
    assert payloads["shutdown"]["charts/optim_steps"] == 2 * steps_per_batch
    assert payloads["pre_batch"].numel() == cfg.trainer.frames_per_batch
    assert payloads["pre_optim"].numel() == cfg.mini_batch_size
    assert payloads["post_loss"].get("loss_objective", None) is not None
    assert set(payloads["post_optim"]) >= {"objective", "critic", "approx_kl"}
    assert set(payloads["post_eval"]) == {"eval/return", "eval/steps"}
    assert payloads["post_checkpoint"].name == "final.pt"


def test_unknown_hook_point_and_non_callable_are_refused(tiny_ppo, tmp_path):
    trainer = PPOTrainer(tiny_ppo(), run_dir=tmp_path / "r")
    with pytest.raises(ValueError, match="expected one of setup, pre_batch"):
        trainer.register_hook("after_batch", print)
    with pytest.raises(TypeError, match="expected a callable"):
        trainer.register_hook("post_batch", 3)


def test_run_directory_holds_config_log_checkpoints_and_plot(tiny_ppo, tmp_path):
    cfg = tiny_ppo(trainer={"plot": True, "run_dir": str(tmp_path / "run")})
    trainer = PPOTrainer.from_config(cfg)
    trainer.train()
    run = tmp_path / "run"
    saved = yaml.safe_load((run / "config.yaml").read_text())
    assert saved["rlpace_run_format"] == 1
    assert saved["algo"] == "ppo" and saved["seed"] == cfg.seed
    assert saved["backends"] == {"collector": "rlpace", "buffer": "rlpace"}
    rows = read_log(run)
    assert [r["frames"] for r in rows] == [256.0, 512.0, 768.0, 1024.0]
    assert {"losses/objective", "charts/return", "charts/frames_per_s"} <= set(rows[0])
    assert rows[-1]["time/trainer/collect/mean_s"] > 0
    assert (run / "learning_curve.png").stat().st_size > 1000
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == [
        "batch_000002.pt",
        "batch_000004.pt",
        "final.pt",
    ]


def test_target_return_stops_the_run_early(tiny_ppo, tmp_path):
    trainer = PPOTrainer(tiny_ppo(trainer={"target_return": 1.0}), run_dir=tmp_path / "r")
    trainer.train()
    assert trainer.reached_target_at is not None
    assert trainer.frames < trainer.config.trainer.total_frames
    assert trainer.reached_target_at[0] == trainer.frames


def test_sac_refuses_a_discrete_env_before_training(tiny_sac, tmp_path):
    from rlpace.trainers import EnvConfig

    cfg = tiny_sac(env=EnvConfig("CartPole-v1"))
    with pytest.raises(ValueError, match="expected an env with continuous"):
        SACTrainer(cfg, run_dir=tmp_path / "r")
    assert not (tmp_path / "r").exists()


def test_wrong_config_type_is_refused(tiny_sac, tmp_path):
    with pytest.raises(TypeError, match="PPOTrainer expects a PPOConfig, got SACConfig"):
        PPOTrainer(tiny_sac(), run_dir=tmp_path)


def test_progress_bar_runs_on_a_terminal_and_stays_quiet_otherwise(
    tiny_ppo, tmp_path, monkeypatch, capsys
):
    import sys

    cfg = tiny_ppo(trainer={"progress": True, "total_frames": 512})
    PPOTrainer(cfg, run_dir=tmp_path / "quiet").train()
    assert "frames" not in capsys.readouterr().out
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    trainer = PPOTrainer(cfg, run_dir=tmp_path / "tty")
    trainer.train()
    assert trainer.frames == 512
    assert "512/512 frames" in capsys.readouterr().out
