"""A/A duets: how far the pairs of a duet spread, per benchmark, when nothing changed.

``pr`` times its wall-clock cases as duets (base and head run ``k`` at the same time,
one per core) and judges each benchmark pair by pair (a paired t on the pairs' log
ratios, :func:`rlpace.bench.stats.paired_run_test`). With four pairs a benchmark's
own variance has three degrees of freedom; without more, the t quantile at the
Bonferroni level of ~23 rows is near 5 and the gates stay near 16 %. A **duet
calibration** lends each benchmark the spread of its pairs in a pool of A/A duets
(the same code on both sides): ``(spread², pairs − 1)`` is its prior, so its test
stands on the pool's degrees of freedom plus its own, exactly as the sequential
calibration's run spreads do (:meth:`rlpace.bench.gates.NoiseModel.priors`).

:func:`duet_calibration_from_runs` builds one from the result files of a pool
(``base-<k>.json`` / ``head-<k>.json`` as :func:`rlpace.bench.interleave.run_interleaved`
writes them). It also judges random splits of the pool as ``pr`` runs them (``repeats``
pairs, a flag confirmed on ``repeats`` others) with a prior from the *remaining* pairs,
so the file carries a held-out false-alarm count not fitted on the judged runs.
:func:`duet_calibration_from_pr_runs` pools instead the duets that whole A/A ``pr``
runs left (:class:`PrRunDuets`) and leaves one run out at a time: each run's own duets
judged as its ``pr`` run judged them, with a prior from the other runs' duets.

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
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import scipy.stats as _sp

from rlpace.bench.calibration._records import (
    environment_mismatch,
    load_json_file,
    machine_environment,
)
from rlpace.bench.errors import BenchInputError
from rlpace.bench.gates import DETECTION_POWER

__all__ = [
    "DUET_FORMAT",
    "DUET_VERSION",
    "DuetCalibration",
    "PrRunDuets",
    "duet_calibration_from_pr_runs",
    "duet_calibration_from_runs",
    "duet_calibration_path",
    "read_duet_calibration",
]

DUET_FORMAT = "rlpace-bench-duet-calibration"
DUET_VERSION = 1
MIN_POOL_PAIRS = 3
"""Fewest pairs of a benchmark that give it a prior (two degrees of freedom)."""
HELD_OUT_BY = ("split", "run")
"""What a duet calibration's held-out check judged (:attr:`DuetCalibration.held_out_by`)."""
_NO_SPREAD = 1e-6
"""A pair spread (%) below this is rounding of equal ratios: no spread at all."""


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
    """Held-out splits of the pool (judged as ``pr`` judges, a prior from other pairs,
    :func:`duet_calibration_from_runs`) that still flagged a benchmark after the
    confirmation."""
    held_out_alarms_first: int = 0
    """The same splits that flagged any benchmark before the confirmation."""
    held_out_runs: int = 0
    """Held-out splits judged (:attr:`held_out_by` ``"split"``: they share pairs, a
    guide, not independent runs) or A/A ``pr`` runs judged (``"run"``: each with a
    prior from the other runs' duets)."""
    held_out_by: str = "split"
    """What the held-out check judged: ``"split"``, random splits of one pool
    (:func:`duet_calibration_from_runs`), or ``"run"``, whole A/A ``pr`` runs left out
    one at a time (:func:`duet_calibration_from_pr_runs`)."""
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
        return {  # a spread of 0 (a timer too coarse to move) would trust any change
            name: ((spread / 100) ** 2, pairs - 1)
            for name, (spread, pairs) in self.spreads.items()
            if math.isfinite(spread) and spread > _NO_SPREAD and pairs >= MIN_POOL_PAIRS
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

    def pairs_to_detect(
        self, fullname: str, target_pct: float, *, start: int, most: int
    ) -> int | None:
        """The fewest pairs, from ``start`` to ``most``, with which a ``pr`` run detects
        a ``target_pct`` slow-down (:meth:`detectable_pct`); None when even ``most``
        pairs do not, or without a prior.

        Example:
            >>> cal = DuetCalibration("cpu", 20, {"a": (4.3, 20), "b": (7.7, 20)},
            ...                       repeats=4, family_size=23)
            >>> cal.pairs_to_detect("a", 10.0, start=4, most=8)
            5
            >>> cal.pairs_to_detect("b", 10.0, start=4, most=8) is None
            True
        """
        for n in range(max(start, 2), most + 1):
            found = self.detectable_pct(fullname, pairs=n)
            if math.isfinite(found) and found <= target_pct:
                return n
        return None

    def mismatch(self, machine_info: Mapping[str, Any] | None) -> dict[str, tuple[Any, Any]]:
        """``key → (pool's, this run's)`` for each machine property that differs.

        Example:
            >>> cal = DuetCalibration("cpu", 8, {}, environment={"cpu_count": 2})
            >>> cal.mismatch({"rlpace": {"cpu_count": 16}})
            {'cpu_count': (2, 16)}
        """
        return environment_mismatch(self.environment, machine_info)

    def note(self, source: str, machine_info: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """What the PR comment says of this calibration (JSON-able).

        Example:
            >>> DuetCalibration("cpu", 12, {}, held_out_runs=3).note("cpu-duets.json")["pairs"]
            12
        """
        note = {
            "source": str(source),
            "pairs": self.pairs,
            "created": self.created[:10],
            "held_out_alarms": self.held_out_alarms,
            "held_out_alarms_first": self.held_out_alarms_first,
            "held_out_runs": self.held_out_runs,
            "threshold": self.threshold,
            "mismatch": {k: list(v) for k, v in self.mismatch(machine_info).items()},
        }
        if self.held_out_by != "split":  # records before it was added read as splits
            note["held_out_by"] = self.held_out_by
        return note

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
            "held_out_alarms_first": self.held_out_alarms_first,
            "held_out_runs": self.held_out_runs,
            "held_out_by": self.held_out_by,
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
            held_out_by = str(data.get("held_out_by") or "split")  # absent before runs
            if held_out_by not in HELD_OUT_BY:
                raise ValueError(f"held_out_by {held_out_by!r}, not one of {HELD_OUT_BY}")
            return cls(
                set_name=str(data["set"]),
                pairs=int(data["pairs"]),
                spreads=spreads,
                repeats=int(data["repeats"]),
                family_size=int(data["family_size"]),
                alpha=float(data["alpha"]),
                threshold=float(data["threshold"]),
                held_out_alarms=int(data["held_out_alarms"]),
                held_out_alarms_first=int(data["held_out_alarms_first"]),
                held_out_runs=int(data["held_out_runs"]),
                held_out_by=held_out_by,
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


Split = tuple[tuple[Sequence[Path], Sequence[Path]], tuple[Sequence[Path], Sequence[Path]]]
"""``((head files, base files) judged, (head files, base files) of the confirmation)``."""


def duet_calibration_from_runs(
    head_files: Sequence[Path],
    base_files: Sequence[Path],
    *,
    set_name: str = "cpu",
    repeats: int = 4,
    alpha: float = 0.05,
    threshold: float = 5.0,
    family_size: int = 0,
    judge_split: Callable[[Split, DuetCalibration], tuple[bool, bool]] | None = None,
    splits: int = 200,
    seed: int = 0,
) -> DuetCalibration:
    """A duet calibration from an A/A pool's result files, pair ``k`` being
    ``(head_files[k], base_files[k])``.

    The held-out check judges ``splits`` random splits of the pool as ``pr`` runs
    them: ``repeats`` pairs judged, a flag re-judged on ``repeats`` other pairs (the
    confirmation), with a calibration built from the remaining pairs only; which side
    of a pair is "head" is drawn at random too. Splits share pairs, so they are not
    independent A/A runs: the count is a guide, not a rate with a bound.

    Args:
        head_files: one result file per pair, the side called head.
        base_files: the other side, the same pairs in the same order.
        set_name: the set the pool ran.
        repeats: pairs a ``pr`` run judges (and its confirmation re-runs).
        alpha: the family error rate of the held-out check and the detectable changes.
        threshold: the effect threshold (%) they were judged with.
        family_size: the benchmarks a ``pr`` run judges pair by pair together (the
            rows that can be flagged; 0: every benchmark of the pool).
        judge_split: ``(split, prior) → (flagged anything, still flagged after the
            confirmation)``: judges one split the way ``pr`` does (the ``aa`` command
            passes a :class:`~rlpace.bench.judge.Judge`); None skips the check, as does
            a pool with fewer than ``2 × repeats + 3`` pairs.
        splits: random splits judged.
        seed: their seed.

    Raises:
        BenchInputError: the sides differ in length, or fewer than three pairs.

    Example:
        >>> duet_calibration_from_runs([Path("h0.json")], [Path("b0.json")])
        Traceback (most recent call last):
        ...
        rlpace.bench.errors.BenchInputError: duet pool: expected three or more pairs of result files (head and base of each duet), got 1 head and 1 base files. Fix: run more duets, e.g. `rlpace-bench aa --duets 16`
    """
    if len(head_files) != len(base_files) or len(head_files) < MIN_POOL_PAIRS:
        raise BenchInputError(
            "duet pool: expected three or more pairs of result files (head and base of each "
            f"duet), got {len(head_files)} head and {len(base_files)} base files. Fix: run "
            "more duets, e.g. `rlpace-bench aa --duets 16`"
        )
    ratios, environment, created = _pair_ratios(head_files, base_files)
    settings = dict(
        set_name=set_name, repeats=repeats, family_size=family_size, alpha=alpha,
        threshold=threshold, environment=environment, created=created,
    )  # fmt: skip
    spreads = _pool_spreads(ratios)
    calibration = DuetCalibration(pairs=len(ratios), spreads=spreads, **settings)
    n = len(ratios)
    if judge_split is None or n < 2 * repeats + MIN_POOL_PAIRS:
        return calibration
    rng = random.Random(seed)
    first = alarms = 0
    for _ in range(splits):
        order = rng.sample(range(n), n)
        judged, again, rest = order[:repeats], order[repeats : 2 * repeats], order[2 * repeats :]
        # the prior from the rest; each pair's sides swapped or not (either is "head")
        prior = DuetCalibration(
            pairs=len(rest), spreads=_spreads([ratios[k] for k in rest]), **settings
        )

        def sides(keys: Sequence[int]) -> tuple[list[Path], list[Path]]:
            swap = [rng.random() < 0.5 for _ in keys]
            heads = [base_files[k] if s else head_files[k] for k, s in zip(keys, swap)]
            bases = [head_files[k] if s else base_files[k] for k, s in zip(keys, swap)]
            return heads, bases

        flagged, confirmed = judge_split((sides(judged), sides(again)), prior)
        first += bool(flagged)
        alarms += bool(confirmed)
    return replace(
        calibration, held_out_alarms=alarms, held_out_alarms_first=first, held_out_runs=splits
    )


@dataclass(frozen=True)
class PrRunDuets:
    """The duets one A/A ``pr`` run left, one directory a stage
    (``build/rlpace-bench/runs/<set>``, ``<set>-extend-<k>``, ``<set>-confirm``).

    Example:
        >>> run = PrRunDuets("runs", (Path("h0.json"),), (Path("b0.json"),))
        >>> len(run.heads), run.confirm_heads
        (1, ())
    """

    source: str
    """Where the run's duets were read from, as messages name it."""
    heads: tuple[Path, ...]
    """The head side of every duet ``pr`` judged (its first stage and extra duets)."""
    bases: tuple[Path, ...]
    """The base side of the same duets, in the same order."""
    confirm_heads: tuple[Path, ...] = ()
    """The head side of the run's confirmation duets (none when nothing was flagged)."""
    confirm_bases: tuple[Path, ...] = ()
    """Their base side."""


def duet_calibration_from_pr_runs(
    runs: Sequence[PrRunDuets],
    *,
    set_name: str = "cpu",
    repeats: int = 4,
    alpha: float = 0.05,
    threshold: float = 5.0,
    family_size: int = 0,
    judge_run: Callable[[PrRunDuets, DuetCalibration], tuple[bool, bool]] | None = None,
) -> DuetCalibration:
    """A duet calibration from the duets several A/A ``pr`` runs left, checked by
    leaving one run out at a time.

    The pool is every judged duet of every run (each benchmark's spread from the
    duets that timed it). The held-out check judges each run's own duets the way its
    ``pr`` run judged them (``judge_run``), with a prior from the *other* runs' duets
    only: unlike :func:`duet_calibration_from_runs`' random splits, the judged runs
    share no pairs with their prior or with each other, so the count is a rate of
    independent A/A ``pr`` runs (:attr:`DuetCalibration.held_out_by` is ``"run"``).

    Args:
        runs: one entry per A/A ``pr`` run, two or more for the held-out check.
        set_name: the set the runs ran.
        repeats: pairs a ``pr`` run judges at first (its detectable changes are stated
            for these).
        alpha: the family error rate of the held-out check and the detectable changes.
        threshold: the effect threshold (%) they were judged with.
        family_size: the benchmarks a ``pr`` run judges pair by pair together (0:
            every benchmark of the pool).
        judge_run: ``(run, prior) → (flagged anything, still flagged after the
            confirmation)``; None skips the check.

    Raises:
        BenchInputError: fewer than three duets in all, or a run whose two runs of a
            duet timed everything alike.

    Example:
        >>> duet_calibration_from_pr_runs([PrRunDuets("r", (Path("h.json"),), (Path("b.json"),))])
        Traceback (most recent call last):
        ...
        rlpace.bench.errors.BenchInputError: duet pool of 1 A/A pr run: expected three or more duets in all, got 1. Fix: run more A/A `make bench` (each leaves its duets in build/rlpace-bench/runs)
    """
    for run in runs:
        if len(run.heads) != len(run.bases):
            raise BenchInputError(
                f"{run.source}: expected a head and a base file for each duet, got "
                f"{len(run.heads)} head and {len(run.bases)} base files. Fix: pass the runs "
                "directory a `pr` run left, as it left it"
            )
    total = sum(len(run.heads) for run in runs)
    if total < MIN_POOL_PAIRS:
        raise BenchInputError(
            f"duet pool of {len(runs)} A/A pr run{'s' if len(runs) != 1 else ''}: expected "
            f"three or more duets in all, got {total}. Fix: run more A/A `make bench` (each "
            "leaves its duets in build/rlpace-bench/runs)"
        )
    per_run = [_pair_ratios(run.heads, run.bases) for run in runs]
    ratios = [pair for run_ratios, _, _ in per_run for pair in run_ratios]
    environment = next((env for _, env, _ in per_run if env), {})
    created = min((when for _, _, when in per_run if when), default="")
    settings = dict(
        set_name=set_name, repeats=repeats, family_size=family_size, alpha=alpha,
        threshold=threshold, environment=environment, created=created,
    )  # fmt: skip
    calibration = DuetCalibration(pairs=len(ratios), spreads=_pool_spreads(ratios), **settings)
    if judge_run is None or len(runs) < 2:
        return calibration
    first = alarms = 0
    for i, run in enumerate(runs):
        others = [pair for j, (r, _, _) in enumerate(per_run) if j != i for pair in r]
        prior = DuetCalibration(pairs=len(others), spreads=_spreads(others), **settings)
        flagged, confirmed = judge_run(run, prior)
        first += bool(flagged)
        alarms += bool(confirmed)
    return replace(
        calibration,
        held_out_alarms=alarms,
        held_out_alarms_first=first,
        held_out_runs=len(runs),
        held_out_by="run",
    )


def _pair_ratios(
    head_files: Sequence[Path], base_files: Sequence[Path]
) -> tuple[list[dict[str, float]], dict[str, Any], str]:
    """Per pair, ``benchmark → log(head / base)`` of the run medians; the machine
    environment and date of the first head run."""
    from rlpace.bench.results import load_results

    ratios: list[dict[str, float]] = []
    environment: dict[str, Any] = {}
    created = ""
    for h_path, b_path in zip(head_files, base_files, strict=True):
        head, base = load_results(h_path), load_results(b_path)
        environment = environment or machine_environment(head.attrs.get("machine_info") or {})
        created = created or str(head.attrs.get("datetime") or "")
        b_median = dict(zip(base["fullname"], base["median"], strict=True))
        pair = {}
        for name, h in zip(head["fullname"], head["median"], strict=True):
            b = b_median.get(name)
            if b is not None and h > 0 and b > 0 and math.isfinite(h) and math.isfinite(b):
                pair[name] = math.log(h / b)
        if pair and not any(pair.values()):
            raise BenchInputError(
                f"{h_path} and {b_path}: expected the two runs of a duet, got the same "
                "timings for every benchmark (copies of one run?). Fix: pass the runs "
                "directory `aa --duets` wrote, or run `rlpace-bench aa --duets 16`"
            )
        ratios.append(pair)
    return ratios, environment, created


def _pool_spreads(ratios: Sequence[Mapping[str, float]]) -> dict[str, tuple[float, int]]:
    """:func:`_spreads` of a whole pool, refused when no benchmark's pairs moved."""
    spreads = _spreads(ratios)
    if spreads and not any(spread > _NO_SPREAD for spread, _ in spreads.values()):
        raise BenchInputError(
            f"duet pool of {len(ratios)} pairs: expected pairs that differ from run to run, "
            "got the same ratios in every pair for every benchmark (copies of one duet?). "
            "Fix: pass the runs directory `aa --duets` wrote, or run `rlpace-bench aa --duets 16`"
        )
    return spreads


def _spreads(ratios: Sequence[Mapping[str, float]]) -> dict[str, tuple[float, int]]:
    """Per benchmark, the standard deviation (× 100) of its pairs' log ratios and how
    many pairs timed it (two or more)."""
    by_name: dict[str, list[float]] = {}
    for pair in ratios:
        for name, value in pair.items():
            by_name.setdefault(name, []).append(value)
    return {
        name: (float(np.std(r, ddof=1)) * 100, len(r)) for name, r in by_name.items() if len(r) >= 2
    }


def _num(value: Any) -> float:
    return math.nan if value is None else float(value)


def _finite_or_none(value: float) -> float | None:
    return value if math.isfinite(value) else None
