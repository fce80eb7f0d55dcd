"""``rlpace-bench compare``: result files of two runs → a rendered comparison.

Each side takes one or more files or globs; several files of one side are merged as
repeated runs (so process-to-process noise is measured, not assumed).

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
import re
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from rlpace.bench.choices import COMPARE_COLUMN_NAMES, COMPARE_SORT_KEYS, STYLES
from rlpace.bench.errors import BenchInputError
from rlpace.bench.thresholds import (
    COUNTED_THRESHOLD,
    PAIRED_THRESHOLD,
    SINGLE_RUN_NOISE,
    THRESHOLD,
)

if TYPE_CHECKING:  # pragma: no cover
    from rlpace.bench.comparison import Comparison

NAME = "compare"
HELP = "Compare head result files against base result files and render the report."
FORMATS = ("markdown", "csv", "json")


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
        help="result file(s) or glob(s) of the new run (pytest-benchmark JSON or asv); "
        "several are merged as repeated runs",
    )
    parser.add_argument(
        "--base",
        nargs="+",
        help="result file(s) or glob(s) of the reference run; without it every benchmark is new",
    )
    parser.add_argument(
        "--style", choices=STYLES, default="rlpace", help="report style (default: rlpace)"
    )
    parser.add_argument("--title", default="", help="heading of the report")
    parser.add_argument(
        "--threshold",
        type=float,
        default=THRESHOLD,
        help=f"smallest change in %% that may be flagged (default: {THRESHOLD:g})",
    )
    parser.add_argument(
        "--paired-threshold",
        type=float,
        default=PAIRED_THRESHOLD,
        help="the same for benchmarks judged pair by pair (with --paired; default: "
        f"{PAIRED_THRESHOLD:g}, as pr)",
    )
    parser.add_argument(
        "--count-threshold",
        type=float,
        default=COUNTED_THRESHOLD,
        help="the same for a value that counts work (an asv track_* of instructions, aten "
        "ops, kernel launches ...): it is judged on this count gate, not on a timing's "
        f"noise (default: {COUNTED_THRESHOLD:g})",
    )
    parser.add_argument(
        "--alpha",
        type=float,
        default=0.05,
        help="false discovery rate of the tests (default: 0.05)",
    )
    parser.add_argument(
        "--single-run-noise",
        type=float,
        default=SINGLE_RUN_NOISE * 100,
        help="process noise in %% assumed for benchmarks with one run a side "
        f"(default: {SINGLE_RUN_NOISE * 100:g}; 0 judges them on their rounds alone)",
    )
    parser.add_argument(
        "--calibration",
        help="calibration file from `rlpace-bench aa` (as `pr --noise`): its gates, priors "
        "and note judge the files, so they get the verdicts `pr` gives (and its noise "
        "replaces the assumed single-run noise)",
    )
    parser.add_argument(
        "--paired",
        action="store_true",
        help="the runs were duets (head run k and base run k at the same time, one per "
        "core; give both sides' files in the same order): judge each benchmark pair by "
        "pair, as `pr` judges its timed cases when the count tier is on",
    )
    parser.add_argument(
        "--duets",
        help="duet calibration from `rlpace-bench aa --duets N` (as `pr --duets`; with "
        "--paired): each benchmark's pairs are weighed with its pairs' spread in those A/A "
        "duets, as pr weighs them",
    )
    parser.add_argument("-k", dest="name_filter", help="only benchmarks whose name contains this")
    parser.add_argument(
        "--only-changed",
        action="store_true",
        help="only benchmarks flagged, new, removed or failed",
    )
    parser.add_argument(
        "--sort",
        help=f"row order: {', '.join(COMPARE_SORT_KEYS)} (a leading '-' reverses)",
    )
    parser.add_argument(
        "--group-by",
        choices=("group",),
        help="one section (markdown) or a leading column (csv/json) per benchmark group",
    )
    parser.add_argument(
        "--columns",
        help="comma-separated columns of a table (csv/json, or markdown as a plain table): "
        + ", ".join(COMPARE_COLUMN_NAMES),
    )
    parser.add_argument(
        "--format",
        dest="fmt",
        choices=FORMATS,
        default="markdown",
        help="markdown (the report; default), csv or json (a table)",
    )
    parser.add_argument("-o", "--output", help="write the output here instead of stdout")
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
        help="exit 1 when a benchmark worsened (by the statistical verdict, in both styles), "
        "or when head lost benchmarks that base measured (removed or failed)",
    )


def _check_pairs(head: list[Path | str], base: list[Path | str]) -> None:
    """``--paired`` needs one base file per head file (the two runs of a duet)."""
    from rlpace.bench.result_tables import expand_paths

    h, b = len(expand_paths(head)), len(expand_paths(base))
    if h != b or h < 2:
        raise BenchInputError(
            f"--paired: expected as many base files as head files, two or more (one pair "
            f"per duet), got {h} head and {b} base; fix: give each duet's head and base "
            "files in the same order, or drop --paired for runs that did not run side by side"
        )


def _as_list(paths: Path | str | Sequence[Path | str] | None) -> list[Path | str]:
    if paths is None:
        return []
    if isinstance(paths, str | Path):
        return [paths]
    return list(paths)


_SHA = re.compile(r"^[0-9a-fA-F]{7,40}$")


def _subject(commit: object) -> str | None:
    """The commit's subject line from the git repository here, when it has the commit."""
    if not isinstance(commit, str) or not _SHA.match(commit):
        return None
    try:
        out = subprocess.run(
            ["git", "log", "-1", "--format=%s", commit, "--"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def _with_subjects(comparison: Comparison) -> Comparison:
    head, base = dict(comparison.head), dict(comparison.base)
    for meta in (head, base):
        if meta and not meta.get("subject"):
            meta["subject"] = _subject(meta.get("commit"))
    return replace(comparison, head=head, base=base)


def _by_group(comparison: Comparison) -> dict[str, Comparison]:
    from rlpace.bench.render import escape_markdown

    groups: dict[str, list] = {}
    for row in comparison.rows:
        groups.setdefault(row.group or "(no group)", []).append(row)
    # group names come from the files: escaped, they cannot format or ping in a heading
    return {
        escape_markdown(name): replace(comparison, rows=tuple(rows))
        for name, rows in groups.items()
    }


def compare_files(
    *,
    head: Path | str | Sequence[Path | str],
    base: Path | str | Sequence[Path | str] | None = None,
    style: str = "rlpace",
    title: str = "",
    threshold: float = THRESHOLD,
    alpha: float = 0.05,
    single_run_noise: float = SINGLE_RUN_NOISE,
    paired: bool = False,
    paired_threshold: float = PAIRED_THRESHOLD,
    count_threshold: float = COUNTED_THRESHOLD,
    calibration: Path | None = None,
    duets: Path | None = None,
    name_filter: str | None = None,
    only_changed: bool = False,
    sort: str | None = None,
    group_by: str | None = None,
    columns: Sequence[str] | None = None,
    fmt: str = "markdown",
    output: Path | None = None,
    json_path: Path | None = None,
    fail_on_regression: bool = False,
    allow_env_mismatch: bool = False,
    stdout: TextIO | None = None,
) -> int:
    """Load, judge, render and write; return the exit code (0, or 1 when
    ``fail_on_regression`` and something worsened or head lost benchmarks).

    The verdicts come from the same :class:`~rlpace.bench.judge.Judge` ``pr`` uses
    (threshold, alpha, ``calibration``, with ``paired`` the ``paired_threshold`` and the ``duets`` calibration's
    pair spreads, the negative-control floor, the ``count_threshold`` of values that
    count work), so the files
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
    # the work's modules (pandas, scipy, jinja2) are imported here, not at the top, so
    # that parsing the command line, for this command or any other, stays light
    from rlpace.bench.calibration import read_calibration, read_duet_calibration
    from rlpace.bench.environment import require_compatible_runs
    from rlpace.bench.judge import Judge
    from rlpace.bench.render import render_report
    from rlpace.bench.result_tables import (
        comparison_table,
        filter_rows,
        format_table,
        load_side,
        sort_rows,
    )

    if fmt not in FORMATS:
        raise BenchInputError(f"--format: expected one of {', '.join(FORMATS)}, got {fmt!r}")
    base_paths = _as_list(base)
    if paired:
        _check_pairs(_as_list(head), base_paths)
    head_df = load_side(_as_list(head))
    base_df = load_side(base_paths) if base_paths else None
    differences: list[str] = []
    if base_df is not None:
        differences = require_compatible_runs(
            head_df, base_df, allow_mismatch=allow_env_mismatch, require_metadata=False
        )
        for diff in differences:
            print(f"rlpace-bench: warning: environments differ: {diff}", file=sys.stderr)
    if duets is not None and not paired:
        raise BenchInputError(
            "--duets: expected duet runs judged pair by pair, got files without --paired; "
            "fix: add --paired (the files must be duets, as pr's timed runs are) or "
            "drop --duets"
        )
    judge = Judge.from_calibration(
        read_calibration(Path(calibration)) if calibration is not None else None,
        source=str(calibration or ""),
        duets=read_duet_calibration(Path(duets)) if duets is not None else None,
        duets_source=str(duets or ""),
        threshold=threshold,
        paired_threshold=paired_threshold,
        count_threshold=count_threshold,
        alpha=alpha,
        single_run_noise=single_run_noise,
        same_packages=not differences,
        paired=paired,
    )
    comparison = judge.judge(head_df, base_df)
    comparison = _with_subjects(comparison)
    shown = filter_rows(comparison.rows, name=name_filter, only_changed=only_changed)
    shown = sort_rows(shown, sort)
    if group_by == "group":
        shown = sorted(shown, key=lambda r: r.group or "")
    view = replace(comparison, rows=tuple(shown))
    if fmt == "markdown" and columns is None:
        text = render_report(
            _by_group(view) if group_by == "group" and view.rows else view,
            style=style,
            title=title,
        )
    else:
        wanted = list(columns) if columns else None
        if group_by == "group" and wanted is not None and "group" not in wanted:
            wanted.insert(0, "group")
        header, cells = comparison_table(view.rows, wanted, raw=fmt != "markdown")
        text = format_table(header, cells, fmt).rstrip("\n")
    if output is not None:
        _write(output, text + "\n")
    else:
        print(text, file=stdout or sys.stdout)
    if json_path is not None:
        _write(json_path, json.dumps(comparison.to_dict(), indent=2, allow_nan=False) + "\n")
    if fail_on_regression and comparison.lost:
        names = ", ".join(r.name for r in comparison.lost[:5])
        print(
            f"rlpace-bench: head lost {len(comparison.lost)} benchmark(s) that base measured "
            f"(removed or failed): {names}",
            file=sys.stderr,
        )
    return 1 if fail_on_regression and (comparison.worsened or comparison.lost) else 0


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
        head=args.head,
        base=args.base,
        style=args.style,
        title=args.title,
        threshold=args.threshold,
        alpha=args.alpha,
        single_run_noise=args.single_run_noise / 100,
        paired=args.paired,
        paired_threshold=args.paired_threshold,
        count_threshold=args.count_threshold,
        calibration=Path(args.calibration) if args.calibration else None,
        duets=Path(args.duets) if args.duets else None,
        name_filter=args.name_filter,
        only_changed=args.only_changed,
        sort=args.sort,
        group_by=args.group_by,
        columns=[c.strip() for c in args.columns.split(",") if c.strip()] if args.columns else None,
        fmt=args.fmt,
        output=Path(args.output) if args.output else None,
        json_path=Path(args.json_path) if args.json_path else None,
        fail_on_regression=args.fail_on_regression,
        allow_env_mismatch=args.allow_env_mismatch,
    )
