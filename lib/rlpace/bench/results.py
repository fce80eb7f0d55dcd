"""Result files → one normalized results table.

Reads pytest-benchmark JSON (``--benchmark-json`` or ``--benchmark-save`` output of
pytest-benchmark 3, 4 and 5, with or without raw ``data``) and asv result files (api
version 2, as written by ``asv run``) into a :class:`pandas.DataFrame` with one row per
benchmark. Every later stage (comparison, rendering, the PR pipeline) reads only this
table.

Columns (:data:`COLUMNS`): ``fullname`` (the key), ``name``, ``group``, ``params``
(dict or None), ``impl`` (``params["impl"]`` or None), ``min``, ``max``, ``mean``,
``stddev``, ``median``, ``iqr``, ``ops``, ``rounds``, ``data`` (list of per-round
seconds, or None), ``extra_info`` (dict), ``status`` (``"ok"``/``"failed"``),
``ci_low``/``ci_high`` (an interval for the location when the file has one, else NaN),
``higher_is_better`` (False for times), ``run_medians`` (the median of each merged run,
one per benchmark process, in run order: process-to-process noise is measured on
these; a single run's table has one).

``df.attrs`` holds ``source``, ``format`` (``"pytest-benchmark"``/``"asv"``),
``format_version``, ``machine_info``, ``commit_info`` and ``datetime``.

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

import ast
import itertools
import json
import math
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rlpace.bench.errors import BenchInputError, EnvironmentMismatchError
from rlpace.bench.stats import median_interval, summarize

__all__ = [
    "COLUMNS",
    "environment_differences",
    "load_results",
    "merge_runs",
    "results_from_records",
    "run_environment",
]

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
)
_STAT_KEYS = ("min", "max", "mean", "stddev", "median", "iqr", "ops")
# Numbers get numeric dtypes; everything else stays ``object`` so that a missing group
# or impl reads back as ``None`` (not NaN) and ``params``/``data`` keep their types.
_DTYPES = {
    **dict.fromkeys((*_STAT_KEYS, "ci_low", "ci_high"), "float64"),
    "rounds": "int64",
    "higher_is_better": "bool",
}
SUPPORTED_PYTEST_BENCHMARK = (3, 4, 5)
SUPPORTED_ASV_API = 2
_NAN = float("nan")


def load_results(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Load one pytest-benchmark JSON or asv result file into the results table.

    Args:
        path: the result file.

    Returns:
        One row per benchmark, in file order, with the columns in :data:`COLUMNS`
        and the run's metadata in ``df.attrs``.

    Raises:
        BenchInputError: the file is missing, not JSON, truncated, of an unsupported
            format version, or has a malformed benchmark entry; the message names the
            file and the problem.

    Example:
        >>> load_results("no/such/file.json")
        Traceback (most recent call last):
        ...
        rlpace.bench.errors.BenchInputError: no/such/file.json: no such file; expected a pytest-benchmark JSON or asv result file
    """
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BenchInputError(
            f"{source}: no such file; expected a pytest-benchmark JSON or asv result file"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BenchInputError(f"{source}: cannot read the file ({exc})") from None
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
    if not isinstance(doc, dict):
        raise BenchInputError(
            f"{source}: expected a JSON object at the top level, got {type(doc).__name__}"
        )
    if "benchmarks" in doc:
        df = _from_pytest_benchmark(doc, source)
    elif "result_columns" in doc or ("results" in doc and "commit_hash" in doc):
        df = _from_asv(doc, source, Path(path))
    else:
        keys = ", ".join(sorted(doc)[:8]) or "none"
        raise BenchInputError(
            f"{source}: not a benchmark result file: expected a pytest-benchmark JSON "
            f"(a 'benchmarks' list) or an asv result file ('results' and "
            f"'result_columns'), found keys: {keys}"
        )
    df.attrs["source"] = source
    return df


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
    if _missing(row["ops"]) and math.isfinite(row["mean"]):
        row["ops"] = 1.0 / row["mean"] if row["mean"] > 0 else math.inf
    row["rounds"] = int(row.get("rounds") or 0)
    row.setdefault("data", None)
    if _missing(row.get("ci_low")) or _missing(row.get("ci_high")):
        row["ci_low"], row["ci_high"] = median_interval(row["median"], row["iqr"], row["rounds"])
    row["higher_is_better"] = bool(row.get("higher_is_better", False))
    if row.get("status") not in ("ok", "failed"):
        row["status"] = "ok" if math.isfinite(row["mean"]) else "failed"
    medians = row.get("run_medians")
    if medians is None:
        medians = [row["median"]] if row["status"] == "ok" and math.isfinite(row["median"]) else []
    row["run_medians"] = [float(m) for m in medians]
    return {key: row[key] for key in COLUMNS}


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


# --------------------------------------------------------------------- pytest-benchmark


def _pytest_benchmark_major(doc: dict[str, Any], source: str) -> int:
    version = doc.get("version")
    if not isinstance(version, str):
        raise BenchInputError(
            f"{source}: a pytest-benchmark file needs a string 'version' (e.g. \"5.1.0\"), "
            f"got {version!r}; write it with pytest-benchmark >= 3 (--benchmark-json)"
        )
    try:
        major = int(version.split(".")[0])
    except ValueError:
        raise BenchInputError(
            f"{source}: cannot read pytest-benchmark version {version!r}; expected 'X.Y.Z'"
        ) from None
    if major not in SUPPORTED_PYTEST_BENCHMARK:
        raise BenchInputError(
            f"{source}: written by pytest-benchmark {version}, but only versions "
            f"{SUPPORTED_PYTEST_BENCHMARK[0]}-{SUPPORTED_PYTEST_BENCHMARK[-1]} are supported; "
            "re-run the benchmarks with a supported pytest-benchmark (ci/requirements.txt pins one)"
        )
    return major


def _from_pytest_benchmark(doc: dict[str, Any], source: str) -> pd.DataFrame:
    _pytest_benchmark_major(doc, source)
    benchmarks = doc["benchmarks"]
    if not isinstance(benchmarks, list):
        raise BenchInputError(
            f"{source}: 'benchmarks' must be a list of benchmark entries, "
            f"got {type(benchmarks).__name__}"
        )
    rows, seen = [], set()
    for index, entry in enumerate(benchmarks):
        where = f"{source}: benchmarks[{index}]"
        if not isinstance(entry, dict):
            raise BenchInputError(f"{where}: expected an object, got {type(entry).__name__}")
        fullname = entry.get("fullname") or entry.get("name")
        if not isinstance(fullname, str) or not fullname:
            raise BenchInputError(f"{where}: expected a 'fullname' (or 'name') string")
        if fullname in seen:
            raise BenchInputError(
                f"{where}: benchmark {fullname!r} appears twice; one file must hold one "
                "run (merge repeats with rlpace.bench.results.merge_runs)"
            )
        seen.add(fullname)
        stats = entry.get("stats")
        row: dict[str, Any] = {
            "fullname": fullname,
            "name": entry.get("name") or fullname,
            "group": entry.get("group"),
            "params": entry.get("params"),
            "extra_info": entry.get("extra_info") or {},
        }
        if stats is None:
            row["status"] = "failed"
        elif not isinstance(stats, dict):
            raise BenchInputError(
                f"{where} ({fullname}): 'stats' must be an object, got {type(stats).__name__}"
            )
        else:
            row.update(_pytest_benchmark_stats(stats, where, fullname))
        rows.append(row)
    attrs = {
        "format": "pytest-benchmark",
        "format_version": doc["version"],
        "machine_info": doc.get("machine_info") or {},
        "commit_info": doc.get("commit_info") or {},
        "datetime": doc.get("datetime"),
    }
    return results_from_records(rows, **attrs)


def _pytest_benchmark_stats(stats: dict[str, Any], where: str, fullname: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    data = stats.get("data")
    if data is not None:
        if not isinstance(data, list) or not all(
            isinstance(x, int | float) and not isinstance(x, bool) for x in data
        ):
            raise BenchInputError(
                f"{where} ({fullname}): 'stats.data' must be a list of numbers (seconds per round)"
            )
        out["data"] = data
    for key in (*_STAT_KEYS, "rounds"):
        value = stats.get(key)
        if value is None:
            continue
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise BenchInputError(
                f"{where} ({fullname}): 'stats.{key}' must be a number, got {value!r}"
            )
        out[key] = value
    if (
        "iqr" not in out
        and isinstance(stats.get("q1"), int | float)
        and isinstance(stats.get("q3"), int | float)
    ):
        out["iqr"] = stats["q3"] - stats["q1"]
    if data is None and "mean" not in out:
        raise BenchInputError(
            f"{where} ({fullname}): 'stats' has neither 'mean' nor raw 'data'; "
            "the file is truncated or was not written by pytest-benchmark"
        )
    return out


# ------------------------------------------------------------------------------- asv


def _from_asv(doc: dict[str, Any], source: str, path: Path) -> pd.DataFrame:
    version = doc.get("version")
    if version != SUPPORTED_ASV_API:
        raise BenchInputError(
            f"{source}: asv result api version {version!r}, expected {SUPPORTED_ASV_API}; "
            "upgrade the file with `asv update` (asv >= 0.5) and load it again"
        )
    columns, results = doc.get("result_columns"), doc.get("results")
    if not isinstance(columns, list) or not isinstance(results, dict):
        raise BenchInputError(
            f"{source}: an asv result file needs a 'result_columns' list and a 'results' "
            "object; the file is truncated or not an asv result file"
        )
    param_names = _asv_param_names(path)
    rows = []
    for bench, values in results.items():
        if not isinstance(values, list):
            raise BenchInputError(f"{source}: results[{bench!r}] must be a list")
        entry = dict(zip(columns, values))
        rows.extend(_asv_rows(bench, entry, param_names.get(bench), source))
    machine = doc.get("params") or {}
    attrs = {
        "format": "asv",
        "format_version": str(version),
        "machine_info": {**machine, "python": doc.get("python"), "env_name": doc.get("env_name")},
        "commit_info": {"id": doc.get("commit_hash")},
        "datetime": _js_timestamp(doc.get("date")),
    }
    return results_from_records(rows, **attrs)


def _asv_param_names(path: Path) -> dict[str, list[str]]:
    """Parameter names live in ``results/benchmarks.json``, one folder above the file."""
    candidate = path.parent.parent / "benchmarks.json"
    try:
        doc = json.loads(candidate.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {
        name: list(meta.get("param_names") or [])
        for name, meta in doc.items()
        if isinstance(meta, dict)
    }


def _asv_rows(
    bench: str, entry: dict[str, Any], names: list[str] | None, source: str
) -> list[dict[str, Any]]:
    param_values = entry.get("params") or []
    combos = list(itertools.product(*param_values)) if param_values else [()]
    result = entry.get("result")
    if result is None:
        result = [None] * len(combos)
    if not isinstance(result, list) or len(result) != len(combos):
        raise BenchInputError(
            f"{source}: results[{bench!r}]: {len(combos)} parameter combinations but "
            f"{len(result) if isinstance(result, list) else result!r} results"
        )

    def column(key: str) -> list[Any]:
        value = entry.get(key)
        return value if isinstance(value, list) else [None] * len(combos)

    samples, ci_a, ci_b = column("samples"), column("stats_ci_99_a"), column("stats_ci_99_b")
    q25, q75, repeat = column("stats_q_25"), column("stats_q_75"), column("stats_repeat")
    higher = bench.rsplit(".", 1)[-1].startswith("track_")
    rows = []
    for j, combo in enumerate(combos):
        keys = (
            names
            if names and len(names) == len(combo)
            else [f"param{i + 1}" for i in range(len(combo))]
        )
        params = {k: _asv_value(v) for k, v in zip(keys, combo)}
        fullname = f"{bench}({', '.join(combo)})" if combo else bench
        value = result[j]
        row: dict[str, Any] = {
            "fullname": fullname,
            "name": fullname.rsplit(".", 1)[-1],
            "group": bench.rsplit(".", 1)[0] if "." in bench else None,
            "params": params or None,
            "higher_is_better": higher,
            "extra_info": {"asv_benchmark": bench},
        }
        if value is None or (isinstance(value, float) and math.isnan(value)):
            row["status"] = "failed"
            row["extra_info"]["asv_outcome"] = "failed" if value is None else "skipped"
        elif samples[j]:
            row["data"] = samples[j]
        else:
            row.update(median=value, mean=value, rounds=repeat[j] or 0)
            if q25[j] is not None and q75[j] is not None:
                row["iqr"] = q75[j] - q25[j]
        if ci_a[j] is not None and ci_b[j] is not None and row.get("status") != "failed":
            row["ci_low"], row["ci_high"] = float(ci_a[j]), float(ci_b[j])
        rows.append(row)
    return rows


def _asv_value(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _js_timestamp(value: Any) -> str | None:
    if not isinstance(value, int | float):
        return None
    return pd.Timestamp(value, unit="ms", tz="UTC").isoformat()


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


def _merge_rows(rows: list[pd.Series]) -> dict[str, Any]:
    first = rows[0]
    out: dict[str, Any] = {
        key: first[key]
        for key in ("fullname", "name", "group", "params", "impl", "extra_info", "higher_is_better")
    }
    if any(r["status"] == "failed" for r in rows):
        out["status"] = "failed"
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
