"""asv result files (api versions 1 and 2) → result rows and run metadata.

Names stay whole (``module.Class.method(param)``), so two classes with a method of the
same name never print alike. Units and parameter names come from the suite's
``benchmarks.json`` one folder above the machine folder; without it the unit follows
the name (``time_*`` seconds, ``mem_*``/``peakmem_*`` bytes, ``track_*`` a count).
"""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from rlpace.bench import _result_checks as check
from rlpace.bench.errors import BenchInputError
from rlpace.bench.units import BYTES, SECONDS, higher_is_better_for, normalize_unit

SUPPORTED_ASV_API = (1, 2)
#: Parameter grids larger than this are refused (a corrupt file, not a benchmark).
MAX_COMBINATIONS = 100_000
# JavaScript timestamps pandas can hold (ms since 1970, up to the year 2262).
_MAX_JS_TIME = 9.2e12


def read_asv(
    doc: dict[str, Any], source: str, path: Path
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The rows and ``attrs`` of one asv result file."""
    version = doc.get("version")
    if version not in SUPPORTED_ASV_API or isinstance(version, bool):
        raise BenchInputError(
            f"{source}: asv result api version {check.show(version)}, expected one of "
            f"{', '.join(map(str, SUPPORTED_ASV_API))}; upgrade the file with `asv update` "
            "(asv >= 0.5) and load it again"
        )
    results = doc.get("results")
    if not isinstance(results, dict):
        raise BenchInputError(
            f"{source}: an asv result file needs a 'results' object, got "
            f"{type(results).__name__}; the file is truncated or not an asv result file"
        )
    suite = _suite_metadata(path)
    rows: list[dict[str, Any]] = []
    if version == 2:
        columns = doc.get("result_columns")
        if not isinstance(columns, list) or not all(isinstance(c, str) for c in columns):
            raise BenchInputError(
                f"{source}: an asv api-2 result file needs a 'result_columns' list of "
                "names; the file is truncated or not an asv result file"
            )
        for bench, values in results.items():
            if not isinstance(values, list):
                raise BenchInputError(
                    f"{source}: results[{check.show(bench, 60)}] must be a list of the "
                    f"'result_columns' values, got {type(values).__name__}"
                )
            entry = dict(zip(columns, values))
            rows.extend(_rows(bench, entry, suite.get(bench, {}), source))
    else:
        for bench, value in results.items():
            rows.extend(_rows(bench, _v1_entry(value), suite.get(bench, {}), source))
    machine = check.mapping(doc.get("params"), f"{source}: 'params' (the machine)")
    commit = doc.get("commit_hash")
    attrs = {
        "format": "asv",
        "format_version": str(version),
        "machine_info": {
            **machine,
            "python": doc.get("python") if isinstance(doc.get("python"), str) else None,
            "env_name": doc.get("env_name") if isinstance(doc.get("env_name"), str) else None,
        },
        "commit_info": {
            "id": commit if isinstance(commit, str) else None,
            # asv's 'date' is the commit's date
            "time": _js_timestamp(doc.get("date"), source),
        },
        "datetime": _js_timestamp(doc.get("date"), source),
    }
    return rows, attrs


def _v1_entry(value: Any) -> dict[str, Any]:
    """An api-1 result (a number, null, NaN or an object) in api-2 column form."""
    if isinstance(value, dict):
        entry = {"params": value.get("params") or [], "result": value.get("result")}
        if not entry["params"] and not isinstance(entry["result"], list):
            entry["result"] = [entry["result"]]
        stats = value.get("stats")
        if isinstance(stats, list):
            entry["stats_ci_99_a"] = [_ci(s, 0) for s in stats]
            entry["stats_ci_99_b"] = [_ci(s, 1) for s in stats]
            entry["stats_q_25"] = [s.get("q_25") if isinstance(s, dict) else None for s in stats]
            entry["stats_q_75"] = [s.get("q_75") if isinstance(s, dict) else None for s in stats]
            entry["stats_repeat"] = [
                s.get("repeat") if isinstance(s, dict) else None for s in stats
            ]
        if "samples" in value:
            entry["samples"] = value["samples"]
        return entry
    return {"params": [], "result": [value]}


def _ci(stats: Any, i: int) -> Any:
    ci = stats.get("ci_99") if isinstance(stats, dict) else None
    return ci[i] if isinstance(ci, list) and len(ci) == 2 else None


def _suite_metadata(path: Path) -> dict[str, dict[str, Any]]:
    """``benchmarks.json`` (one folder above the machine folder): parameter names and
    units per benchmark; empty when there is none."""
    candidate = path.parent.parent / "benchmarks.json"
    if not candidate.is_file():
        return {}
    try:
        doc = json.loads(candidate.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise BenchInputError(
            f"{candidate}: cannot read asv's benchmark list ({type(exc).__name__}); "
            "delete it or re-create it with `asv run`"
        ) from None
    if not isinstance(doc, dict):
        raise BenchInputError(
            f"{candidate}: expected asv's benchmark list (an object keyed by benchmark "
            f"name), got {type(doc).__name__}; re-create it with `asv run`"
        )
    out = {}
    for name, meta in doc.items():
        if not isinstance(meta, dict):
            continue  # "version": 2
        names = meta.get("param_names") or []
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise BenchInputError(
                f"{candidate}: {check.show(name, 60)}: 'param_names' must be a list of "
                f"strings, got {check.show(names)}; re-create the file with `asv run`"
            )
        unit = meta.get("unit")
        if unit is not None and not isinstance(unit, str):
            raise BenchInputError(
                f"{candidate}: {check.show(name, 60)}: 'unit' must be a string, got "
                f"{check.show(unit)}"
            )
        out[name] = {"param_names": names, "unit": unit, "type": meta.get("type")}
    return out


def _unit_of(bench: str, meta: dict[str, Any]) -> str:
    if isinstance(meta.get("unit"), str):
        return normalize_unit(meta["unit"])
    method = bench.rsplit(".", 1)[-1]
    if method.startswith(("mem_", "peakmem_")):
        return BYTES
    if method.startswith("track_"):
        return "unit"
    return SECONDS


def _column(entry: dict[str, Any], key: str, n: int, where: str) -> list[Any]:
    value = entry.get(key)
    if value is None or value == [None]:  # [None]: asv api 1's grid that failed whole
        return [None] * n
    if not isinstance(value, list) or len(value) != n:
        raise BenchInputError(
            f"{where}: '{key}' must be a list with one value per parameter combination "
            f"({n}), got {check.show(value)}"
        )
    return value


def _rows(
    bench: Any, entry: dict[str, Any], meta: dict[str, Any], source: str
) -> list[dict[str, Any]]:
    where = f"{source}: results[{check.show(bench, 60)}]"
    param_values = entry.get("params") or []
    if not isinstance(param_values, list) or not all(
        isinstance(values, list) and all(isinstance(v, str) for v in values)
        for values in param_values
    ):
        raise BenchInputError(
            f"{where}: 'params' must be a list of lists of strings (asv writes each "
            f"parameter value as its repr), got {check.show(param_values)}"
        )
    n = math.prod(len(values) for values in param_values) if param_values else 1
    if n > MAX_COMBINATIONS:
        raise BenchInputError(
            f"{where}: {n} parameter combinations (more than {MAX_COMBINATIONS}); "
            "the file is corrupt"
        )
    combos = list(itertools.product(*param_values)) if param_values else [()]
    result = entry.get("result")
    if result is None or result == [None]:
        # asv's api 1 wrote one null for a parameterized benchmark that failed as a
        # whole (its setup raised for every combination): each combination failed
        result = [None] * len(combos)
    if not isinstance(result, list) or len(result) != len(combos):
        got = f"{len(result)} results" if isinstance(result, list) else check.show(result)
        raise BenchInputError(f"{where}: {len(combos)} parameter combinations but {got}")
    samples = _column(entry, "samples", len(combos), where)
    ci_a = _column(entry, "stats_ci_99_a", len(combos), where)
    ci_b = _column(entry, "stats_ci_99_b", len(combos), where)
    q25 = _column(entry, "stats_q_25", len(combos), where)
    q75 = _column(entry, "stats_q_75", len(combos), where)
    repeat = _column(entry, "stats_repeat", len(combos), where)
    unit = _unit_of(bench, meta)
    higher = higher_is_better_for(unit)
    names = meta.get("param_names") or []
    rows = []
    for j, combo in enumerate(combos):
        keys = names if len(names) == len(combo) else [f"param{i + 1}" for i in range(len(combo))]
        fullname = f"{bench}({', '.join(combo)})" if combo else bench
        at = f"{where} {check.show(fullname, 80)}"
        row: dict[str, Any] = {
            "fullname": fullname,
            "name": fullname,
            "group": bench.rsplit(".", 1)[0] if "." in bench else None,
            "params": {k: _asv_value(v) for k, v in zip(keys, combo)} or None,
            "higher_is_better": higher,
            "value_unit": unit,
            "extra_info": {"asv_benchmark": bench},
        }
        value = result[j]
        if value is None or (isinstance(value, float) and math.isnan(value)):
            row["status"] = "failed" if value is None else "skipped"
            rows.append(row)
            continue
        value = check.number(
            value, f"{at}: result", minimum=0 if unit in (SECONDS, BYTES) else None
        )
        if samples[j]:
            row["data"] = check.numbers(
                samples[j], f"{at}: samples", minimum=0 if unit in (SECONDS, BYTES) else None
            )
        else:
            reps = repeat[j]
            row.update(
                median=value,
                mean=value,
                rounds=check.rounds(reps, f"{at}: stats_repeat") if reps is not None else 1,
            )
            if q25[j] is not None and q75[j] is not None:
                low = check.number(q25[j], f"{at}: stats_q_25")
                high = check.number(q75[j], f"{at}: stats_q_75")
                row["iqr"] = max(high - low, 0.0)
        if ci_a[j] is not None and ci_b[j] is not None:
            low = check.number(ci_a[j], f"{at}: stats_ci_99_a")
            high = check.number(ci_b[j], f"{at}: stats_ci_99_b")
            row["ci_low"], row["ci_high"] = min(low, high), max(low, high)
        rows.append(row)
    return rows


def _asv_value(text: str) -> Any:
    import ast

    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text


def _js_timestamp(value: Any, source: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BenchInputError(
            f"{source}: 'date' must be a JavaScript timestamp (milliseconds since 1970), "
            f"got {check.show(value)}"
        )
    if not (math.isfinite(value) and 0 <= value <= _MAX_JS_TIME):
        raise BenchInputError(
            f"{source}: 'date' = {check.show(value)} is not a JavaScript timestamp of a "
            "real day (milliseconds since 1970); the file is corrupt"
        )
    return pd.Timestamp(value, unit="ms", tz="UTC").isoformat()
