"""How the suite plugin sizes the rounds of a wall-clock case (``suite.size_rounds``).

Driven by a scripted clock: each call of the case advances it by the next cost, so
the figures are exact and do not depend on the machine's load.
"""

from __future__ import annotations

import itertools

import pytest

from rlpace.bench.suite import size_rounds


class ScriptedCase:
    """A case whose calls cost the scripted seconds, in a cycle, on its own clock."""

    def __init__(self, *costs: float) -> None:
        self.now = 0.0
        self.costs = itertools.cycle(costs)
        self.calls = 0

    def clock(self) -> float:
        return self.now

    def __call__(self) -> None:
        self.now += next(self.costs)
        self.calls += 1


def test_steady_calls_fill_max_time_one_call_a_round():
    fn = ScriptedCase(0.010)
    rounds, iterations = size_rounds(fn, max_time=0.25, min_rounds=5, clock=fn.clock)
    assert (rounds, iterations) == (25, 1)
    assert fn.calls == 7  # the sizing window: a quarter of max_time


def test_slow_calls_still_get_min_rounds():
    fn = ScriptedCase(0.5)
    assert size_rounds(fn, max_time=0.25, min_rounds=5, clock=fn.clock) == (5, 1)
    assert fn.calls == 3  # at least three calls, however slow


def test_calls_shorter_than_min_time_are_looped():
    fn = ScriptedCase(0.000_01)
    rounds, iterations = size_rounds(
        fn, max_time=0.25, min_rounds=5, min_time=0.000_05, clock=fn.clock
    )
    assert iterations == 5 and rounds * iterations * 0.000_01 == pytest.approx(0.25)


def test_queued_results_size_from_the_mean_not_the_fastest_call():
    """Three batches ready (0.1 ms each), then a 40 ms wait, as an async collector does.
    Sized from the fastest call (pytest-benchmark's way) this is 2,500 rounds, ~26 s."""
    costs = (0.000_1, 0.000_1, 0.000_1, 0.040)
    fn = ScriptedCase(*costs)
    rounds, iterations = size_rounds(fn, max_time=0.25, min_rounds=5, clock=fn.clock)
    mean = sum(costs) / len(costs)
    # four times max_time of rounds (their medians vary with the phase), not 26 s
    assert 4 * 0.25 <= rounds * iterations * mean < 4 * 0.25 + iterations * mean
    # each round spans several waits: at least four full cycles of four calls
    assert iterations >= 4 * len(costs) and rounds >= 5


def test_noisy_but_steady_calls_are_not_grouped():
    fn = ScriptedCase(0.010, 0.012, 0.009, 0.011, 0.014)
    _, iterations = size_rounds(fn, max_time=0.25, min_rounds=5, clock=fn.clock)
    assert iterations == 1


def test_a_wall_clock_floor_raises_few_slow_rounds_within_its_seconds():
    """Five rounds of a 50 ms call fill 0.25 s; their median, at 8-10 % from round to
    round, was most of a multi-process case's process-to-process spread."""
    fn = ScriptedCase(0.050)
    assert size_rounds(fn, max_time=0.25, min_rounds=5, clock=fn.clock) == (5, 1)
    fn = ScriptedCase(0.050)
    assert size_rounds(fn, max_time=0.25, min_rounds=5, clock=fn.clock, floor=(20, 1.0)) == (
        20,
        1,
    )
    # as many as fit in the floor's seconds: 1 s of 100 ms rounds is 10, not 20
    fn = ScriptedCase(0.100)
    assert size_rounds(fn, max_time=0.25, min_rounds=5, clock=fn.clock, floor=(20, 1.0)) == (
        10,
        1,
    )
    # never fewer than max_time gave: a 0.5 s call keeps its min_rounds
    fn = ScriptedCase(0.5)
    assert size_rounds(fn, max_time=0.25, min_rounds=5, clock=fn.clock, floor=(20, 1.0)) == (5, 1)


def test_the_floor_leaves_cases_with_enough_rounds_alone():
    for cost in (0.010, 0.001):
        plain, floored = ScriptedCase(cost), ScriptedCase(cost)
        assert size_rounds(plain, max_time=0.25, min_rounds=5, clock=plain.clock) == size_rounds(
            floored, max_time=0.25, min_rounds=5, clock=floored.clock, floor=(20, 1.0)
        )


def test_the_floor_counts_rounds_of_looped_calls():
    """Calls that hand over queued work are looped; the floor's seconds cover whole rounds."""
    costs = (0.000_1, 0.000_1, 0.000_1, 0.040)
    plain, floored = ScriptedCase(*costs), ScriptedCase(*costs)
    rounds, iterations = size_rounds(plain, max_time=0.05, min_rounds=5, clock=plain.clock)
    assert rounds == 5  # each round loops 4+ calls, ~0.16 s: max_time's rounds are min_rounds
    up, same = size_rounds(
        floored, max_time=0.05, min_rounds=5, clock=floored.clock, floor=(20, 2.0)
    )
    mean = sum(costs) / len(costs)
    assert same == iterations and 5 < up <= 20 and up * iterations * mean <= 2.0
