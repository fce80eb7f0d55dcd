"""`python -m rlpace.train`: the real entry point with tiny budgets."""

from __future__ import annotations

import subprocess
import sys

from rlpace.train import main
from rlpace.trainers import load_checkpoint, read_log

TINY_PPO = [
    "algo=ppo",
    "env=CartPole-v1",
    "env.num_envs=2",
    "trainer.total_frames=512",
    "trainer.frames_per_batch=256",
    "mini_batch_size=128",
    "epochs=1",
    "trainer.progress=false",
    "seed=1",
]


def test_a_tiny_run_writes_its_run_directory(tmp_path, capsys):
    run = tmp_path / "run"
    assert main([*TINY_PPO, f"trainer.run_dir={run}"]) == 0
    assert "trainer/collect" in capsys.readouterr().out  # the timing table
    assert [r["frames"] for r in read_log(run)] == [256.0, 512.0]
    assert (run / "config.yaml").exists() and (run / "learning_curve.png").exists()
    assert load_checkpoint(run / "checkpoints" / "final.pt")["frames"] == 512


def test_resume_flag_continues_from_the_checkpoint(tmp_path):
    first = tmp_path / "first"
    assert main([*TINY_PPO, f"trainer.run_dir={first}"]) == 0
    second = tmp_path / "second"
    args = [*TINY_PPO[:3], "trainer.total_frames=1024", *TINY_PPO[4:]]
    ckpt = first / "checkpoints" / "final.pt"
    assert main([*args, f"trainer.run_dir={second}", "--resume", str(ckpt)]) == 0
    assert [r["frames"] for r in read_log(second)] == [768.0, 1024.0]


def test_config_errors_exit_2_before_any_work(tmp_path, capsys):
    run = tmp_path / "never"
    assert main(["algo=ppo", "trainer.total_framez=5", f"trainer.run_dir={run}"]) == 2
    assert "trainer.total_framez: expected a key" in capsys.readouterr().err
    assert main(["algo=sac", "env=CartPole-v1", f"trainer.run_dir={run}"]) == 2
    assert "expected an env with continuous" in capsys.readouterr().err
    assert main(["algo=ppo", "lr=-1", f"trainer.run_dir={run}"]) == 2
    assert "lr: expected a positive" in capsys.readouterr().err
    assert not run.exists()


def test_module_entry_point_reports_bad_keys():
    out = subprocess.run(
        [sys.executable, "-m", "rlpace.train", "algo=ppo", "trainer.nope=1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2
    assert "trainer.nope: expected a key of the config" in out.stderr


def test_misspelt_override_suggests_the_key_in_one_line_and_exits_2(tmp_path, capsys):
    run = tmp_path / "never"
    assert main(["algo=ppo", "trainer.lr=1e-3", f"trainer.run_dir={run}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.endswith("did you mean lr?\n")
    assert main(["algo=sac", "prioritised=true", f"trainer.run_dir={run}"]) == 2
    assert capsys.readouterr().err.endswith("did you mean prioritized?\n")
    assert main(["algo=ppo", "entropy_coef=0.1", f"trainer.run_dir={run}"]) == 2
    assert capsys.readouterr().err.endswith("did you mean entropy_coeff?\n")
    assert not run.exists()


def test_help_shows_overrides_that_exist(capsys):
    from rlpace.train import build_parser
    from rlpace.trainers import load_config

    text = build_parser().format_help()
    assert "trainer.lr" not in text
    examples = [w.strip("().,") for w in text.split() if "=" in w and not w.startswith("-")]
    assert examples, text
    load_config(["algo=ppo", *examples])  # every override the help shows is a real key
