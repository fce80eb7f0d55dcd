"""Counting what a call does: ``torch.profiler`` and ``cProfile`` around each of a few calls.

:func:`measure_work_counts` runs a (warm) callable :data:`CALLS` times under the
profiler, each call in a ``record_function`` region of its own, and counts per call
the events inside the region on the calling thread (:data:`PROFILER_METRICS`), plus
the most frequent event names (:func:`count_names`). Each call also runs under a
``cProfile`` counter of its own, which counts the Python-level calls made from that
thread (``py_calls``; :mod:`rlpace.bench.work_counts.python`), so Python work between
the operators is counted too. The garbage collector is off while the calls are
counted. The suite's pytest plugin stores the result in ``extra_info[EXTRA_INFO_KEY]``;
:data:`ENV` turns that off, and :data:`SKIP_ENV` leaves out the cases of named
implementations (``rlpace-bench pr`` leaves out the torchrl twins: a PR cannot change
their work).

Example:
    >>> import torch
    >>> x = torch.ones(4)
    >>> measure_work_counts(lambda: x + 1, calls=2, cuda=False)["calls"]
    2
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable, Iterator
from typing import Any

from rlpace.bench.work_counts.marks import WorkerMarks, stopped
from rlpace.bench.work_counts.python import calls_made, is_python_label, python_calls
from rlpace.bench.work_counts.workers import WorkersNotCounted, steady_names

__all__ = [
    "CALLS",
    "ENV",
    "EXTRA_INFO_KEY",
    "MADE_KEPT",
    "MAX_CALLS",
    "METRICS",
    "NAMES_KEPT",
    "OPTIONAL_METRICS",
    "PROFILER_METRICS",
    "SKIP_ENV",
    "WORKERS_ENV",
    "count_events",
    "count_names",
    "counting_environ",
    "counting_on",
    "measure_work_counts",
    "metrics_of",
    "nested_events",
    "skipped_impls",
]

EXTRA_INFO_KEY = "work_counts"
"""Where a result keeps its counts: ``extra_info["work_counts"]``."""
ENV = "RLPACE_BENCH_WORK_COUNTS"
"""``0`` turns the counting off in the suite's plugin (``1``, or unset: on)."""
WORKERS_ENV = "RLPACE_BENCH_WORKER_COUNTS"
"""``0`` leaves the worker processes and the case's other threads uncounted
(:mod:`rlpace.bench.work_counts.workers`: no fork hooks, no signals;
:mod:`rlpace.bench.work_counts.threads`) while the rest is counted; ``1``, or unset:
counted."""
SKIP_ENV = "RLPACE_BENCH_WORK_COUNTS_SKIP"
"""Comma-separated ``impl`` values whose cases the suite's plugin does not count
(unset or empty: every case is counted)."""
CALLS = 8
"""Calls measured per case, each in a profiler region of its own."""
METRICS = {
    "kernels": "kernel launches (CUDA runtime launch calls)",
    "syncs": "host waits for the device (stream, event and device synchronizations)",
    "copies": "memory copies and fills issued (cudaMemcpy*, cudaMemset*)",
    "ops": "aten operators dispatched, nested ones included",
    "py_calls": "Python functions and builtins called (cProfile's count)",
    "worker_py_calls": "Python functions and builtins called in the case's forked worker "
    "processes (:mod:`rlpace.bench.work_counts.workers`) and its other threads "
    "(:mod:`rlpace.bench.work_counts.threads`)",
}
"""The metrics counted per call, and what each counts."""
PROFILER_METRICS = ("kernels", "syncs", "copies", "ops")
"""The metrics read from ``torch.profiler``'s events."""
OPTIONAL_METRICS = ("py_calls", "worker_py_calls")
"""Metrics a result may lack (files written before they were counted, a Python whose
profiler hook was taken, a case without worker processes); a metric is judged where
both sides have it."""
NAMES_KEPT = 64
"""Event names kept per case (the most frequent), for "what launched more?"."""
MADE_KEPT = 4 * NAMES_KEPT
"""Functions kept in ``calls_made`` per case: the :data:`NAMES_KEPT` that make the most
calls, then the code under test's own functions
(:func:`~rlpace.bench.work_counts.python.is_own_code`) that make the most, up to this
many: an edited function that makes few calls is kept even where a library's make
thousands."""
_REGION = "rlpace::measured_call"
_SYNC_NAMES = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize")
MAX_CALLS = 64
"""The most calls one measurement may make (and a result file may hold)."""


def counting_on(value: str | None, name: str = ENV) -> bool:
    """Whether the suite counts, from the value of :data:`ENV` (None: unset), or of the
    switch ``name`` (:data:`WORKERS_ENV`).

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
    raise ValueError(f"{name}: expected 1 or 0, got {value!r}; unset it or fix the value")


def counting_environ(count: bool, skip: tuple[str, ...] = ()) -> dict[str, str]:
    """The environment variables that tell the suite's plugin whether a run counts
    (``count``) and which ``impl`` values it leaves out (``skip``); the inverse of
    :func:`counting_on` and :func:`skipped_impls`.

    Example:
        >>> counting_environ(True, ("torchrl",)), counting_environ(True), counting_environ(False)
        ({'RLPACE_BENCH_WORK_COUNTS_SKIP': 'torchrl'}, {}, {'RLPACE_BENCH_WORK_COUNTS': '0'})
    """
    if not count:
        return {ENV: "0"}
    return {SKIP_ENV: ",".join(skip)} if skip else {}


def skipped_impls(value: str | None) -> frozenset[str]:
    """The ``impl`` values whose cases are not counted, from the value of
    :data:`SKIP_ENV` (None: unset).

    Example:
        >>> sorted(skipped_impls("torchrl")), skipped_impls(None)
        (['torchrl'], frozenset())
        >>> skipped_impls("torchrl,")
        Traceback (most recent call last):
        ...
        ValueError: RLPACE_BENCH_WORK_COUNTS_SKIP: expected implementation names separated by commas (e.g. torchrl), got 'torchrl,'; unset it or fix the value
    """
    if value is None or not value.strip():
        return frozenset()
    names = [part.strip() for part in value.split(",")]
    if not all(n and n.replace("-", "").replace("_", "").isalnum() for n in names):
        raise ValueError(
            f"{SKIP_ENV}: expected implementation names separated by commas (e.g. torchrl), "
            f"got {value!r}; unset it or fix the value"
        )
    return frozenset(names)


def metrics_of(name: str) -> tuple[str, ...]:
    """The metrics one profiler event counts toward (none for most events).

    Example:
        >>> metrics_of("cudaMemcpy"), metrics_of("aten::add"), metrics_of("cudaGetDevice")
        (('copies', 'syncs'), ('ops',), ())
        >>> metrics_of("rlpace/data/buffer.py:ReplayBuffer.sample")
        ('py_calls',)
    """
    if is_python_label(name):
        return ("py_calls",)
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
        metrics = metrics_of(event.name)
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
    out = {metric: [0] * calls for metric in PROFILER_METRICS}
    for index, _, metrics in _counted(events, calls):
        for metric in metrics:
            if metric in out:
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
    return _kept_medians(per_name, limit)


def _kept_medians(per_name: dict[str, list[int]], limit: int) -> dict[str, float]:
    """The median per call of the ``limit`` names with the highest medians."""
    medians = {name: float(statistics.median(v)) for name, v in per_name.items()}
    kept = sorted(medians, key=lambda n: (-medians[n], n))[:limit]
    return {name: medians[name] for name in sorted(kept)}


class _Event:
    """One profiler event, as much of it as counting needs: its name and the CPU event
    it runs inside (the shape :func:`count_events` reads from ``prof.events()``)."""

    __slots__ = ("name", "cpu_parent", "_children")

    def __init__(self, name: str) -> None:
        self.name = name
        self.cpu_parent: _Event | None = None
        self._children: list[_Event] = []


def nested_events(raw: Any) -> list[_Event]:
    """The profiler's raw events (``prof.profiler.kineto_results.events()``) nested the
    way ``prof.events()`` nests them, without building its full event objects.

    ``prof.events()`` builds an object of some forty fields per event, and took 17 s of
    the 48 s that counting the timed cases' work cost a run here (7 s for a SAC
    trainer's start-up, 136 000 events); this keeps only each event's name and parent
    and took a fifth of that time (5.7 s against 28.1 s over the 43 timed cases). The
    rules are torch's, so the counts are the same: hidden and utility events are left
    out; an event is nested in the latest-starting event of its thread that contains
    it (async events and device events have no parent; a runtime event counts in the
    thread of the operator that launched it); then an event that is the only child of
    an event of the same name (an operator that redispatches to itself) is merged into
    its parent, until none is.

    Example:
        >>> from types import SimpleNamespace as R
        >>> from torch.autograd import DeviceType
        >>> def ev(name, start, end, thread=1):  # the raw event's accessors
        ...     return R(name=lambda: name, start_ns=lambda: start, end_ns=lambda: end,
        ...              start_thread_id=lambda: thread, end_thread_id=lambda: thread,
        ...              is_async=lambda: False, is_hidden_event=lambda: False,
        ...              device_type=lambda: DeviceType.CPU, correlation_id=lambda: 0,
        ...              linked_correlation_id=lambda: 0)
        >>> events = nested_events([ev("region#0", 0, 100), ev("aten::mul", 10, 50),
        ...                         ev("aten::mul", 20, 40), ev("aten::add", 60, 70)])
        >>> [(e.name, e.cpu_parent.name if e.cpu_parent else None) for e in events]
        [('region#0', None), ('aten::mul', 'region#0'), ('aten::add', 'region#0')]
    """
    from torch.autograd import DeviceType
    from torch.autograd.profiler_util import _filter_name  # torch's own list, not a copy

    kept = []
    threads: dict[int, int] = {}  # an operator's correlation id -> its thread
    for event in raw:
        name = event.name()
        if _filter_name(name) or event.is_hidden_event():
            continue
        thread = event.start_thread_id()
        cpu = event.device_type() == DeviceType.CPU
        sync = cpu and not event.is_async() and thread == event.end_thread_id()
        linked = event.linked_correlation_id()
        if sync and linked == 0:
            threads[event.correlation_id()] = thread
        kept.append((event.start_ns(), event.end_ns(), thread, sync, linked, _Event(name)))
    by_thread: dict[int, list[tuple[int, int, _Event]]] = {}
    for start, end, thread, sync, linked, event in kept:
        if sync:  # a runtime event nests in the thread of the operator that launched it
            thread = threads.get(linked, thread) if linked > 0 else thread
            by_thread.setdefault(thread, []).append((start, -end, event))
    for nested in by_thread.values():
        nested.sort(key=lambda item: (item[0], item[1]))
        stack: list[tuple[int, _Event]] = []  # (end, event), each inside the one below
        for start, minus_end, event in nested:
            while stack and (start >= stack[-1][0] or -minus_end > stack[-1][0]):
                stack.pop()
            if stack:
                event.cpu_parent = stack[-1][1]
                stack[-1][1]._children.append(event)
            stack.append((-minus_end, event))
    events = [event for *_, event in kept]
    merged: set[_Event] = set()
    changed = True
    while changed:  # torch merges in passes until none is left
        changed = False
        for event in events:
            parent = event.cpu_parent
            if event in merged or parent is None:
                continue
            if parent.name == event.name and len(parent._children) == 1:
                parent._children = event._children
                for child in event._children:
                    child.cpu_parent = parent
                merged.add(event)
                changed = True
    return [event for event in events if event not in merged]


def _profiled_events(prof: Any) -> list[Any]:
    """The events of a finished profile, nested (:func:`nested_events`); where the raw
    events or an accessor they need are not at hand (another torch, or no torch),
    ``prof.events()``."""
    try:
        return nested_events(prof.profiler.kineto_results.events())
    except (AttributeError, ImportError, RuntimeError):
        return list(prof.events())


class _NoEvents:
    """The profile of a process without torch: no operator events."""

    def events(self) -> list:
        return []


def measure_work_counts(
    fn: Callable[[], Any],
    *,
    calls: int = CALLS,
    cuda: bool | None = None,
    workers: bool = False,
    threads_since: int = 0,
) -> dict[str, Any]:
    """Profile ``calls`` calls of ``fn`` (already warm) and return their per-call counts.

    Each call runs in a ``record_function`` region of its own, and under a ``cProfile``
    counter of its own; the device is synchronized between calls outside the regions,
    so the harness's own waits are not counted; the garbage collector is off. ``cuda``
    (default: whether CUDA is available) adds the CUDA activity; without it ``kernels``,
    ``syncs`` and ``copies`` stay zero.

    Returns:
        ``{"calls": n, "kernels": [...], "syncs": [...], "copies": [...], "ops": [...],
        "py_calls": [...], "names": {...}, "calls_made": {...}, "profiler": "torch
        <version>"}``: one count per call for each metric, the median count per call
        of each event name and Python function (:func:`count_names`,
        :func:`~rlpace.bench.work_counts.python.python_calls`) and, for the Python
        functions that made the most calls themselves, ``[times called, calls made]``
        (:func:`~rlpace.bench.work_counts.python.calls_made`); ``py_calls`` and
        ``calls_made`` are left out when another profiler holds Python's profiling hook.
        With ``workers`` and :func:`~rlpace.bench.work_counts.workers.install` run before
        the case forked its workers, ``worker_py_calls`` counts per call the Python
        calls those processes and this process's other threads made (from quiet to
        quiet, :class:`~rlpace.bench.work_counts.workers.WorkerCalls`,
        :class:`~rlpace.bench.work_counts.threads.ThreadCalls`) and ``workers`` says how
        many were counted (``worker_threads``: how many of them are threads, or why the
        threads were not counted); where none could be, ``workers`` says why and
        ``worker_py_calls`` is left out. ``threads_since`` counts only the threads
        started after that mark (:func:`~rlpace.bench.work_counts.threads.newest_thread`,
        taken before the case was built): not those earlier cases left behind.
    In a process that has not imported torch (a suite of pure-Python cases), ``fn``
    cannot have run a torch operator: the profiler is not started (importing torch
    for it would cost more than the case), the operator metrics are zero and
    ``profiler`` says so; the Python calls are counted as always.

    Example:
        >>> import torch
        >>> x = torch.ones(4)
        >>> one = measure_work_counts(lambda: x + 1, calls=2, cuda=False)
        >>> two = measure_work_counts(lambda: (x + 1) + 1, calls=2, cuda=False)
        >>> two["ops"][0] > one["ops"][0] == one["ops"][1], two["kernels"]
        (True, [0, 0])
        >>> one["py_calls"], two["py_calls"]  # the lambda and its code in this file
        ([1, 1], [1, 1])
    """
    import contextlib
    import cProfile
    import gc

    if not isinstance(calls, int) or not 1 <= calls <= MAX_CALLS:
        raise ValueError(f"calls: expected an integer in [1, {MAX_CALLS}], got {calls!r}")
    torch: Any = None
    if cuda or "torch" in sys.modules:
        import torch
        from torch.profiler import ProfilerActivity, profile, record_function

        if cuda is None:
            cuda = torch.cuda.is_available()
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        if cuda:
            torch.cuda.synchronize()
        profiling: Any = profile(activities=activities)
    else:  # no torch in this process: nothing for its profiler to see
        profiling, cuda = contextlib.nullcontext(_NoEvents()), False

        def record_function(name: str) -> contextlib.AbstractContextManager:
            return contextlib.nullcontext()

    # Python <= 3.11 would replace (and then clear) another profiler's hook: leave it be
    py_totals: list[int] | None = None if sys.getprofile() is not None else []
    py_names: dict[str, list[int]] = {}
    py_made: dict[str, list[int]] = {}
    py_called: dict[str, list[int]] = {}
    py_own: set[str] = set()
    collecting = gc.isenabled()
    gc.collect()
    gc.disable()  # a collection's finalizers would land in whichever call it interrupts
    children: WorkerMarks | None = None
    counted: WorkerMarks | None = None  # what ``children`` was, once it counted every call
    workers_said: int | str | None = None
    try:
        if workers:
            try:
                children = WorkerMarks.start(threads_since)
                if children is not None:
                    children.mark()
            except WorkersNotCounted as exc:
                children, workers_said = stopped(children), f"not counted: {exc}"
        with profiling as prof:
            for i in range(calls):
                counter = cProfile.Profile() if py_totals is not None else None
                with record_function(f"{_REGION}#{i}"):
                    try:
                        if counter is not None:
                            counter.enable()
                    except ValueError:  # 3.12+: another profiler holds the hook
                        py_totals, counter = None, None
                    try:
                        fn()
                    finally:
                        if counter is not None:
                            counter.disable()
                if cuda:
                    torch.cuda.synchronize()
                if children is not None:
                    try:
                        children.mark()
                    except WorkersNotCounted as exc:
                        children, workers_said = stopped(children), f"not counted: {exc}"
                if py_totals is not None and counter is not None:
                    total, per = python_calls(counter)
                    py_totals.append(total)
                    for name, n in per.items():
                        py_names.setdefault(name, [0] * calls)[i] = n
                    for name, n in calls_made(counter, own=py_own).items():
                        py_made.setdefault(name, [0] * calls)[i] = n
                        py_called.setdefault(name, [0] * calls)[i] = per.get(name, 0)
        counted = children
    finally:
        stopped(children)
        if collecting:
            gc.enable()
    events = _profiled_events(prof)
    out: dict[str, Any] = {"calls": calls, **count_events(events, calls)}
    if counted is not None:
        workers_said = counted.workers
        if counted.threads is not None:
            out["worker_threads"] = counted.threads.workers
        elif counted.threads_dropped:
            out["worker_threads"] = counted.threads_dropped
    if workers_said is not None:
        out["workers"] = workers_said
        marks = counted.marks() if counted is not None else []
        if isinstance(workers_said, int) and len(marks) == calls + 1:
            pairs = list(zip(marks, marks[1:]))
            out["worker_py_calls"] = [after[0] - before[0] for before, after in pairs]
            out["worker_names"] = steady_names(
                [
                    {k: n - before[1].get(k, 0) for k, n in after[1].items()}
                    for before, after in pairs
                ]
            )
    names = count_names(events, calls)
    if py_totals is not None and len(py_totals) == calls:
        out["py_calls"] = py_totals
        names.update(_kept_medians(py_names, NAMES_KEPT))
        made = _kept_medians(py_made, NAMES_KEPT)
        own = {name: values for name, values in py_made.items() if name in py_own}
        made.update(_kept_medians(own, MADE_KEPT - len(made)) if len(made) < MADE_KEPT else {})
        made = dict(sorted(made.items()))
        called = {name: statistics.median(py_called[name]) for name in made}
        out["calls_made"] = {name: [float(called[name]), made[name]] for name in made}
    out["names"] = dict(sorted(names.items()))
    out["profiler"] = f"torch {torch.__version__}" if torch is not None else "none (no torch)"
    return out
