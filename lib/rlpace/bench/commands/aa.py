"""``rlpace-bench aa``: run the suite against itself and calibrate the comparator.

Example:
    >>> from rlpace.bench.cli import build_parser
    >>> args = build_parser().parse_args(["aa", "--runs", "8", "--inject", "test_rb=0.1"])
    >>> args.runs, args.repeats, args.inject
    (8, 4, 'test_rb=0.1')
    >>> build_parser().parse_args(["aa", "--duets", "16"]).duets
    16
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
from pathlib import Path
from typing import Any

from rlpace.bench.runner import add_timing_arguments
from rlpace.bench.thresholds import PAIRED_THRESHOLD

NAME = "aa"
HELP = "A/A calibration: false-alarm rate, per-benchmark noise and detectable change."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the ``aa`` options."""
    parser.add_argument("--runs", type=int, default=10, help="A/A comparisons (default 10)")
    parser.add_argument("--repeats", type=int, default=4, help="runs per side (default 4)")
    parser.add_argument(
        "--pool", type=int, default=None, help="suite runs to draw from (default 2*repeats*runs)"
    )
    parser.add_argument(
        "--slow-pool",
        type=int,
        default=None,
        help="slowed suite runs with --inject (default repeats*runs; fewer are reused)",
    )
    parser.add_argument("--set", dest="set_name", choices=("cpu", "gpu"), default="cpu")
    parser.add_argument("-k", dest="keyword", default=None, help="pytest -k expression")
    parser.add_argument("--threshold", type=float, default=5.0, help="effect threshold in %%")
    parser.add_argument(
        "--paired-threshold",
        type=float,
        default=PAIRED_THRESHOLD,
        help="effect threshold in %% of the duets' paired tests, with --duets (default "
        f"{PAIRED_THRESHOLD:g}, as pr)",
    )
    parser.add_argument("--alpha", type=float, default=0.05, help="false discovery rate")
    parser.add_argument(
        "--family-alpha",
        type=float,
        default=0.05,
        help="target chance that an A/A PR run flags anything; sets the noise gates "
        "(default 0.05; 0.01 for the stricter goal, at wider gates)",
    )
    parser.add_argument(
        "--inject",
        default=None,
        help="slowdown for detection power, RLPACE_BENCH_SLOWDOWN syntax, e.g. 'test_=0.1'",
    )
    parser.add_argument(
        "--confirm",
        type=int,
        default=2,
        help="runs per side of the confirmation of a flag, as in pr (default 2; 0: none)",
    )
    parser.add_argument("--out-dir", default="reports/aa", help="where <set>.json/.md go")
    add_timing_arguments(parser)
    parser.add_argument("--seed", type=int, default=0, help="seed of the pool assignment")
    parser.add_argument(
        "--reuse-runs",
        action="store_true",
        help="recompute the figures from the previous run's result files (no new runs)",
    )
    parser.add_argument(
        "--duets",
        type=int,
        default=None,
        metavar="N",
        help="instead of the sequential pool: run N A/A duets of the set's timed cases "
        "(wall clock, or CPU clock declared out of the count tier; both sides at once, "
        "a core each, as pr times them) and write "
        "<out-dir>/<set>-duets.json, the pair spreads pr's paired tests borrow "
        "(--repeats: the pairs a pr run judges, default 4)",
    )
    parser.add_argument(
        "--duets-from",
        action="append",
        default=None,
        metavar="DIR",
        help="build the duet calibration from the base-<k>.json / head-<k>.json files of "
        "earlier duets in DIR instead of running them; repeat it to pool several "
        "directories, e.g. the duets A/A `pr` runs left in build/rlpace-bench/runs/<set> "
        "and <set>-extend-<k> (each row's pairs are the duets that timed it)",
    )
    parser.add_argument(
        "--pr-runs",
        action="append",
        default=None,
        metavar="DIR",
        help="build the duet calibration from the duets A/A `pr` runs left, one DIR per "
        "run (its build/rlpace-bench/runs, or the checkout holding it; repeat it for "
        "each run), and check it by judging each run's own duets as pr judged them, "
        "with a prior from the other runs' duets only",
    )


def main(args: argparse.Namespace) -> int:
    """Run the calibration and print its summary; 0 on success."""
    from rich.console import Console
    from rich.progress import Progress

    from rlpace.bench.aa import CalibrationConfig, run_calibration
    from rlpace.bench.render_calibration import format_calibration
    from rlpace.bench.runner import run_settings

    settings = run_settings(args.max_time, args.wall_rounds)
    if args.duets is not None or args.duets_from is not None or args.pr_runs is not None:
        return _duets(args, settings)
    config = CalibrationConfig(
        runs=args.runs,
        repeats=args.repeats,
        pool=args.pool,
        slow_pool=args.slow_pool,
        set_name=args.set_name,
        keyword=args.keyword,
        threshold=args.threshold,
        alpha=args.alpha,
        family_alpha=args.family_alpha,
        inject=args.inject,
        out_dir=Path(args.out_dir),
        settings=settings,
        seed=args.seed,
        reuse_runs=args.reuse_runs,
        confirm=args.confirm,
    )
    with Progress(console=Console(stderr=True)) as progress:
        task = progress.add_task("A/A suite runs", total=None)

        def advance(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)

        calibration = run_calibration(config, on_run=advance)
    print(format_calibration(calibration))
    return 0


def _duets(args: argparse.Namespace, settings: Any) -> int:
    """``aa --duets N`` / ``--duets-from DIR``: the duet calibration, written and summarised."""
    import statistics

    from rlpace.bench._atomic import writable_dir
    from rlpace.bench.base_revision import repository_root
    from rlpace.bench.calibration import (
        duet_calibration_from_pr_runs,
        duet_calibration_from_runs,
        duet_calibration_path,
    )
    from rlpace.bench.calibration._duet_dirs import duet_files, pr_run_duets
    from rlpace.bench.controls import CONTROL_IMPL
    from rlpace.bench.errors import BenchInputError
    from rlpace.bench.interleave import run_interleaved
    from rlpace.bench.judge import Judge
    from rlpace.bench.results import load_results, merge_runs
    from rlpace.bench.suite import PASS_ENV

    if args.repeats < 2:
        raise BenchInputError(
            f"--repeats: expected the pairs a pr run judges (an integer >= 2), got "
            f"{args.repeats}; fix: e.g. --repeats 4"
        )
    given = [f for f, v in (("--duets", args.duets), ("--duets-from", args.duets_from),
                            ("--pr-runs", args.pr_runs)) if v is not None]  # fmt: skip
    if len(given) > 1:
        raise BenchInputError(
            f"expected one source of duets, got {' and '.join(given)}. Fix: run new duets "
            "(--duets N), pool earlier ones (--duets-from DIR) or A/A pr runs' (--pr-runs "
            "DIR), one of the three"
        )
    earlier = args.duets_from is not None or args.pr_runs is not None
    # earlier runs need no repository (a relative --out-dir is then under the cwd)
    repo = Path.cwd() if earlier else repository_root(Path.cwd())
    pr_runs = pr_run_duets([Path(d) for d in args.pr_runs], args.set_name) if args.pr_runs else []
    if args.duets is not None and args.duets < 3:
        raise BenchInputError(
            f"--duets: expected three or more A/A duets, got {args.duets}; fix: e.g. "
            "--duets 16 (about a minute each on 2 cores)"
        )
    out_dir = Path(args.out_dir)
    # checked before the duets: the pool's file goes there after them
    out_dir = writable_dir(out_dir if out_dir.is_absolute() else repo / out_dir, "--out-dir")
    if pr_runs:
        runs_dirs = []
    elif args.duets_from is not None:
        runs_dirs = [Path(d) for d in args.duets_from]
    else:
        runs_dir = repo / "build" / "rlpace-bench" / "aa" / f"{args.set_name}-duets"
        python = Path(sys.executable)
        # this tree's lib first on both sides, the suite told to run the cases `pr`
        # judges on their time (its timed pass), as `pr` runs them
        path = os.pathsep.join(p for p in (str(repo / "lib"), os.environ.get("PYTHONPATH")) if p)
        env = {"PYTHONPATH": path, PASS_ENV: "timed"}  # this tree's suite knows passes
        print(
            f"running {args.duets} A/A duets of the {args.set_name} set's timed cases "
            "(the wall-clock ones and the CPU-clock ones the count tier leaves out)"
        )
        run_interleaved(
            set_name=args.set_name,
            sides={"base": (repo, python), "head": (repo, python)},
            runs_dir=runs_dir,
            repeats=args.duets,
            settings=settings,
            keyword=args.keyword,
            environ={"base": env, "head": env},
            on_run=lambda k, side, _: print(f"  duet {k + 1}: {side} done", flush=True),
            duet=True,
        )
        runs_dirs = [runs_dir]
    if pr_runs:
        heads = [p for run in pr_runs for p in run.heads]
    else:
        heads, bases = duet_files(runs_dirs)
    load = functools.lru_cache(maxsize=None)(load_results)
    # the rows a pr run judges pair by pair: every one the pooled duets timed
    rows = {
        name: impl
        for frame in map(load, heads)
        for name, impl in zip(frame["fullname"], frame["impl"], strict=True)
    }
    tested = {name for name, impl in rows.items() if impl != CONTROL_IMPL}
    family = len(tested) or len(rows)

    def judge_with(prior) -> Judge:
        return Judge.from_calibration(
            None,
            duets=prior,
            threshold=args.threshold,
            paired_threshold=args.paired_threshold,
            alpha=args.alpha,
            paired=True,
        )

    def merged(paths):
        return merge_runs([load(p) for p in paths])

    def judge_run(run, prior) -> tuple[bool, bool]:
        judge = judge_with(prior)
        verdicts = judge.judge(merged(run.heads), merged(run.bases))
        if not judge.flagged(verdicts):
            return False, False
        # the confirmation the run ran re-timed what its own judge flagged: a flag it
        # holds no duets of stays flagged (no run of it to clear it)
        if run.confirm_heads:
            again_h, again_b = merged(run.confirm_heads), merged(run.confirm_bases)
            timed = set(again_h["fullname"]) & set(again_b["fullname"])
            names = [n for n in judge.to_confirm(verdicts) if n in timed]
            if names:
                verdicts = judge.confirm(verdicts, again_h, again_b, names=names)
        return True, bool(judge.flagged(verdicts))

    def judge_split(split, prior) -> tuple[bool, bool]:
        judge = judge_with(prior)
        (heads, bases), (again_h, again_b) = split
        verdicts = judge.judge(merged(heads), merged(bases))
        if not judge.flagged(verdicts):
            return False, False
        again = judge.confirm(verdicts, merged(again_h), merged(again_b))
        return True, bool(judge.flagged(again))

    common = dict(
        set_name=args.set_name,
        repeats=args.repeats,
        alpha=args.alpha,
        threshold=args.paired_threshold,
        family_size=family,
    )
    if pr_runs:
        calibration = duet_calibration_from_pr_runs(pr_runs, judge_run=judge_run, **common)
    else:
        calibration = duet_calibration_from_runs(
            heads, bases, judge_split=judge_split, seed=args.seed, **common
        )
    out_dir.mkdir(parents=True, exist_ok=True)
    path = duet_calibration_path(out_dir, args.set_name)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(calibration.to_dict(), indent=1) + "\n", encoding="utf-8")
    tmp.replace(path)
    judged = [n for n in calibration.spreads if n in tested]
    spreads = [calibration.spreads[n][0] for n in judged]
    detect = [d for d in (calibration.detectable_pct(n) for n in judged) if d == d]  # not NaN
    print(f"wrote {path}: {calibration.pairs} A/A duets, {len(calibration.spreads)} benchmarks")
    if spreads and detect:
        print(
            f"pair spread of the {len(judged)} rows pr judges: median "
            f"{statistics.median(spreads):.1f}% (max {max(spreads):.1f}%); detectable at 90% "
            f"power with {args.repeats} pairs: median {statistics.median(detect):.1f}%, "
            f"{sum(d <= 10 for d in detect)} of {len(detect)} at 10% or less"
        )
    if pr_runs and not calibration.held_out_runs:
        print("no held-out check: it needs two A/A pr runs or more, got 1")
        return 0
    if pr_runs:
        print(
            f"held out, each of the {calibration.held_out_runs} A/A pr runs judged as pr "
            "judged it (its own duets and confirmation) with a prior from the other runs' "
            f"duets: {calibration.held_out_alarms_first} flagged anything, "
            f"{calibration.held_out_alarms} after the confirmation"
        )
        return 0
    if not calibration.held_out_runs:
        print(
            f"no held-out check: it needs {2 * args.repeats + 3} duets or more "
            f"({args.repeats} judged, {args.repeats} to confirm, 3 for the prior), got "
            f"{calibration.pairs}"
        )
        return 0
    print(
        f"held out, {calibration.held_out_runs} random splits judged as pr runs them "
        f"({args.repeats} pairs, a flag confirmed on {args.repeats} others, the prior from "
        f"the remaining pairs; splits share pairs): {calibration.held_out_alarms_first} "
        f"flagged anything, {calibration.held_out_alarms} after the confirmation"
    )
    return 0
