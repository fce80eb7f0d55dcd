"""Running one benchmark set on both sides of a comparison: ABBA or as duets.

Each run is a fresh pytest process (:func:`rlpace.bench.runner.run`) with its side's
tree, interpreter and environment. :func:`run_interleaved` runs ``repeats`` of them a
side, either one at a time in ABBA order (base, head, head, base, ...), so that drift
of the machine hits both sides alike, or as duets: base and head at once, a core each,
meeting before each case (:mod:`rlpace.bench.duet_sync`), so that load which comes and
goes hits both alike and a pair's ratio keeps little of it. A deadline (a time budget)
lets a repeat start only while it is expected to end in time.

``pr`` (:mod:`rlpace.bench.pipeline`) and ``rlpace-bench aa`` both
run their sides through here; the ABBA order itself is
:func:`rlpace.bench.runner.abba_schedule`, written once.

Example:
    >>> runs = SideRuns("cpu", (Path("base-0.json"),), (Path("head-0.json"),))
    >>> runs.repeats, duet_order(runs)
    (1, ['base-0', 'head-0'])
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from rlpace.bench.base_revision import PipelineError
from rlpace.bench.duet_sync import DUET_SYNC_ENV, SIDES, plugin_meets, sync_value
from rlpace.bench.runner import (
    SUITE_DIR,
    RunOutcome,
    RunSettings,
    abba_schedule,
    run,
    stop_runs,
)
from rlpace.bench.work_counts.measure import counting_environ

__all__ = ["SideRuns", "duet_order", "run_interleaved", "run_order"]


@dataclass(frozen=True)
class SideRuns:
    """The result files of one set: per side, in the order they ran.

    Example:
        >>> SideRuns("cpu", (Path("b0.json"),), (Path("h0.json"),)).repeats
        1
    """

    set_name: str
    base: tuple[Path, ...]
    head: tuple[Path, ...]
    skipped: str | None = None
    """Why the set produced nothing (e.g. no CUDA), or None."""

    @property
    def repeats(self) -> int:
        """Completed runs per side."""
        return min(len(self.base), len(self.head))


def run_interleaved(
    *,
    set_name: str,
    sides: Mapping[str, tuple[Path, Path]],
    runs_dir: Path,
    repeats: int,
    settings: RunSettings,
    keyword: str | None = None,
    environ: Mapping[str, Mapping[str, str]] | None = None,
    on_run: Callable[[int, str, RunOutcome], None] | None = None,
    select: Sequence[str] = (),
    duet: bool = False,
    count_work: bool = True,
    count_controls: bool = False,
    duet_sync: bool = True,
    deadline: float | None = None,
    estimate: float = 0.0,
    duets_before: int = 0,
) -> SideRuns:
    """Run ``set_name`` ``repeats`` times per side, ABBA, each in a fresh process.

    As a ``duet``, the base and head runs of each repeat run at the same time instead,
    each pinned to a core of its own (Bulej et al., ICPE 2020): load that comes and
    goes then hits both alike, so the pair's ratio keeps little of it, though each
    run's own time moves with it (judge such runs paired, repeat by repeat).

    Args:
        set_name: ``cpu`` or ``gpu``.
        sides: ``{"base": (tree, python), "head": (tree, python)}``.
        runs_dir: where ``<side>-<k>.json`` files go (emptied first).
        repeats: runs per side.
        settings: timing settings of every run.
        keyword: pytest ``-k`` expression.
        environ: per side, extra environment variables for its runs.
        on_run: called after each run with ``(k, side, outcome)`` (progress).
        select: pytest node ids to run instead of the whole set (a confirmation).
        duet: run each repeat's base and head at the same time, one per core.
        count_work: the first run of each side counts each case's work
            (:mod:`rlpace.bench.work_counts`). False: no run counts (the judge reads
            the counts of the first runs only, so later stages need none).
        count_controls: count the torchrl twins' work too. Leave it False when both
            sides run the same packages: a PR cannot change the twins' work then.
        duet_sync: in a duet, both runs start timing each case together
            (:mod:`rlpace.bench.duet_sync`) when both trees' suite plugins take part
            (a base from before it does not); False lets them drift apart (a
            measurement of what the rendezvous buys).
        deadline: a :func:`time.monotonic` time no repeat may be expected to run past
            (a time budget): a repeat starts only while ``now`` plus the mean time of
            this call's repeats so far (``estimate`` before the first) is before it;
            the first one that would not fit ends the runs, so fewer than ``repeats``
            may come back. None: every repeat runs.
        estimate: seconds a repeat is expected to take before one has run here (a
            duet of the same cases or more, timed earlier).
        duets_before: duets these cases ran before this call (a later stage of
            them): which side gets which core goes on alternating from there, so
            that over all their duets a faster core favours neither side.

    Returns:
        The result files per side, fewer than ``repeats`` (none, even) when
        ``deadline`` stopped them. When the first base/head pair timed nothing
        (every case skipped, e.g. no CUDA), stops there with ``skipped`` set.

    Raises:
        ~rlpace.bench.base_revision.PipelineError: a run failed before writing any
            result.

    Example:
        >>> run_interleaved(set_name="cpu", sides={"base": (Path("wt"), Path("py")),
        ...     "head": (Path("."), Path("py"))}, runs_dir=Path("r"), repeats=3,
        ...     settings=RunSettings())  # doctest: +SKIP
        SideRuns(set_name='cpu', base=(...), head=(...), skipped=None)
    """
    shutil.rmtree(runs_dir, ignore_errors=True)
    runs_dir.mkdir(parents=True)
    files: dict[str, list[Path]] = {"base": [], "head": []}
    counts: dict[str, list[int]] = {"base": [], "head": []}

    def one(k: int, side: str, cpu: int | None = None, sync: str | None = None) -> RunOutcome:
        tree, python = sides[side]
        return run(
            set_name=set_name,
            output=runs_dir / f"{side}-{k}.json",
            keyword=keyword,
            settings=settings,
            root=tree,
            python=str(python),
            quiet=True,
            select=select,
            environ={
                **(environ or {}).get(side, {}),
                **_counting_env(count_work and k == 0, count_controls),
                **({DUET_SYNC_ENV: sync} if sync is not None else {}),
            },
            cpu=cpu,
        )

    # both plugins must take part: one from before the rendezvous would be waited for
    meet = duet_sync and all(
        plugin_meets(Path(tree) / SUITE_DIR / "conftest.py") for tree, _ in sides.values()
    )
    outcomes = _outcomes(
        one,
        repeats,
        duet,
        runs_dir if meet else None,
        deadline=deadline,
        estimate=estimate,
        duets_before=duets_before,
    )
    for k, side, outcome in outcomes:
        tree, python = sides[side]
        output = runs_dir / f"{side}-{k}.json"
        if not output.is_file():
            raise PipelineError(
                f"{side} run {k + 1} of set {set_name!r} in {tree} failed (pytest exit "
                f"{outcome.returncode}) before timing anything. Fix: reproduce with "
                f"`{python} -m rlpace.bench run --set {set_name} --root {tree}`"
                + (f"\npytest said:\n{outcome.log[-2000:]}" if outcome.log else "")
            )
        files[side].append(output)
        counts[side].append(outcome.benchmarks)
        if on_run is not None:
            on_run(k, side, outcome)
        first_pair_done = k == 0 and len(counts["base"]) == len(counts["head"]) == 1
        if first_pair_done and counts["base"][0] == counts["head"][0] == 0:
            why = (
                "no CUDA device on this machine"
                if set_name == "gpu"
                else "every case skipped or none was selected"
            )
            return SideRuns(set_name, tuple(files["base"]), tuple(files["head"]), why)
    return SideRuns(set_name, tuple(files["base"]), tuple(files["head"]))


def _outcomes(
    one: Callable[..., RunOutcome],
    repeats: int,
    duet: bool,
    meet_in: Path | None = None,
    *,
    deadline: float | None = None,
    estimate: float = 0.0,
    duets_before: int = 0,
) -> Iterator[tuple[int, str, RunOutcome]]:
    """``(k, side, outcome)`` of each run, in schedule order: ABBA one at a time, or as a
    duet both sides of a repeat at once, each on a CPU of its own (when there are two),
    meeting before each case in a directory of their own under ``meet_in``
    (None: they do not meet); repeat ``k`` of a duet gives the base the first core when
    ``k + duets_before`` is even. A repeat starts only while it is expected to end before
    ``deadline`` (:func:`run_interleaved`)."""
    clock = _RepeatClock(deadline, estimate)
    if not duet:
        schedule = abba_schedule(repeats)
        for i, (k, side) in enumerate(schedule):
            if i == 0 or schedule[i - 1][0] != k:  # a repeat's two runs go together
                if not clock.fits():
                    return
                clock.start()
            outcome = one(k, side)
            if i + 1 == len(schedule) or schedule[i + 1][0] != k:
                clock.stop()
            yield k, side, outcome
        return
    from concurrent.futures import ThreadPoolExecutor

    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    slots: list[int | None] = list(cpus[:2]) if len(cpus) >= 2 else [None, None]
    with ThreadPoolExecutor(max_workers=2) as pool:
        try:
            for k in range(repeats):
                if not clock.fits():
                    return
                clock.start()
                # which side each core gets alternates too, so a faster core favours neither
                order = ("base", "head") if (k + duets_before) % 2 == 0 else ("head", "base")
                with contextlib.ExitStack() as stack:
                    meet = (
                        stack.enter_context(tempfile.TemporaryDirectory(".meet", dir=meet_in))
                        if meet_in is not None
                        else None
                    )
                    futures = {
                        side: pool.submit(
                            one, k, side, slots[i], meet and sync_value(SIDES[i], meet)
                        )
                        for i, side in enumerate(order)
                    }
                    done = {side: futures[side].result() for side in order}
                clock.stop()
                for side in order:
                    yield k, side, done[side]
        except BaseException:
            # Ctrl-C, a failed run or a caller that stopped early: the runs still going
            # in the pool's threads stop now, instead of the pool waiting for them
            stop_runs()
            raise


class _RepeatClock:
    """Whether another repeat fits before a deadline, from the repeats timed so far.

    Example:
        >>> clock = _RepeatClock(time.monotonic() + 60, estimate=30)
        >>> clock.fits()
        True
        >>> _RepeatClock(time.monotonic() + 60, estimate=90).fits()
        False
    """

    def __init__(self, deadline: float | None, estimate: float = 0.0) -> None:
        self.deadline, self.estimate = deadline, estimate
        self.took: list[float] = []
        self._since: float | None = None

    def fits(self) -> bool:
        """No deadline, or now plus a repeat's expected time is before it."""
        if self.deadline is None:
            return True
        expected = sum(self.took) / len(self.took) if self.took else self.estimate
        return time.monotonic() + expected <= self.deadline

    def start(self) -> None:
        """A repeat starts."""
        self._since = time.monotonic()

    def stop(self) -> None:
        """The repeat started last ended."""
        if self._since is not None:
            self.took.append(time.monotonic() - self._since)
            self._since = None


def _counting_env(count: bool, controls: bool) -> dict[str, str]:
    """The suite's work-count switches for one run (``count``: this run counts, which
    only the first run of a side does, since the counts repeat; ``controls``: the
    twins too, which only a base with its own packages needs).

    Example:
        >>> _counting_env(True, False), _counting_env(True, True), _counting_env(False, True)
        ({'RLPACE_BENCH_WORK_COUNTS_SKIP': 'torchrl'}, {}, {'RLPACE_BENCH_WORK_COUNTS': '0'})
    """
    from rlpace.bench.controls import CONTROL_IMPL

    return counting_environ(count, () if controls else (CONTROL_IMPL,))


def duet_order(runs: SideRuns) -> list[str]:
    """The runs' file stems by duet: ``base-k`` and ``head-k`` ran at the same time.

    Example:
        >>> duet_order(SideRuns("cpu", (Path("b0"), Path("b1")), (Path("h0"), Path("h1"))))
        ['base-0', 'head-0', 'base-1', 'head-1']
    """
    return [f"{side}-{k}" for k in range(runs.repeats) for side in ("base", "head")]


def run_order(runs: SideRuns) -> list[str]:
    """The runs' file stems in the order they ran (the ABBA schedule).

    Example:
        >>> run_order(SideRuns("cpu", (Path("b0"), Path("b1")), (Path("h0"), Path("h1"))))
        ['base-0', 'head-0', 'head-1', 'base-1']
    """
    counts = {"base": len(runs.base), "head": len(runs.head)}
    return [f"{side}-{k}" for k, side in abba_schedule(counts)]
