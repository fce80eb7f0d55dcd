"""The records of an A/A calibration, and their one serialiser.

A :class:`Calibration` holds, per benchmark, a :class:`BenchmarkNoise` (its A/A
changes, run spread, gate and detectable change, and with an injected slow-down its
detection rate), the set-wide false-alarm rates, and what was run. It is written as
versioned JSON by :meth:`Calibration.to_dict` and read back by
:meth:`Calibration.from_dict` (:func:`read_calibration` for a file): one pair, so
``Calibration.from_dict(c.to_dict()) == c`` for every calibration (NaN aside, which
JSON writes as null and reads back as NaN). Files of version 1 (no run spreads) read
as they are, their run spreads NaN.

A :class:`CalibrationNote` is what a PR comment says about the calibration that judged
it; :mod:`rlpace.bench.render` turns both into markdown.

Example:
    >>> b = BenchmarkNoise("t.py::a", 2, (1.0, -1.0), 0, 1.4, 3.0, 6.2, 2.5)
    >>> cal = Calibration("cpu", 2, 2, 8, 5.0, 0.05, 0.05, 0.0, 0.0, (b,))
    >>> Calibration.from_dict(cal.to_dict()) == cal
    True
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from rlpace.bench.errors import BenchInputError
from rlpace.bench.gates import (
    DETECTION_POWER,
    NoiseModel,
    confirmation_stage,
    detectable_change,
    gate_fraction,
    log_pct_from_time_pct,
)

__all__ = [
    "CALIBRATION_FORMAT",
    "CALIBRATION_VERSION",
    "ENVIRONMENT_KEYS",
    "BenchmarkNoise",
    "Calibration",
    "CalibrationNote",
    "DetectionPower",
    "calibration_note",
    "machine_environment",
    "read_calibration",
]

CALIBRATION_FORMAT = "rlpace-bench-calibration"
CALIBRATION_VERSION = 2
READABLE_VERSIONS = (1, 2)
"""Version 1 lacks the run spreads (read as NaN); its gates are used as they are."""


@dataclass(frozen=True)
class BenchmarkNoise:
    """The A/A figures of one benchmark.

    Example:
        >>> BenchmarkNoise("t.py::a", 2, (1.0, -1.0), 0, 1.4, 3.0, 6.2, 2.5).noise_fraction
        0.029554
    """

    fullname: str
    comparisons: int
    """A/A comparisons where this benchmark had a finite change."""
    changes_pct: tuple[float, ...]
    """The A/A change (median, %, positive = faster) of each comparison."""
    flagged: int
    """A/A comparisons that flagged it (improved or worsened) without calibrated noise."""
    spread_pct: float
    """Standard deviation of the A/A change with ``repeats`` runs a side."""
    gate_pct: float
    """Calibrated noise: the change a PR must exceed to be flagged."""
    mdc_pct: float
    """Minimal detectable change at 80% power, given the gate and threshold."""
    comparator_mdc_pct: float
    """The comparator's own minimal detectable change (median over comparisons)."""
    injected: float = 0.0
    """Injected slowdown fraction for the detection runs (0 when none)."""
    detected: float | None = None
    """Fraction of clean-vs-slowed comparisons flagging it worsened, calibrated noise on
    (held out like the A/A figure: each judged by a calibration without its clean runs,
    when there are three or more comparisons)."""
    detected_raw: float | None = None
    """The same without calibrated noise."""
    run_spread_pct: float = math.nan
    """Standard deviation of one run's log median across the pool (×100): the
    process-to-process noise (NaN with fewer than three runs)."""
    runs: int = 0
    """Clean pool runs that measured this benchmark."""
    achieved_pct: float = math.nan
    """The slow-down the injection really caused, in % of time (slower = positive): the
    median of the slowed runs' medians against the median of the clean runs' medians.
    It can differ from ``injected``: a call of a microsecond cannot be slowed by less
    than the injector's own clock readings, and noise moves it either way."""
    promised: int = 0
    """Clean-vs-slowed comparisons whose (held-out) calibration promised to catch the
    achieved slow-down at :data:`DETECTION_POWER`: its minimal detectable change at that
    power was at most the achieved slow-down (both as log changes)."""
    promised_detected: int = 0
    """Of those, the comparisons that flagged it worsened."""

    @property
    def noise_fraction(self) -> float:
        """The gate for :func:`rlpace.bench.compare.compare_runs`: the fraction of a
        slow-down, ``1 − exp(−gate / 100)`` (the gate is a log change in %, as the run
        spreads are), so it stays below 1 for any gate and a speed-up gets the same log
        change; 1 (nothing can be flagged) when the gate is unknown."""
        if not math.isfinite(self.gate_pct):
            return 1.0
        return round(gate_fraction(self.gate_pct), 6)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (NaN becomes None), with the derived ``noise_fraction`` for
        readers of the file; :meth:`from_dict` reads it back.

        Example:
            >>> BenchmarkNoise("a", 2, (1.0,), 0, 1.4, 3.0, 6.2, 2.5).to_dict()["noise_fraction"]
            0.029554
        """
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        return _finite({**data, "noise_fraction": self.noise_fraction})

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BenchmarkNoise:
        """Read :meth:`to_dict`'s form back (derived fields are ignored; fields an older
        version lacks take their defaults).

        Example:
            >>> b = BenchmarkNoise("a", 2, (1.0,), 0, 1.4, 3.0, 6.2, 2.5, runs=4)
            >>> BenchmarkNoise.from_dict(b.to_dict()) == b
            True
        """
        return cls(
            fullname=str(data["fullname"]),
            comparisons=int(data["comparisons"]),
            changes_pct=tuple(_num(c) for c in data["changes_pct"]),
            flagged=int(data["flagged"]),
            spread_pct=_num(data["spread_pct"]),
            gate_pct=_num(data["gate_pct"]),
            mdc_pct=_num(data["mdc_pct"]),
            comparator_mdc_pct=_num(data["comparator_mdc_pct"]),
            injected=float(data.get("injected") or 0.0),
            detected=data.get("detected"),
            detected_raw=data.get("detected_raw"),
            run_spread_pct=_num(data.get("run_spread_pct")),
            runs=int(data.get("runs") or 0),
            achieved_pct=_num(data.get("achieved_pct")),
            promised=int(data.get("promised") or 0),
            promised_detected=int(data.get("promised_detected") or 0),
        )


@dataclass(frozen=True)
class DetectionPower:
    """Whether the calibration keeps its promise of power: over the clean-vs-slowed
    comparisons whose calibration (held out from the comparison's clean runs) had a
    minimal detectable change at ``power`` no larger than the slow-down the benchmark
    really got (:attr:`BenchmarkNoise.achieved_pct`), the share that flagged it. A
    calibration that tells the truth flags at least a ``power`` share.

    Example:
        >>> d = DetectionPower(0.9, (("a", 9.0, 11.0, 16, 16), ("b", 10.0, 12.0, 12, 16)))
        >>> d.hits, d.trials, d.rate
        (28, 32, 0.875)
    """

    power: float
    """The power the promise is made at."""
    rows: tuple[tuple[str, float, float, int, int], ...]
    """Per benchmark with a promise: ``(fullname, minimal detectable change at power
    in the final calibration %, achieved %, comparisons that flagged it, comparisons
    promised)``."""

    @property
    def hits(self) -> int:
        """Promised comparisons, over all benchmarks, that flagged the slow-down."""
        return sum(row[3] for row in self.rows)

    @property
    def trials(self) -> int:
        """Promised comparisons over all benchmarks."""
        return sum(row[4] for row in self.rows)

    @property
    def rate(self) -> float:
        """Pooled detection rate, NaN without a promise."""
        return self.hits / self.trials if self.trials else math.nan


@dataclass(frozen=True)
class Calibration:
    """An A/A calibration of one set on one machine.

    Example:
        >>> cal = Calibration("cpu", 4, 2, 16, 5.0, 0.05, 0.05, 0.25, 0.0, ())
        >>> cal.to_dict()["format"]
        'rlpace-bench-calibration'
    """

    set_name: str
    runs: int
    repeats: int
    pool: int
    threshold: float
    alpha: float
    family_alpha: float
    false_alarm_rate: float
    """Fraction of A/A comparisons flagging anything, comparator alone."""
    false_alarm_rate_calibrated: float
    """The same with calibrated noise (held out: each judged by the others' noise)."""
    benchmarks: tuple[BenchmarkNoise, ...]
    bare_threshold_rate: float = math.nan
    """The seed bot's rule, ops change beyond ±threshold: fraction of A/A comparisons
    where it flags anything."""
    bare_threshold_share: float = math.nan
    """The seed bot's rule: mean share of benchmarks it flags per A/A comparison."""
    inject: str | None = None
    environment: Mapping[str, Any] = field(default_factory=dict)
    draws: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...] = ()
    """Per A/A comparison, the clean-pool runs of side A and side B (``clean-<i>.json``)."""
    runs_dir: str = ""
    """Where the pool's result files are (``clean-<i>.json``, ``slow-<i>.json``),
    relative to the repository root (records written before 2026-12-05 hold the
    absolute path of the machine that made them)."""
    slow_pool: int = 0
    """Slowed runs in the detection pool (0 without ``inject``)."""
    created: str = ""
    """When the pool's first run started (ISO 8601), empty when unknown."""
    confirm: int = 0
    """Runs per side of the confirmation stage the comparisons were judged with (0:
    none; calibrations written before confirmations record none)."""
    false_alarm_rate_first: float = math.nan
    """The held-out false-alarm rate before confirmation (NaN without one)."""
    confirm_draws: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...] = ()
    """Per A/A comparison, the clean-pool runs of its confirmation, side A and side B."""

    def noise_model(self) -> NoiseModel:
        """The calibration as a judge uses it (:class:`rlpace.bench.gates.NoiseModel`):
        the gates as gate fractions at :attr:`repeats` runs a side (1 where a gate is
        unknown: nothing can be flagged), the run spreads and the family alpha.

        Example:
            >>> b = BenchmarkNoise("a", 2, (1.0, -1.0), 0, 1.0, 4.0, 7.0, 2.0)
            >>> model = Calibration("cpu", 2, 2, 8, 5.0, 0.05, 0.05, 0.0, 0.0, (b,)).noise_model()
            >>> model.gates, model.repeats
            ({'a': 0.039211}, 2)
        """
        return NoiseModel(
            gates={b.fullname: b.noise_fraction for b in self.benchmarks},
            repeats=self.repeats,
            run_spreads={b.fullname: (b.run_spread_pct, b.runs) for b in self.benchmarks},
            family_alpha=self.family_alpha,
        )

    def noise_fractions(self, repeats: int | None = None) -> dict[str, float]:
        """``fullname → gate`` as gate fractions, the ``noise`` argument of
        ``compare_runs``, for ``repeats`` runs a side (None: as calibrated); see
        :meth:`rlpace.bench.gates.NoiseModel.gate_fractions`.

        Example:
            >>> b = BenchmarkNoise("a", 2, (1.0, -1.0), 0, 1.0, 4.0, 7.0, 2.0)
            >>> cal = Calibration("cpu", 2, 2, 8, 5.0, 0.05, 0.05, 0.0, 0.0, (b,))
            >>> cal.noise_fractions(), cal.noise_fractions(repeats=8)
            ({'a': 0.039211}, {'a': 0.019802})
        """
        return self.noise_model().gate_fractions(repeats)

    def confirmation_fractions(self, repeats: int, family_size: int) -> dict[str, float]:
        """``fullname → gate`` (gate fractions) for a confirmation of ``family_size``
        flagged benchmarks with ``repeats`` fresh runs a side; see
        :meth:`rlpace.bench.gates.NoiseModel.confirmation_gates`.

        Example:
            >>> b = BenchmarkNoise("a", 2, (1.0,), 0, 2.0, 8.0, 12.0, 2.0, run_spread_pct=2.0, runs=32)
            >>> cal = Calibration("cpu", 2, 2, 32, 5.0, 0.05, 0.05, 0.0, 0.0, (b,))
            >>> cal.confirmation_fractions(repeats=2, family_size=1)
            {'a': 0.03997}
        """
        return self.noise_model().confirmation_gates(repeats=repeats, family_size=family_size)

    def process_priors(self) -> dict[str, tuple[float, float]]:
        """``fullname → (variance, degrees of freedom)`` of one run's log median, from the
        pool's run spreads (benchmarks with fewer than three pool runs are left out).

        Example:
            >>> b = BenchmarkNoise("a", 2, (1.0,), 0, 2.0, 8.0, 12.0, 2.0, run_spread_pct=2.0, runs=12)
            >>> Calibration("cpu", 2, 2, 12, 5.0, 0.05, 0.05, 0.0, 0.0, (b,)).process_priors()
            {'a': (0.0004, 11)}
        """
        return self.noise_model().priors()

    @property
    def held_out_alarms(self) -> int:
        """A/A comparisons that flagged anything with calibrated noise (held out)."""
        if not math.isfinite(self.false_alarm_rate_calibrated):
            return 0
        return round(self.false_alarm_rate_calibrated * self.runs)

    def false_alarm_bound(self, confidence: float = 0.95) -> float:
        """Upper bound of the held-out false-alarm rate at ``confidence``
        (:func:`rlpace.bench.stats.binomial_upper_bound` over :attr:`runs` comparisons;
        comparisons that share pool runs are not independent, so it is a guide, not a
        guarantee). NaN when the held-out rate was not measured.

        Example:
            >>> cal = Calibration("cpu", 16, 2, 16, 5.0, 0.05, 0.05, 0.0, 1 / 16, ())
            >>> cal.held_out_alarms, round(cal.false_alarm_bound(), 3)
            (1, 0.264)
        """
        from rlpace.bench.stats import binomial_upper_bound

        if not math.isfinite(self.false_alarm_rate_calibrated):
            return math.nan
        return binomial_upper_bound(self.held_out_alarms, self.runs, confidence)

    def detection_power(self) -> DetectionPower:
        """Whether the injected slow-down was caught where the calibration promised it
        at :data:`DETECTION_POWER` (see :class:`DetectionPower`); empty without one.

        Files written before the per-comparison promise was recorded fall back to the
        final calibration's promise and each benchmark's detection rate.

        Example:
            >>> b = BenchmarkNoise("a", 4, (1.0,), 0, 1.0, 4.0, 7.0, 2.0, injected=0.1,
            ...                    detected=0.75, achieved_pct=10.0, promised=4,
            ...                    promised_detected=3)
            >>> cal = Calibration("cpu", 4, 2, 8, 5.0, 0.05, 0.05, 0.0, 0.0, (b,), slow_pool=2)
            >>> d = cal.detection_power()
            >>> [(n, round(m, 2), h, t) for n, m, _, h, t in d.rows], d.rate
            ([('a', 6.28, 3, 4)], 0.75)
        """
        legacy = not any(b.promised for b in self.benchmarks)
        rows = []
        for b in self.benchmarks:
            if not (b.injected and b.detected is not None and math.isfinite(b.achieved_pct)):
                continue
            mdc = self.detectable(b, DETECTION_POWER)
            if b.promised:
                rows.append((b.fullname, mdc, b.achieved_pct, b.promised_detected, b.promised))
            elif legacy and math.isfinite(mdc) and mdc <= log_pct_from_time_pct(b.achieved_pct):
                trials = len(self.draws) if self.draws else self.runs
                hits = round(b.detected * trials)
                rows.append((b.fullname, mdc, b.achieved_pct, hits, trials))
        return DetectionPower(DETECTION_POWER, tuple(rows))

    def detectable(self, bench: BenchmarkNoise, power: float = DETECTION_POWER) -> float:
        """The smallest change of ``bench`` flagged with probability ``power`` by ``pr``
        judging as this calibration did: the first stage's gate, and with
        :attr:`confirm` the confirmation's too (shared, at worst, over every benchmark
        of the set), see :func:`detectable_change`.

        Example:
            >>> b = BenchmarkNoise("a", 2, (1.0,), 0, 2.0, 8.0, 12.0, 2.0, run_spread_pct=2.0, runs=32)
            >>> import dataclasses
            >>> cal = Calibration("cpu", 2, 2, 32, 5.0, 0.05, 0.05, 0.0, 0.0, (b,))
            >>> round(cal.detectable(b), 2), round(dataclasses.replace(cal, confirm=2).detectable(b), 2)
            (10.56, 10.59)
        """
        second = None
        if self.confirm:
            second = confirmation_stage(
                bench.run_spread_pct,
                bench.runs,
                repeats=self.confirm,
                family_size=len(self.benchmarks),
                family_alpha=self.family_alpha,
            )
        return detectable_change(
            bench.gate_pct, bench.spread_pct, threshold=self.threshold, power=power, confirm=second
        )

    def to_dict(self) -> dict[str, Any]:
        """The versioned JSON form (NaN becomes None); :meth:`from_dict` reads it back.

        Example:
            >>> d = Calibration("cpu", 4, 2, 16, 5.0, 0.05, 0.05, 0.25, 0.0, ()).to_dict()
            >>> d["format"], d["version"], d["bare_threshold_rate"]
            ('rlpace-bench-calibration', 2, None)
        """
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["environment"] = dict(self.environment)
        data["benchmarks"] = [b.to_dict() for b in self.benchmarks]
        return {"format": CALIBRATION_FORMAT, "version": CALIBRATION_VERSION, **_finite(data)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "calibration") -> Calibration:
        """Read :meth:`to_dict`'s form back, of any :data:`READABLE_VERSIONS` (fields a
        version lacks take their defaults; null numbers become NaN).

        Raises:
            BenchInputError: not a calibration, of a version this rlpace cannot read, or
                missing a field every version has.

        Example:
            >>> Calibration.from_dict({"format": "rlpace-bench-calibration", "version": 9})
            Traceback (most recent call last):
            ...
            rlpace.bench.errors.BenchInputError: calibration: calibration version 9, this rlpace reads versions [1, 2]. Fix: rerun `rlpace-bench aa` to recalibrate
        """
        if not isinstance(data, Mapping) or data.get("format") != CALIBRATION_FORMAT:
            got = data.get("format") if isinstance(data, Mapping) else type(data).__name__
            raise BenchInputError(
                f"{source}: expected format {CALIBRATION_FORMAT!r}, got {got!r}. "
                "Fix: pass a file written by `rlpace-bench aa`"
            )
        if data.get("version") not in READABLE_VERSIONS:
            raise BenchInputError(
                f"{source}: calibration version {data.get('version')!r}, this rlpace reads "
                f"versions {list(READABLE_VERSIONS)}. Fix: rerun `rlpace-bench aa` to recalibrate"
            )
        try:
            return cls(
                set_name=str(data["set_name"]),
                runs=int(data["runs"]),
                repeats=int(data["repeats"]),
                pool=int(data["pool"]),
                threshold=float(data["threshold"]),
                alpha=float(data["alpha"]),
                family_alpha=float(data["family_alpha"]),
                false_alarm_rate=_num(data["false_alarm_rate"]),
                false_alarm_rate_calibrated=_num(data["false_alarm_rate_calibrated"]),
                benchmarks=tuple(BenchmarkNoise.from_dict(b) for b in data["benchmarks"]),
                bare_threshold_rate=_num(data.get("bare_threshold_rate")),
                bare_threshold_share=_num(data.get("bare_threshold_share")),
                inject=data.get("inject"),
                environment=dict(data.get("environment") or {}),
                draws=_draw_pairs(data.get("draws")),
                runs_dir=str(data.get("runs_dir") or ""),
                slow_pool=int(data.get("slow_pool") or 0),
                created=str(data.get("created") or ""),
                confirm=int(data.get("confirm") or 0),
                false_alarm_rate_first=_num(data.get("false_alarm_rate_first")),
                confirm_draws=_draw_pairs(data.get("confirm_draws")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise BenchInputError(
                f"{source}: expected a complete calibration, got a broken field ({exc!r}). "
                "Fix: rerun `rlpace-bench aa` to recalibrate"
            ) from None

    def note(
        self,
        source: str | Path,
        machine_info: Mapping[str, Any] | None = None,
        confirm: int | None = None,
    ) -> CalibrationNote:
        """This calibration summarised for the PR comment it judged (see
        :func:`calibration_note`).

        Example:
            >>> cal = Calibration("cpu", 16, 2, 16, 5.0, 0.05, 0.05, 0.0, 1 / 16, ())
            >>> cal.note("cpu.json").held_out_alarms
            1
        """
        return calibration_note(self, source, machine_info, confirm)


def _num(x: Any) -> float:
    return math.nan if x is None else float(x)


def _draw_pairs(value: Any) -> tuple[tuple[tuple[int, ...], tuple[int, ...]], ...]:
    return tuple((tuple(int(i) for i in a), tuple(int(i) for i in b)) for a, b in value or ())


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def read_calibration(path: Path) -> Calibration:
    """Read a calibration file written by ``rlpace-bench aa``.

    Raises:
        BenchInputError: the file is missing, not a calibration, or of another version.

    Example:
        >>> read_calibration(Path("missing.json"))
        Traceback (most recent call last):
        ...
        rlpace.bench.errors.BenchInputError: missing.json: expected a calibration file from `rlpace-bench aa`, found no file. Fix: run `rlpace-bench aa`, or drop --noise (pr) or --calibration (compare)
    """
    data = load_json_file(
        path,
        "a calibration file from `rlpace-bench aa`",
        "run `rlpace-bench aa`, or drop --noise (pr) or --calibration (compare)",
    )
    return Calibration.from_dict(data, source=str(path))


def load_json_file(path: Path, expected: str, fix: str) -> Any:
    """The JSON document in ``path``; a missing file or broken JSON is a
    :class:`~rlpace.bench.errors.BenchInputError` naming ``expected`` and the ``fix``.

    Example:
        >>> load_json_file(Path("missing.json"), "a record", "write one")
        Traceback (most recent call last):
        ...
        rlpace.bench.errors.BenchInputError: missing.json: expected a record, found no file. Fix: write one
    """
    if not path.is_file():
        raise BenchInputError(f"{path}: expected {expected}, found no file. Fix: {fix}")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BenchInputError(
            f"{path}: expected {expected} (JSON), got a parse error: {exc}. Fix: {fix}"
        ) from None


ENVIRONMENT_KEYS = ("cpu", "cpu_count", "python", "torch", "wall_rounds")
"""What a calibration records of its machine and runs, and what must match for its
gates to hold (``wall_rounds``: the wall-clock cases' rounds floor, ``ROUNDS:SECONDS``;
a calibration recorded before it does not compare it)."""


def machine_environment(machine_info: Mapping[str, Any]) -> dict[str, Any]:
    """The :data:`ENVIRONMENT_KEYS` of a run's ``machine_info`` (what the suite records
    under ``machine_info["rlpace"]``), the form :attr:`Calibration.environment` has.

    Example:
        >>> machine_environment({"rlpace": {"cpu": "AMD EPYC", "cpu_count": 2, "numpy": "2"}})
        {'cpu': 'AMD EPYC', 'cpu_count': 2}
    """
    env = machine_info.get("rlpace") or {}
    return {k: env.get(k) for k in ENVIRONMENT_KEYS if k in env}


def environment_mismatch(
    recorded: Mapping[str, Any], machine_info: Mapping[str, Any] | None
) -> dict[str, tuple[Any, Any]]:
    """``key → (recorded, this run's)`` for each of the :data:`ENVIRONMENT_KEYS` on which
    a calibration's ``recorded`` machine and a run's ``machine_info`` differ (a key
    either side lacks is not compared).

    Example:
        >>> environment_mismatch({"cpu_count": 2, "python": "3.11"}, {"rlpace": {"cpu_count": 16}})
        {'cpu_count': (2, 16)}
    """
    here = machine_environment(machine_info or {})
    return {
        k: (recorded[k], here[k])
        for k in ENVIRONMENT_KEYS
        if k in recorded and k in here and recorded[k] != here[k]
    }


@dataclass(frozen=True)
class CalibrationNote:
    """What a PR comment says about the calibration that judged it: how often it cried
    wolf on held-out A/A runs, how often it caught an injected slow-down, and whether
    it was measured on a machine like the one that ran the comparison.

    Example:
        >>> note = CalibrationNote("reports/calibration/cpu.json", 24, "2026-11-30", 0, 48,
        ...                        0.06, 10.0, 0.9, 58, 64, 4, {"cpu_count": (2, 16)})
        >>> note.to_dict()["mismatch"]
        {'cpu_count': [2, 16]}
    """

    source: str
    """The calibration file."""
    pool: int
    """Clean suite runs it was calibrated on."""
    created: str
    """Date of the pool (``YYYY-MM-DD``), empty when unknown."""
    held_out_alarms: int
    """Held-out A/A comparisons that flagged anything."""
    held_out_runs: int
    """Held-out A/A comparisons."""
    false_alarm_bound: float
    """95% upper bound of the false-alarm rate (NaN when not measured)."""
    injected_pct: float
    """The slow-down injected for the detection figure, in % (NaN without one)."""
    detection_power: float
    """The power at which benchmarks qualified for the detection figure."""
    detection_hits: int
    """Clean-vs-slowed comparisons of qualifying benchmarks that flagged the slow-down."""
    detection_trials: int
    """Clean-vs-slowed comparisons of qualifying benchmarks."""
    detection_benchmarks: int
    """Benchmarks whose noise allows detecting the injected slow-down at that power."""
    mismatch: Mapping[str, tuple[Any, Any]] = field(default_factory=dict)
    """``key → (calibrated, this run)`` for each machine property that differs."""
    confirm: int = 0
    """Runs a side of the confirmation the held-out figures were judged with (0: none)."""
    held_out_alarms_first: int | None = None
    """Held-out A/A comparisons that flagged anything before confirmation (None without one)."""
    run_confirm: int | None = None
    """Runs a side of this run's confirmation (None: not known)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (NaN becomes None), as templates and ``<set>.json`` take it."""
        data = _finite(asdict(self))
        data["mismatch"] = {k: list(v) for k, v in self.mismatch.items()}
        data["detection_rate"] = (
            self.detection_hits / self.detection_trials if self.detection_trials else None
        )
        return data


def calibration_note(
    calibration: Calibration,
    source: str | Path,
    machine_info: Mapping[str, Any] | None = None,
    confirm: int | None = None,
) -> CalibrationNote:
    """Summarise ``calibration`` for the PR comment that it judged.

    Args:
        calibration: the calibration the comparison used.
        source: where it was read from (shown to the reader).
        machine_info: the head run's ``machine_info``; its :data:`ENVIRONMENT_KEYS` are
            compared with the calibration's (a key either side lacks is not compared).
        confirm: the runs a side of this run's confirmation (``pr --confirm``), so the
            comment can say when the calibration's figures were judged otherwise.

    Example:
        >>> cal = Calibration("cpu", 16, 2, 16, 5.0, 0.05, 0.05, 0.0, 1 / 16, (),
        ...                   environment={"cpu_count": 2}, created="2026-11-30T15:23:11")
        >>> note = calibration_note(cal, "cpu.json", {"rlpace": {"cpu_count": 16}})
        >>> note.created, note.held_out_alarms, note.held_out_runs, dict(note.mismatch)
        ('2026-11-30', 1, 16, {'cpu_count': (2, 16)})
    """
    mismatch = environment_mismatch(calibration.environment, machine_info)
    power = calibration.detection_power()
    injected = [b.injected for b in calibration.benchmarks if b.injected]
    return CalibrationNote(
        source=str(source),
        pool=calibration.pool,
        created=calibration.created[:10],
        held_out_alarms=calibration.held_out_alarms,
        held_out_runs=calibration.runs
        if math.isfinite(calibration.false_alarm_rate_calibrated)
        else 0,
        false_alarm_bound=calibration.false_alarm_bound(),
        injected_pct=100 * statistics.median(injected) if injected else math.nan,
        detection_power=power.power,
        detection_hits=power.hits,
        detection_trials=power.trials,
        detection_benchmarks=len(power.rows),
        mismatch=mismatch,
        confirm=calibration.confirm,
        held_out_alarms_first=round(calibration.false_alarm_rate_first * calibration.runs)
        if math.isfinite(calibration.false_alarm_rate_first)
        else None,
        run_confirm=confirm,
    )
