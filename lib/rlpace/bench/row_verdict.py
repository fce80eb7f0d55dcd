"""One benchmark's figures and verdict, given the gates its whole comparison set.

:func:`rlpace.bench.compare.compare_runs` works on the whole run: it matches the
benchmarks of both sides, fits the variance prior, stretches the pool's priors and
measures the control floor. For each benchmark it then calls :func:`draft_row`, which
computes the change, its interval and the noise it must beat (its *gate*, the largest
of the interval's half-width, the rounds' detectable change, the process-level gate of
``run_gate``, the calibrated A/A gate and the assumed process noise), or settles the
rows that need no test (new, removed, failed, skipped, a count of work on its count
gate: :mod:`rlpace.bench.counted_rows`). When the q-values of all drafts are known,
:func:`decide_row` turns a draft into its verdict.

Example:
    >>> from rlpace.bench.results import results_from_records
    >>> base = results_from_records([{"fullname": "a", "data": [1.0, 1.01, 0.99] * 10}])
    >>> head = results_from_records([{"fullname": "a", "data": [1.5, 1.51, 1.49] * 10}])
    >>> draft = draft_row(head.iloc[0], base.iloc[0], True, {}, None)
    >>> draft["method"], round(draft["median_change_pct"], 1)
    ('mann-whitney', -33.3)
    >>> decide_row({**draft, "q_value": 0.001}, threshold=5.0, alpha=0.05).value
    'worsened'
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from rlpace.bench.comparison import Verdict
from rlpace.bench.counted_rows import count_verdict, counted
from rlpace.bench.stats import (
    better_pct,
    bootstrap_ratio_ci,
    mann_whitney_p,
    minimal_detectable_change,
    paired_run_test,
    run_level_noise,
)
from rlpace.bench.thresholds import COUNTED_THRESHOLD
from rlpace.bench.units import COUNT_UNITS

__all__ = ["MIN_SAMPLES", "RunGate", "counted_pair", "decide_row", "draft_row", "runs_comparable"]

MIN_SAMPLES = 3
"""Fewest raw samples per side for the rank test; fewer falls back to intervals."""
_NAN = float("nan")


@dataclass(frozen=True)
class RunGate:
    """How one benchmark's runs are judged at process level: the level (its Bonferroni
    share of ``alpha``), the variance prior lent to it, and whether its runs are duet
    pairs (judged pair by pair).

    Example:
        >>> gate = RunGate(alpha=0.05 / 10, prior=(0.0004, 8.0))
        >>> gate.alpha, gate.paired
        (0.005, False)
    """

    alpha: float
    """The level of its tests (a share of the family's ``alpha``)."""
    prior: tuple[float, float] | None
    """``(variance, degrees of freedom)`` of one run's log median (a pair's log ratio
    when :attr:`paired`), or None."""
    paired: bool = False
    """Whether run ``k`` of both sides ran at the same time (a duet)."""


def runs_comparable(h: pd.Series, b: pd.Series) -> bool:
    """Whether the two rows can be judged at process level: both sides ok, with raw
    samples and at least two runs each.

    Example:
        >>> from rlpace.bench.results import merge_runs, results_from_records
        >>> one = results_from_records([{"fullname": "a", "data": [1.0, 1.1]}])
        >>> two = merge_runs([one, one])
        >>> runs_comparable(two.iloc[0], two.iloc[0]), runs_comparable(one.iloc[0], two.iloc[0])
        (True, False)
    """
    return (
        h["status"] == "ok"
        and b["status"] == "ok"
        and h["data"] is not None
        and b["data"] is not None
        and len(h["run_medians"] or ()) >= 2
        and len(b["run_medians"] or ()) >= 2
    )


def _side(row: pd.Series, prefix: str) -> dict[str, Any]:
    return {
        f"{prefix}_mean": float(row["mean"]),
        f"{prefix}_median": float(row["median"]),
        f"{prefix}_max": float(row["max"]),
        f"{prefix}_ops": float(row["ops"]),
        f"{prefix}_rounds": int(row["rounds"]),
        f"{prefix}_runs": len(row["run_medians"] or ()),
    }


def _identity(row: pd.Series) -> dict[str, Any]:
    extra = row["extra_info"] or {}
    items = extra.get("items_per_call")
    return {
        "fullname": row["fullname"],
        "name": row["name"],
        "group": row["group"],
        "impl": row["impl"],
        "params": row["params"],
        "higher_is_better": bool(row["higher_is_better"]),
        "items_per_call": float(items) if isinstance(items, int | float) else _NAN,
        "unit": str(extra.get("unit", "")) if items is not None else "",
        "value_unit": str(row.get("value_unit") or "seconds"),
    }


def _run_values(row: pd.Series) -> list[float]:
    """One value a merged run (its median), or the row's median for a single run."""
    return [float(x) for x in (row["run_medians"] or ())] or [float(row["median"])]


def counted_pair(h: pd.Series, b: pd.Series) -> bool:
    """Whether both sides ran and count work in the same unit, in clean counts
    (:func:`rlpace.bench.counted_rows.counted`): judged on the count gate.

    Example:
        >>> from rlpace.bench.results import results_from_records
        >>> def row(unit):
        ...     return results_from_records([{"fullname": "a", "median": 9.0, "mean": 9.0,
        ...                                   "value_unit": unit}]).iloc[0]
        >>> counted_pair(row("instructions"), row("instructions")), counted_pair(row("s"), row("s"))
        (True, False)"""
    if h["status"] != "ok" or b["status"] != "ok":
        return False
    unit = str(h.get("value_unit") or "seconds")
    values = (*_run_values(h), *_run_values(b))
    return (
        unit == str(b.get("value_unit") or "seconds")
        and counted(unit, len(_run_values(h)), len(_run_values(b)))
        and all(math.isfinite(v) and v >= 0 for v in values)
    )


def _usable(row: pd.Series) -> bool:
    return all(math.isfinite(float(row[k])) and float(row[k]) > 0 for k in ("mean", "median"))


def _single_run(h: pd.Series, b: pd.Series) -> bool:
    return min(len(h["run_medians"] or ()), len(b["run_medians"] or ())) < 2


def _skipped(row: pd.Series | None) -> bool:
    """An asv result of ``NaN``: the benchmark skipped itself on that side."""
    return row is not None and row["status"] == "skipped"


def draft_row(
    h: pd.Series | None,
    b: pd.Series | None,
    has_base: bool,
    calibrated: Mapping[str, float],
    run_gate: RunGate | None,
    assumed_noise: float = 0.0,
    count_threshold: float = COUNTED_THRESHOLD,
) -> dict[str, Any]:
    """Everything about one benchmark except the verdicts that need all q-values: the
    fields of its :class:`~rlpace.bench.comparison.BenchmarkChange`, with ``verdict``
    already set where no test decides it (new, removed, failed, skipped, a count).

    Args:
        h: its head row (None: removed in head).
        b: its base row (None: new in head).
        has_base: whether there was a base run at all.
        calibrated: ``fullname → gate fraction`` of an A/A calibration (with the
            control floor applied).
        run_gate: the level and variance prior of its process-level gate (None: none).
        assumed_noise: the process noise assumed with one run a side (0: none).
        count_threshold: the floor of the count gate of a row that counts work.

    Example:
        >>> from rlpace.bench.results import results_from_records
        >>> row = results_from_records([{"fullname": "a", "data": [1.0, 1.1]}]).iloc[0]
        >>> draft_row(row, None, True, {}, None)["verdict"].value
        'new'
    """
    if h is None:
        assert b is not None
        return {**_identity(b), **_side(b, "base"), "verdict": Verdict.REMOVED}
    out = {**_identity(h), **_side(h, "head")}
    if h["status"] != "ok":  # failed, or skipped
        if b is not None and b["status"] == "ok":
            out.update(_side(b, "base"))
        if _skipped(h):  # asv's NaN: not run here, as asv's compare reads it
            out["verdict"] = Verdict.SKIPPED
            out["note"] = "skipped in head" + (" and base" if _skipped(b) else "")
            return out
        out["verdict"] = Verdict.FAILED
        out["note"] = "failed in head" + ("" if b is not None else " (not in base)")
        return out
    if b is None:
        out["verdict"] = Verdict.NEW
        if has_base:
            out["note"] = "not in base"
        return out
    if b["status"] != "ok":
        if _skipped(b):
            out["verdict"] = Verdict.SKIPPED
            out["note"] = "skipped in base: nothing to compare against"
            return out
        out["verdict"] = Verdict.NEW
        out["note"] = "failed in base: nothing to compare against"
        return out
    out.update(_side(b, "base"))
    if counted_pair(h, b):
        judged = count_verdict(_run_values(h), _run_values(b), floor_pct=count_threshold)
        return {**out, **judged, "verdict": Verdict(judged["verdict"])}
    if not (_usable(h) and _usable(b)):
        if all(float(h[k]) == float(b[k]) for k in ("mean", "median")):
            out["verdict"] = Verdict.UNCHANGED
            out["note"] = "the same value on both sides"
        elif out["value_unit"] in COUNT_UNITS:
            # a count that may follow the clock (not judged on the count gate): one run
            # a side cannot tell its noise from 0 against a few
            out["verdict"] = Verdict.UNCHANGED
            out["note"] = (
                f"counted {float(b['median']):g} in base and {float(h['median']):g} in head: "
                "a count that may follow the clock, one run a side, so no ratio can be judged"
            )
        elif not _usable(h):
            out["verdict"] = Verdict.FAILED
            out["note"] = "head measured zero: no ratio to compare (a timer too coarse?)"
        else:
            out["verdict"] = Verdict.NEW
            out["note"] = "base measured zero: nothing to compare against"
        return out
    if out["higher_is_better"]:
        out["change_pct"] = (out["head_mean"] / out["base_mean"] - 1) * 100
    elif all(math.isfinite(out[k]) and out[k] > 0 for k in ("head_ops", "base_ops")):
        out["change_pct"] = (out["head_ops"] - out["base_ops"]) / out["base_ops"] * 100
    else:
        out["change_pct"] = (out["base_mean"] / out["head_mean"] - 1) * 100

    hd, bd = h["data"], b["data"]
    rounds_mdc = _NAN
    if run_gate is not None and run_gate.paired:
        # a duet: each pair met the same load, so the pairs' log ratios are the data
        mean, half_log, mdc_log, p = paired_run_test(
            h["run_medians"], b["run_medians"], alpha=run_gate.alpha, prior=run_gate.prior
        )
        ratio, low, high = (math.exp(x) for x in (mean, mean - half_log, mean + half_log))
        out["method"] = "paired"
        out["p_value"] = p
        out["run_noise_pct"] = (
            -math.expm1(-half_log) * 100 if _went_worse(ratio, out) else _grown_pct(half_log)
        )
        out["mdc_pct"] = _grown_pct(mdc_log)
    elif hd is not None and bd is not None and len(hd) >= MIN_SAMPLES and len(bd) >= MIN_SAMPLES:
        ratio, low, high = bootstrap_ratio_ci(hd, bd)
        out["method"] = "mann-whitney"
        out["p_value"] = mann_whitney_p(hd, bd)
        out["mdc_pct"] = rounds_mdc = minimal_detectable_change(hd, bd)
        run_half, run_mdc = (
            run_level_noise(
                h["run_medians"], b["run_medians"], alpha=run_gate.alpha, prior=run_gate.prior
            )
            if run_gate is not None
            else (_NAN, _NAN)
        )
        if math.isfinite(run_half):
            # the half-width on the side the change went: |better %| beyond it <=> the
            # log ratio beyond the log half-width, for speed-ups and slow-downs alike
            out["run_noise_pct"] = (
                -math.expm1(-run_half) * 100 if _went_worse(ratio, out) else _grown_pct(run_half)
            )
            out["mdc_pct"] = max(out["mdc_pct"], _grown_pct(run_mdc))
    else:
        ratio = out["head_median"] / out["base_median"]
        hl, hh, bl, bh = (float(x) for x in (h["ci_low"], h["ci_high"], b["ci_low"], b["ci_high"]))
        if not all(math.isfinite(x) for x in (hl, hh, bl, bh)):
            hl, hh = _median_interval_from_spread(h)
            bl, bh = _median_interval_from_spread(b)
        low = hl / bh if bh > 0 else _NAN
        high = hh / bl if bl > 0 else _NAN
        out["method"] = "intervals" if math.isfinite(low) and math.isfinite(high) else "none"
    out["median_change_pct"] = better_pct(ratio, out["higher_is_better"])
    ends = sorted(better_pct(x, out["higher_is_better"]) for x in (low, high))
    out["ci_low_pct"], out["ci_high_pct"] = ends
    half = (ends[1] - ends[0]) / 2 if all(math.isfinite(e) for e in ends) else _NAN
    # The noise a change must beat: its interval's half-width, the smallest change the
    # rounds could detect (timing samples are autocorrelated, so intervals alone are
    # optimistic), the process-to-process half-width and the calibrated A/A spread,
    # whichever is largest. (The process-level MDC is a power figure for the reader,
    # not a gate: with two runs a side it is about twice the half-width.)
    calibrated_pct = _NAN
    if out["fullname"] in calibrated:
        # a gate g given for slow-downs is the same log change, g / (1 - g), for speed-ups
        g = calibrated[out["fullname"]]
        if _went_worse(ratio, out):
            calibrated_pct = g * 100
        else:
            calibrated_pct = (g / (1 - g) if g < 1 else math.inf) * 100
    assumed_pct = _NAN
    if assumed_noise > 0 and out["fullname"] not in calibrated and _single_run(h, b):
        g = assumed_noise  # like a calibrated gate: the same log change either way
        assumed_pct = (g if _went_worse(ratio, out) else g / (1 - g)) * 100
        out["assumed_noise_pct"] = assumed_noise * 100
        if math.isfinite(out.get("mdc_pct", _NAN)):
            out["mdc_pct"] = max(out["mdc_pct"], assumed_pct)
    candidates = (half, rounds_mdc, out.get("run_noise_pct", _NAN), calibrated_pct, assumed_pct)
    known = [x for x in candidates if not math.isnan(x)]  # an infinite gate counts
    if not math.isnan(calibrated_pct) and math.isfinite(out.get("mdc_pct", _NAN)):
        out["mdc_pct"] = max(out["mdc_pct"], calibrated_pct)  # a change must also pass it
    out["noise_pct"] = max(known) if math.isfinite(half) and known else _NAN
    others = [x for x in candidates[:4] if not math.isnan(x)]
    change = abs(out["median_change_pct"])
    if math.isfinite(assumed_pct) and others and max(others) < change <= assumed_pct:
        out["note"] = (
            f"beyond its rounds' noise, but one run a side cannot show process noise: "
            f"within the assumed ±{assumed_noise * 100:.0f}%"
        )
    if out["method"] == "none":
        # one value a side (asv without samples or statistics): no interval, so only a
        # process-noise gate can judge it - the calibrated one, else the assumed one
        gates = [x for x in (calibrated_pct, assumed_pct) if not math.isnan(x)]
        if gates:
            out["noise_pct"] = max(gates)
            which = "calibrated" if math.isnan(assumed_pct) else "assumed"
            out["note"] = (
                f"no spread recorded: judged against the {which} process noise "
                f"(±{out['noise_pct']:.0f}%) alone"
            )
        else:
            out["note"] = "no spread recorded: change cannot be told from noise"
    return out


def _went_worse(ratio: float, row: Mapping[str, Any]) -> bool:
    """Whether head/base ``ratio`` of the measured value is a change for the worse."""
    return (ratio > 1) != row["higher_is_better"]


def _grown_pct(log_change: float) -> float:
    """``expm1(x) × 100``, capped at a 10,000-fold change (no overflow for absurd noise)."""
    return math.expm1(min(log_change, math.log(1e4))) * 100


def _median_interval_from_spread(row: pd.Series) -> tuple[float, float]:
    """95% interval of the *median* from stddev/rounds when the file records neither an
    interval nor an IQR (last-resort summary fallback): the median's standard error is
    about 1.2533 σ/√n for near-normal rounds, and the interval is centred on the median,
    the statistic whose change is reported."""
    n, median, std = int(row["rounds"]), float(row["median"]), float(row["stddev"])
    if n < 2 or not math.isfinite(std):
        return (_NAN, _NAN)
    half = 1.96 * 1.2533 * std / math.sqrt(n)
    return (median - half, median + half)


def decide_row(draft: Mapping[str, Any], threshold: float, alpha: float) -> Verdict:
    """The verdict of a draft (:func:`draft_row`) once its ``q_value`` is known: a change
    is flagged only beyond ``threshold`` (%), beyond its noise, with an interval that
    excludes no change and, for a tested row, a q-value below ``alpha``. (A draft that
    already holds its ``verdict``, a count of work among them, needs no decision.)

    Example:
        >>> draft = {"method": "intervals", "median_change_pct": -8.0, "ci_low_pct": -9.0,
        ...          "ci_high_pct": -7.0, "noise_pct": 1.0, "q_value": float("nan")}
        >>> decide_row(draft, 5.0, 0.05).value, decide_row(draft, 10.0, 0.05).value
        ('worsened', 'unchanged')
    """
    change = draft["median_change_pct"]
    low, high, noise = draft["ci_low_pct"], draft["ci_high_pct"], draft["noise_pct"]
    if draft["method"] == "none" and math.isfinite(change) and not math.isnan(noise):
        # no interval: the change must beat the threshold and the process-noise gate
        if abs(change) <= max(threshold, noise):
            return Verdict.UNCHANGED
        return Verdict.IMPROVED if change > 0 else Verdict.WORSENED
    if not all(math.isfinite(x) for x in (change, low, high, noise)):
        return Verdict.UNCHANGED
    if abs(change) <= threshold or abs(change) <= noise:
        return Verdict.UNCHANGED
    if low <= 0 <= high:  # the interval does not exclude "no change"
        return Verdict.UNCHANGED
    if draft["method"] in ("mann-whitney", "paired") and not draft["q_value"] < alpha:
        return Verdict.UNCHANGED
    return Verdict.IMPROVED if change > 0 else Verdict.WORSENED
