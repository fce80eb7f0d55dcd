"""The performance-regression harness (CLI ``rlpace-bench``).

Data flows one way: result files → results table → comparison → rendered report →
sink (file, stdout, GitHub). This package never imports the RL packages, and they
never import it.

Its public face is ``PUBLIC_NAMES``, sixteen names a user reaches for first
(:class:`~rlpace.bench.judge.Judge`, :func:`~rlpace.bench.results.load_results`,
:func:`~rlpace.bench.compare.compare_runs`, :func:`~rlpace.bench.pipeline.run_pr`,
...); each is imported from its module on first use, so ``import rlpace.bench``
stays light (no pandas, scipy or torch until needed). They are documented once, in
their modules: the package re-exports them by name and keeps no ``__all__``, so the
API reference has one target per name.

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
from typing import Any

PUBLIC_NAMES = {
    "BenchmarkChange": "rlpace.bench.comparison",
    "Comparison": "rlpace.bench.comparison",
    "Judge": "rlpace.bench.judge",
    "NoiseModel": "rlpace.bench.gates",
    "PipelineConfig": "rlpace.bench.pipeline",
    "RunSettings": "rlpace.bench.runner",
    "Timed": "rlpace.bench.suite",
    "Verdict": "rlpace.bench.comparison",
    "case": "rlpace.bench.suite",
    "compare_runs": "rlpace.bench.compare",
    "load_results": "rlpace.bench.results",
    "merge_runs": "rlpace.bench.results",
    "read_calibration": "rlpace.bench.calibration",
    "render_report": "rlpace.bench.render",
    "results_from_records": "rlpace.bench.results",
    "run_pr": "rlpace.bench.pipeline",
}
"""The public face: each name ``rlpace.bench`` offers, and the module that defines it."""


def __getattr__(name: str) -> Any:
    """Import a public name from its module on first use (PEP 562)."""
    home = PUBLIC_NAMES.get(name)
    if home is None:
        raise AttributeError(f"module 'rlpace.bench' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *PUBLIC_NAMES})
