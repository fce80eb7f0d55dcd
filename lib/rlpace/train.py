"""``python -m rlpace.train``: train PPO or SAC from the YAML presets with Hydra overrides.

Usage:
    python -m rlpace.train algo=ppo env=CartPole-v1 trainer.total_frames=200000 seed=1
    python -m rlpace.train algo=sac --resume runs/sac-.../checkpoints/final.pt
    python -m rlpace.train --learn reports/learning.md   # both presets to their targets

Every config error (unknown key, wrong type, missing or impossible value, an env the
algorithm cannot handle) is reported before any training, with exit status 2. Ctrl-C
writes ``checkpoints/final.pt`` and exits with 130.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

__all__ = ["LEARN_RUNS", "main", "run", "write_learning_report"]

LEARN_RUNS: tuple[tuple[str, ...], ...] = (
    ("algo=ppo", "env=CartPole-v1"),
    ("algo=sac", "env=Pendulum-v1"),
)
"""The ``--learn`` runs: each preset runs until its ``trainer.target_return``."""


def build_parser() -> argparse.ArgumentParser:
    """The command line: Hydra overrides plus ``--resume`` and ``--learn``.

    Example:
        >>> ns = build_parser().parse_args(["algo=sac", "seed=2", "--resume", "c.pt"])
        >>> ns.overrides, ns.resume
        (['algo=sac', 'seed=2'], 'c.pt')
    """
    parser = argparse.ArgumentParser(
        prog="python -m rlpace.train",
        description="Train PPO or SAC with rlpace (Hydra overrides, e.g. algo=ppo seed=1).",
    )
    parser.add_argument(
        "overrides",
        nargs="*",
        help="Hydra overrides such as lr=1e-3 trainer.total_frames=50000 seed=2 "
        "(a misspelt key fails with a 'did you mean' hint)",
    )
    parser.add_argument("--resume", default=None, help="continue from this checkpoint")
    parser.add_argument(
        "--learn",
        default=None,
        metavar="REPORT_MD",
        help="run PPO/CartPole and SAC/Pendulum to their targets; write the table here",
    )
    return parser


def run(overrides: Sequence[str], *, resume: str | None = None) -> dict[str, float]:
    """Compose the config, build the trainer, train; returns a summary.

    Args:
        overrides: Hydra overrides (``algo=sac``, ``trainer.total_frames=500``, ...).
        resume: a checkpoint to continue from.

    Returns:
        ``frames``, ``wall_s``, ``return`` (mean of the last 10 episodes) and, when the
        target was reached, ``target_frames`` and ``target_wall_s``.

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as d:
        ...     out = run(["algo=ppo", "trainer.total_frames=256", "trainer.frames_per_batch=128",
        ...                "env.num_envs=1", "mini_batch_size=64", "epochs=1",
        ...                f"trainer.run_dir={d}", "trainer.plot=false"])
        >>> out["frames"]
        256.0
    """
    from rlpace.trainers import PPOConfig, PPOTrainer, SACTrainer, load_config

    cfg = load_config(list(overrides))
    trainer_cls = PPOTrainer if isinstance(cfg, PPOConfig) else SACTrainer
    trainer = trainer_cls.from_config(cfg)
    if resume is not None:
        trainer.resume(resume)
    t0 = time.perf_counter()
    trainer.train()
    summary = {
        "frames": float(trainer.frames),
        "wall_s": time.perf_counter() - t0,
        "return": trainer.recent_return(),
    }
    if trainer.reached_target_at is not None:
        summary["target_frames"] = float(trainer.reached_target_at[0])
        summary["target_wall_s"] = trainer.reached_target_at[1]
    summary["run_dir"] = str(trainer.run_dir)  # type: ignore[assignment]
    return summary


def write_learning_report(rows: list[dict[str, object]], path: str | Path) -> Path:
    """Write the ``make learn`` table: one row per run, target reached or not.

    Example:
        >>> import tempfile, os
        >>> row = {"run": "ppo CartPole-v1", "target": 475.0, "return": 480.2,
        ...        "target_frames": 180000.0, "target_wall_s": 300.0, "frames": 180000.0,
        ...        "wall_s": 301.0, "run_dir": "runs/x"}
        >>> with tempfile.TemporaryDirectory() as d:
        ...     text = write_learning_report([row], os.path.join(d, "l.md")).read_text()
        >>> "| ppo CartPole-v1 | 475 | yes | 180,000 | 300 s |" in text
        True
    """
    import platform

    import torch

    lines = [
        "# Learning proof (`make learn`)",
        "",
        f"Machine: {platform.machine()}, {torch.get_num_threads()} torch threads by default, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; shared by other jobs, so wall "
        "times are pessimistic.",
        "Return = mean of the last 10 training episodes (stochastic policy).",
        "",
        "| run | target | reached | frames to target | wall time to target "
        "| final return | frames run | run dir |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        reached = "target_frames" in r
        frames_to = f"{r['target_frames']:,.0f}" if reached else "—"
        wall_to = f"{r['target_wall_s']:.0f} s" if reached else "—"
        lines.append(
            f"| {r['run']} | {r['target']:g} | {'yes' if reached else 'no'} | {frames_to} "
            f"| {wall_to} | {r['return']:.1f} | {r['frames']:,.0f} | `{r['run_dir']}` |"
        )
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (0 ok, 2 bad config, 130 interrupted).

    Example:
        >>> import contextlib, io
        >>> err = io.StringIO()
        >>> with contextlib.redirect_stderr(err):
        ...     main(["algo=ppo", "trainer.total_frame=10"])
        2
        >>> err.getvalue()
        "error: trainer.total_frame: expected a key of the config, got 'trainer.total_frame=10'; did you mean trainer.total_frames?\\n"
    """
    from rlpace.trainers import CheckpointError, ConfigError, load_config, timeit

    args = build_parser().parse_args(argv)
    try:
        if args.learn is not None:
            rows = []
            for preset in LEARN_RUNS:
                overrides = [*preset, *args.overrides]
                cfg = load_config(overrides)  # fail on a bad override before any run
                out = run(overrides)
                rows.append(
                    {
                        "run": f"{cfg.algo} {cfg.env.name}",
                        "target": cfg.trainer.target_return,
                        **out,
                    }
                )
                write_learning_report(rows, args.learn)
                print(f"{cfg.algo} {cfg.env.name}: {out}", flush=True)
            return 0
        out = run(args.overrides, resume=args.resume)
    except (ConfigError, CheckpointError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: wrote checkpoints/final.pt in the run directory", file=sys.stderr)
        return 130
    print(out)
    print(timeit.table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
