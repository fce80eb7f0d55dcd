"""Calibrations → markdown: the table ``rlpace-bench aa`` prints and writes.

Decide, then render: the figures come from
:class:`rlpace.bench.calibration.Calibration`; this module only formats them. (What a
PR comment says about its calibration is :func:`rlpace.bench.render_notes.calibration_text`.)

Example:
    >>> from rlpace.bench.calibration import Calibration
    >>> cal = Calibration("cpu", 4, 2, 16, 5.0, 0.05, 0.05, 0.25, 0.0, ())
    >>> print(format_calibration(cal).splitlines()[0])
    ## A/A calibration, cpu set: 4 comparisons of 2 runs per side (pool of 16 runs)
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from rlpace.bench.calibration._records import Calibration, DetectionPower

__all__ = ["format_calibration"]


def _pct(x: float | None, digits: int = 1) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{x:.{digits}f}%"


def _detection_lines(d: DetectionPower, confirm: int = 0) -> list[str]:
    """The summary lines of a :class:`DetectionPower`, with a table of its benchmarks."""
    stages = " (both stages, the confirmation included)" if confirm else ""
    head = (
        f"- detection where the calibration promised {d.power:.0%} power (its minimal "
        f"detectable change at {d.power:.0%} power{stages} at most the slow-down the "
        "benchmark really got; each comparison judged and promised by a held-out "
        "calibration): "
    )
    if not d.rows:
        return [head + "no benchmark qualifies"]
    lowest = min(d.rows, key=lambda r: r[3] / r[4])
    out = [
        head + f"**{d.rate:.0%}** ({d.hits} of {d.trials} comparisons over {len(d.rows)} "
        f"benchmarks; lowest {lowest[3] / lowest[4]:.0%}, "
        f"`{lowest[0].rsplit('::', 1)[-1]}`)",
        "",
        f"| benchmark | MDC ({d.power:.0%} power) | achieved | promised in | detected |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    out += [
        f"| `{name.rsplit('::', 1)[-1]}` | {_pct(mdc)} | {_pct(achieved)} | {trials} | "
        f"{hits / trials:.0%} |"
        for name, mdc, achieved, hits, trials in sorted(d.rows, key=lambda r: r[1])
    ]
    return out


def format_calibration(calibration: Calibration) -> str:
    """A markdown summary of a calibration: the rates, then one row per benchmark.

    Example:
        >>> from rlpace.bench.calibration import Calibration
        >>> cal = Calibration("cpu", 4, 2, 16, 5.0, 0.05, 0.05, 0.25, 0.0, ())
        >>> print(format_calibration(cal).splitlines()[0])
        ## A/A calibration, cpu set: 4 comparisons of 2 runs per side (pool of 16 runs)
    """
    c = calibration
    lines = [
        f"## A/A calibration, {c.set_name} set: {c.runs} comparisons of {c.repeats} runs "
        f"per side (pool of {c.pool} runs)",
        "",
        f"- runs flagging anything, bare ±{c.threshold:g}% on ops (seed bot): "
        f"**{_pct(100 * c.bare_threshold_rate, 0)}** of runs, "
        f"{_pct(100 * c.bare_threshold_share, 0)} of benchmarks per run",
        f"- runs flagging anything, comparator alone: **{c.false_alarm_rate:.0%}**",
        f"- runs flagging anything, with calibrated noise (held out): "
        f"**{_pct(100 * c.false_alarm_rate_calibrated, 0)}**"
        + (
            f" ({c.held_out_alarms} of {c.runs}; 95% upper bound "
            f"{_pct(100 * c.false_alarm_bound(), 0)})"
            if math.isfinite(c.false_alarm_rate_calibrated)
            else ""
        ),
        f"- threshold {c.threshold:g}%, FDR alpha {c.alpha:g}, family alpha {c.family_alpha:g}",
    ]
    if c.confirm:
        lines.insert(
            -1,
            f"- the same before confirmation (which re-runs what a comparison flagged, "
            f"{c.confirm} more runs a side from other pool runs): "
            f"{_pct(100 * c.false_alarm_rate_first, 0)}",
        )
    if c.inject:
        lines.append(f"- injected slowdown for detection power: `{c.inject}`")
        lines += _detection_lines(c.detection_power(), c.confirm)
    header = "| benchmark | A/A spread | noise gate | MDC (80% power) | A/A flagged |"
    sep = "| --- | ---: | ---: | ---: | ---: |"
    if c.inject:
        header += " injected | achieved | detected | detected (no calibration) |"
        sep += " ---: | ---: | ---: | ---: |"
    lines += ["", header, sep]
    for b in c.benchmarks:
        row = (
            f"| `{b.fullname.rsplit('::', 1)[-1]}` | {_pct(b.spread_pct, 2)} | "
            f"{_pct(b.gate_pct)} | {_pct(b.mdc_pct)} | {b.flagged}/{b.comparisons} |"
        )
        if c.inject:
            det = "–" if b.detected is None else f"{b.detected:.0%}"
            raw = "–" if b.detected_raw is None else f"{b.detected_raw:.0%}"
            achieved = _pct(b.achieved_pct, 0) if b.injected else "–"
            row += f" {_pct(100 * b.injected, 0)} | {achieved} | {det} | {raw} |"
        lines.append(row)
    return "\n".join(lines) + "\n"
