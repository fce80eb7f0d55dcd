"""Functions every collector shares to iterate, and to stop what it started.

Plain functions, not a base class: the API reference documents each collector with
its bases, and a private base would be an unresolved reference there. A collector
binds the protocol functions as its own methods::

    __iter__ = iterate_batches
    __enter__ = enter_context
    __exit__ = exit_context
    __del__ = shutdown_quietly

and calls :func:`join_threads`, :func:`end_processes`, :func:`close_envs` and
:func:`close_quietly` from its idempotent ``shutdown()``.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")


def iterate_batches(collector: Any) -> Iterator[Any]:
    """Call ``collector.next()`` until ``collector.frames`` reaches ``total_frames``
    (forever when it is ``-1``).

    Example:
        >>> class Countdown:
        ...     total_frames, frames = 3, 0
        ...     def next(self):
        ...         self.frames += 1
        ...         return self.frames
        ...     __iter__ = iterate_batches
        >>> list(Countdown())
        [1, 2, 3]
    """
    while collector.total_frames == -1 or collector.frames < collector.total_frames:
        yield collector.next()


def enter_context(collector: T) -> T:
    """``with collector as c``: ``c`` is the collector itself.

    Example:
        >>> class Thing:
        ...     __enter__ = enter_context
        ...     __exit__ = exit_context
        ...     def shutdown(self):
        ...         print("shut down")
        >>> with Thing() as t:
        ...     isinstance(t, Thing)
        True
        shut down
    """
    return collector


def exit_context(collector: Any, *exc: object) -> None:
    """Leaving the ``with`` block shuts the collector down (exceptions propagate).

    Example:
        >>> class Thing:
        ...     def shutdown(self):
        ...         print("shut down")
        >>> exit_context(Thing(), None, None, None)
        shut down
    """
    collector.shutdown()


def shutdown_quietly(collector: Any) -> None:
    """``shutdown()`` that never raises: for ``__del__``, where nobody could catch it.

    Example:
        >>> class Broken:
        ...     def shutdown(self):
        ...         raise RuntimeError("half-built")
        >>> shutdown_quietly(Broken())  # nothing raised
    """
    with contextlib.suppress(Exception):
        collector.shutdown()


def join_threads(threads: Iterable[Any], timeout: float = 2.0) -> list[Any]:
    """Join threads (or processes) within one shared ``timeout``; returns those still alive.

    Example:
        >>> import threading
        >>> t = threading.Thread(target=lambda: None)
        >>> t.start()
        >>> join_threads([t], timeout=1.0)
        []
    """
    threads = list(threads)
    deadline = time.monotonic() + timeout
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    return [thread for thread in threads if thread.is_alive()]


def end_processes(procs: Iterable[Any], timeout: float = 2.0) -> None:
    """Wait ``timeout`` seconds in all for processes to exit, then terminate and at
    last kill the stragglers, and release every process object.

    Callers first ask the processes to stop (an event, a message) so that most exit
    on their own within ``timeout``.

    Example:
        >>> import multiprocessing as mp, time
        >>> proc = mp.get_context("fork").Process(target=time.sleep, args=(60,))
        >>> proc.start()
        >>> end_processes([proc], timeout=0.1)  # it sleeps on: terminated
        >>> mp.active_children()
        []
    """
    procs = list(procs)
    for proc in join_threads(procs, timeout):
        proc.terminate()
        proc.join(0.5)
        if proc.is_alive():
            proc.kill()
            proc.join(0.5)
    for proc in procs:
        with contextlib.suppress(Exception):  # a process that never started
            proc.close()


def close_envs(envs: Iterable[Any]) -> None:
    """Close every env not closed yet; one env failing to close does not stop the rest.

    Example:
        >>> from rlpace.collectors.testing import CountingEnv
        >>> envs = [CountingEnv(), CountingEnv()]
        >>> close_envs(envs)
        >>> [env.is_closed for env in envs]
        [True, True]
    """
    for env in envs:
        with contextlib.suppress(Exception):
            if not env.is_closed:
                env.close()


def close_quietly(resources: Iterable[Any]) -> None:
    """``close()`` each resource (pipe ends, transports), ignoring ones already gone.

    Example:
        >>> import multiprocessing as mp
        >>> reader, writer = mp.Pipe(duplex=False)
        >>> close_quietly([reader, writer, reader])
        >>> reader.closed
        True
    """
    for resource in resources:
        with contextlib.suppress(Exception):
            resource.close()
