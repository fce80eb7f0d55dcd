"""Result files → one normalized results table.

Reads pytest-benchmark JSON (``--benchmark-json`` or ``--benchmark-save`` output of
pytest-benchmark 2 to 5, with or without raw ``data``) and asv result files (api
versions 1 and 2, as written by ``asv run``) into a :class:`pandas.DataFrame` with one row per
benchmark. Every later stage (comparison, rendering, the PR pipeline) reads only this
table.

Columns (:data:`COLUMNS`): ``fullname`` (the key), ``name``, ``group``, ``params``
(dict or None), ``impl`` (``params["impl"]`` or None), ``min``, ``max``, ``mean``,
``stddev``, ``median``, ``iqr``, ``ops``, ``rounds``, ``data`` (list of per-round
seconds, or None), ``extra_info`` (dict), ``status`` (``"ok"``, ``"failed"``, or ``"skipped"``: an
asv result of ``NaN``, the benchmark skipped itself on that run),
``ci_low``/``ci_high`` (an interval for the location when the file has one, else NaN),
``higher_is_better`` (False for times, sizes and counts; see
:func:`rlpace.bench.units.higher_is_better_for`), ``value_unit`` (``"seconds"``,
``"bytes"`` or an asv ``track_*`` unit; every statistic is in it), ``run_medians`` (the median of each merged run,
one per benchmark process, in run order: process-to-process noise is measured on
these; a single run's table has one).

``df.attrs`` holds ``source``, ``format`` (``"pytest-benchmark"``/``"asv"``),
``format_version``, ``machine_info``, ``commit_info`` and ``datetime``.

Every value read from a file is type-checked on the way in (private modules
``_pytest_benchmark_files`` and ``_asv_files``): a malformed file ends in one
:class:`~rlpace.bench.errors.BenchInputError` that names the file, the field, what
was expected and what arrived.

Example:
    >>> import json, tempfile, os
    >>> doc = {"version": "5.1.0", "datetime": "2026-01-01T00:00:00", "machine_info": {},
    ...        "commit_info": {"id": "abc"}, "benchmarks": [{
    ...            "name": "test_add", "fullname": "t.py::test_add", "group": None,
    ...            "params": None, "extra_info": {}, "stats": {"data": [1.0, 2.0, 3.0]}}]}
    >>> with tempfile.TemporaryDirectory() as d:
    ...     path = os.path.join(d, "run.json")
    ...     with open(path, "w") as f:
    ...         json.dump(doc, f)
    ...     df = load_results(path)
    >>> row = df.iloc[0]
    >>> row["fullname"], float(row["mean"]), int(row["rounds"]), row["status"], row["group"]
    ('t.py::test_add', 2.0, 3, 'ok', None)
    >>> df.attrs["format"], df.attrs["format_version"]
    ('pytest-benchmark', '5.1.0')
"""

from __future__ import annotations

import json
import math
import os
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rlpace.bench._asv_files import SUPPORTED_ASV_API, read_asv
from rlpace.bench._pytest_benchmark_files import SUPPORTED_PYTEST_BENCHMARK, read_pytest_benchmark
from rlpace.bench.errors import BenchInputError, EnvironmentMismatchError
from rlpace.bench.stats import median_interval, summarize
from rlpace.bench.units import SECONDS, higher_is_better_for, normalize_unit

__all__ = [
    "COLUMNS",
    "STATUSES",
    "MAX_RESULT_BYTES",
    "SUPPORTED_ASV_API",
    "SUPPORTED_PYTEST_BENCHMARK",
    "environment_differences",
    "load_results",
    "merge_runs",
    "pool_runs",
    "results_from_records",
    "run_environment",
]

STATUSES = ("ok", "failed", "skipped")
"""A row's ``status``: measured, failed (an error, or asv's ``null``), or skipped (asv's
``NaN``: the benchmark skipped itself, e.g. ``NotImplementedError`` for a parameter
combination; like ``asv compare``, neither a failure nor a change)."""

COLUMNS = (
    "fullname",
    "name",
    "group",
    "params",
    "impl",
    "min",
    "max",
    "mean",
    "stddev",
    "median",
    "iqr",
    "ops",
    "rounds",
    "data",
    "extra_info",
    "status",
    "ci_low",
    "ci_high",
    "higher_is_better",
    "run_medians",
    "value_unit",
)
_STAT_KEYS = ("min", "max", "mean", "stddev", "median", "iqr", "ops")
# Numbers get numeric dtypes; everything else stays ``object`` so that a missing group
# or impl reads back as ``None`` (not NaN) and ``params``/``data`` keep their types.
_DTYPES = {
    **dict.fromkeys((*_STAT_KEYS, "ci_low", "ci_high"), "float64"),
    "rounds": "int64",
    "higher_is_better": "bool",
}
#: Result files larger than this are refused (no real one comes near it).
MAX_RESULT_BYTES = 512 * 2**20
_NAN = float("nan")


def load_results(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Load one pytest-benchmark JSON or asv result file into the results table.

    Args:
        path: the result file.

    Returns:
        One row per benchmark, in file order, with the columns in :data:`COLUMNS`
        and the run's metadata in ``df.attrs``.

    Raises:
        BenchInputError: the file is missing, not a regular file (a FIFO, a
            directory), not JSON, truncated, of an unsupported format version, or
            has a malformed benchmark entry; the message names the file and the
            problem.

    Example:
        >>> load_results("no/such/file.json")
        Traceback (most recent call last):
        ...
        rlpace.bench.errors.BenchInputError: no/such/file.json: no such file; expected a pytest-benchmark JSON or asv result file
    """
    source = str(path)
    doc = _read_json(Path(path), source)
    try:
        if "benchmarks" in doc:
            rows, attrs = read_pytest_benchmark(doc, source)
        elif "result_columns" in doc or ("results" in doc and "commit_hash" in doc):
            rows, attrs = read_asv(doc, source, Path(path))
        else:
            keys = ", ".join(sorted(str(k) for k in doc)[:8]) or "none"
            raise BenchInputError(
                f"{source}: not a benchmark result file: expected a pytest-benchmark JSON "
                f"(a 'benchmarks' list) or an asv result file ('results' and "
                f"'result_columns'), found keys: {keys}"
            )
        df = results_from_records(rows, **attrs)
    except BenchInputError:
        raise
    except (TypeError, ValueError, OverflowError, KeyError, AttributeError, RecursionError) as exc:
        # the checks above should catch every malformed value; this names the file if
        # one slipped through, instead of a traceback
        raise BenchInputError(
            f"{source}: malformed result file ({type(exc).__name__}: {str(exc)[:120]}); "
            "expected a pytest-benchmark JSON or asv result file as those tools write it"
        ) from None
    df.attrs["source"] = source
    return df


def _refused(source: str, exc: OSError) -> BenchInputError:
    """The error for a result file the system would not let this user read."""
    return BenchInputError(
        f"{source}: expected a result file this user can read, got the system's refusal "
        f"({exc.strerror}); fix: check the path and its permissions"
    )


def _read_json(path: Path, source: str) -> dict[str, Any]:
    """The file's top-level JSON object, refusing anything that is not a regular file
    (a FIFO would block forever) or larger than :data:`MAX_RESULT_BYTES`."""
    try:
        info = path.stat()
    except FileNotFoundError:
        raise BenchInputError(
            f"{source}: no such file; expected a pytest-benchmark JSON or asv result file"
        ) from None
    except OSError as exc:
        raise _refused(source, exc) from None
    if stat.S_ISDIR(info.st_mode):
        raise BenchInputError(
            f"{source}: is a directory; expected a result file (pass the JSON file itself, "
            "or a glob such as 'results/*.json')"
        )
    if not stat.S_ISREG(info.st_mode):
        raise BenchInputError(
            f"{source}: not a regular file (a pipe, socket or device); expected a result "
            "file on disk - save the output to a file first"
        )
    if info.st_size > MAX_RESULT_BYTES:
        raise BenchInputError(
            f"{source}: {info.st_size / 2**20:.0f} MiB is larger than any result file "
            f"({MAX_RESULT_BYTES / 2**20:.0f} MiB at most); expected a pytest-benchmark "
            "JSON or asv result file"
        )
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise BenchInputError(
            f"{source}: expected a pytest-benchmark JSON or asv result file (UTF-8 text), got "
            f"bytes that are not UTF-8 ({exc.reason} at byte {exc.start}); fix: pass the "
            "JSON file the benchmark run wrote, not a binary or re-encoded copy"
        ) from None
    except OSError as exc:
        raise _refused(source, exc) from None
    if not text.strip():
        raise BenchInputError(
            f"{source}: the file is empty; expected a pytest-benchmark JSON or asv result "
            "file (was the benchmark run interrupted?)"
        )
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BenchInputError(
            f"{source}: not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}); "
            "the file is truncated or corrupt - re-run the benchmarks to write it again"
        ) from None
    except RecursionError:
        raise BenchInputError(
            f"{source}: JSON nested deeper than any result file; expected a "
            "pytest-benchmark JSON or asv result file"
        ) from None
    except ValueError as exc:  # e.g. an integer with more digits than Python converts
        raise BenchInputError(f"{source}: not a usable JSON document ({exc})") from None
    if not isinstance(doc, dict):
        raise BenchInputError(
            f"{source}: expected a JSON object at the top level, got {type(doc).__name__}"
        )
    return doc


def results_from_records(records: Iterable[Mapping[str, Any]], **attrs: Any) -> pd.DataFrame:
    """Build a results table from row dicts (missing columns get their empty value).

    Useful for synthetic data in tests and for other loaders; ``attrs`` become
    ``df.attrs``. Statistics missing from a row with ``data`` are computed from it.

    Example:
        >>> df = results_from_records([{"fullname": "a", "data": [1.0, 3.0]}], source="x")
        >>> df.loc[0, "name"], float(df.loc[0, "mean"]), df.loc[0, "status"], df.attrs["source"]
        ('a', 2.0, 'ok', 'x')
    """
    rows = [_normalize_row(dict(r)) for r in records]
    df = pd.DataFrame(
        {col: pd.Series([r[col] for r in rows], dtype=_DTYPES.get(col, object)) for col in COLUMNS}
    )
    defaults = {
        "source": "",
        "format": "records",
        "format_version": None,
        "machine_info": {},
        "commit_info": {},
        "datetime": None,
    }
    df.attrs.update({**defaults, **attrs})
    return df


def _normalize_row(row: dict[str, Any]) -> dict[str, Any]:
    if "fullname" not in row or not row["fullname"]:
        raise BenchInputError(f"a result row needs a 'fullname', got keys {sorted(row)}")
    row.setdefault("name", row["fullname"])
    row.setdefault("group", None)
    params = row.get("params") or None
    row["params"] = dict(params) if params else None
    row["impl"] = row.get("impl") or (params.get("impl") if params else None)
    row.setdefault("extra_info", {})
    row["extra_info"] = dict(row["extra_info"] or {})
    data = row.get("data")
    if data is not None:
        data = [float(x) for x in data]
        row["data"] = data
        for key, value in summarize(data).items():
            if key in COLUMNS and _missing(row.get(key)):
                row[key] = value
    for key in _STAT_KEYS:
        value = row.get(key)
        row[key] = _NAN if value is None else float(value)
    row["value_unit"] = normalize_unit(row.get("value_unit"))
    if row["value_unit"] != SECONDS:
        row["ops"] = _NAN  # calls per second only mean something for timings
    elif _missing(row["ops"]) and math.isfinite(row["mean"]):
        row["ops"] = 1.0 / row["mean"] if row["mean"] > 0 else math.inf
    row["rounds"] = int(row.get("rounds") or 0)
    row.setdefault("data", None)
    if _missing(row.get("ci_low")) or _missing(row.get("ci_high")):
        row["ci_low"], row["ci_high"] = median_interval(row["median"], row["iqr"], row["rounds"])
    higher = row.get("higher_is_better")
    row["higher_is_better"] = (
        higher_is_better_for(row["value_unit"]) if higher is None else bool(higher)
    )
    if row.get("status") not in STATUSES:
        row["status"] = "ok" if math.isfinite(row["mean"]) else "failed"
    medians = row.get("run_medians")
    if medians is None:
        medians = [row["median"]] if row["status"] == "ok" and math.isfinite(row["median"]) else []
    row["run_medians"] = [float(m) for m in medians]
    return {key: row[key] for key in COLUMNS}


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


# ------------------------------------------------------------------------------ merge


_ENVIRONMENT_KEYS = ("node", "machine", "system", "python_version", "python_implementation")


def run_environment(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """What must match for two runs to be comparable: host, machine, OS, Python, CPU.

    Read from a results table's ``attrs`` (``machine_info``); keys the file does not
    record are left out.

    Example:
        >>> run_environment({"machine_info": {"node": "ci-1", "python_version": "3.11.7",
        ...                                    "cpu": {"brand_raw": "AMD EPYC"}}})
        {'node': 'ci-1', 'python_version': '3.11.7', 'cpu': 'AMD EPYC'}
    """
    info = attrs.get("machine_info") or {}
    env = {k: info.get(k) for k in _ENVIRONMENT_KEYS if info.get(k) is not None}
    cpu = info.get("cpu")
    brand = cpu.get("brand_raw") if isinstance(cpu, dict) else None
    if brand:
        env["cpu"] = brand
    return env


def environment_differences(
    a: Mapping[str, Any], b: Mapping[str, Any]
) -> dict[str, tuple[Any, Any]]:
    """Keys both environments record but with different values.

    Example:
        >>> environment_differences({"node": "a", "cpu": "x"}, {"node": "b"})
        {'node': ('a', 'b')}
    """
    return {k: (a[k], b[k]) for k in sorted(a.keys() & b.keys()) if a[k] != b[k]}


def merge_runs(frames: Iterable[pd.DataFrame]) -> pd.DataFrame:
    """Merge repeated runs of the same benchmarks into one results table.

    Rows are matched by ``fullname``; raw samples are concatenated in run order and
    every statistic is recomputed from them; ``run_medians`` keeps each run's median,
    so the process-to-process noise stays measurable after pooling. When some run lacks raw samples, the
    summaries are pooled instead (round-weighted mean and pooled variance, extreme
    min/max, round-weighted median and IQR). A benchmark that failed in any run is
    failed. Runs measured on different machines or Pythons are refused.

    Args:
        frames: tables from :func:`load_results`, e.g. K interleaved repeats.

    Returns:
        One row per benchmark in order of first appearance; ``attrs`` of the first
        frame plus ``runs`` (how many were merged) and ``sources``.

    Raises:
        BenchInputError: no frames were given.
        EnvironmentMismatchError: the runs come from different environments.

    Example:
        >>> a = results_from_records([{"fullname": "x", "data": [1.0, 2.0]}])
        >>> b = results_from_records([{"fullname": "x", "data": [3.0, 4.0]}])
        >>> merged = merge_runs([a, b])
        >>> merged.loc[0, "data"], float(merged.loc[0, "mean"]), merged.attrs["runs"]
        ([1.0, 2.0, 3.0, 4.0], 2.5, 2)
        >>> merged.loc[0, "run_medians"]
        [1.5, 3.5]
    """
    frames = list(frames)
    if not frames:
        raise BenchInputError("merge_runs: expected at least one results table, got none")
    first_env = run_environment(frames[0].attrs)
    for frame in frames[1:]:
        diff = environment_differences(first_env, run_environment(frame.attrs))
        if diff:
            detail = ", ".join(f"{k}: {a!r} vs {b!r}" for k, (a, b) in diff.items())
            raise EnvironmentMismatchError(
                f"merge_runs: {frame.attrs.get('source') or 'a run'} was measured in another "
                f"environment than {frames[0].attrs.get('source') or 'the first run'} ({detail}); "
                "merge only repeats from one machine and Python"
            )
    groups: dict[str, list[pd.Series]] = {}
    for frame in frames:
        for _, row in frame.iterrows():
            groups.setdefault(row["fullname"], []).append(row)
    merged = [_merge_rows(rows) for rows in groups.values()]
    attrs = dict(frames[0].attrs)
    attrs["runs"] = len(frames)
    attrs["sources"] = [f.attrs.get("source") for f in frames]
    return results_from_records(merged, **attrs)


def pool_runs(frames: Iterable[pd.DataFrame]) -> pd.DataFrame:
    """Merge runs as :func:`merge_runs` does, but as *one* measurement: each row keeps a
    single run median, its pooled median, so a judge reads it as one run a side.

    For runs that are one measurement split for the sake of the machine rather than
    repeats: ``pr``'s counted pass times its cases for display in two duets with the
    cores swapped between them, so that neither side keeps the faster core; their
    counts judge them, and the pair spread of two such runs is not a run-to-run noise
    any judge should see. It refuses what :func:`merge_runs` refuses.

    Example:
        >>> runs = [results_from_records([{"fullname": "y", "data": d}]) for d in ([1.0], [2.0])]
        >>> pooled = pool_runs(runs)
        >>> pooled.loc[0, "run_medians"], float(pooled.loc[0, "median"]), pooled.attrs["runs"]
        ([1.5], 1.5, 2)
    """
    merged = merge_runs(frames)
    merged["run_medians"] = pd.Series(
        [
            [float(median)] if status == "ok" and math.isfinite(float(median)) else runs
            for status, median, runs in zip(
                merged["status"], merged["median"], merged["run_medians"], strict=True
            )
        ],
        index=merged.index,
        dtype=object,
    )
    return merged


def _merge_rows(rows: list[pd.Series]) -> dict[str, Any]:
    first = rows[0]
    out: dict[str, Any] = {
        key: first[key]
        for key in (
            "fullname",
            "name",
            "group",
            "params",
            "impl",
            "extra_info",
            "higher_is_better",
            "value_unit",
        )
    }
    for status in ("failed", "skipped"):  # a run that failed fails the row, then one skipped
        if any(r["status"] == status for r in rows):
            out["status"] = status
            return out
    out["run_medians"] = [m for r in rows for m in r["run_medians"]]
    if all(r["data"] is not None for r in rows):
        out["data"] = [x for r in rows for x in r["data"]]
        return out
    n = np.array([max(int(r["rounds"]), 1) for r in rows], dtype=float)
    mean = np.array([r["mean"] for r in rows])
    std = np.array([r["stddev"] for r in rows])
    total = n.sum()
    grand = float((n * mean).sum() / total)
    within = float(((n - 1) * np.nan_to_num(std) ** 2).sum())
    between = float((n * (mean - grand) ** 2).sum())
    out.update(
        mean=grand,
        stddev=math.sqrt((within + between) / max(total - 1, 1)),
        min=float(min(r["min"] for r in rows)),
        max=float(max(r["max"] for r in rows)),
        median=float(np.average([r["median"] for r in rows], weights=n)),
        iqr=float(np.average([r["iqr"] for r in rows], weights=n)),
        rounds=int(sum(int(r["rounds"]) for r in rows)),
    )
    return out
