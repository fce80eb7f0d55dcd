"""Judging work counts: one case's counts, base against head.

:func:`work_counts_of` checks what a result file holds (a file another tool wrote is
reported, never trusted), :func:`compare_work_counts` compares each metric's typical
call (:data:`TYPICAL_SHARE`) and gives a :class:`WorkChange`: ``regression``,
``improvement``, ``mixed``, ``same`` or ``unmeasured``, with the event names whose
count moved most. Pure: no profiler, no files.

Example:
    >>> same = {"calls": 1, "kernels": [4], "syncs": [0], "copies": [1], "ops": [9]}
    >>> compare_work_counts("t", same, same).verdict
    'same'
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rlpace.bench.work_counts.measure import (
    EXTRA_INFO_KEY,
    MADE_KEPT,
    MAX_CALLS,
    METRICS,
    NAMES_KEPT,
    OPTIONAL_METRICS,
    metrics_of,
)

__all__ = [
    "ANCHORS_MIN",
    "RATED_MIN_CALLS",
    "CLOCK_FOLLOWING",
    "CLOCK_TOLERANCE",
    "SETTLED_CALLS",
    "SETTLED_SPREAD",
    "STEADY_TOLERANCE",
    "DECIDING",
    "JUDGED",
    "TYPICAL_SHARE",
    "WORKER_METRIC",
    "WORKERS_PREFIX",
    "WorkChange",
    "compare_work_counts",
    "INSIDE",
    "describe_counts",
    "grew_inside",
    "names_of",
    "work_counts_of",
    "worker_names_moved",
]

JUDGED = ("same", "regression", "improvement", "mixed")
"""Verdicts of a case whose counts were read on both sides."""
DECIDING = ("regression", "improvement")
"""Verdicts that decide the row's verdict, whatever the clock said (exact counts: a
confirmation in fresh runs would count the same)."""
TYPICAL_SHARE = 0.75
"""The share of calls that must count the same for that count to be a side's typical
call (the others did occasional work: a buffer's wrap-around, an epoch's reshuffle)."""
WORKER_METRIC = "worker_py_calls"
"""The Python calls of the case's worker processes
(:mod:`rlpace.bench.work_counts.workers`): judged like ``py_calls`` and, where their
total follows the episodes, by the functions called equally often in every call
(:func:`worker_names_moved`)."""
ANCHORS_MIN = 8
"""The fewest functions both sides' workers call equally often in every call, at the
same count, before a steady function that differs is taken as the code's. Windows of a
case whose workers step with the clock (envs that sleep 2 ms a step, back-pressure
waits) have almost no steady function (0 or 1 in the suite), and one that is steady by
chance on both sides can differ (a wait helper called 7 times a call in one process and
8 in the other, an A/A run of the threaded sleep-bound collector); the suite's other
worker-backed cases share 39 to 622."""
STEADY_TOLERANCE = 0.05
"""How far apart two nonzero steady counts of a function may be and still count as the
same (a share of the larger). A threaded collector's server thread forms its batches
as the threads happen to meet: in 2 of 7 processes its round function was steady, 32
times a call in one and 33 in the other, with the helpers it calls once a round. A
function the change adds (0 → k) or a call added to every step (k → 2k) is far past
it."""
RATED_MIN_CALLS = 16
"""The fewest calls a call a ``rated`` function
(:func:`~rlpace.bench.work_counts.workers.steady_names`) must make to be judged where
nothing is steady: a function called once a step of the suite's envs makes 256; one
that a wait calls now and then (a back-pressure helper, 1 to 8 times a call) is left
to the clock."""
WORKERS_PREFIX = "in the workers: "
"""How the comment names a function counted in the worker processes."""
CLOCK_FOLLOWING = ("py_calls", WORKER_METRIC)
"""Metrics a machine's load can nudge: a polling loop in the code under test makes one
more round of Python calls when another thread answers late, and a process's history
(a timer, a first-time path) shifts a few calls. Where both sides have a typical
call, they move only when the two differ by more than :data:`CLOCK_TOLERANCE` and
each lies beyond every call of the other side. Where a side has none, they move only
when both sides are settled (the middle half of a side's calls within
:data:`SETTLED_SPREAD` of its median), the medians differ by more than
:data:`CLOCK_TOLERANCE` and the middle halves do not overlap; an unsettled side (a
loop that polls in its own code) leaves them to the clock."""
CLOCK_TOLERANCE = 0.01
"""The share of the base's typical call a :data:`CLOCK_FOLLOWING` count must move by:
A/A shifts of up to 0.24 % were measured between processes (a call whose batch was
ready, 0.05 % in a trainer's start-up); a torchrl collector that polls in its own code
moved 7 % with no typical call, and is not judged on them."""
SETTLED_SPREAD = CLOCK_TOLERANCE / 4
"""How wide, as a share of its median, the middle half (interquartile range) of a side's
calls may be for a :data:`CLOCK_FOLLOWING` count without a typical call to be judged:
rlpace's process-backed batched collectors spread 0.003–0.14 % in A/A processes
(4 305–4 317 calls a call, their medians at most 0.07 % apart), torchrl's polling
collectors 0.37–4.1 % (their medians up to 5.3 % apart)."""
SETTLED_CALLS = 8
"""The fewest calls a side needs for its middle half to say it is settled (the suite
counts 8 per wall-clock case; a middle half of 2 calls says little)."""
_NAME_LIMIT = 200


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
    return _checked(extra_info[EXTRA_INFO_KEY])


def _checked(raw: Any) -> tuple[dict[str, list[int]] | None, str]:
    """:func:`work_counts_of` for the ``work_counts`` value itself (None: not measured)."""
    if raw is None:
        return None, "not measured"
    if isinstance(raw, Mapping) and isinstance(raw.get("error"), str):
        return None, f"could not be measured: {raw['error'][:200]}"
    calls = raw.get("calls") if isinstance(raw, Mapping) else None
    ok = isinstance(calls, int) and not isinstance(calls, bool) and 1 <= calls <= MAX_CALLS
    counts: dict[str, list[int]] = {}
    for metric in METRICS if ok else ():
        values = raw.get(metric)
        if values is None and metric in OPTIONAL_METRICS:
            continue
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
    """The per-name counts of a result's ``work_counts``
    (:func:`~rlpace.bench.work_counts.measure.count_names`), or
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
    rank = {metric: i for i, metric in enumerate(("syncs", "copies", "kernels", "ops", "py_calls"))}

    def order(item: tuple[str, float, float]) -> tuple[float, int, str]:
        first = min((rank[m] for m in metrics_of(item[0])), default=len(rank))
        return (-abs(item[2] - item[1]), first, item[0])

    moved.sort(key=order)
    return tuple(moved[:limit])


INSIDE = "calls made by "
"""How the comment names a function whose own calls moved while it was called as often
as before (:func:`grew_inside`): the likeliest place of the change."""


def grew_inside(head: Any, base: Any, limit: int = 3) -> tuple[tuple[str, float, float], ...]:
    """The Python functions called as often in head as in base that made more or fewer
    calls themselves, ``(INSIDE + name, base made, head made)``, the largest moves
    first: where the code changed, or took another branch. Empty when a side keeps no
    ``calls_made`` (or not in its form).

    Example:
        >>> base = {"calls_made": {"rlpace/c.py:C.next": [1, 14], "td.py:keys": [4, 8]}}
        >>> head = {"calls_made": {"rlpace/c.py:C.next": [1, 20], "td.py:keys": [9, 18]}}
        >>> grew_inside(head, base)
        (('calls made by rlpace/c.py:C.next', 14.0, 20.0),)
    """
    h, b = _calls_made_of(head), _calls_made_of(base)
    if h is None or b is None:
        return ()
    moved = [
        (INSIDE + name, b[name][1], h[name][1])
        for name in h.keys() & b.keys()
        if h[name][0] == b[name][0] and h[name][1] != b[name][1]
    ]
    moved.sort(key=lambda item: (-abs(item[2] - item[1]), item[0]))
    return tuple(moved[:limit])


def _calls_made_of(raw: Any) -> dict[str, tuple[float, float]] | None:
    """``calls_made`` of a result's work counts, checked (None: absent or not in its form)."""
    made = raw.get("calls_made") if isinstance(raw, Mapping) else None
    if not isinstance(made, Mapping) or len(made) > MADE_KEPT:
        return None
    out = {}
    for name, pair in made.items():
        ok = isinstance(name, str) and 0 < len(name) <= _NAME_LIMIT and isinstance(pair, list)
        if not ok or len(pair) != 2:
            return None
        if any(
            isinstance(x, bool) or not isinstance(x, int | float) or not 0 <= x < 1e9 for x in pair
        ):
            return None
        out[name] = (float(pair[0]), float(pair[1]))
    return out


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
    """For a case whose work moved: first the Python functions called as often as
    before whose own calls moved (:func:`grew_inside`), then the event names (aten ops,
    CUDA runtime calls, Python functions and builtins) whose count per call moved most,
    ``(name, base, head)``; empty when a side's file keeps no names."""

    @property
    def flagged(self) -> bool:
        """Whether the counts say the head launches more work."""
        return self.verdict == "regression"

    def summary(self) -> str:
        """The moved metrics as ``kernels 4 → 6, syncs 0 → 2`` (per call, medians); where
        the workers' calls moved, the function of theirs that moved most, since their
        total follows the episodes.

        Example:
            >>> WorkChange("t", "regression", {"kernels": 4, "syncs": 0},
            ...                  {"kernels": 6, "syncs": 2}, ("kernels", "syncs")).summary()
            'kernels 4 → 6, syncs 0 → 2 per call'
            >>> WorkChange("t", "regression", {"worker_py_calls": 19889},
            ...            {"worker_py_calls": 19930}, ("worker_py_calls",),
            ...            names=((WORKERS_PREFIX + "check", 0.0, 32.0),)).summary()
            'worker_py_calls 19889 → 19930 per call; the workers call check 0 → 32 times a call'
        """
        if not self.moved or self.base is None or self.head is None:
            return ""
        parts = [f"{m} {_num(self.base[m])} → {_num(self.head[m])}" for m in self.moved]
        text = ", ".join(parts) + " per call"
        named = [n for n in self.names if n[0].startswith(WORKERS_PREFIX)]
        if WORKER_METRIC in self.moved and named:
            name, before, after = named[0]
            text += (
                f"; the workers call {name[len(WORKERS_PREFIX) :]} {_num(before)} → "
                f"{_num(after)} times a call"
            )
        return text


def _num(value: float) -> str:
    return f"{value:g}"


def compare_work_counts(test_id: str, head: Any, base: Any) -> WorkChange:
    """Judge one case's counts: ``head`` and ``base`` are each side's
    ``extra_info["work_counts"]`` (``{"calls": n, metric: [counts], ...}``) or None;
    the rules are :mod:`rlpace.bench.work_counts`'s.

    Example:
        >>> same = {"calls": 1, "kernels": [4], "syncs": [0], "copies": [1], "ops": [9]}
        >>> compare_work_counts("t", same, same).verdict
        'same'
        >>> compare_work_counts("t", None, same).verdict
        'unmeasured'
        >>> more_python = {**same, "py_calls": [40]}
        >>> compare_work_counts("t", more_python, {**same, "py_calls": [31]}).summary()
        'py_calls 31 → 40 per call'
        >>> compare_work_counts("t", more_python, same).verdict  # base did not count them
        'same'
    """
    (h, why_h), (b, why_b) = _checked(head), _checked(base)
    if h is None or b is None:
        reasons = [f"{side}: {why}" for side, why in (("head", why_h), ("base", why_b)) if why]
        reason = why_h if why_h == why_b else "; ".join(reasons)
        return WorkChange(test_id, "unmeasured", reason=reason)
    both = [m for m in METRICS if m in h and m in b]
    step = {m: _direction(h[m], b[m], beyond=m in CLOCK_FOLLOWING) for m in both}
    in_workers = worker_names_moved(head, base) if WORKER_METRIC in both else ()
    if in_workers and not step[WORKER_METRIC]:  # the total follows the episodes; these do not
        step[WORKER_METRIC] = _names_direction(in_workers)
    up = tuple(m for m in both if step[m] > 0)
    down = tuple(m for m in both if step[m] < 0)
    verdict = "mixed" if up and down else "regression" if up else "improvement" if down else "same"
    moved = tuple(m for m in METRICS if m in up or m in down)
    workers = tuple((WORKERS_PREFIX + n, b_, h_) for n, b_, h_ in in_workers[:8])
    names = (
        (grew_inside(head, base) + workers + _changed_names(head, base, limit=9)) if moved else ()
    )
    judged = {m: b[m] for m in both}, {m: h[m] for m in both}
    return WorkChange(
        test_id, verdict, describe_counts(judged[0]), describe_counts(judged[1]), moved, names=names
    )


def _steady_of(
    raw: Any,
) -> tuple[dict[str, int], frozenset[str], bool, dict[str, float]] | None:
    """A side's ``worker_names`` (:func:`~rlpace.bench.work_counts.workers.steady_names`),
    checked: ``(steady, unsteady, complete, rated)`` (``rated`` empty in records written
    before it), or None when absent or not in that form."""
    names = raw.get("worker_names") if isinstance(raw, Mapping) else None
    if not isinstance(names, Mapping):
        return None
    steady, unsteady, complete = names.get("steady"), names.get("unsteady"), names.get("complete")
    rated = names.get("rated", {})
    if not (
        isinstance(steady, Mapping)
        and all(
            isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v >= 0
            for k, v in steady.items()
        )
        and isinstance(unsteady, list)
        and all(isinstance(k, str) for k in unsteady)
        and isinstance(complete, bool)
        and isinstance(rated, Mapping)
        and all(
            isinstance(k, str)
            and isinstance(v, (int, float))
            and not isinstance(v, bool)
            and math.isfinite(v)
            and v > 0
            for k, v in rated.items()
        )
    ):
        return None
    return dict(steady), frozenset(unsteady), complete, {k: float(v) for k, v in rated.items()}


def worker_names_moved(head: Any, base: Any) -> tuple[tuple[str, float, float], ...]:
    """The functions the worker processes called equally often in every measured call
    on both sides, whose count per call differs: ``(name, base, head)``, most moved
    first (on a tie, Python functions before builtins). A function listed on one side
    only counts 0 on the other where that side
    lists every function it called (``complete``) and not among the unsteady ones.

    Steady counts repeat exactly from process to process (a function run once an env
    step), and the worker counter idles for different times between calls, so calls
    that follow the clock (a wait that polls) are not steady: a difference is the
    code's. Unless the sides share at least :data:`ANCHORS_MIN` functions steady at the
    same count, the steady counts are not judged: where the workers step with the
    clock, the few functions that look steady are so by chance. Two nonzero counts
    within :data:`STEADY_TOLERANCE` of each other are taken as the same. There the
    functions called in proportion to the workers' work (``rated``) are judged instead,
    by :func:`_new_among_rated`.

    Example:
        >>> anchors = {f"f{i}": 32 for i in range(ANCHORS_MIN)}
        >>> base = {"worker_names": {"steady": anchors, "unsteady": ["reset"],
        ...                          "complete": True}}
        >>> head = {"worker_names": {"steady": {**anchors, "isfinite": 32},
        ...                          "unsteady": ["reset"], "complete": True}}
        >>> worker_names_moved(head, base)
        (('isfinite', 0.0, 32.0),)
        >>> worker_names_moved(base, base), worker_names_moved(head, {})
        ((), ())
        >>> few = {"worker_names": {"steady": {"wait": 7}, "unsteady": [], "complete": True}}
        >>> worker_names_moved(few, {"worker_names": {**few["worker_names"], "steady": {"wait": 8}}})
        ()
    """
    h, b = _steady_of(head), _steady_of(base)
    if h is None or b is None:
        return ()
    if sum(1 for name, n in h[0].items() if b[0].get(name) == n) < ANCHORS_MIN:
        return _new_among_rated(h, b)
    moved = []
    for name in sorted(set(h[0]) | set(b[0])):
        counts = []
        for steady, unsteady, complete, _ in (b, h):
            if name in steady:
                counts.append(float(steady[name]))
            elif complete and name not in unsteady:
                counts.append(0.0)
        if len(counts) != 2 or counts[0] == counts[1]:
            continue
        if min(counts) > 0 and abs(counts[1] - counts[0]) <= STEADY_TOLERANCE * max(counts):
            continue  # steady by chance: the batches the threads happened to form
        moved.append((name, counts[0], counts[1]))
    # the most moved first; on a tie a Python function, a better pointer than a builtin
    moved.sort(key=lambda item: (-abs(item[2] - item[1]), item[0].startswith("<")))
    return tuple(moved)


def _new_among_rated(h: tuple, b: tuple) -> tuple[tuple[str, float, float], ...]:
    """Where too few functions are steady (the workers step with the clock): the
    functions called in proportion to the work on one side, at least
    :data:`RATED_MIN_CALLS` times a call, and never on the other side (which lists
    every function it called). ``h`` and ``b`` are :func:`_steady_of`'s.

    The sides' paces differ (how many steps a call took), so the head's calls are put
    at the base's pace: divided by the median of head / base over the functions rated
    on both sides. Nothing is judged unless :data:`ANCHORS_MIN` of those agree with
    that median to within :data:`STEADY_TOLERANCE`. Only a function new or gone is
    judged, not one called more: which share of the calls a server's rounds take
    depends on how the threads met (A/A, the threaded sleep-bound collectors: two
    processes' rounds 1.55 times apart, their steps the same).

    Example:
        >>> base = ({}, frozenset({f"f{i}" for i in range(8)}), True,
        ...         {f"f{i}": 256.0 for i in range(8)})
        >>> rated = {**{f"f{i}": 260.0 for i in range(8)}, "isfinite": 260.0}
        >>> head = ({}, frozenset(rated), True, rated)
        >>> _new_among_rated(head, base)  # at the base's pace: 256 a call
        (('isfinite', 0.0, 256.0),)
        >>> _new_among_rated(base, base)
        ()
    """
    (_, h_unsteady, h_complete, h_rated), (_, b_unsteady, b_complete, b_rated) = h, b
    ratios = [
        h_rated[name] / b_rated[name]
        for name in set(h_rated) & set(b_rated)
        if max(h_rated[name], b_rated[name]) >= RATED_MIN_CALLS
    ]
    if len(ratios) < ANCHORS_MIN:
        return ()
    pace = statistics.median(ratios)
    if sum(1 for r in ratios if abs(r / pace - 1) <= STEADY_TOLERANCE) < ANCHORS_MIN:
        return ()
    h_seen = set(h[0]) | h_unsteady | set(h_rated)
    b_seen = set(b[0]) | b_unsteady | set(b_rated)
    moved = [
        (name, 0.0, round(n / pace, 1))
        for name, n in h_rated.items()
        if b_complete and name not in b_seen and n / pace >= RATED_MIN_CALLS
    ] + [
        (name, round(n, 1), 0.0)
        for name, n in b_rated.items()
        if h_complete and name not in h_seen and n >= RATED_MIN_CALLS
    ]
    moved.sort(key=lambda item: (-abs(item[2] - item[1]), item[0].startswith("<"), item[0]))
    return tuple(moved)


def _names_direction(moved: tuple[tuple[str, float, float], ...]) -> int:
    """+1 when every moved function is called more, -1 when every one less, else 0."""
    up = any(head > base for _, base, head in moved)
    down = any(head < base for _, base, head in moved)
    return (up and not down) - (down and not up)


def _settled_direction(head: list[int], base: list[int]) -> int:
    """:func:`_direction` of a :data:`CLOCK_FOLLOWING` count where a side has no typical
    call: medians more than :data:`CLOCK_TOLERANCE` apart, middle halves apart, both
    sides settled (:data:`SETTLED_SPREAD`) over at least :data:`SETTLED_CALLS` calls;
    else 0.

    Example:
        >>> base = [4306, 4309, 4310, 4310, 4310, 4311, 4313, 4315]
        >>> _settled_direction([4308, 4308, 4310, 4310, 4312, 4312, 4315, 4367], base)
        0
        >>> _settled_direction([n + 200 for n in base], base)  # a check: +4.6 %
        1
        >>> polling = [17912, 18404, 18810, 18950, 19011, 19308, 19400, 19627]
        >>> _settled_direction([n // 2 for n in polling], polling)  # unsettled: the clock's
        0
    """
    if min(len(head), len(base)) < SETTLED_CALLS:
        return 0
    h, b = _quartiles(head), _quartiles(base)
    if any(q[2] - q[0] > SETTLED_SPREAD * max(q[1], 1) for q in (h, b)):
        return 0
    if abs(h[1] - b[1]) <= CLOCK_TOLERANCE * max(b[1], 1):
        return 0
    if h[1] > b[1]:
        return 1 if h[0] > b[2] else 0
    return -1 if h[2] < b[0] else 0


def _quartiles(values: list[int]) -> tuple[float, float, float]:
    """Lower quartile, median and upper quartile: the middle half's first and last calls
    themselves, not interpolated as :func:`rlpace.bench.stats.summarize`'s are (counts
    are whole calls, and :data:`SETTLED_SPREAD` was measured this way)."""
    ordered = sorted(values)
    n = len(ordered)
    return (
        float(ordered[n // 4]),
        float(statistics.median(ordered)),
        float(ordered[(3 * n) // 4 - (n % 4 == 0)]),
    )


def _typical(values: list[int]) -> int | None:
    """The count most calls share, when at least :data:`TYPICAL_SHARE` of them do."""
    value, calls = Counter(values).most_common(1)[0]
    return value if calls >= TYPICAL_SHARE * len(values) else None


def _direction(head: list[int], base: list[int], *, beyond: bool = False) -> int:
    """+1 when head's calls count more than base's, -1 when fewer, 0 when they do not
    differ: typical call against typical call where both sides have one, else every
    call against every call. With ``beyond`` (:data:`CLOCK_FOLLOWING`), both sides need
    a typical call, the two must differ by more than :data:`CLOCK_TOLERANCE` and each
    must lie beyond every call of the other side.

    Example:
        >>> _direction([97, 146, 97, 97, 97, 97, 97, 97], [94, 94, 94, 94, 94, 94, 143, 94])
        1
        >>> _direction([45, 51, 45, 51], [45, 45, 51, 51]), _direction([60, 61], [45, 51])
        (0, 1)
        >>> flipped = [2118, 2118, 2118, 2118, 2118, 2118, 2143, 2143]  # one wait round less
        >>> _direction(flipped, [2143] * 8), _direction(flipped, [2143] * 8, beyond=True)
        (-1, 0)
        >>> _direction([2170] * 8, [2143] * 8, beyond=True)  # +1.3 %
        1
        >>> _direction([2150] * 8, [2143] * 8, beyond=True), _direction([60, 61], [45, 51], beyond=True)
        (0, 0)
    """
    th, tb = _typical(head), _typical(base)
    if beyond and (th is None or tb is None):
        return _settled_direction(head, base)
    if beyond:
        if abs(th - tb) <= CLOCK_TOLERANCE * max(tb, 1):
            return 0
        if th > tb:
            return 1 if th > max(base) and tb < min(head) else 0
        return -1 if th < min(base) and tb > max(head) else 0
    if th is not None and tb is not None:
        return (th > tb) - (th < tb)
    return 1 if min(head) > max(base) else -1 if max(head) < min(base) else 0
