"""Counting the Python calls of a case's worker processes, from the process that measures.

A wall-clock case that hands its work to forked worker processes (a multi-process
collector) makes few calls on its own thread: a change to the code its workers run
moved none of its counts, and on a busy host the clock could not see it either. This
module counts the workers' Python calls (``worker_py_calls``) during each measured call,
however busy the machine is.

How, without the code under test taking part:

- :func:`install` (the suite's plugin, before any case forks) makes a table in shared
  memory and registers fork hooks: every process forked afterwards, at any depth, takes
  a slot in the table and installs a ``SIGUSR2`` handler. Nothing else runs in it, and
  nothing is counted, until a measurement asks.
- :meth:`WorkerCalls.start` finds this process's live descendants that hold a slot and
  still catch the signal (a forked child that ran ``exec`` no longer does, and is
  left alone), asks each to count and signals it; the handler sets ``sys.setprofile``
  to a counter that adds every Python function and builtin called to the slot. The
  standard library's waits are left out: the calls made inside them, as ``py_calls``
  leaves them out, and, unlike ``py_calls``, the call to the wait itself (a pipe's
  ``send``), whose module is the waits'.
- :func:`wait_quiet` waits until no worker is busy (none made more than
  :data:`QUIET_CALLS` calls in :data:`QUIET_S`, twice in a row) and returns their
  counts (:meth:`WorkerCalls.now`): read before and after each measured call, their
  difference is the work the call caused in its workers, the batches it took and those
  they made ready again (:class:`~rlpace.bench.work_counts.marks.WorkerMarks` takes
  these marks for the workers and the case's threads together).
- :meth:`WorkerCalls.names` has each worker write its calls per function (as
  ``py_calls`` names them) at a mark; :func:`steady_names` keeps, from the windows
  between marks, the functions called equally often in every call, which repeat
  exactly from process to process while the workers' totals follow where the episodes
  end (:func:`~rlpace.bench.work_counts.verdict.worker_names_moved` judges them).
- :meth:`WorkerCalls.stop` turns the counters off.

What it does not see: the workers' own threads (the profile hook is the worker's main
thread's; the measuring process's threads are
:mod:`~rlpace.bench.work_counts.threads`'),
processes started by ``spawn``, ``forkserver`` or ``exec``, and workers that never go
quiet between calls (they run ahead on their own: the measurement then says so and
counts nothing). Linux only (it reads ``/proc``); elsewhere :func:`install` says why
it cannot.

Example:
    >>> import multiprocessing as mp
    >>> install()
    ''
    >>> def work(conn):
    ...     conn.send("ready")
    ...     while conn.recv():
    ...         conn.send(sum([abs(i) for i in range(100)]))
    >>> here, there = mp.get_context("fork").Pipe()
    >>> proc = mp.get_context("fork").Process(target=work, args=(there,))
    >>> proc.start(); here.recv()
    'ready'
    >>> counting = WorkerCalls.start()
    >>> counting.workers
    1
    >>> before = sum(wait_quiet(counting.now))
    >>> here.send(True); here.recv()
    4950
    >>> sum(wait_quiet(counting.now)) - before  # the list, 100 abs, sum (the pipe's: waits)
    102
    >>> counting.stop(); here.send(False); proc.join()
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

from rlpace.bench.work_counts.python import is_wait_code, python_label

__all__ = [
    "ACK_S",
    "IDLE_JITTER_S",
    "NAMES_LIMIT",
    "QUIET_CALLS",
    "QUIET_LIMIT_S",
    "QUIET_S",
    "SHARE_TOLERANCE",
    "SLOTS",
    "WorkerCalls",
    "WorkersNotCounted",
    "builtin_label",
    "install",
    "steady_names",
    "wait_quiet",
]

SLOTS = 256
"""Processes the table can hold at once; a slot whose process has ended is taken again."""
QUIET_S = 0.03
"""How long a window :func:`wait_quiet` watches for calls."""
QUIET_CALLS = 32
"""The most calls a worker may make in a window and still count as idle: a worker
that polls while it waits (a semaphore with a time-out) makes a few calls every
tenth of a second; one that works makes thousands in a window."""
QUIET_LIMIT_S = 2.0
"""How long :func:`wait_quiet` waits for the workers to go quiet."""
IDLE_JITTER_S = 0.15
"""Extra idle time before every other quiet mark
(:meth:`~rlpace.bench.work_counts.marks.WorkerMarks.mark`): a
worker that polls while it waits (every 0.1 s in rlpace's multi-process collector)
then makes a different number of calls in alternate windows, so that work following
the clock never looks steady (:func:`steady_names`)."""
ACK_S = 2.0
"""How long :meth:`WorkerCalls.start` and :meth:`WorkerCalls.names` wait for every
worker to answer."""
_SIGNAL = getattr(signal, "SIGUSR2", None)
_PID, _WANT, _ON, _CALLS, _ASKED, _DUMPED = range(6)
_FIELDS = 6


NAMES_LIMIT = 4096
"""The most functions :func:`steady_names` keeps; past it the record says it is not
complete, and a function missing from it is not taken as never called."""


SHARE_TOLERANCE = 0.05
"""How far a function's share of a window's calls may stray from its median share, as
a part of it, for :func:`steady_names` to call it ``rated``: called in proportion to
the workers' whole work. An env that sleeps 2 ms a step is stepped as often as the
clock allows, so no function of its threads is called equally often in every call;
those called once a step keep their share of the calls to within 1 % (A/A, the
threaded sleep-bound collectors, 2026-12-07)."""


def steady_names(windows: list[dict[str, int]], limit: int = NAMES_LIMIT) -> dict[str, Any]:
    """Which functions the workers called equally often in every measured call
    (``steady``: name -> calls a call) and which they did not (``unsteady``), from the
    calls per function of each call's window; ``complete``: every function called is
    listed, so one missing was never called; ``rated``: the functions called in
    proportion to the workers' whole work, their share of every window's calls within
    :data:`SHARE_TOLERANCE` of their median share (name -> mean calls a call).

    A function run once a step is steady; one run on an episode's reset follows where
    the episodes ended, and is not. Steady counts repeat from process to process, so a
    change in them is the code's. Where the clock decides how many steps a call takes
    (envs that sleep), nothing is steady, but what runs once a step is still
    ``rated``: a function new to it is the code's
    (:func:`~rlpace.bench.work_counts.verdict.worker_names_moved`).

    Example:
        >>> steady_names([{"step": 160, "reset": 2}, {"step": 160, "reset": 3}])
        {'steady': {'step': 160}, 'unsteady': ['reset'], 'complete': True, 'rated': {'step': 160.0}}
        >>> steady_names([{"step": 16, "check": 16}, {"step": 20, "check": 20}])["rated"]
        {'check': 18.0, 'step': 18.0}
    """
    labels = sorted(set().union(*windows)) if windows else []
    steady: dict[str, int] = {}
    unsteady: list[str] = []
    for label in labels:
        values = {window.get(label, 0) for window in windows}
        if len(values) == 1:
            steady[label] = values.pop()
        else:
            unsteady.append(label)
    rated = _rated(windows, labels)
    complete = len(labels) <= limit
    if not complete:  # keep the most called steady ones
        steady = dict(sorted(steady.items(), key=lambda kv: -kv[1])[:limit])
        unsteady = unsteady[: max(0, limit - len(steady))]
        rated = dict(sorted(rated.items(), key=lambda kv: -kv[1])[:limit])
    return {"steady": steady, "unsteady": unsteady, "complete": complete, "rated": rated}


def _rated(windows: list[dict[str, int]], labels: list[str]) -> dict[str, float]:
    """:func:`steady_names`' ``rated``: name -> mean calls a window, for the functions
    whose share of each window's calls is within :data:`SHARE_TOLERANCE` of its median
    (the upper of the two middle shares where the windows are even in number)."""
    totals = [sum(window.values()) for window in windows]
    if len(windows) < 2 or min(totals, default=0) <= 0:
        return {}
    rated = {}
    for label in labels:
        counts = [window.get(label, 0) for window in windows]
        shares = [n / total for n, total in zip(counts, totals, strict=True)]
        middle = statistics.median_high(shares)
        if middle > 0 and all(abs(x - middle) <= SHARE_TOLERANCE * middle for x in shares):
            rated[label] = round(sum(counts) / len(counts), 3)
    return rated


class WorkersNotCounted(RuntimeError):
    """The workers could not be counted for this measurement (the message says why);
    the measurement's other counts stand.

    Example:
        >>> str(WorkersNotCounted("the workers did not go quiet"))
        'the workers did not go quiet'
    """


class _Table:
    """The shared slots, 8-byte integers per process: its pid, whether the measuring
    process wants it to count, whether it does, its calls so far, the last dump asked
    of it and the last it wrote."""

    def __init__(self, slots: int) -> None:
        import multiprocessing

        self.slots = slots
        self.map = mmap.mmap(-1, slots * _FIELDS * 8)  # anonymous and shared: forks see it
        self.q = memoryview(self.map).cast("q")
        self.lock = multiprocessing.get_context("fork").Lock()

    def field(self, slot: int, name: int) -> int:
        return self.q[slot * _FIELDS + name]

    def set(self, slot: int, name: int, value: int) -> None:
        self.q[slot * _FIELDS + name] = value


_TABLE: _Table | None = None
_SLOT: int | None = None  # this process's slot, in a forked child that took one
_OWNER = 0  # the process that made the table
_ASKED_LAST = 0  # in the measuring process: the last dump it asked for
_COUNTS: dict[Any, int] = {}  # in a worker: calls per function since counting began
_SEEN: dict[Any, Any] = {}  # in a worker: a builtin's key -> the builtin, for its label


def _dump_dir(owner: int) -> str:
    """Where the workers of ``owner`` leave their per-function counts."""
    return os.path.join(tempfile.gettempdir(), f"rlpace-worker-counts-{owner}")


def install(slots: int = SLOTS) -> str:
    """Make the table and register the fork hooks, once per process; returns ``""``, or
    why worker processes cannot be counted here (then nothing was registered).

    Call it before the cases fork their workers: a process forked earlier holds no slot.

    Example:
        >>> install()
        ''
    """
    global _TABLE, _OWNER
    if _TABLE is not None:
        return ""
    if _SIGNAL is None or not hasattr(os, "register_at_fork") or not os.path.isdir("/proc/self"):
        return "counting worker processes needs Linux (fork hooks, SIGUSR2 and /proc)"
    try:
        _TABLE, _OWNER = _Table(slots), os.getpid()
    except (OSError, ValueError) as exc:
        return f"no shared table for the worker counts: {exc}"
    os.register_at_fork(after_in_child=_take_slot)
    return ""


def _stat(pid: int) -> list[bytes]:
    """The fields of ``/proc/<pid>/stat`` after the command name, the state letter
    first (``[]``: no such process)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return []
    return stat[stat.rfind(b")") + 2 :].split()


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs: a zombie (killed, not yet reaped) has ended."""
    fields = _stat(pid)
    return bool(fields) and fields[0] not in (b"Z", b"X")


def _poke(pid: int) -> None:
    """Signal a worker; one that has ended, or a process that took its pid and does
    not catch the signal (which would end it), is left alone."""
    if _catches_signal(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, _SIGNAL)


def _ended_during(pids: list[int]) -> None:
    """Raise :class:`WorkersNotCounted` when one of ``pids`` has ended: the others'
    calls alone would not be the call's."""
    for pid in pids:
        if not _alive(pid):
            raise WorkersNotCounted(
                f"worker process {pid} ended during the measurement (killed, or it "
                "crashed): the calls of the others alone are not the call's work"
            )


def _take_slot() -> None:
    """In a freshly forked child: take a free slot and the signal (never raises: a fork
    must not fail because of the counting)."""
    global _SLOT
    _SLOT = None
    _COUNTS.clear()
    _SEEN.clear()
    table = _TABLE
    if table is None:
        return
    try:
        if not table.lock.acquire(timeout=1.0):
            return
        try:
            me = os.getpid()
            for slot in range(table.slots):  # a slot left by a process whose pid we reuse
                if table.field(slot, _PID) == me:
                    table.set(slot, _PID, 0)
            for slot in range(table.slots):
                pid = table.field(slot, _PID)
                if pid == 0 or not _alive(pid):
                    for name in (_WANT, _ON, _CALLS, _ASKED, _DUMPED):
                        table.set(slot, name, 0)
                    table.set(slot, _PID, me)
                    _SLOT = slot
                    break
        finally:
            table.lock.release()
        if _SLOT is not None:
            signal.signal(_SIGNAL, _on_signal)
    except Exception:  # noqa: BLE001 - e.g. a fork from a thread signals cannot reach
        if _SLOT is not None:
            table.set(_SLOT, _PID, 0)
        _SLOT = None


def _on_signal(signum: int, frame: Any) -> None:
    """In a worker: start or stop counting, and leave the counts per function where the
    measuring process asked; the handler's own calls are not counted."""
    table, slot = _TABLE, _SLOT
    if table is None or slot is None:
        return
    hook = sys.getprofile()
    sys.setprofile(None)
    try:
        asked = table.field(slot, _ASKED)
        if asked != table.field(slot, _DUMPED):
            _dump(asked)
            table.set(slot, _DUMPED, asked)
        if table.field(slot, _WANT):
            if not table.field(slot, _ON):
                _COUNTS.clear()
                hook = _counter(table.q, slot * _FIELDS + _CALLS)
                table.set(slot, _ON, 1)
        else:
            hook = None
            table.set(slot, _ON, 0)
    finally:
        sys.setprofile(hook)


def _dump(asked: int) -> None:
    """Write this worker's counts per function (labelled as ``py_calls``' names are) to
    its file in the owner's folder, whole or not at all."""
    out: dict[str, int] = {}
    for key, n in list(_COUNTS.items()):
        label = python_label(key) if not isinstance(key, tuple) else builtin_label(_SEEN[key])
        if label is not None:
            out[label] = out.get(label, 0) + n
    folder = _dump_dir(_OWNER)
    path = os.path.join(folder, f"{os.getpid()}.json")
    try:
        with open(path + ".part", "w") as f:
            json.dump({"asked": asked, "counts": out}, f)
        os.replace(path + ".part", path)
    except OSError:
        pass  # the measuring process finds no file and says so


def builtin_label(fn: Any) -> str:
    """A builtin's name as ``cProfile`` writes it (without addresses): the same names
    ``py_calls`` lists.

    Example:
        >>> builtin_label(len), builtin_label([].append)
        ('<built-in method builtins.len>', "<method 'append' of 'list' objects>")
    """
    owner = getattr(fn, "__self__", None)
    name = getattr(fn, "__name__", "?")
    if owner is None or isinstance(owner, ModuleType):
        module = getattr(fn, "__module__", None) or getattr(owner, "__name__", None)
        if module:
            return f"<built-in method {module}.{name}>"
    elif type(getattr(type(owner), name, None)).__name__ == "method_descriptor":
        return f"<method '{name}' of '{type(owner).__name__}' objects>"
    return python_label(repr(fn)) or repr(fn)


def _counter(cells: Any, index: int) -> Any:
    """A ``sys.setprofile`` hook adding each Python call and builtin call to
    ``cells[index]`` and to the worker's counts per function, except those made inside
    the standard library's waits and by the signal handler."""
    waits: dict[Any, bool] = {_on_signal.__code__: True}  # the handler's own calls
    counts, seen = _COUNTS, _SEEN

    def count(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            key = code = frame.f_code
        elif event == "c_call":
            code = frame.f_code
            owner = getattr(arg, "__self__", None)
            key = (
                owner if owner is None or isinstance(owner, ModuleType) else type(owner),
                getattr(arg, "__name__", None),
            )
        else:
            return
        skip = waits.get(code)
        if skip is None:
            skip = waits[code] = is_wait_code(code)
        if skip:
            return
        cells[index] += 1
        n = counts.get(key)
        if n is None:
            counts[key] = 1
            if event == "c_call":
                seen[key] = arg
        else:
            counts[key] = n + 1

    return count


def _parent_of(pid: int) -> int:
    """``pid``'s parent (0: gone), from ``/proc/<pid>/stat``."""
    fields = _stat(pid)
    return int(fields[1]) if len(fields) > 1 and fields[0] != b"Z" else 0


def _descends_from(pid: int, ancestor: int) -> bool:
    for _ in range(32):
        pid = _parent_of(pid)
        if pid == ancestor:
            return True
        if pid <= 1:
            return False
    return False


def _catches_signal(pid: int) -> bool:
    """Whether ``pid`` has a handler for the signal (after ``exec`` it has not, and the
    signal would end it)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) >> (int(_SIGNAL) - 1) & 1)
    except (OSError, ValueError, IndexError):
        return False
    return False


def wait_quiet(now: Callable[[], list[int]], limit_s: float = QUIET_LIMIT_S) -> list[int]:
    """Each worker's calls so far (``now()``, one total per worker, in a fixed order),
    once none is busy: two windows of :data:`QUIET_S` in a row in which none made more
    than :data:`QUIET_CALLS` calls.

    Raises:
        WorkersNotCounted: they did not go quiet within ``limit_s`` (they work between
            calls, so a call's share cannot be told).

    Example:
        >>> wait_quiet(lambda: [5, 7])
        [5, 7]
    """
    deadline = time.monotonic() + limit_s
    before = now()
    quiet = 0
    while quiet < 2:
        time.sleep(QUIET_S)
        after = now()
        grown = [n - (before[i] if i < len(before) else 0) for i, n in enumerate(after)]
        quiet = quiet + 1 if all(g <= QUIET_CALLS for g in grown) else 0
        before = after
        if quiet < 2 and time.monotonic() > deadline:
            raise WorkersNotCounted(
                f"the workers did not go quiet within {limit_s:g} s between calls: they "
                "work on their own, so a call's share of their work cannot be told"
            )
    return before


class WorkerCalls:
    """The counting of this process's forked workers for one measurement.

    Example:
        >>> install()
        ''
        >>> WorkerCalls(_TABLE, [], []).workers  # what start() gives: None when none
        0
    """

    def __init__(self, table: _Table, slots: list[int], pids: list[int]) -> None:
        self._table = table
        self._slots = slots
        self._pids = pids

    @property
    def workers(self) -> int:
        """How many worker processes are counted.

        Example:
            >>> WorkerCalls(None, [3, 4], [101, 102]).workers
            2
        """
        return len(self._slots)

    @classmethod
    def start(cls, ack_s: float = ACK_S) -> WorkerCalls | None:
        """Ask every live worker of this process to count; None when it has none.

        Raises:
            WorkersNotCounted: a worker did not start counting within ``ack_s``.

        Example:
            >>> import os
            >>> install(); pid = os.fork()
            ''
            >>> if pid == 0:
            ...     os._exit(0)  # a child that ends at once holds no live slot
            >>> _ = os.waitpid(pid, 0); counting = WorkerCalls.start()
            >>> counting is None or pid not in counting._pids
            True
            >>> counting and counting.stop()
        """
        table = _TABLE
        if table is None:
            return None
        me = os.getpid()
        slots, pids = [], []
        for slot in range(table.slots):
            pid = table.field(slot, _PID)
            if pid and pid != me and _descends_from(pid, me) and _catches_signal(pid):
                slots.append(slot)
                pids.append(pid)
        if not slots:
            return None
        counting = cls(table, slots, pids)
        os.makedirs(_dump_dir(me), exist_ok=True)
        for slot, pid in zip(slots, pids):
            table.set(slot, _WANT, 1)
            _poke(pid)
        deadline = time.monotonic() + ack_s
        while not all(table.field(s, _ON) or not _alive(p) for s, p in zip(slots, pids)):
            if time.monotonic() > deadline:
                late = [p for s, p in zip(slots, pids) if not table.field(s, _ON)]
                counting.stop()
                raise WorkersNotCounted(
                    f"{len(late)} of {len(pids)} worker processes did not start counting "
                    f"within {ack_s:g} s (pid {late[0]}: a handler of its own for SIGUSR2, "
                    "or the signal blocked)"
                )
            time.sleep(0.001)
        return counting

    def now(self) -> list[int]:
        """The calls counted so far in each worker.

        Example:
            >>> WorkerCalls(None, [], []).now()
            []
        """
        return [self._table.field(slot, _CALLS) for slot in self._slots]

    def check_alive(self) -> None:
        """Raise :class:`WorkersNotCounted` when a counted worker has ended.

        Example:
            >>> WorkerCalls(None, [], []).check_alive()
        """
        _ended_during(self._pids)

    def names(self, ack_s: float = ACK_S) -> dict[str, int]:
        """The calls counted so far per function (``py_calls``' names), summed over the
        workers: each writes its counts when signalled, without counting that.

        Raises:
            WorkersNotCounted: a worker did not write them within ``ack_s``.

        Example:
            >>> install(); WorkerCalls(_TABLE, [], []).names()
            ''
            {}
        """
        global _ASKED_LAST
        _ASKED_LAST += 1
        asked = _ASKED_LAST
        for slot, pid in zip(self._slots, self._pids):
            self._table.set(slot, _ASKED, asked)
            _poke(pid)
        deadline = time.monotonic() + ack_s
        out: dict[str, int] = {}
        folder = _dump_dir(os.getpid())
        for slot, pid in zip(self._slots, self._pids):
            while self._table.field(slot, _DUMPED) != asked:
                _ended_during([pid])
                if time.monotonic() > deadline:
                    raise WorkersNotCounted(
                        f"worker process {pid} did not write its counts per function "
                        f"within {ack_s:g} s"
                    )
                time.sleep(0.001)
            try:
                with open(os.path.join(folder, f"{pid}.json")) as f:
                    dumped = json.load(f)
            except (OSError, ValueError) as exc:
                raise WorkersNotCounted(
                    f"worker process {pid}'s counts per function could not be read: {exc}"
                ) from None
            for label, n in dumped["counts"].items():
                out[label] = out.get(label, 0) + n
        return out

    def stop(self) -> None:
        """Turn every counter off (a worker that has ended is skipped).

        Example:
            >>> install(); WorkerCalls(_TABLE, [], []).stop()
            ''
        """
        for slot, pid in zip(self._slots, self._pids):
            self._table.set(slot, _WANT, 0)
            if self._table.field(slot, _PID) == pid:
                _poke(pid)
        shutil.rmtree(_dump_dir(os.getpid()), ignore_errors=True)
