"""The injected slowdown (``RLPACE_BENCH_SLOWDOWN``) honoured by ``Case.make``."""

from __future__ import annotations

import time

import pytest

from rlpace.bench import suite as suite_module
from rlpace.bench.suite import SLOWDOWN_ENV, Case, Timed, parse_slowdown, slowdown_for


def _sleeper(seconds: float):
    def setup(impl, n):
        return Timed(lambda: time.sleep(seconds), items=n, unit="naps", extra_info={"k": 1})

    return Case("test_nap", setup, {"impl": ("rlpace", "torchrl"), "n": (4,)})


def _min_call(fn, calls=8):
    """The fastest of a few calls: preemption on a shared machine only ever adds time."""
    best = float("inf")
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def test_matching_case_takes_one_plus_fraction_as_long(monkeypatch):
    c = _sleeper(0.01)
    monkeypatch.delenv(SLOWDOWN_ENV, raising=False)
    plain = _min_call(c.make(impl="rlpace", n=4).fn)
    monkeypatch.setenv(SLOWDOWN_ENV, "test_nap[rlpace=0.5")
    timed = c.make(impl="rlpace", n=4)
    slowed = _min_call(timed.fn)
    assert 1.3 < slowed / plain < 3.0
    assert timed.extra_info == {"k": 1, "injected_slowdown": 0.5}
    assert timed.items == 4 and timed.unit == "naps"


def test_spin_lasts_exactly_the_fraction_of_the_call(monkeypatch):
    """With a clock that ticks one microsecond per read, the spin length is exact."""
    ticks = {"t": 0}

    def clock():
        ticks["t"] += 1
        return ticks["t"] * 1e-6

    def work():
        ticks["t"] += 99  # the call itself lasts 100 ticks between the two reads

    monkeypatch.setattr(suite_module.time, "perf_counter", clock)
    monkeypatch.setenv(SLOWDOWN_ENV, "test_work=0.25")
    timed = Case("test_work", lambda: work, {}).make()
    ticks["t"] = 0  # make() measured the wrapper's own cost on this clock: 3 reads a call
    timed.fn()
    # 1 (start) + 99 (work) + 1 (end) = 101; then spin until end + 0.25 * 100 - 3 = 123,
    # so the call lasts 123 ticks against the bare 99 + the caller's reads: 1.25x (one
    # more read when the float deadline rounds just above tick 123)
    assert ticks["t"] in (123, 124)


def test_long_waits_sleep_most_of_the_way(monkeypatch):
    slept = []
    monkeypatch.setattr(suite_module.time, "sleep", slept.append)
    monkeypatch.setenv(SLOWDOWN_ENV, "test_nap=1.0")
    timed = Case("test_nap", lambda: lambda: time.sleep(0) or _busy(0.01), {}).make()
    start = time.perf_counter()
    timed.fn()
    assert len(slept) == 2 and slept[0] == 0  # the call's own sleep(0), then the wait
    assert 0.008 < slept[1] < 0.1
    assert time.perf_counter() - start >= 0.01


def _busy(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_other_cases_are_untouched(monkeypatch):
    monkeypatch.setenv(SLOWDOWN_ENV, "test_nap[rlpace=0.5")
    c = _sleeper(0.001)
    timed = c.make(impl="torchrl", n=4)
    assert "injected_slowdown" not in timed.extra_info
    assert not hasattr(timed.fn, "__wrapped__")


def test_wrapped_call_returns_the_result(monkeypatch):
    monkeypatch.setenv(SLOWDOWN_ENV, "test_value=1")
    c = Case("test_value", lambda: lambda: 42, {})
    timed = c.make()
    assert timed.fn() == 42 and timed.extra_info["injected_slowdown"] == 1.0


def test_glob_and_substring_patterns():
    assert slowdown_for("test_rb_sample[rlpace-64]", "test_rb_*=0.1") == 0.1
    assert slowdown_for("test_rb_sample[rlpace-64]", "rb_sample[rlpace=0.2") == 0.2
    assert slowdown_for("test_rb_sample[torchrl-64]", "rb_sample[rlpace=0.2") == 0.0
    assert slowdown_for("test_rb_sample[rlpace-64]", "*[rlpace-64]=0.3") == 0.3
    assert slowdown_for("test_x", "test_=0.1,test_x=0.4") == 0.4  # last match wins


@pytest.mark.parametrize("bad", ["test_x", "=0.1", "test_x=fast", "test_x=-0.1"])
def test_malformed_spec_says_what_is_expected(bad):
    with pytest.raises(ValueError, match="PATTERN=FRACTION") as info:
        parse_slowdown(bad)
    assert repr(bad) in str(info.value)


def test_cpu_timed_cases_are_slowed_on_cpu_time(monkeypatch):
    import time

    from rlpace.bench.suite import Case

    def busy():
        end = time.process_time() + 0.02
        while time.process_time() < end:
            pass

    monkeypatch.setenv(SLOWDOWN_ENV, "test_cpu=0.5")
    slowed = Case("test_cpu", lambda: busy, {}, timer="cpu").make().fn
    start = time.process_time()
    slowed()
    spent = time.process_time() - start
    # 20 ms of CPU work and half as much again, spun (a sleep would cost no CPU time)
    assert 0.029 < spent < 0.045
    with pytest.raises(ValueError, match="timer='gpu'; expected one of"):
        Case("test_x", lambda: busy, {}, timer="gpu")


@pytest.fixture
def cpu_reads(monkeypatch):
    """How often the CPU clock has been read since the test began (``reads["cpu"]``)."""
    reads = {"cpu": 0}
    real_process_time = time.process_time

    def counting_process_time():
        reads["cpu"] += 1
        return real_process_time()

    monkeypatch.setattr(suite_module.time, "process_time", counting_process_time)
    return reads


def test_a_quick_cpu_timed_case_is_timed_and_spun_on_the_wall_clock(monkeypatch, cpu_reads):
    """After first calls under 50 us, a CPU-timed case stops reading the CPU clock."""
    reads = cpu_reads
    monkeypatch.setenv(SLOWDOWN_ENV, "test_quick=0.1")
    c = Case("test_quick", lambda: lambda: None, {}, timer="cpu")
    timed = c.make()
    for _ in range(suite_module._DECIDING_CALLS):
        timed.fn()  # the fastest of the first calls decides, on the CPU clock
    before = reads["cpu"]
    for _ in range(100):
        timed.fn()
    assert reads["cpu"] == before
    monkeypatch.setenv(SLOWDOWN_ENV, "test_slow=0.1")
    slow = Case("test_slow", lambda: lambda: _busy(0.002), {}, timer="cpu").make()
    for _ in range(suite_module._DECIDING_CALLS):
        slow.fn()
    before = reads["cpu"]
    slow.fn()
    assert reads["cpu"] > before  # a call of milliseconds stays on the CPU clock


def test_a_cold_first_call_does_not_keep_a_quick_case_on_the_cpu_clock(monkeypatch, cpu_reads):
    """A first call slowed by a cold start (here 200 us of CPU) does not decide alone."""
    reads = cpu_reads
    calls = {"n": 0}

    def cold_then_quick():
        calls["n"] += 1
        if calls["n"] == 1:
            _busy(0.0002)

    monkeypatch.setenv(SLOWDOWN_ENV, "test_cold=0.1")
    timed = Case("test_cold", lambda: cold_then_quick, {}, timer="cpu").make()
    for _ in range(suite_module._DECIDING_CALLS):
        timed.fn()
    before = reads["cpu"]
    for _ in range(100):
        timed.fn()
    assert reads["cpu"] == before
