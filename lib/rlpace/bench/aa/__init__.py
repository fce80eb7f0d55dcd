"""A/A calibration runs: how often the comparator cries wolf here, and what it can detect.

``rlpace-bench aa`` runs the suite against itself. It executes a *pool* of suite runs,
each a fresh process of the same code, and forms ``runs`` A/A comparisons from it,
each taking ``repeats`` runs per side exactly as the ``pr`` pipeline does (disjoint
runs when the pool holds ``2 × repeats × runs`` of them, the default). From those:

- the **false-alarm rate**: the fraction of A/A comparisons that flag at least one
  benchmark, with the comparator's own gates, and again with the calibrated noise
  model (each comparison judged by a model fitted without its own runs, so the figure
  is not flattered by fitting its own data). Comparisons are judged by the same
  :class:`~rlpace.bench.judge.Judge` as ``pr``'s, negative-control floor and
  confirmation included; the rate before confirmation is kept as well;
- per benchmark, the **run spread**, the **spread** of the A/A change with
  ``repeats`` runs a side (``run spread × √(2 / repeats)``), the **gate** the
  comparator should require of a change (``t × spread``, Bonferroni over the set so
  the whole suite stays under ``family_alpha``, never below the largest A/A change
  seen) and the **detectable change** (:mod:`rlpace.bench.gates`);
- with ``inject`` (an :data:`~rlpace.bench.suite.SLOWDOWN_ENV` spec), a second pool
  of slowed runs and each injected benchmark's **detection rate**, checked against
  what the calibration promised
  (:meth:`~rlpace.bench.calibration.Calibration.detection_power`). Inject into
  rlpace's rows only (``'test_=0.1,*[torchrl*=0'``): the torchrl twins are the
  negative controls.

The result is a :class:`~rlpace.bench.calibration.Calibration`, the record the judge
reads: the records live below the judge (:mod:`rlpace.bench.calibration`), the runs
that make them above it, here, since every comparison is judged by it. The package
follows the data, one private module per step: ``_config`` (what to run,
:class:`CalibrationConfig`), ``_pool`` (running the pool, :func:`run_calibration`,
and writing it, :func:`write_calibration`), ``_analysis`` (the figures from typed
results tables, :func:`analyse_pool`).

Example:
    >>> CalibrationConfig(runs=5, repeats=2).effective_pool
    20
    >>> cal = run_calibration(CalibrationConfig(runs=10, repeats=2))  # doctest: +SKIP
    >>> cal.false_alarm_rate_calibrated  # doctest: +SKIP
    0.0
"""

from rlpace.bench.aa._analysis import analyse_pool, run_spreads
from rlpace.bench.aa._config import CalibrationConfig
from rlpace.bench.aa._pool import run_calibration, write_calibration

__all__ = [
    "CalibrationConfig",
    "analyse_pool",
    "run_calibration",
    "run_spreads",
    "write_calibration",
]
