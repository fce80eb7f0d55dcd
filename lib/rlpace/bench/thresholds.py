"""The effect thresholds verdicts use by default: the smallest change that may be flagged.

A change is flagged only beyond its own noise *and* beyond an effect threshold. Runs
timed one after another meet different load, which no gate fitted on a few of them
fully holds, so they keep :data:`THRESHOLD`. A duet's pairs (base and head at the same
time, one per core) met the same load, which cancels in each pair's log ratio, and the
paired test's gate, with its prior from the A/A duet calibration, holds what noise is
left: they are asked for :data:`PAIRED_THRESHOLD`. The count tier has gates of its own
(a 1 % floor; :mod:`rlpace.bench.counts`), and a row whose unit counts work (an asv
``track_*`` of instructions or aten ops) is asked for the same
:data:`COUNTED_THRESHOLD`. A row with one run a side and no
calibration is judged against :data:`SINGLE_RUN_NOISE`. Import-light on purpose: the command-line
parsers read these for their defaults.

Example:
    >>> THRESHOLD, PAIRED_THRESHOLD, COUNTED_THRESHOLD, SINGLE_RUN_NOISE
    (5.0, 2.0, 1.0, 0.1)
"""

from __future__ import annotations

__all__ = ["COUNTED_THRESHOLD", "PAIRED_THRESHOLD", "SINGLE_RUN_NOISE", "THRESHOLD"]

THRESHOLD = 5.0
"""The effect threshold (%) of a row judged on runs one after another (``--threshold``)."""

PAIRED_THRESHOLD = 2.0
"""The effect threshold (%) of a row judged pair by pair (``--paired-threshold``).

At 4 pairs on a 2-core host the paired gates are 1.8–37 % (the duet calibration of
2026-12-02), so the gate, not this threshold, decides most duet rows; the 5 % of
sequential runs bound none of them either, but kept every one from catching a 5 %
slow-down. 2 % is the change the issue of the deterministic tiers asks the
single-process cases to see."""

COUNTED_THRESHOLD = 1.0
"""The effect threshold (%) of a row whose unit counts work
(:data:`~rlpace.bench.units.COUNT_UNITS`: an asv ``track_*`` of instructions, aten ops,
kernel launches ..., ``--count-threshold``): the count tier's gate floor
(:data:`rlpace.bench.counts.verdict.DEFAULT_FLOOR`). Such a count does not follow the
machine's load, so neither the timings' threshold nor their assumed process noise
applies; the gate is this floor, or four times the spread the count's own runs show
when a side has two or more."""

SINGLE_RUN_NOISE = 0.10
"""The process noise assumed, as a fraction, for a benchmark judged on one run a side
without calibrated noise (``--single-run-noise``, in %): the middle of the 4-16 %
process-to-process spread measured on shared 2-core machines. A change must beat it
to be flagged."""
