"""The count tier's verdict: relative change of the counts against the tier's own A/A spread.

Pure maths over count records (no Valgrind, no files). For each case the *spread* is
the largest relative difference between A/A count runs of the same code (counts of
CPython and PyTorch code move by 0.03-0.9 % between processes: allocator addresses,
hash order, lazily built caches). A case is flagged when its instruction count moved
by more than its *gate*, ``max(k * spread, floor)``; without an A/A reading for the
case the gate is ``default_gate``. Estimated cycles get their own gate and are shown
beside the instructions; the verdict follows the instructions, which the cache
simulation's layout effects do not touch.

A case's *detectable change* is ``gate + spread``: a real change that large still
clears the gate when the noise works against it.

Example:
    >>> gate = CountGate(spread=0.001, cycles_spread=0.002, runs=2)
    >>> gate.threshold(k=4, floor=0.005), gate.detectable(k=4, floor=0.005)
    (0.005, 0.006)
    >>> relative_change(103.0, 100.0)
    0.03
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from rlpace.bench.counts.records import CaseCount, CountRun
from rlpace.bench.suite import id_matches

__all__ = [
    "DEFAULT_FLOOR",
    "DEFAULT_GATE",
    "DEFAULT_K",
    "CountChange",
    "CountGate",
    "compare_counts",
    "gate_from_aa",
    "relative_change",
    "relative_spread",
    "warmed_apart",
    "widen_gates",
]

DEFAULT_K = 4.0
"""Gate = ``k`` times the A/A spread (when above the floor)."""
DEFAULT_FLOOR = 0.01
"""The smallest gate, 1 %. Measured here: runs of the same code with the same selection
on both sides but different tree paths moved untouched cases by up to 0.8 %, which a
0.5 % floor flagged once in ~74 cases, a 1 % floor never (``reports/README.md``)."""
DEFAULT_GATE = 0.01
"""The gate of a case with no A/A reading, 1 %."""

VERDICTS = ("regression", "improvement", "same", "not-counted", "new", "removed")


def relative_change(head: float, base: float) -> float:
    """``head / base - 1``, rounded to 12 digits (0.0 when both are 0).

    Example:
        >>> relative_change(98.0, 100.0)
        -0.02
    """
    if base == 0:
        return 0.0 if head == 0 else float("inf")
    return round(head / base - 1.0, 12)


def relative_spread(values: Sequence[float]) -> float:
    """Largest relative difference between any two values (0 for one value; infinite
    when one is 0 and another is not).

    Example:
        >>> relative_spread([100.0, 101.0, 100.5]), relative_spread([7.0])
        (0.01, 0.0)
    """
    return max(
        (abs(relative_change(a, b)) for a, b in itertools.permutations(values, 2)), default=0.0
    )


@dataclass(frozen=True)
class CountGate:
    """One case's A/A reading: how far counts of the same code moved.

    Example:
        >>> CountGate(spread=0.0, cycles_spread=0.0, runs=2).threshold()
        0.01
    """

    spread: float
    """Largest relative instruction difference between A/A runs."""
    cycles_spread: float
    """The same for estimated cycles."""
    runs: int
    """A/A runs it was read from."""
    calls: int = 1
    """Calls per count the runs measured (``Timed.count_calls``): a spread read over one
    call does not describe a mean over 100."""

    def threshold(self, k: float = DEFAULT_K, floor: float = DEFAULT_FLOOR) -> float:
        """The instruction gate ``max(k * spread, floor)``."""
        return round(max(k * self.spread, floor), 12)

    def cycles_threshold(self, k: float = DEFAULT_K, floor: float = DEFAULT_FLOOR) -> float:
        """The estimated-cycles gate ``max(k * cycles_spread, floor)``."""
        return round(max(k * self.cycles_spread, floor), 12)

    def detectable(self, k: float = DEFAULT_K, floor: float = DEFAULT_FLOOR) -> float:
        """The smallest real change sure to clear the gate: ``threshold + spread``."""
        return round(self.threshold(k, floor) + self.spread, 12)


def gate_from_aa(runs: Sequence[CountRun]) -> dict[str, CountGate]:
    """Per-case gates from two or more count runs of the same code.

    Only cases counted in every run get a gate. Its cycles spread comes from the runs
    whose cache-warming call ran the same way (:attr:`CaseCount.warmed`; the most of
    them, two at least, else no cycles reading): a case near the counting's CPU-time
    line can warm plain in one run, and its measured call then meets cold caches,
    which would widen its cycles gate by a protocol's difference, not by noise.
    ``compare_counts`` does not compare the cycles of such a pair either.

    Example:
        >>> a = CountRun({}, (CaseCount("t", "counted", instructions=1000.0, cycles=2000.0),))
        >>> b = CountRun({}, (CaseCount("t", "counted", instructions=1001.0, cycles=2010.0),))
        >>> gate_from_aa([a, b])["t"].spread
        0.001
        >>> cold = CountRun({}, (CaseCount("t", "counted", instructions=1000.0, cycles=2090.0,
        ...                                 warmed="plain"),))
        >>> warm = [CountRun({}, (CaseCount("t", "counted", instructions=1000.0, cycles=c,
        ...                                 warmed="instrumented"),)) for c in (2000.0, 2010.0)]
        >>> gate_from_aa([cold, *warm])["t"].cycles_spread   # the two warmed alike
        0.005
    """
    if len(runs) < 2:
        raise ValueError(f"A/A gates: expected 2 or more count runs, got {len(runs)}")
    tables = [r.by_id() for r in runs]
    gates = {}
    for test_id in tables[0]:
        cases = [t.get(test_id) for t in tables]
        if not all(c is not None and c.counted for c in cases):
            continue
        calls = {_calls(c, r) for c, r in zip(cases, runs, strict=True)}
        if len(calls) > 1:  # not the same measure in every run
            continue
        cycles = _warmed_alike(cases)
        gates[test_id] = CountGate(
            spread=relative_spread([c.instructions for c in cases]),
            cycles_spread=relative_spread(cycles) if len(cycles) >= 2 else 0.0,
            runs=len(runs),
            calls=int(calls.pop()),
        )
    return gates


def warmed_apart(runs: Sequence[CountRun]) -> list[str]:
    """The cases whose cache-warming call ran one way in some of ``runs`` and the other
    way in others (:attr:`CaseCount.warmed`), in the first run's order.

    Example:
        >>> runs = [CountRun({}, (CaseCount("t", "counted", instructions=1.0, warmed=w),))
        ...         for w in ("plain", "instrumented")]
        >>> warmed_apart(runs), warmed_apart(runs[:1])
        (['t'], [])
    """
    tables = [r.by_id() for r in runs]
    apart = []
    for test_id in tables[0]:
        if len(_warm_modes(t[test_id] for t in tables if test_id in t)) > 1:
            apart.append(test_id)
    return apart


def _warm_modes(cases: Iterable[CaseCount]) -> set[str]:
    """How ``cases`` (one case's counts) warmed their caches, those that say."""
    return {c.warmed for c in cases if c.warmed is not None}


def _warmed_alike(cases: Sequence[CaseCount]) -> list[float]:
    """The estimated cycles of the largest group of ``cases`` that warmed their caches
    the same way (an older file's unrecorded ``warmed`` goes with any); empty when a
    case lacks cycles."""
    if any(c.cycles is None for c in cases):
        return []
    modes = _warm_modes(cases)
    if len(modes) <= 1:
        return [float(c.cycles) for c in cases]
    groups = {m: [float(c.cycles) for c in cases if c.warmed in (m, None)] for m in sorted(modes)}
    return max(groups.values(), key=len)


def _calls(case: CaseCount, run: CountRun) -> int:
    """Calls the case's counts are the mean of: its own, else (an older file) the run's."""
    return int(case.calls or run.meta.get("calls", 1))


def widen_gates(
    new: Mapping[str, CountGate],
    old: Mapping[str, CountGate],
    fresh: Sequence[str] = (),
) -> dict[str, CountGate]:
    """Per case, the wider of two A/A readings (another day's, another host's runs).

    A case counted over the same calls in both keeps the larger spreads and the runs of
    both; one counted over other calls now (``Timed.count_calls`` changed), or named by
    ``fresh`` (test-id globs or substrings, as ``--select`` takes: cases whose code changed
    what one call does, so the old reading describes another measure), keeps only the
    new reading; a case only in ``old`` keeps its old gate.

    Example:
        >>> new = {"a": CountGate(0.001, 0.002, 4), "b": CountGate(0.0003, 0.0, 4, calls=100)}
        >>> old = {"a": CountGate(0.003, 0.001, 4), "b": CountGate(0.0137, 0.05, 4),
        ...        "c": CountGate(0.002, 0.002, 4)}
        >>> {i: (g.spread, g.cycles_spread, g.runs) for i, g in widen_gates(new, old).items()}
        {'a': (0.003, 0.002, 8), 'b': (0.0003, 0.0, 4), 'c': (0.002, 0.002, 4)}
        >>> widen_gates(new, old, fresh=["a*"])["a"].spread
        0.001
    """
    out = dict(old)
    for test_id, gate in new.items():
        prior = old.get(test_id)
        if prior is None or prior.calls != gate.calls or any(id_matches(test_id, p) for p in fresh):
            out[test_id] = gate
            continue
        out[test_id] = CountGate(
            spread=max(gate.spread, prior.spread),
            cycles_spread=max(gate.cycles_spread, prior.cycles_spread),
            runs=gate.runs + prior.runs,
            calls=gate.calls,
        )
    return out


@dataclass(frozen=True)
class CountChange:
    """One case compared on the count tier.

    Example:
        >>> c = CountChange("t", "regression", base_instructions=100.0, head_instructions=103.0,
        ...                 instructions_change=0.03, gate=0.005)
        >>> c.flagged
        True
    """

    test_id: str
    verdict: str
    """``regression``, ``improvement``, ``same``, ``not-counted``, ``new`` or ``removed``."""
    base_instructions: float | None = None
    head_instructions: float | None = None
    instructions_change: float | None = None
    """``head / base - 1`` of instructions per call."""
    base_cycles: float | None = None
    head_cycles: float | None = None
    cycles_change: float | None = None
    """``head / base - 1`` of estimated cycles per call."""
    gate: float | None = None
    """The instruction gate the change was judged against."""
    detectable: float | None = None
    """The smallest real change sure to clear that gate (:meth:`CountGate.detectable`;
    the gate itself for a case with no A/A reading)."""
    cycles_gate: float | None = None
    cycles_moved: bool = False
    """Whether estimated cycles moved past their own gate."""
    reason: str = ""
    """Why a case was not compared (``not-counted``): the status and reason per side;
    for a compared case, why its estimated cycles were not (warmed apart, see
    :attr:`~rlpace.bench.counts.records.CaseCount.warmed`)."""

    @property
    def flagged(self) -> bool:
        """Whether the counts say the head got slower."""
        return self.verdict == "regression"


def _warmed(side: str, case: CaseCount) -> str:
    s = case.plain_cpu_s
    took = (
        "its plain call's CPU time not recorded" if s is None else f"its plain call {s:.2f} s CPU"
    )
    return f"{case.warmed} in {side} ({took})"


def _reason(side: str, case: CaseCount | None) -> str:
    if case is None:
        return f"{side}: absent"
    return f"{side}: {case.status}" + (f" ({case.reason})" if case.reason else "")


def _reasons(head: CaseCount | None, base: CaseCount | None) -> str:
    """One reason when both sides agree (``waits: ...``), else one per side."""
    if (
        head is not None
        and base is not None
        and (head.status, head.reason)
        == (
            base.status,
            base.reason,
        )
    ):
        return head.reason or head.status
    return _reason("head", head) + "; " + _reason("base", base)


def compare_counts(
    head: CountRun,
    base: CountRun,
    *,
    gates: Mapping[str, CountGate] | None = None,
    k: float = DEFAULT_K,
    floor: float = DEFAULT_FLOOR,
    default_gate: float = DEFAULT_GATE,
) -> list[CountChange]:
    """Judge every case of either run; order: base's cases, then new ones.

    Example:
        >>> base = CountRun({}, (CaseCount("a", "counted", instructions=1e6, cycles=2e6),
        ...                      CaseCount("b", "not-counted", reason="waits")))
        >>> head = CountRun({}, (CaseCount("a", "counted", instructions=1.03e6, cycles=2.05e6),
        ...                      CaseCount("b", "not-counted", reason="waits")))
        >>> [(c.test_id, c.verdict) for c in compare_counts(head, base)]
        [('a', 'regression'), ('b', 'not-counted')]
    """
    gates = gates or {}
    h, b = head.by_id(), base.by_id()
    changes = []
    for test_id in [*b, *(i for i in h if i not in b)]:
        hc, bc = h.get(test_id), b.get(test_id)
        if hc is None or bc is None:
            verdict = "new" if bc is None else "removed"
            changes.append(CountChange(test_id, verdict, reason=_reasons(hc, bc)))
            continue
        if not (hc.counted and bc.counted):
            changes.append(CountChange(test_id, "not-counted", reason=_reasons(hc, bc)))
            continue
        calls = (_calls(hc, head), _calls(bc, base))
        if calls[0] != calls[1]:
            # one counted call carries the ~5 k instructions of being measured, 100 calls
            # share them: the two per-call figures are not the same measure
            reason = (
                f"counted {calls[0]} call(s) at a time in head, {calls[1]} in base: "
                "not the same measure; timing only until base counts it the same way"
            )
            changes.append(CountChange(test_id, "not-counted", reason=reason))
            continue
        # a call near the counting's CPU-time line may warm the simulated caches with an
        # instrumented call on one side and run plain on the other: the same
        # instructions, but the plain side's measured call meets cold caches, so its
        # estimated cycles are not the same measure
        warmed_apart = len(_warm_modes((hc, bc))) > 1
        gate_of = gates.get(test_id)
        gate = gate_of.threshold(k, floor) if gate_of else max(default_gate, floor)
        cycles_gate = gate_of.cycles_threshold(k, floor) if gate_of else max(default_gate, floor)
        change = relative_change(hc.instructions, bc.instructions)
        cycles_change = (
            relative_change(hc.cycles, bc.cycles)
            if hc.cycles is not None and bc.cycles is not None and not warmed_apart
            else None
        )
        verdict = "regression" if change > gate else "improvement" if change < -gate else "same"
        changes.append(
            CountChange(
                test_id,
                verdict,
                base_instructions=bc.instructions,
                head_instructions=hc.instructions,
                instructions_change=change,
                base_cycles=bc.cycles,
                head_cycles=hc.cycles,
                cycles_change=cycles_change,
                gate=gate,
                detectable=gate_of.detectable(k, floor) if gate_of else gate,
                cycles_gate=cycles_gate,
                cycles_moved=cycles_change is not None and abs(cycles_change) > cycles_gate,
                reason=(
                    "cycles not compared: the cache-warming call ran "
                    f"{_warmed('head', hc)}, {_warmed('base', bc)}"
                    if warmed_apart
                    else ""
                ),
            )
        )
    return changes
