"""Which runs hold which cases: the suite's two passes, told apart and put back together.

With the count tier on, ``pr`` runs the suite in two passes
(:data:`rlpace.bench.suite.PASSES`): ``counted`` (the cases the count tier judges,
timed once a side on the CPU clock, for display, pooled over two duets with the cores
swapped) and ``timed`` (the cases judged on
their time, in every duet). :func:`pass_environ` tells a run which pass to run;
:func:`side_results` merges one side's runs, each row from its own pass only (a base
from before passes ran everything in both); :func:`rows_of_pass` picks a pass's rows
out of a results table.

Example:
    >>> sorted(PASS_CLOCK)
    ['counted', 'timed']
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from rlpace.bench.runner import TIMER_VARIABLE
from rlpace.bench.suite import PASS_ENV

__all__ = ["PASS_CLOCK", "merge_side", "pass_environ", "rows_of_pass", "side_results"]


PASS_CLOCK = {"counted": "cpu", "timed": "wall"}
"""The clock a suite from before passes (``RLPACE_BENCH_PASS``) follows for each pass."""


def pass_environ(
    environ: Mapping[str, Mapping[str, str]], pass_name: str
) -> dict[str, dict[str, str]]:
    """Each side's environment with the suite told to run only ``pass_name``'s cases
    (:data:`rlpace.bench.suite.PASSES`); a suite from before passes reads the clock
    beside it and runs that clock's cases.

    Example:
        >>> pass_environ({"base": {"A": "1"}}, "timed")
        {'base': {'A': '1', 'RLPACE_BENCH_PASS': 'timed', 'RLPACE_BENCH_TIMER': 'wall'}}
    """
    told = {PASS_ENV: pass_name, TIMER_VARIABLE: PASS_CLOCK[pass_name]}
    return {side: {**env, **told} for side, env in environ.items()}


def side_results(main: Sequence[Path], clock: Sequence[Path] | None):
    """One side's results, runs merged: with a counted pass (``clock``: the CPU-clock
    cases the count tier judges, timed for display, their runs pooled into one
    measurement a side, :func:`~rlpace.bench.results.pool_runs`), its rows and the main
    runs' rows of the timed pass (a base whose suite cannot skip by pass or clock ran
    everything in both; each row is kept from its own pass only). None when no run
    holds any row.

    Example:
        >>> side_results([], None) is None
        True
    """
    from rlpace.bench.results import load_results, merge_runs, pool_runs

    def frames_of(paths: Sequence[Path], keep: str | None) -> list:
        frames = []
        for path in paths:
            frame = load_results(path)
            if keep is not None:
                frame = rows_of_pass(frame, keep)
            if len(frame):
                frames.append(frame)
        return frames

    counted = frames_of(clock or (), "counted")
    frames = [pool_runs(counted)] if counted else []
    frames += frames_of(main, "timed" if clock is not None else None)
    return merge_runs(frames) if frames else None


def merge_side(frames: Sequence):
    """One side's result tables merged as ``pr`` merges them: the tables that hold only
    rows of the counted pass (``extra_info["pass"]``) pooled into one measurement
    (:func:`~rlpace.bench.results.pool_runs`: that pass's duets swap cores, they are
    not repeats), the others merged as repeats (:func:`~rlpace.bench.results.merge_runs`).
    ``rlpace-bench compare`` loads a side's files so, to judge ``pr``'s run files as
    ``pr`` did.

    Example:
        >>> from rlpace.bench.results import results_from_records
        >>> def run(n, pass_name):
        ...     return results_from_records([{"fullname": "x", "data": [n],
        ...                                   "extra_info": {"pass": pass_name}}])
        >>> merge_side([run(1.0, "counted"), run(3.0, "counted")]).loc[0, "run_medians"]
        [2.0]
        >>> merge_side([run(1.0, "timed"), run(3.0, "timed")]).loc[0, "run_medians"]
        [1.0, 3.0]
    """
    from rlpace.bench.results import merge_runs, pool_runs

    counted, rest = [], []
    for frame in frames:
        (counted if _only_counted(frame) else rest).append(frame)
    return merge_runs(([pool_runs(counted)] if counted else []) + rest)


def _only_counted(frame) -> bool:
    return len(frame) > 0 and all(
        (extra or {}).get("pass") == "counted" for extra in frame["extra_info"]
    )


def rows_of_pass(frame, pass_name: str):
    """The rows of ``frame`` that belong to ``pass_name`` (``extra_info["pass"]``; a row
    from a suite before passes goes by its clock, :data:`PASS_CLOCK`, and a row that
    names neither, or a clock of no pass, is on the wall clock, the suite's default).

    Example:
        >>> import pandas as pd
        >>> frame = pd.DataFrame({"name": ["a", "b", "c", "d"], "extra_info": [
        ...     {"timer": "cpu", "pass": "timed"}, {"timer": "cpu"}, {}, None]})
        >>> [list(rows_of_pass(frame, p)["name"]) for p in ("timed", "counted")]
        [['a', 'c', 'd'], ['b']]
    """
    clock = {c: p for p, c in PASS_CLOCK.items()}
    passes = [
        (extra or {}).get("pass") or clock.get((extra or {}).get("timer"), "timed")
        for extra in frame["extra_info"]
    ]
    kept = frame[[p == pass_name for p in passes]].reset_index(drop=True)
    kept.attrs = dict(frame.attrs)
    return kept
