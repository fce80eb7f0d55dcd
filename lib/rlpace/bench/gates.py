"""Gate maths: from a benchmark's A/A noise to the change a PR must beat. Pure.

Words as in the glossary (``docs/handbook/noise.md``):

- a **run spread** is the standard deviation of one run's log median across fresh
  processes of the same code (a log change × 100, so 1.0 is about 1%);
- the **spread** of a comparison is the standard deviation of its A/A change with
  ``repeats`` runs a side, ``run spread × √(2 / repeats)``;
- a **gate** is the change (a log change × 100) a benchmark must exceed to be
  flagged; the comparator takes it as a **gate fraction**, the fraction of a slow-down
  ``1 − exp(−gate / 100)`` (:func:`gate_fraction`);
- a **prior** is ``(variance, degrees of freedom)`` of one run's log median, lent to
  the comparator's process-level test;
- the **detectable change** is the smallest true change flagged with a given power.

Everything here takes plain numbers and returns plain numbers (math and scipy only),
so the calibration, the judge and the tests share one copy.

Example:
    >>> gate, spread, mdc = noise_gate([1.0, -1.0, 0.5, -0.5], n_benchmarks=1)
    >>> round(spread, 3), round(gate, 2), round(mdc, 2)
    (0.913, 2.91, 5.77)
    >>> round(gate_fraction(10.0), 4), round(log_pct_from_time_pct(10.0), 2)
    (0.0952, 9.53)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from rlpace.bench.errors import BenchInputError
from rlpace.bench.stats import paired_run_test

__all__ = [
    "DETECTION_POWER",
    "POWER",
    "NoiseModel",
    "confirmation_fractions",
    "confirmation_gate",
    "confirmation_stage",
    "detectable_change",
    "gate_fraction",
    "log_pct_from_better_pct",
    "log_pct_from_time_pct",
    "noise_gate",
    "paired_change",
    "process_prior",
    "scale_gate_fraction",
]

POWER = 0.8
"""The power the per-benchmark minimal detectable change is stated at."""
DETECTION_POWER = 0.9
"""The power the detection summary is judged at (the project's 90% target)."""


def gate_fraction(gate_pct: float) -> float:
    """A gate given as a log change in % → the fraction of a slow-down (``< 1``), the
    form :func:`rlpace.bench.compare.compare_runs` takes as ``noise``.

    Example:
        >>> round(gate_fraction(5.0), 5), gate_fraction(-1.0)
        (0.04877, 0.0)
    """
    return -math.expm1(-max(gate_pct, 0.0) / 100)


def scale_gate_fraction(fraction: float, *, calibrated_repeats: int, repeats: int) -> float:
    """A gate fraction calibrated for ``calibrated_repeats`` runs a side, for a
    comparison of ``repeats`` runs a side: the log gate scales as ``√(calibrated /
    repeats)`` (the spread of a mean of runs); 1 (nothing can be flagged) stays 1.

    Example:
        >>> scale_gate_fraction(0.039211, calibrated_repeats=2, repeats=8)
        0.019802
    """
    if repeats < 1:
        raise BenchInputError(f"repeats: expected an integer >= 1, got {repeats!r}")
    if fraction >= 1:
        return 1.0
    if repeats == calibrated_repeats:
        return fraction
    scale = math.sqrt(calibrated_repeats / repeats)
    return round(-math.expm1(math.log1p(-fraction) * scale), 6)


def process_prior(run_spread_pct: float, runs: int) -> tuple[float, int]:
    """A run spread (std of the log median × 100) over ``runs`` runs → ``(variance,
    degrees of freedom)``, the prior the comparator's process-level test borrows.

    Example:
        >>> process_prior(2.0, 12)
        (0.0004, 11)
    """
    return (run_spread_pct / 100) ** 2, runs - 1


def log_pct_from_better_pct(better_pct: float) -> float:
    """A change in % of throughput (positive = faster) as a log change × 100, the unit
    of the run spreads and the gates: a 28.6% drop and a 40% rise are both 33.6.

    Example:
        >>> round(log_pct_from_better_pct(-28.571), 1), round(log_pct_from_better_pct(40.0), 1)
        (-33.6, 33.6)
    """
    return math.log1p(better_pct / 100) * 100 if better_pct > -100 else math.inf


def log_pct_from_time_pct(time_pct: float) -> float:
    """A slow-down in % of time (10 = a call takes 10% longer) as a log change × 100,
    the unit of the gates and detectable changes: 10% is 9.53.

    Example:
        >>> round(log_pct_from_time_pct(10.0), 2), math.isnan(log_pct_from_time_pct(float("nan")))
        (9.53, True)
    """
    if not math.isfinite(time_pct) or time_pct <= -100:
        return math.nan
    return math.log1p(time_pct / 100) * 100


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
    """Gate, spread and minimal detectable change of one benchmark, in percent.

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
    from scipy.stats import t as student_t

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
    if spread_df is not None and spread_df >= 1:
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


def confirmation_fractions(
    run_spreads: Mapping[str, tuple[float, int]],
    *,
    repeats: int,
    family_size: int,
    family_alpha: float = 0.05,
) -> dict[str, float]:
    """``fullname → (run spread, runs)`` → the confirmation's gates as gate fractions
    (:func:`confirmation_gate`, rounded to 6 places); benchmarks without a spread are
    left out.

    Example:
        >>> confirmation_fractions({"a": (2.0, 32), "b": (float("nan"), 0)}, repeats=2,
        ...                        family_size=1)
        {'a': 0.03997}
    """
    out = {}
    for name, (spread, runs) in run_spreads.items():
        gate = confirmation_gate(
            spread, runs, repeats=repeats, family_size=family_size, family_alpha=family_alpha
        )
        if math.isfinite(gate):
            out[name] = round(gate_fraction(gate), 6)
    return out


def confirmation_stage(
    run_spread_pct: float, runs: int, *, repeats: int, family_size: int, family_alpha: float
) -> tuple[float, float] | None:
    """``(gate, spread)`` of a confirmation stage for :func:`detectable_change`, None
    when the pool gives no spread.

    Example:
        >>> [round(x, 2) for x in confirmation_stage(2.0, 32, repeats=2, family_size=1,
        ...                                          family_alpha=0.05)]
        [4.08, 2.0]
    """
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
        for low, spread in stages:
            passed *= float(norm.cdf((d - low) / spread)) if spread > 0 else float(d >= low)
        return passed - power

    low = max(low for low, _ in stages)
    high = low + 10 * max(spread for _, spread in stages) + 1e-9
    return float(brentq(shortfall, low, high)) if shortfall(low) < 0 else low


def paired_change(
    head_medians: Sequence[float],
    base_medians: Sequence[float],
    *,
    alpha: float = 0.05,
    family_size: int = 1,
    power: float = DETECTION_POWER,
) -> tuple[float, float, float]:
    """The change of a duet, judged pair by pair: run ``k`` of head and run ``k`` of base
    ran at the same time, so the log ratio of each pair keeps little of the load both
    met, and the pairs' spread is what a change must beat. The one-benchmark form of
    :func:`rlpace.bench.stats.paired_run_test` (no prior), in the gate units of this
    module; the comparator judges duets with the latter.

    Args:
        head_medians: each head run's median (seconds), in repeat order.
        base_medians: each base run's median, the same repeats.
        alpha: family error rate, shared (Bonferroni) over ``family_size`` benchmarks.
        family_size: benchmarks judged this way together.
        power: the power the detectable change is stated at.

    Returns:
        ``(change, gate, detectable)`` as log changes × 100 (positive: head slower):
        the mean log ratio, the half-width of its Student-t interval at level
        ``1 − alpha / (2 × family_size)`` on ``pairs − 1`` degrees of freedom, and the
        smallest true change beyond that gate with probability ``power``. NaN with
        fewer than two usable pairs.

    Example:
        >>> change, gate, mdc = paired_change([1.10, 1.32, 1.21, 0.99], [1.0, 1.2, 1.1, 0.9])
        >>> round(change, 2), round(gate, 2), round(mdc, 2)
        (9.53, 0.0, 0.0)
        >>> [round(x, 2) for x in paired_change([1.1, 1.3, 1.2], [1.0, 1.2, 1.1])]
        [8.75, 1.9, 2.73]
    """
    if len(head_medians) != len(base_medians):
        raise BenchInputError(
            f"paired_change: expected one base run per head run, got {len(head_medians)} "
            f"head and {len(base_medians)} base runs; fix: pass the runs of a duet, pair by pair"
        )
    pairs = [
        (h, b)
        for h, b in zip(head_medians, base_medians)
        if math.isfinite(h) and math.isfinite(b) and h > 0 and b > 0
    ]
    if len(pairs) < 2:
        return math.nan, math.nan, math.nan
    heads, bases = zip(*pairs, strict=True)
    mean, gate, detectable, _ = paired_run_test(
        heads, bases, alpha=alpha / max(family_size, 1), power=power
    )
    return mean * 100, gate * 100, detectable * 100


@dataclass(frozen=True)
class NoiseModel:
    """What an A/A calibration knows of a set's noise, in the form a judge uses it.

    Example:
        >>> model = NoiseModel(gates={"a": 0.039211}, repeats=2, run_spreads={"a": (2.0, 32)})
        >>> model.gate_fractions(8), model.priors()
        ({'a': 0.019802}, {'a': (0.0004, 31)})
        >>> model.confirmation_gates(repeats=2, family_size=1)
        {'a': 0.03997}
    """

    gates: Mapping[str, float]
    """``fullname → gate`` as a gate fraction (the fraction of a slow-down a change
    must exceed, 1: nothing can be flagged), calibrated for :attr:`repeats` runs a side."""
    repeats: int
    """Runs per side the gates were calibrated for; other run counts scale them."""
    run_spreads: Mapping[str, tuple[float, int]] = field(default_factory=dict)
    """``fullname → (run spread %, pool runs)``: the process-to-process noise, source of
    the priors and of the confirmation's gates."""
    family_alpha: float = 0.05
    """The chance, per PR run, that an A/A comparison flags anything (sets the gates)."""

    def gate_fractions(self, repeats: int | Mapping[str, int] | None = None) -> dict[str, float]:
        """The gates for a comparison of ``repeats`` runs a side (None: as calibrated;
        a mapping: per benchmark, those not in it as calibrated).

        Example:
            >>> NoiseModel(gates={"a": 0.04, "b": 0.04}, repeats=2).gate_fractions({"a": 1})
            {'a': 0.056096, 'b': 0.04}
        """
        if repeats is None:
            return dict(self.gates)
        per = repeats if isinstance(repeats, Mapping) else dict.fromkeys(self.gates, repeats)
        return {
            name: scale_gate_fraction(
                g, calibrated_repeats=self.repeats, repeats=per.get(name, self.repeats)
            )
            for name, g in self.gates.items()
        }

    def confirmation_gates(self, *, repeats: int, family_size: int) -> dict[str, float]:
        """The gates of a confirmation of ``family_size`` flagged benchmarks with
        ``repeats`` fresh runs a side (:func:`rlpace.bench.gates.confirmation_gate`)."""
        return confirmation_fractions(
            self.run_spreads,
            repeats=repeats,
            family_size=family_size,
            family_alpha=self.family_alpha,
        )

    def priors(self) -> dict[str, tuple[float, float]]:
        """``fullname → (variance, degrees of freedom)`` of one run's log median, for
        benchmarks measured on three or more pool runs."""
        return {
            name: process_prior(spread, runs)
            for name, (spread, runs) in self.run_spreads.items()
            if math.isfinite(spread) and runs >= 3
        }
