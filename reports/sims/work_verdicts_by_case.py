"""Judge the work counts of benchmark runs case by case: A/A among the base runs, and
each head run against each base run.

The runs are pytest-benchmark JSON files of the suite (``extra_info["work_counts"]``),
each a fresh process. Every ordered pair of base runs is an A/A comparison; every
(head, base) pair a head-against-base one. For each case it prints how many of them
moved (a verdict other than "same") and the first function named in the workers::

    python reports/sims/work_verdicts_by_case.py --base out/base-*.json --head out/head-*.json

Example (two base runs, no head):
    python reports/sims/work_verdicts_by_case.py --base a.json b.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections import defaultdict
from pathlib import Path

from rlpace.bench.work_counts.verdict import WORKERS_PREFIX, compare_work_counts


def _counts(path: Path) -> dict[str, dict]:
    """fullname -> work_counts of one run's JSON (cases without them left out)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    out = {}
    for bench in data.get("benchmarks", []):
        counts = (bench.get("extra_info") or {}).get("work_counts")
        if isinstance(counts, dict):
            out[bench["fullname"].split("::")[-1]] = counts
    return out


def _tally(pairs, runs_h, runs_b, cases):
    moved, total, named = defaultdict(int), defaultdict(int), {}
    for i, j in pairs:
        for case in cases:
            head, base = runs_h[i].get(case), runs_b[j].get(case)
            if head is None or base is None:
                continue
            change = compare_work_counts(case, head, base)
            total[case] += 1
            if change.verdict != "same":
                moved[case] += 1
                workers = [n for n in change.names if n[0].startswith(WORKERS_PREFIX)]
                if workers and case not in named:
                    name, before, after = workers[0]
                    named[case] = f"{name[len(WORKERS_PREFIX) :]} {before:g} → {after:g}"
                elif case not in named:
                    named[case] = change.summary()
    return moved, total, named


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", nargs="+", type=Path, required=True)
    parser.add_argument("--head", nargs="*", type=Path, default=[])
    parser.add_argument("-k", default="", help="only cases whose name contains this")
    args = parser.parse_args(argv)
    bases = [_counts(p) for p in args.base]
    heads = [_counts(p) for p in args.head]
    cases = sorted({c for run in bases for c in run if args.k in c and "worker_names" in run[c]})
    aa = _tally(itertools.permutations(range(len(bases)), 2), bases, bases, cases)
    hb = _tally(itertools.product(range(len(heads)), range(len(bases))), heads, bases, cases)
    for case in cases:
        line = f"{case[:62]:62} A/A {aa[0][case]}/{aa[1][case]}"
        if heads:
            line += f"  head {hb[0][case]}/{hb[1][case]}  {hb[2].get(case, '')[:70]}"
        if aa[0][case]:
            line += f"  [A/A: {aa[2][case][:60]}]"
        print(line)
    print(f"all: A/A {sum(aa[0].values())}/{sum(aa[1].values())}", end="")
    print(f", head {sum(hb[0].values())}/{sum(hb[1].values())}" if heads else "")
    return 0


if __name__ == "__main__":
    sys.exit(main())
