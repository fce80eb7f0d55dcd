"""Real A/A duets judged both ways: the duet pool's priors stretched by the day (as
``pr`` judges since the twenty-fourth session) and lent as they are (before), as in
``reports/README.md``.

- ``splits DIR``: random 4 + 4 splits of the A/A duets in ``DIR`` (``head-<k>.json`` /
  ``base-<k>.json``, e.g. from ``rlpace-bench aa --duets``); the first four judged as
  ``pr`` judges its duets, a flag confirmed on the other four. ``--slow P`` instead puts
  a slow-down of ``P`` into one row's head times at a time (its power).
- ``pr-run DIR``: an A/A ``make bench`` checkout's own duets (first and extra stages).

Both judge with ``rlpace.bench.judge.Judge`` and the checked-in duet pool, without the
control floor (``aa --duets`` runs no twins).

Example:
    $ .venv/bin/python reports/sims/stretch_on_real_duets.py splits \\
    ...     build/rlpace-bench/aa/cpu-duets --draws 100
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import random
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

import rlpace.bench.compare as compare_module
from rlpace.bench.calibration import read_duet_calibration
from rlpace.bench.calibration._duet_dirs import pr_run_duets
from rlpace.bench.comparison import Verdict
from rlpace.bench.judge import Judge
from rlpace.bench.results import load_results, merge_runs

FLAGGED = {Verdict.IMPROVED, Verdict.WORSENED}
POOL = Path(__file__).resolve().parents[1] / "calibration" / "cpu-duets.json"
TIMES = ("min", "max", "mean", "stddev", "median", "iqr", "q1", "q3", "ld15iqr", "hd15iqr")


@contextmanager
def rule(stretched: bool) -> Iterator[None]:
    """Judge with the priors stretched (the library as it is) or lent as they are."""
    fit = compare_module.fit_prior_stretch
    if not stretched:
        compare_module.fit_prior_stretch = lambda *args: None
    try:
        yield
    finally:
        compare_module.fit_prior_stretch = fit


def mdcs(comparison) -> np.ndarray:
    """The paired rlpace rows' detectable changes."""
    return np.array([
        r.mdc_pct for r in comparison.rows
        if r.method == "paired" and "[torchrl" not in r.fullname and math.isfinite(r.mdc_pct)
    ])  # fmt: skip


def splits(runs: Path, draws: int, slow: float | None, seed: int) -> None:
    """Random 4 + 4 splits of A/A duets, judged and confirmed both ways."""
    judge = Judge(paired=True, paired_priors=read_duet_calibration(POOL).paired_priors())
    ks = sorted(
        int(p.stem.split("-")[1])
        for p in runs.glob("head-*.json")
        if (runs / f"base-{p.stem.split('-')[1]}.json").is_file()
    )
    raw = {k: json.loads((runs / f"head-{k}.json").read_text()) for k in ks}
    scratch = Path(tempfile.mkdtemp())

    @functools.cache
    def head_file(k: int, row: str | None) -> Path:
        if row is None or slow is None:
            return runs / f"head-{k}.json"
        doc = json.loads(json.dumps(raw[k]))
        for bench in doc["benchmarks"]:
            if bench["fullname"] == row:
                stats = bench["stats"]
                for name in TIMES:
                    stats[name] *= 1 + slow
                stats["ops"] /= 1 + slow
                stats["data"] = [x * (1 + slow) for x in stats["data"]]
        path = scratch / f"head-{k}-{len(list(scratch.iterdir()))}.json"
        path.write_text(json.dumps(doc))
        return path

    load = functools.lru_cache(maxsize=None)(load_results)

    def sides(ids, row=None):
        return (merge_runs([load(head_file(k, row)) for k in ids]),
                merge_runs([load(runs / f"base-{k}.json") for k in ids]))  # fmt: skip

    rows = [b["fullname"] for b in raw[ks[0]]["benchmarks"] if "[torchrl" not in b["fullname"]]
    print(
        f"{len(ks)} duets, {draws} random splits of 4 + 4"
        + (f", {slow:.0%} slower" if slow else "")
    )
    for stretched in (True, False):
        rng = random.Random(seed)
        first = confirmed = 0
        found: list[float] = []
        with rule(stretched):
            targets = rows if slow is not None else [None]
            for row in targets:
                for _ in range(draws):
                    picked = rng.sample(ks, 8)
                    one = judge.judge(*sides(picked[:4], row))
                    found.extend(mdcs(one))
                    hit = [
                        r
                        for r in one.rows
                        if r.verdict in FLAGGED and r.fullname == (row or r.fullname)
                    ]
                    if hit:
                        first += 1
                        again = judge.confirm(one, *sides(picked[4:], row))
                        confirmed += any(
                            r.confirmed and r.fullname == (row or r.fullname) for r in again.rows
                        )
        label = "stretched" if stretched else "as lent"
        m = np.array(found)
        print(f"{label:9s}: first stage {first} of {len(targets) * draws}, confirmed {confirmed}; "
              f"median detectable change {np.median(m):.1f} %, rows at 10 % or less {np.mean(m <= 10):.0%}")  # fmt: skip


def pr_run(checkout: Path) -> None:
    """An A/A pr run's own duets judged both ways."""
    judge = Judge(paired=True, paired_priors=read_duet_calibration(POOL).paired_priors())
    run = pr_run_duets([checkout], "cpu")[0]
    head = merge_runs([load_results(p) for p in run.heads])
    base = merge_runs([load_results(p) for p in run.bases])
    for stretched in (True, False):
        with rule(stretched):
            one = judge.judge(head, base)
        m = mdcs(one)
        flagged = [
            (r.name, round(r.median_change_pct, 1)) for r in one.rows if r.verdict in FLAGGED
        ]
        print(f"{'stretched' if stretched else 'as lent':9s}: flagged {flagged}; median detectable "
              f"change {np.median(m):.1f} %, {int(np.sum(m <= 10))} of {m.size} rows at 10 % or "
              f"less; {one.pair_spread}")  # fmt: skip


def main() -> None:
    """Parse the command line and run the chosen check."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    one = sub.add_parser("splits")
    one.add_argument("dir", type=Path)
    one.add_argument("--draws", type=int, default=100)
    one.add_argument("--slow", type=float, default=None)
    one.add_argument("--seed", type=int, default=0)
    two = sub.add_parser("pr-run")
    two.add_argument("dir", type=Path)
    args = parser.parse_args()
    if args.what == "splits":
        splits(args.dir, args.draws, args.slow, args.seed)
    else:
        pr_run(args.dir)


if __name__ == "__main__":
    main()
