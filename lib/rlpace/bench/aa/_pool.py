"""The A/A pool runner: fresh suite processes of the same code, then the figures.

``rlpace-bench aa`` runs the suite against itself: a *pool* of clean suite runs and,
with ``inject``, a pool of runs slowed by that :data:`~rlpace.bench.suite.SLOWDOWN_ENV`
spec, interleaved ABBA (:func:`rlpace.bench.runner.abba_schedule`) so drift hits
both pools alike; :func:`~rlpace.bench.aa.analyse_pool` turns them
into a :class:`~rlpace.bench.calibration.Calibration`, written as
``<out_dir>/<set>.json`` (versioned) and ``<set>.md``
(:func:`rlpace.bench.render_calibration.format_calibration`).

Example:
    >>> cal = run_calibration(CalibrationConfig(runs=10, repeats=2))  # doctest: +SKIP
    >>> cal.false_alarm_rate_calibrated  # doctest: +SKIP
    0.0
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from rlpace.bench._atomic import writable_dir
from rlpace.bench.aa._analysis import analyse_pool
from rlpace.bench.aa._config import CalibrationConfig
from rlpace.bench.base_revision import repository_root
from rlpace.bench.calibration import Calibration, machine_environment
from rlpace.bench.controls import CONTROL_IMPL
from rlpace.bench.errors import BenchInputError
from rlpace.bench.render_calibration import format_calibration
from rlpace.bench.results import load_results
from rlpace.bench.runner import RunSettings, abba_schedule, run, suite_present
from rlpace.bench.work_counts.measure import counting_environ

__all__ = ["WORK_COUNTED_RUNS", "run_calibration", "write_calibration"]

POOL_SIDES = ("clean", "slow")
"""The two pools; a run's file is ``<pool>-<i>.json`` under the runs directory."""
WORK_COUNTED_RUNS = 2
"""Clean-pool runs that also count each timed case's work (an A/A pair of work counts,
:mod:`rlpace.bench.work_counts`); the other runs only time, since the counts repeat."""


def run_calibration(
    config: CalibrationConfig, *, on_run: Callable[[int, int], None] | None = None
) -> Calibration:
    """Run the A/A pools, form the comparisons and compute the figures; write the files.

    Args:
        config: what to run.
        on_run: called as ``(done, total)`` after each suite run (progress).

    Returns:
        The calibration (also written to ``<out_dir>/<set>.json`` and ``<set>.md``).

    Raises:
        BenchInputError: no suite here, a run timed nothing twice, or ``reuse_runs``
            without the earlier files.

    Example:
        >>> cal = run_calibration(CalibrationConfig(runs=10, repeats=2))  # doctest: +SKIP
        >>> cal.false_alarm_rate_calibrated  # doctest: +SKIP
        0.0
    """
    from rlpace.bench.suite import SLOWDOWN_ENV

    repo = repository_root(config.repo)
    if not suite_present(repo):
        raise BenchInputError(f"expected a benchmark suite under {repo}, found none")
    # the files go there after the whole pool ran: a directory that cannot take them
    # is said now
    out_dir = config.out_dir if config.out_dir.is_absolute() else repo / config.out_dir
    writable_dir(out_dir, "--out-dir")
    settings = config.settings or RunSettings()
    runs_dir = repo / "build" / "rlpace-bench" / "aa" / config.set_name
    runs_dir.mkdir(parents=True, exist_ok=True)
    if not config.reuse_runs:
        for stale in runs_dir.glob("*.json"):
            stale.unlink()
    counts = {"clean": config.effective_pool, "slow": config.effective_slow_pool}
    schedule = abba_schedule(counts, POOL_SIDES)
    frames: dict[str, list[Any]] = {kind: [None] * n for kind, n in counts.items()}
    for done, (j, kind) in enumerate(schedule, start=1):
        output = runs_dir / f"{kind}-{j}.json"
        if config.reuse_runs:
            if not output.is_file():
                raise BenchInputError(
                    f"--reuse-runs: expected the earlier run {output}, found none. Fix: run "
                    "`rlpace-bench aa` with the same --runs/--repeats/--pool/--inject first"
                )
            frames[kind][j] = load_results(output)
            continue
        environ = {
            SLOWDOWN_ENV: (config.inject or "") if kind == "slow" else "",
            # the counts repeat, and timing is the pool's job: the first clean runs
            # count, as `pr` does, never the twins, whose torchrl a PR cannot change
            **counting_environ(kind == "clean" and j < WORK_COUNTED_RUNS, (CONTROL_IMPL,)),
        }
        for _attempt in range(2):  # one retry: a long pool should survive one stray failure
            outcome = run(
                set_name=config.set_name,
                output=output,
                keyword=config.keyword,
                settings=settings,
                root=repo,
                python=sys.executable,
                quiet=True,
                environ=environ,
            )
            if output.is_file() and outcome.benchmarks > 0:
                break
        if not output.is_file() or outcome.benchmarks == 0:
            raise BenchInputError(
                f"A/A run {done} of set {config.set_name!r} timed nothing (pytest exit "
                f"{outcome.returncode}); expected results to calibrate. Fix: check "
                f"`rlpace-bench run --set {config.set_name}` runs here"
            )
        frames[kind][j] = load_results(output)
        if on_run is not None:
            on_run(done, len(schedule))

    first = frames["clean"][0].attrs  # the pool's first run: its machine and start
    calibration = analyse_pool(
        config,
        frames["clean"],
        frames["slow"],
        environment=machine_environment(first.get("machine_info") or {}),
    )
    calibration = replace(
        calibration,
        # relative to the repository: the record is checked in and read on other machines
        runs_dir=runs_dir.relative_to(repo).as_posix(),
        created=str(first.get("datetime") or ""),
    )
    write_calibration(calibration, out_dir)
    return calibration


def write_calibration(calibration: Calibration, out_dir: Path) -> tuple[Path, Path]:
    """Write ``<set>.json`` (versioned data) and ``<set>.md`` (a table) under ``out_dir``.

    Example:
        >>> write_calibration(cal, Path("reports/aa"))  # doctest: +SKIP
        (PosixPath('reports/aa/cpu.json'), PosixPath('reports/aa/cpu.md'))
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path = out_dir / f"{calibration.set_name}.json"
    json_path.write_text(json.dumps(calibration.to_dict(), indent=2) + "\n", encoding="utf-8")
    md_path = out_dir / f"{calibration.set_name}.md"
    md_path.write_text(format_calibration(calibration), encoding="utf-8")
    return json_path, md_path
