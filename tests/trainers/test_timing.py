"""timeit: aggregation, decorator use, thread safety, reporting."""

from __future__ import annotations

import threading
import time

import pytest

from rlpace.trainers import timeit


@pytest.fixture(autouse=True)
def _clean_table():
    timeit.reset()
    yield
    timeit.reset()


def test_context_manager_aggregates_count_total_mean_max():
    for pause in (0.001, 0.004):
        with timeit("t/sleep"):
            time.sleep(pause)
    s = timeit.stats()["t/sleep"]
    assert s.count == 2
    assert s.max_s >= 0.004
    assert s.total_s >= 0.005
    assert s.mean_s == pytest.approx(s.total_s / 2)
    assert s.max_s <= s.total_s


def test_decorator_times_each_call_and_keeps_the_function():
    @timeit("t/fn")
    def add(a, b=1):
        """Adds."""
        return a + b

    assert [add(1), add(2, b=5)] == [2, 7]
    assert add.__doc__ == "Adds."
    assert timeit.stats()["t/fn"].count == 2


def test_decorator_counts_calls_that_raise():
    @timeit("t/raises")
    def boom():
        raise RuntimeError("x")

    with pytest.raises(RuntimeError):
        boom()
    assert timeit.stats()["t/raises"].count == 1


def test_concurrent_threads_lose_no_update():
    per_thread, threads = 2000, 4

    def work():
        for _ in range(per_thread):
            with timeit("t/threads"):
                pass

    pool = [threading.Thread(target=work) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    assert timeit.stats()["t/threads"].count == per_thread * threads


def test_table_and_scalars_list_every_name():
    with timeit("t/a"):
        pass
    with timeit("t/b"):
        pass
    table = timeit.table().splitlines()
    assert [line.split()[0] for line in table] == ["name", "t/a", "t/b"]
    scalars = timeit.scalars(prefix="x/")
    assert scalars["x/t/a/count"] == 1.0
    assert set(scalars) == {
        f"x/t/{n}/{f}" for n in "ab" for f in ("count", "total_s", "mean_s", "max_s")
    }


def test_reset_keeps_existing_timers_working():
    timer = timeit("t/kept")
    with timer:
        pass
    timeit.reset()
    assert "t/kept" not in timeit.stats()
    with timer:
        pass
    assert timeit.stats()["t/kept"].count == 1


def test_empty_name_is_refused_with_the_fix():
    with pytest.raises(ValueError, match="non-empty str name"):
        timeit("")
