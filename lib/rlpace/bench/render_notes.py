"""The comment's sentences: what a run could see, and how it was judged.

Each function takes what a :class:`~rlpace.bench.comparison.Comparison` (or the
calibration note it carries) records and returns one paragraph of plain text, with
every name from the pull request neutralised (:func:`rlpace.bench.markdown_safe.neutralize`)
and file names as code spans. An empty string means there is nothing to say. The
``rlpace`` style's template uses them as filters (:mod:`rlpace.bench.render`), and
``pr``'s terminal summary prints the same sentences (:mod:`rlpace.bench.pr_progress`),
so the comment and the terminal never disagree. Nothing here decides: every figure
comes from the comparison.

Example:
    >>> from rlpace.bench.comparison import BenchmarkChange, Comparison, Verdict
    >>> rows = (BenchmarkChange("t::a", "a", Verdict.WORSENED, confirmed=True),)
    >>> print(confirmation_text(Comparison(rows=rows, confirm_repeats=2)))
    Confirmation in fresh processes: the 1 benchmark the first runs flagged ran again, 2 more runs a side, ABBA; it was flagged again the same way and stands.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from rlpace.bench.comparison import Comparison
from rlpace.bench.controls import CONTROL_IMPL
from rlpace.bench.markdown_safe import code_span, neutralize
from rlpace.bench.sensitivity import COUNT_VERDICTS, LEVELS, sensitivity

__all__ = [
    "BUSY_RATIO",
    "calibration_text",
    "calibration_warning",
    "change_size",
    "confirmation_text",
    "paired_text",
    "plural",
    "process_stretch_text",
    "sensitivity_text",
]


def plural(n: int, word: str, many: str | None = None) -> str:
    """``n`` with ``word``, in the plural unless ``n`` is 1 (``word + "s"``, or ``many``).

    Example:
        >>> plural(1, "benchmark"), plural(3, "benchmark"), plural(2, "was", "were")
        ('1 benchmark', '3 benchmarks', '2 were')
    """
    return f"{n} {word if n == 1 else (many or word + 's')}"


def change_size(pct: float) -> str:
    """A change's size: ``7.5%``, beyond +100% a factor ``×3.2``, ``-`` when unknown.

    Example:
        >>> change_size(7.54), change_size(220.0), change_size(float("nan"))
        ('7.5%', '×3.2', '-')
    """
    if not math.isfinite(pct):
        return "-"
    if pct <= 100:
        return f"{pct:.1f}%"
    factor = 1 + pct / 100
    return "≥×1000" if factor >= 1000 else f"×{factor:.1f}"


def _instructions_only(comparison: Comparison) -> bool:
    """Whether every row judged on a count counted instructions (the count tier's, or
    an asv series of them), so the sentence can name them."""
    return all(
        row.value_unit == "instructions" for row in comparison.rows if row.method == "counted"
    )


def _timed_only(comparison: Comparison) -> bool:
    """Whether every row judged on its spread (not on a count) is a timing, so the
    sentence can call them timed (an asv file also holds memory figures, cycles ...)."""
    return all(
        row.value_unit == "seconds"
        for row in comparison.rows
        if row.method != "counted" and row.count_verdict not in COUNT_VERDICTS
    )


def sensitivity_text(comparison: Comparison, *, markdown: bool = True) -> str:
    """The comment's sentence on what the run could see (empty when nothing was
    compared): how many judged benchmarks would catch a 2, 5 and 10 % slow-down, how
    many of those on their counts, and what the timed ones need
    (:func:`rlpace.bench.sensitivity.sensitivity`). Names are escaped for markdown,
    or left as they are with ``markdown=False`` (a terminal).

    Example:
        >>> from rlpace.bench.comparison import BenchmarkChange, Comparison, Verdict
        >>> rows = (
        ...     BenchmarkChange("t::a", "a", Verdict.UNCHANGED, median_change_pct=0.1,
        ...                     mdc_pct=30.0, count_verdict="same", count_detect_pct=1.01),
        ...     BenchmarkChange("t::b", "b", Verdict.UNCHANGED, median_change_pct=2.0, mdc_pct=8.0),
        ...     BenchmarkChange("t::c", "c", Verdict.UNCHANGED, median_change_pct=-9.0,
        ...                     mdc_pct=180.0),
        ...     BenchmarkChange("t::d", "d", Verdict.UNCHANGED, median_change_pct=1.0,
        ...                     mdc_pct=4.0, impl="torchrl"),
        ... )
        >>> print(sensitivity_text(Comparison(rows=rows)))
        What this run could see: of 3 benchmarks judged (1 torchrl control aside), 1 would catch a 2% slow-down, 1 a 5% one and 2 a 10% one; 1 of them on its instruction counts. The 2 timed ones need 94.0% at the median, c ×2.8.
    """
    s = sensitivity(comparison)
    if not s.judged:
        return ""
    aside = f" ({plural(s.controls, f'{CONTROL_IMPL} control')} aside)" if s.controls else ""
    low, mid, high = LEVELS
    text = (
        f"What this run could see: of {plural(s.judged, 'benchmark')} judged{aside}, "
        f"{s.catches(low)} would catch a {low:g}% slow-down, {s.catches(mid)} a {mid:g}% "
        f"one and {s.catches(high)} a {high:g}% one"
    )
    if s.by_counts:
        counted = s.catches_counted(high)
        what = "instruction counts" if _instructions_only(comparison) else "counts"
        text += f"; {counted} of them on {'its' if counted == 1 else 'their'} {what}"
    text += "."
    if s.timing:
        n = len(s.timing)
        median = s.timing_median_pct
        kind = "timed" if _timed_only(comparison) else "measured"
        if not math.isfinite(median):
            text += (
                f" {f'The {kind} one has' if n == 1 else f'Most of the {n} {kind} ones have'} no "
                "detectable change to show (too few rounds or runs, or summary statistics only)."
            )
        else:
            wide = sorted(
                (item for item in s.timing if math.isfinite(item[1])), key=lambda i: -i[1]
            )
            shown = neutralize if markdown else str
            widest = ", ".join(
                f"{shown(name)} {change_size(d)}" for name, d, _ in wide[:2] if d > high
            )
            text += (
                f" The {n} {kind} {'one needs' if n == 1 else 'ones need'} {change_size(median)} at "
                "the median" + (f", {widest}" if widest else "") + "."
            )
    if s.work_counted:
        text += (
            f" {s.work_counted} of the timed {'one' if n == 1 else 'ones'} also "
            f"{'counts' if s.work_counted == 1 else 'count'} the kernels, syncs, copies, "
            "aten ops and Python calls each call makes from its thread, and catch any "
            "change of those, whatever its size in time"
        )
        if s.work_workers:
            text += (
                f"; {s.work_workers} of them also "
                f"{'counts' if s.work_workers == 1 else 'count'} the Python calls of "
                "their worker processes and threads"
            )
        if s.work_handoff:
            text += (
                f"; in {s.work_handoff} of them that thread dispatches no operator: it hands "
                "the work to other threads or processes, whose work is left to the clock"
            )
        text += "."
    return text


def confirmation_text(comparison: Comparison) -> str:
    """The comment's sentence about the confirmation stage (empty without one).

    Example:
        >>> from rlpace.bench.comparison import BenchmarkChange, Comparison, Verdict
        >>> rows = (BenchmarkChange("a", "a", Verdict.WORSENED, confirmed=True),
        ...         BenchmarkChange("b", "b", Verdict.UNCHANGED, confirmed=False))
        >>> print(confirmation_text(Comparison(rows=rows, confirm_repeats=2)))
        Confirmation in fresh processes: the 2 benchmarks the first runs flagged ran again, 2 more runs a side, ABBA; 1 was flagged again the same way and stands, 1 was not and counts as noise.
        >>> print(confirmation_text(Comparison(rows=rows[1:], confirm_repeats=2)))
        Confirmation in fresh processes: the 1 benchmark the first runs flagged ran again, 2 more runs a side, ABBA; it was not flagged again and counts as noise.
    """
    tried = [r for r in comparison.rows if r.confirmed is not None]
    if not comparison.confirm_repeats or not tried:
        return ""
    held = sum(1 for r in tried if r.confirmed)
    dropped = len(tried) - held
    if held and dropped:
        outcome = (
            f"{held} {'was' if held == 1 else 'were'} flagged again the same way and "
            f"{'stands' if held == 1 else 'stand'}, {dropped} {'was' if dropped == 1 else 'were'}"
            f" not and {'counts' if dropped == 1 else 'count'} as noise"
        )
    elif held:
        outcome = (
            "it was flagged again the same way and stands"
            if held == 1
            else "all were flagged again the same way and stand"
        )
    else:
        outcome = (
            "it was not flagged again and counts as noise"
            if dropped == 1
            else "none was flagged again; they count as noise"
        )
    runs = plural(comparison.confirm_repeats, "more run")
    how = "as duets, judged pair by pair" if comparison.paired else "ABBA"
    return (
        f"Confirmation in fresh processes: the {plural(len(tried), 'benchmark')} the first "
        f"runs flagged ran again, {runs} a side, {how}; {outcome}."
    )


def paired_text(comparison: Comparison) -> str:
    """The comment's sentence about duet runs judged pair by pair (empty without them),
    and the A/A duet pool that lent their tests its pair spreads, if one did.

    Example:
        >>> from dataclasses import replace
        >>> from rlpace.bench.comparison import BenchmarkChange, Comparison, Verdict
        >>> print(paired_text(Comparison(rows=(), paired=4)))
        Benchmarks judged on their time ran as 4 duets (base and head at the same time, a core each) and were judged pair by pair: the load both sides met cancels in each pair, and a change must beat the pairs' own spread.
        >>> rows = tuple(BenchmarkChange(f"t::{n}", n, Verdict.UNCHANGED, method="paired", head_runs=k)
        ...              for n, k in (("a", 4), ("b", 8), ("c", 4)))
        >>> print(paired_text(Comparison(rows=rows, paired=8)).split("spread. ")[1])
        1 benchmark whose A/A pairs spread wider got 4 more duets, to see a smaller change.
        >>> rows += (BenchmarkChange("t::d", "d", Verdict.UNCHANGED, method="paired",
        ...                          head_runs=2, impl="torchrl"),)
        >>> print(paired_text(Comparison(rows=rows, paired=8)).split(") and")[0])
        Benchmarks judged on their time ran as 4 duets (base and head at the same time, a core each; the torchrl twins, negative controls, in the first 2
        >>> rows = rows[:3] + (replace(rows[3], head_runs=1),)
        >>> print(paired_text(Comparison(rows=rows, paired=8)).split(") and")[0])
        Benchmarks judged on their time ran as 4 duets (base and head at the same time, a core each; the torchrl twins, negative controls, in the first one only
        >>> print(paired_text(Comparison(rows=(), paired=4, duet_calibration={
        ...     "source": "reports/calibration/cpu-duets.json", "pairs": 16,
        ...     "created": "2026-12-02", "held_out_alarms": 0, "held_out_alarms_first": 5,
        ...     "held_out_runs": 200, "mismatch": {"cpu_count": [2, 16]}})).split(": the load")[1])
        ... # doctest: +NORMALIZE_WHITESPACE
         both sides met cancels in each pair, and a change must beat the pairs' own spread, weighed with the spread of its pairs in 16 A/A duets (`reports/calibration/cpu-duets.json`, 2026-12-02; judged as this run is, 200 held-out splits of them flagged anything in 0 after the confirmation, 5 before). ⚠️ Those duets ran on another machine or timing (cpu_count: 2 there, 16 here): measure them here with `rlpace-bench calibrate` (A/A `pr` runs; it also measures the count gates) or `rlpace-bench aa --duets 16`.
        >>> print(paired_text(Comparison(rows=(), paired=4, paired_threshold=2.0, duet_calibration={
        ...     "source": "cpu-duets.json", "pairs": 16, "threshold": 5.0, "held_out_alarms": 0,
        ...     "held_out_alarms_first": 3, "held_out_runs": 200})).split("A/A duets (")[1])
        `cpu-duets.json`; judged as this run is but at a 5% effect threshold (this run: 2%), 200 held-out splits of them flagged anything in 0 after the confirmation, 3 before).
        >>> print(paired_text(Comparison(rows=(), paired=4, duet_calibration={
        ...     "source": "cpu-duets.json", "pairs": 60, "held_out_alarms": 0,
        ...     "held_out_alarms_first": 1, "held_out_runs": 6, "held_out_by": "run"}
        ...     )).split("A/A duets (")[1])
        `cpu-duets.json`; judged as this run is, the 6 A/A `pr` runs they came from, each with a prior from the others' duets, flagged anything in 0 after the confirmation, 1 before).
    """
    if not comparison.paired:
        return ""
    paired = [r for r in comparison.rows if r.method == "paired" and r.head_runs]
    runs = [r.head_runs for r in paired if r.impl != CONTROL_IMPL]
    controls = [r.head_runs for r in paired if r.impl == CONTROL_IMPL]
    first = min(runs or controls, default=comparison.paired)
    fewer = (
        f"; the {CONTROL_IMPL} twins, negative controls, in the first "
        + ("one only" if max(controls) == 1 else str(max(controls)))
        if controls and max(controls) < first
        else ""
    )
    text = (
        f"Benchmarks judged on their time ran as {plural(first, 'duet')} (base and head "
        f"at the same time, a core each{fewer}) and were judged pair by pair: the load "
        "both sides met cancels in each pair, and a change must beat the pairs' own spread"
    )
    more = sorted({n - first for n in runs if n > first})
    extended = (
        f" {plural(sum(1 for n in runs if n > first), 'benchmark')} whose A/A pairs "
        f"spread wider got {more[0] if len(more) == 1 else f'{more[0]}-{more[-1]}'} more "
        "duets, to see a smaller change."
        if more
        else ""
    ) + _budget_text(comparison.time_budget)
    pool = comparison.duet_calibration
    if not pool:
        return text + "." + extended
    when = f", {neutralize(str(pool['created']))}" if pool.get("created") else ""
    held = ""
    if pool.get("held_out_runs"):
        judged, checked = comparison.paired_threshold, pool.get("threshold")
        how = (
            f"judged as this run is but at a {checked:g}% effect threshold (this run: {judged:g}%)"
            if isinstance(checked, int | float) and judged is not None and checked != judged
            else "judged as this run is"
        )
        judged_what = (
            f"the {pool['held_out_runs']} A/A `pr` runs they came from, each with a prior "
            "from the others' duets,"
            if pool.get("held_out_by") == "run"
            else f"{pool['held_out_runs']} held-out splits of them"
        )
        held = (
            f"; {how}, {judged_what} flagged anything in "
            f"{pool.get('held_out_alarms', 0)} after the confirmation, "
            f"{pool.get('held_out_alarms_first', 0)} before"
        )
    text += (
        f", weighed with the spread of its pairs in {pool['pairs']} A/A duets "
        f"({code_span(pool['source'])}{when}{held})." + extended
    )
    mismatch = pool.get("mismatch") or {}
    if mismatch:
        parts = ", ".join(
            f"{neutralize(str(k))}: {neutralize(str(a))} there, {neutralize(str(b))} here"
            for k, (a, b) in mismatch.items()
        )
        text += (
            f" ⚠️ Those duets ran on another machine or timing ({parts}): measure "
            "them here with `rlpace-bench calibrate` (A/A `pr` runs; it also measures the "
            f"count gates) or `rlpace-bench aa --duets {pool['pairs']}`."
        )
    return text + _busy_text(comparison.pair_spread)


def _budget_text(cut: Mapping[str, Any] | None) -> str:
    """What the comment says of the extra duets ``pr``'s time budget cut
    (:attr:`rlpace.bench.comparison.Comparison.time_budget`), else nothing.

    Example:
        >>> print(_budget_text({"budget_min": 13, "planned_duets": 6, "ran_duets": 2,
        ...                     "short": 5}))
         ⏱️ The time budget (13 min) stopped the extra duets after 2 of 6: 5 benchmarks got fewer pairs than planned, so each could see only a larger change (see its detectable change).
        >>> _budget_text(None)
        ''
    """
    if not cut:
        return ""
    return (
        f" ⏱️ The time budget ({cut['budget_min']:g} min) stopped the extra duets after "
        f"{cut['ran_duets']} of {cut['planned_duets']}: "
        f"{plural(int(cut['short']), 'benchmark')} got fewer pairs than planned, so each "
        "could see only a larger change (see its detectable change)."
    )


#: Today's pairs spreading this many times their A/A duets' (the median over the
#: benchmarks) earn the comment a warning: with 4 pairs a day like the calibration's
#: reads about 0.9, and 2 is beyond what 30 benchmarks' median wanders by chance.
BUSY_RATIO = 2.0


_BUSIER = (
    "The machine was busier than on the calibration's day, so only large changes could be "
    "told from noise (see each row's detectable change). Rerun on a quieter machine to see "
    "small ones."
)
"""What a busy-day warning advises, of pairs and of runs one after another alike."""


def _busy_text(spread: Mapping[str, Any] | None) -> str:
    """What the comment says of how widely today's pairs spread against the A/A duets'
    (:func:`rlpace.bench.compare.pair_spread_summary`): a warning on a busy day (with
    how far the pool's priors were widened to match), a line on the benchmarks judged on
    their own pairs alone, else nothing.

    Example:
        >>> print(_busy_text({"benchmarks": 30, "ratio": 4.2, "disowned": 2, "stretch": 4.4}))
         ⚠️ Today's pairs spread 4.2× as wide as in those A/A duets (the median over 30 benchmarks), so each benchmark's prior was widened 4.4× to match, and 2 of them spread so far beyond even that that they were judged on their own pairs alone: the machine was busier than on the calibration's day, so only large changes could be told from noise (see each row's detectable change). Rerun on a quieter machine to see small ones.
        >>> print(_busy_text({"benchmarks": 30, "ratio": 0.9, "disowned": 1}))
         1 benchmark whose pairs spread far beyond its A/A duets' was judged on its own pairs alone.
        >>> _busy_text({"benchmarks": 30, "ratio": 0.9, "disowned": 0}), _busy_text(None)
        ('', '')
    """
    if not spread:
        return ""
    disowned = int(spread.get("disowned") or 0)
    ratio = spread.get("ratio")
    stretch = spread.get("stretch")
    if isinstance(ratio, int | float) and ratio >= BUSY_RATIO:
        beyond = " even that" if isinstance(stretch, int | float) and stretch > 1 else ""
        alone = {
            0: "",
            1: f", and 1 of them spread so far beyond{beyond} that it was judged on its own "
            "pairs alone",
        }.get(
            disowned,
            f", and {disowned} of them spread so far beyond{beyond} that they were judged "
            "on their own pairs alone",
        )
        widened = (
            f", so each benchmark's prior was widened {stretch:.1f}× to match"
            if isinstance(stretch, int | float) and stretch > 1
            else ""
        )
        return (
            f" ⚠️ Today's pairs spread {ratio:.1f}× as wide as in those A/A duets (the "
            f"median over {plural(int(spread['benchmarks']), 'benchmark')}){widened}{alone}: "
            f"{_BUSIER[0].lower()}{_BUSIER[1:]}"
        )
    if disowned:
        one = disowned == 1
        return (
            f" {plural(disowned, 'benchmark')} whose pairs spread far beyond "
            f"{'its' if one else 'their'} A/A duets' {'was' if one else 'were'} judged on "
            f"{'its' if one else 'their'} own pairs alone."
        )
    return ""


def calibration_text(note: Mapping[str, Any]) -> str:
    """The comment's sentence about the calibration that judged a comparison (what
    :meth:`rlpace.bench.calibration.CalibrationNote.to_dict` holds).

    Example:
        >>> print(calibration_text({"source": "reports/calibration/cpu.json", "pool": 24,
        ...     "created": "2026-11-30", "held_out_alarms": 0, "held_out_runs": 48,
        ...     "false_alarm_bound": 0.06, "injected_pct": 10.0, "detection_power": 0.9,
        ...     "detection_hits": 90, "detection_trials": 96, "detection_benchmarks": 2}))
        Calibrated noise: `reports/calibration/cpu.json` (24 A/A runs, 2026-11-30). Held-out A/A runs flagged anything in 0 of 48 (at most 6% at 95% confidence); an injected 10% slow-down was flagged in 94% of 96 comparisons on the 2 benchmarks whose noise allows it at 90% power.
        >>> print(calibration_text({"source": "cpu.json", "pool": 32, "held_out_alarms": 0,
        ...     "held_out_runs": 64, "false_alarm_bound": 0.05, "confirm": 2,
        ...     "held_out_alarms_first": 6}))
        Calibrated noise: `cpu.json` (32 A/A runs). Held-out A/A runs flagged anything in 0 of 64 with a confirmation of 2 runs a side (at most 5% at 95% confidence; 6 without it).
    """
    when = f", {neutralize(note['created'])}" if note.get("created") else ""
    out = f"Calibrated noise: {code_span(note['source'])} ({note['pool']} A/A runs{when})."
    runs = note.get("held_out_runs") or 0
    bound = note.get("false_alarm_bound")
    if runs:
        out += f" Held-out A/A runs flagged anything in {note['held_out_alarms']} of {runs}"
        confirm = note.get("confirm") or 0
        if confirm:
            out += f" with a confirmation of {plural(confirm, 'run')} a side"
        details = []
        if isinstance(bound, int | float) and math.isfinite(bound):
            details.append(f"at most {bound:.0%} at 95% confidence")
        if confirm and note.get("held_out_alarms_first") is not None:
            details.append(f"{note['held_out_alarms_first']} without it")
        if details:
            out += f" ({'; '.join(details)})"
    injected = note.get("injected_pct")
    if isinstance(injected, int | float) and math.isfinite(injected):
        out += ";" if runs else ""
        power = f"{note['detection_power']:.0%} power"
        if note.get("detection_trials"):
            rate = note["detection_hits"] / note["detection_trials"]
            out += (
                f" an injected {injected:g}% slow-down was flagged in {rate:.0%} of "
                f"{note['detection_trials']} comparisons on the "
                f"{plural(note['detection_benchmarks'], 'benchmark')} whose noise allows it "
                f"at {power}"
            )
        else:
            out += f" no benchmark's noise allows detecting a {injected:g}% slow-down at {power}"
    return out + "."


def process_stretch_text(comparison: Comparison) -> str:
    """What the comment says when a comparison of runs one after another widened the
    calibration's process priors (:attr:`~rlpace.bench.comparison.Comparison.prior_stretch`;
    a paired one says it of its pairs in :func:`paired_text`): ``""`` when they were
    not widened, a warning when its runs spread :data:`BUSY_RATIO` times the pool's or
    more.

    Example:
        >>> process_stretch_text(Comparison(rows=(), prior_stretch=(1.0, 30.0)))
        ''
        >>> print(process_stretch_text(Comparison(rows=(), prior_stretch=(1.69, 30.0))))
        This run's processes spread wider than the calibration's A/A runs: each benchmark's process prior was widened 1.3× to match.
        >>> print(process_stretch_text(Comparison(rows=(), prior_stretch=(9.0, 3.0))))
        ⚠️ This run's processes spread wider than the calibration's A/A runs: each benchmark's process prior was widened 3.0× to match. The machine was busier than on the calibration's day, so only large changes could be told from noise (see each row's detectable change). Rerun on a quieter machine to see small ones.
    """
    stretch = comparison.prior_stretch
    if comparison.paired or stretch is None or not math.sqrt(stretch[0]) >= 1.05:
        return ""
    widened = math.sqrt(stretch[0])
    text = (
        "This run's processes spread wider than the calibration's A/A runs: each "
        f"benchmark's process prior was widened {widened:.1f}× to match."
    )
    if widened < BUSY_RATIO:
        return text
    return f"⚠️ {text} {_BUSIER}"


def calibration_warning(note: Mapping[str, Any]) -> str:
    """A warning when the calibration was measured on another kind of machine, else ``""``.

    Example:
        >>> "another machine or timing (cpu_count: 2 there, 16 here)" in calibration_warning(
        ...     {"mismatch": {"cpu_count": [2, 16]}})
        True
        >>> calibration_warning({"mismatch": {}})
        ''
        >>> calibration_warning({"mismatch": {}, "confirm": 2, "run_confirm": 0})[:60]
        "⚠️ The calibration's false-alarm figure was measured with a "
    """
    mismatch = note.get("mismatch") or {}
    warnings = []
    if mismatch:
        parts = "; ".join(
            f"{neutralize(str(k))}: {neutralize(str(v[0]))} there, {neutralize(str(v[1]))} here"
            for k, v in mismatch.items()
        )
        warnings.append(
            f"⚠️ The calibration was measured on another machine or timing ({parts}): its noise gates "
            "may be too tight or too loose here. Recalibrate on this machine with "
            "`rlpace-bench aa` and check the file in."
        )
    here, there = note.get("run_confirm"), note.get("confirm") or 0
    if here is not None and here != there:

        def side(k: int) -> str:
            return f"a confirmation of {plural(k, 'run')} a side" if k else "no confirmation"

        warnings.append(
            f"⚠️ The calibration's false-alarm figure was measured with {side(there)}, this "
            f"run used {side(here)}: it does not describe this run. Run `rlpace-bench aa "
            f"--confirm {here}` to measure it."
        )
    return " ".join(warnings)
