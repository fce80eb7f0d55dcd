"""The table tools of ``show`` and ``compare``: files and globs per side, name filter,
sort, columns, group-by, and markdown / CSV / JSON / plain-text output.

:func:`load_side` reads several files (or globs) as repeated runs of one side and
merges them (:func:`rlpace.bench.results.merge_runs`); :func:`filter_rows` and
:func:`sort_rows` select and order a comparison's rows; :func:`comparison_table` and
:func:`results_table` turn rows into a header and cells; :func:`format_table` writes
them out.

Example:
    >>> header, rows = ["name", "change"], [["a", "+1.0%"], ["b", "-"]]
    >>> print(format_table(header, rows, "csv").strip())
    name,change
    a,+1.0%
    b,-
"""

from __future__ import annotations

import csv
import fnmatch
import glob
import io
import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from rlpace.bench.comparison import BenchmarkChange, Verdict
from rlpace.bench.errors import BenchInputError
from rlpace.bench.results import load_results
from rlpace.bench.units import format_rate, format_value

__all__ = [
    "COMPARE_COLUMNS",
    "FORMATS",
    "SHOW_COLUMNS",
    "comparison_table",
    "expand_paths",
    "filter_rows",
    "format_table",
    "load_side",
    "results_table",
    "sort_rows",
]

FORMATS = ("markdown", "csv", "json", "text")


def _pct(value: float) -> str:
    return f"{value:+.1f}%" if math.isfinite(value) else "-"


def _num(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


#: ``compare`` columns: name → (formatted cell, raw value for CSV/JSON); the names are
#: :data:`~rlpace.bench.choices.COMPARE_COLUMN_NAMES`, in that order.
COMPARE_COLUMNS: dict[str, tuple[Callable[[BenchmarkChange], str], Callable[[Any], Any]]] = {
    "name": (lambda r: r.name, lambda r: r.name),
    "fullname": (lambda r: r.fullname, lambda r: r.fullname),
    "group": (lambda r: r.group or "-", lambda r: r.group),
    "verdict": (lambda r: r.verdict.value, lambda r: r.verdict.value),
    "change": (lambda r: _pct(r.median_change_pct), lambda r: _num(r.median_change_pct)),
    "interval": (
        lambda r: f"[{_pct(r.ci_low_pct)}, {_pct(r.ci_high_pct)}]",
        lambda r: [_num(r.ci_low_pct), _num(r.ci_high_pct)],
    ),
    "noise": (lambda r: _pct(r.noise_pct).lstrip("+"), lambda r: _num(r.noise_pct)),
    "head": (
        lambda r: format_value(r.head_median, r.value_unit),
        lambda r: _num(r.head_median),
    ),
    "base": (
        lambda r: format_value(r.base_median, r.value_unit),
        lambda r: _num(r.base_median),
    ),
    "head_mean": (
        lambda r: format_value(r.head_mean, r.value_unit),
        lambda r: _num(r.head_mean),
    ),
    "base_mean": (
        lambda r: format_value(r.base_mean, r.value_unit),
        lambda r: _num(r.base_mean),
    ),
    "ops": (lambda r: format_rate(r.head_ops, r.value_unit), lambda r: _num(r.head_ops)),
    "unit": (lambda r: r.value_unit, lambda r: r.value_unit),
    "note": (lambda r: r.note or "-", lambda r: r.note),
}
DEFAULT_COMPARE_COLUMNS = ("name", "verdict", "change", "interval", "head", "base")

#: ``show`` columns over a results table row; the names are
#: :data:`~rlpace.bench.choices.SHOW_COLUMN_NAMES`, in that order.
SHOW_COLUMNS: dict[str, tuple[Callable[[pd.Series], str], Callable[[pd.Series], Any]]] = {
    "name": (lambda r: str(r["name"]), lambda r: r["name"]),
    "fullname": (lambda r: str(r["fullname"]), lambda r: r["fullname"]),
    "group": (lambda r: str(r["group"] or "-"), lambda r: r["group"]),
    "median": (
        lambda r: format_value(r["median"], r["value_unit"]),
        lambda r: _num(float(r["median"])),
    ),
    "mean": (
        lambda r: (
            format_value(r["mean"], r["value_unit"])
            + (
                f" ± {format_value(r['stddev'], r['value_unit'])}"
                if math.isfinite(r["stddev"])
                else ""
            )
        ),
        lambda r: _num(float(r["mean"])),
    ),
    "min": (lambda r: format_value(r["min"], r["value_unit"]), lambda r: _num(float(r["min"]))),
    "max": (lambda r: format_value(r["max"], r["value_unit"]), lambda r: _num(float(r["max"]))),
    "ops": (lambda r: format_rate(r["ops"], r["value_unit"]), lambda r: _num(float(r["ops"]))),
    "rounds": (lambda r: str(r["rounds"]), lambda r: int(r["rounds"])),
    "unit": (lambda r: str(r["value_unit"]), lambda r: r["value_unit"]),
    "status": (lambda r: str(r["status"]), lambda r: r["status"]),
}
DEFAULT_SHOW_COLUMNS = ("name", "median", "mean", "ops", "rounds", "status")


def expand_paths(patterns: Sequence[str | Path]) -> list[Path]:
    """Files named by ``patterns``: each a path or a glob (``results/*.json``), in order,
    without repeats.

    Raises:
        BenchInputError: a glob that matches nothing.

    Example:
        >>> expand_paths(["no/such/*.json"])
        Traceback (most recent call last):
        ...
        rlpace.bench.errors.BenchInputError: no/such/*.json: no file matches this pattern; expected result files (pytest-benchmark JSON or asv)
    """
    out: list[Path] = []
    for pattern in patterns:
        text = str(pattern)
        if glob.has_magic(text):
            matches = sorted(glob.glob(text, recursive=True))
            if not matches:
                raise BenchInputError(
                    f"{text}: no file matches this pattern; expected result files "
                    "(pytest-benchmark JSON or asv)"
                )
            found = [Path(m) for m in matches]
        else:
            found = [Path(text)]
        out.extend(p for p in found if p not in out)
    return out


def load_side(patterns: Sequence[str | Path]) -> pd.DataFrame:
    """Load the files of one side and merge them as repeated runs (one file: as is), as
    ``pr`` does: the runs of its counted pass pooled into one measurement
    (:func:`rlpace.bench.pass_rows.merge_side`).

    Raises:
        BenchInputError: no file, an unreadable file, or runs from different machines.

    Example:
        >>> load_side([])
        Traceback (most recent call last):
        ...
        rlpace.bench.errors.BenchInputError: expected at least one result file, got none
    """
    paths = expand_paths(patterns)
    if not paths:
        raise BenchInputError("expected at least one result file, got none")
    from rlpace.bench.pass_rows import merge_side

    frames = [load_results(p) for p in paths]
    return frames[0] if len(frames) == 1 else merge_side(frames)


def filter_rows(
    rows: Sequence[BenchmarkChange], *, name: str | None = None, only_changed: bool = False
) -> list[BenchmarkChange]:
    """Rows whose name contains ``name`` (or matches it as a glob), and, with
    ``only_changed``, only the rows whose verdict is neither "unchanged" nor "skipped"
    (an asv skip is no change, as ``asv compare --only-changed`` has it).

    Example:
        >>> rows = [BenchmarkChange("t::fast", "fast", Verdict.UNCHANGED),
        ...         BenchmarkChange("t::slow", "slow", Verdict.WORSENED),
        ...         BenchmarkChange("t::off", "off", Verdict.SKIPPED)]
        >>> [r.name for r in filter_rows(rows, name="s")], [r.name for r in filter_rows(rows, only_changed=True)]
        (['fast', 'slow'], ['slow'])
    """

    def keep(r: BenchmarkChange) -> bool:
        if only_changed and r.verdict in (Verdict.UNCHANGED, Verdict.SKIPPED):
            return False
        if not name:
            return True
        return name in r.fullname or fnmatch.fnmatchcase(r.fullname, name)

    return [r for r in rows if keep(r)]


#: Row orders of a comparison, keyed by :data:`~rlpace.bench.choices.COMPARE_SORT_KEYS`.
_SORT_KEYS: dict[str, Callable[[BenchmarkChange], Any]] = {
    "name": lambda r: r.name,
    "fullname": lambda r: r.fullname,
    "group": lambda r: (r.group or "", r.name),
    "verdict": lambda r: (r.verdict.value, r.name),
    "change": lambda r: r.median_change_pct if math.isfinite(r.median_change_pct) else math.inf,
    "ratio": lambda r: (
        -abs(r.median_change_pct) if math.isfinite(r.median_change_pct) else math.inf
    ),
    "head": lambda r: r.head_median if math.isfinite(r.head_median) else math.inf,
    "base": lambda r: r.base_median if math.isfinite(r.base_median) else math.inf,
}


def sort_rows(rows: Sequence[BenchmarkChange], key: str | None) -> list[BenchmarkChange]:
    """Rows sorted by ``key`` (``name``, ``fullname``, ``group``, ``verdict``,
    ``change`` worst first, ``ratio`` largest change first, ``head``, ``base``); a
    leading ``-`` reverses. None keeps the order.

    Example:
        >>> rows = [BenchmarkChange("a", "a", Verdict.UNCHANGED, median_change_pct=3.0),
        ...         BenchmarkChange("b", "b", Verdict.WORSENED, median_change_pct=-40.0)]
        >>> [r.name for r in sort_rows(rows, "change")], [r.name for r in sort_rows(rows, "-name")]
        (['b', 'a'], ['b', 'a'])
    """
    if not key:
        return list(rows)
    reverse = key.startswith("-")
    name = key.lstrip("-")
    if name not in _SORT_KEYS:
        raise BenchInputError(
            f"--sort: expected one of {', '.join(_SORT_KEYS)} (a leading '-' reverses), got {key!r}"
        )
    return sorted(rows, key=_SORT_KEYS[name], reverse=reverse)


def _columns(requested: Sequence[str] | None, known: dict, default: Sequence[str]) -> list[str]:
    names = list(requested or default)
    bad = [c for c in names if c not in known]
    if bad:
        raise BenchInputError(
            f"--columns: unknown column {', '.join(map(repr, bad))}; expected some of "
            f"{', '.join(known)}"
        )
    return names


def comparison_table(
    rows: Sequence[BenchmarkChange],
    columns: Sequence[str] | None = None,
    *,
    raw: bool = False,
) -> tuple[list[str], list[list[Any]]]:
    """Header and cells of the comparison rows in ``columns`` (formatted, or ``raw``
    numbers for CSV/JSON).

    Example:
        >>> rows = [BenchmarkChange("t::a", "a", Verdict.WORSENED, median_change_pct=-20.0)]
        >>> comparison_table(rows, ["name", "change"])
        (['name', 'change'], [['a', '-20.0%']])
    """
    names = _columns(columns, COMPARE_COLUMNS, DEFAULT_COMPARE_COLUMNS)
    pick = 1 if raw else 0
    return names, [[COMPARE_COLUMNS[c][pick](r) for c in names] for r in rows]


def results_table(
    df: pd.DataFrame, columns: Sequence[str] | None = None, *, raw: bool = False
) -> tuple[list[str], list[list[Any]]]:
    """Header and cells of a results table (``show``); the group column is added by
    default when any benchmark has a group.

    Example:
        >>> from rlpace.bench.results import results_from_records
        >>> df = results_from_records([{"fullname": "a", "data": [1e-3, 1e-3]}])
        >>> results_table(df, ["name", "median"])
        (['name', 'median'], [['a', '1.0000 ms']])
    """
    default = list(DEFAULT_SHOW_COLUMNS)
    if columns is None and df["group"].notna().any():
        default.insert(1, "group")
    names = _columns(columns, SHOW_COLUMNS, default)
    pick = 1 if raw else 0
    return names, [[SHOW_COLUMNS[c][pick](row) for c in names] for _, row in df.iterrows()]


def format_table(header: Sequence[str], rows: Sequence[Sequence[Any]], fmt: str) -> str:
    """Write a table as ``markdown``, ``csv``, ``json`` (a list of objects) or aligned
    plain ``text``.

    Example:
        >>> print(format_table(["a", "b"], [[1, "x"]], "json"))
        [
          {
            "a": 1,
            "b": "x"
          }
        ]
    """
    if fmt == "json":
        return json.dumps([dict(zip(header, r)) for r in rows], indent=2, allow_nan=False)
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(header)
        writer.writerows([["" if v is None else v for v in r] for r in rows])
        return buffer.getvalue()
    cells = [[str(c) for c in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(header)]
    if fmt == "markdown":

        def esc(text: str) -> str:
            return text.replace("|", "\\|")

        lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
        lines += ["| " + " | ".join(esc(c) for c in r) + " |" for r in cells]
        return "\n".join(lines)
    if fmt != "text":
        raise BenchInputError(f"--format: expected one of {', '.join(FORMATS)}, got {fmt!r}")
    lines = [header, *cells]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in lines)
