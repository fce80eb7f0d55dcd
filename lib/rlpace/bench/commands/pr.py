"""``rlpace-bench pr``: the working tree against a base revision, reports in ``--out-dir``.

Example:
    >>> from rlpace.bench.cli import build_parser
    >>> args = build_parser().parse_args(["pr", "--base", "main", "--sets", "cpu,gpu", "--quick"])
    >>> args.base, args.sets, args.quick, args.repeats, args.confirm
    ('main', 'cpu,gpu', True, 2, 2)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from rlpace.bench.errors import BenchInputError
from rlpace.bench.runner import add_timing_arguments
from rlpace.bench.thresholds import PAIRED_THRESHOLD

if TYPE_CHECKING:  # pragma: no cover
    from rlpace.bench.pipeline import PipelineConfig

NAME = "pr"
HELP = "Benchmark the working tree against a base revision (ABBA, fresh processes) and report."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the ``pr`` options."""
    parser.add_argument("--base", default="HEAD", help="base revision (default HEAD)")
    parser.add_argument("--sets", default="cpu", help="comma-separated sets: cpu, gpu")
    parser.add_argument(
        "--repeats",
        type=int,
        default=2,
        help="runs per side, ABBA (default 2: even, so balanced; the full CPU set then fits ~15 min on 2 cores)",
    )
    parser.add_argument(
        "--confirm",
        type=int,
        default=2,
        help="runs per side re-running what the first comparison flagged; a flag stands "
        "only if they flag it too (default 2; 0: no confirmation)",
    )
    parser.add_argument(
        "--max-pairs",
        type=int,
        default=10,
        help="most duets a timed case gets: one whose A/A pair spread needs more "
        "than 2 x repeats pairs to detect 5%% (else 10%%) gets as many as it needs up "
        "to this many (default 10; 0: none; the torchrl twins get the first pair only)",
    )
    parser.add_argument(
        "--time-budget",
        type=float,
        default=None,
        metavar="MIN",
        help="minutes the whole run may take before the extra duets of --max-pairs stop "
        "(each starts only while it is expected to end in time; counting, the first duets "
        "and the confirmation always run; the comment says what was cut). Default: none; "
        "`make bench` passes 13",
    )
    parser.add_argument("--out-dir", default="reports/pr", help="where reports go")
    parser.add_argument(
        "--counts",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="count instructions per call of the CPU set's single-process cases under "
        "Callgrind, base and head side by side; their counts decide and they are timed "
        "once a side, pooled over two duets (default on; --no-counts: timing alone, every "
        "case every repeat; "
        "without Valgrind the report says so and timing judges alone)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="2 repeats, shorter timing, no torchrl twins"
    )
    parser.add_argument("-k", dest="keyword", default=None, help="pytest -k expression")
    parser.add_argument("--threshold", type=float, default=5.0, help="effect threshold in %%")
    parser.add_argument(
        "--paired-threshold",
        type=float,
        default=PAIRED_THRESHOLD,
        help="effect threshold in %% of the timed cases judged pair by pair (their "
        f"duets; default {PAIRED_THRESHOLD:g})",
    )
    parser.add_argument("--alpha", type=float, default=0.05, help="false discovery rate")
    parser.add_argument(
        "--noise",
        default=None,
        help="calibration file from `rlpace-bench aa` (default: reports/calibration/<set>.json "
        "when it exists)",
    )
    parser.add_argument(
        "--duets",
        default=None,
        help="duet calibration from `rlpace-bench aa --duets N`: the pair spreads the "
        "timed cases' paired tests borrow (default: reports/calibration/<set>-duets.json "
        "when it exists)",
    )
    parser.add_argument(
        "--base-env",
        choices=("auto", "overlay", "full", "current"),
        default="auto",
        help="how the base gets its Python environment (default auto)",
    )
    add_timing_arguments(parser)
    parser.add_argument(
        "--cache-dir",
        default=None,
        help="base worktrees, environments and raw runs (default build/rlpace-bench)",
    )
    parser.add_argument(
        "--fail-on-regression", action="store_true", help="exit 1 when a benchmark worsened"
    )


def main(args: argparse.Namespace) -> int:
    """Run the pipeline; 0 on success (1 with --fail-on-regression and a regression)."""
    from rlpace.bench.pipeline import PipelineConfig
    from rlpace.bench.runner import run_settings

    settings = None
    if args.max_time is not None or args.wall_rounds is not None:
        settings = run_settings(args.max_time, args.wall_rounds)
    sets = tuple(s.strip() for s in args.sets.split(",") if s.strip())
    config = PipelineConfig(
        base=args.base,
        sets=sets,
        repeats=args.repeats,
        out_dir=Path(args.out_dir),
        quick=args.quick,
        keyword=args.keyword,
        threshold=args.threshold,
        paired_threshold=args.paired_threshold,
        alpha=args.alpha,
        noise_file=Path(args.noise) if args.noise else None,
        duets_file=Path(args.duets) if args.duets else None,
        base_env=args.base_env,
        cache_dir=Path(args.cache_dir) if args.cache_dir else None,
        settings=settings,
        confirm=args.confirm,
        max_pairs=args.max_pairs,
        time_budget=args.time_budget,
        counts=args.counts,
    )
    return run_pr_command(config, fail_on_regression=args.fail_on_regression)


def run_pr_command(config: PipelineConfig, *, fail_on_regression: bool = False) -> int:
    """Run :func:`rlpace.bench.pipeline.run_pr` with a progress bar and print the summary.

    Example:
        >>> run_pr_command(PipelineConfig(quick=True))  # doctest: +SKIP
        0
    """
    from rich.console import Console

    from rlpace.bench.base_revision import PipelineError
    from rlpace.bench.pipeline import run_pr
    from rlpace.bench.pr_progress import RichProgress, print_summary

    console = Console(stderr=True)
    try:
        with RichProgress(console) as progress:
            outcomes = run_pr(config, progress=progress)
    except PipelineError as exc:
        print(f"rlpace-bench pr: {exc}", file=sys.stderr)
        return 1
    except ValueError as exc:
        if isinstance(exc, BenchInputError):
            raise
        raise BenchInputError(str(exc)) from exc
    print_summary(outcomes, Console())
    if fail_on_regression and any(o.flagged for o in outcomes):
        return 1
    return 0
