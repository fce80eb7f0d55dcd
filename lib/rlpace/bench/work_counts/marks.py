"""The marks of a measurement's worker processes and threads, taken together.

:func:`~rlpace.bench.work_counts.measure.measure_work_counts` reads the calls the
case's forked workers (:mod:`~rlpace.bench.work_counts.workers`) and its own threads
(:mod:`~rlpace.bench.work_counts.threads`) made from one quiet moment to the next: a
mark before the first measured call and after each. :class:`WorkerMarks` keeps both
sides' totals and calls per function at every mark, so that threads that never go
quiet can be dropped without losing the processes' counts.

Example:
    >>> WorkerMarks(None, None).workers  # what start() gives for a case with none: None
    0
"""

from __future__ import annotations

import time

from rlpace.bench.work_counts.threads import ThreadCalls, ThreadsNotCounted
from rlpace.bench.work_counts.workers import (
    IDLE_JITTER_S,
    WorkerCalls,
    WorkersNotCounted,
    wait_quiet,
)

__all__ = ["WorkerMarks", "stopped"]


class WorkerMarks:
    """The case's forked worker processes and its other threads, counted together: a
    mark is their calls so far, once all of them are quiet, with the calls per
    function; every other mark idles :data:`IDLE_JITTER_S` more first (see
    :func:`~rlpace.bench.work_counts.workers.wait_quiet`).

    Threads that never go quiet (a poller of a library's, left running) do not cost the
    processes their counts: the threads are dropped, with the reason in
    :attr:`threads_dropped`, and the marks so far kept for the processes alone.

    Example:
        >>> import queue, threading
        >>> jobs, done = queue.Queue(), queue.Queue()
        >>> def serve():
        ...     while (n := jobs.get()) is not None:
        ...         done.put([abs(i) for i in range(n)])
        >>> from rlpace.bench.work_counts.threads import newest_thread
        >>> since = newest_thread()
        >>> worker = threading.Thread(target=serve, daemon=True); worker.start()
        >>> counting = WorkerMarks(None, ThreadCalls.start(since))  # start(since), threads only
        >>> counting.workers, counting.threads.workers
        (1, 1)
        >>> counting.mark(); jobs.put(10); _ = done.get(); counting.mark()
        >>> before, after = counting.marks()
        >>> after[0] - before[0]  # the list and 10 abs
        11
        >>> counting.stop(); jobs.put(None); worker.join()
    """

    def __init__(self, processes: WorkerCalls | None, threads: ThreadCalls | None) -> None:
        self.processes, self.threads = processes, threads
        self.threads_dropped = ""
        self._marks: list[tuple[tuple[int, dict[str, int]], tuple[int, dict[str, int]]]] = []

    @classmethod
    def start(cls, threads_since: int = 0) -> WorkerMarks | None:
        """Start counting both (None: the case has neither)."""
        processes = WorkerCalls.start()
        dropped = ""
        try:
            threads = ThreadCalls.start(threads_since)
        except ThreadsNotCounted as exc:  # not CPython 3.11: the processes still count
            if processes is None:
                raise
            threads, dropped = None, f"not counted: {exc}"
        except BaseException:
            stopped(processes)
            raise
        if processes is None and threads is None:
            return None
        counting = cls(processes, threads)
        counting.threads_dropped = dropped
        return counting

    @property
    def workers(self) -> int:
        """How many worker processes and threads are counted."""
        return sum(c.workers for c in (self.processes, self.threads) if c is not None)

    def _now(self) -> list[int]:
        return [n for c in (self.processes, self.threads) if c is not None for n in c.now()]

    def mark(self) -> None:
        """Wait until every worker is quiet and keep what each side counted so far.

        Raises:
            WorkersNotCounted: the workers did not go quiet (the processes, or the
                threads where there are no processes), or a process ended.
        """
        if len(self._marks) % 2 == 1:
            time.sleep(IDLE_JITTER_S)
        try:
            wait_quiet(self._now)
        except WorkersNotCounted as exc:
            if self.processes is None or self.threads is None:
                raise
            wait_quiet(self.processes.now)  # the processes alone are quiet: drop the threads
            self.threads = stopped(self.threads)
            self.threads_dropped = f"not counted: {exc}"
        sides = []
        for counting in (self.processes, self.threads):
            if counting is None:
                sides.append((0, {}))
                continue
            total = sum(counting.now())
            if counting is self.processes:
                self.processes.check_alive()
            sides.append((total, counting.names()))
        self._marks.append((sides[0], sides[1]))

    def marks(self) -> list[tuple[int, dict[str, int]]]:
        """Each mark's total and calls per function, over the sides still counted."""
        out = []
        for (p_total, p_names), (t_total, t_names) in self._marks:
            if self.threads is None:
                out.append((p_total, dict(p_names)))
                continue
            names = dict(p_names)
            for label, n in t_names.items():
                names[label] = names.get(label, 0) + n
            out.append((p_total + t_total, names))
        return out

    def stop(self) -> None:
        """Turn every counter off."""
        for counting in (self.threads, self.processes):
            if counting is not None:
                counting.stop()


def stopped(children: WorkerCalls | ThreadCalls | WorkerMarks | None) -> None:
    """Turn the workers' counters off (None: none were on); always None.

    Example:
        >>> stopped(None) is None
        True
    """
    if children is not None:
        children.stop()
    return None
