"""``BatchStepper``: the gate that times ``test_trainer_overhead`` one batch per call.

The stepper lives in the benchmark module (the suite's cases must stay importable on
their own); it is loaded here by path under a private name.
"""

from __future__ import annotations

import importlib.util
import threading
from pathlib import Path

import pytest

_PATH = Path(__file__).parents[1] / "benchmarks" / "test_trainers.py"


@pytest.fixture(scope="module")
def stepper_cls():
    spec = importlib.util.spec_from_file_location("_overhead_stepper_under_test", _PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.BatchStepper


def counting_loop(log, stop_after=None, fail_at=None):
    def loop(gate):
        try:
            batch = 0
            while stop_after is None or batch < stop_after:
                batch += 1
                if batch == fail_at:
                    raise ValueError(f"env exploded in batch {batch}")
                log.append(batch)
                gate("trainer", "payload")  # hook-style arguments are ignored
        finally:
            log.append("finally")

    return loop


def test_each_step_runs_exactly_one_batch_after_the_warm_up(stepper_cls):
    log = []
    stepper = stepper_cls(counting_loop(log), name="count")
    try:
        assert log == [1]  # the constructor ran the warm-up batch
        for _ in range(3):
            stepper.step()
        assert log == [1, 2, 3, 4]
    finally:
        stepper.close()
    assert log[-1] == "finally"
    assert not stepper._thread.is_alive()


def test_close_stops_the_loop_at_its_gate_and_is_idempotent(stepper_cls):
    log = []
    stepper = stepper_cls(counting_loop(log), name="close")
    stepper.close()
    stepper.close()
    assert log == [1, "finally"]  # no batch past the gate, the loop's cleanup ran
    assert not any(t.name == "close" for t in threading.enumerate())


def test_an_error_in_the_loop_reaches_the_caller_of_step(stepper_cls):
    log = []
    stepper = stepper_cls(counting_loop(log, fail_at=3), name="fail")
    stepper.step()
    with pytest.raises(ValueError, match="env exploded in batch 3"):
        stepper.step()
    assert log == [1, 2, "finally"]
    stepper.close()  # nothing left to stop: returns at once
    assert not stepper._thread.is_alive()


def test_an_error_in_the_warm_up_batch_reaches_the_constructor(stepper_cls):
    log = []
    with pytest.raises(ValueError, match="batch 1"):
        stepper_cls(counting_loop(log, fail_at=1), name="warmup")
    assert log == ["finally"]


def test_a_loop_that_ends_on_its_own_is_an_error_not_a_hang(stepper_cls):
    log = []
    stepper = stepper_cls(counting_loop(log, stop_after=2), name="short")
    stepper.step()
    with pytest.raises(RuntimeError, match="short: the loop ended before it was stopped"):
        stepper.step()
    stepper.close()
