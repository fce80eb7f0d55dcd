"""What a comparison could have seen: how many benchmarks would have caught a slow-down.

A comment that says "no regressions" means little without the size of change the run
could tell from noise. :func:`sensitivity` reads it off a judged comparison's rows, the
same figures the comment's *Detectable* column shows:

- a row the count tier judged (its ``count_verdict`` is ``same``, ``regression`` or
  ``improvement``) catches what clears its instruction gate: ``count_detect_pct``, the
  gate plus the case's A/A spread (the gate alone in older records);
- a row whose value is a count of work (method ``"counted"``: an asv ``track_*`` of
  instructions or aten ops, :mod:`rlpace.bench.counted_rows`) catches its ``mdc_pct``,
  its count gate plus its runs' spread;
- a timed row catches its ``mdc_pct``, the change it flags 80 % of the time with this
  run's runs and rounds, but never a change at or below its effect threshold, which a
  change must exceed to be flagged (``Comparison.threshold_for``: 2 % for a duet's
  rows in ``pr``, 5 % for the others);
- the negative controls (``impl == "torchrl"``, pinned code alike on both sides) and
  rows measured on one side only are left out.

Pure: no files, no markdown (the renderer words it).

Example:
    >>> from rlpace.bench.comparison import BenchmarkChange, Comparison, Verdict
    >>> rows = (
    ...     BenchmarkChange("t::a", "a", Verdict.UNCHANGED, median_change_pct=0.4, mdc_pct=31.0,
    ...                     count_verdict="same", count_gate_pct=1.0, count_detect_pct=1.02),
    ...     BenchmarkChange("t::b", "b", Verdict.UNCHANGED, median_change_pct=-2.0, mdc_pct=8.5),
    ...     BenchmarkChange("t::c", "c", Verdict.UNCHANGED, median_change_pct=1.0, mdc_pct=3.0,
    ...                     impl="torchrl"),
    ...     BenchmarkChange("t::d", "d", Verdict.NEW),
    ... )
    >>> s = sensitivity(Comparison(rows=rows))
    >>> s.judged, s.by_counts, s.controls, s.catches(5.0), s.catches(10.0)
    (2, 1, 1, 1, 2)
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from rlpace.bench.comparison import BenchmarkChange, Comparison
from rlpace.bench.controls import CONTROL_IMPL
from rlpace.bench.work_counts.verdict import CLOCK_FOLLOWING, JUDGED, WORKER_METRIC

__all__ = [
    "COUNT_VERDICTS",
    "LEVELS",
    "Sensitivity",
    "detectable_pct",
    "sensitivity",
]

LEVELS = (2.0, 5.0, 10.0)
"""The slow-downs (%) the comment counts the catchers of."""
COUNT_VERDICTS = ("same", "regression", "improvement")
"""Count-tier verdicts that mean the counts judged the row."""


def detectable_pct(row: BenchmarkChange, threshold: float) -> tuple[float, str]:
    """``(smallest change in % the row would catch, "counts" or "timing")``; ``inf``
    when the run cannot tell (one round, no spread).

    A timed row's figure is never below ``threshold`` (a change must exceed it), and
    :meth:`Sensitivity.catches` asks a timed row for more than the threshold.

    Example:
        >>> from rlpace.bench.comparison import BenchmarkChange, Verdict
        >>> detectable_pct(BenchmarkChange("t::b", "b", Verdict.UNCHANGED, mdc_pct=3.0), 5.0)
        (5.0, 'timing')
        >>> detectable_pct(BenchmarkChange("t::a", "a", Verdict.UNCHANGED, mdc_pct=40.0,
        ...                                count_verdict="same", count_gate_pct=1.0), 5.0)
        (1.0, 'counts')
        >>> detectable_pct(BenchmarkChange("asv", "asv", Verdict.UNCHANGED, mdc_pct=1.0,
        ...                                method="counted"), 5.0)
        (1.0, 'counts')
    """
    if row.count_verdict in COUNT_VERDICTS:
        for value in (row.count_detect_pct, row.count_gate_pct):
            if value is not None and math.isfinite(value):
                return float(value), "counts"
    if row.method == "counted" and math.isfinite(row.mdc_pct):
        return float(row.mdc_pct), "counts"
    mdc = row.mdc_pct
    if not math.isfinite(mdc):
        return math.inf, "timing"
    return max(float(mdc), threshold), "timing"


@dataclass(frozen=True)
class Sensitivity:
    """The smallest change each judged benchmark of a comparison would have caught.

    Example:
        >>> s = Sensitivity(timing=(("a", 12.0, 5.0), ("b", 5.0, 5.0)), counts=(("c", 1.0),))
        >>> s.judged, s.catches(2.0), s.catches(5.0), s.catches(12.0), s.timing_median_pct
        (3, 1, 1, 3, 8.5)
    """

    timing: tuple[tuple[str, float, float], ...] = ()
    """``(name, detectable %, effect threshold %)`` of the rows judged on time: each row's
    own threshold (``Comparison.threshold_for``: a duet's is lower)."""
    counts: tuple[tuple[str, float], ...] = ()
    """``(name, detectable %)`` of the rows judged on their instruction counts."""
    controls: int = 0
    """Negative controls left out."""
    work_counted: int = 0
    """Timed rows whose work (kernels, syncs, copies, aten ops, Python calls per call) was also
    counted (:mod:`rlpace.bench.work_counts`) and is not nothing: they catch any change
    of that work, whatever its size in time, and only the clock sees the rest."""
    work_handoff: int = 0
    """Of :attr:`work_counted`, the rows whose calling thread dispatches no operator and
    whose workers (processes, threads) were not counted: it hands the work to other
    threads or processes, whose work is not counted."""
    work_workers: int = 0
    """Of :attr:`work_counted`, the rows whose worker processes' or other threads' Python
    calls were counted too (:mod:`rlpace.bench.work_counts.workers`,
    :mod:`rlpace.bench.work_counts.threads`)."""

    @property
    def judged(self) -> int:
        """Benchmarks measured on both sides, the controls aside.

        Example:
            >>> Sensitivity(timing=(("a", 9.0, 5.0),), counts=(("b", 1.0),)).judged
            2
        """
        return len(self.timing) + len(self.counts)

    @property
    def by_counts(self) -> int:
        """How many of them the count tier judged.

        Example:
            >>> Sensitivity(timing=(("a", 9.0, 5.0),), counts=(("b", 1.0),)).by_counts
            1
        """
        return len(self.counts)

    def catches(self, pct: float) -> int:
        """How many would catch a ``pct`` % slow-down: counted rows whose figure is at
        most ``pct``, timed rows whose figure is at most ``pct`` when ``pct`` is above
        their threshold.

        Example:
            >>> s = Sensitivity(timing=(("a", 3.0, 5.0), ("duet", 4.0, 2.0)), counts=(("b", 1.0),))
            >>> s.catches(4.0), s.catches(5.0), s.catches(6.0)
            (2, 2, 3)
        """
        timed = sum(d <= pct and pct > t for _, d, t in self.timing)
        return self.catches_counted(pct) + timed

    def catches_counted(self, pct: float) -> int:
        """How many of :meth:`catches` were counted rows.

        Example:
            >>> Sensitivity(timing=(("a", 3.0, 5.0),), counts=(("b", 1.0),)).catches_counted(6.0)
            1
        """
        return sum(d <= pct for _, d in self.counts)

    @property
    def timing_median_pct(self) -> float:
        """Median detectable change of the timed rows (NaN without any; ``inf`` when
        most could tell nothing).

        Example:
            >>> Sensitivity(timing=(("a", 8.0, 5.0), ("b", 12.0, 5.0))).timing_median_pct
            10.0
        """
        values = [d for _, d, _ in self.timing]
        return statistics.median(values) if values else math.nan


def _hands_off(row: BenchmarkChange) -> bool:
    """Whether a counted row's calling thread dispatches no operator (only Python calls:
    it hands the work to other threads or processes)."""
    base = row.work_base or {}
    return not any(value > 0 for metric, value in base.items() if metric not in CLOCK_FOLLOWING)


def _launches(row: BenchmarkChange) -> bool:
    """Whether the row's work was counted on both sides and its calls launch anything
    from their thread (a case whose thread only waits for workers counts zeros)."""
    return row.work_verdict in JUDGED and any(value > 0 for value in (row.work_base or {}).values())


def sensitivity(comparison: Comparison) -> Sensitivity:
    """The :class:`Sensitivity` of ``comparison``.

    Example:
        >>> from rlpace.bench.comparison import BenchmarkChange, Comparison, Verdict
        >>> rows = (BenchmarkChange("t::a", "a", Verdict.UNCHANGED, median_change_pct=1.0,
        ...                         mdc_pct=7.0),)
        >>> sensitivity(Comparison(rows=rows, threshold=5.0)).catches(10.0)
        1
    """
    timing, counts, controls, work, handoff, workers = [], [], 0, 0, 0, 0
    for row in comparison.rows:
        counted = row.count_verdict in COUNT_VERDICTS
        if not counted and not math.isfinite(row.median_change_pct):
            continue  # new, removed, failed: nothing was compared
        if row.impl == CONTROL_IMPL:
            controls += 1
            continue
        threshold = comparison.threshold_for(row)
        pct, source = detectable_pct(row, threshold)
        if source == "counts":
            counts.append((row.name, pct))
        else:
            timing.append((row.name, pct, threshold))
        claimed = source == "timing" and _launches(row)
        in_workers = claimed and WORKER_METRIC in (row.work_base or {})
        work += claimed
        workers += in_workers
        handoff += claimed and _hands_off(row) and not in_workers
    return Sensitivity(tuple(timing), tuple(counts), controls, work, handoff, workers)
