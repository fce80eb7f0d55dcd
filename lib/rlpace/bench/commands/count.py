"""``rlpace-bench count``: instructions and estimated cycles per call, under Callgrind.

Three actions:

- ``count run [--root .] [--select PATTERN ...] -o reports/counts/head.json``: count
  the single-process cases of a tree (one Valgrind process; the dumps go beside the
  file);
- ``count aa A.json B.json [...] -o reports/counts/gates.json``: per-case gates from
  count runs of the same commit, with the share of cases that detect 2 % and 5 %
  (``--widen reports/counts/gates.json``: each case keeps the wider of this reading
  and the file's, except those ``--fresh ID ...`` names, whose case changed what a call
  does);
- ``count compare --head H.json --base B.json [--gates G.json]``: the verdict per case
  (refused when the files come from another Valgrind, interpreter or architecture).

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser()
    >>> add_arguments(parser)
    >>> args = parser.parse_args(["run", "--select", "test_rb_*", "-o", "h.json"])
    >>> args.action, args.select, args.output
    ('run', ['test_rb_*'], 'h.json')
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from rlpace.bench.errors import BenchInputError

NAME = "count"
HELP = "count instructions per call under Callgrind (run, aa, compare)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the actions and options of ``rlpace-bench count``.

    Example:
        >>> parser = argparse.ArgumentParser()
        >>> add_arguments(parser)
        >>> parser.parse_args(["compare", "--head", "h.json", "--base", "b.json"]).gates
    """
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    run = actions.add_parser("run", help="count a tree's cases into a count file")
    run.add_argument("--root", default=".", help="repository root holding tests/benchmarks")
    run.add_argument(
        "--select", nargs="*", default=[], help="test-id globs or substrings (default: all)"
    )
    run.add_argument("-o", "--output", default="reports/counts/head.json", help="count file")
    run.add_argument("--calls", type=int, default=1, help="measured calls per case")
    run.add_argument(
        "--timeout", type=float, default=900.0, help="seconds one case may take under Valgrind"
    )
    aa = actions.add_parser("aa", help="per-case gates from count runs of the same commit")
    aa.add_argument("runs", nargs="+", help="two or more count files of one commit")
    aa.add_argument("-o", "--output", default="reports/counts/gates.json", help="gate file")
    aa.add_argument(
        "--widen",
        default=None,
        metavar="GATES",
        help="an earlier gate file (another day's or host's A/A runs): each case keeps the "
        "wider of the two readings, unless it is counted over other calls now",
    )
    aa.add_argument(
        "--fresh",
        nargs="+",
        default=[],
        metavar="ID",
        help="with --widen: test-id globs or substrings of cases whose code changed what a "
        "call does; they keep only this reading",
    )
    compare = actions.add_parser("compare", help="judge a head count file against a base one")
    compare.add_argument("--head", required=True, help="head count file")
    compare.add_argument("--base", required=True, help="base count file")
    compare.add_argument("--gates", default=None, help="gate file from `count aa`")
    compare.add_argument(
        "--allow-mismatch",
        action="store_true",
        help="compare files from different Valgrind/interpreter/architecture anyway",
    )
    compare.add_argument("--json", dest="json_out", default=None, help="also write the verdicts")
    compare.add_argument(
        "--fail-on-regression", action="store_true", help="exit 1 when a case regressed"
    )


def main(args: argparse.Namespace) -> int:
    """Run the chosen action.

    Example:
        >>> parser = argparse.ArgumentParser()
        >>> add_arguments(parser)
        >>> main(parser.parse_args(["run", "--calls", "0"]))
        Traceback (most recent call last):
        ...
        rlpace.bench.errors.BenchInputError: CountSettings.calls: expected an integer >= 1, got 0; pass 1 or more
    """
    if args.action == "run":
        return _run(Path(args.root), Path(args.output), args.select, args.calls, args.timeout)
    if args.action == "aa":
        widen = Path(args.widen) if args.widen else None
        return _aa([Path(p) for p in args.runs], Path(args.output), widen, args.fresh)
    if args.action == "compare":
        return _compare(
            head=Path(args.head),
            base=Path(args.base),
            gates=None if args.gates is None else Path(args.gates),
            allow_mismatch=args.allow_mismatch,
            json_out=None if args.json_out is None else Path(args.json_out),
            fail_on_regression=args.fail_on_regression,
        )
    raise BenchInputError("count: expected an action (run, aa or compare), got none")


def _run(root: Path, output: Path, select: list[str], calls: int, timeout: float) -> int:
    from rlpace.bench._atomic import writable_dir
    from rlpace.bench.counts.session import CountSettings, count_tree
    from rlpace.bench.counts.toolchain import CountUnavailable

    try:
        settings = CountSettings(calls=calls, case_timeout=timeout, select=tuple(select))
    except ValueError as exc:
        raise BenchInputError(str(exc)) from None
    if not (root / "tests" / "benchmarks").is_dir():
        raise BenchInputError(
            f"--root {root}: expected a tree with tests/benchmarks, found none; "
            "fix: run from the repository root or pass --root"
        )
    # the file is written after minutes of counting: its folder is checked first
    writable_dir(
        output.parent, "--output's folder", "give --output a file in a folder you can write to"
    )
    try:
        run = count_tree(
            root,
            output,
            settings=settings,
            on_case=lambda test_id, status: print(f"{status:12} {test_id}", file=sys.stderr),
        )
    except Exception as exc:
        if isinstance(exc, CountUnavailable):
            print(f"rlpace-bench count: {exc}", file=sys.stderr)
            return 3
        raise
    counted = sum(c.counted for c in run.cases)
    print(
        f"rlpace-bench count: {counted} of {len(run.cases)} case(s) counted in "
        f"{run.meta['wall_s']:.0f} s -> {output}",
        file=sys.stderr,
    )
    return 0


def _aa(
    paths: list[Path], output: Path, widen: Path | None = None, fresh: Sequence[str] = ()
) -> int:
    from rlpace.bench.counts.gates import gate_summary, write_gates
    from rlpace.bench.counts.records import count_differences, read_counts
    from rlpace.bench.counts.verdict import warmed_apart

    runs = [read_counts(p) for p in paths]
    for other in runs[1:]:
        for warning in count_differences(other.meta, runs[0].meta):
            print(f"rlpace-bench count aa: warning: {warning}", file=sys.stderr)
    gates = write_gates(runs, output, widen=widen, fresh=fresh)
    apart = warmed_apart(runs)
    if apart:  # their cycles spread leaves out the runs that warmed the other way
        print(
            f"rlpace-bench count aa: note: {len(apart)} case(s) warmed their caches "
            f"differently from run to run ({', '.join(apart[:5])}"
            f"{', ...' if len(apart) > 5 else ''}): their cycles spread is taken over the "
            "runs that warmed alike",
            file=sys.stderr,
        )
    print(json.dumps(gate_summary(gates), indent=1))
    return 0


def _compare(
    *,
    head: Path,
    base: Path,
    gates: Path | None,
    allow_mismatch: bool,
    json_out: Path | None,
    fail_on_regression: bool,
) -> int:
    from dataclasses import asdict

    from rlpace.bench.counts.gates import read_gates
    from rlpace.bench.counts.records import count_differences, read_counts
    from rlpace.bench.counts.verdict import DEFAULT_FLOOR, DEFAULT_K, compare_counts

    h, b = read_counts(head), read_counts(base)
    for warning in count_differences(h.meta, b.meta, allow_mismatch=allow_mismatch):
        print(f"rlpace-bench count compare: warning: {warning}", file=sys.stderr)
    table, k, floor = {}, DEFAULT_K, DEFAULT_FLOOR
    if gates is not None:
        table, meta, k, floor = read_gates(gates)
        for warning in count_differences(h.meta, meta, allow_mismatch=allow_mismatch, gates=True):
            print(f"rlpace-bench count compare: warning: gates: {warning}", file=sys.stderr)
    changes = compare_counts(h, b, gates=table, k=k, floor=floor)
    for c in changes:
        if c.instructions_change is None:
            print(f"{c.verdict:12} {c.test_id}  ({c.reason})")
        else:
            cycles = "" if c.cycles_change is None else f"  cycles {100 * c.cycles_change:+.2f}%"
            if c.reason:  # why a compared case's cycles were not (warmed apart)
                cycles += f"  ({c.reason})"
            print(
                f"{c.verdict:12} {c.test_id}  instructions {100 * c.instructions_change:+.2f}% "
                f"(gate ±{100 * c.gate:.2f}%){cycles}"
            )
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        doc = {
            "format": "rlpace-count-comparison",
            "version": 1,
            "changes": [asdict(c) for c in changes],
        }
        json_out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return 1 if fail_on_regression and any(c.flagged for c in changes) else 0
