"""What a comparison is: one typed verdict per benchmark, and the run it came from.

:class:`Comparison` holds a :class:`BenchmarkChange` per benchmark, each with its
:class:`Verdict`, and what judged them (threshold, calibration, control floor, pairs,
confirmation). :mod:`rlpace.bench.compare` computes them from two result tables;
:meth:`Comparison.to_dict` is the versioned record the comment job reads back
(:mod:`rlpace.bench.comparison_record`), and the renderer only formats them.

Example:
    >>> row = BenchmarkChange("a", "a", Verdict.WORSENED, median_change_pct=-12.0)
    >>> comparison = Comparison(rows=(row,))
    >>> comparison.counts()["worsened"], comparison.to_dict()["version"]
    (1, 4)
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np
import pandas as pd

from rlpace.bench.controls import NoiseFloor
from rlpace.bench.results import environment_differences

__all__ = [
    "COMPARISON_FORMAT_VERSION",
    "BenchmarkChange",
    "Comparison",
    "Verdict",
    "comparison_frame",
]

#: Version of :meth:`Comparison.to_dict`'s layout; bump it when fields change meaning.
#: 4: rows carry ``value_unit`` (their ``*_mean``/``*_median``/``*_max`` are in it, not
#: always seconds) and ``assumed_noise_pct``.
COMPARISON_FORMAT_VERSION = 4

_NAN = float("nan")


class Verdict(enum.Enum):
    """What happened to one benchmark between base and head.

    Example:
        >>> Verdict("worsened") is Verdict.WORSENED
        True
        >>> [v.value for v in Verdict]
        ['improved', 'worsened', 'unchanged', 'new', 'removed', 'failed', 'skipped']
    """

    IMPROVED = "improved"
    WORSENED = "worsened"
    UNCHANGED = "unchanged"
    """Within noise or below the threshold (rendered as "noise")."""
    NEW = "new"
    """Only in head (or the base run failed, so there is nothing to compare against)."""
    REMOVED = "removed"
    """Only in base."""
    FAILED = "failed"
    """The head run of this benchmark failed."""
    SKIPPED = "skipped"
    """asv skipped it on a side (a ``NaN`` result: the benchmark raised asv's
    ``NotImplementedError`` or ``SkipNotImplemented``), so there is nothing to compare;
    as in asv's own ``compare``, neither a failure nor a change."""


@dataclass(frozen=True)
class BenchmarkChange:
    """The comparison of one benchmark: both sides' numbers, the change and the verdict.

    Values are in ``value_unit`` (seconds for timings); ``*_ops`` in calls per second
    (``1 / mean``, timings only). Percentages are
    signed so that positive is better. NaN marks what cannot be computed (a missing
    side, no raw samples, a zero time).

    Example:
        >>> c = BenchmarkChange(fullname="t.py::a", name="a", verdict=Verdict.NEW)
        >>> c.verdict.value, c.has_base
        ('new', False)
    """

    fullname: str
    name: str
    verdict: Verdict
    group: str | None = None
    impl: str | None = None
    params: Mapping[str, Any] | None = None
    head_mean: float = _NAN
    head_median: float = _NAN
    head_max: float = _NAN
    head_ops: float = _NAN
    head_rounds: int = 0
    base_mean: float = _NAN
    base_median: float = _NAN
    base_max: float = _NAN
    base_ops: float = _NAN
    base_rounds: int = 0
    change_pct: float = _NAN
    """``(head ops − base ops) / base ops × 100`` (the seed bot's number)."""
    median_change_pct: float = _NAN
    """Change of the median, positive = better; the number the verdict is about."""
    ci_low_pct: float = _NAN
    """Lower end of the interval of ``median_change_pct``."""
    ci_high_pct: float = _NAN
    """Upper end of the interval of ``median_change_pct``."""
    p_value: float = _NAN
    """Mann–Whitney U two-sided p-value (NaN without raw samples)."""
    q_value: float = _NAN
    """Benjamini–Hochberg adjusted p-value over all compared benchmarks."""
    noise_pct: float = _NAN
    """The noise a change must exceed: the largest of the interval's half-width,
    ``mdc_pct``, ``run_noise_pct`` and the calibrated A/A noise."""
    mdc_pct: float = _NAN
    """Minimal detectable change at 80% power: the larger of what the rounds and what
    the runs (processes) allow."""
    run_noise_pct: float = _NAN
    """Half-width of the process-level interval (level ``alpha / m``, see
    :func:`~rlpace.bench.compare.compare_runs`), on the side the change went (NaN with fewer than two runs a
    side)."""
    head_runs: int = 0
    """Runs (processes) merged into the head side."""
    base_runs: int = 0
    """Runs (processes) merged into the base side."""
    method: str = "none"
    """``"mann-whitney"``, ``"intervals"``, ``"paired"`` or ``"none"`` (not compared)."""
    higher_is_better: bool = False
    items_per_call: float = _NAN
    """Work items per call (``extra_info["items_per_call"]``), for throughput."""
    unit: str = ""
    """Name of one work item (``extra_info["unit"]``)."""
    note: str = ""
    """Why the verdict is what it is, when that is not obvious (e.g. a zero time)."""
    confirmed: bool | None = None
    """Whether fresh confirmation runs flagged it again, the same way
    (:func:`~rlpace.bench.compare.confirm_verdicts`); None when it was not put to confirmation."""
    confirm_change_pct: float = _NAN
    """The change (median, positive = better) the confirmation runs measured."""
    value_unit: str = "seconds"
    """What the values measure: ``"seconds"``, ``"bytes"`` or an asv ``track_*`` unit
    (:mod:`rlpace.bench.units`)."""
    assumed_noise_pct: float = _NAN
    """The process noise assumed (not measured) because a side had one run and no
    calibration: :data:`~rlpace.bench.thresholds.SINGLE_RUN_NOISE` in %; NaN when the noise was measured."""
    count_verdict: str | None = None
    """The count tier's verdict (``regression``, ``improvement``, ``same``,
    ``not-counted``, ...; see :mod:`rlpace.bench.counts`), None when it did not run."""
    count_change_pct: float | None = None
    """Instructions per call, ``(head / base - 1) * 100``: positive = more work."""
    cycles_change_pct: float | None = None
    """Estimated cycles per call, ``(head / base - 1) * 100``: positive = slower."""
    count_gate_pct: float | None = None
    """The instruction change (percent) beyond which the count tier flags."""
    count_detect_pct: float | None = None
    """The smallest instruction change (percent) sure to clear that gate: the gate plus
    the case's A/A spread. None in records written before it was kept (the gate then
    stands in for it)."""
    count_note: str | None = None
    """How counts and time agree, or why the case was not counted."""
    count_causes: Mapping[str, Any] | None = None
    """For a count regression: the functions whose cost grew most
    (``{"native": [[name, base, head], ...], "python": [...], "bytecode": [...],
    "priced": [...]}``; ``priced``: calls per call into the allocator and the type cache)."""
    work_verdict: str | None = None
    """The work counts' verdict (``regression``, ``improvement``, ``mixed``,
    ``same``, ``unmeasured``; see :mod:`rlpace.bench.work_counts`), None for a case
    with no counts on either side."""
    work_base: Mapping[str, float] | None = None
    """Kernels, syncs, copies, aten ops and Python calls per call in base (medians over
    the calls; a metric is here when both sides counted it)."""
    work_head: Mapping[str, float] | None = None
    """The same in head."""
    work_moved: tuple[str, ...] = ()
    """The metrics that moved between base and head (:mod:`rlpace.bench.work_counts`)."""
    work_names: Sequence[Sequence[Any]] | None = None
    """For a case whose work counts moved: ``[[event name, base, head], ...]``, the aten ops
    and CUDA runtime calls whose count per call moved most (None: none kept)."""
    work_note: str | None = None
    """How the work counts and the time agree, or why the case was not measured."""
    time_verdict: str | None = None
    """What the clock alone said (a :class:`Verdict` value) where a count layer's
    verdict (the work counts', the count tier's) replaced it in ``verdict``; None where
    ``verdict`` is still the clock's (:attr:`clock_verdict` reads either)."""

    @property
    def clock_verdict(self) -> Verdict:
        """What the clock alone said: :attr:`time_verdict` where a count layer kept it,
        else :attr:`verdict`.

        Example:
            >>> row = BenchmarkChange("a", "a", Verdict.WORSENED, time_verdict="improved")
            >>> row.verdict.value, row.clock_verdict.value
            ('worsened', 'improved')
        """
        return Verdict(self.time_verdict) if self.time_verdict else self.verdict

    @property
    def counts_decided(self) -> bool:
        """Whether a count layer's verdict, not the clock's, stands in :attr:`verdict`.

        Example:
            >>> BenchmarkChange("a", "a", Verdict.WORSENED, time_verdict="improved").counts_decided
            True
        """
        return self.clock_verdict is not self.verdict

    @property
    def has_base(self) -> bool:
        """Whether the base run measured this benchmark.

        Example:
            >>> BenchmarkChange("a", "a", Verdict.REMOVED, base_mean=1e-3, base_rounds=5).has_base
            True
        """
        return self.base_rounds > 0 or math.isfinite(self.base_mean)

    @property
    def head_throughput(self) -> float:
        """Work items per second in head (``items_per_call / median``), NaN if unknown.

        Example:
            >>> BenchmarkChange("a", "a", Verdict.NEW, head_median=0.5, items_per_call=64).head_throughput
            128.0
        """
        return _throughput(self.items_per_call, self.head_median)

    @property
    def base_throughput(self) -> float:
        """Work items per second in base, NaN if unknown.

        Example:
            >>> BenchmarkChange("a", "a", Verdict.REMOVED, base_median=2.0, items_per_call=64).base_throughput
            32.0
        """
        return _throughput(self.items_per_call, self.base_median)


def _throughput(items: float, seconds: float) -> float:
    if not (math.isfinite(items) and math.isfinite(seconds)) or seconds <= 0:
        return _NAN
    return items / seconds


@dataclass(frozen=True)
class Comparison:
    """All benchmark changes of one head run against one base run.

    Rows follow the head file's order; benchmarks only in base come last.

    Example:
        >>> from rlpace.bench.results import results_from_records
        >>> head = results_from_records([{"fullname": "a", "data": [1.0, 2.0]}])
        >>> from rlpace.bench.compare import compare_runs
        >>> c = compare_runs(head)
        >>> c.counts()["new"], c.has_base, c.to_dict()["version"]
        (1, False, 4)
    """

    rows: tuple[BenchmarkChange, ...]
    threshold: float = 5.0
    """Effect size in % below which nothing is flagged (rows judged pair by pair:
    :attr:`paired_threshold`)."""
    paired_threshold: float | None = None
    """Effect size in % below which a row judged pair by pair (method ``"paired"``) is
    not flagged; None: :attr:`threshold`, as in records written before it existed."""
    alpha: float = 0.05
    """False discovery rate for the q-values."""
    count_threshold: float | None = None
    """Effect size in % below which a row that counts work (method ``"counted"``: an asv
    ``track_*`` of instructions, aten ops ...) is not flagged; None when no row was
    judged so (:func:`rlpace.bench.counted_rows.count_verdict`)."""
    has_base: bool = True
    """False when there was no base run (every row is new or failed)."""
    head: Mapping[str, Any] = field(default_factory=dict)
    """Metadata of the head run: source, format, commit, datetime."""
    base: Mapping[str, Any] = field(default_factory=dict)
    """Metadata of the base run (empty without one)."""
    noise_floor: NoiseFloor | None = None
    """The run-level noise floor from negative controls, when the caller measured one
    (:func:`rlpace.bench.controls.noise_floor_from_controls`; ``pr`` does)."""
    calibration: Mapping[str, Any] | None = None
    """What the calibration that judged it promises, for the reader
    (:meth:`rlpace.bench.calibration.CalibrationNote.to_dict`; ``pr`` sets it)."""
    variance_prior: tuple[float, float] | None = None
    """``(variance, degrees of freedom)`` of one run's log median, fitted on all the
    benchmarks compared at process level (None with fewer than three): the prior of the
    benchmarks without a calibrated one. A confirmation of a few benchmarks borrows it."""
    prior_stretch: tuple[float, float] | None = None
    """``(stretch, degrees of freedom)`` by which the duet pool's pair priors (or, in a
    comparison of runs one after another, the calibration's process priors) were
    widened for this run (:func:`rlpace.bench.stats.fit_prior_stretch`: how much wider
    its pairs or runs spread than the pool's, fitted over the benchmarks with a pool
    prior; None when fewer than three had one). A confirmation of a few benchmarks
    borrows it."""
    confirm_repeats: int = 0
    """Runs per side of the confirmation stage (0: none ran)."""
    paired: int = 0
    """Pairs the benchmarks judged pair by pair had (``compare_runs(paired=True)``:
    base and head run ``k`` ran at the same time); 0: none was."""
    calibration_changes: tuple[str, ...] = ()
    """Checked-in calibration files (relative paths) that the head changes, adds or
    removes: ``pr`` judged with the base's copies, since a pull request cannot set its
    own gates; the comment says so."""
    duet_calibration: Mapping[str, Any] | None = None
    """The A/A duet pool whose pair spreads were the paired tests' priors, for the
    reader (:meth:`rlpace.bench.calibration.DuetCalibration.note`; None: none was)."""
    count_tier: Mapping[str, Any] | None = None
    """What the count tier did, for the reader (:mod:`rlpace.bench.counts.tier`; None
    when it was not asked for): ``unavailable`` (why it could not run), ``warnings``,
    ``counted``, ``not_counted``, ``wall_s``, ``gates``."""
    pair_spread: Mapping[str, Any] | None = None
    """How widely this run's duet pairs spread against the A/A duets that lent them
    their priors (:func:`~rlpace.bench.compare.pair_spread_summary`; None: no benchmark was judged pair by pair
    with such a prior). A busy machine shows here first: ``ratio`` well above 1."""
    time_budget: Mapping[str, Any] | None = None
    """What ``pr``'s time budget cut (None: nothing, or no budget): ``budget_min``, the
    extra duets it had planned past ``2 × repeats`` pairs (``planned_duets``) and ran
    (``ran_duets``), and how many cases got fewer pairs than planned (``short``)."""

    def by_verdict(self, verdict: Verdict) -> tuple[BenchmarkChange, ...]:
        """The rows with this verdict, in row order.

        Example:
            >>> Comparison(rows=()).by_verdict(Verdict.WORSENED)
            ()
        """
        return tuple(r for r in self.rows if r.verdict is verdict)

    def counts(self) -> dict[str, int]:
        """How many benchmarks got each verdict, plus ``"total"``.

        Example:
            >>> Comparison(rows=()).counts()["total"]
            0
        """
        out = {v.value: 0 for v in Verdict}
        for row in self.rows:
            out[row.verdict.value] += 1
        out["total"] = len(self.rows)
        return out

    def threshold_for(self, row: BenchmarkChange) -> float:
        """The effect threshold (%) that applied to ``row``: :attr:`paired_threshold`
        for a row judged pair by pair, :attr:`count_threshold` for a row that counts
        work, :attr:`threshold` for any other.

        Example:
            >>> c = Comparison(rows=(), threshold=5.0, paired_threshold=2.0)
            >>> row = BenchmarkChange("a", "a", Verdict.UNCHANGED, method="paired")
            >>> c.threshold_for(row), c.threshold_for(BenchmarkChange("b", "b", Verdict.NEW))
            (2.0, 5.0)
        """
        if row.method == "paired" and self.paired_threshold is not None:
            return self.paired_threshold
        if row.method == "counted" and self.count_threshold is not None:
            return self.count_threshold
        return self.threshold

    def threshold_counts(self) -> tuple[int, int]:
        """``(improved, worsened)`` by the seed bot's bare rule: ``change_pct`` beyond ±threshold.

        This is what the ``seed`` style reports, so its users see the numbers they
        know; the statistical verdicts are in :meth:`counts`.

        Example:
            >>> rows = (BenchmarkChange("a", "a", Verdict.UNCHANGED, change_pct=7.0),
            ...         BenchmarkChange("b", "b", Verdict.UNCHANGED, change_pct=-5.0))
            >>> Comparison(rows=rows).threshold_counts()
            (1, 0)
        """
        improved = sum(1 for r in self.rows if r.change_pct > self.threshold)
        worsened = sum(1 for r in self.rows if r.change_pct < -self.threshold)
        return improved, worsened

    @property
    def environment_differences(self) -> dict[str, tuple[Any, Any]]:
        """Host, OS, Python or CPU values that differ between head and base (empty when
        comparable, or when there is no base).

        Example:
            >>> Comparison(rows=(), head={"environment": {"node": "a"}},
            ...            base={"environment": {"node": "b"}}).environment_differences
            {'node': ('a', 'b')}
        """
        return environment_differences(
            self.head.get("environment") or {}, self.base.get("environment") or {}
        )

    @property
    def worsened(self) -> bool:
        """Whether any benchmark worsened (statistical verdict).

        Example:
            >>> Comparison(rows=(BenchmarkChange("a", "a", Verdict.WORSENED),)).worsened
            True
        """
        return any(r.verdict is Verdict.WORSENED for r in self.rows)

    @property
    def lost(self) -> tuple[BenchmarkChange, ...]:
        """Benchmarks the base measured that head did not: removed or failed in head.

        A pull request that breaks benchmark collection shows up here, not as "no
        regressions".

        Example:
            >>> rows = (BenchmarkChange("a", "a", Verdict.REMOVED, base_mean=1.0),
            ...         BenchmarkChange("b", "b", Verdict.NEW))
            >>> [r.fullname for r in Comparison(rows=rows).lost]
            ['a']
        """
        return tuple(
            r for r in self.rows if r.verdict in (Verdict.REMOVED, Verdict.FAILED) and r.has_base
        )

    @property
    def compared(self) -> tuple[BenchmarkChange, ...]:
        """Rows measured on both sides (the ones a change was computed for).

        Example:
            >>> Comparison(rows=(BenchmarkChange("a", "a", Verdict.NEW),)).compared
            ()
        """
        return tuple(r for r in self.rows if math.isfinite(r.median_change_pct))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able, versioned form (NaN and infinities become ``None``).

        Example:
            >>> d = Comparison(rows=(BenchmarkChange("a", "a", Verdict.NEW),)).to_dict()
            >>> d["format"], d["version"], d["rows"][0]["verdict"], d["rows"][0]["p_value"]
            ('rlpace-comparison', 4, 'new', None)
        """
        rows = []
        for row in self.rows:
            item = {f.name: _jsonable(getattr(row, f.name)) for f in fields(row)}
            item["verdict"] = row.verdict.value
            rows.append(item)
        return {
            "format": "rlpace-comparison",
            "version": COMPARISON_FORMAT_VERSION,
            "threshold": self.threshold,
            "paired_threshold": self.paired_threshold,
            "count_threshold": self.count_threshold,
            "alpha": self.alpha,
            "has_base": self.has_base,
            "head": _jsonable(dict(self.head)),
            "base": _jsonable(dict(self.base)),
            "counts": self.counts(),
            "noise_floor": None if self.noise_floor is None else self.noise_floor.to_dict(),
            "calibration": None if self.calibration is None else _jsonable(dict(self.calibration)),
            "variance_prior": _jsonable(self.variance_prior),
            "prior_stretch": _jsonable(self.prior_stretch),
            "confirm_repeats": self.confirm_repeats,
            "paired": self.paired,
            "duet_calibration": _jsonable(self.duet_calibration),
            "calibration_changes": list(self.calibration_changes),
            "count_tier": None if self.count_tier is None else _jsonable(dict(self.count_tier)),
            "pair_spread": _jsonable(self.pair_spread),
            "time_budget": _jsonable(self.time_budget),
            "rows": rows,
        }


def _jsonable(value: Any) -> Any:
    if isinstance(value, float | np.floating):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, enum.Enum):
        return value.value
    return value


def comparison_frame(comparison: Comparison) -> pd.DataFrame:
    """The comparison as a DataFrame (one row per benchmark), for notebooks and CSV.

    Example:
        >>> comparison_frame(Comparison(rows=(BenchmarkChange("a", "a", Verdict.NEW),)))["verdict"].tolist()
        ['new']
    """
    records = [{**asdict(r), "verdict": r.verdict.value} for r in comparison.rows]
    return pd.DataFrame.from_records(records, columns=[f.name for f in fields(BenchmarkChange)])
