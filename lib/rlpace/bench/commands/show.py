"""``rlpace-bench show FILE...``: a quick look at result files.

Several files (or globs) are merged as repeated runs of one side.

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser()
    >>> add_arguments(parser)
    >>> parser.parse_args(["run.json"]).files
    ['run.json']
"""

from __future__ import annotations

import argparse
import fnmatch
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from rlpace.bench.choices import SHOW_COLUMN_NAMES
from rlpace.bench.errors import BenchInputError

NAME = "show"
HELP = "Print the benchmarks of result files (pytest-benchmark JSON or asv)."
_SORTS = ("name", "fullname", "group", "median", "mean", "min", "max", "stddev", "rounds", "ops")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the ``show`` arguments on ``parser``.

    Example:
        >>> parser = argparse.ArgumentParser()
        >>> add_arguments(parser)
        >>> parser.parse_args(["r.json", "--sort", "median", "--format", "csv"]).sort
        'median'
    """
    parser.add_argument("files", nargs="+", help="result file(s) or glob(s), merged as runs")
    parser.add_argument("-k", dest="name_filter", help="only benchmarks whose name contains this")
    parser.add_argument("--sort", help=f"row order: {', '.join(_SORTS)} (a leading '-' reverses)")
    parser.add_argument(
        "--columns", help=f"comma-separated columns: {', '.join(SHOW_COLUMN_NAMES)}"
    )
    parser.add_argument("--group-by", choices=("group",), help="order the rows by benchmark group")
    parser.add_argument(
        "--format",
        dest="fmt",
        choices=("text", "markdown", "csv", "json"),
        default="text",
        help="output format (default: aligned text)",
    )


def show_file(
    *,
    path: Path | str | Sequence[Path | str],
    name_filter: str | None = None,
    sort: str | None = None,
    columns: Sequence[str] | None = None,
    group_by: str | None = None,
    fmt: str = "text",
    stdout: TextIO | None = None,
) -> int:
    """Print a header (format, commit, machine) and one line per benchmark; return 0.

    Raises:
        BenchInputError: a file cannot be read or an option is invalid (exit 2).

    Example:
        >>> show_file(path=Path("missing.json"))
        Traceback (most recent call last):
        ...
        rlpace.bench.errors.BenchInputError: missing.json: no such file; expected a pytest-benchmark JSON or asv result file
    """
    # imported here, not at the top, so that parsing the command line stays light
    from rlpace.bench.result_tables import format_table, load_side, results_table

    out = stdout or sys.stdout
    paths = [path] if isinstance(path, str | Path) else list(path)
    df = load_side(paths)
    if name_filter:
        keep = df["fullname"].map(lambda n: name_filter in n or fnmatch.fnmatchcase(n, name_filter))
        df = df[keep.astype(bool)]
    keys = []
    if group_by == "group":
        keys.append("group")
    if sort:
        key = sort.lstrip("-")
        if key not in _SORTS:
            raise BenchInputError(
                f"--sort: expected one of {', '.join(_SORTS)} (a leading '-' reverses), "
                f"got {sort!r}"
            )
        keys.append(key)
    if keys:
        df = df.sort_values(
            keys, ascending=not sort or not sort.startswith("-"), na_position="last"
        )
    header, rows = results_table(df, columns, raw=fmt in ("csv", "json"))
    if fmt == "text":
        attrs = df.attrs
        commit = (attrs.get("commit_info") or {}).get("id") or "unknown commit"
        machine = attrs.get("machine_info") or {}
        where = machine.get("node") or machine.get("machine") or "unknown machine"
        runs = f", {attrs['runs']} runs merged" if attrs.get("runs") else ""
        print(
            f"{', '.join(map(str, paths))}: {attrs['format']} {attrs['format_version']}, "
            f"{len(df)} benchmarks{runs}, commit {str(commit)[:12]}, {where}, "
            f"{attrs.get('datetime') or 'no date'}",
            file=out,
        )
    print(format_table(header, rows, fmt).rstrip("\n"), file=out)
    return 0


def main(args: argparse.Namespace) -> int:
    """Turn parsed arguments into :func:`show_file` keywords.

    Example:
        >>> parser = argparse.ArgumentParser()
        >>> add_arguments(parser)
        >>> main(parser.parse_args(["missing.json"]))
        Traceback (most recent call last):
        ...
        rlpace.bench.errors.BenchInputError: missing.json: no such file; expected a pytest-benchmark JSON or asv result file
    """
    return show_file(
        path=args.files,
        name_filter=args.name_filter,
        sort=args.sort,
        columns=[c.strip() for c in args.columns.split(",") if c.strip()] if args.columns else None,
        group_by=args.group_by,
        fmt=args.fmt,
    )
