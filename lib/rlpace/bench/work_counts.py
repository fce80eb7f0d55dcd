"""Work counts: the kernels, syncs, copies and aten ops a call launches, per call.

Two kinds of case stay on the clock however noisy it is: the GPU set's (on a shared
GPU machine the same code's time moves 17-35 % from process to process) and the CPU
set's wall-clock cases (workers, threads, waits). What such a call *launches from its
own thread* does not move with the machine: how many kernels, how often the host
waits for the device, how many copies, how many aten operators. A change that adds a
sync, a copy, a kernel or an operator to that path moves these counts exactly, however
busy the machine is. For the GPU set they are the counterpart of the CPU set's
instruction counts; for a wall-clock case they see the calling thread's share of the
work (a collector's batch assembly), not its workers'.

The suite's pytest plugin counts every CUDA case and every wall-clock case once more
after timing it (:func:`measure_work_counts`: ``torch.profiler``, each of
:data:`CALLS` calls in a region of its own) and keeps the per-call counts in the
result's ``extra_info["work_counts"]`` (``$RLPACE_BENCH_WORK_COUNTS=0`` turns that
off; ``rlpace-bench pr`` counts in the first run of each side, since the counts
repeat). :func:`compare_work_counts` judges base against head per case, and
:func:`apply_work_counts` joins that to the timing comparison (the
:class:`~rlpace.bench.judge.Judge` does it, so ``compare`` and ``pr`` agree):

- a metric *moved* when the typical head call counts more (or fewer) than the
  typical base call. A side's typical call is the count at least 3 in 4 of its calls
  share (:data:`TYPICAL_SHARE`); the others did occasional work (a buffer's
  wrap-around, an epoch's reshuffle) that is not the call's own. Where a side has no
  typical call, the metric moved only when every head call is beyond every base call,
  so work that varies with the sampled data does not flag;
- **regression**: at least one metric rose and none fell. The row is flagged,
  whatever the clock said ("work-count regression; time did not move enough to flag");
- **improvement**: at least one fell and none rose; the row is marked improved unless
  the clock flagged a regression;
- **mixed** (some rose, some fell) and **same**: the timing verdict stands, with a note.

What these counts do not see: a kernel that got slower without launching more (a
bigger copy, a worse algorithm on the device), Python work between operators, work in
other threads or processes (a collector's workers). The clock still judges those.

Example:
    >>> base = {"calls": 2, "kernels": [4, 4], "syncs": [0, 0], "copies": [1, 1], "ops": [9, 9]}
    >>> head = {"calls": 2, "kernels": [6, 6], "syncs": [2, 2], "copies": [1, 1], "ops": [13, 13]}
    >>> change = compare_work_counts("t", head, base)
    >>> change.verdict, change.moved
    ('regression', ('kernels', 'syncs', 'ops'))
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from rlpace.bench.compare import Comparison

__all__ = [
    "CALLS",
    "ENV",
    "EXTRA_INFO_KEY",
    "METRICS",
    "NAMES_KEPT",
    "TYPICAL_SHARE",
    "WorkChange",
    "apply_work_counts",
    "compare_work_counts",
    "count_events",
    "count_names",
    "counting_on",
    "describe_counts",
    "work_counts_of",
    "measure_work_counts",
    "names_of",
]

EXTRA_INFO_KEY = "work_counts"
"""Where a result keeps its counts: ``extra_info["work_counts"]``."""
ENV = "RLPACE_BENCH_WORK_COUNTS"
"""``0`` turns the counting off in the suite's plugin (``1``, or unset: on)."""
CALLS = 8
"""Calls measured per case, each in a profiler region of its own."""
METRICS = {
    "kernels": "kernel launches (CUDA runtime launch calls)",
    "syncs": "host waits for the device (stream, event and device synchronizations)",
    "copies": "memory copies and fills issued (cudaMemcpy*, cudaMemset*)",
    "ops": "aten operators dispatched, nested ones included",
}
"""The metrics counted per call, and what each counts."""
TYPICAL_SHARE = 0.75
"""The share of calls that must count the same for that count to be a side's typical
call (the others did occasional work: a buffer's wrap-around, an epoch's reshuffle)."""
NAMES_KEPT = 64
"""Event names kept per case (the most frequent), for "what launched more?"."""
_NAME_LIMIT = 200
_REGION = "rlpace::measured_call"
_SYNC_NAMES = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize")
_MAX_CALLS = 64


def counting_on(value: str | None) -> bool:
    """Whether the suite counts, from the value of :data:`ENV` (None: unset).

    Example:
        >>> counting_on(None), counting_on("1"), counting_on("0")
        (True, True, False)
        >>> counting_on("maybe")
        Traceback (most recent call last):
        ...
        ValueError: RLPACE_BENCH_WORK_COUNTS: expected 1 or 0, got 'maybe'; unset it or fix the value
    """
    if value is None or value.strip() in ("", "1"):
        return True
    if value.strip() == "0":
        return False
    raise ValueError(f"{ENV}: expected 1 or 0, got {value!r}; unset it or fix the value")


def _metrics_of(name: str) -> tuple[str, ...]:
    """The metrics one profiler event counts toward (none for most events)."""
    if name.startswith("aten::"):
        return ("ops",)
    if name == "cudaMemcpy":  # the plain (not Async) copy waits for the device too
        return ("copies", "syncs")
    if name in _SYNC_NAMES:
        return ("syncs",)
    if name.startswith(("cudaMemcpy", "cudaMemset", "cuMemcpy", "cuMemset")):
        return ("copies",)
    if "LaunchKernel" in name or name in ("cudaGraphLaunch", "cuGraphLaunch"):
        return ("kernels",)
    return ()


def _in_region(event: Any) -> Any | None:
    """The measured-call region ``event`` runs inside (None: outside every region)."""
    parent = event.cpu_parent
    while parent is not None:
        if parent.name.startswith(_REGION):
            return parent
        parent = parent.cpu_parent
    return None


def _counted(events: Any, calls: int) -> Iterator[tuple[int, str, tuple[str, ...]]]:
    """``(call index, event name, metrics)`` of every counted event inside a region."""
    for event in events:
        metrics = _metrics_of(event.name)
        if not metrics:
            continue
        region = _in_region(event)
        if region is None:
            continue
        try:
            index = int(region.name.rpartition("#")[2])
        except ValueError:
            continue
        if 0 <= index < calls:
            yield index, event.name, metrics


def count_events(events: Any, calls: int) -> dict[str, list[int]]:
    """Per-call counts of each metric from profiler events (``prof.events()``) of
    ``calls`` regions named ``rlpace::measured_call#<i>``.

    Example:
        >>> from types import SimpleNamespace as E
        >>> region = E(name="rlpace::measured_call#0", cpu_parent=None)
        >>> ops = [E(name="aten::add", cpu_parent=region), E(name="cudaLaunchKernel",
        ...        cpu_parent=E(name="aten::add", cpu_parent=region))]
        >>> count_events([region, *ops], 1)
        {'kernels': [1], 'syncs': [0], 'copies': [0], 'ops': [1]}
    """
    out = {metric: [0] * calls for metric in METRICS}
    for index, _, metrics in _counted(events, calls):
        for metric in metrics:
            out[metric][index] += 1
    return out


def count_names(events: Any, calls: int, *, limit: int = NAMES_KEPT) -> dict[str, float]:
    """Per counted event name (``aten::isfinite``, ``cudaLaunchKernel``, ...), its median
    count per call; the ``limit`` most frequent names, for "what launched more?".

    Example:
        >>> from types import SimpleNamespace as E
        >>> regions = [E(name=f"rlpace::measured_call#{i}", cpu_parent=None) for i in range(2)]
        >>> events = [E(name="aten::add", cpu_parent=r) for r in regions]
        >>> count_names([*regions, *events, E(name="aten::mul", cpu_parent=regions[0])], 2)
        {'aten::add': 1.0, 'aten::mul': 0.5}
    """
    per_name: dict[str, list[int]] = {}
    for index, name, _ in _counted(events, calls):
        per_name.setdefault(name, [0] * calls)[index] += 1
    medians = {name: float(statistics.median(v)) for name, v in per_name.items()}
    kept = sorted(medians, key=lambda n: (-medians[n], n))[:limit]
    return {name: medians[name] for name in sorted(kept)}


def measure_work_counts(
    fn: Callable[[], Any], *, calls: int = CALLS, cuda: bool | None = None
) -> dict[str, Any]:
    """Profile ``calls`` calls of ``fn`` (already warm) and return their per-call counts.

    Each call runs in a ``record_function`` region of its own, and the device is
    synchronized between calls outside the regions, so the harness's own waits are not
    counted. ``cuda`` (default: whether CUDA is available) adds the CUDA activity;
    without it only ``ops`` can be non-zero.

    Returns:
        ``{"calls": n, "kernels": [...], "syncs": [...], "copies": [...], "ops": [...],
        "names": {...}, "profiler": "torch <version>"}``: one count per call for each
        metric, and the median count per call of each event name
        (:func:`count_names`).

    Example:
        >>> import torch
        >>> x = torch.ones(4)
        >>> one = measure_work_counts(lambda: x + 1, calls=2, cuda=False)
        >>> two = measure_work_counts(lambda: (x + 1) + 1, calls=2, cuda=False)
        >>> two["ops"][0] > one["ops"][0] == one["ops"][1], two["kernels"]
        (True, [0, 0])
    """
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    if not isinstance(calls, int) or not 1 <= calls <= _MAX_CALLS:
        raise ValueError(f"calls: expected an integer in [1, {_MAX_CALLS}], got {calls!r}")
    if cuda is None:
        cuda = torch.cuda.is_available()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    if cuda:
        torch.cuda.synchronize()
    with profile(activities=activities) as prof:
        for i in range(calls):
            with record_function(f"{_REGION}#{i}"):
                fn()
            if cuda:
                torch.cuda.synchronize()
    events = prof.events()
    return {
        "calls": calls,
        **count_events(events, calls),
        "names": count_names(events, calls),
        "profiler": f"torch {torch.__version__}",
    }


def work_counts_of(extra_info: Any) -> tuple[dict[str, list[int]] | None, str]:
    """The counts a result's ``extra_info`` holds, checked: ``(counts, "")``, or
    ``(None, why)`` when there are none or they are not in the expected form (a file
    another tool wrote, or an error the plugin recorded).

    Example:
        >>> work_counts_of({"work_counts": {"calls": 1, "kernels": [3], "syncs": [0],
        ...                                 "copies": [0], "ops": [5]}})[0]["kernels"]
        [3]
        >>> work_counts_of({})
        (None, 'not measured')
        >>> work_counts_of({"work_counts": {"kernels": "many"}})[1]
        "expected {'calls': n, 'kernels': [n counts], ...}, got {'kernels': 'many'}"
    """
    if not isinstance(extra_info, Mapping) or EXTRA_INFO_KEY not in extra_info:
        return None, "not measured"
    raw = extra_info[EXTRA_INFO_KEY]
    if isinstance(raw, Mapping) and isinstance(raw.get("error"), str):
        return None, f"could not be measured: {raw['error'][:200]}"
    calls = raw.get("calls") if isinstance(raw, Mapping) else None
    ok = isinstance(calls, int) and not isinstance(calls, bool) and 1 <= calls <= _MAX_CALLS
    counts: dict[str, list[int]] = {}
    for metric in METRICS if ok else ():
        values = raw.get(metric)
        if not (
            isinstance(values, list)
            and len(values) == calls
            and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values)
        ):
            ok = False
            break
        counts[metric] = list(values)
    if not ok:
        shown = repr(raw)
        shown = shown if len(shown) <= 120 else shown[:117] + "..."
        return None, f"expected {{'calls': n, 'kernels': [n counts], ...}}, got {shown}"
    return counts, ""


def names_of(raw: Any) -> dict[str, float] | None:
    """The per-name counts of a result's ``work_counts`` (:func:`count_names`), or
    None when absent or not in that form (then the comment just lists no names).

    Example:
        >>> names_of({"names": {"aten::add": 2.0}})
        {'aten::add': 2.0}
        >>> names_of({"names": {"aten::add": -1}}) is None
        True
    """
    names = raw.get("names") if isinstance(raw, Mapping) else None
    if not isinstance(names, Mapping) or len(names) > 4 * NAMES_KEPT:
        return None
    out = {}
    for name, value in names.items():
        if not (isinstance(name, str) and 0 < len(name) <= _NAME_LIMIT):
            return None
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1e9:
            return None
        out[name] = float(value)
    return out


def _changed_names(head: Any, base: Any, limit: int = 12) -> tuple[tuple[str, float, float], ...]:
    """The event names whose count per call moved most, ``(name, base, head)``: the
    largest moves first and, among equal ones, syncs, copies and launches before ops
    (a sync costs the most on a GPU).

    Example:
        >>> base = {"names": {"aten::add": 1, "cudaLaunchKernel": 1}}
        >>> head = {"names": {"aten::add": 1, "aten::item": 1, "cudaStreamSynchronize": 1,
        ...                   "cudaLaunchKernel": 3}}
        >>> [name for name, _, _ in _changed_names(head, base)]
        ['cudaLaunchKernel', 'cudaStreamSynchronize', 'aten::item']
    """
    h, b = names_of(head), names_of(base)
    if h is None or b is None:
        return ()
    moved = [(n, b.get(n, 0.0), h.get(n, 0.0)) for n in {*h, *b} if h.get(n, 0.0) != b.get(n, 0.0)]
    rank = {metric: i for i, metric in enumerate(("syncs", "copies", "kernels", "ops"))}

    def order(item: tuple[str, float, float]) -> tuple[float, int, str]:
        first = min((rank[m] for m in _metrics_of(item[0])), default=len(rank))
        return (-abs(item[2] - item[1]), first, item[0])

    moved.sort(key=order)
    return tuple(moved[:limit])


def describe_counts(counts: Mapping[str, list[int]]) -> dict[str, float]:
    """The median per call of each metric.

    Example:
        >>> describe_counts({"kernels": [3, 3, 4], "syncs": [0, 0, 0], "copies": [1, 1, 1],
        ...                  "ops": [7, 7, 7]})
        {'kernels': 3, 'syncs': 0, 'copies': 1, 'ops': 7}
    """
    return {m: statistics.median(counts[m]) for m in METRICS if m in counts}


@dataclass(frozen=True)
class WorkChange:
    """One case's work counts, base against head.

    Example:
        >>> WorkChange("t", "same").flagged
        False
    """

    test_id: str
    verdict: str
    """``regression``, ``improvement``, ``mixed``, ``same`` or ``unmeasured``."""
    base: Mapping[str, float] | None = None
    """Median per call of each metric in base (None: unmeasured)."""
    head: Mapping[str, float] | None = None
    """Median per call of each metric in head (None: unmeasured)."""
    moved: tuple[str, ...] = ()
    """The metrics that moved (see the module doc)."""
    reason: str = ""
    """Why a case was not judged (``unmeasured``)."""
    names: tuple[tuple[str, float, float], ...] = ()
    """For a case whose work moved: the event names (aten ops, CUDA runtime calls)
    whose count per call moved most, ``(name, base, head)``; empty when a side's file
    keeps no names."""

    @property
    def flagged(self) -> bool:
        """Whether the counts say the head launches more work."""
        return self.verdict == "regression"

    def summary(self) -> str:
        """The moved metrics as ``kernels 4 → 6, syncs 0 → 2`` (per call, medians).

        Example:
            >>> WorkChange("t", "regression", {"kernels": 4, "syncs": 0},
            ...                  {"kernels": 6, "syncs": 2}, ("kernels", "syncs")).summary()
            'kernels 4 → 6, syncs 0 → 2 per call'
        """
        if not self.moved or self.base is None or self.head is None:
            return ""
        parts = [f"{m} {_num(self.base[m])} → {_num(self.head[m])}" for m in self.moved]
        return ", ".join(parts) + " per call"


def _num(value: float) -> str:
    return f"{value:g}"


def compare_work_counts(test_id: str, head: Any, base: Any) -> WorkChange:
    """Judge one case's counts (each ``{"calls": n, metric: [counts]}`` or
    ``extra_info``-style wrapped); see the module doc for the rules.

    Example:
        >>> same = {"calls": 1, "kernels": [4], "syncs": [0], "copies": [1], "ops": [9]}
        >>> compare_work_counts("t", same, same).verdict
        'same'
        >>> compare_work_counts("t", None, same).verdict
        'unmeasured'
    """
    h, why_h = (
        work_counts_of({EXTRA_INFO_KEY: head}) if head is not None else (None, "not measured")
    )
    b, why_b = (
        work_counts_of({EXTRA_INFO_KEY: base}) if base is not None else (None, "not measured")
    )
    if h is None or b is None:
        reasons = [f"{side}: {why}" for side, why in (("head", why_h), ("base", why_b)) if why]
        reason = why_h if why_h == why_b else "; ".join(reasons)
        return WorkChange(test_id, "unmeasured", reason=reason)
    up = tuple(m for m in METRICS if _direction(h[m], b[m]) > 0)
    down = tuple(m for m in METRICS if _direction(h[m], b[m]) < 0)
    verdict = "mixed" if up and down else "regression" if up else "improvement" if down else "same"
    moved = tuple(m for m in METRICS if m in up or m in down)
    names = _changed_names(head, base) if moved else ()
    return WorkChange(test_id, verdict, describe_counts(b), describe_counts(h), moved, names=names)


def _typical(values: list[int]) -> int | None:
    """The count most calls share, when at least :data:`TYPICAL_SHARE` of them do."""
    value, calls = Counter(values).most_common(1)[0]
    return value if calls >= TYPICAL_SHARE * len(values) else None


def _direction(head: list[int], base: list[int]) -> int:
    """+1 when head's calls count more than base's, -1 when fewer, 0 when they do not
    differ: typical call against typical call where both sides have one, else every
    call against every call.

    Example:
        >>> _direction([97, 146, 97, 97, 97, 97, 97, 97], [94, 94, 94, 94, 94, 94, 143, 94])
        1
        >>> _direction([45, 51, 45, 51], [45, 45, 51, 51]), _direction([60, 61], [45, 51])
        (0, 1)
    """
    th, tb = _typical(head), _typical(base)
    if th is not None and tb is not None:
        return (th > tb) - (th < tb)
    return 1 if min(head) > max(base) else -1 if max(head) < min(base) else 0


def _first_counts(frame: pd.DataFrame) -> dict[str, Any]:
    """``fullname → extra_info["work_counts"]`` of the first run that has it."""
    out: dict[str, Any] = {}
    if frame is None or "extra_info" not in frame.columns:
        return out
    for name, extra in zip(frame["fullname"], frame["extra_info"], strict=True):
        if name not in out and isinstance(extra, Mapping) and EXTRA_INFO_KEY in extra:
            out[name] = extra[EXTRA_INFO_KEY]
    return out


def apply_work_counts(comparison: Comparison, head: pd.DataFrame, base: pd.DataFrame) -> Comparison:
    """Join the work counts of ``head`` and ``base`` (results tables) to the rows of
    ``comparison``; rows without counts on either side are left as they are.

    Example:
        >>> from rlpace.bench.compare import BenchmarkChange, Comparison, Verdict
        >>> from rlpace.bench.results import results_from_records
        >>> w = lambda k: {"work_counts": {"calls": 1, "kernels": [k], "syncs": [0],
        ...                                "copies": [0], "ops": [k]}}
        >>> base = results_from_records([{"fullname": "a", "data": [1.0], "extra_info": w(4)}])
        >>> head = results_from_records([{"fullname": "a", "data": [1.0], "extra_info": w(6)}])
        >>> rows = (BenchmarkChange("a", "a", Verdict.UNCHANGED, median_change_pct=-1.0),)
        >>> row = apply_work_counts(Comparison(rows=rows), head, base).rows[0]
        >>> row.verdict.value, row.work_note
        ('worsened', 'work-count regression (kernels 4 → 6, ops 4 → 6 per call); time did not move enough to flag (time +1.0%)')
    """
    from rlpace.bench.compare import Verdict

    heads, bases = _first_counts(head), _first_counts(base)
    if not heads and not bases:
        return comparison
    rows = []
    for row in comparison.rows:
        if row.fullname not in heads and row.fullname not in bases:
            rows.append(row)
            continue
        change = compare_work_counts(row.name, heads.get(row.fullname), bases.get(row.fullname))
        verdict, note = row.verdict, change.reason or None
        slower = -row.median_change_pct
        timed = f"time {slower:+.1f}%" if slower == slower else "time not measured"
        what = change.summary()
        if change.verdict == "regression":
            verdict = Verdict.WORSENED
            note = (
                f"work-count and time regression ({what})"
                if row.verdict is Verdict.WORSENED
                else f"work-count regression ({what}), though the clock says faster ({timed})"
                if row.verdict is Verdict.IMPROVED
                else f"work-count regression ({what}); time did not move enough to flag ({timed})"
            )
        elif change.verdict == "improvement" and row.verdict is not Verdict.WORSENED:
            verdict = Verdict.IMPROVED
            note = f"less work launched ({what})" + (
                "" if row.verdict is Verdict.IMPROVED else f"; time did not move ({timed})"
            )
        elif change.verdict == "improvement":
            note = f"less work launched ({what}), but the clock says slower: look at the kernels and the code between the ops"
        elif change.verdict == "mixed":
            note = f"work counts moved both ways ({what}): the clock decides"
        elif change.verdict == "same" and row.verdict in (Verdict.WORSENED, Verdict.IMPROVED):
            note = (
                "the launched work did not move: the kernels, the code between the ops, "
                "other threads or processes, or the machine changed"
            )
        rows.append(
            replace(
                row,
                verdict=verdict,
                work_verdict=change.verdict,
                work_base=None if change.base is None else dict(change.base),
                work_head=None if change.head is None else dict(change.head),
                work_moved=change.moved,
                work_names=change.names or None,
                work_note=note,
            )
        )
    return replace(comparison, rows=tuple(rows))
