"""Joining work counts to a timing comparison: what the judge does with them.

:func:`apply_work_counts` reads each side's counts from its results tables (the first
run of a side that has them), judges them (:func:`~rlpace.bench.work_counts.verdict.compare_work_counts`)
and sets each row's verdict and reading: a case whose launched work grew is flagged
whatever the clock said.

Example:
    >>> from rlpace.bench.comparison import Comparison
    >>> from rlpace.bench.results import results_from_records
    >>> run = results_from_records([{"fullname": "a", "data": [1.0]}])
    >>> apply_work_counts(Comparison(rows=()), run, run).rows
    ()
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from rlpace.bench.work_counts.measure import EXTRA_INFO_KEY
from rlpace.bench.work_counts.verdict import compare_work_counts

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from rlpace.bench.comparison import Comparison

__all__ = ["apply_work_counts"]


def _first_counts(frame: pd.DataFrame) -> dict[str, Any]:
    """``fullname → extra_info["work_counts"]`` of the first run that has it."""
    out: dict[str, Any] = {}
    if frame is None or "extra_info" not in frame.columns:
        return out
    for name, extra in zip(frame["fullname"], frame["extra_info"], strict=True):
        if name not in out and isinstance(extra, Mapping) and EXTRA_INFO_KEY in extra:
            out[name] = extra[EXTRA_INFO_KEY]
    return out


def apply_work_counts(comparison: Comparison, head: pd.DataFrame, base: pd.DataFrame) -> Comparison:
    """Join the work counts of ``head`` and ``base`` (results tables) to the rows of
    ``comparison``; rows without counts on either side are left as they are.

    Example:
        >>> from rlpace.bench.comparison import BenchmarkChange, Comparison, Verdict
        >>> from rlpace.bench.results import results_from_records
        >>> w = lambda k: {"work_counts": {"calls": 1, "kernels": [k], "syncs": [0],
        ...                                "copies": [0], "ops": [k]}}
        >>> base = results_from_records([{"fullname": "a", "data": [1.0], "extra_info": w(4)}])
        >>> head = results_from_records([{"fullname": "a", "data": [1.0], "extra_info": w(6)}])
        >>> rows = (BenchmarkChange("a", "a", Verdict.UNCHANGED, median_change_pct=-1.0),)
        >>> row = apply_work_counts(Comparison(rows=rows), head, base).rows[0]
        >>> row.verdict.value, row.work_note
        ('worsened', 'work-count regression (kernels 4 → 6, ops 4 → 6 per call); time did not move enough to flag (time +1.0%)')
    """
    from rlpace.bench.comparison import Verdict

    heads, bases = _first_counts(head), _first_counts(base)
    if not heads and not bases:
        return comparison
    rows = []
    for row in comparison.rows:
        if row.fullname not in heads and row.fullname not in bases:
            rows.append(row)
            continue
        change = compare_work_counts(row.name, heads.get(row.fullname), bases.get(row.fullname))
        verdict, note, clock = row.verdict, change.reason or None, row.clock_verdict
        decided = False  # whether the counts' verdict replaces the clock's
        slower = -row.median_change_pct
        timed = f"time {slower:+.1f}%" if slower == slower else "time not measured"
        what = change.summary()
        if change.verdict == "regression":
            verdict, decided = Verdict.WORSENED, True
            note = (
                f"work-count and time regression ({what})"
                if clock is Verdict.WORSENED
                else f"work-count regression ({what}), though the clock says faster ({timed})"
                if clock is Verdict.IMPROVED
                else f"work-count regression ({what}); time did not move enough to flag ({timed})"
            )
        elif change.verdict == "improvement" and row.verdict is not Verdict.WORSENED:
            verdict, decided = Verdict.IMPROVED, True
            note = f"less work launched ({what})" + (
                "" if clock is Verdict.IMPROVED else f"; time did not move ({timed})"
            )
        elif change.verdict == "improvement":
            note = (
                f"less work launched ({what}), but the clock says slower: look at the "
                "kernels and at how long the Python code takes"
            )
        elif change.verdict == "mixed":
            note = f"work counts moved both ways ({what}): the clock decides"
        elif change.verdict == "same" and clock in (Verdict.WORSENED, Verdict.IMPROVED):
            note = (
                "the counted work did not move: the kernels, how long the code takes, "
                "other threads or processes, or the machine changed"
            )
        rows.append(
            replace(
                row,
                verdict=verdict,
                work_verdict=change.verdict,
                work_base=None if change.base is None else dict(change.base),
                work_head=None if change.head is None else dict(change.head),
                work_moved=change.moved,
                work_names=change.names or None,
                work_note=note,
                # a confirmation may still change the clock's verdict where it stands
                time_verdict=clock.value if decided else row.time_verdict,
            )
        )
    return replace(comparison, rows=tuple(rows))
