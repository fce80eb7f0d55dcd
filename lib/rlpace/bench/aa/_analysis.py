"""The calibration figures from a pool of suite runs (no running).

The pool is ``clean`` runs of the same code and, with an injected slow-down, ``slow``
runs. :func:`analyse_pool` follows the data:

1. :func:`draw_comparisons` assigns pool runs to ``runs`` A/A comparisons of
   ``repeats`` runs a side, each with other runs for its confirmation, and to the
   slowed side of each detection comparison;
2. every comparison is judged by the comparator alone (:class:`~rlpace.bench.judge.Judge`
   without a noise model), giving each benchmark's A/A changes;
3. each comparison is judged again by a **held-out** noise model, fitted without any
   pool run it (or its confirmation) uses (:func:`held_out_model`), confirmation
   included: the held-out false-alarm rate;
4. the final noise model uses the whole pool; each detection comparison (clean vs
   slowed) is judged by the same held-out model and counted where that model
   promised to catch the slow-down it really got (:func:`promised_benchmarks`).

Example:
    >>> from rlpace.bench.results import results_from_records
    >>> pool = [results_from_records([{"fullname": "a", "data": [1 + i / 100] * 5}])
    ...         for i in range(4)]
    >>> cal = analyse_pool(CalibrationConfig(runs=2, repeats=1, pool=4, confirm=1), pool)
    >>> cal.benchmarks[0].runs, round(cal.benchmarks[0].run_spread_pct, 2)
    (4, 1.27)
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rlpace.bench.aa._config import CalibrationConfig
from rlpace.bench.calibration import BenchmarkNoise, Calibration
from rlpace.bench.comparison import Comparison, Verdict
from rlpace.bench.errors import BenchInputError
from rlpace.bench.gates import (
    DETECTION_POWER,
    NoiseModel,
    confirmation_stage,
    detectable_change,
    gate_fraction,
    log_pct_from_better_pct,
    log_pct_from_time_pct,
    noise_gate,
)
from rlpace.bench.judge import Judge
from rlpace.bench.results import merge_runs

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["PoolDraws", "analyse_pool", "draw_comparisons", "held_out_model", "run_spreads"]

Gates = dict[str, tuple[float, float, float]]
"""``fullname → (gate, spread, mdc)`` in percent, as :func:`~rlpace.bench.gates.noise_gate` returns them."""
Spreads = dict[str, tuple[float, int]]
"""``fullname → (run spread %, runs)``, as :func:`run_spreads` returns them."""
Pair = tuple[list[int], list[int]]
"""Pool indices of side A (base) and side B (head) of one comparison."""


def run_spreads(frames: Sequence[Any]) -> Spreads:
    """Per benchmark, the spread of one run's log median across ``frames`` (×100) and
    how many runs measured it (each frame is one run's results table).

    Example:
        >>> from rlpace.bench.results import results_from_records
        >>> runs = [results_from_records([{"fullname": "a", "data": [m] * 3}]) for m in (1.0, 1.1, 0.9)]
        >>> spread, n = run_spreads(runs)["a"]
        >>> round(spread, 2), n
        (10.04, 3)
    """
    medians: dict[str, list[float]] = {}
    for frame in frames:
        for name, median, status in zip(frame["fullname"], frame["median"], frame["status"]):
            if status == "ok" and math.isfinite(median) and median > 0:
                medians.setdefault(name, []).append(math.log(median))
    out = {}
    for name, logs in medians.items():
        if len(logs) < 3:
            out[name] = (math.nan, len(logs))
            continue
        mean = sum(logs) / len(logs)
        var = sum((x - mean) ** 2 for x in logs) / (len(logs) - 1)
        out[name] = (math.sqrt(var) * 100, len(logs))
    return out


@dataclass(frozen=True)
class PoolDraws:
    """Which pool runs each comparison uses.

    Example:
        >>> d = PoolDraws(pairs=(([0], [1]), ([2], [3])), confirm_pairs=(([2], [3]), ([0], [1])))
        >>> sorted(d.used(0)), sorted(d.sharing(0))
        ([0, 1, 2, 3], [0, 1])
    """

    pairs: tuple[Pair, ...]
    """Per A/A comparison, the clean runs of side A and side B (disjoint)."""
    confirm_pairs: tuple[Pair, ...]
    """Per comparison, the clean runs of its confirmation (empty lists without one)."""
    slowed: tuple[list[int], ...] = ()
    """Per detection comparison, the slowed runs (first ``repeats``, then the
    confirmation's); empty without a slowed pool."""

    def used(self, i: int) -> set[int]:
        """The clean pool runs comparison ``i`` and its confirmation use."""
        (a, b), (ca, cb) = self.pairs[i], self.confirm_pairs[i]
        return {*a, *b, *ca, *cb}

    def sharing(self, i: int) -> set[int]:
        """The comparisons (``i`` included) whose own runs overlap what ``i`` uses: the
        A/A changes a model held out from ``i`` must not see."""
        runs = self.used(i)
        return {j for j, (a, b) in enumerate(self.pairs) if runs & (set(a) | set(b))}


def _random_pairs(pool: int, runs: int, repeats: int, rng: random.Random) -> list[Pair]:
    """For each comparison, ``repeats`` pool runs a side, disjoint within one; every run
    is used once before any is reused."""
    pairs = []
    order: list[int] = []
    for _ in range(runs):
        if len(order) < 2 * repeats:
            order = list(range(pool))
            rng.shuffle(order)
        picked, order = order[: 2 * repeats], order[2 * repeats :]
        pairs.append((sorted(picked[:repeats]), sorted(picked[repeats:])))
    return pairs


def draw_comparisons(config: CalibrationConfig, clean_n: int, slow_n: int = 0) -> PoolDraws:
    """Assign pool runs to the comparisons, seeded by ``config.seed``.

    A confirmation runs other processes than the comparison it confirms: pool runs
    outside its draw, from a random stream of its own (so the draws do not depend on
    whether there is a confirmation).

    Raises:
        BenchInputError: the pools are too small for one comparison with its confirmation.

    Example:
        >>> d = draw_comparisons(CalibrationConfig(runs=2, repeats=1, confirm=1), 4)
        >>> [len(a) + len(b) for a, b in d.pairs], d.used(0) == {0, 1, 2, 3}
        ([2, 2], True)
    """
    confirm = config.confirm
    side_runs = config.repeats + confirm
    if clean_n < 2 * side_runs or (slow_n and slow_n < side_runs):
        raise BenchInputError(
            f"expected at least {2 * side_runs} clean and {side_runs} slowed pool runs for "
            f"{config.repeats} runs a side and a confirmation of {confirm}, got {clean_n} "
            f"and {slow_n}. Fix: a larger pool or a smaller confirm"
        )
    rng = random.Random(config.seed)
    pairs = _random_pairs(clean_n, config.runs, config.repeats, rng)
    slowed = [rng.sample(range(slow_n), side_runs) for _ in pairs] if slow_n else []
    confirm_rng = random.Random(config.seed + 1)
    confirm_pairs: list[Pair] = []
    for a, b in pairs:
        if not confirm:
            confirm_pairs.append(([], []))
            continue
        rest = [i for i in range(clean_n) if i not in set(a) | set(b)]
        picked = confirm_rng.sample(rest, 2 * confirm)
        confirm_pairs.append((sorted(picked[:confirm]), sorted(picked[confirm:])))
    return PoolDraws(tuple(pairs), tuple(confirm_pairs), tuple(slowed))


class _Sides:
    """Merged sides of the pool, each merged once: ``side("clean", [0, 3])``."""

    def __init__(self, clean: Sequence[Any], slow: Sequence[Any]) -> None:
        self._frames = {"clean": clean, "slow": slow}
        self._merged: dict[tuple[str, tuple[int, ...]], pd.DataFrame] = {}

    def side(self, kind: str, idx: Sequence[int]) -> pd.DataFrame:
        key = (kind, tuple(idx))
        if key not in self._merged:
            self._merged[key] = merge_runs([self._frames[kind][i] for i in idx])
        return self._merged[key]


def _flags_any(comparison: Comparison) -> bool:
    return any(r.verdict in (Verdict.WORSENED, Verdict.IMPROVED) for r in comparison.rows)


def pool_gates(
    changes: Mapping[str, Sequence[float]],
    spreads: Spreads,
    config: CalibrationConfig,
    exclude: set[int] = frozenset(),  # type: ignore[assignment]
) -> Gates:
    """Each benchmark's gate, spread and detectable change from its A/A changes (those
    of comparisons outside ``exclude``) and its run spread scaled to ``repeats`` runs a
    side (:func:`~rlpace.bench.gates.noise_gate`, Bonferroni over every benchmark).

    Example:
        >>> g = pool_gates({"a": [1.0, -1.0]}, {"a": (2.0, 8)}, CalibrationConfig(repeats=2))
        >>> [round(x, 2) for x in g["a"]]
        [4.73, 2.0, 6.68]
    """
    per_side = math.sqrt(2 / config.repeats)  # a mean of `repeats` runs, one per side
    out = {}
    for name, seen in changes.items():
        spread, runs = spreads.get(name, (math.nan, 0))
        out[name] = noise_gate(
            [log_pct_from_better_pct(c) for i, c in enumerate(seen) if i not in exclude],
            n_benchmarks=len(changes),
            family_alpha=config.family_alpha,
            threshold=config.threshold,
            spread_pct=spread * per_side,
            spread_df=runs - 1,
        )
    return out


def noise_model_of(gates: Gates, spreads: Spreads, config: CalibrationConfig) -> NoiseModel:
    """The noise model a judge uses from pool gates and run spreads (benchmarks without
    a finite gate get none, and are judged by the comparator's own gates).

    Example:
        >>> model = noise_model_of({"a": (5.0, 1.0, 7.0)}, {"a": (2.0, 8)}, CalibrationConfig())
        >>> round(model.gates["a"], 4), model.repeats
        (0.0488, 4)
    """
    return NoiseModel(
        gates={n: gate_fraction(g[0]) for n, g in gates.items() if math.isfinite(g[0])},
        repeats=config.repeats,
        run_spreads=dict(spreads),
        family_alpha=config.family_alpha,
    )


def held_out_model(
    i: int,
    draws: PoolDraws,
    clean: Sequence[Any],
    changes: Mapping[str, Sequence[float]],
    config: CalibrationConfig,
) -> tuple[NoiseModel, Gates]:
    """The noise model (and its gates) that judges comparison ``i``: run spreads without any pool run
    it or its confirmation uses, gates without the A/A changes of comparisons sharing
    those runs, so no figure is flattered by fitting the data it judges.

    Example:
        >>> from rlpace.bench.results import results_from_records
        >>> pool = [results_from_records([{"fullname": "a", "data": [1 + i / 100] * 5}])
        ...         for i in range(8)]
        >>> d = draw_comparisons(CalibrationConfig(runs=2, repeats=1, confirm=1), 8)
        >>> model, _ = held_out_model(0, d, pool, {"a": [0.5, -0.5]}, CalibrationConfig(repeats=1))
        >>> model.run_spreads["a"][1]
        4
    """
    held = draws.used(i)
    spreads = run_spreads([f for j, f in enumerate(clean) if j not in held])
    gates = pool_gates(changes, spreads, config, draws.sharing(i))
    return noise_model_of(gates, spreads, config), gates


def promised_benchmarks(
    model: NoiseModel, gates: Gates, got: Mapping[str, float], config: CalibrationConfig
) -> set[str]:
    """The benchmarks a model promises to catch at
    :data:`~rlpace.bench.gates.DETECTION_POWER`: their detectable change at that power,
    of both stages with a confirmation (its gate shared, at worst, over every benchmark),
    at most the slow-down they really got (``got``, log %).

    Example:
        >>> model = NoiseModel({"a": 0.05}, 2, {"a": (1.0, 16)})
        >>> promised_benchmarks(model, {"a": (5.0, 1.0, 7.0)}, {"a": 12.0},
        ...                     CalibrationConfig(repeats=2, confirm=0))
        {'a'}
    """
    out = set()
    for name, slowed_by in got.items():
        if name not in gates:
            continue
        second = None
        if config.confirm:
            spread, runs = model.run_spreads.get(name, (math.nan, 0))
            second = confirmation_stage(
                spread,
                runs,
                repeats=config.confirm,
                family_size=len(gates),
                family_alpha=config.family_alpha,
            )
            if second is None:
                continue
        mdc = detectable_change(
            gates[name][0],
            gates[name][1],
            threshold=config.threshold,
            power=DETECTION_POWER,
            confirm=second,
        )
        if mdc <= slowed_by:
            out.add(name)
    return out


def achieved_slowdowns(clean: Sequence[Any], slow: Sequence[Any]) -> dict[str, float]:
    """Per benchmark, % more time a call took in the slowed runs (medians of run medians).

    Example:
        >>> from rlpace.bench.results import results_from_records
        >>> one = lambda m: results_from_records([{"fullname": "a", "data": [m] * 3}])
        >>> round(achieved_slowdowns([one(1.0)], [one(1.1)])["a"], 6)
        10.0
    """

    def run_medians(frames: Sequence[Any]) -> dict[str, list[float]]:
        out: dict[str, list[float]] = {}
        for frame in frames:
            for name, median in zip(frame["fullname"], frame["median"], strict=True):
                if math.isfinite(float(median)) and float(median) > 0:
                    out.setdefault(name, []).append(float(median))
        return out

    base, slowed = run_medians(clean), run_medians(slow)
    return {
        n: (statistics.median(slowed[n]) / statistics.median(base[n]) - 1) * 100
        for n in base
        if n in slowed
    }


@dataclass
class _Tally:
    """Per-benchmark counts gathered over the comparisons."""

    changes: dict[str, list[float]]
    comparator_mdc: dict[str, list[float]]
    flagged: dict[str, int]
    detected: dict[str, list[bool]]
    detected_raw: dict[str, list[bool]]
    promised: dict[str, list[bool]]

    @classmethod
    def of(cls, names: Sequence[str]) -> _Tally:
        return cls(
            {n: [] for n in names},
            {n: [] for n in names},
            dict.fromkeys(names, 0),
            {n: [] for n in names},
            {n: [] for n in names},
            {n: [] for n in names},
        )

    def add_aa(self, comparison: Comparison) -> None:
        for row in comparison.rows:
            if row.fullname in self.changes:
                self.changes[row.fullname].append(row.median_change_pct)
                self.comparator_mdc[row.fullname].append(row.mdc_pct)
                self.flagged[row.fullname] += row.verdict in (Verdict.WORSENED, Verdict.IMPROVED)


def _judge_with_confirmation(
    judge: Judge, sides: _Sides, base: tuple[str, list[int]], head: tuple[str, list[int]],
    confirm: tuple[tuple[str, list[int]], tuple[str, list[int]]],
) -> tuple[Comparison, Comparison]:  # fmt: skip
    """``(first, confirmed)``: ``head`` against ``base`` judged as ``pr`` judges, then its
    flags confirmed on the other pool runs ``confirm`` (base, head)."""
    first = judge.judge(sides.side(*head), sides.side(*base))
    if not judge.confirm_runs or not _flags_any(first):
        return first, first
    (cb, ch) = confirm
    return first, judge.confirm(first, sides.side(*ch), sides.side(*cb))


def analyse_pool(
    config: CalibrationConfig,
    clean: Sequence[Any],
    slow: Sequence[Any] = (),
    *,
    environment: Mapping[str, Any] | None = None,
) -> Calibration:
    """The calibration figures from the pool's results tables (no running).

    Args:
        config: the calibration settings (``runs``, ``repeats``, ``seed``, threshold...).
        clean: one results table per clean run (:func:`rlpace.bench.results.load_results`).
        slow: one per slowed run (``inject``), may be empty.
        environment: recorded in the calibration.

    Example:
        >>> from rlpace.bench.results import results_from_records
        >>> pool = [results_from_records([{"fullname": "a", "data": [1 + i / 100] * 5}])
        ...         for i in range(4)]
        >>> analyse_pool(CalibrationConfig(runs=2, repeats=1, pool=4, confirm=1), pool).pool
        4
    """
    from rlpace.bench.suite import slowdown_for

    draws = draw_comparisons(config, len(clean), len(slow))
    sides = _Sides(clean, slow)
    settings = {"threshold": config.threshold, "alpha": config.alpha}
    bare = Judge(**settings, confirm_runs=0)

    # 2. the comparator alone: each benchmark's A/A changes
    aa = [bare.judge(sides.side("clean", b), sides.side("clean", a)) for a, b in draws.pairs]
    names = [r.fullname for r in aa[0].rows]
    tally = _Tally.of(names)
    for comparison in aa:
        tally.add_aa(comparison)
    threshold_flags = [sum(c.threshold_counts()) for c in aa]

    # 3. each comparison judged by a model held out from its runs
    held: list[NoiseModel | None] = []
    held_gates: list[Gates | None] = []
    first_alarms = alarms = 0
    for i, (a, b) in enumerate(draws.pairs):
        if config.runs < 3:
            held.append(None)
            held_gates.append(None)
            continue
        model, gates = held_out_model(i, draws, clean, tally.changes, config)
        held.append(model)
        held_gates.append(gates)
        judge = Judge(**settings, noise=model, confirm_runs=config.confirm)
        ca, cb = draws.confirm_pairs[i]
        first, confirmed = _judge_with_confirmation(
            judge, sides, ("clean", a), ("clean", b), (("clean", ca), ("clean", cb))
        )
        first_alarms += _flags_any(first)
        alarms += _flags_any(confirmed)

    # 4. the final model, and detection of the injected slow-down
    spreads = run_spreads(clean)
    final = pool_gates(tally.changes, spreads, config)
    final_model = noise_model_of(final, spreads, config)
    injected = {n: slowdown_for(n.rsplit("::", 1)[-1], config.inject or "") for n in names}
    achieved = achieved_slowdowns(clean, slow) if slow else {}
    got = {n: log_pct_from_time_pct(achieved[n]) for n in achieved if injected[n]}
    for i, ((a, _), slowed) in enumerate(zip(draws.pairs, draws.slowed)):
        model, gates = held[i] or final_model, held_gates[i] or final
        judge = Judge(**settings, noise=model, confirm_runs=config.confirm)
        first_slow, confirm_slow = (
            sorted(slowed[: config.repeats]),
            sorted(slowed[config.repeats :]),
        )
        _, result = _judge_with_confirmation(
            judge,
            sides,
            ("clean", a),
            ("slow", first_slow),
            (("clean", draws.confirm_pairs[i][0]), ("slow", confirm_slow)),
        )
        kept = promised_benchmarks(model, gates, got, config)
        for row in result.rows:
            if row.fullname in tally.detected:
                tally.detected[row.fullname].append(row.verdict is Verdict.WORSENED)
            if row.fullname in kept:
                tally.promised[row.fullname].append(row.verdict is Verdict.WORSENED)
        for row in bare.judge(sides.side("slow", first_slow), sides.side("clean", a)).rows:
            if row.fullname in tally.detected_raw:
                tally.detected_raw[row.fullname].append(row.verdict is Verdict.WORSENED)

    n_comparisons = len(draws.pairs)
    held_out = config.runs >= 3
    return Calibration(
        set_name=config.set_name,
        runs=config.runs,
        repeats=config.repeats,
        pool=len(clean),
        threshold=config.threshold,
        alpha=config.alpha,
        family_alpha=config.family_alpha,
        false_alarm_rate=sum(_flags_any(c) for c in aa) / len(aa),
        false_alarm_rate_calibrated=alarms / n_comparisons if held_out else math.nan,
        benchmarks=tuple(
            _benchmark_noise(n, tally, final, spreads, injected, achieved, bool(slow))
            for n in names
        ),
        bare_threshold_rate=sum(n > 0 for n in threshold_flags) / len(aa),
        bare_threshold_share=sum(n / max(len(c.rows), 1) for n, c in zip(threshold_flags, aa))
        / len(aa),  # fmt: skip
        inject=config.inject,
        environment=dict(environment or {}),
        draws=tuple((tuple(a), tuple(b)) for a, b in draws.pairs),
        slow_pool=len(slow),
        confirm=config.confirm,
        false_alarm_rate_first=first_alarms / n_comparisons
        if held_out and config.confirm
        else math.nan,
        confirm_draws=tuple((tuple(a), tuple(b)) for a, b in draws.confirm_pairs)
        if config.confirm
        else (),
    )


def _benchmark_noise(
    name: str,
    tally: _Tally,
    final: Gates,
    spreads: Spreads,
    injected: Mapping[str, float],
    achieved: Mapping[str, float],
    has_slow: bool,
) -> BenchmarkNoise:
    gate, spread, mdc = final[name]
    finite = sorted(c for c in tally.comparator_mdc[name] if math.isfinite(c))
    run_spread, runs = spreads.get(name, (math.nan, 0))
    return BenchmarkNoise(
        fullname=name,
        comparisons=sum(math.isfinite(c) for c in tally.changes[name]),
        changes_pct=tuple(round(c, 4) for c in tally.changes[name]),
        flagged=tally.flagged[name],
        spread_pct=spread,
        gate_pct=gate,
        mdc_pct=mdc,
        comparator_mdc_pct=finite[len(finite) // 2] if finite else math.nan,
        injected=injected[name],
        detected=_rate(tally.detected[name]) if has_slow else None,
        detected_raw=_rate(tally.detected_raw[name]) if has_slow else None,
        run_spread_pct=run_spread,
        runs=runs,
        achieved_pct=achieved.get(name, math.nan),
        promised=len(tally.promised[name]),
        promised_detected=sum(tally.promised[name]),
    )


def _rate(hits: list[bool]) -> float | None:
    return sum(hits) / len(hits) if hits else None
