"""Progress bar and printed summary of the ``pr`` pipeline (rich; presentation only).

Example:
    >>> from rich.console import Console
    >>> print_summary([], Console(width=80))
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rlpace.bench.base_revision import BaseCheckout
from rlpace.bench.pipeline import PipelineConfig, ProgressSink
from rlpace.bench.pr_reports import SetOutcome
from rlpace.bench.render_notes import calibration_text, calibration_warning, sensitivity_text
from rlpace.bench.work_counts.verdict import DECIDING

if TYPE_CHECKING:  # pragma: no cover
    from rich.console import Console

    from rlpace.bench.runner import RunOutcome

__all__ = ["RichProgress", "print_summary"]


class RichProgress(ProgressSink):
    """A rich progress bar: one task per set, advanced by each finished run.

    Example:
        >>> from rich.console import Console
        >>> import io
        >>> with RichProgress(Console(file=io.StringIO())) as p:
        ...     p.set_started("cpu", 2)
    """

    def __init__(self, console: Console) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

        self.console = console
        self.progress = Progress(
            "[bold]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=False,
        )
        self.task: Any = None

    def __enter__(self) -> RichProgress:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def started(self, base: BaseCheckout, config: PipelineConfig) -> None:
        self.console.print(
            f"base {base.ref} = {base.short} in {base.tree} ({base.env_mode} environment); "
            f"{config.effective_repeats} runs per side, ABBA (with the count tier on, the "
            f"timed cases run {2 * config.effective_repeats} duets instead, the torchrl "
            f"twins {config.control_duets})"
        )

    def set_started(self, set_name: str, runs: int) -> None:
        self.task = self.progress.add_task(f"{set_name} set", total=runs)

    def counts_started(self, set_name: str) -> None:
        self.console.print(
            f"{set_name} set: counting base and head under Callgrind, side by side "
            "(a few minutes; counts do not depend on load)"
        )
        self.task = self.progress.add_task(f"{set_name} set, counting", total=None)

    def case_counted(self, side: str, test_id: str, status: str) -> None:
        if self.task is not None:
            self.progress.advance(self.task)
        if not self.console.is_terminal and status not in ("counted", "not-counted"):
            self.console.print(f"  {side} {test_id}: {status}", markup=False)

    def counts_finished(self, set_name: str, tier: Any) -> None:
        if self.task is not None:
            self.progress.update(self.task, total=self.progress.tasks[-1].completed)
        if tier.unavailable:
            self.console.print(
                f"  count tier unavailable ({tier.unavailable}); timing alone judges",
                markup=False,
                style="yellow",
            )
            return
        summary = tier.summary()
        flagged = summary["verdicts"].get("regression", 0) + summary["verdicts"].get(
            "improvement", 0
        )
        self.console.print(
            f"  {summary['counted']} cases counted on both sides, {flagged} moved past "
            f"their gate, in {summary['wall_s']:.0f} s; those are timed once a side, "
            "pooled over two duets",
            markup=False,
        )

    def confirm_started(self, set_name: str, benchmarks: int, runs: int) -> None:
        flagged = f"{benchmarks} flagged benchmark{'s' if benchmarks != 1 else ''}"
        self.task = self.progress.add_task(f"{set_name} set, confirming {flagged}", total=runs)

    def extend_started(self, set_name: str, benchmarks: int, runs: int) -> None:
        cases = f"{benchmarks} timed case{'s' if benchmarks != 1 else ''}"
        self.task = self.progress.add_task(f"{set_name} set, more duets of {cases}", total=runs)

    def extend_cut(self, set_name: str, cut: Mapping[str, Any]) -> None:
        if self.task is not None:  # the bar ends where the budget stopped it
            self.progress.update(self.task, total=self.progress.tasks[-1].completed)
        self.console.print(
            f"  the time budget ({cut['budget_min']:g} min) stopped the extra duets after "
            f"{cut['ran_duets']} of {cut['planned_duets']}; {cut['short']} timed "
            f"case{'s' if cut['short'] != 1 else ''} got fewer pairs than planned",
            markup=False,
            style="yellow",
        )

    def run_finished(self, repeat: int, side: str, outcome: RunOutcome) -> None:
        if self.task is not None:
            self.progress.advance(self.task)
        if not self.console.is_terminal:
            self.console.print(
                f"  run {repeat + 1} {side}: {outcome.benchmarks} results, exit {outcome.returncode}"
            )


def _fmt(x: float) -> str:
    return "n/a" if not math.isfinite(x) else f"{x:+.1f}%"


def print_summary(outcomes: Sequence[SetOutcome], console: Console) -> None:
    """Print, per set, the verdict counts, each flagged benchmark and where reports went.

    Example:
        >>> from rich.console import Console
        >>> from rlpace.bench.pr_reports import SetOutcome
        >>> skipped = SetOutcome("gpu", None, skipped="no CUDA device on this machine")
        >>> print_summary([skipped], Console(width=80, no_color=True, highlight=False))
        gpu: skipped (no CUDA device on this machine)
    """
    for outcome in outcomes:
        if outcome.comparison is None:
            console.print(f"[bold]{outcome.set_name}[/bold]: skipped ({outcome.skipped})")
            continue
        counts = outcome.comparison.counts()
        shown = ", ".join(f"{counts[k]} {k}" for k in counts if k != "total" and counts[k])
        console.print(f"[bold]{outcome.set_name}[/bold]: {counts['total']} benchmarks: {shown}")
        for row in outcome.comparison.rows:
            if row.verdict.value not in ("worsened", "improved"):
                continue
            if getattr(row, "count_verdict", None) in ("regression", "improvement"):
                # judged on its counts: instructions first, the time beside them
                console.print(
                    f"  {row.verdict.value}: {row.name} instructions "
                    f"{_fmt(row.count_change_pct)} (gate ±{row.count_gate_pct:.2f}%), "
                    f"time {_fmt(-row.median_change_pct)}",
                    markup=False,
                )
                continue
            if row.work_verdict in DECIDING:
                # judged on its work counts: what moved first, the time beside it
                console.print(
                    f"  {row.verdict.value}: {row.name} {row.work_note}",
                    markup=False,
                )
                continue
            console.print(
                f"  {row.verdict.value}: {row.name} {_fmt(row.median_change_pct)} "
                f"(noise {_fmt(row.noise_pct)}, detectable {_fmt(row.mdc_pct)})",
                markup=False,
            )
        seen = sensitivity_text(outcome.comparison, markdown=False)
        if seen:
            console.print(f"  {seen}", markup=False)
        note = outcome.comparison.calibration
        if note:
            console.print(f"  {calibration_text(note)}", markup=False)
            warning = calibration_warning(note)
            if warning:
                console.print(f"  {warning}", markup=False, style="yellow")
        took = _took_text(outcome.stage_seconds)
        if took:
            console.print(f"  {took}", markup=False)
        for path in outcome.reports:
            console.print(f"  wrote {path}")


def _took_text(seconds: Mapping[str, float]) -> str:
    """Where a set's time went, stage by stage (``""`` when none was recorded).

    Example:
        >>> _took_text({"counting": 302.4, "first_runs": 474.0, "confirmation": 51.2})
        'measuring took 13 min 48 s: counting 5 min 2 s, first runs 7 min 54 s, confirmation 51 s'
    """
    if not seconds:
        return ""
    parts = ", ".join(f"{stage.replace('_', ' ')} {_duration(s)}" for stage, s in seconds.items())
    return f"measuring took {_duration(sum(seconds.values()))}: {parts}"


def _duration(seconds: float) -> str:
    """``42 s`` or ``7 min 54 s``."""
    whole = round(seconds)
    return f"{whole} s" if whole < 60 else f"{whole // 60} min {whole % 60} s"
