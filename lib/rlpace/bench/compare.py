"""Results tables → a typed comparison: one verdict per benchmark.

:func:`compare_runs` matches benchmarks by ``fullname`` and decides, for each one,
whether it improved, worsened, stayed within noise, is new, was removed or failed;
:func:`confirm_verdicts` puts its flags to a second comparison. What they return,
:class:`~rlpace.bench.comparison.Comparison`, is defined in
:mod:`rlpace.bench.comparison`. This module does what needs the whole run (matching,
the fitted and lent priors, the control floor, the q-values); one benchmark's figures
and verdict are :mod:`rlpace.bench.row_verdict`'s. Templates only format these verdicts (decide, then
render).

How a change is decided (both sides ran and have usable times):

- **raw samples on both sides** — a two-sided Mann–Whitney U test gives a p-value,
  Benjamini–Hochberg turns the p-values of all benchmarks into q-values (false
  discovery rate ``alpha``), and a bootstrap interval on the ratio of medians gives
  the change's uncertainty;
- **summary statistics only** — the medians' intervals (asv's 99% interval, or a box
  plot notch from median/IQR/rounds) must not overlap.
- **a duet** (``paired=True``: run ``k`` of base and head ran at the same time, one per
  core) — each pair's log ratio of run medians is one observation, and a moderated
  paired t on them gives the change, its interval and the p-value (method
  ``"paired"``): the load both sides met cancels in each pair.

**One run a side** (a single process each, the usual pytest-benchmark file): rounds
within one process say nothing about the process-to-process noise (4-16 % on a
shared machine), so unless the benchmark has calibrated noise (``noise``) or the run
has a control floor, the comparator *assumes* a process noise of
:data:`~rlpace.bench.thresholds.SINGLE_RUN_NOISE` (``single_run_noise``) and the row carries it in
``assumed_noise_pct``; the report says so.

Either way a change is only flagged when it is larger than the effect ``threshold``
(5% by default; ``paired_threshold`` for a duet's rows, where the load both sides met
cancels in each pair) *and* larger than its own noise: the half-width of the change's
interval, the minimal detectable change of its samples, the process-level half-width
(when both sides merged two or more runs: each run's median is one observation, so a
benchmark whose processes disagree cannot win significance from its many rounds;
:func:`rlpace.bench.stats.run_level_noise`) and the calibrated A/A noise of the
benchmark when one is given, whichever is largest. So a benchmark never worsens by
less than it wobbles, within a process or between processes.

``change_pct`` is the seed bot's number, ``(head ops − base ops) / base ops``, with
ops = ``1 / mean`` (for values other than times, the same ratio of means); ``median_change_pct`` and its interval are what the verdict uses
(medians resist the slow outliers timing data always has). Both are signed so that
positive is better, for lower-is-better times and higher-is-better metrics alike.

Example:
    >>> from rlpace.bench.results import results_from_records
    >>> base = results_from_records([{"fullname": "a", "data": [1.0, 1.01, 0.99] * 10}])
    >>> head = results_from_records([{"fullname": "a", "data": [1.5, 1.51, 1.49] * 10}])
    >>> comparison = compare_runs(head, base)
    >>> comparison.rows[0].verdict
    <Verdict.WORSENED: 'worsened'>
    >>> round(comparison.rows[0].change_pct, 2)
    -33.33
    >>> comparison.counts()["worsened"]
    1
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from rlpace.bench.comparison import BenchmarkChange, Comparison, Verdict
from rlpace.bench.controls import NoiseFloor
from rlpace.bench.errors import BenchInputError
from rlpace.bench.results import run_environment
from rlpace.bench.row_verdict import (
    RunGate,
    counted_pair,
    decide_row,
    draft_row,
    runs_comparable,
)
from rlpace.bench.stats import (
    benjamini_hochberg,
    fit_prior_stretch,
    fit_variance_prior,
    log_run_variance,
    paired_log_variance,
    prior_conflict,
)
from rlpace.bench.thresholds import COUNTED_THRESHOLD, SINGLE_RUN_NOISE

__all__ = [
    "compare_runs",
    "confirm_verdicts",
    "pair_spread_summary",
]

_NAN = float("nan")


def _run_meta(df: pd.DataFrame) -> dict[str, Any]:
    commit = df.attrs.get("commit_info") or {}
    machine = df.attrs.get("machine_info") or {}
    text = {k: v for k, v in {**machine, **commit}.items() if isinstance(v, str) and v}
    cpu = machine.get("cpu")
    return {
        "source": df.attrs.get("source"),
        "sources": list(df.attrs.get("sources") or []),
        "format": df.attrs.get("format"),
        "commit": commit.get("id"),
        "branch": commit.get("branch"),
        "subject": text.get("subject") or text.get("message"),
        "commit_time": text.get("time") or text.get("author_time"),
        "datetime": df.attrs.get("datetime"),
        "machine": text.get("node")
        or text.get("machine")
        or (cpu.get("brand_raw") if isinstance(cpu, dict) else text.get("cpu")),
        "environment": run_environment(df.attrs),
    }


def _check_noise(noise: Mapping[str, float] | None) -> dict[str, float]:
    out = {}
    for key, value in (noise or {}).items():
        if not isinstance(value, int | float) or not math.isfinite(value) or not 0 <= value <= 1:
            raise BenchInputError(
                f"noise[{key!r}] = {value!r}: expected the calibrated relative spread as a "
                "fraction between 0 and 1 (0.03 means 3%); pass fractions, not percents"
            )
        out[key] = float(value)
    return out


def _check_priors(
    priors: Mapping[str, tuple[float, float]] | None,
    what: str = "process_priors",
    origin: str = "Calibration.process_priors()",
) -> dict[str, tuple[float, float]]:
    out = {}
    for key, value in (priors or {}).items():
        try:
            variance, df = (float(v) for v in value)
        except (TypeError, ValueError):
            variance = df = math.nan
        if not (math.isfinite(variance) and variance >= 0 and math.isfinite(df) and df > 0):
            raise BenchInputError(
                f"{what}[{key!r}] = {value!r}: expected (variance of the log run "
                f"median >= 0, degrees of freedom > 0); take them from {origin} rather "
                "than building them by hand"
            )
        out[key] = (variance, df)
    return out


def _check_variance_prior(value: Any, what: str = "variance_prior") -> tuple[float, float]:
    """A ``(variance >= 0, degrees of freedom > 0)`` pair; infinite degrees of freedom
    (every benchmark alike, :func:`rlpace.bench.stats.fit_variance_prior`) are allowed.
    ``what``: ``variance_prior``, or ``prior_stretch`` (a stretch of at least 1)."""
    try:
        variance, df = (float(v) for v in value)
    except (TypeError, ValueError):
        variance = df = math.nan
    least = 1.0 if what == "prior_stretch" else 0.0
    if not (math.isfinite(variance) and variance >= least and df > 0):
        expected = (
            "(stretch of the pair priors >= 1, degrees of freedom > 0); pass a "
            "Comparison.prior_stretch"
            if what == "prior_stretch"
            else "(variance of the log run median >= 0, degrees of freedom > 0); pass a "
            "Comparison.variance_prior"
        )
        raise BenchInputError(f"{what} = {value!r}: expected {expected}")
    return variance, df


def compare_runs(
    head: pd.DataFrame,
    base: pd.DataFrame | None = None,
    *,
    threshold: float = 5.0,
    alpha: float = 0.05,
    noise: Mapping[str, float] | None = None,
    paired_threshold: float | None = None,
    floor: NoiseFloor | None = None,
    process_priors: Mapping[str, tuple[float, float]] | None = None,
    fixed_impl: str | None = None,
    family_size: int | None = None,
    variance_prior: tuple[float, float] | None = None,
    single_run_noise: float = SINGLE_RUN_NOISE,
    paired: bool = False,
    paired_priors: Mapping[str, tuple[float, float]] | None = None,
    prior_stretch: tuple[float, float] | None = None,
    count_threshold: float = COUNTED_THRESHOLD,
) -> Comparison:
    """Compare a head run against a base run, benchmark by benchmark.

    Process-level noise: when both sides merged two or more runs, a benchmark must also
    clear the half-width of the process-level interval
    (:func:`rlpace.bench.stats.run_level_noise`), taken at level ``alpha / m`` over the
    ``m`` such benchmarks (Bonferroni), with each benchmark's process variance moderated
    by an empirical-Bayes prior fitted on all ``m`` (:func:`rlpace.bench.stats.fit_variance_prior`:
    two runs a side give a benchmark two degrees of freedom of its own, the others lend
    it more). Calibrated noise can only widen that: on the loaded machine a calibration
    from eight runs missed the heavy tails of some benchmarks' process noise, and
    judging by it alone flagged more A/A runs than the process-level gates did.

    Args:
        head: results table of the new run (:func:`rlpace.bench.results.load_results`).
        base: results table of the reference run; without one every benchmark is new.
        threshold: smallest change in % that may be flagged (strictly greater).
        paired_threshold: the same for a benchmark judged pair by pair (``paired``);
            None: ``threshold``. Each pair's load cancels in its log ratio and the
            paired test's gate holds the pairs' own noise, so ``pr`` asks less of a
            duet (2 %) than of runs one after another (5 %).
        alpha: false discovery rate for the Benjamini–Hochberg q-values (and the family
            error rate of the process-level gates).
        noise: optional ``fullname → calibrated gate`` measured by A/A runs, as the
            fraction of a slow-down (0.03 = 3% slower, at most 1); a speed-up must beat
            the same change in log space, ``g / (1 − g)`` (0.5 = 2× slower or faster).
            A change must exceed it as well as its own interval.
        floor: this run's negative-control floor
            (:func:`rlpace.bench.controls.noise_floor_from_controls`), added to the
            noise: the full floor for benchmarks without calibrated noise, the
            common-mode shift for the others (:func:`~rlpace.bench.controls.noise_with_floor`).
        process_priors: optional ``fullname → (variance, degrees of freedom)`` of the log
            run median, from a calibration pool
            (:meth:`rlpace.bench.calibration.Calibration.process_priors`); it replaces the
            prior fitted on the other benchmarks for that one, so a calibrated benchmark's
            process-level gate stands on the pool's degrees of freedom plus this run's.
            Unless the comparison is paired, these priors are first stretched by how
            much wider this comparison's runs spread than the pool's, as
            ``paired_priors`` are.
        fixed_impl: the ``impl`` of rows whose code is the same on both sides by
            construction (the torchrl twins when base and head pin the same packages):
            their changes are measurement noise, so they are never flagged ("unchanged",
            with a note) though their figures are still computed. None: judge every row.
        family_size: how many benchmarks the process-level gates share ``alpha`` over
            (Bonferroni); None: those compared here at process level, less the
            ``fixed_impl`` rows, which are never flagged. A confirmation
            of the few benchmarks a first comparison flagged passes how many it tests.
        variance_prior: the ``(variance, degrees of freedom)`` prior for benchmarks
            without a ``process_priors`` entry, instead of one fitted here (a
            confirmation of a few benchmarks has too few to fit one; it borrows the
            first comparison's :attr:`~rlpace.bench.comparison.Comparison.variance_prior`).
        single_run_noise: the process noise (a fraction) assumed for a benchmark with
            one run on a side and no calibrated noise, when the run has no control
            floor; 0 judges such benchmarks on their rounds alone (not advised: the
            rounds of one process cannot show process-to-process noise).
        paired: the runs were a duet: head run ``k`` and base run ``k`` ran at the same
            time, one per core, and each side's runs are merged in repeat order. A
            benchmark with the same number (two or more) of runs a side is then judged
            pair by pair (:func:`rlpace.bench.stats.paired_run_test`, method
            ``"paired"``): the change is the mean of the pairs' log ratios, its
            interval and p-value a moderated paired t at level ``alpha / m``
            (Bonferroni), and a calibrated gate, measured on runs that did not run
            side by side, does not apply (the control floor's shift still does).
        paired_priors: optional ``fullname → (variance, degrees of freedom)`` of a
            pair's log ratio, from a pool of A/A duets
            (:meth:`rlpace.bench.calibration.DuetCalibration.paired_priors`): for a
            benchmark judged pair by pair it replaces the prior fitted on the other
            benchmarks, so its paired test stands on the pool's degrees of freedom
            plus its own pairs'. Those priors come from another day, so they are
            first stretched by how much wider this comparison's pairs spread than the
            pool's (:func:`rlpace.bench.stats.fit_prior_stretch`, over every paired
            benchmark with such a prior; three at least).
        prior_stretch: ``(stretch, d0)`` to stretch ``paired_priors`` (or, unpaired,
            ``process_priors``) by instead of one fitted here (a confirmation of a few
            benchmarks has too few to fit one; it borrows the first comparison's
            :attr:`~rlpace.bench.comparison.Comparison.prior_stretch`).
        count_threshold: the smallest change in % that may be flagged in a row whose
            unit counts work (:func:`rlpace.bench.counted_rows.counted`: an asv
            ``track_*`` of instructions or aten ops): such a row is judged on the count
            gate, this threshold or four times its runs' own spread
            (:func:`rlpace.bench.counted_rows.count_verdict`), not on a timing's noise.

    Returns:
        The :class:`~rlpace.bench.comparison.Comparison`, rows in head order then removed benchmarks.

    Raises:
        BenchInputError: a negative threshold, an alpha outside (0, 1), a noise
            value that is not a fraction, or a process prior that is not a
            (variance >= 0, degrees of freedom > 0) pair.

    Example:
        >>> from rlpace.bench.results import results_from_records
        >>> rng = np.random.default_rng(1)
        >>> base = results_from_records([{"fullname": "a", "data": 1 + 0.05 * rng.random(50)}])
        >>> head = results_from_records([{"fullname": "a", "data": 1 + 0.05 * rng.random(50)}])
        >>> compare_runs(head, base).rows[0].verdict.value
        'unchanged'
    """
    given = {"threshold": threshold, "count_threshold": count_threshold}
    if paired_threshold is not None:
        given["paired_threshold"] = paired_threshold
    for name, value in given.items():
        if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
            raise BenchInputError(f"{name}: expected a percentage >= 0, got {value!r}")
    paired_at = float(threshold if paired_threshold is None else paired_threshold)
    if not (isinstance(alpha, int | float) and 0 < alpha < 1):
        raise BenchInputError(f"alpha: expected a false discovery rate in (0, 1), got {alpha!r}")
    if not (isinstance(single_run_noise, int | float) and math.isfinite(single_run_noise)) or not (
        0 <= single_run_noise < 1
    ):
        raise BenchInputError(
            f"single_run_noise: expected a fraction in [0, 1) (0.1 means 10%), "
            f"got {single_run_noise!r}"
        )
    calibrated = _check_noise(noise)
    given_stretch = (
        _check_variance_prior(prior_stretch, "prior_stretch") if prior_stretch is not None else None
    )
    own_priors = _check_priors(process_priors)
    pair_priors = _check_priors(paired_priors, "paired_priors", "DuetCalibration.paired_priors()")
    head_rows = _by_fullname(head, "head")
    base_rows = _by_fullname(base, "base") if base is not None else {}
    # a count of work is judged on its count gate: it lends no variance to the timings'
    counts = {n for n, h in head_rows.items() if n in base_rows and counted_pair(h, base_rows[n])}
    gated = {
        name
        for name, h in head_rows.items()
        if name in base_rows and name not in counts and runs_comparable(h, base_rows[name])
    }
    if family_size is not None and not (isinstance(family_size, int) and family_size >= 1):
        raise BenchInputError(
            f"family_size: expected the number of benchmarks tested (an integer >= 1), "
            f"got {family_size!r}"
        )
    # the family the process-level gates share alpha over: the rows that can be flagged
    # (negative controls whose code is the same on both sides never are)
    tested = [n for n in gated if fixed_impl is None or head_rows[n]["impl"] != fixed_impl]
    run_alpha = alpha / (family_size or max(len(tested), 1))
    pairs = {
        n
        for n in gated
        if paired and len(head_rows[n]["run_medians"]) == len(base_rows[n]["run_medians"])
    }
    variance_of = paired_log_variance if pairs else log_run_variance
    # two runs a side give each benchmark's process variance two degrees of freedom;
    # the variances of all gated benchmarks together give a prior that lends them more
    judged = sorted(pairs) if pairs else sorted(gated)
    fitted = fit_variance_prior(
        *zip(
            *(variance_of(head_rows[n]["run_medians"], base_rows[n]["run_medians"])
              for n in judged),
            strict=True,
        )
    ) if len(judged) >= 3 else None  # fmt: skip
    prior = _check_variance_prior(variance_prior) if variance_prior is not None else fitted
    if pairs:  # an A/A calibration of runs one after another does not gate a duet's pairs
        calibrated = {n: g for n, g in calibrated.items() if n not in pairs}
        own_priors = {n: v for n, v in own_priors.items() if n not in pairs}
        lent = {n: v for n, v in pair_priors.items() if n in pairs}
    else:  # the calibration's process priors, lent to the rows with runs to judge
        lent = {n: v for n, v in own_priors.items() if n in gated}
    # another day's priors, stretched by today's: a calm prior lent to a busy day's rows
    # whose few runs lie close together by chance reads the day's noise as a change
    spreads = {
        n: variance_of(head_rows[n]["run_medians"], base_rows[n]["run_medians"]) for n in lent
    }
    stretch = (
        given_stretch
        if given_stretch is not None
        else fit_prior_stretch(*zip(*((*spreads[n], lent[n]) for n in sorted(lent)), strict=True))
        if lent
        else None
    )  # fmt: skip
    own_priors.update(_stretched(lent, stretch, spreads))
    if floor is not None and floor.active:
        from rlpace.bench.controls import noise_with_floor

        effective = noise_with_floor(calibrated, head_rows, floor)
        for n in pairs:  # the pairs' own spread replaces the calibration: the shift floor
            effective[n] = min(floor.shift_floor_pct / 100, 1.0)
    else:
        effective = calibrated

    assumed = 0.0 if floor is not None and floor.active else float(single_run_noise)
    drafts: list[dict[str, Any]] = []
    for fullname, h in head_rows.items():
        own = own_priors.get(fullname)
        # the fitted prior is of the kind of variance most rows have (pairs' when paired):
        # a row judged the other way gets none
        fits = (fullname in pairs) == bool(pairs)
        run_gate = (
            RunGate(run_alpha, own if own is not None else (prior if fits else None),
                    fullname in pairs)
            if fullname in gated
            else None
        )  # fmt: skip
        drafts.append(
            draft_row(
                h,
                base_rows.get(fullname),
                base is not None,
                effective,
                run_gate,
                assumed,
                float(count_threshold),
            )
        )
    for fullname, b in base_rows.items():
        if fullname not in head_rows:
            drafts.append(draft_row(None, b, True, effective, None, assumed))

    q = benjamini_hochberg([d.get("p_value", _NAN) for d in drafts])
    rows = []
    for draft, q_value in zip(drafts, q):
        draft["q_value"] = float(q_value)
        if "verdict" not in draft:
            at = paired_at if draft["method"] == "paired" else threshold
            draft["verdict"] = decide_row(draft, at, alpha)
        flagged = draft["verdict"] in (Verdict.IMPROVED, Verdict.WORSENED)
        if fixed_impl is not None and draft["impl"] == fixed_impl and flagged:
            draft["note"] = (
                f"a negative control: the same code on both sides, so its "
                f"{draft['median_change_pct']:+.1f}% is noise"
            )
            draft["verdict"] = Verdict.UNCHANGED
        rows.append(BenchmarkChange(**draft))
    return Comparison(
        rows=tuple(rows),
        threshold=float(threshold),
        paired_threshold=paired_at if pairs else None,
        count_threshold=(
            float(count_threshold) if any(r.method == "counted" for r in rows) else None
        ),
        alpha=float(alpha),
        has_base=base is not None,
        head=_run_meta(head),
        base=_run_meta(base) if base is not None else {},
        noise_floor=floor,
        variance_prior=None if prior is None else (float(prior[0]), float(prior[1])),
        prior_stretch=None if stretch is None else (float(stretch[0]), float(stretch[1])),
        paired=max((len(head_rows[n]["run_medians"]) for n in pairs), default=0),
        pair_spread=pair_spread_summary(
            {n: (head_rows[n]["run_medians"], base_rows[n]["run_medians"]) for n in pairs},
            pair_priors,
            stretch,
        ),
    )


def _stretched(
    priors: Mapping[str, tuple[float, float]],
    stretch: tuple[float, float] | None,
    own: Mapping[str, tuple[float, float]],
) -> dict[str, tuple[float, float]]:
    """``priors`` widened by ``stretch`` (:func:`rlpace.bench.stats.fit_prior_stretch`):
    each variance times the stretch, on no more degrees of freedom than the stretch's
    fit or the prior's own. Whether a benchmark's ``own`` ``(variance, df)`` disowns its
    prior is asked of the stretched prior on the pool's own degrees of freedom (a fit
    over benchmarks that widened unevenly lends few, and a prior on few would let a
    wild benchmark keep half its prior's calm)."""
    if stretch is None:
        return dict(priors)
    factor, d0 = stretch
    out = {}
    for name, (variance, df) in priors.items():
        wide = (variance * factor, df)
        mine = own.get(name)
        out[name] = wide if mine is not None and prior_conflict(*mine, wide) else (
            variance * factor, min(df, d0)
        )  # fmt: skip
    return out


def pair_spread_summary(
    pairs: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    priors: Mapping[str, tuple[float, float]],
    stretch: tuple[float, float] | None = None,
) -> dict[str, Any] | None:
    """How widely today's duet pairs spread against the A/A duets' spreads (the priors).

    For each benchmark with a prior ``(s0², d0)``, the ratio of its pairs' spread (the
    standard deviation of ``log(head_k / base_k)``) to ``s0``; the median over them says
    how busy the machine was compared with the calibration's day (about 0.9 on a day
    like it, with 4 pairs). ``disowned`` counts the benchmarks whose pairs spread so far
    beyond their prior, stretched by ``stretch`` where the comparison stretched it, that
    they were judged on their own pairs alone (:func:`rlpace.bench.stats.prior_conflict`):
    on such a day only large changes show.

    Args:
        pairs: ``fullname → (head run medians, base run medians)``, run ``k`` of each
            side from the same duet.
        priors: ``fullname → (variance, degrees of freedom)`` of one pair's log ratio in
            the A/A duets (:meth:`rlpace.bench.calibration.DuetCalibration.paired_priors`).
        stretch: ``(stretch, d0)`` the comparison widened those priors by
            (:func:`rlpace.bench.stats.fit_prior_stretch`); None: none.

    Returns:
        ``{"benchmarks": n, "ratio": median ratio, "disowned": k}``, plus ``stretch``
        (its square root: the factor on the pool's spreads) when one was applied, or
        None when no benchmark has both two pairs or more and a prior.

    Example:
        >>> today = {"a": ([1.0, 1.1, 0.9], [1.01, 1.1, 0.9]), "b": ([2.0, 2.2], [2.0, 2.0])}
        >>> pair_spread_summary(today, {"a": (0.01**2, 15), "b": (0.01**2, 15)})
        {'benchmarks': 2, 'ratio': 3.66, 'disowned': 1}
        >>> pair_spread_summary(today, {"a": (0.01**2, 15), "b": (0.01**2, 15)}, (16.0, 9.0))
        {'benchmarks': 2, 'ratio': 3.66, 'disowned': 0, 'stretch': 4.0}
    """
    ratios, disowned = [], 0
    spreads = {name: paired_log_variance(*pairs[name]) for name in pairs}
    used = _stretched(priors, stretch, spreads)
    for name in sorted(pairs):
        prior = priors.get(name)
        variance, df = spreads[name]
        if prior is None or not (prior[0] > 0 and df > 0 and math.isfinite(variance)):
            continue
        ratios.append(math.sqrt(variance / prior[0]))
        disowned += prior_conflict(variance, df, used[name])
    if not ratios:
        return None
    out: dict[str, Any] = {
        "benchmarks": len(ratios),
        "ratio": round(float(np.median(ratios)), 2),
        "disowned": disowned,
    }
    if stretch is not None:
        out["stretch"] = round(math.sqrt(stretch[0]), 2)
    return out


def confirm_verdicts(first: Comparison, second: Comparison, *, repeats: int) -> Comparison:
    """Keep a flag of ``first`` only where ``second`` (fresh runs of the same benchmarks)
    flags it again, the same way.

    A whole process that runs slow (a burst of load on a shared machine, the rare slow
    start of a multi-process case) moves a mean of two runs beyond any gate fitted to
    runs without one. Such a flag does not repeat in fresh processes; a real change
    does. So ``pr`` re-runs what the first comparison flagged, ``repeats`` more runs a
    side, judges them on their own (:func:`compare_runs` over just those benchmarks,
    ``family_size`` their number) and calls a change only when both agree. A flag the
    second comparison does not repeat becomes "unchanged", with a note giving both
    changes; a repeated one keeps its figures from ``first`` and gains a note.

    Args:
        first: the comparison of the full set.
        second: the comparison of the confirmation runs (any benchmarks it lacks are
            not confirmed).
        repeats: runs per side of the confirmation (recorded, and named in the notes).

    Returns:
        ``first`` with the flags that did not repeat cleared, ``confirmed`` and
        ``confirm_change_pct`` set on every row put to confirmation, and
        ``confirm_repeats`` recorded.

    Raises:
        BenchInputError: ``repeats`` below 1.

    Example:
        >>> a = BenchmarkChange("a", "a", Verdict.WORSENED, median_change_pct=-30.0)
        >>> b = BenchmarkChange("b", "b", Verdict.WORSENED, median_change_pct=-12.0)
        >>> again = Comparison(rows=(
        ...     BenchmarkChange("a", "a", Verdict.UNCHANGED, median_change_pct=-1.0),
        ...     BenchmarkChange("b", "b", Verdict.WORSENED, median_change_pct=-11.0)))
        >>> out = confirm_verdicts(Comparison(rows=(a, b)), again, repeats=2)
        >>> [(r.verdict.value, r.confirmed) for r in out.rows]
        [('unchanged', False), ('worsened', True)]
        >>> out.rows[0].note
        'not confirmed: -30.0% here, -1.0% in 2 more runs a side'
    """
    if not (isinstance(repeats, int) and repeats >= 1):
        raise BenchInputError(
            f"repeats: expected the confirmation's runs per side (an integer >= 1), got {repeats!r}"
        )
    flagged = (Verdict.IMPROVED, Verdict.WORSENED)
    again = {r.fullname: r for r in second.rows}
    rows = []
    for row in first.rows:
        if row.verdict not in flagged:
            rows.append(row)
            continue
        other = again.get(row.fullname)
        later = other.median_change_pct if other is not None else _NAN
        runs = f"{repeats} more run{'s' if repeats != 1 else ''} a side"
        if other is not None and other.verdict is row.verdict:
            note = f"confirmed: {later:+.1f}% in {runs}"
            rows.append(replace(row, confirmed=True, confirm_change_pct=later, note=note))
        else:
            seen = f"{later:+.1f}%" if math.isfinite(later) else "no result"
            note = f"not confirmed: {row.median_change_pct:+.1f}% here, {seen} in {runs}"
            rows.append(
                replace(
                    row,
                    verdict=Verdict.UNCHANGED,
                    confirmed=False,
                    confirm_change_pct=later,
                    note=note,
                )
            )
    return replace(first, rows=tuple(rows), confirm_repeats=repeats)


def _by_fullname(df: pd.DataFrame, side: str) -> dict[str, pd.Series]:
    rows: dict[str, pd.Series] = {}
    for _, row in df.iterrows():
        if row["fullname"] in rows:
            raise BenchInputError(
                f"{side} run {df.attrs.get('source') or ''}: benchmark {row['fullname']!r} appears "
                "more than once; merge repeated runs with rlpace.bench.results.merge_runs first"
            )
        rows[row["fullname"]] = row
    return rows
