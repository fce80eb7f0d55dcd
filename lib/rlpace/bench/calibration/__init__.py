"""A/A calibration: how often the comparator cries wolf here, and what it can detect.

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
- per benchmark, the **run spread** (standard deviation of the log median of one run
  across every run of the pool, %, the process-to-process noise), the **spread** of
  the A/A change with ``repeats`` runs a side (``run spread × √(2 / repeats)``), the
  **gate** the comparator should require of a change (``t × spread``, Bonferroni over
  the set so the whole suite stays under ``family_alpha``, never below the largest A/A
  change seen) and the **detectable change** (:mod:`rlpace.bench.gates`);
- with ``inject`` (an :data:`~rlpace.bench.suite.SLOWDOWN_ENV` spec), a second pool
  of slowed runs and each injected benchmark's **detection rate**, checked against
  what the calibration promised (:meth:`Calibration.detection_power`). Inject into
  rlpace's rows only (``'test_=0.1,*[torchrl*=0'``): the torchrl twins are the
  negative controls.

``rlpace-bench aa --duets N`` runs ``N`` A/A *duets* of the wall-clock cases instead
(base and head at the same time, a core each, as ``pr`` times them) and writes a
:class:`DuetCalibration` (``_duets``): per benchmark the spread of its pairs' log
ratios, the prior of ``pr``'s paired tests, with a held-out check of random splits
judged as ``pr`` runs them, by priors from the other pairs. ``aa --pr-runs DIR``
pools instead the duets that A/A ``pr`` runs left, and judges each run's own duets
with a prior from the other runs' (:func:`duet_calibration_from_pr_runs`).

The package follows the data, one private module per step: ``_config`` (what to
run, :class:`CalibrationConfig`), ``_pool`` (running the pool,
:func:`run_calibration`), ``_analysis`` (the figures from typed results tables,
:func:`analyse_pool`), ``_records`` (the versioned records and their one serialiser,
:class:`Calibration`); for duets, ``_duets`` (the duet calibration and its held-out
checks) and ``_duet_dirs`` (reading back the directories ``pr`` and ``aa --duets``
leave them in). Markdown is
:mod:`rlpace.bench.render_calibration`'s job; the gate maths is :mod:`rlpace.bench.gates`.

Example:
    >>> b = BenchmarkNoise("t.py::a", 2, (1.0, -1.0), 0, 1.4, 3.0, 6.2, 2.5)
    >>> b.noise_fraction
    0.029554
"""

from rlpace.bench.calibration._analysis import analyse_pool, run_spreads
from rlpace.bench.calibration._config import CalibrationConfig
from rlpace.bench.calibration._duets import (
    DUET_FORMAT,
    DUET_VERSION,
    DuetCalibration,
    PrRunDuets,
    duet_calibration_from_pr_runs,
    duet_calibration_from_runs,
    duet_calibration_path,
    read_duet_calibration,
)
from rlpace.bench.calibration._pool import run_calibration, write_calibration
from rlpace.bench.calibration._records import (
    CALIBRATION_FORMAT,
    CALIBRATION_VERSION,
    ENVIRONMENT_KEYS,
    BenchmarkNoise,
    Calibration,
    CalibrationNote,
    DetectionPower,
    calibration_note,
    machine_environment,
    read_calibration,
)

__all__ = [
    "CALIBRATION_FORMAT",
    "CALIBRATION_VERSION",
    "DUET_FORMAT",
    "DUET_VERSION",
    "ENVIRONMENT_KEYS",
    "BenchmarkNoise",
    "Calibration",
    "CalibrationConfig",
    "CalibrationNote",
    "DetectionPower",
    "DuetCalibration",
    "PrRunDuets",
    "analyse_pool",
    "calibration_note",
    "duet_calibration_from_pr_runs",
    "duet_calibration_from_runs",
    "duet_calibration_path",
    "machine_environment",
    "read_calibration",
    "read_duet_calibration",
    "run_calibration",
    "run_spreads",
    "write_calibration",
]
