"""``rlpace-bench run``: time one benchmark set with stable settings.

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser()
    >>> add_arguments(parser)
    >>> args = parser.parse_args(["--set", "gpu", "-k", "rb", "-o", "g.json"])
    >>> args.set, args.keyword, args.output
    ('gpu', 'rb', 'g.json')
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rlpace.bench._atomic import writable_dir
from rlpace.bench.errors import BenchInputError
from rlpace.bench.runner import RunSettings, run

NAME = "run"
HELP = "run a benchmark set (cpu or gpu) under pytest-benchmark with stable settings"

_DEFAULTS = RunSettings()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of ``rlpace-bench run``.

    Example:
        >>> parser = argparse.ArgumentParser()
        >>> add_arguments(parser)
        >>> args = parser.parse_args([])
        >>> args.set, args.output, args.min_rounds >= 5, args.threads
        ('cpu', None, True, 1)
    """
    parser.add_argument("--set", choices=("cpu", "gpu"), default="cpu", help="benchmark set")
    parser.add_argument("-k", dest="keyword", default=None, help="pytest -k expression")
    parser.add_argument(
        "-o",
        "--output",
        default=None,
        help="result JSON file (default: reports/bench/<set>.json)",
    )
    parser.add_argument("--root", default=".", help="repository root holding tests/benchmarks")
    parser.add_argument(
        "--max-time", type=float, default=_DEFAULTS.max_time, help="seconds of rounds per case"
    )
    parser.add_argument(
        "--min-rounds", type=int, default=_DEFAULTS.min_rounds, help="rounds per case, at least"
    )
    parser.add_argument(
        "--wall-rounds",
        type=int,
        default=_DEFAULTS.wall_rounds,
        help="rounds a timed case (wall clock, or CPU clock declared out of the count "
        "tier) takes at least, as many as fit in "
        f"{_DEFAULTS.wall_time:g} s (0: max-time alone sizes them; default %(default)s)",
    )
    parser.add_argument(
        "--warmup", type=int, default=_DEFAULTS.warmup_iterations, help="warm-up calls per case"
    )
    parser.add_argument(
        "--timeout", type=float, default=_DEFAULTS.timeout, help="seconds allowed per case"
    )
    parser.add_argument(
        "--threads", type=int, default=_DEFAULTS.threads, help="intra-op threads (default 1)"
    )


def main(args: argparse.Namespace) -> int:
    """Run the set; exit 0 when every case passed or skipped, 1 when one failed.

    Example:
        >>> parser = argparse.ArgumentParser()
        >>> add_arguments(parser)
        >>> main(parser.parse_args(["--max-time", "0"]))
        Traceback (most recent call last):
        ...
        rlpace.bench.errors.BenchInputError: RunSettings.max_time: expected a number > 0, got 0.0; pass a valid max_time
    """
    try:
        settings = RunSettings(
            max_time=args.max_time,
            min_rounds=args.min_rounds,
            wall_rounds=args.wall_rounds,
            warmup_iterations=args.warmup,
            timeout=args.timeout,
            threads=args.threads,
        )
    except ValueError as exc:
        raise BenchInputError(str(exc)) from exc
    output = Path(args.output or f"reports/bench/{args.set}.json")
    writable_dir(
        output.parent, "--output's folder", "give --output a file in a folder you can write to"
    )
    outcome = run(
        set_name=args.set,
        output=output,
        keyword=args.keyword,
        settings=settings,
        root=args.root,
    )
    print(
        f"rlpace-bench run: {outcome.benchmarks} result(s) in {outcome.output}",
        file=sys.stderr,
    )
    return 0 if outcome.ok else 1
