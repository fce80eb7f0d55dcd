"""Rows whose values count work: judged on the count gate, not on a timing's noise.

An asv ``track_*`` benchmark of the count tier (``counts.Counts.track_instructions``)
or of the work counts (``work.Work.track_ops`` ...) records a count, not a time.
Two processes of the same code count the same to within 1 %
(:data:`~rlpace.bench.units.COUNT_UNITS`), however busy the machine, so the timings'
rules would blind the comparator: one value a side would be judged against an
assumed ±10 % of process noise and the 5 % threshold, and a +3 % instruction step
would read "noise".

:func:`counted` says whether a row is such a count; :func:`count_verdict` judges it
the way the count tier judges its own counts (:mod:`rlpace.bench.counts.verdict`):
the change must beat the gate ``max(k × spread, floor)``, where ``spread`` is the
largest relative difference between the runs of one side (0 with one run a side) and
``floor`` the count threshold (1 %). There is no interval to build and nothing to
test: the count does not move with the load.

Example:
    >>> counted("instructions", 1, 1), counted("Python calls", 1, 1), counted("seconds", 3, 3)
    (True, False, False)
    >>> out = count_verdict([1.03e6], [1.0e6], floor_pct=1.0)
    >>> out["verdict"], round(out["median_change_pct"], 2), out["noise_pct"]
    ('worsened', -2.91, 1.0)
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

from rlpace.bench.counts.verdict import DEFAULT_K, CountGate, relative_change, relative_spread
from rlpace.bench.units import COUNT_UNITS, STEADY_COUNT_UNITS

__all__ = ["count_verdict", "counted"]


def counted(unit: str, head_runs: int, base_runs: int) -> bool:
    """Whether a row in ``unit`` with that many runs a side is judged as a count.

    A :data:`~rlpace.bench.units.STEADY_COUNT_UNITS` count always is. A count that may
    follow the clock (Python calls: a waiting thread polls) is only with two or more
    runs a side, whose spread then sets its gate; with one run a side it keeps the
    timings' rules, whose assumed process noise covers it.

    Example:
        >>> counted("aten ops", 1, 1), counted("worker Python calls", 2, 3)
        (True, True)
        >>> counted("cycles", 5, 5)  # the count tier's estimated cycles: a cache model
        False
    """
    if unit in STEADY_COUNT_UNITS:
        return True
    return unit in COUNT_UNITS and min(head_runs, base_runs) >= 2


def count_verdict(
    head: Sequence[float], base: Sequence[float], *, floor_pct: float, k: float = DEFAULT_K
) -> dict[str, Any]:
    """Judge the counts of one benchmark, each side's runs given (one value a run).

    Returns the fields of a :class:`~rlpace.bench.comparison.BenchmarkChange` this
    judging decides: ``method`` (``"counted"``), ``change_pct`` and
    ``median_change_pct`` (positive is better: fewer counted), ``noise_pct`` (the
    gate), ``mdc_pct`` (the gate plus the spread: a change that large clears the gate
    even when the spread works against it), ``verdict`` (its value) and ``note``. A
    count of 0 on one side has no ratio: 0 → more is ``worsened``, more → 0 is
    ``improved``, 0 on both sides ``unchanged``.

    Args:
        head: the head side's run values (a median per run).
        base: the base side's.
        floor_pct: the smallest gate, in % (the count threshold).
        k: the gate is ``k`` times the larger side's spread when that is above the floor.

    Example:
        >>> count_verdict([100.0, 100.5], [100.0, 100.2], floor_pct=1.0)["noise_pct"]
        2.0
        >>> count_verdict([5.0], [0.0], floor_pct=1.0)["verdict"]
        'worsened'
    """
    h, b = statistics.median(head), statistics.median(base)
    spread = max(relative_spread(head), relative_spread(base))
    gate = CountGate(spread=spread, cycles_spread=0.0, runs=min(len(head), len(base)))
    floor = floor_pct / 100
    noise = gate.threshold(k, floor) * 100
    out: dict[str, Any] = {
        "method": "counted",
        "noise_pct": noise,
        "mdc_pct": gate.detectable(k, floor) * 100,
    }
    one_run = min(len(head), len(base)) < 2
    own = (
        f"the count gate ±{noise:.1f}% (the count threshold: one run a side, and a count "
        "does not follow the machine's load)"
        if one_run or noise <= floor_pct
        else f"the count gate ±{noise:.1f}% ({k:g} × its runs' spread of {spread * 100:.2f}%)"
    )
    if math.isinf(spread):
        return {
            **out,
            "verdict": "unchanged",
            "note": "its runs of one side counted 0 and more: the count cannot be judged",
        }
    if h == 0 or b == 0:
        if h == b:
            return {**out, "verdict": "unchanged", "note": "counted 0 on both sides"}
        worse = b == 0
        return {
            **out,
            "verdict": "worsened" if worse else "improved",
            "note": f"counted {b:g} in base and {h:g} in head: no ratio, judged as "
            + ("new work" if worse else "work gone"),
        }
    out["change_pct"] = (b / h - 1) * 100
    out["median_change_pct"] = (b / h - 1) * 100
    change = abs(relative_change(h, b)) * 100
    moved = change > noise
    out["verdict"] = ("worsened" if h > b else "improved") if moved else "unchanged"
    out["note"] = f"a count: judged against {own}"
    return out
