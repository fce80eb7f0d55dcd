"""Counting the Python calls of a case's threads, from the thread that measures.

A threaded collector steps its envs and runs its policy in threads it started when it
was built, long before the counting pass: ``sys.setprofile`` and
``threading.setprofile`` reach only the calling thread and threads started later, so
a change to the code those threads run moved none of the case's counts. This module
installs a counter in every other live thread of the process for the measurement,
from the measuring thread, and takes it out again.

How: CPython 3.11 sets a profile function for any thread state through
``_PyEval_SetProfile`` (the function ``sys.setprofile`` uses for its own thread; 3.12
made the same public as ``threading.setprofile_all_threads``). The thread states are
walked with the public C API (``PyInterpreterState_ThreadHead``,
``PyThreadState_Next``), and the counter is a C profile function
(``_thread_counter.c``, compiled with ``gcc`` against the interpreter's headers on
first use, as the count tier's Callgrind shim is): about 0.2 µs an event, paid in the
counting pass only, never in the timing. Each thread is counted as a forked worker is
(:mod:`~rlpace.bench.work_counts.workers`): every Python function and builtin it calls,
per function (``py_calls``' names), except the standard library's waits and the calls
made inside them.

What it does not see: threads started during the measurement (the result's functions
then differ between calls and are not steady: sensitivity lost, not a false alarm),
threads that run no Python (OpenMP's, torch's intra-op pool), and any interpreter but
CPython 3.11, or a machine without ``gcc`` or the interpreter's headers, where
:meth:`ThreadCalls.start` says why it cannot.

Example:
    >>> import queue, threading
    >>> jobs, done = queue.Queue(), queue.Queue()
    >>> def serve():
    ...     while (n := jobs.get()) is not None:
    ...         done.put(sum([abs(i) for i in range(n)]))
    >>> since = newest_thread()  # threads started before it are not this example's
    >>> worker = threading.Thread(target=serve, daemon=True); worker.start()
    >>> counting = ThreadCalls.start(since)
    >>> counting.workers
    1
    >>> before = sum(counting.now())
    >>> jobs.put(100); done.get()
    4950
    >>> sum(counting.now()) - before  # the list, 100 abs and sum (the queue's are waits)
    102
    >>> counting.stop(); jobs.put(None); worker.join()
"""

from __future__ import annotations

import ctypes
import functools
import shutil
import sys
import sysconfig
import threading
from pathlib import Path
from typing import Any

from rlpace.bench._compile import CompileFailed, compile_library
from rlpace.bench.work_counts.python import is_wait_code, python_label
from rlpace.bench.work_counts.workers import WorkersNotCounted, builtin_label

__all__ = ["ThreadCalls", "ThreadsNotCounted", "newest_thread", "threads_countable"]

COUNTER_SOURCE = Path(__file__).with_name("_thread_counter.c")
"""The C profile function, compiled on first use."""


class ThreadsNotCounted(WorkersNotCounted):
    """The case's threads could not be counted here (the message says why).

    Example:
        >>> str(ThreadsNotCounted("needs CPython 3.11"))
        'needs CPython 3.11'
    """


def threads_countable() -> str:
    """``""`` where other threads' Python calls can be counted, else why not.

    Example:
        >>> threads_countable()
        ''
    """
    if sys.implementation.name != "cpython" or sys.version_info[:2] != (3, 11):
        return (
            "counting other threads needs CPython 3.11 (its _PyEval_SetProfile), got "
            f"{sys.implementation.name} {sys.version_info[0]}.{sys.version_info[1]}"
        )
    if not hasattr(ctypes.pythonapi, "_PyEval_SetProfile"):
        return "this CPython 3.11 build does not export _PyEval_SetProfile"
    try:
        _counter()
    except ThreadsNotCounted as exc:
        return str(exc)
    return ""


_COUNTER: Any = None  # the compiled profile function, once loaded


def _counter() -> Any:
    """The compiled profile function (built and loaded once per process).

    Raises:
        ThreadsNotCounted: no C compiler, no ``Python.h``, or the build failed.
    """
    global _COUNTER
    if _COUNTER is not None:
        return _COUNTER
    compiler = shutil.which("gcc") or shutil.which("cc")
    include = sysconfig.get_paths().get("include") or ""
    if compiler is None:
        raise ThreadsNotCounted(
            "counting other threads needs gcc to build its profile function (apt-get install gcc)"
        )
    if not (Path(include) / "Python.h").is_file():
        raise ThreadsNotCounted(
            f"counting other threads needs the interpreter's headers (no Python.h in "
            f"{include or 'its include folder'}; apt-get install python3-dev)"
        )
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    try:
        path = compile_library(
            COUNTER_SOURCE, f"thread-counter-py{version}", compiler, ("-O2", "-I" + include)
        )
        library = ctypes.PyDLL(str(path))
    except (CompileFailed, OSError) as exc:
        raise ThreadsNotCounted(
            f"the threads' profile function could not be built: {exc}"
        ) from None
    _COUNTER = ctypes.cast(library.rlpace_count_calls, ctypes.c_void_p)
    _COUNTER.library = library  # kept loaded for the life of the process
    return _COUNTER


@functools.cache
def _api() -> Any:
    """``ctypes.pythonapi`` with the signatures used here (set once: the plugin asks
    for the newest thread before every case)."""
    api = ctypes.pythonapi
    api._PyEval_SetProfile.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.py_object]
    api._PyEval_SetProfile.restype = ctypes.c_int
    api.PyInterpreterState_Get.restype = ctypes.c_void_p
    api.PyInterpreterState_ThreadHead.argtypes = [ctypes.c_void_p]
    api.PyInterpreterState_ThreadHead.restype = ctypes.c_void_p
    api.PyThreadState_Next.argtypes = [ctypes.c_void_p]
    api.PyThreadState_Next.restype = ctypes.c_void_p
    api.PyThreadState_Get.restype = ctypes.c_void_p
    api.PyThreadState_GetID.argtypes = [ctypes.c_void_p]
    api.PyThreadState_GetID.restype = ctypes.c_uint64
    return api


def newest_thread() -> int:
    """The id of the newest thread state now (0 where threads cannot be counted): threads
    started later have higher ids, so a mark taken before a case is built tells its
    threads from those earlier cases left behind (:meth:`ThreadCalls.start`).

    Example:
        >>> before = newest_thread()
        >>> t = threading.Thread(target=lambda: None); t.start(); t.join()
        >>> newest_thread() >= before
        True
    """
    if threads_countable():
        return 0
    api = _api()
    me = api.PyThreadState_Get()
    return max([api.PyThreadState_GetID(me)] + [i for _, i in _states(api)])


def _states(api: Any) -> list[tuple[int, int]]:
    """Every thread state of this interpreter but the calling thread's: (address, id).
    The GIL is held throughout (a ``ctypes.pythonapi`` call keeps it), so none ends
    while the list is made."""
    me = api.PyThreadState_Get()
    out = []
    state = api.PyInterpreterState_ThreadHead(api.PyInterpreterState_Get())
    while state:
        if state != me:
            out.append((state, api.PyThreadState_GetID(state)))
        state = api.PyThreadState_Next(state)
    return out


class ThreadCalls:
    """The counting of this process's other threads for one measurement.

    Example:
        >>> counting = ThreadCalls.start()  # no other thread with Python code: None
        >>> counting is None or counting.workers >= 1
        True
        >>> counting and counting.stop()
    """

    def __init__(self, api: Any, states: list[tuple[int, int]]) -> None:
        self._api = api
        self._states = states
        self._counts: dict[Any, int] = {}  # code object or builtin key -> calls
        self._labels: dict[Any, str] = {}  # a builtin's key -> its name
        waits: dict[Any, bool] = {}  # code object -> whether it is a wait's
        # the compiled counter's state in each thread (_thread_counter.c): the dicts are
        # shared, the one-int list is that thread's total
        self._states_of = [
            (waits, self._counts, [0], self._labels, is_wait_code, builtin_label) for _ in states
        ]
        self._stopped = False

    @property
    def workers(self) -> int:
        """How many threads are counted.

        Example:
            >>> ThreadCalls(None, [(1, 7), (2, 8)]).workers
            2
        """
        return len(self._states)

    @classmethod
    def start(cls, since: int = 0) -> ThreadCalls | None:
        """Install the counter in every other live thread started after the mark
        ``since`` (:func:`newest_thread`; 0: all of them); None when there is none.

        Raises:
            ThreadsNotCounted: they cannot be counted here (:func:`threads_countable`
                says why), or an audit hook refused.

        Example:
            >>> counting = ThreadCalls.start()  # None, or the threads this process runs
            >>> counting and counting.stop()
        """
        why = threads_countable()
        if why:
            if threading.active_count() < 2:
                return None  # no other thread to count anyway
            raise ThreadsNotCounted(why)
        api = _api()
        states = [(state, i) for state, i in _states(api) if i > since]
        if not states:
            return None
        counting = cls(api, states)
        for (state, _), own in zip(states, counting._states_of):
            if api._PyEval_SetProfile(state, _COUNTER, own) != 0:
                counting.stop()
                raise ThreadsNotCounted("_PyEval_SetProfile refused a thread (an audit hook)")
        return counting

    def now(self) -> list[int]:
        """The calls counted so far in each counted thread (one that has made none: 0).

        Example:
            >>> ThreadCalls(None, [(1, 7)]).now()
            [0]
        """
        return [own[2][0] for own in self._states_of]

    def names(self) -> dict[str, int]:
        """The calls counted so far per function (``py_calls``' names), over the threads.

        Example:
            >>> ThreadCalls(None, []).names()
            {}
        """
        out: dict[str, int] = {}
        for key, n in list(self._counts.items()):
            label = python_label(key) if not isinstance(key, tuple) else self._labels.get(key)
            if label is not None:
                out[label] = out.get(label, 0) + n
        return out

    def stop(self) -> None:
        """Take the counter out of every counted thread that still runs (one that ended
        took it with it; a thread state made since at a freed one's address has another
        id and is left alone).

        Example:
            >>> ThreadCalls(None, []).stop()
        """
        if self._stopped or not self._states:
            return
        self._stopped = True
        live = set(_states(self._api))
        for state in self._states:
            if state in live:
                self._api._PyEval_SetProfile(state[0], None, None)
