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
typed :class:`~rlpace.bench.comparison.Comparison` it returns. This module renders the
``rlpace`` style and owns the templates; the comment's sentences (what a run could
see, how it was judged) are :mod:`rlpace.bench.render_notes`, the ``seed`` style's
tables :mod:`rlpace.bench.render_seed`.

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
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from rlpace.bench import units
from rlpace.bench.choices import STYLES
from rlpace.bench.comparison import BenchmarkChange, Comparison, Verdict
from rlpace.bench.counts.pricing import FAMILIES
from rlpace.bench.errors import BenchInputError
from rlpace.bench.markdown_safe import COMMENT_LIMIT, cap, code_span, largest_fitting, neutralize
from rlpace.bench.provenance import comparison_warnings, describe_run
from rlpace.bench.render_notes import (
    calibration_text,
    calibration_warning,
    change_size,
    confirmation_text,
    paired_text,
    plural,
    process_stretch_text,
    sensitivity_text,
)
from rlpace.bench.render_seed import render_seed, value_cell

__all__ = [
    "DEFAULT_TITLE",
    "GITHUB_COMMENT_LIMIT",
    "REPORT_MARKER",
    "SET_TITLES",
    "escape_markdown",
    "render_report",
]

#: GitHub refuses comments longer than this many characters.
GITHUB_COMMENT_LIMIT = COMMENT_LIMIT

#: First line of every ``rlpace`` report; a bot finds its own comment by it.
REPORT_MARKER = "<!-- rlpace-bench-report -->"

#: The heading of a report given no title.
DEFAULT_TITLE = "Benchmark results"

#: The heading of each benchmark set's section (or table), by set name.
SET_TITLES = {"cpu": "CPU", "gpu": "GPU"}

_TEMPLATES = Path(__file__).parent / "templates"
COUNTS_MARK = "†"
"""Marks the change in time of a row whose counts, not its time, flagged it."""


# ------------------------------------------------------------------------- cells


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
    # a row its counts flagged: this is its time, which did not decide (see COUNTS_MARK)
    return f"{pct} ({times:.2f}× {word})" + (f" {COUNTS_MARK}" if row.counts_decided else "")


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
    return change_size(mdc) if mdc > 100 else "±" + change_size(mdc)


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
    Verdict.SKIPPED: "skipped",
}


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
        value=value_cell,
        rate=units.format_rate,
        pct=_pct,
        interval=_interval,
        change=_change,
        q=_q,
        detectable=_detectable,
        throughput=_throughput,
        verdict=lambda v: _VERDICT_LABEL[v],
        plural=plural,
        calibration_text=calibration_text,
        calibration_warning=calibration_warning,
        confirmation_text=confirmation_text,
        paired_text=paired_text,
        process_stretch_text=process_stretch_text,
        sensitivity_text=sensitivity_text,
        code_cell=lambda text: code_span(text).replace("|", "\\|"),
        count=lambda value: f"{value:g}",
    )
    # what the count tier charges a call into each priced family, for the comment's notes
    env.globals["call_prices"] = {f.name: f"{f.price:g}" for f in FAMILIES}
    env.globals["counts_mark"] = COUNTS_MARK
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


def _titled(sets: dict[str, Comparison]) -> dict[str, Comparison]:
    """``sets`` keyed by their headings (:data:`SET_TITLES`), or by their own names when
    two would share a heading (``"cpu"`` and ``"CPU"``): no set is ever dropped.

    Example:
        >>> list(_titled({"cpu": Comparison(rows=()), "mine": Comparison(rows=())}))
        ['CPU', 'mine']
        >>> list(_titled({"cpu": Comparison(rows=()), "CPU": Comparison(rows=())}))
        ['cpu', 'CPU']
    """
    titled = {SET_TITLES.get(name, name): c for name, c in sets.items()}
    return titled if len(titled) == len(sets) else dict(sets)


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
    sets = _titled(_sets(comparisons))
    title = title or DEFAULT_TITLE
    if style == "seed":
        return render_seed(sets, title, max_chars, _environment().get_template("seed.md.j2"))
    return _render_rlpace(sets, title, max_chars)


def _summary(comparison: Comparison) -> dict[str, Any]:
    counts = comparison.counts()
    return {
        "counts": counts,
        "regressions": comparison.by_verdict(Verdict.WORSENED),
        "improvements": comparison.by_verdict(Verdict.IMPROVED),
        "failed": comparison.by_verdict(Verdict.FAILED),
    }


def _headline(sets: dict[str, Comparison]) -> str:
    worsened = sum(c.counts()["worsened"] for c in sets.values())
    failed = sum(c.counts()["failed"] for c in sets.values())
    improved = sum(c.counts()["improved"] for c in sets.values())
    total = sum(c.counts()["total"] for c in sets.values())
    removed = sum(1 for c in sets.values() for r in c.lost if r.verdict is Verdict.REMOVED)
    if not any(c.has_base for c in sets.values()):
        return f"ℹ️ **No base run to compare against** — {plural(total, 'benchmark')} measured."
    if total and not any(c.compared for c in sets.values()) and not (worsened or failed):
        lead = "⚠️ **No benchmark in common**" + (f", {removed} removed" if removed else "")
        return f"{lead} — nothing was compared ({plural(total, 'benchmark')} in all)."
    if worsened or failed or removed:
        bits = [plural(worsened, "regression")] if worsened else []
        bits += [f"{failed} failed"] if failed else []
        bits += [f"{removed} removed"] if removed else []
        joined = bits[0] if len(bits) == 1 else ", ".join(bits[:-1]) + " and " + bits[-1]
        lead = f"❌ **{joined}**"
    else:
        lead = "✅ **No regressions**"
    tail = f"{plural(improved, 'improvement')}, {plural(total, 'benchmark')} compared"
    return f"{lead} — {tail}."


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
                    "name": name,
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
            title=escape_markdown(title),
            headline=_headline(sets),
            sections=sections,
            Verdict=Verdict,
        ).rstrip("\n")

    text = render()
    if len(text) <= max_chars:
        return text
    # Keep the verdict and the regressions; shrink the full tables first, then the
    # lists, then cut hard as a last resort.
    full_limit = largest_fitting(longest, lambda n: len(render(n)) <= max_chars)
    text = render(full_limit)
    if len(text) <= max_chars:
        return text
    longest_list = max(len(c.by_verdict(v)) for c in sets.values() for v in Verdict)
    list_limit = largest_fitting(longest_list, lambda n: len(render(full_limit, n)) <= max_chars)
    text = render(full_limit, list_limit)
    if len(text) <= max_chars:
        return text
    return cap(text, max_chars)
