"""The Python calls of a case's other threads: counted from the measuring thread, for the
measurement only, and judged as the worker processes' are.

Each measuring runs in a fresh process (``fixtures/worker_probe.py``, its ``thread-``
variants): the worker is a thread the process started before the measurement, as a
threaded collector's env threads are.
"""

from __future__ import annotations

import sys
import threading

import pytest
from tests.bench.fixtures.worker_probe import run as run_probe

from rlpace.bench.work_counts.threads import (
    ThreadCalls,
    ThreadsNotCounted,
    newest_thread,
    threads_countable,
)
from rlpace.bench.work_counts.verdict import ANCHORS_MIN, WORKERS_PREFIX, compare_work_counts

CHECK = "fixtures/worker_probe.py:_check"
NOT_QUIET = "not counted: the workers did not go quiet within 2 s between calls"


@pytest.fixture(scope="module")
def plain() -> dict:
    return run_probe("thread-plain", 0)


def test_a_threads_calls_count_the_same_whatever_the_phase(plain):
    again = run_probe("thread-plain", 5)
    assert plain["workers"] == plain["worker_threads"] == 1
    assert len(set(plain["worker_py_calls"])) > 1  # the total follows the episodes
    steady = plain["worker_names"]["steady"]
    assert steady == again["worker_names"]["steady"]
    assert steady["fixtures/worker_probe.py:_step"] == 16  # once a step, 16 steps a call
    assert compare_work_counts("t", again, plain).verdict == "same"


def _regression_in_the_workers(head: dict, base: dict):
    """The work change of ``head`` against ``base``, checked to be the workers' calls'
    regression, and its functions moved: name -> (base, head)."""
    change = compare_work_counts("t", head, base)
    assert change.verdict == "regression" and change.moved == ("worker_py_calls",)
    return change, {name: (before, now) for name, before, now in change.names}


def test_a_check_a_thread_runs_is_flagged_and_named(plain):
    change, moved = _regression_in_the_workers(run_probe("thread-check", 3), plain)
    assert moved[WORKERS_PREFIX + CHECK] == (0.0, 16.0)
    assert change.summary().endswith(f"; the workers call {CHECK} 0 → 16 times a call")


@pytest.fixture(scope="module")
def ragged() -> dict:
    return run_probe("thread-ragged", 0)


def test_where_the_steps_a_call_vary_nothing_is_steady_but_the_work_is_rated(ragged):
    again = run_probe("thread-ragged", 5)
    names = ragged["worker_names"]
    assert len(names["steady"]) < ANCHORS_MIN  # the steady calls cannot be judged
    step = "fixtures/worker_probe.py:_step"
    assert step in names["unsteady"] and step in names["rated"]
    assert "fixtures/worker_probe.py:_reset" not in names["rated"]  # it follows the episodes
    assert names["rated"][step] != again["worker_names"]["rated"][step]  # another pace
    assert compare_work_counts("t", again, ragged).verdict == "same"
    assert compare_work_counts("t", ragged, again).verdict == "same"


def test_a_check_is_flagged_where_nothing_is_steady_at_the_bases_pace(ragged):
    head = run_probe("thread-ragged-check", 3)
    _, moved = _regression_in_the_workers(head, ragged)
    base_steps = ragged["worker_names"]["rated"]["fixtures/worker_probe.py:_step"]
    assert moved[WORKERS_PREFIX + CHECK] == (0.0, round(base_steps, 1))
    gone = compare_work_counts("t", ragged, head)  # the check taken out
    assert gone.verdict == "improvement"
    assert {name for name, _, _ in gone.names} >= {WORKERS_PREFIX + CHECK}


def test_threads_that_come_and_go_leave_the_steady_calls_as_they_were(plain):
    # one counted thread ends mid-measurement, one started mid-measurement is not counted;
    # the polling one follows the clock, so none of its calls is steady
    counts = run_probe("thread-comings", 0)
    assert counts["workers"] == counts["worker_threads"] == 2
    assert "fixtures/worker_probe.py:_idle" in counts["worker_names"]["unsteady"]
    assert counts["worker_names"]["steady"] == plain["worker_names"]["steady"]
    assert compare_work_counts("t", counts, plain).verdict == "same"


def test_a_thread_that_never_goes_quiet_is_dropped_and_the_worker_process_still_counted():
    counts = run_probe("busy-thread", 0)
    assert counts["worker_threads"].startswith(NOT_QUIET)
    assert counts["workers"] == 1  # the process
    assert counts["worker_names"]["steady"] == run_probe("plain", 2)["worker_names"]["steady"]


def test_no_other_thread_means_nothing_to_count():
    if threading.active_count() > 1:  # a thread some other test left running
        pytest.skip("this test session runs other threads")
    assert ThreadCalls.start() is None


def test_another_interpreter_is_told_why_not(monkeypatch):
    monkeypatch.setattr(sys, "version_info", (3, 12, 1, "final", 0))
    assert threads_countable() == (
        "counting other threads needs CPython 3.11 (its _PyEval_SetProfile), got cpython 3.12"
    )
    stop = threading.Event()
    other = threading.Thread(target=stop.wait, daemon=True)
    other.start()
    try:
        with pytest.raises(ThreadsNotCounted, match="needs CPython 3.11"):
            ThreadCalls.start()
    finally:
        stop.set()
        other.join()


def _raise_it(i: int) -> None:
    raise ValueError(i)


def test_exceptions_in_a_counted_thread_reach_their_handlers():
    # the counter runs inside the thread's calls, between a raise and its handler
    jobs, caught = threading.Event(), []

    def work():
        jobs.wait()
        for i in range(50):
            try:
                _raise_it(i)
            except ValueError as exc:
                caught.append(exc.args[0])

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    counting = ThreadCalls.start()
    try:
        jobs.set()
        worker.join(10)
        names = counting.names()
    finally:
        counting.stop()
    assert caught == list(range(50))
    assert names["bench/test_thread_counts.py:_raise_it"] == 50


def test_without_a_compiler_the_threads_are_said_not_counted(monkeypatch, tmp_path):
    from rlpace.bench.work_counts import threads

    monkeypatch.setattr(threads, "_COUNTER", None)
    monkeypatch.setattr(threads.shutil, "which", lambda name: None)
    assert threads_countable() == (
        "counting other threads needs gcc to build its profile function (apt-get install gcc)"
    )


def test_a_counter_that_does_not_build_is_said_so(monkeypatch, tmp_path):
    from rlpace.bench.work_counts import threads

    broken = tmp_path / "counter.c"
    broken.write_text("this is not C\n")
    monkeypatch.setenv("RLPACE_COUNT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(threads, "_COUNTER", None)
    monkeypatch.setattr(threads, "COUNTER_SOURCE", broken)
    why = threads_countable()
    assert why.startswith("the threads' profile function could not be built: gcc could not ")
    assert "counter.c" in why
    assert list((tmp_path / "cache").glob("*")) == []  # nothing half-written is kept


def _older(n: int) -> int:
    return n


def _newer(n: int) -> int:
    return n


def test_threads_started_before_the_mark_are_left_out():
    # a case's threads start after the plugin's mark; those earlier cases left are not its
    go = threading.Event()

    def work(fn):
        go.wait()
        for i in range(10):
            fn(i)

    older = threading.Thread(target=work, args=(_older,), daemon=True)
    older.start()
    mark = newest_thread()
    newer = threading.Thread(target=work, args=(_newer,), daemon=True)
    newer.start()
    counting = ThreadCalls.start(since=mark)
    try:
        assert counting.workers == 1
        go.set()
        older.join(10)
        newer.join(10)
        names = counting.names()
    finally:
        counting.stop()
    assert names["bench/test_thread_counts.py:_newer"] == 10
    assert "bench/test_thread_counts.py:_older" not in names
