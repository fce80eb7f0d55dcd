"""Gate files: the count tier's A/A reading, kept between runs, and its summary figures.

``rlpace-bench count aa A.json B.json -o reports/counts/gates.json`` reads two (or
more) count runs of the same commit and writes ``{"format": "rlpace-count-gates",
"version": 1, "meta": {...}, "k": ..., "floor": ..., "gates": {test_id: {...}}}``.
Its ``meta`` is the first run's, so a gate file from another Valgrind or interpreter
is refused like a count file.

Example:
    >>> from rlpace.bench.counts.records import CaseCount, CountRun
    >>> a = CountRun({}, (CaseCount("t", "counted", instructions=1000.0, cycles=9.0),))
    >>> b = CountRun({}, (CaseCount("t", "counted", instructions=1002.0, cycles=9.0),))
    >>> summary = gate_summary(gate_from_aa([a, b]))
    >>> summary["detects_2pct"], summary["detects_5pct"]
    (1, 1)
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rlpace.bench._atomic import write_whole
from rlpace.bench.counts.records import CountRun
from rlpace.bench.counts.verdict import (
    DEFAULT_FLOOR,
    DEFAULT_K,
    CountGate,
    gate_from_aa,
    widen_gates,
)
from rlpace.bench.errors import BenchInputError
from rlpace.bench.suite import id_matches

__all__ = ["GATES_FORMAT", "gate_summary", "read_gates", "write_gates"]

GATES_FORMAT = "rlpace-count-gates"
GATES_FORMAT_VERSION = 1


def write_gates(
    runs: Sequence[CountRun],
    path: Path,
    *,
    k: float = DEFAULT_K,
    floor: float = DEFAULT_FLOOR,
    widen: Path | None = None,
    fresh: Sequence[str] = (),
) -> dict[str, CountGate]:
    """Compute per-case gates from A/A ``runs`` and write them to ``path``; with
    ``widen``, an earlier gate file, each case keeps the wider of the two readings,
    except the cases ``fresh`` names, which keep only this one
    (:func:`~rlpace.bench.counts.verdict.widen_gates`).

    Example:
        >>> write_gates([], Path("g.json"))
        Traceback (most recent call last):
        ...
        rlpace.bench.errors.BenchInputError: count aa: expected 2 or more count files of the same commit, got 0; fix: count the same tree twice
    """
    if len(runs) < 2:
        raise BenchInputError(
            f"count aa: expected 2 or more count files of the same commit, got {len(runs)}; "
            "fix: count the same tree twice"
        )
    commits = {r.meta.get("commit") for r in runs}
    if len(commits) > 1:
        raise BenchInputError(
            f"count aa: expected count files of one commit, got {sorted(map(str, commits))}; "
            "fix: count the same commit twice"
        )
    gates = gate_from_aa(runs)
    meta = dict(runs[0].meta)
    unmatched = [p for p in fresh if not any(id_matches(i, p) for i in gates)]
    if unmatched:
        raise BenchInputError(
            f"count aa: --fresh {' '.join(unmatched)}: expected test-id globs or substrings "
            f"of cases counted in every one of these runs, matched none of the {len(gates)}; "
            "fix: copy the id from the count file (brackets included) or use a glob with *"
        )
    if widen is not None:
        earlier, earlier_meta, _, _ = read_gates(widen)  # read before path is replaced
        gates = widen_gates(gates, earlier, fresh)
        meta["widened_with"] = {
            key: earlier_meta.get(key)
            for key in ("commit", "cpu", "host", "created", "fresh", "widened_with")
            if earlier_meta.get(key) is not None
        }
        if fresh:
            meta["fresh"] = list(fresh)
    elif fresh:
        raise BenchInputError(
            f"count aa: --fresh {' '.join(fresh)} names cases whose earlier reading no longer "
            "applies, but no earlier gate file was given; fix: add --widen GATES, or drop --fresh"
        )
    doc = {
        "format": GATES_FORMAT,
        "version": GATES_FORMAT_VERSION,
        "meta": meta,
        "k": k,
        "floor": floor,
        "gates": {i: asdict(g) for i, g in gates.items()},
    }
    write_whole(path, json.dumps(doc, indent=1) + "\n")  # the file it widens stays whole
    return gates


def read_gates(path: Path) -> tuple[dict[str, CountGate], dict[str, Any], float, float]:
    """``(gates, meta, k, floor)`` from a gate file; a foreign file raises with the fix.

    Example:
        >>> read_gates(Path("missing.json"))
        Traceback (most recent call last):
        ...
        rlpace.bench.errors.BenchInputError: missing.json: expected a count gate file, found none; fix: run `rlpace-bench count aa A.json B.json -o missing.json`
    """
    path = Path(path)
    if not path.is_file():
        raise BenchInputError(
            f"{path}: expected a count gate file, found none; "
            f"fix: run `rlpace-bench count aa A.json B.json -o {path}`"
        )
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise BenchInputError(f"{path}: expected JSON ({exc}); fix: write it again") from None
    if not isinstance(doc, Mapping) or doc.get("format") != GATES_FORMAT:
        raise BenchInputError(
            f"{path}: expected format {GATES_FORMAT!r}, got "
            f"{doc.get('format') if isinstance(doc, Mapping) else type(doc).__name__!r}; "
            "fix: pass a file written by `rlpace-bench count aa`"
        )
    if doc.get("version") != GATES_FORMAT_VERSION:
        raise BenchInputError(
            f"{path}: expected gate format version {GATES_FORMAT_VERSION}, got "
            f"{doc.get('version')!r}; fix: run `rlpace-bench count aa` again"
        )
    gates = {i: CountGate(**g) for i, g in doc.get("gates", {}).items()}
    return gates, dict(doc.get("meta", {})), float(doc["k"]), float(doc["floor"])


def gate_summary(
    gates: Mapping[str, CountGate], *, k: float = DEFAULT_K, floor: float = DEFAULT_FLOOR
) -> dict[str, Any]:
    """Figures of an A/A reading: spreads, and how many cases detect 2 % and 5 %.

    Example:
        >>> gate_summary({})["cases"]
        0
    """
    spreads = sorted(g.spread for g in gates.values())
    cycles = sorted(g.cycles_spread for g in gates.values())
    detect = [g.detectable(k, floor) for g in gates.values()]

    def pct(values: list[float], q: float) -> float | None:
        if not values:
            return None
        return round(100 * values[min(len(values) - 1, int(q * len(values)))], 4)

    return {
        "cases": len(gates),
        "spread_pct_median": round(100 * statistics.median(spreads), 4) if spreads else None,
        "spread_pct_p90": pct(spreads, 0.9),
        "spread_pct_max": pct(spreads, 1.0),
        "cycles_spread_pct_median": round(100 * statistics.median(cycles), 4) if cycles else None,
        "cycles_spread_pct_max": pct(cycles, 1.0),
        "detects_2pct": sum(d <= 0.02 for d in detect),
        "detects_5pct": sum(d <= 0.05 for d in detect),
    }
