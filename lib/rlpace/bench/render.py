"""Comparisons → PR-comment markdown, through jinja2 templates shipped as package data.

Two styles:

- ``"rlpace"`` (default): verdict first, then regressions, improvements and a collapsed
  full table, one section per benchmark set; plain markdown (no LaTeX) that reads right
  in GitHub and in e-mail notifications; every change with its interval and q-value or
  a "noise" label; benchmark names escaped; a hidden marker (:data:`REPORT_MARKER`) so a
  bot can find and update its comment; never longer than GitHub's comment limit.
- ``"seed"``: the comment of the pytest-benchmark PR bot that RL projects used before,
  reproduced to the character (LaTeX colour macros, bold changes beyond the threshold).

Templates only format; every decision comes from :mod:`rlpace.bench.compare`, as the
typed :class:`~rlpace.bench.comparison.Comparison` it returns.

Example:
    >>> from rlpace.bench.compare import compare_runs
    >>> from rlpace.bench.results import results_from_records
    >>> head = results_from_records([{"fullname": "t::a", "name": "a", "data": [1e-3] * 5}])
    >>> text = render_report(compare_runs(head), style="seed", title="Demo")
    >>> text.splitlines()[0]
    '##  \\t Demo'
    >>> print("\\n".join(text.splitlines()[3:6]))
    | Name | Max      | Mean     | Ops           |
    | ---- | -------- | -------- | ------------- |
    | a    | 1.0000ms | 1.0000ms | 1.0000 KOps/s |
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from rlpace.bench import units
from rlpace.bench.comparison import BenchmarkChange, Comparison, Verdict
from rlpace.bench.controls import CONTROL_IMPL
from rlpace.bench.counts.pricing import FAMILIES
from rlpace.bench.errors import BenchInputError
from rlpace.bench.markdown_safe import COMMENT_LIMIT, cap, code_span, neutralize
from rlpace.bench.provenance import comparison_warnings, describe_run
from rlpace.bench.sensitivity import LEVELS, sensitivity

__all__ = [
    "DEFAULT_TITLE",
    "GITHUB_COMMENT_LIMIT",
    "REPORT_MARKER",
    "STYLES",
    "calibration_text",
    "calibration_warning",
    "confirmation_text",
    "escape_markdown",
    "format_ops",
    "paired_text",
    "format_time",
    "sensitivity_text",
    "render_report",
    "seed_change_cell",
]

STYLES = ("rlpace", "seed")
#: GitHub refuses comments longer than this many characters.
GITHUB_COMMENT_LIMIT = COMMENT_LIMIT
#: First line of every ``rlpace`` report; a bot finds its own comment by it.
REPORT_MARKER = "<!-- rlpace-bench-report -->"
#: The heading of a report given no title.
DEFAULT_TITLE = "Benchmark results"
SET_TITLES = {"cpu": "CPU", "gpu": "GPU"}
_GREEN, _YELLOW, _RED = "#35bf28", "#D29922", "#d91a1a"
_TEMPLATES = Path(__file__).parent / "templates"


# ------------------------------------------------------------------------- formatting


def format_time(seconds: float) -> str:
    """A time with four decimals in ``μs`` (< 100 µs), ``ms`` (< 100 ms) or ``s``
    (:func:`rlpace.bench.units.format_time`).

    Example:
        >>> format_time(5.2e-5), format_time(0.0123), format_time(1.5)
        ('52.0000 μs', '12.3000 ms', '1.5000 s')
        >>> format_time(float("nan"))
        '-'
    """
    return units.format_time(seconds)


def format_ops(ops: float) -> str:
    """Operations per second with four decimals in ``Ops/s``, ``KOps/s`` or ``MOps/s``.

    Example:
        >>> format_ops(12.5), format_ops(1234.5), format_ops(2.5e6)
        ('12.5000 Ops/s', '1.2345 KOps/s', '2.5000 MOps/s')
    """
    return units.format_ops(ops)


def seed_change_cell(change: float, threshold: float = 5.0) -> str:
    """The seed bot's Change cell: signed, two decimals, LaTeX ``%``, colour and bold.

    Green when positive, red otherwise, no colour when ``|change| < 0.01``; bold
    when ``|change| > threshold``.

    Example:
        >>> seed_change_cell(12.345)
        '$\\\\textbf{\\\\color{#35bf28}+12.35\\\\\\\\%}$'
        >>> print(seed_change_cell(-3.0), seed_change_cell(0.004))
        $\\color{#d91a1a}-3.00\\\\%$ $+0.00\\\\%$
    """
    if not math.isfinite(change):
        return "-"
    change = change + 0.0  # -0.0 prints as 0.00, like the seed bot
    text = f"{'+' if change > 0 else ''}{change:.2f}\\\\%"
    if abs(change) >= 0.01:
        text = f"\\color{{{_GREEN if change > 0 else _RED}}}{text}"
    if abs(change) > threshold:
        text = f"\\textbf{{{text}}}"
    return f"${text}$"


#: Makes any text one line of inert markdown (:func:`rlpace.bench.markdown_safe.neutralize`):
#: every name, note and unit in both styles goes through it.
escape_markdown = neutralize


def _pct(value: float, digits: int = 1) -> str:
    if not math.isfinite(value):
        return "-"
    return f"{value:+.{digits}f}%"


def _change(row: BenchmarkChange) -> str:
    """The median change with how many times slower or faster, e.g. ``-50.0% (2.00× slower)``."""
    pct = _pct(row.median_change_pct)
    if not math.isfinite(row.median_change_pct):
        return pct
    speed = 1 + row.median_change_pct / 100
    if speed <= 0:
        return pct
    word = "faster" if speed >= 1 else "slower"
    times = speed if speed >= 1 else 1 / speed
    return f"{pct} ({times:.2f}× {word})"


def _interval(row: BenchmarkChange) -> str:
    if not (math.isfinite(row.ci_low_pct) and math.isfinite(row.ci_high_pct)):
        return "-"
    return f"[{row.ci_low_pct:+.1f}%, {row.ci_high_pct:+.1f}%]"


def _q(row: BenchmarkChange) -> str:
    if math.isfinite(row.q_value):
        return "<0.001" if row.q_value < 1e-3 else f"{row.q_value:.3f}"
    return "intervals" if row.method == "intervals" else "-"


def _detectable(row: BenchmarkChange, threshold: float = 0.0) -> str:
    """The minimal detectable change at 80% power (never below the threshold, which a
    change must also pass), e.g. ``±7.5%``; beyond +100% as a factor, ``×3.2``; ``-``
    when unknown."""
    if not math.isfinite(row.mdc_pct):
        return "-"
    mdc = max(row.mdc_pct, threshold)
    return _size(mdc) if mdc > 100 else "±" + _size(mdc)


def _size(pct: float) -> str:
    """A change's size: ``7.5%``, beyond +100% a factor ``×3.2``, ``-`` when unknown."""
    if not math.isfinite(pct):
        return "-"
    if pct <= 100:
        return f"{pct:.1f}%"
    factor = 1 + pct / 100
    return "≥×1000" if factor >= 1000 else f"×{factor:.1f}"


def sensitivity_text(comparison: Comparison, *, markdown: bool = True) -> str:
    """The comment's sentence on what the run could see (empty when nothing was
    compared): how many judged benchmarks would catch a 2, 5 and 10 % slow-down, how
    many of those on their counts, and what the timed ones need
    (:func:`rlpace.bench.sensitivity.sensitivity`). Names are escaped for markdown,
    or left as they are with ``markdown=False`` (a terminal).

    Example:
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
    aside = f" ({_plural(s.controls, f'{CONTROL_IMPL} control')} aside)" if s.controls else ""
    low, mid, high = LEVELS
    text = (
        f"What this run could see: of {_plural(s.judged, 'benchmark')} judged{aside}, "
        f"{s.catches(low)} would catch a {low:g}% slow-down, {s.catches(mid)} a {mid:g}% "
        f"one and {s.catches(high)} a {high:g}% one"
    )
    if s.by_counts:
        counted = s.catches_counted(high)
        text += f"; {counted} of them on {'its' if counted == 1 else 'their'} instruction counts"
    text += "."
    if s.timing:
        n = len(s.timing)
        median = s.timing_median_pct
        if not math.isfinite(median):
            text += (
                f" {'The timed one has' if n == 1 else f'Most of the {n} timed ones have'} no "
                "detectable change to show (too few rounds or runs, or summary statistics only)."
            )
        else:
            wide = sorted(
                (item for item in s.timing if math.isfinite(item[1])), key=lambda i: -i[1]
            )
            shown = escape_markdown if markdown else str
            widest = ", ".join(f"{shown(name)} {_size(d)}" for name, d, _ in wide[:2] if d > high)
            text += (
                f" The {n} timed {'one needs' if n == 1 else 'ones need'} {_size(median)} at "
                "the median" + (f", {widest}" if widest else "") + "."
            )
    if s.work_counted:
        text += (
            f" {s.work_counted} of the timed {'one' if n == 1 else 'ones'} also "
            f"{'counts' if s.work_counted == 1 else 'count'} the kernels, syncs, copies, "
            "aten ops and Python calls each call makes from its thread, and catch any "
            "change of those, whatever its size in time"
        )
        if s.work_handoff:
            text += (
                f"; in {s.work_handoff} of them that thread dispatches no operator: it hands "
                "the work to other threads or processes, whose work is left to the clock"
            )
        text += "."
    return text


def _throughput(row: BenchmarkChange) -> str:
    value = row.head_throughput
    if not math.isfinite(value):
        return "-"
    for scale, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= scale:
            return f"{value / scale:.2f} {prefix} {neutralize(row.unit or 'items')}/s"
    return f"{value:.2f} {neutralize(row.unit or 'items')}/s"


_VERDICT_LABEL = {
    Verdict.IMPROVED: "improved",
    Verdict.WORSENED: "**worsened**",
    Verdict.UNCHANGED: "noise",
    Verdict.NEW: "new",
    Verdict.REMOVED: "removed",
    Verdict.FAILED: "**failed**",
}


# ---------------------------------------------------------------------------- tables


def _table(header: list[str], rows: list[list[str]]) -> str:
    """An aligned markdown table (cells padded to the column width, ``---`` at least)."""
    widths = [max(3, len(h)) for h in header]
    for row in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row)]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"

    out = [line(header), line(["-" * w for w in widths])]
    out.extend(line(r) for r in rows)
    return "\n".join(out)


def _seed_rows(comparison: Comparison) -> tuple[list[str], list[list[str]]]:
    header = ["Name", "Max", "Mean", "Ops"]
    if comparison.has_base:
        header += ["Ops on Repo `HEAD`", "Change"]
    rows = []
    for r in comparison.rows:
        name = neutralize(r.name)
        if r.verdict is Verdict.REMOVED:
            cells = [name, "-", "-", "removed"]
        elif r.verdict is Verdict.FAILED:
            cells = [name, "-", "-", "failed"]
        else:
            cells = [
                name,
                _value(r.head_max, r.value_unit, space=False),
                _value(r.head_mean, r.value_unit, space=False),
                units.format_rate(r.head_ops, r.value_unit),
            ]
        if comparison.has_base:
            if r.verdict is Verdict.NEW:
                base = units.format_rate(r.base_ops, r.value_unit)
                cells += ["new" if not math.isfinite(r.base_ops) else base, "new"]
            elif r.verdict in (Verdict.REMOVED, Verdict.FAILED):
                cells += [units.format_rate(r.base_ops, r.value_unit), r.verdict.value]
            else:
                cells += [
                    units.format_rate(r.base_ops, r.value_unit),
                    seed_change_cell(r.change_pct, comparison.threshold),
                ]
        rows.append(cells)
    return header, rows


def _value(value: float, unit: str = units.SECONDS, *, space: bool = True) -> str:
    """:func:`units.format_value` with a free-text unit (an asv ``track_*`` unit, read
    from a file) passed through the neutraliser like every other name."""
    text = units.format_value(value, unit, space=space)
    if unit in (units.SECONDS, units.BYTES) or not text.endswith(f" {unit}"):
        return text
    return f"{text[: -len(unit)]}{neutralize(unit)}"


# --------------------------------------------------------------------------- render


@lru_cache(maxsize=1)
def _environment():
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(_TEMPLATES)),
        autoescape=False,
        keep_trailing_newline=False,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters.update(
        md=escape_markdown,
        time=format_time,
        ops=format_ops,
        value=_value,
        rate=units.format_rate,
        pct=_pct,
        interval=_interval,
        change=_change,
        q=_q,
        detectable=_detectable,
        throughput=_throughput,
        verdict=lambda v: _VERDICT_LABEL[v],
        plural=_plural,
        calibration_text=calibration_text,
        calibration_warning=calibration_warning,
        confirmation_text=confirmation_text,
        paired_text=paired_text,
        sensitivity_text=sensitivity_text,
        code_cell=lambda text: code_span(text).replace("|", "\\|"),
        count=lambda value: f"{value:g}",
    )
    # what the count tier charges a call into each priced family, for the comment's notes
    env.globals["call_prices"] = {f.name: f"{f.price:g}" for f in FAMILIES}
    return env


def _sets(comparisons: Comparison | Mapping[str, Comparison]) -> dict[str, Comparison]:
    if isinstance(comparisons, Comparison):
        return {"": comparisons}
    if isinstance(comparisons, Mapping) and comparisons:
        bad = {k: type(v).__name__ for k, v in comparisons.items() if not isinstance(v, Comparison)}
        if not bad:
            return dict(comparisons)
        raise BenchInputError(
            f"render_report: expected Comparison values per set, got {bad}; "
            "build them with rlpace.bench.compare.compare_runs"
        )
    raise BenchInputError(
        f"render_report: expected a Comparison or a non-empty mapping set name → Comparison, "
        f"got {type(comparisons).__name__}"
    )


def render_report(
    comparisons: Comparison | Mapping[str, Comparison],
    *,
    style: str = "rlpace",
    title: str = "",
    max_chars: int = GITHUB_COMMENT_LIMIT,
) -> str:
    """Render one or several comparisons as PR-comment markdown.

    Args:
        comparisons: one :class:`~rlpace.bench.comparison.Comparison`, or a mapping set
            name (``"cpu"``, ``"gpu"``) → comparison; the ``rlpace`` style shows one
            section per set, the ``seed`` style one table per set.
        style: ``"rlpace"`` (default) or ``"seed"``.
        title: the report's heading text.
        max_chars: neither style returns more characters than this (GitHub's
            comment limit by default): the ``rlpace`` style truncates its full tables
            first, with a note, then the lists of improvements and regressions; the
            ``seed`` style truncates its tables, with a note; both cut hard as a last
            resort (:func:`rlpace.bench.markdown_safe.cap`).

    Returns:
        The markdown text (ending without a trailing newline).

    Raises:
        BenchInputError: an unknown style or something that is not a comparison.

    Example:
        >>> from rlpace.bench.compare import compare_runs
        >>> from rlpace.bench.results import results_from_records
        >>> base = results_from_records([{"fullname": "a", "data": [1.0, 1.01, 0.99] * 5}])
        >>> head = results_from_records([{"fullname": "a", "data": [2.0, 2.02, 1.98] * 5}])
        >>> text = render_report({"cpu": compare_runs(head, base)}, title="PR #1")
        >>> text.splitlines()[0] == REPORT_MARKER
        True
        >>> "1 regression" in text
        True
    """
    if style not in STYLES:
        raise BenchInputError(f"style: expected one of {', '.join(STYLES)}, got {style!r}")
    sets = _sets(comparisons)
    if style == "seed":
        return _render_seed(sets, title, max_chars)
    return _render_rlpace(sets, title, max_chars)


def _render_seed(sets: dict[str, Comparison], title: str, max_chars: int) -> str:
    text = _render_seed_tables(sets, title)
    if len(text) <= max_chars:
        return text
    longest = max(len(c.rows) for c in sets.values())
    shown = _largest_fitting(
        longest, lambda n: len(_render_seed_tables(sets, title, n)) <= max_chars
    )
    return cap(_render_seed_tables(sets, title, shown), max_chars)


def _render_seed_tables(sets: dict[str, Comparison], title: str, limit: int | None = None) -> str:
    template = _environment().get_template("seed.md.j2")
    title = title or DEFAULT_TITLE
    parts = []
    for name, comparison in sets.items():
        improved, worsened = comparison.threshold_counts()
        header, rows = _seed_rows(comparison)
        if worsened:
            status = (
                f"$\\color{{{_YELLOW}}}\\textsf{{\\Large ⚠\\kern{{0.2cm}}\\normalsize Warning}}$"
            )
        else:
            status = f"$\\color{{{_GREEN}}}\\textsf{{\\Large ✔\\kern{{0.2cm}}\\normalsize OK}}$"
        set_title = title if len(sets) == 1 else f"{title} ({SET_TITLES.get(name, name)})".strip()
        table = _table(header, rows if limit is None else rows[:limit])
        if limit is not None and len(rows) > limit:
            table += (
                f"\n\n_{len(rows) - limit} more rows not shown: the comment would exceed "
                "GitHub's size limit._"
            )
        parts.append(
            template.render(
                has_base=comparison.has_base,
                status=status if comparison.has_base else "",
                title=neutralize(set_title),
                total=len(comparison.rows),
                improved=improved,
                worsened=worsened,
                green=_GREEN,
                red=_RED,
                table=table,
            )
        )
    return "\n\n".join(parts)


def _summary(comparison: Comparison) -> dict[str, Any]:
    counts = comparison.counts()
    return {
        "counts": counts,
        "regressions": comparison.by_verdict(Verdict.WORSENED),
        "improvements": comparison.by_verdict(Verdict.IMPROVED),
        "failed": comparison.by_verdict(Verdict.FAILED),
    }


def _plural(n: int, word: str, plural: str | None = None) -> str:
    return f"{n} {word if n == 1 else (plural or word + 's')}"


def confirmation_text(comparison: Comparison) -> str:
    """The comment's sentence about the confirmation stage (empty without one).

    Example:
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
    runs = _plural(comparison.confirm_repeats, "more run")
    how = "as duets, judged pair by pair" if comparison.paired else "ABBA"
    return (
        f"Confirmation in fresh processes: the {_plural(len(tried), 'benchmark')} the first "
        f"runs flagged ran again, {runs} a side, {how}; {outcome}."
    )


def paired_text(comparison: Comparison) -> str:
    """The comment's sentence about duet runs judged pair by pair (empty without them),
    and the A/A duet pool that lent their tests its pair spreads, if one did.

    Example:
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
        >>> print(paired_text(Comparison(rows=(), paired=4, duet_calibration={
        ...     "source": "reports/calibration/cpu-duets.json", "pairs": 16,
        ...     "created": "2026-12-02", "held_out_alarms": 0, "held_out_alarms_first": 5,
        ...     "held_out_runs": 200, "mismatch": {"cpu_count": [2, 16]}})).split(": the load")[1])
        ... # doctest: +NORMALIZE_WHITESPACE
         both sides met cancels in each pair, and a change must beat the pairs' own spread, weighed with the spread of its pairs in 16 A/A duets (`reports/calibration/cpu-duets.json`, 2026-12-02; judged as this run is, 200 held-out splits of them flagged anything in 0 after the confirmation, 5 before). ⚠️ Those duets ran on another machine or timing (cpu_count: 2 there, 16 here): rerun `rlpace-bench aa --duets 16` here.
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
        f"; the {CONTROL_IMPL} twins, negative controls, in the first {max(controls)}"
        if controls and max(controls) < first
        else ""
    )
    text = (
        f"Benchmarks judged on their time ran as {_plural(first, 'duet')} (base and head "
        f"at the same time, a core each{fewer}) and were judged pair by pair: the load "
        "both sides met cancels in each pair, and a change must beat the pairs' own spread"
    )
    more = sorted({n - first for n in runs if n > first})
    extended = (
        f" {_plural(sum(1 for n in runs if n > first), 'benchmark')} whose A/A pairs "
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
        f"({_code(pool['source'])}{when}{held})." + extended
    )
    mismatch = pool.get("mismatch") or {}
    if mismatch:
        parts = ", ".join(
            f"{neutralize(str(k))}: {neutralize(str(a))} there, {neutralize(str(b))} here"
            for k, (a, b) in mismatch.items()
        )
        text += (
            f" ⚠️ Those duets ran on another machine or timing ({parts}): rerun "
            f"`rlpace-bench aa --duets {pool['pairs']}` here."
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
        f"{_plural(int(cut['short']), 'benchmark')} got fewer pairs than planned, so each "
        "could see only a larger change (see its detectable change)."
    )


#: Today's pairs spreading this many times their A/A duets' (the median over the
#: benchmarks) earn the comment a warning: with 4 pairs a day like the calibration's
#: reads about 0.9, and 2 is beyond what 30 benchmarks' median wanders by chance.
BUSY_RATIO = 2.0


def _busy_text(spread: Mapping[str, Any] | None) -> str:
    """What the comment says of how widely today's pairs spread against the A/A duets'
    (:func:`rlpace.bench.compare.pair_spread_summary`): a warning on a busy day, a line
    on the benchmarks judged on their own pairs alone, else nothing.

    Example:
        >>> print(_busy_text({"benchmarks": 30, "ratio": 4.2, "disowned": 9}))
         ⚠️ Today's pairs spread 4.2× as wide as in those A/A duets (the median over 30 benchmarks), 9 of them so far that they were judged on their own pairs alone: the machine was busier than on the calibration's day, so only large changes could be told from noise (see each row's detectable change). Rerun on a quieter machine to see small ones.
        >>> print(_busy_text({"benchmarks": 30, "ratio": 0.9, "disowned": 1}))
         1 benchmark whose pairs spread far beyond its A/A duets' was judged on its own pairs alone.
        >>> _busy_text({"benchmarks": 30, "ratio": 0.9, "disowned": 0}), _busy_text(None)
        ('', '')
    """
    if not spread:
        return ""
    disowned = int(spread.get("disowned") or 0)
    ratio = spread.get("ratio")
    if isinstance(ratio, int | float) and ratio >= BUSY_RATIO:
        alone = {0: "", 1: ", 1 of them so far that it was judged on its own pairs alone"}.get(
            disowned, f", {disowned} of them so far that they were judged on their own pairs alone"
        )
        return (
            f" ⚠️ Today's pairs spread {ratio:.1f}× as wide as in those A/A duets (the "
            f"median over {_plural(int(spread['benchmarks']), 'benchmark')}){alone}: the "
            "machine was busier than on the calibration's day, so only large changes could "
            "be told from noise (see each row's detectable change). Rerun on a quieter "
            "machine to see small ones."
        )
    if disowned:
        one = disowned == 1
        return (
            f" {_plural(disowned, 'benchmark')} whose pairs spread far beyond "
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
    out = f"Calibrated noise: {_code(note['source'])} ({note['pool']} A/A runs{when})."
    runs = note.get("held_out_runs") or 0
    bound = note.get("false_alarm_bound")
    if runs:
        out += f" Held-out A/A runs flagged anything in {note['held_out_alarms']} of {runs}"
        confirm = note.get("confirm") or 0
        if confirm:
            out += f" with a confirmation of {_plural(confirm, 'run')} a side"
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
                f"{_plural(note['detection_benchmarks'], 'benchmark')} whose noise allows it "
                f"at {power}"
            )
        else:
            out += f" no benchmark's noise allows detecting a {injected:g}% slow-down at {power}"
    return out + "."


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
            f"{escape_markdown(str(k))}: {escape_markdown(str(v[0]))} there, "
            f"{escape_markdown(str(v[1]))} here"
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
            return f"a confirmation of {_plural(k, 'run')} a side" if k else "no confirmation"

        warnings.append(
            f"⚠️ The calibration's false-alarm figure was measured with {side(there)}, this "
            f"run used {side(here)}: it does not describe this run. Run `rlpace-bench aa "
            f"--confirm {here}` to measure it."
        )
    return " ".join(warnings)


def _code(text: str) -> str:
    return code_span(text)


def _headline(sets: dict[str, Comparison]) -> str:
    worsened = sum(c.counts()["worsened"] for c in sets.values())
    failed = sum(c.counts()["failed"] for c in sets.values())
    improved = sum(c.counts()["improved"] for c in sets.values())
    total = sum(c.counts()["total"] for c in sets.values())
    removed = sum(1 for c in sets.values() for r in c.lost if r.verdict is Verdict.REMOVED)
    if not any(c.has_base for c in sets.values()):
        return f"ℹ️ **No base run to compare against** — {_plural(total, 'benchmark')} measured."
    if total and not any(c.compared for c in sets.values()) and not (worsened or failed):
        lead = "⚠️ **No benchmark in common**" + (f", {removed} removed" if removed else "")
        return f"{lead} — nothing was compared ({_plural(total, 'benchmark')} in all)."
    if worsened or failed or removed:
        bits = [_plural(worsened, "regression")] if worsened else []
        bits += [f"{failed} failed"] if failed else []
        bits += [f"{removed} removed"] if removed else []
        joined = bits[0] if len(bits) == 1 else ", ".join(bits[:-1]) + " and " + bits[-1]
        lead = f"❌ **{joined}**"
    else:
        lead = "✅ **No regressions**"
    tail = f"{_plural(improved, 'improvement')}, {_plural(total, 'benchmark')} compared"
    return f"{lead} — {tail}."


def _largest_fitting(high: int, fits: Callable[[int], bool]) -> int:
    """The largest ``n`` in ``[0, high]`` with ``fits(n)`` (binary search; 0 if none).

    ``fits`` must be monotone: true up to some ``n``, false beyond.

    Example:
        >>> _largest_fitting(100, lambda n: n * n <= 50)
        7
    """
    low = 0
    while low < high:
        mid = (low + high + 1) // 2
        if fits(mid):
            low = mid
        else:
            high = mid - 1
    return low


def _render_rlpace(sets: dict[str, Comparison], title: str, max_chars: int) -> str:
    template = _environment().get_template("rlpace.md.j2")
    longest = max(len(c.rows) for c in sets.values())

    def render(full_limit: int | None = None, list_limit: int | None = None) -> str:
        sections = []
        for name, comparison in sets.items():
            rows = comparison.rows
            shown = rows if full_limit is None else rows[:full_limit]
            summary = _summary(comparison)
            regressions = summary["regressions"]
            improvements = summary["improvements"]
            unconfirmed = tuple(r for r in rows if r.confirmed is False)
            all_unconfirmed = unconfirmed
            if list_limit is not None:
                regressions, improvements = regressions[:list_limit], improvements[:list_limit]
                unconfirmed = unconfirmed[:list_limit]
            sections.append(
                {
                    "name": SET_TITLES.get(name, name),
                    "comparison": comparison,
                    "head_run": describe_run(comparison.head),
                    "base_run": describe_run(comparison.base) if comparison.has_base else "",
                    "warnings": [w.text for w in comparison_warnings(comparison)],
                    "counts": summary["counts"],
                    "regressions": regressions,
                    "regressions_hidden": len(summary["regressions"]) - len(regressions),
                    "improvements": improvements,
                    "improvements_hidden": len(summary["improvements"]) - len(improvements),
                    "failed": summary["failed"],
                    "unconfirmed": unconfirmed,
                    "unconfirmed_hidden": len(all_unconfirmed) - len(unconfirmed),
                    "rows": shown,
                    "rows_hidden": len(rows) - len(shown),
                    "show_throughput": any(math.isfinite(r.items_per_call) for r in rows),
                }
            )
        return template.render(
            marker=REPORT_MARKER,
            title=escape_markdown(title or DEFAULT_TITLE),
            headline=_headline(sets),
            sections=sections,
            Verdict=Verdict,
        ).rstrip("\n")

    text = render()
    if len(text) <= max_chars:
        return text
    # Keep the verdict and the regressions; shrink the full tables first, then the
    # lists, then cut hard as a last resort.
    full_limit = _largest_fitting(longest, lambda n: len(render(n)) <= max_chars)
    text = render(full_limit)
    if len(text) <= max_chars:
        return text
    longest_list = max(len(c.by_verdict(v)) for c in sets.values() for v in Verdict)
    list_limit = _largest_fitting(longest_list, lambda n: len(render(full_limit, n)) <= max_chars)
    text = render(full_limit, list_limit)
    if len(text) <= max_chars:
        return text
    return cap(text, max_chars)
