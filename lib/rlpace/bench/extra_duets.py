"""The extra duets: which timed cases get more pairs than the first ones, and running them.

After the first duets, ``pr`` brings every timed case but the torchrl twins (the
negative controls) to its planned ``2 × repeats`` pairs, and a case whose A/A pair
spread (the duet calibration, :class:`rlpace.bench.calibration.DuetCalibration`) needs
more to detect a 5 % slow-down (else 10 %) to as many as it needs, up to
``max_pairs``. :func:`plan_stages` turns those needs into stages, each of the cases
still short; :func:`run_stages` runs them in order, the duets past the planned pairs
only while they fit in a time budget, and counts what the budget cut.

Example:
    >>> from pathlib import Path
    >>> def ran(stage, names, repeats, duets_before, deadline, estimate):
    ...     return SideRuns("cpu", (Path("b"),) * repeats, (Path("h"),) * repeats)
    >>> runs, cut = run_stages([(2, ("a",))], ran, first=2, planned=4, deadline=None,
    ...                        estimate=9.0)
    >>> [r.repeats for r, _ in runs], cut
    ([2], None)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from rlpace.bench.interleave import SideRuns
from rlpace.bench.pass_rows import rows_of_pass

if TYPE_CHECKING:  # pragma: no cover
    from rlpace.bench.calibration import DuetCalibration

__all__ = ["plan_stages", "run_stages"]


def plan_stages(
    duets: DuetCalibration | None,
    runs: SideRuns,
    first: int,
    pairs: int,
    *,
    max_pairs: int,
    detect_pct: Sequence[float],
    paired_threshold: float,
) -> list[tuple[int, tuple[str, ...]]]:
    """``(pairs, fullnames)`` stages of duets after the ``first`` ones, in order.

    Every case of the timed pass but the torchrl twins (the negative controls) gets
    ``pairs`` duets in all; one whose A/A pair spread in ``duets`` needs more to detect the first
    of ``detect_pct`` it can within ``max_pairs`` (judged at
    ``paired_threshold``) gets as many as it needs. A stage runs the
    cases that still need pairs, as many pairs as the least needy of them lacks.

    Example:
        >>> plan_stages(None, SideRuns("cpu", (), ()), 2, 4, max_pairs=10,
        ...             detect_pct=(5.0, 10.0), paired_threshold=2.0)
        []
    """
    from rlpace.bench.controls import CONTROL_IMPL
    from rlpace.bench.results import load_results

    if not runs.head:
        return []
    frame = rows_of_pass(load_results(runs.head[0]), "timed")
    if duets is not None:  # the detectable changes of the threshold these pairs are judged at
        duets = replace(duets, threshold=paired_threshold)
    need: dict[str, int] = {}
    for name, impl in zip(frame["fullname"], frame["impl"], strict=True):
        if impl == CONTROL_IMPL:
            continue
        more = None
        if duets is not None and max_pairs > pairs:
            for target in detect_pct:
                more = duets.pairs_to_detect(name, target, start=pairs, most=max_pairs)
                if more is not None:
                    break
        total = max(pairs, more or 0)
        if total > first:
            need[name] = total
    stages, done = [], first
    # the duets up to ``pairs`` a case are a stage of their own, so that a time budget
    # (:attr:`rlpace.bench.pipeline.PipelineConfig.time_budget`) cuts only the ones past them
    levels = set(need.values())
    if levels and first < pairs < max(levels):
        levels.add(pairs)
    for level in sorted(levels):
        stages.append((level - done, tuple(n for n, k in need.items() if k >= level)))
        done = level
    return stages


def run_stages(
    stages: Sequence[tuple[int, tuple[str, ...]]],
    run_stage: Callable[..., SideRuns],
    *,
    first: int,
    planned: int,
    deadline: float | None,
    estimate: float,
    budget_min: float | None = None,
) -> tuple[list[tuple[SideRuns, tuple[str, ...]]], dict[str, object] | None]:
    """Run the extra duets' ``stages`` (:func:`plan_stages`) in order, the
    duets past ``planned`` pairs a case only while they fit before ``deadline``.

    ``run_stage(stage=, names=, repeats=, duets_before=, deadline=, estimate=)`` runs ``repeats``
    duets of ``names`` as stage ``extend-<i>`` (``pr``'s fresh runs of just those cases),
    ``duets_before`` the pairs they had (their cores go on alternating from there); ``estimate`` is the
    seconds a duet is expected to take (the last stage's mean, which timed the same
    cases or more; before any, ``estimate`` here: a first duet's). Returns each
    stage that ran with its cases, and what the budget cut (None: nothing), as
    :attr:`rlpace.bench.comparison.Comparison.time_budget` records it: ``budget_min``
    (the budget in minutes, as given), ``planned_duets`` and ``ran_duets`` of the
    duets past ``planned`` pairs, and ``short``, the cases that got fewer pairs than
    planned.

    Example:
        >>> from pathlib import Path
        >>> def ran(stage, names, repeats, duets_before, deadline, estimate):
        ...     return SideRuns("cpu", (Path("b"),) * repeats, (Path("h"),) * repeats)
        >>> stages = [(2, ("a", "b")), (3, ("b",))]
        >>> runs, cut = run_stages(stages, ran, first=2, planned=4, deadline=None, estimate=9)
        >>> [r.repeats for r, _ in runs], cut
        ([2, 3], None)
        >>> def spent(stage, names, repeats, duets_before, deadline, estimate):  # the budget is spent
        ...     n = repeats if deadline is None else 0
        ...     return SideRuns("cpu", (Path("b"),) * n, (Path("h"),) * n)
        >>> runs, cut = run_stages(stages, spent, first=2, planned=4, deadline=0.0, estimate=9,
        ...                       budget_min=13)
        >>> [r.repeats for r, _ in runs], cut
        ([2], {'budget_min': 13, 'planned_duets': 3, 'ran_duets': 0, 'short': 1})
    """
    extension: list[tuple[SideRuns, tuple[str, ...]]] = []
    level, planned_duets, ran_duets, short, stopped = first, 0, 0, set(), False
    for i, (pairs, names) in enumerate(stages, start=1):
        level += pairs
        elastic = deadline is not None and level > planned
        if elastic:
            planned_duets += pairs
        if stopped:
            short.update(names)
            continue
        started = time.monotonic()
        stage_runs = run_stage(
            stage=f"extend-{i}",
            names=list(names),
            repeats=pairs,
            duets_before=level - pairs,
            deadline=deadline if elastic else None,
            estimate=estimate,
        )
        if stage_runs.repeats:
            estimate = (time.monotonic() - started) / stage_runs.repeats
            extension.append((stage_runs, names))
        if elastic:
            ran_duets += stage_runs.repeats
            if stage_runs.repeats < pairs:  # the budget stopped it: the later stages too
                stopped = True
                short.update(names)
    if not short:
        return extension, None
    cut = {"planned_duets": planned_duets, "ran_duets": ran_duets, "short": len(short)}
    return extension, {"budget_min": budget_min, **cut}
