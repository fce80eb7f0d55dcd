"""pytest-benchmark JSON (2.x to 5.x) → result rows and run metadata.

The rows are dicts that :func:`rlpace.bench.results.results_from_records` turns into
the results table; every value has been type-checked here, so nothing later meets a
string where a number belongs.
"""

from __future__ import annotations

from typing import Any

from rlpace.bench import _result_checks as check
from rlpace.bench.errors import BenchInputError
from rlpace.bench.units import SECONDS

SUPPORTED_PYTEST_BENCHMARK = (2, 3, 4, 5)
_STAT_KEYS = ("min", "max", "mean", "stddev", "median", "iqr", "ops")


def major_version(doc: dict[str, Any], source: str) -> int:
    version = doc.get("version")
    if not isinstance(version, str):
        raise BenchInputError(
            f"{source}: a pytest-benchmark file needs a string 'version' (e.g. \"5.1.0\"), "
            f"got {check.show(version)}; write it with pytest-benchmark >= 3 (--benchmark-json)"
        )
    try:
        major = int(version.split(".")[0])
    except ValueError:
        raise BenchInputError(
            f"{source}: cannot read pytest-benchmark version {check.show(version)}; "
            "expected 'X.Y.Z'"
        ) from None
    if major not in SUPPORTED_PYTEST_BENCHMARK:
        raise BenchInputError(
            f"{source}: written by pytest-benchmark {version[:20]}, but only versions "
            f"{SUPPORTED_PYTEST_BENCHMARK[0]}-{SUPPORTED_PYTEST_BENCHMARK[-1]} are supported; "
            "re-run the benchmarks with a supported pytest-benchmark (ci/requirements.txt pins one)"
        )
    return major


def read_pytest_benchmark(
    doc: dict[str, Any], source: str
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The rows and the ``attrs`` of one pytest-benchmark JSON document."""
    major_version(doc, source)
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
        if not isinstance(fullname, str) or not fullname.strip():
            raise BenchInputError(
                f"{where}: expected a 'fullname' (or 'name') string, got {check.show(fullname)}"
            )
        name = entry.get("name") or fullname
        if not isinstance(name, str):
            raise BenchInputError(f"{where}: 'name' must be a string, got {check.show(name)}")
        if fullname in seen:
            raise BenchInputError(
                f"{where}: benchmark {check.show(fullname, 80)} appears twice; one file must "
                "hold one run (pass repeats as several files: they are merged as runs)"
            )
        seen.add(fullname)
        where = f"{where} ({fullname[:60]})"
        row: dict[str, Any] = {
            "fullname": fullname,
            "name": name,
            "group": check.optional_text(entry.get("group"), f"{where}: 'group'"),
            "params": check.mapping(entry.get("params"), f"{where}: 'params'") or None,
            "extra_info": check.mapping(entry.get("extra_info"), f"{where}: 'extra_info'"),
            "value_unit": SECONDS,
        }
        stats = entry.get("stats")
        if stats is None:
            row["status"] = "failed"
        elif not isinstance(stats, dict):
            raise BenchInputError(f"{where}: 'stats' must be an object, got {type(stats).__name__}")
        else:
            row.update(_stats(stats, where))
        rows.append(row)
    datetime = doc.get("datetime")
    attrs = {
        "format": "pytest-benchmark",
        "format_version": doc["version"],
        "machine_info": check.mapping(doc.get("machine_info"), f"{source}: 'machine_info'"),
        "commit_info": check.mapping(doc.get("commit_info"), f"{source}: 'commit_info'"),
        "datetime": datetime if isinstance(datetime, str) else None,
    }
    return rows, attrs


def _stats(stats: dict[str, Any], where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    data = stats.get("data")
    if data is not None:
        out["data"] = check.numbers(data, f"{where}: 'stats.data' (seconds per round)", minimum=0)
    for key in _STAT_KEYS:
        value = stats.get(key)
        if value is not None:
            out[key] = check.number(value, f"{where}: 'stats.{key}'", allow_nan=True, minimum=0)
    if "rounds" in stats and stats["rounds"] is not None:
        out["rounds"] = check.rounds(stats["rounds"], f"{where}: 'stats.rounds'")
    if out.get("ops") == 0:
        raise BenchInputError(
            f"{where}: 'stats.ops' is 0, which no finished benchmark can measure; "
            "the file is corrupt or hand-edited"
        )
    if "iqr" not in out and stats.get("q1") is not None and stats.get("q3") is not None:
        q1 = check.number(stats["q1"], f"{where}: 'stats.q1'", minimum=0)
        q3 = check.number(stats["q3"], f"{where}: 'stats.q3'", minimum=0)
        out["iqr"] = q3 - q1
    if data is not None:
        if "rounds" in out and len(out["data"]) != out["rounds"]:
            raise BenchInputError(
                f"{where}: 'stats.data' holds {len(out['data'])} values but 'stats.rounds' says "
                f"{out['rounds']}; raw data has one value per round, so the file was cut or "
                "edited - re-run the benchmarks (--benchmark-json) to write it again"
            )
    elif "mean" not in out:
        raise BenchInputError(
            f"{where}: 'stats' has neither 'mean' nor raw 'data'; "
            "the file is truncated or was not written by pytest-benchmark"
        )
    return out
