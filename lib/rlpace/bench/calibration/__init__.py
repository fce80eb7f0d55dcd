"""A/A calibration records: what an A/A pool found, as the judge reads it.

A calibration is made by :mod:`rlpace.bench.aa` (``rlpace-bench aa``: a *pool* of
suite runs of the same code, judged against itself) and read by the judge
(:class:`~rlpace.bench.judge.Judge`), the ``pr`` pipeline and ``rlpace-bench
compare``. This package holds what both sides share, below the judge:

- :class:`Calibration` (``_records``): per benchmark the **run spread** (standard
  deviation of the log median of one run across every run of the pool, %, the
  process-to-process noise), the **gate** the comparator should require of a change
  and the **detectable change** (:mod:`rlpace.bench.gates`), with the pool's
  false-alarm rates and, with an injected slow-down, each benchmark's detection rate
  (:class:`DetectionPower`); versioned, with one serialiser each way
  (:func:`read_calibration`; writing is :func:`rlpace.bench.aa.write_calibration`'s);
- :class:`DuetCalibration` (``_duets``): for the wall-clock cases ``pr`` times as
  duets (base and head at the same time, a core each), per benchmark the spread of
  its pairs' log ratios, the prior of ``pr``'s paired tests, with a held-out check of
  random splits judged as ``pr`` runs them; ``aa --pr-runs DIR`` pools the duets that
  A/A ``pr`` runs left (:func:`duet_calibration_from_pr_runs`), read back from their
  directories by ``_duet_dirs``.

Markdown is :mod:`rlpace.bench.render_calibration`'s job; the gate maths is
:mod:`rlpace.bench.gates`. Running a pool and drawing the figures from it sit above
the judge, in :mod:`rlpace.bench.aa`, since they judge with it.

Example:
    >>> b = BenchmarkNoise("t.py::a", 2, (1.0, -1.0), 0, 1.4, 3.0, 6.2, 2.5)
    >>> b.noise_fraction
    0.029554
"""

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
    "CalibrationNote",
    "DetectionPower",
    "DuetCalibration",
    "PrRunDuets",
    "calibration_note",
    "duet_calibration_from_pr_runs",
    "duet_calibration_from_runs",
    "duet_calibration_path",
    "machine_environment",
    "read_calibration",
    "read_duet_calibration",
]

_MOVED_TO_AA = frozenset(
    {"CalibrationConfig", "analyse_pool", "run_calibration", "run_spreads", "write_calibration"}
)
"""Names this package held until the A/A runs moved above the judge, to
:mod:`rlpace.bench.aa` (2026-12-08)."""


def __getattr__(name: str) -> object:
    """A name that moved to :mod:`rlpace.bench.aa` fails with where it went (an
    ``ImportError``, so ``from rlpace.bench.calibration import run_calibration`` says
    so too; importing it from here would bring back the import cycle the move removed).

    Example:
        >>> from rlpace.bench import calibration
        >>> calibration.run_calibration  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ImportError: rlpace.bench.calibration.run_calibration moved to rlpace.bench.aa ...
    """
    if name in _MOVED_TO_AA:
        raise ImportError(
            f"rlpace.bench.calibration.{name} moved to rlpace.bench.aa (the A/A runs sit "
            f"above the judge, the records it reads below). Fix: from rlpace.bench.aa "
            f"import {name}"
        )
    raise AttributeError(f"module 'rlpace.bench.calibration' has no attribute {name!r}")
