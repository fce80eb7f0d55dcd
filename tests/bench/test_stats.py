"""Pure statistics checked against distributions with known answers."""

import ast
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sp

from rlpace.bench import stats


def test_summarize_matches_numpy():
    rng = np.random.default_rng(0)
    x = rng.lognormal(0, 0.3, 500)
    s = stats.summarize(x)
    assert s["mean"] == pytest.approx(x.mean())
    assert s["stddev"] == pytest.approx(x.std(ddof=1))
    assert s["median"] == pytest.approx(np.median(x))
    assert s["iqr"] == pytest.approx(np.percentile(x, 75) - np.percentile(x, 25))
    assert s["ops"] == pytest.approx(1 / x.mean())
    assert (s["min"], s["max"], s["rounds"]) == (x.min(), x.max(), 500)


def test_summarize_drops_non_finite_and_handles_zero():
    s = stats.summarize([1.0, float("nan"), 3.0, float("inf")])
    assert s["rounds"] == 2 and s["mean"] == 2.0
    assert stats.summarize([0.0, 0.0])["ops"] == math.inf
    assert stats.summarize([5.0])["stddev"] == 0.0


def test_benjamini_hochberg_matches_scipy():
    rng = np.random.default_rng(1)
    p = rng.random(200) ** 3
    np.testing.assert_allclose(stats.benjamini_hochberg(p), sp.false_discovery_control(p))


def test_mann_whitney_matches_scipy_and_degenerate_cases():
    rng = np.random.default_rng(2)
    a, b = rng.normal(0, 1, 40), rng.normal(0.5, 1, 40)
    assert stats.mann_whitney_p(a, b) == pytest.approx(sp.mannwhitneyu(a, b).pvalue)
    assert stats.mann_whitney_p([1.0, 1.0, 1.0], [1.0, 1.0]) == 1.0
    assert math.isnan(stats.mann_whitney_p([1.0], [1.0, 2.0]))


def test_bootstrap_interval_covers_the_true_ratio_about_95_percent_of_the_time():
    true_ratio = 1.2
    covered = 0
    for seed in range(200):
        rng = np.random.default_rng(seed)
        base = rng.lognormal(0, 0.1, 60)
        head = true_ratio * rng.lognormal(0, 0.1, 60)
        _, low, high = stats.bootstrap_ratio_ci(head, base, n_resamples=400, seed=seed)
        covered += low <= true_ratio <= high
    assert 0.88 <= covered / 200 <= 0.99


def test_bootstrap_is_deterministic_and_handles_zero_median():
    rng = np.random.default_rng(3)
    a, b = rng.random(30), rng.random(30)
    assert stats.bootstrap_ratio_ci(a, b) == stats.bootstrap_ratio_ci(a, b)
    assert all(math.isnan(v) for v in stats.bootstrap_ratio_ci([1.0, 2.0], [0.0, 0.0, 0.0]))
    assert all(math.isnan(v) for v in stats.bootstrap_ratio_ci([], [1.0]))


def test_long_inputs_are_cheap():
    rng = np.random.default_rng(4)
    a = rng.lognormal(0, 0.1, 200_000)
    ratio, low, high = stats.bootstrap_ratio_ci(a, a)
    assert low < 1.0 < high
    assert ratio == 1.0


@pytest.mark.parametrize("n", [5, 6, 41, 300, 1000])
def test_exact_bootstrap_medians_match_brute_force_resampling(n):
    rng = np.random.default_rng(n)
    x = rng.lognormal(0, 0.3, n)
    brute = np.median(x[rng.integers(0, n, (20_000, n))], axis=1)
    fast = stats._bootstrap_medians(x, 20_000, rng)
    quantiles = [2.5, 10, 50, 90, 97.5]
    np.testing.assert_allclose(
        np.percentile(fast, quantiles), np.percentile(brute, quantiles), rtol=0.03
    )


def test_minimal_detectable_change_shrinks_with_more_rounds():
    rng = np.random.default_rng(5)
    small = stats.minimal_detectable_change(rng.normal(1, 0.1, 20), rng.normal(1, 0.1, 20))
    large = stats.minimal_detectable_change(rng.normal(1, 0.1, 2000), rng.normal(1, 0.1, 2000))
    # sigma 10%, (1.96 + 0.84) * 0.1 * sqrt(2 / n)
    assert small == pytest.approx(2.8 * 10 * math.sqrt(2 / 20), rel=0.35)
    assert large == pytest.approx(2.8 * 10 * math.sqrt(2 / 2000), rel=0.1)


def test_median_interval_is_the_box_plot_notch():
    low, high = stats.median_interval(1.0, 0.2, 25)
    assert (low, high) == pytest.approx((1.0 - 1.57 * 0.2 / 5, 1.0 + 1.57 * 0.2 / 5))
    assert all(math.isnan(v) for v in stats.median_interval(1.0, 0.2, 0))


def test_stats_module_imports_only_numpy_and_scipy():
    source = Path(stats.__file__).read_text()
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    assert imported <= {"numpy", "scipy", "math", "collections", "__future__"}


def test_run_level_noise_is_a_pooled_two_sample_t_on_log_medians():
    run_level_noise = stats.run_level_noise
    head, base = [1.0, 1.1, 1.05], [0.9, 0.95, 1.0]
    half, mdc = run_level_noise(head, base)
    # the same interval from scipy's pooled t-test on the logs
    res = sp.ttest_ind(np.log(head), np.log(base), equal_var=True)
    low, high = res.confidence_interval(0.95)
    assert half == pytest.approx((high - low) / 2, rel=1e-9)
    df = 4
    se = half / sp.t.ppf(0.975, df)
    assert mdc == pytest.approx((sp.t.ppf(0.975, df) + sp.t.ppf(0.8, df)) * se)
    # identical processes: no process noise at all; a lone run: none can be measured
    assert run_level_noise([2.0, 2.0], [2.0, 2.0]) == (0.0, 0.0)
    assert all(math.isnan(x) for x in run_level_noise([1.0], [1.0, 1.0]))
    assert all(math.isnan(x) for x in run_level_noise([1.0, 0.0], [1.0, 1.0]))


def test_variance_prior_recovers_a_common_variance_and_sees_heterogeneity():
    fits = []
    for seed in range(6, 12):  # (seed 5 is the unlucky one in ten: d0 = 4.7)
        rng = np.random.default_rng(seed)
        fits.append(stats.fit_variance_prior(0.01 * rng.chisquare(2, 600) / 2, [2] * 600))
    assert all(s0 == pytest.approx(0.01, rel=0.1) and d0 > 50 for s0, d0 in fits), fits
    spread_out = 0.01 * np.exp(rng.normal(0, 1.0, 600)) * rng.chisquare(2, 600) / 2
    _, d0_het = stats.fit_variance_prior(spread_out, [2] * 600)
    assert 1 < d0_het < 6  # benchmarks unlike each other: little borrowing
    assert stats.fit_variance_prior([0.01, 0.02], [2, 2]) is None  # too few to fit
    assert stats.fit_variance_prior([0.0, 0.01, 0.02, float("nan")], [2] * 4) is None


def _day(rng, stretch, benchmarks=400, pairs=4, pool_pairs=12, uneven=0.0):
    """Today's pair variances and their pool priors: each benchmark's own calm spread,
    its pool estimate from ``pool_pairs`` pairs, and today's from ``pairs`` pairs of a
    day ``stretch`` times as wide (times a log-normal of ``uneven``, per benchmark)."""
    calm = (0.02 * rng.uniform(0.5, 2.0, benchmarks)) ** 2
    pool = calm * rng.chisquare(pool_pairs - 1, benchmarks) / (pool_pairs - 1)
    wide = stretch * calm * np.exp(rng.normal(0, uneven, benchmarks))
    today = wide * rng.chisquare(pairs - 1, benchmarks) / (pairs - 1)
    return today.tolist(), [pairs - 1] * benchmarks, [(v, pool_pairs - 1) for v in pool]


def test_prior_stretch_reads_a_days_width_and_how_evenly_benchmarks_widened():
    rng = np.random.default_rng(12)
    # a day 9x the pool's variance (3x its spread), widened evenly: recovered, and the
    # pool's own sampling of s0 (12 pairs) does not bias it
    stretch, d0 = stats.fit_prior_stretch(*_day(rng, 9.0))
    assert stretch == pytest.approx(9.0, rel=0.12) and d0 > 8
    # a day like the pool's never narrows a prior
    assert stats.fit_prior_stretch(*_day(rng, 1.0))[0] == pytest.approx(1.0, abs=0.15)
    assert stats.fit_prior_stretch(*_day(rng, 0.5))[0] == 1.0
    # unevenly: each prior then lends fewer degrees of freedom
    _, d0_uneven = stats.fit_prior_stretch(*_day(rng, 9.0, uneven=1.0))
    assert d0_uneven < 4
    # one wild benchmark (its pairs 30x its prior) is left to its own pairs, not let
    # pull every other benchmark's degrees of freedom down
    today, dfs, priors = _day(rng, 4.0, benchmarks=30)
    with_wild = stats.fit_prior_stretch([today[0] * 900, *today[1:]], dfs, priors)
    without = stats.fit_prior_stretch(today[1:], dfs[1:], priors[1:])
    assert with_wild == pytest.approx(without, rel=1e-9)
    assert stats.fit_prior_stretch([0.01, 0.02], [3, 3], [(0.01, 11)] * 2) is None
    assert stats.fit_prior_stretch([0.0, 0.01, 0.02], [3] * 3, [(0.01, 11)] * 3) is None


def test_binomial_upper_bound_matches_the_exact_zero_case_and_refuses_bad_counts():
    import math

    import pytest

    from rlpace.bench.stats import binomial_upper_bound

    # with no hit the one-sided bound has a closed form: 1 - (1 - c)^(1/n)
    assert math.isclose(binomial_upper_bound(0, 59), 1 - 0.05 ** (1 / 59))
    assert binomial_upper_bound(0, 59) < 0.05 < binomial_upper_bound(0, 58)
    assert binomial_upper_bound(3, 20) > binomial_upper_bound(1, 20) > 1 / 20
    assert math.isnan(binomial_upper_bound(0, 0))
    with pytest.raises(ValueError, match="hits: expected 0 <= hits <= trials = 4, got 5"):
        binomial_upper_bound(5, 4)
    with pytest.raises(ValueError, match="confidence: expected a probability in"):
        binomial_upper_bound(1, 4, confidence=95)


def test_a_benchmark_whose_pairs_disown_their_prior_is_judged_on_its_own_spread():
    """The medians (ms) of an A/A ``make bench`` on 2026-12-02, where
    ``collector_with_rb[rlpace-single]`` jumped between ~6 and ~11 ms from process to
    process: its prior (1 % pair spread, 16 A/A pairs of another day) made -23 % look
    certain (p ~ 1e-9); on its own 4 pairs it is not significant at the Bonferroni
    level of 23 benchmarks. A calm benchmark keeps the prior's strength."""
    head, base = [11.52, 8.92, 9.50, 10.26], [10.51, 6.30, 6.65, 7.91]
    prior = (0.0098**2, 16)
    mean, half, _, p = stats.paired_run_test(head, base, alpha=0.05 / 23, prior=prior)
    assert math.expm1(mean) > 0.25 and half > mean and p > 0.05 / 23
    d = np.log(np.array(head) / np.array(base))
    assert stats.prior_conflict(float(d.var(ddof=1)), 3, prior)
    # what the prior alone would have said (the moderated variance of before)
    shrunk = (16 * prior[0] + 3 * d.var(ddof=1)) / 19
    assert 2 * sp.t.sf(d.mean() / math.sqrt(shrunk / 4), 19) < 1e-6
    calm_head = [1.010, 1.022, 1.003, 1.015]  # pairs within ~1 %: the prior stands
    _, _, _, p_calm = stats.paired_run_test(calm_head, [1.0] * 4, prior=prior)
    own = np.log(calm_head)
    assert not stats.prior_conflict(float(own.var(ddof=1)), 3, prior)
    _, _, _, p_own = stats.paired_run_test(calm_head, [1.0] * 4)
    assert p_calm < p_own  # the prior's degrees of freedom still sharpen a calm row
