"""Work counts of the CPU set's wall-clock cases as asv ``track_*`` series.

The count tier (``counts``) gives the cases it counts a noise-free history; the cases
it leaves on the wall clock (workers, threads, waits) get theirs here: the aten ops and
Python-level calls their calling thread makes per call
(:mod:`rlpace.bench.work_counts`). Building a collector spawns its workers, so one
asv process per case and metric would cost minutes per commit; instead one class's
``setup_cache`` builds each such case once, counts its calls
(:func:`rlpace.bench.work_counts.measure.measure_work_counts`, on the CPU alone) and
tears it down, and asv hands the result to ``track_ops`` / ``track_py_calls``. For a
case whose forked workers or other threads are counted
(:mod:`rlpace.bench.work_counts.workers`, :mod:`rlpace.bench.work_counts.threads`),
``track_worker_calls`` is the calls a call of the functions they call equally often
in every call: the part of their work that repeats exactly from commit to commit
(their total follows where the episodes end), when 8 or more functions are steady
(the pull request's guard; with fewer, which are steady is chance and the series
flipped between 0 and 8 calls with the code unchanged).

A commit whose rlpace has no work counts skips these benchmarks and says why, as does
a case that could not be built or counted.
"""

from __future__ import annotations

from benchmarks._adapter import _skip, cases, claimed_by_count_tier, per_commit_ids


def _on_the_clock() -> list[tuple[object, dict]]:
    """``(case, params)`` of every parameter set of the CPU set the count tier leaves
    to the clock."""
    found = []
    for c in cases():
        if c.in_set("cpu"):
            found += [(c, p) for p in c.grid("cpu") if not claimed_by_count_tier(c, p)]
    return found


def _clock_ids() -> list[str]:
    """Test ids of the cases :func:`_on_the_clock` finds."""
    return [c.test_id(**p) for c, p in _on_the_clock()]


def _workers_counted() -> bool:
    """Count the workers of the cases built from now on, where this commit's rlpace can."""
    try:
        from rlpace.bench.work_counts.workers import install
    except ImportError:  # an older rlpace: its workers are not counted
        return False
    return install() == ""


def _anchors_min() -> int:
    """How many functions must be steady before the workers' steady calls mean
    anything (the pull request's guard, ``ANCHORS_MIN``; 8 before it had a name)."""
    try:
        from rlpace.bench.work_counts.verdict import ANCHORS_MIN
    except ImportError:
        return 8
    return int(ANCHORS_MIN)


def _newest_thread() -> int:
    """The newest thread's mark, where this commit's rlpace counts threads (else 0)."""
    try:
        from rlpace.bench.work_counts.threads import newest_thread
    except ImportError:
        return 0
    return newest_thread()


def _count(c, params: dict, workers: bool = False) -> dict:
    """The median work per call of one case, built, warmed up, counted, torn down; with
    ``workers``, the steady calls of its forked workers and other threads too
    (``worker_steady_calls``)."""
    import torch

    from rlpace.bench.work_counts.measure import measure_work_counts
    from rlpace.bench.work_counts.verdict import describe_counts

    torch.set_num_threads(1)
    since = _newest_thread() if workers else 0
    timed = c.make(**params)
    try:
        timed.fn()
        extra = {"workers": True} if workers else {}
        if since:  # only the threads this case started, not those earlier cases left
            extra["threads_since"] = since
        measured = measure_work_counts(timed.fn, cuda=False, **extra)
        out = describe_counts(measured)
        steady = (measured.get("worker_names") or {}).get("steady")
        least = _anchors_min()
        if steady is not None and len(steady) >= least:
            out["worker_steady_calls"] = sum(steady.values())
        elif steady is not None:  # a sleep-bound row: which functions are steady is chance
            out["worker_unsteady"] = (
                f"{len(steady)} of its workers' functions were steady, fewer than the "
                f"{least} the pull request's work counts ask before they judge"
            )
        return out
    finally:
        if timed.teardown is not None:
            timed.teardown()


class Work:
    """Aten ops and Python calls per call of every wall-clock case of the CPU set, and
    the steady calls of its forked workers and other threads."""

    params = [per_commit_ids("work", _clock_ids) or ["none"]]
    param_names = ["case"]
    timeout = 1800  # every wall-clock case built and counted, in setup_cache

    def setup_cache(self):
        try:
            import rlpace.bench.work_counts.measure  # noqa: F401
        except ImportError:
            return {"unavailable": "this commit's rlpace has no work counts"}
        counts, not_counted = {}, {}
        workers = _workers_counted()  # before any case forks
        for c, params in _on_the_clock():
            test_id = c.test_id(**params)
            try:
                counts[test_id] = _count(c, params, workers)
            except Exception as exc:  # a skip, or a case broken at this commit
                not_counted[test_id] = f"{type(exc).__name__}: {exc}"[:300]
        return {"counts": counts, "not_counted": not_counted}

    def setup(self, data, case):
        if "unavailable" in data:
            raise NotImplementedError(data["unavailable"])
        if case not in data["counts"]:
            raise NotImplementedError(data["not_counted"].get(case, "not in this commit's suite"))

    def track_ops(self, data, case):
        return data["counts"][case]["ops"]

    track_ops.unit = "aten ops"

    def track_py_calls(self, data, case):
        value = data["counts"][case].get("py_calls")
        if value is None:
            # only setup may raise NotImplementedError: in a track it is a failure
            raise _skip("this commit's rlpace does not count Python calls")
        return value

    track_py_calls.unit = "Python calls"

    def track_worker_calls(self, data, case):
        counted = data["counts"][case]
        value = counted.get("worker_steady_calls")
        if value is None:
            raise _skip(
                counted.get("worker_unsteady")
                or "no worker processes or threads of this case were counted at this commit"
            )
        return value

    track_worker_calls.unit = "worker Python calls"
