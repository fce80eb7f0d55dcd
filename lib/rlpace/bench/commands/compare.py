"""``rlpace-bench compare``: two result files → a rendered comparison.

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser()
    >>> add_arguments(parser)
    >>> args = parser.parse_args(["--head", "h.json", "--style", "seed", "--threshold", "3"])
    >>> args.head, args.base, args.style, args.threshold, args.fail_on_regression
    (['h.json'], None, 'seed', 3.0, False)
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from rlpace.bench.calibration import read_calibration
from rlpace.bench.environment import require_compatible_runs
from rlpace.bench.errors import BenchInputError
from rlpace.bench.judge import Judge
from rlpace.bench.render import STYLES, render_report
from rlpace.bench.results import load_results, merge_runs

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

NAME = "compare"
HELP = "Compare a head result file against a base result file and render the report."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the ``compare`` options on ``parser``.

    Example:
        >>> parser = argparse.ArgumentParser()
        >>> add_arguments(parser)
        >>> parser.parse_args(["--head", "h.json", "-o", "r.md"]).output
        'r.md'
    """
    parser.add_argument(
        "--head",
        required=True,
        nargs="+",
        help="result file(s) of the new run (pytest-benchmark JSON or asv); several are "
        "merged as the runs of one side, as `pr` merges its repeats",
    )
    parser.add_argument(
        "--base",
        nargs="+",
        help="result file(s) of the reference run; without it every benchmark is new",
    )
    parser.add_argument(
        "--style", choices=STYLES, default="rlpace", help="report style (default: rlpace)"
    )
    parser.add_argument("--title", default="", help="heading of the report")
    parser.add_argument(
        "--threshold",
        type=float,
        default=5.0,
        help="smallest change in %% that may be flagged (default: 5)",
    )
    parser.add_argument(
        "--alpha",
        type=float,
        default=0.05,
        help="false discovery rate of the tests (default: 0.05)",
    )
    parser.add_argument(
        "--calibration",
        default=None,
        help="calibration file from `rlpace-bench aa` (as `pr --noise`): its gates, "
        "priors and note judge the files, so they get the verdicts `pr` gives",
    )
    parser.add_argument("-o", "--output", help="write the markdown here instead of stdout")
    parser.add_argument(
        "--json", dest="json_path", help="also write the comparison as versioned JSON here"
    )
    parser.add_argument(
        "--allow-env-mismatch",
        action="store_true",
        help="compare even when the files' environments (versions, CPU, threads) differ",
    )
    parser.add_argument(
        "--fail-on-regression",
        action="store_true",
        help="exit 1 when a benchmark worsened (by the statistical verdict, in both styles)",
    )


def compare_files(
    *,
    head: Path | Sequence[Path],
    base: Path | Sequence[Path] | None = None,
    style: str = "rlpace",
    title: str = "",
    threshold: float = 5.0,
    alpha: float = 0.05,
    output: Path | None = None,
    json_path: Path | None = None,
    fail_on_regression: bool = False,
    allow_env_mismatch: bool = False,
    calibration: Path | None = None,
    stdout: TextIO | None = None,
) -> int:
    """Load, judge, render and write; return the exit code (0, or 1 on a regression
    when ``fail_on_regression``).

    The verdicts come from the same :class:`~rlpace.bench.judge.Judge` ``pr`` uses
    (threshold, alpha, ``calibration``, the negative-control floor), so the files
    ``pr`` ran give the verdicts ``pr``'s first comparison gave; several files a side
    are merged as ``pr`` merges its repeats. (``pr`` then confirms its flags on fresh
    runs, which two files cannot do.)

    Raises:
        BenchInputError: a file cannot be read or an option is invalid (exit 2).
        EnvironmentMismatchError: both files carry rlpace environment metadata and it
            differs, without ``allow_env_mismatch`` (exit 2).

    Example:
        >>> compare_files(head=Path("missing.json"))
        Traceback (most recent call last):
        ...
        rlpace.bench.errors.BenchInputError: missing.json: no such file; expected a pytest-benchmark JSON or asv result file
    """
    head_df = _load_side(head)
    base_df = _load_side(base) if base is not None else None
    differences: list[str] = []
    if base_df is not None:
        differences = require_compatible_runs(
            head_df, base_df, allow_mismatch=allow_env_mismatch, require_metadata=False
        )
        for diff in differences:
            print(f"rlpace-bench: warning: environments differ: {diff}", file=sys.stderr)
    judge = Judge.from_calibration(
        read_calibration(calibration) if calibration is not None else None,
        source=str(calibration or ""),
        threshold=threshold,
        alpha=alpha,
        same_packages=not differences,
    )
    comparison = judge.judge(head_df, base_df)
    text = render_report(comparison, style=style, title=title)
    if output is not None:
        _write(output, text + "\n")
    else:
        print(text, file=stdout or sys.stdout)
    if json_path is not None:
        _write(json_path, json.dumps(comparison.to_dict(), indent=2, allow_nan=False) + "\n")
    return 1 if fail_on_regression and comparison.worsened else 0


def _load_side(paths: Path | Sequence[Path]) -> pd.DataFrame:
    """One side's results: a file, or several merged as the runs of that side."""
    files = [paths] if isinstance(paths, str | Path) else list(paths)
    frames = [load_results(p) for p in files]
    return frames[0] if len(frames) == 1 else merge_runs(frames)


def _write(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise BenchInputError(
            f"{path}: cannot write the report ({exc.strerror}); choose another path"
        ) from None


def main(args: argparse.Namespace) -> int:
    """Turn parsed arguments into :func:`compare_files` keywords.

    Example:
        >>> parser = argparse.ArgumentParser()
        >>> add_arguments(parser)
        >>> main(parser.parse_args(["--head", "missing.json"]))
        Traceback (most recent call last):
        ...
        rlpace.bench.errors.BenchInputError: missing.json: no such file; expected a pytest-benchmark JSON or asv result file
    """
    return compare_files(
        head=[Path(p) for p in args.head],
        base=[Path(p) for p in args.base] if args.base else None,
        style=args.style,
        title=args.title,
        threshold=args.threshold,
        alpha=args.alpha,
        output=Path(args.output) if args.output else None,
        json_path=Path(args.json_path) if args.json_path else None,
        fail_on_regression=args.fail_on_regression,
        allow_env_mismatch=args.allow_env_mismatch,
        calibration=Path(args.calibration) if args.calibration else None,
    )
