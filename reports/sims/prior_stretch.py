"""Simulated A/A `pr` runs of the paired judge: the duet pool's priors lent as they are,
or stretched by the day (`rlpace.bench.stats.fit_prior_stretch`), as in
`reports/README.md`, twenty-fourth session.

Each run: 30 rows with the checked-in pool's pair spreads (2026-12-05), their priors
estimated from 12 pairs, today's 4 pairs (``--pairs``) from a day ``day`` times as spread (times a
log-normal of σ ``uneven`` per row; ``day`` multiplies the spreads), normal log ratios; a row is flagged when its
moderated paired t is significant at 0.05 / 30 and its change beats a 5 % control floor;
a flag is confirmed on 4 fresh pairs at 0.05, the same way, beyond the 2 % threshold.
The paired test is :func:`rlpace.bench.stats.paired_run_test`'s, vectorised.

Example:
    $ .venv/bin/python reports/sims/prior_stretch.py --runs 2000   # about a minute
    $ .venv/bin/python reports/sims/prior_stretch.py --pairs 2     # were the planned pairs cut
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy import stats as sp

from rlpace.bench.stats import PRIOR_CONFLICT_P, fit_prior_stretch

POOL_SPREADS = np.array(
    [2.89, 4.16, 3.08, 3.32, 2.86, 3.68, 2.32, 1.81, 1.93, 3.69, 2.53, 2.59, 2.30, 1.86,
     1.20, 4.67, 3.24, 1.17, 2.06, 2.02, 1.40, 1.32, 1.71, 4.07, 2.50, 1.71, 1.98, 2.33,
     1.19, 1.85]
) / 100  # fmt: skip
POOL_DF, PAIRS, ALPHA, FLOOR, THRESHOLD = 11, 4, 0.05, 0.05, 0.02


def paired(d, prior_var, d0, level):
    """Mean log ratio, p-value and 90 %-power detectable change per row."""
    df = d.shape[-1] - 1
    mean, s2 = d.mean(-1), d.var(-1, ddof=1)
    conflict = s2 > prior_var * sp.f.isf(PRIOR_CONFLICT_P, df, POOL_DF)
    var = np.where(conflict, s2, (d0 * prior_var + df * s2) / (d0 + df))
    dof = np.where(conflict, df, d0 + df)
    se = np.sqrt(var / d.shape[-1])
    p = 2 * sp.t.sf(np.abs(mean) / se, dof)
    mdc = np.expm1((sp.t.ppf(1 - level / 2, dof) + sp.t.ppf(0.9, dof)) * se)
    return mean, p, mdc


def simulate(day, uneven, stretch, runs, rng, pairs=PAIRS):
    """(first-stage rate, confirmed rate, median detectable change) over ``runs`` of
    ``pairs`` pairs a row (a confirmation: 4 fresh pairs)."""
    m = POOL_SPREADS.size
    first = confirmed = 0
    mdcs = []
    for _ in range(runs):
        prior = POOL_SPREADS**2 * rng.chisquare(POOL_DF, m) / POOL_DF
        sd = POOL_SPREADS * day * np.exp(rng.normal(0, uneven, m))
        d = rng.normal(0, 1, (m, pairs)) * sd[:, None]
        fit = None
        if stretch:
            fit = fit_prior_stretch(
                d.var(-1, ddof=1), [pairs - 1] * m, [(v, POOL_DF) for v in prior]
            )
        factor, d0 = fit if fit is not None else (1.0, POOL_DF)
        d0 = min(d0, POOL_DF)
        mean, p, mdc = paired(d, prior * factor, d0, ALPHA / m)
        mdcs.append(mdc)
        flag = (p < ALPHA / m) & (np.abs(np.expm1(mean)) > max(THRESHOLD, FLOOR))
        if flag.any():
            first += 1
            again = rng.normal(0, 1, (m, PAIRS)) * sd[:, None]
            mean2, p2, _ = paired(again, prior * factor, d0, ALPHA)
            keep = flag & (p2 < ALPHA) & (np.sign(mean2) == np.sign(mean))
            confirmed += bool((keep & (np.abs(np.expm1(mean2)) > THRESHOLD)).any())
    return first / runs, confirmed / runs, float(np.median(np.concatenate(mdcs))) * 100


def main() -> None:
    """Print the table of ``reports/README.md`` (twenty-fourth session)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=2)
    parser.add_argument("--pairs", type=int, default=PAIRS, help="a row's pairs in a run")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    print("| day's spread / pool's | uneven σ | rule | first stage | confirmed | median MDC |")
    print("| --- | --- | --- | --- | --- | --- |")
    for uneven in (0.0, 0.4):
        for day in (1.0, 2.0, 4.0):
            for stretch in (False, True):
                a, b, c = simulate(day, uneven, stretch, args.runs, rng, args.pairs)
                rule = "stretched" if stretch else "as lent"
                print(f"| {day:g}× | {uneven} | {rule} | {a:.1%} | {b:.2%} | {c:.1f} % |")


if __name__ == "__main__":
    main()
