"""The ``seed`` style: the comment of the pytest-benchmark PR bot that RL projects
used before, reproduced to the character.

One table per benchmark set: name, max, mean and calls per second of the head run,
then, with a base, its calls per second and the change, a LaTeX cell coloured green
or red and bold beyond the threshold (:func:`seed_change_cell`); a status line
(✔ OK, or ⚠ Warning when anything worsened beyond the threshold). Names and units go
through :func:`rlpace.bench.markdown_safe.neutralize` like every other cell. The
style keeps the seed bot's threshold rule: it shows the comparator's changes but
not its verdicts, which only the ``rlpace`` style (:mod:`rlpace.bench.render`)
explains. :func:`rlpace.bench.render.render_report` is the way in.

Example:
    >>> from rlpace.bench.compare import compare_runs
    >>> from rlpace.bench.render import render_report
    >>> from rlpace.bench.results import results_from_records
    >>> head = results_from_records([{"fullname": "t::a", "name": "a", "data": [1e-3] * 5}])
    >>> print(render_report(compare_runs(head), style="seed").splitlines()[5])
    | a    | 1.0000ms | 1.0000ms | 1.0000 KOps/s |
"""

from __future__ import annotations

import math
from typing import Any

from rlpace.bench import units
from rlpace.bench.comparison import Comparison, Verdict
from rlpace.bench.markdown_safe import cap, largest_fitting, neutralize

__all__ = ["render_seed", "seed_change_cell", "value_cell"]

_GREEN, _YELLOW, _RED = "#35bf28", "#D29922", "#d91a1a"


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


def value_cell(value: float, unit: str = units.SECONDS, *, space: bool = True) -> str:
    """:func:`units.format_value` with a free-text unit (an asv ``track_*`` unit, read
    from a file) passed through the neutraliser like every other name.

    Example:
        >>> print(value_cell(0.0123), "|", value_cell(3.0, "steps*"), "|", value_cell(2 ** 21, "bytes"))
        12.3000 ms | 3 steps\\* | 2.00 MiB
    """
    text = units.format_value(value, unit, space=space)
    if unit in (units.SECONDS, units.BYTES) or not text.endswith(f" {unit}"):
        return text
    return f"{text[: -len(unit)]}{neutralize(unit)}"


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
        elif r.verdict is Verdict.FAILED or (
            r.verdict is Verdict.SKIPPED and not math.isfinite(r.head_mean)
        ):
            cells = [name, "-", "-", r.verdict.value]
        else:
            cells = [
                name,
                value_cell(r.head_max, r.value_unit, space=False),
                value_cell(r.head_mean, r.value_unit, space=False),
                units.format_rate(r.head_ops, r.value_unit),
            ]
        if comparison.has_base:
            if r.verdict is Verdict.NEW:
                base = units.format_rate(r.base_ops, r.value_unit)
                cells += ["new" if not math.isfinite(r.base_ops) else base, "new"]
            elif r.verdict in (Verdict.REMOVED, Verdict.FAILED, Verdict.SKIPPED):
                cells += [units.format_rate(r.base_ops, r.value_unit), r.verdict.value]
            else:
                cells += [
                    units.format_rate(r.base_ops, r.value_unit),
                    seed_change_cell(r.change_pct, comparison.threshold),
                ]
        rows.append(cells)
    return header, rows


def render_seed(sets: dict[str, Comparison], title: str, max_chars: int, template: Any) -> str:
    """The seed style's markdown for ``sets`` (display title → comparison), at most
    ``max_chars`` long: its tables lose rows from the end, with a note, until the
    text fits, and :func:`rlpace.bench.markdown_safe.cap` cuts as a last resort.
    ``template``: the jinja2 template ``seed.md.j2`` (:mod:`rlpace.bench.render` owns
    the templates).

    Example:
        >>> from rlpace.bench.render import render_report
        >>> from rlpace.bench.results import results_from_records
        >>> from rlpace.bench.compare import compare_runs
        >>> rows = [{"fullname": f"t::b{i}", "data": [1e-3] * 3} for i in range(300)]
        >>> text = render_report(compare_runs(results_from_records(rows)), style="seed",
        ...                      max_chars=3_000)
        >>> len(text) <= 3_000, "more rows not shown" in text
        (True, True)
    """
    text = _tables(template, sets, title)
    if len(text) <= max_chars:
        return text
    longest = max(len(c.rows) for c in sets.values())
    shown = largest_fitting(longest, lambda n: len(_tables(template, sets, title, n)) <= max_chars)
    return cap(_tables(template, sets, title, shown), max_chars)


def _tables(
    template: Any, sets: dict[str, Comparison], title: str, limit: int | None = None
) -> str:
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
        set_title = title if len(sets) == 1 else f"{title} ({name})".strip()
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
