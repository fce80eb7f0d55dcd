"""``rlpace-bench history``: step changes across commits in asv results, with plots.

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser()
    >>> add_arguments(parser)
    >>> args = parser.parse_args(["--results", "r", "--threshold", "0.2"])
    >>> args.results, args.threshold, args.out_dir
    ('r', 0.2, 'reports/history')
"""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

from rlpace.bench.errors import BenchInputError
from rlpace.bench.history import COUNT_THRESHOLD, asv_paths, git_commit_order, history

NAME = "history"
HELP = "flag step changes across commits in asv results and plot each flagged benchmark"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of ``rlpace-bench history``.

    Example:
        >>> parser = argparse.ArgumentParser()
        >>> add_arguments(parser)
        >>> args = parser.parse_args([])
        >>> args.asv_config, args.results, args.threshold
        ('asv_bench/asv.conf.json', None, 0.1)
    """
    parser.add_argument(
        "--asv-config",
        default="asv_bench/asv.conf.json",
        help="asv configuration naming the results directory and the repository",
    )
    parser.add_argument("--results", default=None, help="asv results directory (overrides)")
    parser.add_argument("--repo", default=None, help="git repository ordering the commits")
    parser.add_argument("--out-dir", default="reports/history", help="where PNG plots go")
    parser.add_argument(
        "--threshold",
        type=float,
        default=0.1,
        help="smallest relative step reported in a timing or memory series (0.1 = 10 %%)",
    )
    parser.add_argument(
        "--count-threshold",
        type=float,
        default=COUNT_THRESHOLD,
        help=(
            "smallest relative step reported in a count of work (instructions, aten ops, "
            "Python calls; 0.01 = 1 %%); estimated cycles keep --threshold"
        ),
    )


def main(args: argparse.Namespace) -> int:
    """Print every step change, oldest first per benchmark; write the plots.

    Example:
        >>> parser = argparse.ArgumentParser()
        >>> add_arguments(parser)
        >>> main(parser.parse_args(["--results", "missing-results"]))
        Traceback (most recent call last):
        ...
        rlpace.bench.errors.BenchInputError: expected an asv results directory at missing-results, found none; run `make asv` (or `asv run`) first, or pass --results DIR
    """
    missing = [m for m in ("asv", "matplotlib") if importlib.util.find_spec(m) is None]
    if missing:
        raise BenchInputError(
            f"history needs {' and '.join(missing)}, which this environment lacks; "
            'install the bench extra: pip install "rlpace[bench]"'
        )
    for option, value, example in (
        ("--threshold", args.threshold, "0.1 = 10 %"),
        ("--count-threshold", args.count_threshold, "0.01 = 1 %"),
    ):
        if not value > 0:  # NaN too
            raise BenchInputError(
                f"{option}: expected a relative change > 0 ({example}), got {value}"
            )
    if args.results is not None:
        results, repo = Path(args.results), Path(args.repo or ".")
    else:
        results, repo = asv_paths(args.asv_config)
        repo = Path(args.repo) if args.repo else repo
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    console = Console(stderr=True)
    with Progress(
        "reading asv results",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    ) as bar:
        task = bar.add_task("read", total=None)
        report = history(
            results_dir=results,
            out_dir=args.out_dir,
            threshold=args.threshold,
            count_threshold=args.count_threshold,
            commit_order=git_commit_order(repo),
            progress=lambda done, total: bar.update(task, completed=done, total=total),
        )
    print(
        f"{len(report.series)} series read from {results}; "
        f"{len(report.changes)} step change(s) in {len(report.flagged)} benchmark(s)"
    )
    for c in report.changes:
        print(
            f"{c.kind:<11} x{c.ratio:6.2f} {c.change:>9}  {c.benchmark} [{c.machine}/{c.env}]  "
            f"first commit {c.first_commit} (after {c.previous_commit[:8]})"
        )
    for path in report.plots:
        print(f"plot: {path}")
    if report.index is not None:
        print(f"index: {report.index}")
    return 0
