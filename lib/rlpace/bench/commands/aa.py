"""``rlpace-bench aa``: run the suite against itself and calibrate the comparator.

Example:
    >>> from rlpace.bench.cli import build_parser
    >>> args = build_parser().parse_args(["aa", "--runs", "8", "--inject", "test_rb=0.1"])
    >>> args.runs, args.repeats, args.inject
    (8, 4, 'test_rb=0.1')
"""

from __future__ import annotations

import argparse
from pathlib import Path

NAME = "aa"
HELP = "A/A calibration: false-alarm rate, per-benchmark noise and detectable change."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the ``aa`` options."""
    parser.add_argument("--runs", type=int, default=10, help="A/A comparisons (default 10)")
    parser.add_argument("--repeats", type=int, default=4, help="runs per side (default 4)")
    parser.add_argument(
        "--pool", type=int, default=None, help="suite runs to draw from (default 2*repeats*runs)"
    )
    parser.add_argument(
        "--slow-pool",
        type=int,
        default=None,
        help="slowed suite runs with --inject (default repeats*runs; fewer are reused)",
    )
    parser.add_argument("--set", dest="set_name", choices=("cpu", "gpu"), default="cpu")
    parser.add_argument("-k", dest="keyword", default=None, help="pytest -k expression")
    parser.add_argument("--threshold", type=float, default=5.0, help="effect threshold in %%")
    parser.add_argument("--alpha", type=float, default=0.05, help="false discovery rate")
    parser.add_argument(
        "--family-alpha",
        type=float,
        default=0.05,
        help="target chance that an A/A PR run flags anything; sets the noise gates "
        "(default 0.05; 0.01 for the stricter goal, at wider gates)",
    )
    parser.add_argument(
        "--inject",
        default=None,
        help="slowdown for detection power, RLPACE_BENCH_SLOWDOWN syntax, e.g. 'test_=0.1'",
    )
    parser.add_argument(
        "--confirm",
        type=int,
        default=2,
        help="runs per side of the confirmation of a flag, as in pr (default 2; 0: none)",
    )
    parser.add_argument("--out-dir", default="reports/aa", help="where <set>.json/.md go")
    parser.add_argument("--max-time", type=float, default=None, help="seconds of rounds per case")
    parser.add_argument("--seed", type=int, default=0, help="seed of the pool assignment")
    parser.add_argument(
        "--reuse-runs",
        action="store_true",
        help="recompute the figures from the previous run's result files (no new runs)",
    )


def main(args: argparse.Namespace) -> int:
    """Run the calibration and print its summary; 0 on success."""
    from dataclasses import replace

    from rich.console import Console
    from rich.progress import Progress

    from rlpace.bench.calibration import CalibrationConfig, run_calibration
    from rlpace.bench.render_calibration import format_calibration
    from rlpace.bench.runner import RunSettings

    settings = RunSettings()
    if args.max_time is not None:
        settings = replace(settings, max_time=args.max_time)
    config = CalibrationConfig(
        runs=args.runs,
        repeats=args.repeats,
        pool=args.pool,
        slow_pool=args.slow_pool,
        set_name=args.set_name,
        keyword=args.keyword,
        threshold=args.threshold,
        alpha=args.alpha,
        family_alpha=args.family_alpha,
        inject=args.inject,
        out_dir=Path(args.out_dir),
        settings=settings,
        seed=args.seed,
        reuse_runs=args.reuse_runs,
        confirm=args.confirm,
    )
    with Progress(console=Console(stderr=True)) as progress:
        task = progress.add_task("A/A suite runs", total=None)

        def advance(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)

        calibration = run_calibration(config, on_run=advance)
    print(format_calibration(calibration))
    return 0
