"""Pure statistics of the harness: numpy and scipy only.

Everything here takes plain arrays of per-round times (seconds) and returns plain
numbers, so it can be tested against distributions with known answers and reused by
the loader (summaries), the run merger and the comparator (tests, intervals, false
discovery control).

Example:
    >>> import numpy as np
    >>> summary = summarize([1.0, 2.0, 3.0, 4.0])
    >>> summary["mean"], summary["median"], summary["rounds"]
    (2.5, 2.5, 4)
    >>> benjamini_hochberg([0.01, 0.04, 0.03]).round(3).tolist()
    [0.03, 0.04, 0.04]
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import stats as _sp

__all__ = [
    "benjamini_hochberg",
    "better_pct",
    "binomial_upper_bound",
    "bootstrap_ratio_ci",
    "fit_prior_stretch",
    "fit_variance_prior",
    "log_run_variance",
    "mann_whitney_p",
    "median_interval",
    "minimal_detectable_change",
    "paired_log_variance",
    "paired_run_test",
    "prior_conflict",
    "robust_location_spread",
    "robust_relative_spread",
    "run_level_noise",
    "summarize",
]


def better_pct(ratio: float, higher_is_better: bool) -> float:
    """A head/base ratio of a measured value as a change in %, positive when better.

    For a time (lower is better) a ratio of 0.8 is 25% better (1/0.8 - 1): the change in
    throughput, so that a speed-up and a slow-down of the same factor have the same size.
    A non-positive ratio of a time has no throughput: NaN.

    Example:
        >>> better_pct(0.8, higher_is_better=False), better_pct(1.1, higher_is_better=True)
        (25.0, 10.000000000000009)
        >>> better_pct(0.0, higher_is_better=False)
        nan
    """
    if higher_is_better:
        return (ratio - 1) * 100
    return (1 / ratio - 1) * 100 if ratio > 0 else math.nan


def _as_samples(samples: Sequence[float] | np.ndarray) -> np.ndarray:
    arr = np.asarray(samples, dtype=float).ravel()
    return arr[np.isfinite(arr)]


def summarize(samples: Sequence[float] | np.ndarray) -> dict[str, float | int]:
    """Summary statistics of per-round times, named as pytest-benchmark names them.

    Non-finite samples are dropped. ``ops`` is ``1 / mean`` (``inf`` for a zero mean);
    an empty input gives NaN statistics and ``rounds == 0``.

    Args:
        samples: per-round times in seconds.

    Returns:
        A dict with ``min``, ``max``, ``mean``, ``stddev`` (sample, ``ddof=1``; 0 for
        one sample), ``median``, ``iqr``, ``q1``, ``q3``, ``ops`` and ``rounds``.

    Example:
        >>> s = summarize([0.5, 0.5, 1.0, 2.0])
        >>> s["min"], s["max"], s["ops"]
        (0.5, 2.0, 1.0)
        >>> summarize([])["rounds"]
        0
    """
    arr = _as_samples(samples)
    n = int(arr.size)
    if n == 0:
        nan = float("nan")
        keys = ("min", "max", "mean", "stddev", "median", "iqr", "q1", "q3", "ops")
        return {**dict.fromkeys(keys, nan), "rounds": 0}
    q1, median, q3 = (float(v) for v in np.percentile(arr, [25, 50, 75]))
    mean = float(arr.mean())
    return {
        "min": float(arr.min()),
        "max": float(arr.max()),
        "mean": mean,
        "stddev": float(arr.std(ddof=1)) if n > 1 else 0.0,
        "median": median,
        "iqr": q3 - q1,
        "q1": q1,
        "q3": q3,
        "ops": (1.0 / mean) if mean > 0 else float("inf") if mean == 0 else float("nan"),
        "rounds": n,
    }


def median_interval(median: float, iqr: float, rounds: int) -> tuple[float, float]:
    """An approximate 95% interval for a median from summary statistics only.

    This is the notch of a box plot (``median ± 1.57·IQR/√n``, McGill et al. 1978):
    two medians whose notches do not overlap differ at roughly the 5% level. It is the
    comparator's fallback when raw samples were not saved.

    Example:
        >>> median_interval(10.0, 2.0, 100)
        (9.686, 10.314)
        >>> median_interval(10.0, float("nan"), 100)
        (nan, nan)
    """
    if not (rounds and rounds > 0) or not math.isfinite(iqr) or not math.isfinite(median):
        return (float("nan"), float("nan"))
    half = 1.57 * iqr / math.sqrt(rounds)
    return (round(median - half, 12), round(median + half, 12))


def robust_relative_spread(samples: Sequence[float] | np.ndarray) -> float:
    """The spread of samples relative to their median: ``IQR / 1.349 / median``.

    ``IQR / 1.349`` estimates the standard deviation of a normal distribution while
    ignoring the slow outliers timing data always has. NaN for fewer than two samples
    or a zero median.

    Example:
        >>> round(robust_relative_spread([8.0, 9.0, 10.0, 11.0, 12.0]), 4)
        0.1483
    """
    arr = _as_samples(samples)
    if arr.size < 2:
        return float("nan")
    q1, med, q3 = np.percentile(arr, [25, 50, 75])
    if med <= 0:
        return float("nan")
    return float((q3 - q1) / 1.349 / med)


def robust_location_spread(values: Sequence[float] | np.ndarray) -> tuple[float, float]:
    """The median of ``values`` and their spread, ``1.4826 × MAD`` (a normal's sigma).

    Both resist a few outlying values, e.g. one control benchmark that really moved.
    Non-finite values are dropped; NaN for fewer than two values.

    Example:
        >>> robust_location_spread([3.0, 2.0, 4.0, 3.0, 30.0])
        (3.0, 1.4826)
    """
    arr = _as_samples(values)
    if arr.size < 2:
        return float("nan"), float("nan")
    med = float(np.median(arr))
    return med, float(1.4826 * np.median(np.abs(arr - med)))


def mann_whitney_p(head: Sequence[float], base: Sequence[float]) -> float:
    """Two-sided Mann–Whitney U p-value that ``head`` and ``base`` share a distribution.

    NaN when either side has fewer than two finite samples; 1.0 when all samples are
    identical (no evidence of a difference).

    Example:
        >>> round(mann_whitney_p([1, 2, 3, 4, 5], [6, 7, 8, 9, 10]), 4)
        0.0079
        >>> mann_whitney_p([1.0], [2.0, 3.0])
        nan
    """
    a, b = _as_samples(head), _as_samples(base)
    if a.size < 2 or b.size < 2:
        return float("nan")
    if np.all(a == a[0]) and np.all(b == a[0]):
        return 1.0
    return float(_sp.mannwhitneyu(a, b, alternative="two-sided").pvalue)


#: Up to this many samples, bootstrap medians come from plain resampling; above, from
#: the exact distribution of the resampled median (same answer, bounded cost).
EXACT_BOOTSTRAP_ABOVE = 100


def _bootstrap_medians(x: np.ndarray, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Medians of ``n_resamples`` bootstrap resamples of ``x``.

    Small samples are resampled directly. For large
    ones the median is drawn from its exact bootstrap distribution: a resample's
    ``m``-th order statistic is at most ``x_(k)`` exactly when at least ``m`` of its
    ``n`` draws fall on ``x_(1..k)``, so ``P = P(Binomial(n, k/n) >= m)`` (Efron
    1979); inverting that CDF costs O(n) instead of O(n) per replicate. For even ``n``
    the two middle order statistics share their uniforms and are averaged, which is
    indistinguishable from resampling at these sizes.
    """
    xs = np.sort(x)
    n = xs.size
    if n <= EXACT_BOOTSTRAP_ABOVE:
        return np.median(xs[rng.integers(0, n, size=(n_resamples, n))], axis=1)
    k = np.arange(1, n + 1)
    draws = rng.random(n_resamples)

    def order_stat(m: int) -> np.ndarray:
        cdf = _sp.binom.sf(m - 1, n, k / n)
        idx = np.searchsorted(cdf, draws, side="left")
        return xs[np.minimum(idx, n - 1)]

    if n % 2:
        return order_stat((n + 1) // 2)
    return (order_stat(n // 2) + order_stat(n // 2 + 1)) / 2


def bootstrap_ratio_ci(
    head: Sequence[float],
    base: Sequence[float],
    *,
    confidence: float = 0.95,
    n_resamples: int = 2_000,
    seed: int = 0,
) -> tuple[float, float, float]:
    """Percentile-bootstrap interval for ``median(head) / median(base)``.

    Both sides are resampled independently with a fixed ``seed`` (reproducible).
    Each resample's median is drawn from its exact bootstrap distribution, so the
    cost does not grow with the number of rounds times replicates.

    Args:
        head: per-round times of the new run.
        base: per-round times of the reference run.
        confidence: two-sided coverage of the interval.
        n_resamples: bootstrap replicates.
        seed: seed of the resampling generator.

    Returns:
        ``(ratio, low, high)``; all NaN when a side has no finite samples or a zero
        median.

    Example:
        >>> ratio, low, high = bootstrap_ratio_ci([2.0, 2.1, 1.9, 2.0], [1.0, 1.05, 0.95, 1.0])
        >>> ratio, low <= ratio <= high
        (2.0, True)
    """
    a, b = _as_samples(head), _as_samples(base)
    nan3 = (float("nan"),) * 3
    if a.size == 0 or b.size == 0:
        return nan3
    med_a, med_b = float(np.median(a)), float(np.median(b))
    if med_b <= 0 or med_a < 0:
        return nan3
    rng = np.random.default_rng(seed)
    boot_a = _bootstrap_medians(a, n_resamples, rng)
    boot_b = _bootstrap_medians(b, n_resamples, rng)
    ok = boot_b > 0
    ratios = boot_a[ok] / boot_b[ok]
    if ratios.size == 0:
        return nan3
    tail = (1.0 - confidence) / 2 * 100
    low, high = np.percentile(ratios, [tail, 100 - tail])
    return (med_a / med_b, float(low), float(high))


def minimal_detectable_change(
    head: Sequence[float],
    base: Sequence[float],
    *,
    alpha: float = 0.05,
    power: float = 0.8,
) -> float:
    """Smallest relative change (in %) detectable with ``power`` at level ``alpha``.

    From the samples' own noise, each side's relative to its own median:
    ``(z₁₋α/2 + z_power) · √(r_h²/n_h + r_b²/n_b)`` with ``r = IQR / 1.349 / median``
    (:func:`robust_relative_spread`). A change below this is indistinguishable from
    noise with the rounds that were run. (Each side relative to its own median: a head
    117 times slower has 117 times the absolute spread, which over the base's median
    read as a detectable change of 228 % and hid the slow-down.)

    Example:
        >>> rng = np.random.default_rng(0)
        >>> noisy = 1 + 0.1 * rng.standard_normal(100)
        >>> round(minimal_detectable_change(noisy, noisy), 1)
        4.0
        >>> minimal_detectable_change([1.0], [1.0])
        nan
    """
    a, b = _as_samples(head), _as_samples(base)
    if a.size < 2 or b.size < 2 or not (np.median(a) > 0 and np.median(b) > 0):
        return float("nan")
    z = _sp.norm.ppf(1 - alpha / 2) + _sp.norm.ppf(power)
    se = math.sqrt(
        robust_relative_spread(a) ** 2 / a.size + robust_relative_spread(b) ** 2 / b.size
    )
    return float(z * se * 100)


def log_run_variance(
    head_run_medians: Sequence[float], base_run_medians: Sequence[float]
) -> tuple[float, int]:
    """The pooled within-side variance of the log run medians, and its degrees of freedom.

    Returns ``(nan, 0)`` when a side has fewer than two runs or a median is not positive.

    Example:
        >>> var, df = log_run_variance([1.0, 1.1], [2.0, 2.2])
        >>> round(var, 5), df
        (0.00454, 2)
    """
    h = np.asarray(head_run_medians, dtype=float)
    b = np.asarray(base_run_medians, dtype=float)
    if h.size < 2 or b.size < 2 or not (np.all(h > 0) and np.all(b > 0)):
        return float("nan"), 0
    lh, lb = np.log(h), np.log(b)
    df = h.size + b.size - 2
    return float((((lh - lh.mean()) ** 2).sum() + ((lb - lb.mean()) ** 2).sum()) / df), df


def _trigamma_inverse(x: float) -> float:
    """The y with trigamma(y) = x, by Newton's method on 1/trigamma (Smyth 2004)."""
    from scipy.special import polygamma

    if x > 1e7:
        return 1 / math.sqrt(x)
    if x < 1e-6:
        return 1 / x
    y = 0.5 + 1 / x
    for _ in range(50):
        tri = float(polygamma(1, y))
        step = tri * (1 - tri / x) / float(polygamma(2, y))
        y += step
        if -step / y < 1e-8:
            break
    return y


def fit_variance_prior(
    variances: Sequence[float], dfs: Sequence[int]
) -> tuple[float, float] | None:
    """Empirical-Bayes prior of many benchmarks' variances: ``(s0², d0)``.

    Each benchmark's sample variance (few degrees of freedom: two runs a side give two)
    is modelled as ``s0² × χ²(d0)/d0`` a priori, and ``s0²``, ``d0`` are fitted by the
    moments of the log variances (Smyth 2004, "Linear models and empirical Bayes methods
    for assessing differential expression", the method behind limma's moderated t).
    :func:`run_level_noise` then shrinks each benchmark's variance toward ``s0²`` with
    weight ``d0``, and its t interval gains ``d0`` degrees of freedom. Heterogeneous
    benchmarks give a small ``d0`` (little shrinkage); ``d0`` is infinite when the
    variances are no more spread than sampling alone explains.

    Args:
        variances: per benchmark, the variance (positive entries are used).
        dfs: its degrees of freedom.

    Returns:
        ``(s0², d0)``, or None with fewer than three usable benchmarks.

    Example:
        >>> rng = np.random.default_rng(1)
        >>> v = 0.01 * rng.chisquare(2, 400) / 2          # all alike, 2 df each
        >>> s0, d0 = fit_variance_prior(v, [2] * 400)
        >>> round(s0, 3), d0 > 50
        (0.01, True)
    """
    from scipy.special import digamma, polygamma

    pairs = [(v, d) for v, d in zip(variances, dfs) if d > 0 and math.isfinite(v) and v > 0]
    if len(pairs) < 3:
        return None
    var = np.array([v for v, _ in pairs])
    df = np.array([d for _, d in pairs], dtype=float)
    e = np.log(var) - digamma(df / 2) + np.log(df / 2)
    mean = float(e.mean())
    excess = float(((e - mean) ** 2).sum() / (e.size - 1) - polygamma(1, df / 2).mean())
    if excess <= 0:
        return math.exp(mean), math.inf
    d0 = 2 * _trigamma_inverse(excess)
    return math.exp(mean + float(digamma(d0 / 2)) - math.log(d0 / 2)), d0


def fit_prior_stretch(
    variances: Sequence[float],
    dfs: Sequence[int],
    priors: Sequence[tuple[float, float]],
) -> tuple[float, float] | None:
    """How far today's variances stand beyond their priors, fitted over all benchmarks:
    ``(stretch, d0)``.

    Each benchmark's prior ``(s0², d0)`` comes from another day (an A/A pool); on a
    busier day every variance grows, and a calm day's prior lent to a test whose own
    pairs happen to lie close together reads a few pairs' noise as a change: with a
    paired test's 4 pairs, priors of 12 pairs and pairs spreading 3× the pool's, normal
    log ratios flag one of 30 benchmarks in about three A/A runs of four. So the priors
    are stretched by the day: the ratios ``s² / s0²`` are fitted like variances
    (:func:`fit_variance_prior`), giving their typical size (the stretch, at least 1: a
    calm day never narrows a prior) and how evenly the benchmarks widened (``d0``, small
    when they widened unevenly, so that each benchmark's own variance then weighs more).
    A benchmark whose ratio is far beyond the others' (beyond the ``1 − PRIOR_CONFLICT_P``
    quantile of its prior stretched by the ratios' median, :func:`prior_conflict`) is
    left out of the fit, as it is judged on its own variance anyway: one wild benchmark
    would otherwise make every prior weigh less (the idea of Phipson et al. 2016).
    A benchmark's prior becomes ``(stretch · s0², min(d0, its own d0))``. Simulated
    with normal log ratios (30 benchmarks, 4 pairs, priors of 12 pairs, a 5 % control
    floor, a confirmation of 4 more pairs; ``reports/sims/prior_stretch.py``), A/A runs
    confirmed a false alarm in 0.15–0.85 % of runs on days 2–4× as spread as the pool's,
    the benchmarks widening evenly or unevenly (log-normal, σ = 0.4), against 5.8–16 %
    with the pool's priors as they are.

    Args:
        variances: per benchmark, today's variance (e.g. of its pairs' log ratios).
        dfs: its degrees of freedom.
        priors: its prior ``(s0², d0)``, the same order.

    Returns:
        ``(stretch, d0)`` (``d0`` may be infinite), or None with fewer than three
        benchmarks with a positive variance and prior.

    Example:
        >>> rng = np.random.default_rng(3)
        >>> s0 = 0.02 * rng.uniform(0.5, 2.0, 300)            # each its own calm spread
        >>> today = (3 * s0) ** 2 * rng.chisquare(3, 300) / 3  # 3x as wide, 4 pairs each
        >>> stretch, d0 = fit_prior_stretch(today, [3] * 300, [(v, 11) for v in s0**2])
        >>> 2.8 < math.sqrt(stretch) < 3.2, d0 > 20
        (True, True)
        >>> fit_prior_stretch([1e-4, 1e-4, 1e-4], [3, 3, 3], [(4e-4, 11)] * 3)[0]
        1.0
    """
    usable = [
        (v / p, d, p0)
        for v, d, (p, p0) in zip(variances, dfs, priors, strict=True)
        if d > 0 and p0 > 0 and p > 0 and math.isfinite(p) and math.isfinite(v) and v > 0
    ]
    if len(usable) < 3:
        return None
    # a first, robust stretch: the median ratio over the median of its law on a day
    # like the prior's, F(d, d0)
    typical = float(np.median([r / _sp.f.median(d, p0) for r, d, p0 in usable]))
    rough = max(typical, 1.0)
    kept = [(r, d, p0) for r, d, p0 in usable if not prior_conflict(r, d, (rough, p0))]
    # (the pool's own sampling of s0² needs no correction: the ratios then follow
    # λ² · F(d, d0), an inverse-χ² spread the fit takes as the prior's and returns the
    # scale of, with d0 about the pool's degrees of freedom on an even day)
    fit = fit_variance_prior([r for r, _, _ in kept], [d for _, d, _ in kept])
    if fit is None:
        return None
    stretch, d0 = fit
    return max(stretch, 1.0), d0


PRIOR_CONFLICT_P = 0.001
"""The level at which a benchmark's own variance disowns its prior (see
:func:`prior_conflict`)."""


def prior_conflict(variance: float, df: float, prior: tuple[float, float] | None) -> bool:
    """Whether a benchmark's own variance ``s²`` (on ``df`` degrees of freedom) is too
    large for its prior ``(s0², d0)``: beyond the ``1 − PRIOR_CONFLICT_P`` quantile of
    ``s0² · F(df, d0)`` (``s0² · χ²(df) / df`` for an infinite ``d0``), the law ``s²``
    follows when the prior describes this run.

    A prior from A/A pairs of another day lends a benchmark many degrees of freedom; on
    a machine where that benchmark now jumps between two speeds from process to
    process, the shrunk variance would still be the calm day's, and a change of a few
    pairs read as certain: an A/A ``make bench`` flagged (and confirmed)
    ``collector_with_rb[rlpace-single]`` at -23 % so, its pairs spreading 12 % against
    a prior of 1 %. Such a benchmark is judged on its own variance instead (the idea of
    Phipson et al., "Robust hyperparameter estimation protects against hypervariable
    genes", Ann. Appl. Stat. 2016, reduced to all or nothing); it only ever widens a
    test.

    Example:
        >>> prior = (0.0098**2, 16)
        >>> prior_conflict(0.012**2, 3, prior), prior_conflict(0.123**2, 3, prior)
        (False, True)
    """
    if prior is None or not (df > 0 and math.isfinite(variance)):
        return False
    s0, d0 = prior
    if not s0 > 0:
        return variance > 0
    if math.isinf(d0):
        ratio = float(_sp.chi2.isf(PRIOR_CONFLICT_P, df)) / df
    else:
        ratio = float(_sp.f.isf(PRIOR_CONFLICT_P, df, d0))
    return variance > s0 * ratio


def _moderated(
    variance: float, df: float, prior: tuple[float, float] | None
) -> tuple[float, float]:
    """A variance shrunk toward the prior ``(s0², d0)``: ``(d0·s0² + d·s²) / (d0 + d)`` on
    ``d0 + d`` degrees of freedom (an infinite ``d0``: the prior's, on a large number);
    its own when it disowns the prior (:func:`prior_conflict`)."""
    if prior is None or prior_conflict(variance, df, prior):
        return variance, df
    s0, d0 = prior
    if math.isinf(d0):
        return s0, 10**6
    return (d0 * s0 + df * variance) / (d0 + df), df + d0


def run_level_noise(
    head_run_medians: Sequence[float],
    base_run_medians: Sequence[float],
    *,
    alpha: float = 0.05,
    power: float = 0.8,
    prior: tuple[float, float] | None = None,
) -> tuple[float, float]:
    """Half-width and minimal detectable change of the log ratio head/base, with the
    *process* as the unit of replication.

    Rounds taken in one process share its memory layout, its CPU placement and its
    neighbours on the machine, so they are not independent: a benchmark whose processes
    differ (common for multi-process cases) can look significant over hundreds of pooled
    rounds while another pair of processes would say the opposite. Here each run's median
    is one observation; the log medians' variance is pooled over both sides (two-sample
    t, ``k_h + k_b − 2`` degrees of freedom) and turned into the half-width of a
    ``1 − alpha`` interval on ``log(head / base)`` and the log change detectable with
    ``power``. With a ``prior`` from :func:`fit_variance_prior` the variance is the
    moderated one, ``(d0·s0² + d·s²) / (d0 + d)`` on ``d0 + d`` degrees of freedom.
    ``math.expm1(x) * 100`` turns either figure into a percentage.

    Args:
        head_run_medians: one median per head run (process).
        base_run_medians: one median per base run.
        alpha: two-sided level of the interval.
        power: detection probability of the minimal detectable change.
        prior: ``(s0², d0)`` of the variances of all benchmarks compared together.

    Returns:
        ``(half_width, mdc)`` in natural-log units, NaN when a side has fewer than two
        runs or a median is not positive.

    Example:
        >>> half, mdc = run_level_noise([1.00, 1.02], [1.01, 0.99])
        >>> round(math.expm1(half) * 100, 1), round(math.expm1(mdc) * 100, 1)
        (6.2, 7.8)
        >>> half, _ = run_level_noise([1.00, 1.02], [1.01, 0.99], prior=(1e-4, 8.0))
        >>> round(math.expm1(half) * 100, 1)
        2.5
        >>> run_level_noise([1.0], [1.0, 1.1])
        (nan, nan)
    """
    pooled, df = log_run_variance(head_run_medians, base_run_medians)
    if df == 0:
        return float("nan"), float("nan")
    pooled, df = _moderated(pooled, df, prior)
    k_h, k_b = len(head_run_medians), len(base_run_medians)
    se = math.sqrt(pooled * (1 / k_h + 1 / k_b))
    t_alpha = float(_sp.t.ppf(1 - alpha / 2, df))
    t_power = float(_sp.t.ppf(power, df))
    return t_alpha * se, (t_alpha + t_power) * se


def paired_log_variance(
    head_run_medians: Sequence[float], base_run_medians: Sequence[float]
) -> tuple[float, int]:
    """The variance of the pairs' log ratios ``log(head_k / base_k)`` and its degrees of
    freedom (pairs − 1): run ``k`` of each side ran at the same time (a duet).

    Returns ``(nan, 0)`` with fewer than two pairs, sides of different lengths or a
    median that is not positive.

    Example:
        >>> var, df = paired_log_variance([1.0, 2.0, 1.5], [1.0, 2.0, 1.5])
        >>> round(var, 9), df   # the load moved both sides alike: nothing left
        (0.0, 2)
        >>> paired_log_variance([1.0, 1.1], [1.0])
        (nan, 0)
    """
    d = _log_ratios(head_run_medians, base_run_medians)
    if d is None:
        return float("nan"), 0
    return float(d.var(ddof=1)), int(d.size - 1)


def _log_ratios(head: Sequence[float], base: Sequence[float]) -> np.ndarray | None:
    """``log(head_k / base_k)`` of two or more pairs; None when there are fewer, the
    sides differ in length or a median is not positive."""
    h, b = np.asarray(head, dtype=float), np.asarray(base, dtype=float)
    if h.size < 2 or h.size != b.size or not (np.all(h > 0) and np.all(b > 0)):
        return None
    return np.log(h) - np.log(b)


def paired_run_test(
    head_run_medians: Sequence[float],
    base_run_medians: Sequence[float],
    *,
    alpha: float = 0.05,
    power: float = 0.8,
    prior: tuple[float, float] | None = None,
) -> tuple[float, float, float, float]:
    """The duet's change judged pair by pair: a (moderated) paired t on the log ratios.

    Base and head run ``k`` ran at the same time, one per core (Bulej et al., ICPE
    2020), so the load both met cancels in their ratio: in an A/A duet of the
    wall-clock cases on the 2-core machine the pairs' log ratios spread 6.7 % (median
    over 35 cases) where single runs spread 19 %. With a ``prior`` ``(s0², d0)`` from
    :func:`fit_variance_prior` over the pairs of every benchmark compared together,
    the variance is the moderated one, ``(d0·s0² + d·s²) / (d0 + d)`` on ``d0 + d``
    degrees of freedom (Smyth 2004).

    Args:
        head_run_medians: each head run's median, in repeat order.
        base_run_medians: each base run's median, the same repeats.
        alpha: two-sided level of the interval and the test.
        power: detection probability of the minimal detectable change.
        prior: ``(s0², d0)`` of the paired variances of all benchmarks compared.

    Returns:
        ``(mean, half_width, mdc, p_value)``: the mean log ratio head/base, the
        half-width of its ``1 − alpha`` interval, the log change detectable with
        ``power`` (natural-log units; ``math.expm1(x) * 100`` for %), and the two-sided
        p-value of "no change". All NaN when :func:`paired_log_variance` is.

    Example:
        >>> mean, half, mdc, p = paired_run_test([1.10, 1.32, 1.21, 0.99], [1.0, 1.2, 1.1, 0.9])
        >>> round(math.expm1(mean) * 100, 1), p < 1e-6
        (10.0, True)
        >>> mean, half, mdc, p = paired_run_test([1.0, 1.3, 0.9], [1.1, 1.2, 1.0])
        >>> round(math.expm1(half) * 100, 1), round(p, 2)
        (29.6, 0.57)
    """
    d = _log_ratios(head_run_medians, base_run_medians)
    if d is None:
        nan = float("nan")
        return nan, nan, nan, nan
    var, df = _moderated(float(d.var(ddof=1)), d.size - 1, prior)
    mean = float(d.mean())
    se = math.sqrt(var / d.size)
    t_alpha = float(_sp.t.ppf(1 - alpha / 2, df))
    t_power = float(_sp.t.ppf(power, df))
    no_spread = 0.0 if mean != 0 else 1.0
    p = float(2 * _sp.t.sf(abs(mean) / se, df)) if se > 0 else no_spread
    return mean, t_alpha * se, (t_alpha + t_power) * se, p


def benjamini_hochberg(p_values: Sequence[float] | np.ndarray) -> np.ndarray:
    """Benjamini–Hochberg q-values (false discovery rate adjusted p-values).

    NaN p-values (benchmarks without a test) stay NaN and do not count as tests.

    Example:
        >>> benjamini_hochberg([0.01, float("nan"), 0.02, 0.5]).round(3).tolist()
        [0.03, nan, 0.03, 0.5]
    """
    p = np.asarray(p_values, dtype=float)
    q = np.full(p.shape, np.nan)
    ok = np.isfinite(p)
    m = int(ok.sum())
    if m == 0:
        return q
    pv = p[ok]
    order = np.argsort(pv)
    ranked = pv[order] * m / np.arange(1, m + 1)
    ranked = np.minimum.accumulate(ranked[::-1])[::-1]
    out = np.empty(m)
    out[order] = np.clip(ranked, 0.0, 1.0)
    q[ok] = out
    return q


def binomial_upper_bound(hits: int, trials: int, confidence: float = 0.95) -> float:
    """One-sided Clopper–Pearson upper bound of a rate seen as ``hits`` of ``trials``.

    What a measured false-alarm rate can be trusted to stay under: no alarm in 16 A/A
    runs still allows a true rate of 17% at 95% confidence. NaN without trials.

    Example:
        >>> round(binomial_upper_bound(0, 16), 3), round(binomial_upper_bound(1, 28), 3)
        (0.171, 0.159)
        >>> binomial_upper_bound(5, 5)
        1.0
    """
    if not (0 < confidence < 1):
        raise ValueError(f"confidence: expected a probability in (0, 1), got {confidence!r}")
    if trials <= 0:
        return math.nan
    if not 0 <= hits <= trials:
        raise ValueError(f"hits: expected 0 <= hits <= trials = {trials}, got {hits!r}")
    if hits == trials:
        return 1.0
    return float(_sp.beta.ppf(confidence, hits + 1, trials - hits))
