"""The ``pr`` pipeline: the working tree (head) against a base revision, told truthfully.

Steps, for each benchmark set:

1. check the base revision out in its own ``git worktree`` (cached per commit) and
   give it a Python environment (cached by a hash of its pinned requirements, see
   :func:`prepare_base_python`);
2. for the CPU set, count the single-process cases of both sides under Callgrind,
   side by side (:func:`rlpace.bench.counts.tier.run_count_tier`; ``counts``), then
   time the counted cases on the CPU clock once a side, base and head at once on a
   core each (a duet, for display: their counts judge them; the suite's ``counted``
   pass, :data:`rlpace.bench.suite.PASSES`);
3. run the set ``repeats`` times per side, interleaved base/head then head/base
   (:func:`rlpace.bench.runner.abba_schedule`), each run a fresh pytest process
   through :func:`rlpace.bench.runner.run` with its side's environment, so drift of
   the machine hits both sides alike; with counts, the cases judged on their time
   (the suite's ``timed`` pass: the wall-clock cases and the CPU-clock ones declared
   out of the count tier, each on its own clock) instead run ``2 × repeats`` duets
   (base and head at once, a core each, judged pair by pair: a pair costs one run's
   time and cancels the load both met), and a case whose A/A
   pair spread (the duet calibration) needs more pairs to detect a 5 % slow-down
   (``detect_pct``; else 10 %) gets extra duets of its own, up to ``max_pairs`` in all;
4. merge the samples per side and hand them to the set's
   :class:`~rlpace.bench.judge.Judge` (:func:`pr_judge`: the same judge
   ``rlpace-bench compare`` builds from the same settings);
5. when that flags anything, run just the flagged benchmarks again, ``confirm`` runs
   per side (``2 × confirm`` duets when step 3 ran duets), in fresh processes, and keep a flag only where they flag it too
   (:meth:`rlpace.bench.judge.Judge.confirm`): a whole process that ran slow does not
   repeat;
6. join the count verdicts to the rows (:func:`rlpace.bench.counts.tier.apply_count_tier`)
   and write ``<out_dir>/<set>.md`` (rlpace style), ``<set>.seed.md`` (seed style) and
   ``<set>.json`` (the comparison as data).

A set that cannot run here (the GPU set without CUDA) is skipped with a note and
does not fail the pipeline.

This module only orchestrates: it runs, merges and writes; the verdicts are the
judge's, the statistics :mod:`rlpace.bench.stats`' and :mod:`rlpace.bench.gates`'.

Example:
    >>> pr_judge(PipelineConfig(confirm=0), None).confirm_runs
    0
    >>> run_pr(PipelineConfig(base="HEAD", sets=("cpu",)))  # doctest: +SKIP
    [SetOutcome(set_name='cpu', ...)]
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from rlpace.bench._atomic import write_whole
from rlpace.bench.base_revision import (
    BASE_ENV_MODES,
    BaseCheckout,
    PipelineError,
    checkout_base,
    prepare_base_python,
    repository_root,
    requirements_hash,
)
from rlpace.bench.duet_sync import DUET_SYNC_ENV, SIDES, plugin_meets, sync_value
from rlpace.bench.errors import BenchInputError
from rlpace.bench.runner import (
    SUITE_DIR,
    TIMER_VARIABLE,
    RunOutcome,
    RunSettings,
    abba_schedule,
    run,
    stop_runs,
    suite_present,
)
from rlpace.bench.suite import PASS_ENV
from rlpace.bench.thresholds import PAIRED_THRESHOLD
from rlpace.bench.work_counts.measure import counting_environ

if TYPE_CHECKING:  # pragma: no cover
    from rlpace.bench.calibration import DuetCalibration
    from rlpace.bench.compare import BenchmarkChange, Comparison
    from rlpace.bench.judge import Judge

__all__ = [
    "BASE_ENV_MODES",
    "BaseCheckout",
    "PipelineConfig",
    "PipelineError",
    "ProgressSink",
    "SetOutcome",
    "SideRuns",
    "checkout_base",
    "pr_judge",
    "prepare_base_python",
    "repository_root",
    "requirements_hash",
    "run_interleaved",
    "run_pr",
]

CALIBRATION_DIR = Path("reports") / "calibration"
"""Checked-in A/A calibrations, ``<set>.json``, used when ``--noise`` is not given."""
QUICK_KEYWORD = "not torchrl"
"""``--quick`` drops the torchrl twins: a change to rlpace cannot move them."""


@dataclass(frozen=True)
class PipelineConfig:
    """What ``rlpace-bench pr`` compares and how.

    Example:
        >>> cfg = PipelineConfig(base="main", quick=True)
        >>> cfg.effective_repeats, cfg.effective_keyword
        (2, 'not torchrl')
    """

    base: str = "HEAD"
    """The base revision (any git revision); the head is the working tree of ``repo``."""
    sets: tuple[str, ...] = ("cpu",)
    """Benchmark sets to run, each compared and reported on its own."""
    repeats: int = 2
    """Runs per side (K); base and head alternate ABBA across them. Even K balances the
    order (each side has the same mean position), so linear drift cancels."""
    out_dir: Path = Path("reports/pr")
    """Where ``<set>.md``, ``<set>.seed.md`` and ``<set>.json`` go."""
    quick: bool = False
    """A smaller, faster run: 2 repeats, shorter timing, no torchrl twins."""
    keyword: str | None = None
    """A pytest ``-k`` expression choosing cases (combined with ``--quick``'s)."""
    threshold: float = 5.0
    """Percent change below which a significant difference is still called noise."""
    paired_threshold: float = PAIRED_THRESHOLD
    """The same for a timed case judged pair by pair (its duets), whose pairs
    cancel the load both sides met (:attr:`rlpace.bench.judge.Judge.paired_threshold`)."""
    alpha: float = 0.05
    """False-discovery rate of the comparator's tests."""
    noise_file: Path | None = None
    """A calibration file from ``rlpace-bench aa`` with per-benchmark noise."""
    duets_file: Path | None = None
    """A duet calibration from ``rlpace-bench aa --duets`` (default: the checked-in
    ``<set>-duets.json`` beside the calibrations, when it exists): the pair spreads the
    timed cases' paired tests borrow."""
    base_env: str = "auto"
    """How the base gets its Python: ``auto`` (``overlay`` when its pinned
    requirements equal the head's, else ``full``), ``overlay``, ``full`` or
    ``current`` (this interpreter, the base's ``lib`` first on the path)."""
    repo: Path = Path(".")
    """The head repository (its working tree is the head)."""
    cache_dir: Path | None = None
    """Base worktrees, environments and raw runs; default ``<repo>/build/rlpace-bench``."""
    settings: RunSettings | None = None
    """Timing settings; default :class:`~rlpace.bench.runner.RunSettings`, shorter with ``quick``."""
    head_environ: Mapping[str, str] = field(default_factory=dict)
    """Extra environment variables for head runs only (e.g. an injected slowdown)."""
    confirm: int = 2
    """Runs per side, ABBA in fresh processes, of the confirmation stage: when the first
    comparison flags anything, just those benchmarks run again and a flag stands only
    if these runs flag it too, the same way (0: no confirmation). A whole process that
    ran slow (a burst of load, the rare slow start of a multi-process case) flags
    benchmarks in a two-run comparison; it does not repeat in fresh processes."""
    max_pairs: int = 10
    """Most duets a timed case gets in all. With the count tier on, every case of the
    timed pass (the wall-clock cases and the CPU-clock ones declared out of the count
    tier) gets ``2 × repeats`` duets, the torchrl twins (negative controls)
    only the first ``repeats`` of them; with a duet calibration at hand, a case (not a
    twin) whose A/A pair spread needs more pairs than that to detect the first
    :attr:`detect_pct` slow-down it can within ``max_pairs`` gets as many as it needs;
    a case that cannot detect any of them within ``max_pairs`` gets none beyond
    ``2 × repeats`` (0, or ``2 × repeats`` or fewer: no extra duets)."""
    detect_pct: tuple[float, ...] = (5.0, 10.0)
    """The slow-downs (%), in order of preference, the extra duets of :attr:`max_pairs`
    are planned to detect at 90 % power (judged at :attr:`paired_threshold`)."""
    time_budget: float | None = None
    """Minutes the whole ``pr`` call may take (its base checkout and environment
    included) before the extra duets stop: the duets a timed case gets past ``2 ×
    repeats`` (:attr:`max_pairs`) start only while the next one is expected to end
    within the budget, judged by the duets timed so far. The counting, the first
    duets and the confirmation always run, so a slow machine can still overrun it;
    the comment says how many extra duets the budget cut and for how many cases.
    None: no budget."""
    counts: bool = True
    """Count the CPU set's single-process cases under Callgrind first, base and head
    side by side (:mod:`rlpace.bench.counts`): a count regression is flagged whatever
    the clock says, and every counted case on the CPU clock is then timed once a side,
    base and head at once (for display), which pays for the counting; the cases judged
    on their time keep every repeat, as duets. Without Valgrind the comment says so and
    timing alone judges, every case every repeat."""

    def __post_init__(self) -> None:
        if self.repeats < 1:
            raise BenchInputError(f"--repeats: expected an integer >= 1, got {self.repeats}")
        if self.confirm < 0:
            raise BenchInputError(
                f"--confirm: expected runs per side >= 0 (0: no confirmation), got {self.confirm}"
            )
        if self.time_budget is not None and not 0 < self.time_budget < math.inf:
            raise BenchInputError(
                f"--time-budget: expected minutes > 0, got {self.time_budget}; fix: e.g. "
                "--time-budget 13, or leave it out for no budget"
            )
        if self.max_pairs < 0:
            raise BenchInputError(
                f"--max-pairs: expected duets per case >= 0 (0: no extra duets), got "
                f"{self.max_pairs}"
            )
        targets = (
            (self.detect_pct,) if isinstance(self.detect_pct, int | float) else self.detect_pct
        )
        if not (
            isinstance(targets, tuple | list)
            and targets
            and all(isinstance(pct, int | float) and 0 < pct < 100 for pct in targets)
        ):
            raise BenchInputError(
                "detect_pct: expected slow-downs in % between 0 and 100, in order of "
                f"preference (e.g. (5.0, 10.0)), got {self.detect_pct!r}"
            )
        object.__setattr__(self, "detect_pct", tuple(float(pct) for pct in targets))
        for flag, value, example in (
            ("--threshold", self.threshold, 5),
            ("--paired-threshold", self.paired_threshold, 2),
        ):
            if not 0 <= value < math.inf:  # the judge's rule, checked before any checkout
                raise BenchInputError(
                    f"{flag}: expected a percentage >= 0, got {value}; fix: e.g. {flag} {example}"
                )
        if self.base_env not in BASE_ENV_MODES:
            raise BenchInputError(
                f"--base-env: expected one of {', '.join(BASE_ENV_MODES)}, got {self.base_env!r}"
            )
        for name in self.sets:
            if name not in ("cpu", "gpu"):
                raise BenchInputError(
                    f"--sets: expected a comma-separated list of cpu and gpu, got {name!r} "
                    "among them; fix: e.g. --sets cpu,gpu"
                )
        if not self.sets:
            raise BenchInputError("--sets: expected at least one of cpu, gpu; got none")

    @property
    def effective_repeats(self) -> int:
        """Runs per side after ``quick`` (at most 2 when quick)."""
        return min(self.repeats, 2) if self.quick else self.repeats

    @property
    def effective_keyword(self) -> str | None:
        """The ``-k`` expression after ``quick``."""
        if not self.quick:
            return self.keyword
        return f"({self.keyword}) and {QUICK_KEYWORD}" if self.keyword else QUICK_KEYWORD

    @property
    def effective_settings(self) -> RunSettings:
        """Timing settings after ``quick`` (a third of the timing per case)."""
        settings = self.settings or RunSettings()
        if self.quick and self.settings is None:
            settings = replace(settings, max_time=settings.max_time / 3)
        return settings


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

    Returns:
        The result files per side, fewer than ``repeats`` (none, even) when
        ``deadline`` stopped them. When the first base/head pair timed nothing
        (every case skipped, e.g. no CUDA), stops there with ``skipped`` set.

    Raises:
        PipelineError: a run failed before writing any result.

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
        one, repeats, duet, runs_dir if meet else None, deadline=deadline, estimate=estimate
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
) -> Iterator[tuple[int, str, RunOutcome]]:
    """``(k, side, outcome)`` of each run, in schedule order: ABBA one at a time, or as a
    duet both sides of a repeat at once, each on a CPU of its own (when there are two),
    meeting before each case in a directory of their own under ``meet_in``
    (None: they do not meet). A repeat starts only while it is expected to end before
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
                order = ("base", "head") if k % 2 == 0 else ("head", "base")
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


@dataclass(frozen=True)
class SetOutcome:
    """What the pipeline produced for one set.

    Example:
        >>> SetOutcome("gpu", None, skipped="no CUDA device on this machine").flagged
        ()
    """

    set_name: str
    comparison: Comparison | None
    """The comparison, or None when the set was skipped."""
    skipped: str | None = None
    """Why the set was skipped, or None."""
    reports: tuple[Path, ...] = ()
    """The files written: ``<set>.md``, ``<set>.seed.md``, ``<set>.json``."""
    runs: SideRuns | None = None
    confirm_runs: SideRuns | None = None
    """The confirmation's runs (None when nothing was flagged or ``confirm`` is 0)."""

    @property
    def flagged(self) -> tuple[BenchmarkChange, ...]:
        """Benchmarks whose verdict is a regression."""
        if self.comparison is None:
            return ()
        from rlpace.bench.compare import Verdict

        return self.comparison.by_verdict(Verdict.WORSENED)


REPORT_STYLES = {"rlpace": "{set}.md", "seed": "{set}.seed.md"}
"""Rendered report styles and their file names under ``out_dir``."""


def _report_paths(out_dir: Path, set_name: str) -> list[Path]:
    """What ``pr`` writes for one set: its rendered reports and its ``<set>.json``."""
    names = [pattern.format(set=set_name) for pattern in REPORT_STYLES.values()]
    return [out_dir / name for name in (*names, f"{set_name}.json")]


def _clear_reports(out_dir: Path, set_name: str) -> None:
    """Remove a set's reports from an earlier run before this run's set starts."""
    for path in _report_paths(out_dir, set_name):
        path.unlink(missing_ok=True)


def _clear_stages(runs_root: Path, set_name: str) -> None:
    """Remove the stage directories an earlier ``pr`` run left for ``set_name``
    (``<set>-extend-<k>``, ``<set>-confirm``); the other stages are rewritten each run."""
    for stage in (*runs_root.glob(f"{set_name}-extend-*"), runs_root / f"{set_name}-confirm"):
        shutil.rmtree(stage, ignore_errors=True)


def run_pr(config: PipelineConfig, *, progress: ProgressSink | None = None) -> list[SetOutcome]:
    """Benchmark the working tree against ``config.base`` and write the reports.

    Args:
        config: what to compare and how.
        progress: receives one call per finished run (the CLI shows a progress bar).

    Returns:
        One outcome per set, in ``config.sets`` order.

    Raises:
        BenchInputError: no git repository, no benchmark suite, an unknown base.
        PipelineError: git, the base environment or a benchmark run failed.

    Example:
        >>> outcomes = run_pr(PipelineConfig(base="HEAD", quick=True))  # doctest: +SKIP
        >>> [o.set_name for o in outcomes]  # doctest: +SKIP
        ['cpu']
    """
    from rlpace.bench.environment import require_compatible_runs
    from rlpace.bench.results import load_results, merge_runs

    deadline = None if config.time_budget is None else time.monotonic() + 60 * config.time_budget
    repo = repository_root(config.repo)
    if not suite_present(repo):
        raise BenchInputError(
            f"expected a benchmark suite at {repo / SUITE_DIR}, found none. "
            "Fix: run `rlpace-bench pr` from the repository root"
        )
    cache = (config.cache_dir or repo / "build" / "rlpace-bench").resolve()
    out_dir = config.out_dir if config.out_dir.is_absolute() else repo / config.out_dir
    sha, base_tree = checkout_base(repo, config.base, cache)
    if not suite_present(base_tree):
        raise BenchInputError(
            f"--base {config.base} ({sha[:12]}) has no benchmark suite at {SUITE_DIR}; "
            "expected one to compare against. Fix: choose a base that has the suite"
        )
    base_python, mode = prepare_base_python(base_tree, repo, cache, config.base_env)
    base = BaseCheckout(config.base, sha, base_tree, base_python, mode)
    if progress is not None:
        progress.started(base, config)
    outcomes = []
    for set_name in config.sets:
        out_dir.mkdir(parents=True, exist_ok=True)
        # a run that fails or is interrupted must not leave the last run's verdict to be
        # read as this one's
        _clear_reports(out_dir, set_name)
        # and the runs directory holds this run's duets only: an earlier run's extra or
        # confirmation duets would be read as this one's (`aa --pr-runs`)
        _clear_stages(cache / "runs", set_name)
        if set_name == "gpu" and not cuda_available(Path(sys.executable)):
            skipped = SideRuns(set_name, (), (), "no CUDA device on this machine")
            outcomes.append(_write_skipped(out_dir, set_name, skipped, base))
            continue
        from rlpace.bench.calibration import duet_calibration_path
        from rlpace.bench.counts.tier import GATES_FILE

        # the checked-in calibrations as the base has them: a PR cannot set its own gates
        changed: list[str] = []
        noise_file, noise_shown = _checked_in(
            config.noise_file, CALIBRATION_DIR / f"{set_name}.json", repo, base.tree, changed
        )
        duets_file, duets_shown = _checked_in(
            config.duets_file,
            duet_calibration_path(CALIBRATION_DIR, set_name),
            repo,
            base.tree,
            changed,
        )
        gates_file = (
            _checked_in(None, GATES_FILE, repo, base.tree, changed)[0]
            if set_name == "cpu"
            else None
        )
        # one judge for the set: the same one `rlpace-bench compare` builds
        judge = pr_judge(
            config,
            noise_file,
            shown=noise_shown,
            same_packages=base.env_mode != "full",
            duets_file=duets_file,
            duets_shown=duets_shown,
        )
        sides = {"base": (base.tree, base.python), "head": (repo, Path(sys.executable))}
        environ = {
            "base": _pythonpath_first(base.tree / "lib"),
            "head": {**_pythonpath_first(repo / "lib"), **config.head_environ},
        }
        # counts first: they take both cores, and the cases on the CPU clock they judge
        # then need one timing a side instead of every repeat
        count_tier = (
            _count_tier(config, repo, base, cache, environ, progress, gates_file)
            if set_name == "cpu"
            else None
        )
        if progress is not None and count_tier is not None:
            progress.counts_finished(set_name, count_tier)
        split = count_tier is not None and count_tier.unavailable is None
        # with the count tier on, the timed cases run as duets and are judged pair
        # by pair; a pair costs one run's time, so they get twice the runs a side
        wall_repeats = 2 * config.effective_repeats if split else config.effective_repeats
        # the negative controls (torchrl twins) run in the first half of the duets only:
        # nothing a PR changes moves them, they cost 70 % of a pair, and their spread
        # over these pairs is all the control floor needs; the rest get the time
        first_pairs = config.effective_repeats if split else wall_repeats
        judge = replace(judge, paired=split)
        if progress is not None:
            progress.set_started(set_name, 2 * first_pairs + (2 if split else 0))
        clock_runs = None
        if split:
            clock_runs = run_interleaved(
                set_name=set_name,
                sides=sides,
                runs_dir=cache / "runs" / f"{set_name}-cpu-clock",
                repeats=1,
                settings=config.effective_settings,
                keyword=config.effective_keyword,
                environ=_pass_env(environ, "counted"),
                on_run=None if progress is None else progress.run_finished,
                duet=True,
                count_controls=not judge.same_packages,
            )
        first_started = time.monotonic()
        runs = run_interleaved(
            set_name=set_name,
            sides=sides,
            runs_dir=cache / "runs" / set_name,
            repeats=first_pairs,
            settings=config.effective_settings,
            keyword=config.effective_keyword,
            environ=_pass_env(environ, "timed") if split else environ,
            on_run=None if progress is None else progress.run_finished,
            duet=split,
            # a base with packages of its own may run another torchrl: count the twins
            count_controls=not judge.same_packages,
        )
        stages = (
            _extension_stages(judge.duets, runs, first_pairs, wall_repeats, config) if split else []
        )
        extension: list[tuple[SideRuns, tuple[str, ...]]] = []
        budget_cut = None
        if stages:
            # duets of just the cases that need more pairs, appended pair by pair to
            # the first ones; each stage drops the cases that have enough
            if progress is not None:
                progress.extend_started(
                    set_name, len(stages[0][1]), 2 * sum(pairs for pairs, _ in stages)
                )
            extension, budget_cut = _extend(
                stages,
                functools.partial(
                    _again,
                    set_name,
                    sides,
                    cache,
                    config,
                    progress,
                    environ=_pass_env(environ, "timed"),
                    duet=True,
                ),
                first=first_pairs,
                planned=wall_repeats,
                deadline=deadline,
                estimate=(time.monotonic() - first_started) / max(runs.repeats, 1),
            )
            if budget_cut is not None:
                budget_cut["budget_min"] = config.time_budget
                if progress is not None:
                    progress.extend_cut(set_name, budget_cut)
        wall = {
            side: (*getattr(runs, side), *(p for r, _ in extension for p in getattr(r, side)))
            for side in ("head", "base")
        }
        head_df = _side_results(wall["head"], clock_runs.head if clock_runs else None)
        base_df = _side_results(wall["base"], clock_runs.base if clock_runs else None)
        if runs.skipped is not None and (head_df is None or base_df is None):
            outcomes.append(_write_skipped(out_dir, set_name, runs, base))
            continue
        # same packages on both sides unless the base pins other requirements (then the
        # differences are part of what the PR changes, and are recorded)
        differences = require_compatible_runs(
            head_df, base_df, allow_mismatch=base.env_mode == "full", require_metadata=False
        )
        comparison = judge.judge(head_df, base_df)
        confirm_runs = None
        if count_tier is not None:
            count_tier = replace(count_tier, timed_once=split)
        # counted cases timed once a side (the CPU-clock pass) are timed for display:
        # their clock's flags are not put to a confirmation (apply_count_tier decides),
        # nor are flags their work counts decided
        flagged = set(judge.to_confirm(comparison))
        names = [
            r.fullname
            for r in comparison.rows
            if r.fullname in flagged and not (count_tier is not None and count_tier.decides(r))
        ]
        if judge.confirm_runs and names:
            # duets again when the first runs were: twice the pairs for the same time
            # (two pairs alone leave a paired test one degree of freedom)
            confirm_repeats = judge.confirm_runs * (2 if judge.paired else 1)
            if progress is not None:
                progress.confirm_started(set_name, len(names), 2 * confirm_repeats)
            confirm_runs = _again(
                set_name, sides, cache, config, progress, "confirm", names, confirm_repeats,
                environ, duet=judge.paired,
            )  # fmt: skip
            comparison = judge.confirm(
                comparison,
                merge_runs([load_results(p) for p in confirm_runs.head]),
                merge_runs([load_results(p) for p in confirm_runs.base]),
                names=names,
            )
        if count_tier is not None:
            from rlpace.bench.counts.tier import apply_count_tier

            comparison = apply_count_tier(comparison, count_tier)
        comparison = replace(comparison, calibration_changes=tuple(changed), time_budget=budget_cut)
        outcomes.append(
            _write_reports(
                out_dir,
                set_name,
                comparison,
                runs,
                base,
                noise_file,
                differences,
                confirm_runs,
                clock_runs,
                paired=judge.paired,
                extension=extension,
            )
        )
    return outcomes


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


def _again(
    set_name: str,
    sides: Mapping[str, tuple[Path, Path]],
    cache: Path,
    config: PipelineConfig,
    progress: ProgressSink | None,
    stage: str,
    names: list[str],
    repeats: int,
    environ: Mapping[str, Mapping[str, str]],
    *,
    duet: bool,
    deadline: float | None = None,
    estimate: float = 0.0,
) -> SideRuns:
    """Fresh runs of just ``names`` after the first ones (extra duets, a confirmation),
    into ``<cache>/runs/<set>-<stage>``; fewer than ``repeats`` when ``deadline`` stops
    them (:func:`run_interleaved`)."""
    return run_interleaved(
        set_name=set_name,
        sides=sides,
        runs_dir=cache / "runs" / f"{set_name}-{stage}",
        repeats=repeats,
        settings=config.effective_settings,
        environ=environ,
        on_run=None if progress is None else progress.run_finished,
        select=names,
        duet=duet,
        count_work=False,  # the judge reads the work counts of the first runs
        deadline=deadline,
        estimate=estimate,
    )


def _extend(
    stages: Sequence[tuple[int, tuple[str, ...]]],
    run_stage: Callable[..., SideRuns],
    *,
    first: int,
    planned: int,
    deadline: float | None,
    estimate: float,
) -> tuple[list[tuple[SideRuns, tuple[str, ...]]], dict[str, object] | None]:
    """Run the extra duets' ``stages`` (:func:`_extension_stages`) in order, the
    duets past ``planned`` pairs a case only while they fit before ``deadline``.

    ``run_stage(stage=, names=, repeats=, deadline=, estimate=)`` runs ``repeats``
    duets of ``names`` as stage ``extend-<i>`` (:func:`_again`); ``estimate`` is the
    seconds a duet is expected to take (the last stage's mean, which timed the same
    cases or more; before any, ``estimate`` here: a first duet's). Returns each
    stage that ran with its cases, and what the budget cut (None: nothing):
    ``planned_duets`` and ``ran_duets`` of the duets past ``planned`` pairs, and
    ``short``, the cases that got fewer pairs than planned.

    Example:
        >>> def ran(stage, names, repeats, deadline, estimate):
        ...     return SideRuns("cpu", (Path("b"),) * repeats, (Path("h"),) * repeats)
        >>> stages = [(2, ("a", "b")), (3, ("b",))]
        >>> runs, cut = _extend(stages, ran, first=2, planned=4, deadline=None, estimate=9)
        >>> [r.repeats for r, _ in runs], cut
        ([2, 3], None)
        >>> def spent(stage, names, repeats, deadline, estimate):  # the budget is spent
        ...     n = repeats if deadline is None else 0
        ...     return SideRuns("cpu", (Path("b"),) * n, (Path("h"),) * n)
        >>> runs, cut = _extend(stages, spent, first=2, planned=4, deadline=0.0, estimate=9)
        >>> [r.repeats for r, _ in runs], cut
        ([2], {'planned_duets': 3, 'ran_duets': 0, 'short': 1})
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
    return extension, {"planned_duets": planned_duets, "ran_duets": ran_duets, "short": len(short)}


def _extension_stages(
    duets: DuetCalibration | None, runs: SideRuns, first: int, pairs: int, config: PipelineConfig
) -> list[tuple[int, tuple[str, ...]]]:
    """``(pairs, fullnames)`` stages of duets after the ``first`` ones, in order.

    Every case of the timed pass but the torchrl twins (the negative controls) gets
    ``pairs`` duets in all; one whose A/A pair spread in ``duets`` needs more to detect the first
    of ``config.detect_pct`` it can within ``config.max_pairs`` (judged at
    ``config.paired_threshold``) gets as many as it needs. A stage runs the
    cases that still need pairs, as many pairs as the least needy of them lacks.

    Example:
        >>> _extension_stages(None, SideRuns("cpu", (), ()), 2, 4, PipelineConfig())
        []
    """
    from rlpace.bench.controls import CONTROL_IMPL
    from rlpace.bench.results import load_results

    if not runs.head:
        return []
    frame = _rows_of_pass(load_results(runs.head[0]), "timed")
    if duets is not None:  # the detectable changes of the threshold these pairs are judged at
        duets = replace(duets, threshold=config.paired_threshold)
    need: dict[str, int] = {}
    for name, impl in zip(frame["fullname"], frame["impl"], strict=True):
        if impl == CONTROL_IMPL:
            continue
        more = None
        if duets is not None and config.max_pairs > pairs:
            for target in config.detect_pct:
                more = duets.pairs_to_detect(name, target, start=pairs, most=config.max_pairs)
                if more is not None:
                    break
        total = max(pairs, more or 0)
        if total > first:
            need[name] = total
    stages, done = [], first
    # the duets up to ``pairs`` a case are a stage of their own, so that a time budget
    # (:attr:`PipelineConfig.time_budget`) cuts only the ones past them
    levels = set(need.values())
    if levels and first < pairs < max(levels):
        levels.add(pairs)
    for level in sorted(levels):
        stages.append((level - done, tuple(n for n, k in need.items() if k >= level)))
        done = level
    return stages


_PASS_CLOCK = {"counted": "cpu", "timed": "wall"}
"""The clock a suite from before passes (``RLPACE_BENCH_PASS``) follows for each pass."""


def _pass_env(
    environ: Mapping[str, Mapping[str, str]], pass_name: str
) -> dict[str, dict[str, str]]:
    """Each side's environment with the suite told to run only ``pass_name``'s cases
    (:data:`rlpace.bench.suite.PASSES`); a suite from before passes reads the clock
    beside it and runs that clock's cases."""
    told = {PASS_ENV: pass_name, TIMER_VARIABLE: _PASS_CLOCK[pass_name]}
    return {side: {**env, **told} for side, env in environ.items()}


def _side_results(main: Sequence[Path], clock: Sequence[Path] | None):
    """One side's results, runs merged: with a counted pass (``clock``: the CPU-clock
    cases the count tier judges, timed once a side), its rows and the main runs' rows of
    the timed pass (a base whose suite cannot skip by pass or clock ran everything in
    both; each row is kept from its own pass only). None when no run holds any row."""
    from rlpace.bench.results import load_results, merge_runs

    frames = []
    for paths, keep in ((clock or (), "counted"), (main, "timed" if clock is not None else None)):
        for path in paths:
            frame = load_results(path)
            if keep is not None:
                frame = _rows_of_pass(frame, keep)
            if len(frame):
                frames.append(frame)
    return merge_runs(frames) if frames else None


def _rows_of_pass(frame, pass_name: str):
    """The rows of ``frame`` that belong to ``pass_name`` (``extra_info["pass"]``; a row
    from a suite before passes goes by its clock, :data:`_PASS_CLOCK`, and a row that
    names neither, or a clock of no pass, is on the wall clock, the suite's default).

    Example:
        >>> import pandas as pd
        >>> frame = pd.DataFrame({"name": ["a", "b", "c", "d"], "extra_info": [
        ...     {"timer": "cpu", "pass": "timed"}, {"timer": "cpu"}, {}, None]})
        >>> [list(_rows_of_pass(frame, p)["name"]) for p in ("timed", "counted")]
        [['a', 'c', 'd'], ['b']]
    """
    clock = {c: p for p, c in _PASS_CLOCK.items()}
    passes = [
        (extra or {}).get("pass") or clock.get((extra or {}).get("timer"), "timed")
        for extra in frame["extra_info"]
    ]
    kept = frame[[p == pass_name for p in passes]].reset_index(drop=True)
    kept.attrs = dict(frame.attrs)
    return kept


def _count_tier(
    config: PipelineConfig,
    repo: Path,
    base: BaseCheckout,
    cache: Path,
    environ,
    progress: ProgressSink | None = None,
    gates_file: Path | None = None,
):
    """The count tier's hook (see :mod:`rlpace.bench.counts.tier`); None when turned off.
    ``gates_file``: the A/A count gates to judge with (None: the tier's defaults)."""
    if not config.counts:
        return None
    if progress is not None:
        progress.counts_started("cpu")
    from rlpace.bench.counts.session import CountSettings
    from rlpace.bench.counts.tier import GATES_FILE, run_count_tier

    return run_count_tier(
        head_tree=repo,
        base_tree=base.tree,
        head_python=Path(sys.executable),
        # the same packages (overlay, current): the head's interpreter for both sides,
        # so the counting processes differ in the tree only, not in sys.prefix
        base_python=Path(sys.executable) if base.env_mode != "full" else base.python,
        out_dir=cache / "counts",
        environ=environ,
        # the torchrl twins run the same torchrl on both sides: their counts cannot move
        settings=CountSettings(
            keyword=f"({config.effective_keyword}) and not torchrl"
            if config.effective_keyword
            else "not torchrl"
        ),
        gates_file=gates_file,
        gates_shown=GATES_FILE.as_posix(),
        on_case=None if progress is None else progress.case_counted,
    )


def cuda_available(python: Path) -> bool:
    """Whether torch sees a CUDA device in ``python``'s environment (False without torch).

    Example:
        >>> isinstance(cuda_available(Path(sys.executable)), bool)  # doctest: +SKIP
        True
    """
    probe = "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 3)"
    proc = subprocess.run([str(python), "-c", probe], capture_output=True, check=False)
    return proc.returncode == 0


def set_marker(set_name: str) -> str:
    """The hidden line that keeps one PR comment per set (the bot finds it again).

    Example:
        >>> set_marker("gpu")
        '<!-- rlpace-bench-set: gpu -->'
    """
    return f"<!-- rlpace-bench-set: {set_name} -->"


def _checked_in(
    explicit: Path | None, relative: Path, repo: Path, base_tree: Path, changed: list[str]
) -> tuple[Path | None, str]:
    """A checked-in calibration file (``relative`` to a tree) and its name for the report.

    ``explicit`` (an operator's ``--noise`` / ``--duets``) wins. Otherwise the base's
    copy is used, never the head's: the head is the pull request, and a PR that could
    widen its own gates could hide its own regression. When the head's copy differs
    (changed, added or removed), ``relative`` is added to ``changed`` so the comment
    says the new file was not used; it applies once merged.
    """
    if explicit is not None:
        return explicit, _shown_path(explicit, repo)
    head, trusted = repo / relative, base_tree / relative
    head_bytes = head.read_bytes() if head.is_file() else None
    base_bytes = trusted.read_bytes() if trusted.is_file() else None
    if head_bytes != base_bytes:
        changed.append(relative.as_posix())
    return (trusted, relative.as_posix()) if base_bytes is not None else (None, "")


def _shown_path(path: Path, repo: Path) -> str:
    """``path`` relative to the repository when inside it (what a reader can open)."""
    try:
        return str(Path(path).resolve().relative_to(repo.resolve()))
    except ValueError:
        return str(path)


def _pythonpath_first(path: Path) -> dict[str, str]:
    rest = os.environ.get("PYTHONPATH", "")
    return {"PYTHONPATH": os.pathsep.join(p for p in (str(path), rest) if p)}


def _title(set_name: str, base: BaseCheckout) -> str:
    return f"Benchmarks ({set_name.upper()} set): working tree vs {base.ref} ({base.short})"


def _write_reports(
    out_dir: Path,
    set_name: str,
    comparison: Comparison,
    runs: SideRuns,
    base: BaseCheckout,
    noise_file: Path | None,
    environment_differences: list[str],
    confirm_runs: SideRuns | None = None,
    clock_runs: SideRuns | None = None,
    *,
    paired: bool = False,
    extension: Sequence[tuple[SideRuns, tuple[str, ...]]] = (),
) -> SetOutcome:
    from rlpace.bench.render import GITHUB_COMMENT_LIMIT, render_report

    written = []
    marker = set_marker(set_name)
    for style, pattern in REPORT_STYLES.items():
        path = out_dir / pattern.format(set=set_name)
        text = render_report(
            {set_name: comparison},
            style=style,
            title=_title(set_name, base),
            max_chars=GITHUB_COMMENT_LIMIT - len(marker) - 1,
        )
        first, _, rest = text.partition("\n")
        if not first.startswith("<!--"):  # a style without the report marker
            first, rest = "", text
        write_whole(path, "\n".join(x for x in (first, marker, rest) if x) + "\n")
        written.append(path)
    data = comparison.to_dict()
    data["pipeline"] = _pipeline_meta(set_name, runs, base)
    data["pipeline"]["noise_file"] = (
        str(noise_file) if noise_file and noise_file.is_file() else None
    )
    data["pipeline"]["environment_differences"] = list(environment_differences)
    # the timed pass's runs (and a confirmation) as duets, judged pair by pair
    data["pipeline"]["paired"] = paired
    if paired:
        data["pipeline"]["order"] = _duet_order(runs)
    data["pipeline"]["confirmation"] = (
        None
        if confirm_runs is None
        else {
            "repeats": confirm_runs.repeats,
            "benchmarks": [r.fullname for r in comparison.rows if r.confirmed is not None],
            "order": _duet_order(confirm_runs) if paired else _run_order(confirm_runs),
        }
    )
    # the duets after the first ones, stage by stage (appended to each case's pairs)
    data["pipeline"]["extension"] = [
        {"repeats": r.repeats, "benchmarks": list(names), "order": _duet_order(r)}
        for r, names in extension
    ]
    # the counted pass: one duet a side of the counted cases, on the CPU clock (count tier on)
    data["pipeline"]["cpu_clock"] = (
        None
        if clock_runs is None
        else {"repeats": clock_runs.repeats, "duet": True, "order": _run_order(clock_runs)}
    )
    json_path = out_dir / f"{set_name}.json"
    write_whole(json_path, json.dumps(data, indent=2) + "\n")
    written.append(json_path)
    _check_record(json_path)
    return SetOutcome(set_name, comparison, None, tuple(written), runs, confirm_runs)


def _check_record(path: Path) -> None:
    """Read ``path`` back as the trusted comment job will, so that a record its schema
    refuses fails this run, loudly, instead of that job (which would post nothing)."""
    from rlpace.bench.comparison_record import load_record

    try:
        load_record(path)
    except BenchInputError as e:
        raise BenchInputError(
            f"{path.name}: pr wrote a comparison that the comment job's schema refuses, so "
            f"no comment could be posted from it ({e}). This is a bug in rlpace-bench: "
            f"please report it with the file, which is kept at {path}"
        ) from None


def _write_skipped(out_dir: Path, set_name: str, runs: SideRuns, base: BaseCheckout) -> SetOutcome:
    md = out_dir / f"{set_name}.md"
    from rlpace.bench.render import REPORT_MARKER

    text = (
        f"{REPORT_MARKER}\n{set_marker(set_name)}\n## {_title(set_name, base)}\n\n"
        f"Skipped: {runs.skipped}.\n"
    )
    write_whole(md, text)
    seed = out_dir / f"{set_name}.seed.md"
    write_whole(seed, text)
    data = {
        "format": "rlpace-pr-skipped",
        "version": 1,
        "skipped": runs.skipped,
        "pipeline": _pipeline_meta(set_name, runs, base),
    }
    json_path = out_dir / f"{set_name}.json"
    write_whole(json_path, json.dumps(data, indent=2) + "\n")
    return SetOutcome(set_name, None, runs.skipped, (md, seed, json_path), runs)


def _pipeline_meta(set_name: str, runs: SideRuns, base: BaseCheckout) -> dict[str, object]:
    return {
        "set": set_name,
        "base_ref": base.ref,
        "base_commit": base.sha,
        "base_env": base.env_mode,
        "repeats": runs.repeats,
        "order": _run_order(runs),
    }


def _duet_order(runs: SideRuns) -> list[str]:
    """The runs' file stems by duet: ``base-k`` and ``head-k`` ran at the same time."""
    return [f"{side}-{k}" for k in range(runs.repeats) for side in ("base", "head")]


def _run_order(runs: SideRuns) -> list[str]:
    """The runs' file stems in the order they ran (the ABBA schedule)."""
    counts = {"base": len(runs.base), "head": len(runs.head)}
    return [f"{side}-{k}" for k, side in abba_schedule(counts)]


def pr_judge(
    config: PipelineConfig,
    calibration_file: Path | None,
    *,
    shown: str = "",
    same_packages: bool = True,
    duets_file: Path | None = None,
    duets_shown: str = "",
) -> Judge:
    """The :class:`~rlpace.bench.judge.Judge` ``pr`` judges a set with: ``config``'s
    threshold, alpha and confirmation, the calibration in ``calibration_file`` (None:
    none), the control floor on.

    Args:
        config: the pipeline's settings.
        calibration_file: a calibration from ``rlpace-bench aa``, or None.
        shown: the file's name as the report shows it (default: the path).
        same_packages: whether base and head run the same pinned packages.
        duets_file: a duet calibration from ``rlpace-bench aa --duets``, or None.
        duets_shown: its name as the report shows it (default: the path).

    Raises:
        BenchInputError: the calibration or duet calibration file cannot be read.

    Example:
        >>> judge = pr_judge(PipelineConfig(threshold=3.0, confirm=0), None)
        >>> judge.threshold, judge.paired_threshold, judge.confirm_runs, judge.noise is None
        (3.0, 2.0, 0, True)
    """
    from rlpace.bench.calibration import read_calibration, read_duet_calibration
    from rlpace.bench.judge import Judge

    calibration = read_calibration(calibration_file) if calibration_file is not None else None
    return Judge.from_calibration(
        calibration,
        source=shown or str(calibration_file or ""),
        duets=read_duet_calibration(duets_file) if duets_file is not None else None,
        duets_source=duets_shown or str(duets_file or ""),
        threshold=config.threshold,
        paired_threshold=config.paired_threshold,
        alpha=config.alpha,
        confirm_runs=config.confirm,
        same_packages=same_packages,
    )


class ProgressSink:
    """Receives the pipeline's progress; the default does nothing (the CLI draws a bar).

    Example:
        >>> ProgressSink().set_started("cpu", 6)
    """

    def started(self, base: BaseCheckout, config: PipelineConfig) -> None:
        """The base is checked out and its environment ready."""

    def set_started(self, set_name: str, runs: int) -> None:
        """``runs`` fresh processes are about to run for ``set_name``."""

    def counts_started(self, set_name: str) -> None:
        """The count tier starts counting base and head (minutes, both cores)."""

    def case_counted(self, side: str, test_id: str, status: str) -> None:
        """One case of one side (``base`` or ``head``) left the counting process."""

    def counts_finished(self, set_name: str, tier: object) -> None:
        """The count tier of ``set_name`` finished (``tier`` is its
        :class:`~rlpace.bench.counts.tier.CountTier`)."""

    def confirm_started(self, set_name: str, benchmarks: int, runs: int) -> None:
        """``runs`` fresh processes re-run the ``benchmarks`` the first ones flagged."""

    def extend_started(self, set_name: str, benchmarks: int, runs: int) -> None:
        """``runs`` fresh processes give ``benchmarks`` timed cases extra duets."""

    def extend_cut(self, set_name: str, cut: Mapping[str, object]) -> None:
        """The time budget stopped the extra duets (``cut``: what
        :attr:`rlpace.bench.compare.Comparison.time_budget` records)."""

    def run_finished(self, repeat: int, side: str, outcome: RunOutcome) -> None:
        """One run ended."""
