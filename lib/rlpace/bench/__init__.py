"""The performance-regression harness (CLI ``rlpace-bench``).

Data flows one way: result files → results table → comparison → rendered report →
sink (file, stdout, GitHub). This package never imports the RL packages, and they
never import it.

The names below are its public face; each is imported from its module on first use,
so ``import rlpace.bench`` stays light (no pandas, scipy or torch until needed). The
modules (:mod:`rlpace.bench.results`, :mod:`rlpace.bench.judge`, ...) hold the rest.

Example:
    >>> import rlpace.bench as bench
    >>> base = bench.results_from_records([{"fullname": "a", "data": [1.0, 1.01, 0.99] * 5}])
    >>> head = bench.results_from_records([{"fullname": "a", "data": [1.5, 1.51, 1.49] * 5}])
    >>> comparison = bench.Judge(threshold=5.0).judge(head, base)
    >>> comparison.rows[0].verdict is bench.Verdict.WORSENED
    True
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from rlpace.bench.calibration import Calibration, read_calibration
    from rlpace.bench.compare import BenchmarkChange, Comparison, Verdict, compare_runs
    from rlpace.bench.judge import Judge, NoiseModel
    from rlpace.bench.pipeline import PipelineConfig, run_pr
    from rlpace.bench.render import render_report
    from rlpace.bench.results import load_results, merge_runs, results_from_records
    from rlpace.bench.runner import RunSettings
    from rlpace.bench.suite import Timed, case

_HOMES = {
    "BenchmarkChange": "rlpace.bench.compare",
    "Calibration": "rlpace.bench.calibration",
    "Comparison": "rlpace.bench.compare",
    "Judge": "rlpace.bench.judge",
    "NoiseModel": "rlpace.bench.judge",
    "PipelineConfig": "rlpace.bench.pipeline",
    "RunSettings": "rlpace.bench.runner",
    "Timed": "rlpace.bench.suite",
    "Verdict": "rlpace.bench.compare",
    "case": "rlpace.bench.suite",
    "compare_runs": "rlpace.bench.compare",
    "load_results": "rlpace.bench.results",
    "merge_runs": "rlpace.bench.results",
    "read_calibration": "rlpace.bench.calibration",
    "render_report": "rlpace.bench.render",
    "results_from_records": "rlpace.bench.results",
    "run_pr": "rlpace.bench.pipeline",
}
"""Each public name and the module that defines it."""

__all__ = [
    "BenchmarkChange",
    "Calibration",
    "Comparison",
    "Judge",
    "NoiseModel",
    "PipelineConfig",
    "RunSettings",
    "Timed",
    "Verdict",
    "case",
    "compare_runs",
    "load_results",
    "merge_runs",
    "read_calibration",
    "render_report",
    "results_from_records",
    "run_pr",
]


def __getattr__(name: str) -> Any:
    """Import a public name from its module on first use (PEP 562)."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'rlpace.bench' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
