"""The ``pr`` pipeline: the working tree (head) against a base revision, told truthfully.

Steps, for each benchmark set:

1. check the base revision out in its own ``git worktree`` (cached per commit) and
   give it a Python environment (cached by a hash of its pinned requirements, see
   :func:`prepare_base_python`);
2. for the CPU set, count the single-process cases of both sides under Callgrind,
   side by side (:func:`rlpace.bench.counts.tier.run_count_tier`; ``counts``), then
   time the counted cases on the CPU clock for display (their counts judge them; the
   suite's ``counted`` pass, :data:`rlpace.bench.suite.PASSES`): base and head at once
   on a core each, in :data:`COUNTED_DUETS` duets with the cores swapped between them,
   pooled into one measurement a side;
3. run the set ``repeats`` times per side, interleaved base/head then head/base
   (:func:`rlpace.bench.runner.abba_schedule`), each run a fresh pytest process
   through :func:`rlpace.bench.runner.run` with its side's environment, so drift of
   the machine hits both sides alike; with counts, the cases judged on their time
   (the suite's ``timed`` pass: the wall-clock cases and the CPU-clock ones declared
   out of the count tier, each on its own clock) instead run ``2 × repeats`` duets
   (base and head at once, a core each, judged pair by pair: a pair costs one run's
   time and cancels the load both met; the torchrl twins only the first
   :data:`CONTROL_DUETS`), and a case whose A/A
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

This module only orchestrates. The runs are :mod:`rlpace.bench.interleave`'s (ABBA
or duets, within a time budget), the extra duets' plan :mod:`rlpace.bench.extra_duets`',
which rows come from which pass :mod:`rlpace.bench.pass_rows`', the files written
:mod:`rlpace.bench.pr_reports`'; the verdicts are the judge's, the statistics
:mod:`rlpace.bench.stats`' and :mod:`rlpace.bench.gates`'.

Example:
    >>> pr_judge(PipelineConfig(confirm=0), None).confirm_runs
    0
    >>> run_pr(PipelineConfig(base="HEAD", sets=("cpu",)))  # doctest: +SKIP
    [SetOutcome(set_name='cpu', ...)]
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from rlpace.bench._atomic import writable_dir
from rlpace.bench.base_revision import (
    BASE_ENV_MODES,
    BaseCheckout,
    checkout_base,
    prepare_base_python,
    repository_root,
)
from rlpace.bench.errors import BenchInputError
from rlpace.bench.extra_duets import plan_stages, run_stages
from rlpace.bench.interleave import SideRuns, run_interleaved
from rlpace.bench.pass_rows import pass_environ, side_results
from rlpace.bench.pr_reports import SetOutcome, clear_reports, write_reports, write_skipped
from rlpace.bench.runner import SUITE_DIR, RunOutcome, RunSettings, suite_present
from rlpace.bench.thresholds import PAIRED_THRESHOLD

if TYPE_CHECKING:  # pragma: no cover
    from rlpace.bench.comparison import Comparison
    from rlpace.bench.counts.tier import CountTier
    from rlpace.bench.judge import Judge

# the base's checkout and environment are :mod:`rlpace.bench.base_revision`'s, imported
# here for the steps that use them; they are documented there, once
__all__ = [
    "CONTROL_DUETS",
    "COUNTED_DUETS",
    "STAGES",
    "PipelineConfig",
    "ProgressSink",
    "pr_judge",
    "run_pr",
]

CALIBRATION_DIR = Path("reports") / "calibration"
"""Checked-in A/A calibrations, ``<set>.json``, used when ``--noise`` is not given."""
QUICK_KEYWORD = "not torchrl"
"""``--quick`` drops the torchrl twins: a change to rlpace cannot move them."""
COUNTED_DUETS = 2
"""Duets of the counted pass, the cores swapped between them (their runs pooled into one
measurement a side, :func:`rlpace.bench.results.pool_runs`). One duet gave base the
first core for every case, and most of the control floor's controls run in this pass:
on a shared host its location was then that core's lean (−3.9 to +5.0 % in six A/A
duets of 2026-12-06), which the timed duets, alternating their cores, do not have."""
CONTROL_DUETS = 1
"""The first duets of the timed pass, the only ones its torchrl twins (negative controls)
run in; the other timed cases go on in extra duets (:mod:`rlpace.bench.extra_duets`),
their cores alternating on from these. A PR cannot move the twins, and starting and
stopping torchrl's worker processes took 56–61 % of a first duet on a slow host
(2026-12-06); the control floor's other controls, the counted pass's twins, run in
:data:`COUNTED_DUETS` duets."""
STAGES = ("counting", "counted_pass", "first_runs", "extra_duets", "confirmation")
"""The stages of a set's run whose seconds ``<set>.json`` records (``pipeline.stage_seconds``,
only those that ran): the count tier, the counted pass's duets, the first runs (or
duets), the extra duets, the confirmation."""


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
    only the first :data:`CONTROL_DUETS` of them; with a duet calibration at hand, a case (not a
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
    base and head at once (for display; pooled over :data:`COUNTED_DUETS` duets with
    the cores swapped), which pays for the counting; the cases judged
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
    def control_duets(self) -> int:
        """With the count tier on, the first duets of the timed pass, the only ones the
        torchrl twins run in (:data:`CONTROL_DUETS`, at most the ``2 × repeats`` planned).

        Example:
            >>> PipelineConfig().control_duets
            1
        """
        return min(CONTROL_DUETS, 2 * self.effective_repeats)

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
    deadline = None if config.time_budget is None else time.monotonic() + 60 * config.time_budget
    repo = repository_root(config.repo)
    if not suite_present(repo):
        raise BenchInputError(
            f"expected a benchmark suite at {repo / SUITE_DIR}, found none. "
            "Fix: run `rlpace-bench pr` from the repository root"
        )
    cache = (config.cache_dir or repo / "build" / "rlpace-bench").resolve()
    out_dir = config.out_dir if config.out_dir.is_absolute() else repo / config.out_dir
    writable_dir(out_dir, "--out-dir")  # before the runs, not after them
    writable_dir(cache, "--cache-dir")
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
        clear_reports(out_dir, set_name)
        # and the runs directory holds this run's duets only: an earlier run's extra or
        # confirmation duets would be read as this one's (`aa --pr-runs`)
        _clear_stages(cache / "runs", set_name)
        if set_name == "gpu" and not cuda_available(Path(sys.executable)):
            skipped = SideRuns(set_name, (), (), "no CUDA device on this machine")
            outcomes.append(write_skipped(out_dir, set_name, skipped, base))
            continue
        pr = _SetRun(config, set_name, repo, base, cache, progress, deadline)
        outcomes.append(_run_set(pr, out_dir))
    return outcomes


class _Stopwatch:
    """The seconds each stage of a set's run took (:data:`STAGES`), in the order they ran.

    Example:
        >>> watch = _Stopwatch()
        >>> with watch.stage("first_runs"):
        ...     pass
        >>> list(watch.seconds)
        ['first_runs']
    """

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time the ``with`` block as stage ``name`` (one of :data:`STAGES`).

        Example:
            >>> with _Stopwatch().stage("warm-up"):
            ...     pass
            Traceback (most recent call last):
            ...
            ValueError: stage: expected one of ('counting', 'counted_pass', 'first_runs', 'extra_duets', 'confirmation'), got 'warm-up'; fix: add it to STAGES
        """
        if name not in STAGES:  # not an assert: ``python -O`` would drop it
            raise ValueError(
                f"stage: expected one of {STAGES}, got {name!r}; fix: add it to STAGES"
            )
        started = time.monotonic()
        try:
            yield
        finally:
            self.seconds[name] = round(time.monotonic() - started, 1)


@dataclass(frozen=True)
class _SetRun:
    """What every step of one set's run needs: the settings, both sides, where runs go."""

    config: PipelineConfig
    set_name: str
    repo: Path
    base: BaseCheckout
    cache: Path
    progress: ProgressSink | None
    deadline: float | None
    """The time budget's end (:func:`time.monotonic`), or None."""

    @property
    def sides(self) -> dict[str, tuple[Path, Path]]:
        """Each side's tree and interpreter."""
        return {
            "base": (self.base.tree, self.base.python),
            "head": (self.repo, Path(sys.executable)),
        }

    @property
    def environ(self) -> dict[str, dict[str, str]]:
        """Each side's extra environment: its own ``lib`` first on the path."""
        return {
            "base": _pythonpath_first(self.base.tree / "lib"),
            "head": {**_pythonpath_first(self.repo / "lib"), **self.config.head_environ},
        }

    def on_run(self) -> Callable[[int, str, RunOutcome], None] | None:
        """The progress sink's per-run call, or None."""
        return None if self.progress is None else self.progress.run_finished


def _run_set(pr: _SetRun, out_dir: Path) -> SetOutcome:
    """Run, judge, confirm and write one set (steps 2 to 6 of this module's list)."""
    from rlpace.bench.environment import require_compatible_runs

    config, set_name, progress = pr.config, pr.set_name, pr.progress
    trusted = _trusted_files(config, set_name, pr.repo, pr.base)
    # one judge for the set: the same one `rlpace-bench compare` builds
    judge = pr_judge(
        config,
        trusted.noise,
        shown=trusted.noise_shown,
        same_packages=pr.base.env_mode != "full",
        duets_file=trusted.duets,
        duets_shown=trusted.duets_shown,
    )
    environ = pr.environ
    # counts first: they take both cores, and the cases on the CPU clock they judge
    # then need one timing a side instead of every repeat
    watch = _Stopwatch()
    count_tier = None
    if set_name == "cpu":
        with watch.stage("counting"):
            count_tier = _count_tier(
                config, pr.repo, pr.base, pr.cache, environ, progress, trusted.gates
            )
        if count_tier is None:  # turned off (--no-counts)
            watch.seconds.pop("counting")
    if progress is not None and count_tier is not None:
        progress.counts_finished(set_name, count_tier)
    split = count_tier is not None and count_tier.unavailable is None
    # with the count tier on, the timed cases run as duets and are judged pair
    # by pair; a pair costs one run's time, so they get twice the runs a side
    wall_repeats = 2 * config.effective_repeats if split else config.effective_repeats
    # the negative controls (torchrl twins) run in the first duet only: nothing a PR
    # changes moves them, starting torchrl's workers costs over half of a duet, and
    # the control floor has the counted pass's twins, two duets a side, beside them
    first_pairs = config.control_duets if split else wall_repeats
    judge = replace(judge, paired=split)
    if progress is not None:
        progress.set_started(set_name, 2 * first_pairs + (2 * COUNTED_DUETS if split else 0))
    clock_runs = None
    if split:
        with watch.stage("counted_pass"):
            clock_runs = run_interleaved(
                set_name=set_name,
                sides=pr.sides,
                runs_dir=pr.cache / "runs" / f"{set_name}-cpu-clock",
                repeats=COUNTED_DUETS,
                settings=config.effective_settings,
                keyword=config.effective_keyword,
                environ=pass_environ(environ, "counted"),
                on_run=pr.on_run(),
                duet=True,
                count_controls=not judge.same_packages,
            )
    with watch.stage("first_runs"):
        runs = run_interleaved(
            set_name=set_name,
            sides=pr.sides,
            runs_dir=pr.cache / "runs" / set_name,
            repeats=first_pairs,
            settings=config.effective_settings,
            keyword=config.effective_keyword,
            environ=pass_environ(environ, "timed") if split else environ,
            on_run=pr.on_run(),
            duet=split,
            # a base with packages of its own may run another torchrl: count the twins
            count_controls=not judge.same_packages,
        )
    extension: list[tuple[SideRuns, tuple[str, ...]]] = []
    budget_cut = None
    if split:
        first_took = watch.seconds["first_runs"] / max(runs.repeats, 1)
        with watch.stage("extra_duets"):
            extension, budget_cut = _extra_duets(
                pr, judge, runs, first_pairs, wall_repeats, first_took
            )
        if not extension:
            watch.seconds.pop("extra_duets")
    wall = {
        side: (*getattr(runs, side), *(p for r, _ in extension for p in getattr(r, side)))
        for side in ("head", "base")
    }
    head_df = side_results(wall["head"], clock_runs.head if clock_runs else None)
    base_df = side_results(wall["base"], clock_runs.base if clock_runs else None)
    if runs.skipped is not None and (head_df is None or base_df is None):
        return write_skipped(out_dir, set_name, runs, pr.base)
    # same packages on both sides unless the base pins other requirements (then the
    # differences are part of what the PR changes, and are recorded)
    differences = require_compatible_runs(
        head_df, base_df, allow_mismatch=pr.base.env_mode == "full", require_metadata=False
    )
    comparison = judge.judge(head_df, base_df)
    if count_tier is not None:
        count_tier = replace(
            count_tier, timed_once=split, counted_duets=clock_runs.repeats if clock_runs else 0
        )
    with watch.stage("confirmation"):
        comparison, confirm_runs = _confirm(pr, judge, comparison, count_tier)
    if confirm_runs is None:
        watch.seconds.pop("confirmation")
    if count_tier is not None:
        from rlpace.bench.counts.tier import apply_count_tier

        comparison = apply_count_tier(comparison, count_tier)
    comparison = replace(
        comparison, calibration_changes=tuple(trusted.changed), time_budget=budget_cut
    )
    return write_reports(
        out_dir,
        set_name,
        comparison,
        runs,
        pr.base,
        trusted.noise,
        differences,
        confirm_runs,
        clock_runs,
        paired=judge.paired,
        extension=extension,
        stage_seconds=watch.seconds,
    )


def _extra_duets(
    pr: _SetRun, judge: Judge, runs: SideRuns, first: int, planned: int, first_took: float
) -> tuple[list[tuple[SideRuns, tuple[str, ...]]], dict[str, object] | None]:
    """Duets of just the timed cases that need more pairs than the ``first`` ones
    (:mod:`rlpace.bench.extra_duets`), appended pair by pair to them; each stage drops
    the cases that have enough, and the time budget cuts only the ones past the
    ``planned`` pairs. ``first_took``: the seconds a first duet took."""
    config = pr.config
    stages = plan_stages(
        judge.duets,
        runs,
        first,
        planned,
        max_pairs=config.max_pairs,
        detect_pct=config.detect_pct,
        paired_threshold=config.paired_threshold,
    )
    if not stages:
        return [], None
    if pr.progress is not None:
        pr.progress.extend_started(
            pr.set_name, len(stages[0][1]), 2 * sum(pairs for pairs, _ in stages)
        )
    environ = pass_environ(pr.environ, "timed")
    extension, cut = run_stages(
        stages,
        functools.partial(_again, pr, environ=environ, duet=True),
        first=first,
        planned=planned,
        deadline=pr.deadline,
        estimate=first_took,
        budget_min=config.time_budget,
    )
    if cut is not None and pr.progress is not None:
        pr.progress.extend_cut(pr.set_name, cut)
    return extension, cut


def _confirm(
    pr: _SetRun, judge: Judge, comparison: Comparison, count_tier: CountTier | None
) -> tuple[Comparison, SideRuns | None]:
    """Run the flagged benchmarks again in fresh processes and keep a flag only where
    those runs flag it too (:meth:`rlpace.bench.judge.Judge.confirm`); the comparison
    as it stands and None when nothing is put to a confirmation."""
    from rlpace.bench.results import load_results, merge_runs

    # counted cases timed once a side (the CPU-clock pass) are timed for display:
    # their clock's flags are not put to a confirmation (apply_count_tier decides),
    # nor are flags their work counts decided
    flagged = set(judge.to_confirm(comparison))
    names = [
        r.fullname
        for r in comparison.rows
        if r.fullname in flagged and not (count_tier is not None and count_tier.decides(r))
    ]
    if not (judge.confirm_runs and names):
        return comparison, None
    # duets again when the first runs were: twice the pairs for the same time
    # (two pairs alone leave a paired test one degree of freedom)
    confirm_repeats = judge.confirm_runs * (2 if judge.paired else 1)
    if pr.progress is not None:
        pr.progress.confirm_started(pr.set_name, len(names), 2 * confirm_repeats)
    confirm_runs = _again(
        pr, "confirm", names, confirm_repeats, environ=pr.environ, duet=judge.paired
    )
    confirmed = judge.confirm(
        comparison,
        merge_runs([load_results(p) for p in confirm_runs.head]),
        merge_runs([load_results(p) for p in confirm_runs.base]),
        names=names,
    )
    return confirmed, confirm_runs


def _again(
    pr: _SetRun,
    stage: str,
    names: Sequence[str],
    repeats: int,
    *,
    environ: Mapping[str, Mapping[str, str]],
    duet: bool,
    duets_before: int = 0,
    deadline: float | None = None,
    estimate: float = 0.0,
) -> SideRuns:
    """Fresh runs of just ``names`` after the first ones (extra duets, a confirmation),
    into ``<cache>/runs/<set>-<stage>``, their cores alternating on from the ``duets_before``
    duets they had; fewer than ``repeats`` when ``deadline`` stops them
    (:func:`~rlpace.bench.interleave.run_interleaved`)."""
    return run_interleaved(
        set_name=pr.set_name,
        sides=pr.sides,
        runs_dir=pr.cache / "runs" / f"{pr.set_name}-{stage}",
        repeats=repeats,
        settings=pr.config.effective_settings,
        environ=environ,
        on_run=pr.on_run(),
        select=list(names),
        duet=duet,
        count_work=False,  # the judge reads the work counts of the first runs
        deadline=deadline,
        estimate=estimate,
        duets_before=duets_before,
    )


@dataclass(frozen=True)
class _Trusted:
    """The calibration files a set is judged with, and their names in the report."""

    noise: Path | None
    noise_shown: str
    duets: Path | None
    duets_shown: str
    gates: Path | None
    """The count tier's A/A gates (the CPU set only)."""
    changed: tuple[str, ...]
    """The checked-in files the head changed (not used: they apply once merged)."""


def _trusted_files(
    config: PipelineConfig, set_name: str, repo: Path, base: BaseCheckout
) -> _Trusted:
    """The checked-in calibrations as the base has them (a PR cannot set its own gates),
    or the operator's ``--noise`` / ``--duets`` (:func:`_checked_in`)."""
    from rlpace.bench.calibration import duet_calibration_path
    from rlpace.bench.counts.tier import GATES_FILE

    changed: list[str] = []
    noise, noise_shown = _checked_in(
        config.noise_file, CALIBRATION_DIR / f"{set_name}.json", repo, base.tree, changed
    )
    duets, duets_shown = _checked_in(
        config.duets_file,
        duet_calibration_path(CALIBRATION_DIR, set_name),
        repo,
        base.tree,
        changed,
    )
    gates = (
        _checked_in(None, GATES_FILE, repo, base.tree, changed)[0] if set_name == "cpu" else None
    )
    return _Trusted(noise, noise_shown, duets, duets_shown, gates, tuple(changed))


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
        :attr:`rlpace.bench.comparison.Comparison.time_budget` records)."""

    def run_finished(self, repeat: int, side: str, outcome: RunOutcome) -> None:
        """One run ended."""
