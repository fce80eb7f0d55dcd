"""``rlpace-bench show FILE``: a quick look at one result file.

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser()
    >>> add_arguments(parser)
    >>> parser.parse_args(["run.json"]).file
    'run.json'
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import TextIO

from rlpace.bench.render import format_ops, format_time
from rlpace.bench.results import load_results

NAME = "show"
HELP = "Print the benchmarks of one result file (pytest-benchmark JSON or asv)."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the ``show`` arguments on ``parser``.

    Example:
        >>> parser = argparse.ArgumentParser()
        >>> add_arguments(parser)
        >>> parser.parse_args(["r.json"]).file
        'r.json'
    """
    parser.add_argument("file", help="the result file")


def show_file(*, path: Path, stdout: TextIO | None = None) -> int:
    """Print a header (format, commit, machine) and one line per benchmark; return 0.

    Raises:
        BenchInputError: the file cannot be read (exit 2).

    Example:
        >>> show_file(path=Path("missing.json"))
        Traceback (most recent call last):
        ...
        rlpace.bench.errors.BenchInputError: missing.json: no such file; expected a pytest-benchmark JSON or asv result file
    """
    out = stdout or sys.stdout
    df = load_results(path)
    attrs = df.attrs
    commit = (attrs.get("commit_info") or {}).get("id") or "unknown commit"
    machine = attrs.get("machine_info") or {}
    where = machine.get("node") or machine.get("machine") or "unknown machine"
    print(
        f"{path}: {attrs['format']} {attrs['format_version']}, {len(df)} benchmarks, "
        f"commit {str(commit)[:12]}, {where}, {attrs.get('datetime') or 'no date'}",
        file=out,
    )
    header = ("name", "median", "mean ± stddev", "ops", "rounds", "status")
    lines = [header]
    for _, row in df.iterrows():
        spread = (
            f"{format_time(row['mean'])} ± {format_time(row['stddev'])}"
            if math.isfinite(row["stddev"])
            else format_time(row["mean"])
        )
        lines.append(
            (
                str(row["name"]),
                format_time(row["median"]),
                spread,
                format_ops(row["ops"]),
                str(row["rounds"]),
                row["status"],
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    for line in lines:
        print("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip(), file=out)
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
    return show_file(path=Path(args.file))
