"""A/A calibration: how often the comparator cries wolf here, and what it can detect.

``rlpace-bench aa`` runs the suite against itself. It executes a *pool* of suite runs,
each a fresh process of the same code, and forms ``runs`` A/A comparisons from it,
each taking ``repeats`` runs per side exactly as the ``pr`` pipeline does (disjoint
runs when the pool holds ``2 × repeats × runs`` of them, the default). From those:

- the **false-alarm rate**: the fraction of A/A comparisons that flag at least one
  benchmark, with the comparator's own gates, and again with the calibrated noise
  (each comparison judged with noise calibrated without its own runs, so the figure is
  not flattered by fitting its own data). Comparisons are judged as ``pr`` judges them,
  negative-control floor included (:func:`rlpace.bench.pipeline.judge_runs`), and
  with ``confirm`` runs a side a comparison that flags anything is confirmed on other
  pool runs (:func:`rlpace.bench.pipeline.judge_confirmation`), kept out of its
  held-out calibration too; the rate before confirmation is kept as well;
- per benchmark, the **run spread** (standard deviation of the log median of one run
  across every run of the pool, %, the process-to-process noise), the **spread** of the
  A/A change with ``repeats`` runs a side (``run spread × √(2 / repeats)``; from the A/A
  changes themselves when the pool is too small), the **noise gate** the comparator
  should require of a change (``z × spread`` with ``z`` Bonferroni-corrected so the
  whole suite stays under ``family_alpha``, and never below the largest A/A change
  seen), and the **minimal detectable change** at 80% power:
  ``max(gate, threshold) + z₀.₈ × spread``;
- with ``inject`` (an :data:`~rlpace.bench.suite.SLOWDOWN_ENV` spec), a second pool
  (``slow_pool`` runs) runs with that slowdown and each injected benchmark's
  **detection rate** is the fraction of comparisons (clean vs slowed) that flag it as
  worsened, each judged by a calibration without its clean runs. Inject into rlpace's
  rows only (``'test_=0.1,*[torchrl*=0'``): the torchrl twins are the negative
  controls. :meth:`Calibration.detection_power` checks the promise of the minimal
  detectable change: benchmarks whose MDC at 90% power is at most the slow-down they
  really got should be flagged at least 90% of the time.

The figures come from :class:`Calibration`, written versioned to ``<set>.json``; the
``pr`` command reads its noise with ``--noise``.

Example:
    >>> gate, spread, mdc = noise_gate([1.0, -1.0, 0.5, -0.5], n_benchmarks=1)
    >>> round(spread, 3), round(gate, 2), round(mdc, 2)
    (0.913, 2.91, 5.77)
"""

from __future__ import annotations

import json
import math
import random
import statistics
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from rlpace.bench.errors import BenchInputError

__all__ = [
    "CALIBRATION_FORMAT",
    "CALIBRATION_VERSION",
    "BenchmarkNoise",
    "Calibration",
    "CalibrationConfig",
    "CalibrationNote",
    "DetectionPower",
    "analyse_pool",
    "calibration_note",
    "confirmation_gate",
    "detectable_change",
    "machine_environment",
    "noise_gate",
    "read_calibration",
    "run_calibration",
    "run_spreads",
]

CALIBRATION_FORMAT = "rlpace-bench-calibration"
CALIBRATION_VERSION = 2
READABLE_VERSIONS = (1, 2)
"""Version 1 lacks the run spreads (read as NaN); its gates are used as they are."""
POWER = 0.8
DETECTION_POWER = 0.9
"""The power the detection summary is judged at (the issue's 90% target)."""


_Gates = dict[str, tuple[float, float, float]]
"""``fullname → (gate, spread, mdc)`` in percent, as :func:`noise_gate` returns them."""
_Priors = dict[str, tuple[float, int]]
"""``fullname → (variance, degrees of freedom)`` of one run's log median."""


def _slowdown_fraction(gate_pct: float) -> float:
    """A gate given as a log change in % → the fraction of a slow-down (``< 1``), the
    form :func:`rlpace.bench.compare.compare_runs` takes."""
    return -math.expm1(-max(gate_pct, 0.0) / 100)


def _process_prior(spread_pct: float, runs: int) -> tuple[float, int]:
    """A run spread (std of the log median × 100) over ``runs`` runs → (variance, df)."""
    return (spread_pct / 100) ** 2, runs - 1


def noise_gate(
    changes_pct: Sequence[float],
    *,
    n_benchmarks: int,
    family_alpha: float = 0.05,
    threshold: float = 5.0,
    power: float = POWER,
    spread_pct: float | None = None,
    spread_df: int | None = None,
) -> tuple[float, float, float]:
    """Noise gate, spread and minimal detectable change of one benchmark, in percent.

    Args:
        changes_pct: the benchmark's change in each A/A comparison as a log change
            × 100 (the unit of the gate; 1.0 is about 1%); may be empty when
            ``spread_pct`` is given (the gate is then ``z × spread`` alone).
        n_benchmarks: benchmarks in the suite (Bonferroni over all of them).
        family_alpha: the chance, per PR run, of flagging anything in an A/A run.
        threshold: the comparator's effect threshold (%).
        power: detection probability the minimal detectable change is defined for.
        spread_pct: the A/A change's standard deviation when known better than from
            ``changes_pct`` (from the run spread of a large pool); NaN or None: from
            the changes.
        spread_df: degrees of freedom of ``spread_pct`` (pool runs − 1): the gate then
            uses Student's t instead of the normal quantile, since a spread estimated
            from a few runs is itself uncertain (a prediction interval for the next
            A/A change, not a confidence interval for a known sigma).

    Returns:
        ``(gate, spread, mdc)``: an A/A change exceeds ``gate`` with probability about
        ``family_alpha / n_benchmarks``; ``spread`` is the standard deviation of the
        A/A change; a true change of ``mdc`` is flagged with probability ``power``.

    Example:
        >>> [round(x, 2) for x in noise_gate([2.0, -2.0, 1.0, -1.0], n_benchmarks=10)]
        [13.61, 1.83, 15.14]
        >>> [round(x, 2) for x in noise_gate([2.0, -2.0], n_benchmarks=10, spread_pct=1.0)]
        [2.81, 1.0, 5.84]
        >>> [round(x, 2) for x in noise_gate([2.0], n_benchmarks=10, spread_pct=1.0, spread_df=7)]
        [4.03, 1.0, 5.84]
    """
    from scipy.stats import norm

    values = [c for c in changes_pct if math.isfinite(c)]
    if spread_pct is not None and math.isfinite(spread_pct):
        spread = spread_pct
    elif len(values) < 2:
        return math.nan, math.nan, math.nan
    else:
        mean = sum(values) / len(values)
        spread = math.sqrt(sum((c - mean) ** 2 for c in values) / (len(values) - 1))
        spread_df, spread_pct = len(values) - 1, spread
    level = 1 - family_alpha / (2 * max(n_benchmarks, 1))
    if (
        spread_df is not None
        and spread_df >= 1
        and spread_pct is not None
        and math.isfinite(spread_pct)
    ):
        from scipy.stats import t as student_t

        z = float(student_t.ppf(level, spread_df))
    else:
        z = float(norm.ppf(level))
    gate = max([z * spread, *(abs(c) for c in values)])
    return gate, spread, detectable_change(gate, spread, threshold=threshold, power=power)


def confirmation_gate(
    run_spread_pct: float,
    runs: int,
    *,
    repeats: int,
    family_size: int,
    family_alpha: float = 0.05,
) -> float:
    """The gate (a log change × 100) a confirmation puts on one of the benchmarks a
    first comparison flagged: ``t × run spread × √(2 / repeats)``, with Student's t on
    the pool's ``runs − 1`` degrees of freedom at level ``1 − family_alpha / (2 ×
    family_size)``.

    The first comparison shares its gates over the whole suite (Bonferroni over every
    benchmark, and never below the largest A/A change seen); the confirmation tests only
    the ``family_size`` benchmarks it flagged, on fresh runs, so it shares
    ``family_alpha`` over those alone. A null benchmark must then pass both: a whole
    run that is far off, the usual false alarm on a shared machine, does not repeat.

    Args:
        run_spread_pct: standard deviation of one run's log median across the pool (×100).
        runs: pool runs it was measured on (below 3: NaN).
        repeats: runs per side of the confirmation.
        family_size: benchmarks the confirmation tests.
        family_alpha: the chance, per confirmation, that a benchmark without a change passes.

    Example:
        >>> round(confirmation_gate(2.0, 32, repeats=2, family_size=1), 2)
        4.08
        >>> round(confirmation_gate(2.0, 32, repeats=2, family_size=10), 2)
        6.04
    """
    from scipy.stats import t as student_t

    if repeats < 1 or family_size < 1:
        raise BenchInputError(
            f"repeats and family_size: expected integers >= 1, got {repeats!r} and {family_size!r}"
        )
    if runs < 3 or not math.isfinite(run_spread_pct):
        return math.nan
    level = 1 - family_alpha / (2 * family_size)
    return float(student_t.ppf(level, runs - 1)) * run_spread_pct * math.sqrt(2 / repeats)


def _confirmation_fractions(
    spreads: Mapping[str, tuple[float, int]], repeats: int, family_size: int, family_alpha: float
) -> dict[str, float]:
    """``fullname → (run spread, runs)`` → the confirmation's gates as slow-down fractions
    (:func:`confirmation_gate`); benchmarks without a spread are left out."""
    out = {}
    for name, (spread, runs) in spreads.items():
        gate = confirmation_gate(
            spread, runs, repeats=repeats, family_size=family_size, family_alpha=family_alpha
        )
        if math.isfinite(gate):
            out[name] = _slowdown_fraction(gate)
    return out


def _confirmation_stage(
    run_spread_pct: float, runs: int, repeats: int, family_size: int, family_alpha: float
) -> tuple[float, float] | None:
    """``(gate, spread)`` of a confirmation stage for :func:`detectable_change`, None
    when the pool gives no spread."""
    gate = confirmation_gate(
        run_spread_pct, runs, repeats=repeats, family_size=family_size, family_alpha=family_alpha
    )
    if not math.isfinite(gate):
        return None
    return gate, run_spread_pct * math.sqrt(2 / repeats)


def detectable_change(
    gate_pct: float,
    spread_pct: float,
    *,
    threshold: float = 5.0,
    power: float = POWER,
    confirm: tuple[float, float] | None = None,
) -> float:
    """The smallest true change (%) flagged with probability ``power``: it must clear
    the gate and the threshold, and the A/A change scatters around it with
    ``spread_pct``, so ``max(gate, threshold) + z_power × spread``.

    With ``confirm = (gate, spread)`` of a confirmation stage, the change must clear
    both stages, on independent runs: the smallest ``d`` with
    ``Φ((d − max(g₁, threshold)) / s₁) × Φ((d − max(g₂, threshold)) / s₂) ≥ power``.

    Example:
        >>> round(detectable_change(8.0, 2.0, power=0.8), 2), round(detectable_change(8.0, 2.0, power=0.9), 2)
        (9.68, 10.56)
        >>> round(detectable_change(8.0, 2.0, power=0.9, confirm=(8.0, 2.0)), 2)
        11.26
    """
    from scipy.optimize import brentq
    from scipy.stats import norm

    if not 0 < power < 1:
        raise BenchInputError(f"power: expected a probability in (0, 1), got {power!r}")
    single = max(gate_pct, threshold) + float(norm.ppf(power)) * spread_pct
    if confirm is None:
        return single
    stages = [(max(gate_pct, threshold), spread_pct), (max(confirm[0], threshold), confirm[1])]
    if not all(math.isfinite(x) for stage in stages for x in stage):
        return math.nan

    def shortfall(d: float) -> float:
        passed = 1.0
        for floor, spread in stages:
            passed *= float(norm.cdf((d - floor) / spread)) if spread > 0 else float(d >= floor)
        return passed - power

    low = max(floor for floor, _ in stages)
    high = low + 10 * max(spread for _, spread in stages) + 1e-9
    return float(brentq(shortfall, low, high)) if shortfall(low) < 0 else low


@dataclass(frozen=True)
class CalibrationConfig:
    """What ``rlpace-bench aa`` runs.

    Example:
        >>> CalibrationConfig(runs=5, repeats=2).effective_pool
        20
    """

    runs: int = 10
    """A/A comparisons to form (N)."""
    repeats: int = 4
    """Suite runs per side of one comparison (K, as in ``pr``)."""
    pool: int | None = None
    """Suite runs to execute; default ``2 × repeats × runs`` (every comparison has runs
    of its own). A smaller pool reuses runs across comparisons (cheaper, less independent)."""
    set_name: str = "cpu"
    """The benchmark set."""
    keyword: str | None = None
    """pytest ``-k`` expression choosing cases."""
    threshold: float = 5.0
    """The comparator's effect threshold, in percent."""
    alpha: float = 0.05
    """The comparator's false-discovery rate."""
    family_alpha: float = 0.05
    """Target chance that an A/A PR run flags anything (sets the noise gates)."""
    inject: str | None = None
    """An ``RLPACE_BENCH_SLOWDOWN`` spec for the detection-power runs, e.g. ``'test_=0.1'``."""
    out_dir: Path = Path("reports/aa")
    """Where ``<set>.json`` and ``<set>.md`` go."""
    repo: Path = Path(".")
    """The repository whose suite runs."""
    settings: Any = None
    """:class:`~rlpace.bench.runner.RunSettings`; default ones when None."""
    seed: int = 0
    """Seed of the random assignment of pool runs to comparisons."""
    reuse_runs: bool = False
    """Recompute the figures from the pool files of an earlier run instead of running."""
    slow_pool: int | None = None
    """Slowed suite runs (with ``inject``); default ``repeats × runs``. Each detection
    comparison draws ``repeats`` of them (``repeats + confirm`` with a confirmation),
    so fewer than that are reused."""
    confirm: int = 2
    """Runs per side of the confirmation stage, as ``pr --confirm`` (0: none). Each
    comparison that flags something is confirmed on other pool runs than its own,
    which its held-out calibration does not see either."""

    def __post_init__(self) -> None:
        if self.runs < 1 or self.repeats < 1:
            raise BenchInputError(
                f"--runs and --repeats: expected integers >= 1, got {self.runs} and {self.repeats}"
            )
        if not (isinstance(self.family_alpha, int | float) and 0 < self.family_alpha < 1):
            raise BenchInputError(
                f"--family-alpha: expected a probability in (0, 1) (0.05 = one A/A run in "
                f"20 may flag something), got {self.family_alpha!r}"
            )
        if not (isinstance(self.confirm, int) and self.confirm >= 0):
            raise BenchInputError(
                f"--confirm: expected the confirmation's runs per side, an integer >= 0 "
                f"(0: no confirmation), got {self.confirm!r}"
            )
        side = self.repeats + self.confirm
        if self.slow_pool is not None and self.slow_pool < side:
            raise BenchInputError(
                f"--slow-pool: expected at least repeats + confirm = {side} runs (one "
                f"side's worth, confirmation included), got {self.slow_pool}. Fix: a "
                "larger --slow-pool or --confirm 0"
            )
        if self.pool is not None and self.pool < 2 * side:
            raise BenchInputError(
                f"--pool: expected at least 2 x (repeats + confirm) = {2 * side} runs (one "
                f"comparison's worth, confirmation included), got {self.pool}. Fix: a "
                "larger --pool or --confirm 0"
            )
        if self.inject is not None:
            from rlpace.bench.suite import parse_slowdown

            try:
                if not parse_slowdown(self.inject):
                    raise ValueError(f"--inject: expected PATTERN=FRACTION, got {self.inject!r}")
            except ValueError as exc:
                raise BenchInputError(str(exc)) from None

    @property
    def effective_pool(self) -> int:
        """Suite runs of the clean pool."""
        return self.pool if self.pool is not None else 2 * self.repeats * self.runs

    @property
    def effective_slow_pool(self) -> int:
        """Suite runs of the slowed pool (0 without ``inject``)."""
        if not self.inject:
            return 0
        return self.slow_pool if self.slow_pool is not None else self.repeats * self.runs


@dataclass(frozen=True)
class BenchmarkNoise:
    """The A/A figures of one benchmark.

    Example:
        >>> BenchmarkNoise("t.py::a", 2, (1.0, -1.0), 0, 1.4, 3.0, 6.2, 2.5).noise_fraction
        0.029554
    """

    fullname: str
    comparisons: int
    """A/A comparisons where this benchmark had a finite change."""
    changes_pct: tuple[float, ...]
    """The A/A change (median, %, positive = faster) of each comparison."""
    flagged: int
    """A/A comparisons that flagged it (improved or worsened) without calibrated noise."""
    spread_pct: float
    """Standard deviation of the A/A change with ``repeats`` runs a side."""
    gate_pct: float
    """Calibrated noise: the change a PR must exceed to be flagged."""
    mdc_pct: float
    """Minimal detectable change at 80% power, given the gate and threshold."""
    comparator_mdc_pct: float
    """The comparator's own minimal detectable change (median over comparisons)."""
    injected: float = 0.0
    """Injected slowdown fraction for the detection runs (0 when none)."""
    detected: float | None = None
    """Fraction of clean-vs-slowed comparisons flagging it worsened, calibrated noise on
    (held out like the A/A figure: each judged by a calibration without its clean runs,
    when there are three or more comparisons)."""
    detected_raw: float | None = None
    """The same without calibrated noise."""
    run_spread_pct: float = math.nan
    """Standard deviation of one run's log median across the pool (×100): the
    process-to-process noise (NaN with fewer than three runs)."""
    runs: int = 0
    """Clean pool runs that measured this benchmark."""
    achieved_pct: float = math.nan
    """The slow-down the injection really caused, in % of time (slower = positive): the
    median of the slowed runs' medians against the median of the clean runs' medians.
    It can differ from ``injected``: a call of a microsecond cannot be slowed by less
    than the injector's own clock readings, and noise moves it either way."""
    promised: int = 0
    """Clean-vs-slowed comparisons whose (held-out) calibration promised to catch the
    achieved slow-down at :data:`DETECTION_POWER`: its minimal detectable change at that
    power was at most the achieved slow-down (both as log changes)."""
    promised_detected: int = 0
    """Of those, the comparisons that flagged it worsened."""

    @property
    def noise_fraction(self) -> float:
        """The gate for :func:`rlpace.bench.compare.compare_runs`: the fraction of a
        slow-down, ``1 − exp(−gate / 100)`` (the gate is a log change in %, as the run
        spreads are), so it stays below 1 for any gate and a speed-up gets the same log
        change; 1 (nothing can be flagged) when the gate is unknown."""
        if not math.isfinite(self.gate_pct):
            return 1.0
        return round(_slowdown_fraction(self.gate_pct), 6)


@dataclass(frozen=True)
class DetectionPower:
    """Whether the calibration keeps its promise of power: over the clean-vs-slowed
    comparisons whose calibration (held out from the comparison's clean runs) had a
    minimal detectable change at ``power`` no larger than the slow-down the benchmark
    really got (:attr:`BenchmarkNoise.achieved_pct`), the share that flagged it. A
    calibration that tells the truth flags at least a ``power`` share.

    Example:
        >>> d = DetectionPower(0.9, (("a", 9.0, 11.0, 16, 16), ("b", 10.0, 12.0, 12, 16)))
        >>> d.hits, d.trials, d.rate
        (28, 32, 0.875)
    """

    power: float
    """The power the promise is made at."""
    rows: tuple[tuple[str, float, float, int, int], ...]
    """Per benchmark with a promise: ``(fullname, minimal detectable change at power
    in the final calibration %, achieved %, comparisons that flagged it, comparisons
    promised)``."""

    @property
    def hits(self) -> int:
        """Promised comparisons, over all benchmarks, that flagged the slow-down."""
        return sum(row[3] for row in self.rows)

    @property
    def trials(self) -> int:
        """Promised comparisons over all benchmarks."""
        return sum(row[4] for row in self.rows)

    @property
    def rate(self) -> float:
        """Pooled detection rate, NaN without a promise."""
        return self.hits / self.trials if self.trials else math.nan


@dataclass(frozen=True)
class Calibration:
    """An A/A calibration of one set on one machine.

    Example:
        >>> cal = Calibration("cpu", 4, 2, 16, 5.0, 0.05, 0.05, 0.25, 0.0, ())
        >>> cal.to_dict()["format"]
        'rlpace-bench-calibration'
    """

    set_name: str
    runs: int
    repeats: int
    pool: int
    threshold: float
    alpha: float
    family_alpha: float
    false_alarm_rate: float
    """Fraction of A/A comparisons flagging anything, comparator alone."""
    false_alarm_rate_calibrated: float
    """The same with calibrated noise (held out: each judged by the others' noise)."""
    benchmarks: tuple[BenchmarkNoise, ...]
    bare_threshold_rate: float = math.nan
    """The seed bot's rule, ops change beyond ±threshold: fraction of A/A comparisons
    where it flags anything."""
    bare_threshold_share: float = math.nan
    """The seed bot's rule: mean share of benchmarks it flags per A/A comparison."""
    inject: str | None = None
    environment: Mapping[str, Any] = field(default_factory=dict)
    draws: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...] = ()
    """Per A/A comparison, the clean-pool runs of side A and side B (``clean-<i>.json``)."""
    runs_dir: str = ""
    """Where the pool's result files are (``clean-<i>.json``, ``slow-<i>.json``)."""
    slow_pool: int = 0
    """Slowed runs in the detection pool (0 without ``inject``)."""
    created: str = ""
    """When the pool's first run started (ISO 8601), empty when unknown."""
    confirm: int = 0
    """Runs per side of the confirmation stage the comparisons were judged with (0:
    none; calibrations written before confirmations record none)."""
    false_alarm_rate_first: float = math.nan
    """The held-out false-alarm rate before confirmation (NaN without one)."""
    confirm_draws: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...] = ()
    """Per A/A comparison, the clean-pool runs of its confirmation, side A and side B."""

    def noise_fractions(self, repeats: int | None = None) -> dict[str, float]:
        """``fullname → gate`` as fractions, the ``noise`` argument of ``compare_runs``.

        Args:
            repeats: runs per side of the comparison these gates will judge; the gates
                were calibrated for :attr:`repeats` and scale as ``√(repeats_cal /
                repeats)`` (the spread of a mean of runs). None: as calibrated.

        Example:
            >>> b = BenchmarkNoise("a", 2, (1.0, -1.0), 0, 1.0, 4.0, 7.0, 2.0)
            >>> cal = Calibration("cpu", 2, 2, 8, 5.0, 0.05, 0.05, 0.0, 0.0, (b,))
            >>> cal.noise_fractions(), cal.noise_fractions(repeats=8)
            ({'a': 0.039211}, {'a': 0.019802})
        """
        if repeats is None or repeats == self.repeats:
            return {b.fullname: b.noise_fraction for b in self.benchmarks}
        if repeats < 1:
            raise BenchInputError(f"repeats: expected an integer >= 1, got {repeats!r}")
        scale = math.sqrt(self.repeats / repeats)

        def scaled(fraction: float) -> float:
            if fraction >= 1:
                return 1.0
            return round(-math.expm1(math.log1p(-fraction) * scale), 6)

        return {b.fullname: scaled(b.noise_fraction) for b in self.benchmarks}

    def confirmation_fractions(self, repeats: int, family_size: int) -> dict[str, float]:
        """``fullname → gate`` (fractions, as :meth:`noise_fractions`) for a confirmation
        of ``family_size`` flagged benchmarks with ``repeats`` fresh runs a side
        (:func:`confirmation_gate`); benchmarks without a pool spread are left out.

        Example:
            >>> b = BenchmarkNoise("a", 2, (1.0,), 0, 2.0, 8.0, 12.0, 2.0, run_spread_pct=2.0, runs=32)
            >>> cal = Calibration("cpu", 2, 2, 32, 5.0, 0.05, 0.05, 0.0, 0.0, (b,))
            >>> cal.confirmation_fractions(repeats=2, family_size=1)
            {'a': 0.03997}
        """
        spreads = {b.fullname: (b.run_spread_pct, b.runs) for b in self.benchmarks}
        fractions = _confirmation_fractions(spreads, repeats, family_size, self.family_alpha)
        out = {n: round(f, 6) for n, f in fractions.items()}
        return out

    def process_priors(self) -> dict[str, tuple[float, float]]:
        """``fullname → (variance, degrees of freedom)`` of one run's log median, from the
        pool's run spreads: the ``process_priors`` of
        :func:`rlpace.bench.compare.compare_runs` (benchmarks with fewer than three pool
        runs are left out).

        Example:
            >>> b = BenchmarkNoise("a", 2, (1.0,), 0, 2.0, 8.0, 12.0, 2.0, run_spread_pct=2.0, runs=12)
            >>> Calibration("cpu", 2, 2, 12, 5.0, 0.05, 0.05, 0.0, 0.0, (b,)).process_priors()
            {'a': (0.0004, 11)}
        """
        return {
            b.fullname: _process_prior(b.run_spread_pct, b.runs)
            for b in self.benchmarks
            if math.isfinite(b.run_spread_pct) and b.runs >= 3
        }

    @property
    def held_out_alarms(self) -> int:
        """A/A comparisons that flagged anything with calibrated noise (held out)."""
        if not math.isfinite(self.false_alarm_rate_calibrated):
            return 0
        return round(self.false_alarm_rate_calibrated * self.runs)

    def false_alarm_bound(self, confidence: float = 0.95) -> float:
        """Upper bound of the held-out false-alarm rate at ``confidence``
        (:func:`rlpace.bench.stats.binomial_upper_bound` over :attr:`runs` comparisons;
        comparisons that share pool runs are not independent, so it is a guide, not a
        guarantee). NaN when the held-out rate was not measured.

        Example:
            >>> cal = Calibration("cpu", 16, 2, 16, 5.0, 0.05, 0.05, 0.0, 1 / 16, ())
            >>> cal.held_out_alarms, round(cal.false_alarm_bound(), 3)
            (1, 0.264)
        """
        from rlpace.bench.stats import binomial_upper_bound

        if not math.isfinite(self.false_alarm_rate_calibrated):
            return math.nan
        return binomial_upper_bound(self.held_out_alarms, self.runs, confidence)

    def detection_power(self) -> DetectionPower:
        """Whether the injected slow-down was caught where the calibration promised it
        at :data:`DETECTION_POWER` (see :class:`DetectionPower`); empty without one.

        Files written before the per-comparison promise was recorded fall back to the
        final calibration's promise and each benchmark's detection rate.

        Example:
            >>> b = BenchmarkNoise("a", 4, (1.0,), 0, 1.0, 4.0, 7.0, 2.0, injected=0.1,
            ...                    detected=0.75, achieved_pct=10.0, promised=4,
            ...                    promised_detected=3)
            >>> cal = Calibration("cpu", 4, 2, 8, 5.0, 0.05, 0.05, 0.0, 0.0, (b,), slow_pool=2)
            >>> d = cal.detection_power()
            >>> [(n, round(m, 2), h, t) for n, m, _, h, t in d.rows], d.rate
            ([('a', 6.28, 3, 4)], 0.75)
        """
        legacy = not any(b.promised for b in self.benchmarks)
        rows = []
        for b in self.benchmarks:
            if not (b.injected and b.detected is not None and math.isfinite(b.achieved_pct)):
                continue
            mdc = self.detectable(b, DETECTION_POWER)
            if b.promised:
                rows.append((b.fullname, mdc, b.achieved_pct, b.promised_detected, b.promised))
            elif legacy and math.isfinite(mdc) and mdc <= _time_to_log_pct(b.achieved_pct):
                trials = len(self.draws) if self.draws else self.runs
                hits = round(b.detected * trials)
                rows.append((b.fullname, mdc, b.achieved_pct, hits, trials))
        return DetectionPower(DETECTION_POWER, tuple(rows))

    def detectable(self, bench: BenchmarkNoise, power: float = DETECTION_POWER) -> float:
        """The smallest change of ``bench`` flagged with probability ``power`` by ``pr``
        judging as this calibration did: the first stage's gate, and with
        :attr:`confirm` the confirmation's too (shared, at worst, over every benchmark
        of the set), see :func:`detectable_change`.

        Example:
            >>> b = BenchmarkNoise("a", 2, (1.0,), 0, 2.0, 8.0, 12.0, 2.0, run_spread_pct=2.0, runs=32)
            >>> cal = Calibration("cpu", 2, 2, 32, 5.0, 0.05, 0.05, 0.0, 0.0, (b,))
            >>> round(cal.detectable(b), 2), round(replace(cal, confirm=2).detectable(b), 2)
            (10.56, 10.59)
        """
        second = None
        if self.confirm:
            second = _confirmation_stage(
                bench.run_spread_pct,
                bench.runs,
                self.confirm,
                len(self.benchmarks),
                self.family_alpha,
            )
        return detectable_change(
            bench.gate_pct, bench.spread_pct, threshold=self.threshold, power=power, confirm=second
        )

    def to_dict(self) -> dict[str, Any]:
        """The versioned JSON form (NaN becomes None)."""
        data = asdict(self)
        data["benchmarks"] = [
            {**asdict(b), "noise_fraction": b.noise_fraction} for b in self.benchmarks
        ]
        return {"format": CALIBRATION_FORMAT, "version": CALIBRATION_VERSION, **_finite(data)}


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def read_calibration(path: Path) -> Calibration:
    """Read a calibration file written by ``rlpace-bench aa``.

    Raises:
        BenchInputError: the file is missing, not a calibration, or of another version.

    Example:
        >>> read_calibration(Path("missing.json"))
        Traceback (most recent call last):
        ...
        rlpace.bench.errors.BenchInputError: missing.json: expected a calibration file from `rlpace-bench aa`, found no file. Fix: run `rlpace-bench aa` or drop --noise
    """
    if not path.is_file():
        raise BenchInputError(
            f"{path}: expected a calibration file from `rlpace-bench aa`, found no file. "
            "Fix: run `rlpace-bench aa` or drop --noise"
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise BenchInputError(f"{path}: expected JSON, got a parse error: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != CALIBRATION_FORMAT:
        raise BenchInputError(
            f"{path}: expected format {CALIBRATION_FORMAT!r}, got "
            f"{data.get('format') if isinstance(data, dict) else type(data).__name__!r}. "
            "Fix: pass a file written by `rlpace-bench aa`"
        )
    if data.get("version") not in READABLE_VERSIONS:
        raise BenchInputError(
            f"{path}: calibration version {data.get('version')!r}, this rlpace reads versions "
            f"{list(READABLE_VERSIONS)}. Fix: rerun `rlpace-bench aa` to recalibrate"
        )

    def num(x: Any) -> float:
        return math.nan if x is None else float(x)

    benchmarks = tuple(
        BenchmarkNoise(
            fullname=b["fullname"],
            comparisons=int(b["comparisons"]),
            changes_pct=tuple(num(c) for c in b["changes_pct"]),
            flagged=int(b["flagged"]),
            spread_pct=num(b["spread_pct"]),
            gate_pct=num(b["gate_pct"]),
            mdc_pct=num(b["mdc_pct"]),
            comparator_mdc_pct=num(b["comparator_mdc_pct"]),
            injected=float(b.get("injected") or 0.0),
            detected=b.get("detected"),
            detected_raw=b.get("detected_raw"),
            run_spread_pct=num(b.get("run_spread_pct")),
            runs=int(b.get("runs") or 0),
            achieved_pct=num(b.get("achieved_pct")),
            promised=int(b.get("promised") or 0),
            promised_detected=int(b.get("promised_detected") or 0),
        )
        for b in data["benchmarks"]
    )
    return Calibration(
        set_name=data["set_name"],
        runs=int(data["runs"]),
        repeats=int(data["repeats"]),
        pool=int(data["pool"]),
        threshold=float(data["threshold"]),
        alpha=float(data["alpha"]),
        family_alpha=float(data["family_alpha"]),
        false_alarm_rate=float(data["false_alarm_rate"]),
        false_alarm_rate_calibrated=float(data["false_alarm_rate_calibrated"]),
        benchmarks=benchmarks,
        bare_threshold_rate=num(data.get("bare_threshold_rate")),
        bare_threshold_share=num(data.get("bare_threshold_share")),
        inject=data.get("inject"),
        environment=data.get("environment") or {},
        draws=tuple((tuple(a), tuple(b)) for a, b in data.get("draws", [])),
        runs_dir=data.get("runs_dir", ""),
        slow_pool=int(data.get("slow_pool") or 0),
        created=str(data.get("created") or ""),
        confirm=int(data.get("confirm") or 0),
        false_alarm_rate_first=num(data.get("false_alarm_rate_first")),
        confirm_draws=tuple((tuple(a), tuple(b)) for a, b in data.get("confirm_draws", [])),
    )


def _draws(
    pool: int, runs: int, repeats: int, rng: random.Random
) -> list[tuple[list[int], list[int]]]:
    """For each comparison, the pool indices of side A and side B (disjoint within one)."""
    draws = []
    order: list[int] = []
    for _ in range(runs):
        if len(order) < 2 * repeats:
            order = list(range(pool))
            rng.shuffle(order)
        picked, order = order[: 2 * repeats], order[2 * repeats :]
        draws.append((sorted(picked[:repeats]), sorted(picked[repeats:])))
    return draws


def run_calibration(
    config: CalibrationConfig, *, on_run: Callable[[int, int], None] | None = None
) -> Calibration:
    """Run the A/A pools, form the comparisons and compute the figures; write the files.

    Args:
        config: what to run.
        on_run: called as ``(done, total)`` after each suite run (progress).

    Returns:
        The calibration (also written to ``<out_dir>/<set>.json`` and ``<set>.md``).

    Example:
        >>> cal = run_calibration(CalibrationConfig(runs=10, repeats=2))  # doctest: +SKIP
        >>> cal.false_alarm_rate_calibrated  # doctest: +SKIP
        0.0
    """
    from rlpace.bench.pipeline import extra_environ, repository_root, suite_present
    from rlpace.bench.results import load_results
    from rlpace.bench.runner import RunSettings, run
    from rlpace.bench.suite import SLOWDOWN_ENV

    repo = repository_root(config.repo)
    if not suite_present(repo):
        raise BenchInputError(f"expected a benchmark suite under {repo}, found none")
    settings = config.settings or RunSettings()
    runs_dir = repo / "build" / "rlpace-bench" / "aa" / config.set_name
    runs_dir.mkdir(parents=True, exist_ok=True)
    if not config.reuse_runs:
        for stale in runs_dir.glob("*.json"):
            stale.unlink()
    clean_n = config.effective_pool
    slow_n = config.effective_slow_pool
    # interleave clean and slowed runs (ABBA) so drift hits both pools alike
    schedule: list[tuple[str, int]] = []
    for i in range(max(clean_n, slow_n)):
        pair = [("clean", i), ("slow", i)] if i % 2 == 0 else [("slow", i), ("clean", i)]
        schedule += [(kind, j) for kind, j in pair if j < (clean_n if kind == "clean" else slow_n)]
    frames: dict[str, list[Any]] = {"clean": [None] * clean_n, "slow": [None] * slow_n}
    for done, (kind, j) in enumerate(schedule, start=1):
        output = runs_dir / f"{kind}-{j}.json"
        if config.reuse_runs:
            if not output.is_file():
                raise BenchInputError(
                    f"--reuse-runs: expected the earlier run {output}, found none. Fix: run "
                    "`rlpace-bench aa` with the same --runs/--repeats/--pool/--inject first"
                )
            frames[kind][j] = load_results(output)
            continue
        env = {SLOWDOWN_ENV: config.inject or ""} if kind == "slow" else {SLOWDOWN_ENV: ""}
        for _attempt in range(2):  # one retry: a long pool should survive one stray failure
            with extra_environ(env):
                outcome = run(
                    set_name=config.set_name,
                    output=output,
                    keyword=config.keyword,
                    settings=settings,
                    root=repo,
                    python=sys.executable,
                    quiet=True,
                )
            if output.is_file() and outcome.benchmarks > 0:
                break
        if not output.is_file() or outcome.benchmarks == 0:
            raise BenchInputError(
                f"A/A run {done} of set {config.set_name!r} timed nothing (pytest exit "
                f"{outcome.returncode}); expected results to calibrate. Fix: check "
                f"`rlpace-bench run --set {config.set_name}` runs here"
            )
        frames[kind][j] = load_results(output)
        if on_run is not None:
            on_run(done, len(schedule))

    first = frames["clean"][0].attrs  # the pool's first run: its machine and start
    calibration = analyse_pool(
        config,
        frames["clean"],
        frames["slow"],
        environment=machine_environment(first.get("machine_info") or {}),
    )
    calibration = replace(
        calibration, runs_dir=str(runs_dir), created=str(first.get("datetime") or "")
    )
    write_calibration(
        calibration, config.out_dir if config.out_dir.is_absolute() else repo / config.out_dir
    )
    return calibration


def run_spreads(frames: Sequence[Any]) -> dict[str, tuple[float, int]]:
    """Per benchmark, the spread of one run's log median across ``frames`` (×100) and
    how many runs measured it (each frame is one run's results table).

    Example:
        >>> from rlpace.bench.results import results_from_records
        >>> runs = [results_from_records([{"fullname": "a", "data": [m] * 3}]) for m in (1.0, 1.1, 0.9)]
        >>> spread, n = run_spreads(runs)["a"]
        >>> round(spread, 2), n
        (10.04, 3)
    """
    medians: dict[str, list[float]] = {}
    for frame in frames:
        for name, median, status in zip(frame["fullname"], frame["median"], frame["status"]):
            if status == "ok" and math.isfinite(median) and median > 0:
                medians.setdefault(name, []).append(math.log(median))
    out = {}
    for name, logs in medians.items():
        if len(logs) < 3:
            out[name] = (math.nan, len(logs))
            continue
        mean = sum(logs) / len(logs)
        var = sum((x - mean) ** 2 for x in logs) / (len(logs) - 1)
        out[name] = (math.sqrt(var) * 100, len(logs))
    return out


def analyse_pool(
    config: CalibrationConfig,
    clean: Sequence[Any],
    slow: Sequence[Any] = (),
    *,
    environment: Mapping[str, Any] | None = None,
) -> Calibration:
    """The calibration figures from the pool's results tables (no running).

    Args:
        config: the calibration settings (``runs``, ``repeats``, ``seed``, threshold...).
        clean: one results table per clean run (:func:`rlpace.bench.results.load_results`).
        slow: one per slowed run (``inject``), may be empty.
        environment: recorded in the calibration.

    Example:
        >>> from rlpace.bench.results import results_from_records
        >>> pool = [results_from_records([{"fullname": "a", "data": [1 + i / 100] * 5}])
        ...         for i in range(4)]
        >>> cal = analyse_pool(CalibrationConfig(runs=2, repeats=1, pool=4, confirm=1), pool)
        >>> cal.benchmarks[0].runs, round(cal.benchmarks[0].run_spread_pct, 2)
        (4, 1.27)
    """
    from rlpace.bench.compare import Verdict
    from rlpace.bench.pipeline import judge_confirmation, judge_runs
    from rlpace.bench.results import merge_runs
    from rlpace.bench.suite import slowdown_for

    clean_n, slow_n = len(clean), len(slow)
    confirm = config.confirm
    side_runs = config.repeats + confirm
    if clean_n < 2 * side_runs or (slow_n and slow_n < side_runs):
        raise BenchInputError(
            f"expected at least {2 * side_runs} clean and {side_runs} slowed pool runs for "
            f"{config.repeats} runs a side and a confirmation of {confirm}, got {clean_n} "
            f"and {slow_n}. Fix: a larger pool or a smaller confirm"
        )
    rng = random.Random(config.seed)
    draws = _draws(clean_n, config.runs, config.repeats, rng)
    slow_draws = [rng.sample(range(slow_n), side_runs) for _ in draws] if slow_n else []
    # a confirmation runs other processes than the comparison it confirms: pool runs
    # outside the draw (a stream of their own, so the draws do not depend on it)
    confirm_rng = random.Random(config.seed + 1)
    confirm_draws: list[tuple[list[int], list[int]]] = []
    for a, b in draws:
        if not confirm:
            confirm_draws.append(([], []))
            continue
        rest = [i for i in range(clean_n) if i not in set(a) | set(b)]
        picked = confirm_rng.sample(rest, 2 * confirm)
        confirm_draws.append((sorted(picked[:confirm]), sorted(picked[confirm:])))
    merged: dict[tuple[str, tuple[int, ...]], Any] = {}

    def side(kind: str, idx: list[int]) -> Any:
        key = (kind, tuple(idx))
        if key not in merged:
            merged[key] = merge_runs([(clean if kind == "clean" else slow)[i] for i in idx])
        return merged[key]

    def compare(
        a: Any, b: Any, noise: Mapping[str, float] | None = None, priors: Any = None
    ) -> Any:
        return judge_runs(
            b, a, threshold=config.threshold, alpha=config.alpha, noise=noise, process_priors=priors
        )

    def confirmed(
        first: Any,
        a: tuple[str, list[int]],
        b: tuple[str, list[int]],
        spreads: Mapping[str, tuple[float, int]],
        priors: Any,
    ) -> Any:
        """``first`` after its confirmation on the pool runs ``a`` (base) against ``b``
        (head), each ``(kind, indices)``, judged as ``pr`` judges it with a calibration
        of these spreads."""
        if not confirm or not any(r.verdict in flagged_kinds for r in first.rows):
            return first
        tested = sum(r.verdict in flagged_kinds for r in first.rows)
        noise = _confirmation_fractions(spreads, confirm, max(tested, 1), config.family_alpha)
        return judge_confirmation(
            first,
            side(*b),
            side(*a),
            repeats=confirm,
            threshold=config.threshold,
            alpha=config.alpha,
            noise=noise,
            process_priors=priors,
        )

    flagged_kinds = (Verdict.WORSENED, Verdict.IMPROVED)
    aa = [compare(side("clean", a), side("clean", b)) for a, b in draws]
    names = [r.fullname for r in aa[0].rows]
    changes: dict[str, list[float]] = {n: [] for n in names}
    comp_mdc: dict[str, list[float]] = {n: [] for n in names}
    flagged: dict[str, int] = dict.fromkeys(names, 0)
    for comparison in aa:
        for row in comparison.rows:
            if row.fullname not in changes:
                continue
            changes[row.fullname].append(row.median_change_pct)
            comp_mdc[row.fullname].append(row.mdc_pct)
            flagged[row.fullname] += row.verdict in flagged_kinds
    false_alarms = sum(any(r.verdict in flagged_kinds for r in c.rows) for c in aa) / len(aa)
    bare = [sum(c.threshold_counts()) for c in aa]
    bare_rate = sum(n > 0 for n in bare) / len(aa)
    bare_share = sum(n / max(len(c.rows), 1) for n, c in zip(bare, aa)) / len(aa)
    per_side = math.sqrt(2 / config.repeats)  # a mean of `repeats` runs, one per side

    def used(i: int) -> set[int]:
        """The clean pool runs comparison ``i`` and its confirmation use."""
        return {*draws[i][0], *draws[i][1], *confirm_draws[i][0], *confirm_draws[i][1]}

    def spreads_without(exclude: int | None) -> dict[str, tuple[float, int]]:
        held = set() if exclude is None else used(exclude)
        return run_spreads([f for i, f in enumerate(clean) if i not in held])

    def priors(spreads: Mapping[str, tuple[float, int]]) -> dict[str, tuple[float, int]]:
        return {n: _process_prior(sp, k) for n, (sp, k) in spreads.items() if math.isfinite(sp)}

    def gates(
        spreads: Mapping[str, tuple[float, int]], exclude: set[int] = frozenset()
    ) -> dict[str, tuple[float, float, float]]:
        return {
            n: noise_gate(
                [_log_pct(c) for i, c in enumerate(changes[n]) if i not in exclude],
                n_benchmarks=len(names),
                family_alpha=config.family_alpha,
                threshold=config.threshold,
                spread_pct=spreads.get(n, (math.nan, 0))[0] * per_side,
                spread_df=spreads.get(n, (math.nan, 0))[1] - 1,
            )
            for n in names
        }

    def as_noise(g: Mapping[str, tuple[float, float, float]]) -> dict[str, float]:
        return {n: _slowdown_fraction(v[0]) for n, v in g.items() if math.isfinite(v[0])}

    # each comparison is judged by a calibration without its own clean runs (the held
    # out one), so neither figure is flattered by fitting the data it judges
    held_out = held_out_first = 0
    # per comparison, the gates, process priors and run spreads that judge it (None:
    # the final ones)
    held: list[tuple[_Gates, _Priors, dict[str, tuple[float, int]]] | None] = []
    for i, (a, b) in enumerate(draws):
        if config.runs < 3:
            held.append(None)
            continue
        held_spreads = spreads_without(i)
        # the gate's "largest change seen" must not see this comparison's runs either
        sharing = _sharing(draws, i, used(i))
        held.append((gates(held_spreads, sharing), priors(held_spreads), held_spreads))
        judged = compare(side("clean", a), side("clean", b), as_noise(held[i][0]), held[i][1])
        held_out_first += any(r.verdict in flagged_kinds for r in judged.rows)
        ca, cb = confirm_draws[i]
        judged = confirmed(judged, ("clean", ca), ("clean", cb), held_spreads, held[i][1])
        held_out += any(r.verdict in flagged_kinds for r in judged.rows)
    false_alarms_calibrated = held_out / len(draws) if config.runs >= 3 else math.nan
    false_alarms_first = held_out_first / len(draws) if config.runs >= 3 and confirm else math.nan
    spreads = run_spreads(clean)
    final = gates(spreads)

    injected = {n: slowdown_for(n.rsplit("::", 1)[-1], config.inject or "") for n in names}
    achieved = _achieved_slowdowns(clean, slow) if slow_n else {}
    got = {n: _time_to_log_pct(achieved[n]) for n in achieved if injected[n]}

    def promising(
        gates_used: Mapping[str, tuple[float, float, float]],
        spreads_used: Mapping[str, tuple[float, int]],
    ) -> set[str]:
        """The benchmarks these gates promise to catch at DETECTION_POWER: the minimal
        detectable change at that power, of both stages with a confirmation (its gate
        shared, at worst, over every benchmark), at most the slow-down they really got."""
        out = set()
        for n, g in got.items():
            if n not in gates_used:
                continue
            second = None
            if confirm:
                sp, k = spreads_used.get(n, (math.nan, 0))
                second = _confirmation_stage(sp, k, confirm, len(names), config.family_alpha)
                if second is None:
                    continue
            mdc = detectable_change(
                gates_used[n][0],
                gates_used[n][1],
                threshold=config.threshold,
                power=DETECTION_POWER,
                confirm=second,
            )
            if mdc <= g:
                out.add(n)
        return out

    detected: dict[str, list[bool]] = {n: [] for n in names}
    detected_raw: dict[str, list[bool]] = {n: [] for n in names}
    # the comparisons whose calibration promised to catch the slow-down, and whether
    # they did
    promised: dict[str, list[bool]] = {n: [] for n in names}
    final_judge = (final, priors(spreads), spreads)
    for i, ((a, _), slowed) in enumerate(zip(draws, slow_draws)):
        judging, judging_priors, judging_spreads = held[i] or final_judge
        first_slow, confirm_slow = (
            sorted(slowed[: config.repeats]),
            sorted(slowed[config.repeats :]),
        )
        result = compare(
            side("clean", a), side("slow", first_slow), as_noise(judging), judging_priors
        )
        result = confirmed(
            result,
            ("clean", confirm_draws[i][0]),
            ("slow", confirm_slow),
            judging_spreads,
            judging_priors,
        )
        kept = promising(judging, judging_spreads)
        for row in result.rows:
            if row.fullname in detected:
                detected[row.fullname].append(row.verdict is Verdict.WORSENED)
            if row.fullname in kept:
                promised[row.fullname].append(row.verdict is Verdict.WORSENED)
        for row in compare(side("clean", a), side("slow", first_slow)).rows:
            if row.fullname in detected_raw:
                detected_raw[row.fullname].append(row.verdict is Verdict.WORSENED)

    benchmarks = []
    for n in names:
        gate, spread, mdc = final[n]
        finite = [c for c in comp_mdc[n] if math.isfinite(c)]
        benchmarks.append(
            BenchmarkNoise(
                fullname=n,
                comparisons=sum(math.isfinite(c) for c in changes[n]),
                changes_pct=tuple(round(c, 4) for c in changes[n]),
                flagged=flagged[n],
                spread_pct=spread,
                gate_pct=gate,
                mdc_pct=mdc,
                comparator_mdc_pct=sorted(finite)[len(finite) // 2] if finite else math.nan,
                injected=injected[n],
                detected=_rate(detected[n]) if slow_n else None,
                detected_raw=_rate(detected_raw[n]) if slow_n else None,
                run_spread_pct=spreads.get(n, (math.nan, 0))[0],
                runs=spreads.get(n, (math.nan, 0))[1],
                achieved_pct=achieved.get(n, math.nan),
                promised=len(promised[n]),
                promised_detected=sum(promised[n]),
            )
        )
    return Calibration(
        set_name=config.set_name,
        runs=config.runs,
        repeats=config.repeats,
        pool=clean_n,
        threshold=config.threshold,
        alpha=config.alpha,
        family_alpha=config.family_alpha,
        false_alarm_rate=false_alarms,
        false_alarm_rate_calibrated=false_alarms_calibrated,
        benchmarks=tuple(benchmarks),
        bare_threshold_rate=bare_rate,
        bare_threshold_share=bare_share,
        inject=config.inject,
        environment=dict(environment or {}),
        draws=tuple((tuple(a), tuple(b)) for a, b in draws),
        slow_pool=slow_n,
        confirm=confirm,
        false_alarm_rate_first=false_alarms_first,
        confirm_draws=tuple((tuple(a), tuple(b)) for a, b in confirm_draws) if confirm else (),
    )


def _sharing(
    draws: Sequence[tuple[Sequence[int], Sequence[int]]], i: int, runs: set[int] | None = None
) -> set[int]:
    """The comparisons that use any pool run of comparison ``i`` (``i`` included), or
    any of ``runs`` when given (the comparison's and its confirmation's).

    Example:
        >>> sorted(_sharing([((0,), (1,)), ((2,), (3,)), ((1,), (4,))], 0))
        [0, 2]
        >>> sorted(_sharing([((0,), (1,)), ((2,), (3,)), ((1,), (4,))], 0, {0, 1, 3}))
        [0, 1, 2]
    """
    runs = runs if runs is not None else set(draws[i][0]) | set(draws[i][1])
    return {j for j, (a, b) in enumerate(draws) if runs & (set(a) | set(b))}


def _log_pct(better_pct: float) -> float:
    """A change in % of throughput (positive = faster) as a log change × 100, the unit
    of the run spreads and the gates: a 28.6% drop and a 40% rise are both 33.6.

    Example:
        >>> round(_log_pct(-28.571), 1), round(_log_pct(40.0), 1)
        (-33.6, 33.6)
    """
    return math.log1p(better_pct / 100) * 100 if better_pct > -100 else math.inf


def _time_to_log_pct(time_pct: float) -> float:
    """A slow-down in % of time (10 = a call takes 10% longer) as a log change × 100,
    the unit of the gates and minimal detectable changes: 10% is 9.53.

    Example:
        >>> round(_time_to_log_pct(10.0), 2), math.isnan(_time_to_log_pct(float("nan")))
        (9.53, True)
    """
    if not math.isfinite(time_pct) or time_pct <= -100:
        return math.nan
    return math.log1p(time_pct / 100) * 100


def _achieved_slowdowns(clean: Sequence[Any], slow: Sequence[Any]) -> dict[str, float]:
    """Per benchmark, % more time a call took in the slowed runs (medians of run medians)."""

    def run_medians(frames: Sequence[Any]) -> dict[str, list[float]]:
        out: dict[str, list[float]] = {}
        for frame in frames:
            for name, median in zip(frame["fullname"], frame["median"], strict=True):
                if math.isfinite(float(median)) and float(median) > 0:
                    out.setdefault(name, []).append(float(median))
        return out

    base, slowed = run_medians(clean), run_medians(slow)
    return {
        n: (statistics.median(slowed[n]) / statistics.median(base[n]) - 1) * 100
        for n in base
        if n in slowed
    }


def _rate(hits: list[bool]) -> float | None:
    return sum(hits) / len(hits) if hits else None


ENVIRONMENT_KEYS = ("cpu", "cpu_count", "python", "torch")
"""What a calibration records of its machine, and what must match for its gates to hold."""


def machine_environment(machine_info: Mapping[str, Any]) -> dict[str, Any]:
    """The :data:`ENVIRONMENT_KEYS` of a run's ``machine_info`` (what the suite records
    under ``machine_info["rlpace"]``), the form :attr:`Calibration.environment` has.

    Example:
        >>> machine_environment({"rlpace": {"cpu": "AMD EPYC", "cpu_count": 2, "numpy": "2"}})
        {'cpu': 'AMD EPYC', 'cpu_count': 2}
    """
    env = machine_info.get("rlpace") or {}
    return {k: env.get(k) for k in ENVIRONMENT_KEYS if k in env}


@dataclass(frozen=True)
class CalibrationNote:
    """What a PR comment says about the calibration that judged it: how often it cried
    wolf on held-out A/A runs, how often it caught an injected slow-down, and whether
    it was measured on a machine like the one that ran the comparison.

    Example:
        >>> note = CalibrationNote("reports/calibration/cpu.json", 24, "2026-11-30", 0, 48,
        ...                        0.06, 10.0, 0.9, 58, 64, 4, {"cpu_count": (2, 16)})
        >>> note.to_dict()["mismatch"]
        {'cpu_count': [2, 16]}
    """

    source: str
    """The calibration file."""
    pool: int
    """Clean suite runs it was calibrated on."""
    created: str
    """Date of the pool (``YYYY-MM-DD``), empty when unknown."""
    held_out_alarms: int
    """Held-out A/A comparisons that flagged anything."""
    held_out_runs: int
    """Held-out A/A comparisons."""
    false_alarm_bound: float
    """95% upper bound of the false-alarm rate (NaN when not measured)."""
    injected_pct: float
    """The slow-down injected for the detection figure, in % (NaN without one)."""
    detection_power: float
    """The power at which benchmarks qualified for the detection figure."""
    detection_hits: int
    """Clean-vs-slowed comparisons of qualifying benchmarks that flagged the slow-down."""
    detection_trials: int
    """Clean-vs-slowed comparisons of qualifying benchmarks."""
    detection_benchmarks: int
    """Benchmarks whose noise allows detecting the injected slow-down at that power."""
    mismatch: Mapping[str, tuple[Any, Any]] = field(default_factory=dict)
    """``key → (calibrated, this run)`` for each machine property that differs."""
    confirm: int = 0
    """Runs a side of the confirmation the held-out figures were judged with (0: none)."""
    held_out_alarms_first: int | None = None
    """Held-out A/A comparisons that flagged anything before confirmation (None without one)."""
    run_confirm: int | None = None
    """Runs a side of this run's confirmation (None: not known)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (NaN becomes None), as templates and ``<set>.json`` take it."""
        data = _finite(asdict(self))
        data["mismatch"] = {k: list(v) for k, v in self.mismatch.items()}
        data["detection_rate"] = (
            self.detection_hits / self.detection_trials if self.detection_trials else None
        )
        return data


def calibration_note(
    calibration: Calibration,
    source: str | Path,
    machine_info: Mapping[str, Any] | None = None,
    confirm: int | None = None,
) -> CalibrationNote:
    """Summarise ``calibration`` for the PR comment that it judged.

    Args:
        calibration: the calibration the comparison used.
        source: where it was read from (shown to the reader).
        machine_info: the head run's ``machine_info``; its :data:`ENVIRONMENT_KEYS` are
            compared with the calibration's (a key either side lacks is not compared).
        confirm: the runs a side of this run's confirmation (``pr --confirm``), so the
            comment can say when the calibration's figures were judged otherwise.

    Example:
        >>> cal = Calibration("cpu", 16, 2, 16, 5.0, 0.05, 0.05, 0.0, 1 / 16, (),
        ...                   environment={"cpu_count": 2}, created="2026-11-30T15:23:11")
        >>> note = calibration_note(cal, "cpu.json", {"rlpace": {"cpu_count": 16}})
        >>> note.created, note.held_out_alarms, note.held_out_runs, dict(note.mismatch)
        ('2026-11-30', 1, 16, {'cpu_count': (2, 16)})
    """
    here = machine_environment(machine_info or {})
    mismatch = {
        k: (calibration.environment[k], here[k])
        for k in ENVIRONMENT_KEYS
        if k in calibration.environment and k in here and calibration.environment[k] != here[k]
    }
    power = calibration.detection_power()
    injected = [b.injected for b in calibration.benchmarks if b.injected]
    return CalibrationNote(
        source=str(source),
        pool=calibration.pool,
        created=calibration.created[:10],
        held_out_alarms=calibration.held_out_alarms,
        held_out_runs=calibration.runs
        if math.isfinite(calibration.false_alarm_rate_calibrated)
        else 0,
        false_alarm_bound=calibration.false_alarm_bound(),
        injected_pct=100 * statistics.median(injected) if injected else math.nan,
        detection_power=power.power,
        detection_hits=power.hits,
        detection_trials=power.trials,
        detection_benchmarks=len(power.rows),
        mismatch=mismatch,
        confirm=calibration.confirm,
        held_out_alarms_first=round(calibration.false_alarm_rate_first * calibration.runs)
        if math.isfinite(calibration.false_alarm_rate_first)
        else None,
        run_confirm=confirm,
    )


def write_calibration(calibration: Calibration, out_dir: Path) -> tuple[Path, Path]:
    """Write ``<set>.json`` (versioned data) and ``<set>.md`` (a table) under ``out_dir``.

    Example:
        >>> write_calibration(cal, Path("reports/aa"))  # doctest: +SKIP
        (PosixPath('reports/aa/cpu.json'), PosixPath('reports/aa/cpu.md'))
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path = out_dir / f"{calibration.set_name}.json"
    json_path.write_text(json.dumps(calibration.to_dict(), indent=2) + "\n", encoding="utf-8")
    md_path = out_dir / f"{calibration.set_name}.md"
    md_path.write_text(format_calibration(calibration), encoding="utf-8")
    return json_path, md_path


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
