"""A/A duets: how far the pairs of a duet spread, per benchmark, when nothing changed.

``pr`` times its wall-clock cases as duets (base and head run ``k`` at the same time,
one per core) and judges each benchmark pair by pair (a paired t on the pairs' log
ratios, :func:`rlpace.bench.stats.paired_run_test`). With four pairs a benchmark's
own variance has three degrees of freedom; without more, the t quantile at the
Bonferroni level of ~23 rows is near 5 and the gates stay near 16 %. A **duet
calibration** lends each benchmark the spread of its pairs in a pool of A/A duets
(the same code on both sides): ``(spread², pairs − 1)`` is its prior, so its test
stands on the pool's degrees of freedom plus its own, exactly as the sequential
calibration's run spreads do (:meth:`rlpace.bench.judge.NoiseModel.priors`).

:func:`duet_calibration_from_runs` builds one from the result files of a pool
(``base-<k>.json`` / ``head-<k>.json`` as :func:`rlpace.bench.pipeline.run_interleaved`
writes them); the pool is also split into folds of ``repeats`` pairs, each judged as
``pr`` would judge it with a prior from the *other* pairs, so the file carries a
held-out false-alarm count that was not fitted on its own runs.

Example:
    >>> cal = DuetCalibration("cpu", 12, {"t.py::a": (5.0, 12)}, repeats=4, family_size=1)
    >>> {name: (round(v, 6), df) for name, (v, df) in cal.paired_priors().items()}
    {'t.py::a': (0.0025, 11)}
    >>> round(cal.detectable_pct("t.py::a"), 1)
    9.1
    >>> DuetCalibration.from_dict(cal.to_dict()) == cal
    True
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import scipy.stats as _sp

from rlpace.bench.calibration._records import (
    ENVIRONMENT_KEYS,
    load_json_file,
    machine_environment,
)
from rlpace.bench.errors import BenchInputError
from rlpace.bench.gates import DETECTION_POWER
from rlpace.bench.stats import binomial_upper_bound

__all__ = [
    "DUET_FORMAT",
    "DUET_VERSION",
    "DuetCalibration",
    "duet_calibration_from_runs",
    "duet_calibration_path",
    "read_duet_calibration",
]

DUET_FORMAT = "rlpace-bench-duet-calibration"
DUET_VERSION = 1
MIN_POOL_PAIRS = 3
"""Fewest pairs of a benchmark that give it a prior (two degrees of freedom)."""


def duet_calibration_path(calibration_dir: Path, set_name: str) -> Path:
    """Where ``pr`` looks for a set's duet calibration: ``<dir>/<set>-duets.json``.

    Example:
        >>> duet_calibration_path(Path("reports/calibration"), "cpu").name
        'cpu-duets.json'
    """
    return calibration_dir / f"{set_name}-duets.json"


@dataclass(frozen=True)
class DuetCalibration:
    """Per benchmark, the spread of the log ratios of A/A duet pairs.

    Example:
        >>> cal = DuetCalibration("cpu", 8, {"a": (4.0, 8), "b": (9.0, 8)}, repeats=4)
        >>> sorted(cal.paired_priors())
        ['a', 'b']
    """

    set_name: str
    """``cpu`` or ``gpu``."""
    pairs: int
    """Duet pairs in the pool."""
    spreads: Mapping[str, tuple[float, int]]
    """``fullname → (pair spread %, pairs)``: the standard deviation of
    ``log(head_k / base_k)`` × 100 over the pool's pairs that timed the benchmark."""
    repeats: int = 4
    """Pairs a ``pr`` run judges (its detectable changes are stated for these)."""
    family_size: int = 0
    """Benchmarks a ``pr`` run judges pair by pair together (Bonferroni; 0: those here)."""
    alpha: float = 0.05
    """Family error rate the detectable changes and the held-out check were judged at."""
    threshold: float = 5.0
    """The effect threshold (%) of the held-out check and the detectable changes: a
    slow-down must also take this share off the throughput to be flagged."""
    held_out_alarms: int = 0
    """Held-out folds (``repeats`` pairs each, judged with a prior from the other
    pairs) that flagged any benchmark."""
    held_out_runs: int = 0
    """Held-out folds judged."""
    environment: Mapping[str, Any] = field(default_factory=dict)
    """The :data:`~rlpace.bench.calibration.ENVIRONMENT_KEYS` of the pool's machine."""
    created: str = ""
    """When the pool ran (ISO date and time, as the runs recorded it)."""

    def paired_priors(self) -> dict[str, tuple[float, int]]:
        """``fullname → (variance, degrees of freedom)`` of a pair's log ratio: the
        prior :func:`rlpace.bench.compare.compare_runs` takes as ``paired_priors``.

        Example:
            >>> DuetCalibration("cpu", 2, {"a": (3.0, 2)}).paired_priors()   # too few pairs
            {}
        """
        return {
            name: ((spread / 100) ** 2, pairs - 1)
            for name, (spread, pairs) in self.spreads.items()
            if math.isfinite(spread) and pairs >= MIN_POOL_PAIRS
        }

    def detectable_pct(
        self, fullname: str, pairs: int | None = None, power: float = DETECTION_POWER
    ) -> float:
        """The slow-down in % of time a ``pr`` run of ``pairs`` duets (default
        :attr:`repeats`) detects with ``power``, judged with this prior alone (its own
        pairs' spread moves it either way): the measured change must clear both the
        paired test's gate and :attr:`threshold`. NaN without a prior.

        Example:
            >>> cal = DuetCalibration("cpu", 20, {"a": (6.7, 20)}, repeats=4, family_size=23)
            >>> round(cal.detectable_pct("a"), 1), round(cal.detectable_pct("a", pairs=8), 1)
            (17.4, 11.8)
        """
        prior = self.paired_priors().get(fullname)
        if prior is None:
            return math.nan
        n = self.repeats if pairs is None else pairs
        variance, df = prior[0], prior[1] + n - 1
        m = self.family_size or len(self.spreads)
        t_alpha = float(_sp.t.ppf(1 - self.alpha / (2 * max(m, 1)), df))
        t_power = float(_sp.t.ppf(power, df))
        se = math.sqrt(variance / n)
        # a slow-down is flagged when it takes more than `threshold` % off the throughput
        beyond = max(t_alpha * se, -math.log1p(-min(self.threshold, 99.0) / 100))
        return math.expm1(beyond + t_power * se) * 100

    def mismatch(self, machine_info: Mapping[str, Any] | None) -> dict[str, tuple[Any, Any]]:
        """``key → (pool's, this run's)`` for each machine property that differs.

        Example:
            >>> cal = DuetCalibration("cpu", 8, {}, environment={"cpu_count": 2})
            >>> cal.mismatch({"rlpace": {"cpu_count": 16}})
            {'cpu_count': (2, 16)}
        """
        here = machine_environment(machine_info or {})
        return {
            k: (self.environment[k], here[k])
            for k in ENVIRONMENT_KEYS
            if k in self.environment and k in here and self.environment[k] != here[k]
        }

    def note(self, source: str, machine_info: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """What the PR comment says of this calibration (JSON-able).

        Example:
            >>> DuetCalibration("cpu", 12, {}, held_out_runs=3).note("cpu-duets.json")["pairs"]
            12
        """
        return {
            "source": str(source),
            "pairs": self.pairs,
            "created": self.created[:10],
            "held_out_alarms": self.held_out_alarms,
            "held_out_runs": self.held_out_runs,
            "mismatch": {k: list(v) for k, v in self.mismatch(machine_info).items()},
        }

    def to_dict(self) -> dict[str, Any]:
        """Versioned JSON-able form; :meth:`from_dict` reads it back unchanged."""
        return {
            "format": DUET_FORMAT,
            "version": DUET_VERSION,
            "set": self.set_name,
            "pairs": self.pairs,
            "repeats": self.repeats,
            "family_size": self.family_size,
            "alpha": self.alpha,
            "threshold": self.threshold,
            "held_out_alarms": self.held_out_alarms,
            "held_out_runs": self.held_out_runs,
            "held_out_bound": _finite_or_none(
                binomial_upper_bound(self.held_out_alarms, self.held_out_runs)
            ),
            "environment": dict(self.environment),
            "created": self.created,
            "benchmarks": {
                name: {"pair_spread_pct": _finite_or_none(spread), "pairs": pairs}
                for name, (spread, pairs) in sorted(self.spreads.items())
            },
        }

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "duet calibration") -> DuetCalibration:
        """Read :meth:`to_dict`'s form back; a file of another kind or version is refused.

        Example:
            >>> DuetCalibration.from_dict({"format": "x"}, source="f.json")
            Traceback (most recent call last):
            ...
            rlpace.bench.errors.BenchInputError: f.json: expected a duet calibration (format rlpace-bench-duet-calibration, version 1) from `rlpace-bench aa --duets`, got format 'x' version None. Fix: rerun `rlpace-bench aa --duets N`
        """
        kind = data.get("format") if isinstance(data, Mapping) else None
        version = data.get("version") if isinstance(data, Mapping) else None
        if kind != DUET_FORMAT or version != DUET_VERSION:
            raise BenchInputError(
                f"{source}: expected a duet calibration (format {DUET_FORMAT}, version "
                f"{DUET_VERSION}) from `rlpace-bench aa --duets`, got format {kind!r} "
                f"version {version!r}. Fix: rerun `rlpace-bench aa --duets N`"
            )
        try:
            spreads = {
                str(name): (_num(entry["pair_spread_pct"]), int(entry["pairs"]))
                for name, entry in data["benchmarks"].items()
            }
            if any(s < 0 or p < 0 for s, p in spreads.values()):
                raise ValueError("a negative spread or pair count")
            return cls(
                set_name=str(data["set"]),
                pairs=int(data["pairs"]),
                spreads=spreads,
                repeats=int(data["repeats"]),
                family_size=int(data["family_size"]),
                alpha=float(data["alpha"]),
                threshold=float(data["threshold"]),
                held_out_alarms=int(data["held_out_alarms"]),
                held_out_runs=int(data["held_out_runs"]),
                environment=dict(data.get("environment") or {}),
                created=str(data.get("created") or ""),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise BenchInputError(
                f"{source}: expected a complete duet calibration, got a broken field "
                f"({exc!r}). Fix: rerun `rlpace-bench aa --duets N`"
            ) from None


def read_duet_calibration(path: Path) -> DuetCalibration:
    """Read a duet calibration written by ``rlpace-bench aa --duets``.

    Raises:
        BenchInputError: the file is missing, not JSON or not a duet calibration.

    Example:
        >>> read_duet_calibration(Path("missing.json"))
        Traceback (most recent call last):
        ...
        rlpace.bench.errors.BenchInputError: missing.json: expected a duet calibration from `rlpace-bench aa --duets`, found no file. Fix: run `rlpace-bench aa --duets 16`, or drop --duets
    """
    data = load_json_file(
        path,
        "a duet calibration from `rlpace-bench aa --duets`",
        "run `rlpace-bench aa --duets 16`, or drop --duets",
    )
    return DuetCalibration.from_dict(data, source=str(path))


def duet_calibration_from_runs(
    head_files: Sequence[Path],
    base_files: Sequence[Path],
    *,
    set_name: str = "cpu",
    repeats: int = 4,
    alpha: float = 0.05,
    threshold: float = 5.0,
    family_size: int = 0,
    judge_fold: Callable[[Sequence[Path], Sequence[Path], DuetCalibration], bool] | None = None,
) -> DuetCalibration:
    """A duet calibration from an A/A pool's result files, pair ``k`` being
    ``(head_files[k], base_files[k])``.

    Args:
        head_files: one result file per pair, the side called head.
        base_files: the other side, the same pairs in the same order.
        set_name: the set the pool ran.
        repeats: pairs a ``pr`` run judges; the pool is also cut into folds of this
            many pairs for the held-out check.
        alpha: the family error rate of the held-out check and the detectable changes.
        threshold: the effect threshold (%) they were judged with.
        family_size: the benchmarks a ``pr`` run judges pair by pair together (the
            rows that can be flagged; 0: every benchmark of the pool).
        judge_fold: ``(head files, base files, prior) → flagged anything?``: judges one
            fold the way ``pr`` does, with a calibration built from the other pairs
            (the ``aa`` command passes a :class:`~rlpace.bench.judge.Judge`); None
            skips the held-out check.

    Raises:
        BenchInputError: the sides differ in length, or fewer than three pairs.

    Example:
        >>> duet_calibration_from_runs([Path("h0.json")], [Path("b0.json")])
        Traceback (most recent call last):
        ...
        rlpace.bench.errors.BenchInputError: duet pool: expected three or more pairs of result files (head and base of each duet), got 1 head and 1 base files. Fix: run more duets, e.g. `rlpace-bench aa --duets 16`
    """
    from rlpace.bench.results import load_results

    if len(head_files) != len(base_files) or len(head_files) < MIN_POOL_PAIRS:
        raise BenchInputError(
            "duet pool: expected three or more pairs of result files (head and base of each "
            f"duet), got {len(head_files)} head and {len(base_files)} base files. Fix: run "
            "more duets, e.g. `rlpace-bench aa --duets 16`"
        )
    ratios: dict[str, list[float]] = {}
    environment: dict[str, Any] = {}
    created = ""
    for h_path, b_path in zip(head_files, base_files, strict=True):
        head, base = load_results(h_path), load_results(b_path)
        environment = environment or machine_environment(head.attrs.get("machine_info") or {})
        created = created or str(head.attrs.get("datetime") or "")
        b_median = dict(zip(base["fullname"], base["median"], strict=True))
        for name, h in zip(head["fullname"], head["median"], strict=True):
            b = b_median.get(name)
            if b is not None and h > 0 and b > 0 and math.isfinite(h) and math.isfinite(b):
                ratios.setdefault(name, []).append(math.log(h / b))
    spreads = {
        name: (float(np.std(r, ddof=1)) * 100, len(r)) for name, r in ratios.items() if len(r) >= 2
    }
    calibration = DuetCalibration(
        set_name=set_name,
        pairs=len(head_files),
        spreads=spreads,
        repeats=repeats,
        family_size=family_size,
        alpha=alpha,
        threshold=threshold,
        environment=environment,
        created=created,
    )
    if judge_fold is None:
        return calibration
    alarms = folds = 0
    for start in range(0, len(head_files) - repeats + 1, repeats):
        fold = range(start, start + repeats)
        rest_h = [p for i, p in enumerate(head_files) if i not in fold]
        rest_b = [p for i, p in enumerate(base_files) if i not in fold]
        if len(rest_h) < MIN_POOL_PAIRS:
            break
        prior = duet_calibration_from_runs(
            rest_h, rest_b, set_name=set_name, repeats=repeats, alpha=alpha,
            threshold=threshold, family_size=family_size,
        )  # fmt: skip
        folds += 1
        alarms += bool(
            judge_fold([head_files[i] for i in fold], [base_files[i] for i in fold], prior)
        )
    return replace(calibration, held_out_alarms=alarms, held_out_runs=folds)


def _num(value: Any) -> float:
    return math.nan if value is None else float(value)


def _finite_or_none(value: float) -> float | None:
    return value if math.isfinite(value) else None
