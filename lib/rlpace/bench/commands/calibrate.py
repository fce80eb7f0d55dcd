"""``rlpace-bench calibrate``: measure, on this machine, the noise ``pr`` judges with.

``pr`` borrows two readings that describe the machine it runs on: the count tier's A/A
gates (``reports/counts/gates.json``) and the spread of the timed cases' A/A duet pairs
(``reports/calibration/cpu-duets.json``). Those checked in were measured on a
developer's box; a CI runner (another CPU, another Valgrind) needs its own. This
command makes both from whole A/A ``pr`` runs, the conditions ``pr`` judges under:

1. ``--runs`` times ``rlpace-bench pr --base HEAD`` on the clean checkout (the counts
   side by side, the duets, their extra duets and confirmations), each run's raw files
   kept in ``--work-dir/run-<k>/``;
2. ``rlpace-bench count aa`` over every run's two count files, into
   ``<out-dir>/count-gates.json``;
3. ``rlpace-bench aa --pr-runs`` over the runs, into ``<out-dir>/cpu-duets.json``, each
   run judged as ``pr`` judged it with a prior from the others (the held-out check).

Nothing is written to ``--out-dir`` until every run has finished. Check the files in by
hand: ``count-gates.json`` as ``reports/counts/gates.json`` and ``cpu-duets.json`` as
``reports/calibration/cpu-duets.json``. The sequential pool behind ``--no-counts``
(``reports/calibration/cpu.json``) stays ``rlpace-bench aa``'s job.

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser()
    >>> add_arguments(parser)
    >>> args = parser.parse_args(["--runs", "4"])
    >>> args.runs, args.out_dir
    (4, 'reports/aa')
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from rlpace.bench.errors import BenchInputError
from rlpace.bench.runner import add_timing_arguments

NAME = "calibrate"
HELP = (
    "A/A pr runs on this machine, and from them the count gates and the duet pool pr "
    "judges with (for a CI runner)."
)
GATES_NAME = "count-gates.json"
"""The count gates' file name in ``--out-dir`` (checked in as ``reports/counts/gates.json``)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the ``calibrate`` options.

    Example:
        >>> parser = argparse.ArgumentParser()
        >>> add_arguments(parser)
        >>> parser.parse_args([]).runs
        3
    """
    parser.add_argument(
        "--runs",
        type=int,
        default=3,
        help="A/A pr runs (default 3: about 15 min each for the CPU set on 2 cores; two or "
        "more give the duet pool a held-out check)",
    )
    parser.add_argument("-k", dest="keyword", default=None, help="pytest -k expression")
    parser.add_argument(
        "--out-dir", default="reports/aa", help=f"where {GATES_NAME} and cpu-duets.json go"
    )
    parser.add_argument(
        "--work-dir",
        default=None,
        help="the runs' raw files, run-<k>/ each, replaced on every calibrate (with "
        "what an interrupted one left) "
        "(default build/rlpace-bench/calibrate)",
    )
    add_timing_arguments(parser)


def main(args: argparse.Namespace) -> int:
    """Run the A/A ``pr`` runs, then ``count aa`` and ``aa --pr-runs`` over them.

    0 on success; 3 when the count tier cannot run here (nothing is run then).
    """
    from rlpace.bench._atomic import writable_dir
    from rlpace.bench.base_revision import repository_root
    from rlpace.bench.commands import aa, count, pr
    from rlpace.bench.counts.toolchain import CountUnavailable, find_toolchain

    if not (isinstance(args.runs, int) and args.runs >= 1):
        raise BenchInputError(
            f"--runs: expected the number of A/A pr runs (an integer >= 1), got {args.runs}; "
            "fix: e.g. --runs 3"
        )
    repo = repository_root(Path.cwd())
    if not (repo / "tests" / "benchmarks").is_dir():
        raise BenchInputError(
            f"{repo}: expected a benchmark suite in tests/benchmarks, found none. Fix: run "
            "`rlpace-bench calibrate` in a checkout of the project whose pull requests pr judges"
        )
    changed = subprocess.run(
        ["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    if changed:
        raise BenchInputError(
            f"{repo}: expected a clean checkout (an A/A run compares HEAD with itself), got "
            f"{len(changed)} changed file(s), e.g. {changed[0].strip()!r}: they would be "
            "pooled as noise. Fix: commit or stash them, or calibrate from a fresh clone"
        )
    work = _under(repo, args.work_dir or Path("build") / "rlpace-bench" / "calibrate")
    out_dir = _under(repo, args.out_dir)
    # both before the runs: their files go there after an hour of them
    writable_dir(out_dir, "--out-dir")
    writable_dir(work, "--work-dir")
    try:
        find_toolchain()
    except CountUnavailable as exc:
        print(
            f"rlpace-bench calibrate: {exc}. calibrate measures the count tier's gates and "
            "the duets that run with it, so it needs Valgrind; nothing was run",
            file=sys.stderr,
        )
        return 3
    cache = work / "cache"  # the base's worktree and interpreter, shared by the runs
    runs = [work / f"run-{k}" for k in range(1, args.runs + 1)]
    # an earlier calibrate's runs, and what an interrupted one left in the cache, would
    # otherwise be pooled with this one's
    for old in [*sorted(work.glob("run-*")), cache / "runs", cache / "counts"]:
        shutil.rmtree(old, ignore_errors=True)
    timing = _timing_argv(args)
    for k, run in enumerate(runs, start=1):
        print(f"A/A pr run {k} of {args.runs}", flush=True)
        argv = ["--base", "HEAD", "--sets", "cpu", "--out-dir", str(run / "report")]
        argv += ["--cache-dir", str(cache), *timing]
        argv += ["-k", args.keyword] if args.keyword else []
        code = _command(pr, argv)
        if code != 0:
            print(f"rlpace-bench calibrate: A/A pr run {k} failed (exit {code})", file=sys.stderr)
            return code
        run.mkdir(parents=True, exist_ok=True)
        for part in ("runs", "counts"):  # the next run writes the cache's afresh
            if (cache / part).is_dir():
                shutil.move(cache / part, run / part)
    counted = [run / "counts" / f"{side}.json" for run in runs for side in ("base", "head")]
    missing = [p for p in counted if not p.is_file()]
    if missing:
        print(
            f"rlpace-bench calibrate: expected each A/A pr run's two count files, found "
            f"none at {missing[0]}: the count tier did not run (the run's report in "
            f"{missing[0].parent.parent / 'report'} says why)",
            file=sys.stderr,
        )
        return 3
    out_dir.mkdir(parents=True, exist_ok=True)
    print(f"count gates from {len(counted)} count files", flush=True)
    code = _command(count, ["aa", *map(str, counted), "-o", str(out_dir / GATES_NAME)])
    if code != 0:
        return code
    argv = [x for run in runs for x in ("--pr-runs", str(run / "runs"))]
    code = _command(aa, [*argv, "--set", "cpu", "--out-dir", str(out_dir)])
    if code == 0:
        print(
            f"check them in: {out_dir / GATES_NAME} as reports/counts/gates.json, "
            f"{out_dir / 'cpu-duets.json'} as reports/calibration/cpu-duets.json"
        )
    return code


def _under(repo: Path, path: str | Path) -> Path:
    """``path``, relative ones under the repository root."""
    path = Path(path)
    return path if path.is_absolute() else repo / path


def _timing_argv(args: argparse.Namespace) -> list[str]:
    """The timing options given to ``calibrate``, as ``pr`` takes them."""
    argv = []
    if args.max_time is not None:
        argv += ["--max-time", str(args.max_time)]
    if args.wall_rounds is not None:
        argv += ["--wall-rounds", str(args.wall_rounds)]
    return argv


def _command(module: ModuleType, argv: Sequence[str]) -> int:
    """Run another ``rlpace-bench`` command (its module) as if typed with ``argv``."""
    parser = argparse.ArgumentParser(prog=f"rlpace-bench {module.NAME}")
    module.add_arguments(parser)
    return module.main(parser.parse_args(list(argv)))
