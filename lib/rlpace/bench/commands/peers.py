"""``rlpace-bench peers FILE``: rlpace/torchrl median ratios with confidence intervals.

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser()
    >>> add_arguments(parser)
    >>> args = parser.parse_args(["cpu.json", "--confidence", "0.9"])
    >>> args.file, args.confidence
    ('cpu.json', 0.9)
"""

from __future__ import annotations

import argparse
import math
from typing import TYPE_CHECKING

from rlpace.bench.errors import BenchInputError

if TYPE_CHECKING:  # pragma: no cover
    from rlpace.bench.peers import PeerRatio

NAME = "peers"
HELP = "print rlpace/torchrl median ratios (with confidence intervals) of one result file"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of ``rlpace-bench peers``.

    Example:
        >>> parser = argparse.ArgumentParser()
        >>> add_arguments(parser)
        >>> parser.parse_args(["cpu.json"]).confidence
        0.95
    """
    parser.add_argument("file", help="a result file (pytest-benchmark JSON or asv result)")
    parser.add_argument(
        "--confidence", type=float, default=0.95, help="two-sided coverage of the interval"
    )


def format_ratio(r: PeerRatio) -> str:
    """One line: case, parameters, ratio and interval, verdict.

    Example:
        >>> from rlpace.bench.peers import PeerRatio
        >>> r = PeerRatio("t::test_rb", {"n": 64}, "a", "b", 1.0, 2.0, 0.5, 0.45, 0.55, 0.95)
        >>> format_ratio(r)
        't::test_rb[n=64]  speedup 2.00x [1.82, 2.22]  time ratio 0.500  faster'
    """
    params = ", ".join(f"{k}={v}" for k, v in r.params.items())
    name = f"{r.case}[{params}]" if params else r.case
    speed, low, high = r.speedup
    interval = "no samples" if math.isnan(r.low) else f"[{low:.2f}, {high:.2f}]"
    return f"{name}  speedup {speed:.2f}x {interval}  time ratio {r.ratio:.3f}  {r.verdict}"


def main(args: argparse.Namespace) -> int:
    """Print one line per pair; exit 0 (also when the file has no pairs).

    Example:
        >>> parser = argparse.ArgumentParser()
        >>> add_arguments(parser)
        >>> main(parser.parse_args(["cpu.json", "--confidence", "95"]))
        Traceback (most recent call last):
        ...
        rlpace.bench.errors.BenchInputError: --confidence: expected a coverage in (0, 1) such as 0.95, got 95.0
    """
    # imported here, not at the top, so that parsing the command line stays light
    from rlpace.bench.peers import peer_ratios
    from rlpace.bench.results import load_results

    if not 0 < args.confidence < 1:
        raise BenchInputError(
            f"--confidence: expected a coverage in (0, 1) such as 0.95, got {args.confidence}"
        )
    ratios = peer_ratios(load_results(args.file), confidence=args.confidence)
    if not ratios:
        print(f"{args.file}: no case has both impl=rlpace and impl=torchrl results")
        return 0
    print(
        f"median time ratio rlpace/torchrl, {args.confidence:.0%} bootstrap interval (<1: rlpace faster); "
        "speedup = torchrl time / rlpace time = ops ratio rlpace/torchrl (>1: rlpace faster)"
    )
    for r in ratios:
        print(format_ratio(r))
    return 0
