"""Benchmark cases, defined once and run by both pytest-benchmark and asv.

A case is a *setup* function decorated with :func:`case`. It receives one value per
parameter, builds everything the measurement needs, and returns the zero-argument
callable to time (or a :class:`Timed` carrying it with a teardown and a throughput
unit). Nothing in this module imports pytest or asv: ``tests/benchmarks/conftest.py``
turns cases into parametrized pytest-benchmark tests and ``asv_bench/benchmarks``
turns the same cases into asv benchmark classes.

Conventions:

- a case with a torchrl twin has ``impl`` = ``("rlpace", "torchrl")`` as its *first*
  parameter, so both run side by side in one run;
- ``gpu=True`` puts the case in the GPU set too: it gets a trailing ``device``
  parameter, ``"cpu"`` in the CPU set and ``"cuda"`` in the GPU set;
- a setup that cannot run here raises :class:`SkipCase` with the reason.

Example:
    >>> from rlpace.bench.suite import case, Timed
    >>> @case(params={"impl": ["rlpace"], "n": [10, 100]})
    ... def test_sum(impl, n):
    ...     data = list(range(n))
    ...     return Timed(lambda: sum(data), items=n, unit="numbers")
    >>> test_sum.__rlpace_case__.param_names
    ('impl', 'n')
    >>> test_sum.__rlpace_case__.make(impl="rlpace", n=10).fn()
    45
"""

from __future__ import annotations

import fnmatch
import itertools
import math
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "PASSES",
    "PASS_ENV",
    "SLOWDOWN_ENV",
    "TIMERS",
    "WALL_ROUNDS_ENV",
    "Case",
    "SkipCase",
    "Timed",
    "case",
    "clock_of",
    "id_matches",
    "parse_slowdown",
    "parse_wall_rounds",
    "registered_cases",
    "size_rounds",
    "slowdown_for",
]

SETS = ("cpu", "gpu")
DEVICE_OF_SET = {"cpu": "cpu", "gpu": "cuda"}

#: Environment variable that injects a known slowdown into chosen cases, e.g.
#: ``RLPACE_BENCH_SLOWDOWN="test_sum=0.1,test_rb_*[rlpace*=0.25"``: every call of a
#: matching case takes ``1 + fraction`` times as long. Used by ``rlpace-bench aa``
#: to measure detection power and by the pipeline's own tests.
SLOWDOWN_ENV = "RLPACE_BENCH_SLOWDOWN"

#: Environment variable with the timed cases' rounds floor, ``ROUNDS:SECONDS`` (the
#: wall-clock cases and the CPU-clock ones declared out of the count tier): such a
#: case takes at least ``ROUNDS`` rounds, as many as fit in ``SECONDS`` when
#: fewer do (``rlpace-bench run`` sets it from ``RunSettings.wall_rounds`` and
#: ``wall_time``; unset: ``max_time`` alone sizes the rounds, as before).
WALL_ROUNDS_ENV = "RLPACE_BENCH_WALL_ROUNDS"

#: Environment variable naming the one pass of ``rlpace-bench pr`` a suite run makes
#: (see :data:`PASSES` and :meth:`Case.pass_for`): the other pass's cases are skipped.
#: It supersedes ``RLPACE_BENCH_TIMER``, which the runner sets beside it for suites
#: from before passes (they then follow the clock alone).
PASS_ENV = "RLPACE_BENCH_PASS"

PASSES: dict[str, str] = {
    "counted": "the CPU-clock cases the count tier claims: timed once a side (pooled over two "
    "duets), for display",
    "timed": "the cases judged on their time: the wall-clock ones and the CPU-clock ones "
    "the count tier leaves out, timed in duets pair by pair",
}
"""The passes of ``rlpace-bench pr`` with the count tier on, and what each runs."""


class SkipCase(Exception):  # noqa: N818 - reads as a statement: "skip case: <reason>"
    """Raised by a case's setup when it cannot run here; the message is the reason.

    Example:
        >>> raise SkipCase("torchrl's prioritized sampler needs its C++ extension")
        Traceback (most recent call last):
        ...
        rlpace.bench.suite.SkipCase: torchrl's prioritized sampler needs its C++ extension
    """


@dataclass
class Timed:
    """What a case's setup returns: the callable to time and how to read one call.

    Attributes:
        fn: the zero-argument callable that is timed.
        teardown: called once after timing (close processes, delete files).
        items: work items done by one call of ``fn`` (frames, tokens, samples); when
            set, reports show a throughput of ``items / time`` in ``unit``/s.
        unit: the name of one item, e.g. ``"frames"``.
        extra_info: stored with the result (pytest-benchmark's ``extra_info``).
        count_calls: calls the count tier measures together and reports per call
            (None: its ``--calls``, 1 by default). For a call of a few thousand
            instructions, whose count moves by a few hundred from process to process
            and also carries the ~5 k instructions of being measured, so that its gate
            can be small; timing ignores it.

    Example:
        >>> t = Timed(lambda: None, items=128, unit="frames")
        >>> t.items, t.unit
        (128, 'frames')
        >>> Timed(lambda: None, count_calls=0)
        Traceback (most recent call last):
        ...
        ValueError: Timed.count_calls: expected None or an integer from 1 to 10000, got 0; fix: e.g. count_calls=100
    """

    fn: Callable[[], Any]
    teardown: Callable[[], None] | None = None
    items: int | None = None
    unit: str = "calls"
    extra_info: dict[str, Any] = field(default_factory=dict)
    count_calls: int | None = None

    def __post_init__(self) -> None:
        calls = self.count_calls
        if calls is not None and not (
            isinstance(calls, int) and not isinstance(calls, bool) and 1 <= calls <= 10_000
        ):
            raise ValueError(
                f"Timed.count_calls: expected None or an integer from 1 to 10000, got "
                f"{calls!r}; fix: e.g. count_calls=100"
            )


@dataclass(frozen=True)
class Case:
    """One benchmark case: a name, its parameter grid, its sets and its setup.

    Attributes:
        name: the test name, ``test_...``, as it appears in result files.
        setup: called with one keyword per parameter; returns a callable or a
            :class:`Timed`, or raises :class:`SkipCase`.
        params: parameter name → values, in id order (``impl`` first when present).
        gpu: whether the case is also in the GPU set (adds the ``device`` parameter).
        module: the module that defined the case.
        timer: ``"wall"`` (elapsed time, the default) or ``"cpu"`` (this process's CPU
            time, all its threads, user and system). CPU time hardly moves when other
            jobs share the cores, so a ``"cpu"`` case stays comparable on a busy
            machine; use it only when all the work runs in this process (no worker
            processes, no waiting on I/O or sleeps). On CUDA a case is always timed on
            the wall clock.
        count: whether the count tier (instructions under Callgrind, see
            ``docs/handbook/counts.md``) claims the case: ``True`` when all its work is
            computation in this process, ``False`` when it runs workers, threads or
            waits; ``None`` (the default) follows ``timer``: counted when ``"cpu"``.
            A claimed case whose call turns out to wait is still reported as not
            counted ("waits"), never given a tiny count. A callable decides per
            parameter set: called with the case's parameters, it returns ``True``
            (counted) or a string saying why not (e.g. ``torch.compile`` kernels that
            Valgrind cannot execute).

    Example:
        >>> c = Case("test_noop", lambda impl: (lambda: None), {"impl": ("rlpace",)})
        >>> list(c.grid("cpu"))
        [{'impl': 'rlpace'}]
    """

    name: str
    setup: Callable[..., Any]
    params: Mapping[str, Sequence[Any]]
    gpu: bool = False
    module: str = ""
    timer: str = "wall"
    count: bool | None | Callable[..., bool | str] = None

    def __post_init__(self) -> None:
        if self.timer not in TIMERS:
            raise ValueError(
                f"case {self.name!r}: timer={self.timer!r}; expected one of {sorted(TIMERS)} "
                "('cpu' only when every bit of the work runs in the benchmark process)"
            )
        if not self.name.startswith("test_"):
            raise ValueError(
                f"benchmark case names start with 'test_' so pytest collects them; got {self.name!r}"
            )
        if "device" in self.params:
            raise ValueError(
                f"case {self.name!r}: 'device' is added by gpu=True; remove it from params"
            )
        for key, values in self.params.items():
            if len(values) == 0:
                raise ValueError(f"case {self.name!r}: parameter {key!r} has no values")

    @property
    def counted(self) -> bool:
        """Whether the count tier claims this case (``count``, else ``timer == "cpu"``).

        Example:
            >>> Case("test_x", lambda: None, {}, timer="cpu").counted
            True
            >>> Case("test_x", lambda: None, {}, timer="cpu", count=False).counted
            False
        """
        if callable(self.count):
            return True
        return self.timer == "cpu" if self.count is None else bool(self.count)

    def count_decision(self, **params: Any) -> str | None:
        """Why the count tier does not claim this parameter set, or None when it does.

        Example:
            >>> def only_eager(mode):
            ...     return mode == "eager" or "compiled kernels are not countable"
            >>> c = Case("test_x", lambda mode: None, {"mode": ["eager", "compile"]},
            ...          timer="cpu", count=only_eager)
            >>> c.count_decision(mode="eager") is None, c.count_decision(mode="compile")
            (True, 'declared: compiled kernels are not countable')
        """
        if params.get("device", "cpu") != "cpu":
            return "runs on an accelerator"
        declared = self.count
        if callable(declared):
            own = {k: v for k, v in params.items() if k in self.params}
            declared = declared(**own)
        elif declared is None:
            declared = self.timer == "cpu"
        if isinstance(declared, str):
            return f"declared: {declared}"
        if not declared:
            return "declared: timed on the wall clock or count=False (workers, threads or waits)"
        return None

    def pass_for(self, **params: Any) -> str:
        """The pass of ``rlpace-bench pr`` that times one combination (:data:`PASSES`):
        ``"counted"`` when the count tier claims it (its counts judge it; its time is
        shown), ``"timed"`` when its time is the judge (the wall clock, a GPU, or a
        CPU-clock case declared out of the count tier, such as ``torch.compile``).

        Example:
            >>> def only_eager(mode):
            ...     return mode == "eager" or "compiled kernels are not countable"
            >>> c = Case("test_x", lambda mode: None, {"mode": ["eager", "compile"]},
            ...          timer="cpu", count=only_eager)
            >>> c.pass_for(mode="eager"), c.pass_for(mode="compile")
            ('counted', 'timed')
            >>> Case("test_y", lambda: None, {}).pass_for()
            'timed'
        """
        counted = self.timer_for(**params) == "cpu" and self.count_decision(**params) is None
        return "counted" if counted else "timed"

    @property
    def param_names(self) -> tuple[str, ...]:
        """Parameter names in id order, ``device`` last for GPU-capable cases."""
        names = tuple(self.params)
        return names + ("device",) if self.gpu else names

    def values(self, set_name: str) -> list[tuple[Any, ...]]:
        """Per-parameter value lists for one set (``cpu`` or ``gpu``)."""
        if set_name not in SETS:
            raise ValueError(f"unknown benchmark set {set_name!r}; expected one of {SETS}")
        vals = [tuple(v) for v in self.params.values()]
        if self.gpu:
            vals.append((DEVICE_OF_SET[set_name],))
        return vals

    def in_set(self, set_name: str) -> bool:
        """Whether this case belongs to ``set_name`` (every case is in ``cpu``)."""
        return set_name == "cpu" or (set_name == "gpu" and self.gpu)

    def grid(self, set_name: str) -> Iterator[dict[str, Any]]:
        """Every parameter combination of the set, as keyword dicts."""
        if not self.in_set(set_name):
            return
        for combo in itertools.product(*self.values(set_name)):
            yield dict(zip(self.param_names, combo, strict=True))

    def test_id(self, **params: Any) -> str:
        """The pytest id of one combination, ``name[v1-v2]``, as result files name it.

        Example:
            >>> Case("test_x", lambda n, impl: None, {"impl": ("rlpace",), "n": (8,)}).test_id(
            ...     impl="rlpace", n=8
            ... )
            'test_x[rlpace-8]'
        """
        if not self.param_names:
            return self.name
        return f"{self.name}[{'-'.join(str(params[p]) for p in self.param_names)}]"

    def timer_for(self, **params: Any) -> str:
        """The timer of one combination: the case's, except ``"wall"`` on CUDA.

        Example:
            >>> c = Case("test_x", lambda device: None, {}, gpu=True, timer="cpu")
            >>> c.timer_for(device="cpu"), c.timer_for(device="cuda")
            ('cpu', 'wall')
        """
        return "wall" if params.get("device") == "cuda" else self.timer

    def make(self, **params: Any) -> Timed:
        """Run the setup for one combination and return its :class:`Timed`.

        When :data:`SLOWDOWN_ENV` names this combination, the timed callable is wrapped
        so each call takes ``1 + fraction`` times as long (see :func:`slowdown_for`).
        """
        out = self.setup(**params)
        if isinstance(out, Timed):
            timed = out
        elif callable(out):
            timed = Timed(out)
        else:
            raise TypeError(
                f"case {self.name!r}: setup must return a callable or a Timed, "
                f"got {type(out).__name__}"
            )
        fraction = slowdown_for(self.test_id(**params))
        if fraction > 0:
            timed.fn = _slowed_down(timed.fn, fraction, clock_of(self.timer_for(**params)))
            timed.extra_info["injected_slowdown"] = fraction
        return timed


def parse_slowdown(spec: str) -> tuple[tuple[str, float], ...]:
    """Parse a :data:`SLOWDOWN_ENV` value into ``(pattern, fraction)`` pairs.

    The value is ``PATTERN=FRACTION[,PATTERN=FRACTION...]``. A pattern with ``*`` or
    ``?`` is a glob over the whole test id (``test_x[rlpace-8]``); any other pattern
    matches as a substring. ``FRACTION`` is the extra time per call: ``0.1`` = 10%.

    Example:
        >>> parse_slowdown("test_sum=0.1, test_rb_*=0.25")
        (('test_sum', 0.1), ('test_rb_*', 0.25))
        >>> parse_slowdown("")
        ()
    """
    pairs = []
    for item in spec.split(","):
        item = item.strip()
        if not item:
            continue
        pattern, sep, value = item.rpartition("=")
        try:
            fraction = float(value)
        except ValueError:
            fraction = -1.0
        if not sep or not pattern.strip() or not 0 <= fraction <= 100:
            raise ValueError(
                f"{SLOWDOWN_ENV}: expected PATTERN=FRACTION items separated by commas, with "
                f"FRACTION a number in [0, 100] (0.1 = 10% slower); got {item!r}. "
                f"Fix: e.g. {SLOWDOWN_ENV}='test_sum=0.1'"
            )
        pairs.append((pattern.strip(), fraction))
    return tuple(pairs)


def slowdown_for(test_id: str, spec: str | None = None) -> float:
    """The injected slowdown fraction for ``test_id`` (0.0 when none applies).

    ``spec`` defaults to the :data:`SLOWDOWN_ENV` environment variable; when several
    patterns match, the last one wins.

    Example:
        >>> slowdown_for("test_sum[10]", "test_sum=0.1")
        0.1
        >>> slowdown_for("test_sum[10]", "test_rb_*=0.5")
        0.0
        >>> slowdown_for("test_sum[10]", "*[10]=0.2")
        0.2
    """
    if spec is None:
        spec = os.environ.get(SLOWDOWN_ENV, "")
    fraction = 0.0
    for pattern, value in parse_slowdown(spec):
        if id_matches(test_id, pattern):
            fraction = value
    return fraction


def id_matches(test_id: str, pattern: str) -> bool:
    """Whether ``pattern`` names ``test_id``: a glob when it holds ``*`` or ``?``
    (brackets always match themselves, as in test ids), else a substring.

    Example:
        >>> id_matches("test_a[x-1]", "test_a[x-1]"), id_matches("test_a[x-1]", "test_a*")
        (True, True)
        >>> id_matches("test_a[x-1]", "test_b")
        False
    """
    if "*" in pattern or "?" in pattern:
        return fnmatch.fnmatchcase(test_id, pattern.replace("[", "[[]"))
    return pattern in test_id


def _slowed_down(
    fn: Callable[[], Any], fraction: float, clock: Callable[[], float] | None = None
) -> Callable[[], Any]:
    """Wrap ``fn`` so each call waits ``fraction`` of its own duration afterwards, on
    the case's own clock.

    The wrapper's own cost (its clock readings, about a microsecond on the CPU clock) is
    measured once and taken off each wait, so a case of 20 us is slowed by 10%, not by
    10% plus the wrapper. A case shorter than that cost divided by ``fraction`` is
    slowed by the wrapper's cost alone, more than asked: ``rlpace-bench aa`` reports
    the slow-down each benchmark really got.

    On the wall clock, short waits spin (``time.sleep`` is too coarse for calls of a few
    microseconds); long ones sleep all but the last :data:`_SPIN_S` and spin the rest,
    because a process that spins for milliseconds on a busy machine is preempted and
    overshoots. On the CPU clock the whole wait is spun: a sleep costs no CPU time.

    Example:
        >>> slowed = _slowed_down(lambda: 42, 0.5)  # each call then waits half as long again
        >>> slowed(), slowed.__wrapped__()
        (42, 42)
    """
    clock = clock or time.perf_counter

    def make(
        inner: Callable[[], Any], frac: float, overhead: float, tick: Callable[[], float]
    ) -> Callable[[], Any]:
        sleeps = tick is time.perf_counter

        def slowed() -> Any:
            start = tick()
            out = inner()
            end = tick()
            deadline = end + (end - start) * frac - overhead
            if sleeps and deadline - end > 2 * _SPIN_S:
                time.sleep(deadline - end - _SPIN_S)
            while tick() < deadline:
                pass
            return out

        return slowed

    on_clock = make(fn, fraction, _wrapper_cost(make, clock), clock)
    if clock is time.perf_counter:
        slowed = on_clock
    else:
        # a call of a few microseconds cannot afford CPU-clock readings (about 0.4 us
        # each): after first calls that short, time and spin on the wall clock, which
        # runs with the CPU clock while the process computes
        quick = make(fn, fraction, _wrapper_cost(make, time.perf_counter), time.perf_counter)
        chosen: list[Callable[[], Any]] = []
        first: list[float] = []

        def slowed() -> Any:
            if chosen:
                return chosen[0]()
            # decided on the CPU clock: a first call preempted on a busy machine would
            # look long on the wall clock and keep the costly readings for good; and on
            # the fastest of the first few calls, since the very first one is cold
            # (allocations, caches, a garbage collection) on a loaded machine
            start = time.process_time()
            out = on_clock()
            first.append(time.process_time() - start)
            if len(first) == _DECIDING_CALLS or min(first) >= _SLOW_S:
                chosen.append(quick if min(first) < _QUICK_S else on_clock)
            return out

    slowed.__wrapped__ = fn  # type: ignore[attr-defined]
    return slowed


def _wrapper_cost(
    make: Callable[..., Callable[[], Any]],
    clock: Callable[[], float],
    calls: int = 200,
) -> float:
    """Seconds a call of the wrapper adds to a call of the bare function (best of 5)."""

    def noop() -> None:
        return None

    wrapped = make(noop, 0.0, 0.0, clock)
    best = math.inf
    for _ in range(5):
        t0 = clock()
        for _ in range(calls):
            wrapped()
        t1 = clock()
        for _ in range(calls):
            noop()
        t2 = clock()
        best = min(best, ((t1 - t0) - (t2 - t1)) / calls)
    return max(best, 0.0)


_SPIN_S = 0.0005
"""The last stretch of an injected wait that is spun rather than slept."""

_QUICK_S = 50e-6
"""A CPU-clock case whose fastest first call is shorter than this is slowed on the
wall clock."""

_DECIDING_CALLS = 3
"""How many first calls of a CPU-clock case decide its clock (but see :data:`_SLOW_S`)."""

_SLOW_S = 1e-3
"""A CPU-clock case's first call this long decides at once: twenty times
:data:`_QUICK_S`, no cold start makes a quick call that slow."""

TIMERS: dict[str, str] = {"wall": "perf_counter", "cpu": "process_time"}
"""A case's ``timer`` → the function of :mod:`time` that times it (see :func:`clock_of`)."""


def clock_of(timer: str) -> Callable[[], float]:
    """The clock of a case's ``timer``: ``time.perf_counter`` or ``time.process_time``.

    Example:
        >>> clock_of("cpu") is time.process_time
        True
    """
    return getattr(time, TIMERS[timer])


def parse_wall_rounds(value: str | None) -> tuple[int, float]:
    """``(rounds, seconds)`` from :data:`WALL_ROUNDS_ENV`'s ``ROUNDS:SECONDS``;
    ``(0, 0.0)`` (no floor) when unset or empty.

    Example:
        >>> parse_wall_rounds("20:1"), parse_wall_rounds(None)
        ((20, 1.0), (0, 0.0))
        >>> parse_wall_rounds("20")
        Traceback (most recent call last):
        ...
        ValueError: RLPACE_BENCH_WALL_ROUNDS: expected ROUNDS:SECONDS (an integer >= 0 and a number > 0, e.g. 20:1), got '20'; fix or unset it
    """
    if not value:
        return 0, 0.0
    rounds, _, seconds = value.partition(":")
    try:
        parsed = int(rounds), float(seconds)
    except ValueError:
        parsed = (-1, 0.0)
    if parsed[0] < 0 or not (math.isfinite(parsed[1]) and parsed[1] > 0):
        raise ValueError(
            f"{WALL_ROUNDS_ENV}: expected ROUNDS:SECONDS (an integer >= 0 and a number > 0, "
            f"e.g. 20:1), got {value!r}; fix or unset it"
        )
    return parsed


def size_rounds(
    fn: Callable[[], Any],
    *,
    max_time: float,
    min_rounds: int,
    min_time: float = 0.0,
    clock: Callable[[], float] = time.perf_counter,
    window: float | None = None,
    floor: tuple[int, float] = (0, 0.0),
) -> tuple[int, int]:
    """``(rounds, iterations)`` that time ``fn`` for about ``max_time`` seconds.

    The cost of a call is the *mean* over a sizing window of ``window`` seconds
    (default a quarter of ``max_time``, at least three calls), not the fastest call.
    pytest-benchmark sizes its rounds from the fastest calibration call; a call that
    hands over work another process already did (an async collector's queued batch)
    returns in 0.1 ms while the steady cost is 40 ms, so it planned ~2,500 rounds and
    one case took 40-60 s instead of a quarter of a second. A window's mean is the
    throughput the timed rounds will actually see.

    One round loops ``iterations`` calls when a call is shorter than ``min_time`` (as
    pytest-benchmark does) and when the calls hand over queued work: if the fastest
    call of the window took under half the mean, calls alternate between picking up
    a ready result and waiting for one, and the median of single calls jumps between
    the two. A round then lasts about four times the window's longest call, so every
    round holds waits and what was ready whatever the phase: a throughput. Such a
    case gets four times ``max_time`` of rounds: how many ready results a round
    catches still varies, and with the ``max_time`` of a steady case its rounds
    (five of a few calls each) left the run's median 30 % uncertain, the widest of the
    wall-clock duets' pairs (22-24 % A/A for the async CartPole collectors).

    ``floor`` (``(rounds, seconds)``, :func:`parse_wall_rounds`) raises a count of
    rounds under ``rounds`` towards it, as far as ``seconds`` of rounds allow: the
    wall-clock cases vary 8-10 % from round to round, and the median of the five
    rounds a 50-100 ms call gets in ``max_time`` was most of their process-to-process
    spread.

    Example:
        >>> rounds, iterations = size_rounds(lambda: time.sleep(0.01), max_time=0.1, min_rounds=5)
        >>> 5 <= rounds <= 10, iterations
        (True, 1)
        >>> queue = iter(([0.0] * 3 + [0.02]) * 100)   # three ready results, then a wait
        >>> _, iterations = size_rounds(lambda: time.sleep(next(queue)), max_time=0.2, min_rounds=5)
        >>> iterations >= 2
        True
        >>> nap = lambda: time.sleep(0.02)
        >>> size_rounds(nap, max_time=0.05, min_rounds=2, floor=(5, 1.0))[0]  # 5 fit in 1 s
        5
        >>> 7 <= size_rounds(nap, max_time=0.05, min_rounds=2, floor=(50, 0.2))[0] <= 10
        True
    """
    window = max_time / 4 if window is None else window
    calls: list[float] = []
    start = clock()
    elapsed = 0.0
    while len(calls) < 3 or (elapsed < window and len(calls) < _MAX_SIZING_CALLS):
        before = clock()
        fn()
        after = clock()
        calls.append(after - before)
        elapsed = after - start
    per_call = max(elapsed / len(calls), 1e-9)
    iterations = 1
    if min(calls) < per_call * _HANDOVER:
        iterations = math.ceil(_HANDOVER_SPAN * max(calls) / per_call)
        max_time *= _HANDOVER_TIME
    if per_call < min_time:
        iterations = max(iterations, math.ceil(min_time / per_call))
    rounds = max(min_rounds, math.ceil(max_time / (per_call * iterations)))
    floor_rounds, floor_seconds = floor
    if rounds < floor_rounds:
        fit = int(floor_seconds / (per_call * iterations) + 1e-9)  # 1.0 / 0.05 is 19.99…
        rounds = max(rounds, min(floor_rounds, fit))
    return rounds, iterations


_HANDOVER = 0.5
"""A call under this share of the mean picked up work done ahead (see :func:`size_rounds`)."""
_HANDOVER_SPAN = 4
"""A round of calls that hand over queued work lasts this many of the longest calls."""
_HANDOVER_TIME = 4
"""Such a case's rounds take this many times ``max_time`` (see :func:`size_rounds`)."""

_MAX_SIZING_CALLS = 100_000
"""Most calls in :func:`size_rounds`' window (a clock too coarse to move would loop forever)."""

_REGISTRY: dict[str, Case] = {}


def case(
    params: Mapping[str, Sequence[Any]] | None = None,
    *,
    gpu: bool = False,
    name: str | None = None,
    timer: str = "wall",
    count: bool | None | Callable[..., bool | str] = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Declare a benchmark case; the decorated setup function stays callable as before.

    The returned function carries the :class:`Case` as ``__rlpace_case__``; the
    pytest plugin and the asv adapter read it from there.

    Example:
        >>> @case(params={"impl": ["rlpace", "torchrl"]}, gpu=True)
        ... def test_example(impl, device):
        ...     return lambda: None
        >>> test_example.__rlpace_case__.param_names
        ('impl', 'device')
        >>> @case(params={"n": [8]}, timer="cpu")   # all the work in this process
        ... def test_sum(n):
        ...     return lambda: sum(range(n))
        >>> test_sum.__rlpace_case__.timer_for(n=8)
        'cpu'
        >>> test_sum.__rlpace_case__.counted   # and so the count tier claims it
        True
    """

    def decorate(setup: Callable[..., Any]) -> Callable[..., Any]:
        c = Case(
            name=name or setup.__name__,
            setup=setup,
            params=dict(params or {}),
            gpu=gpu,
            module=setup.__module__,
            timer=timer,
            count=count,
        )
        _REGISTRY[f"{c.module}:{c.name}"] = c
        setup.__rlpace_case__ = c  # type: ignore[attr-defined]
        return setup

    return decorate


def registered_cases() -> list[Case]:
    """Every case declared so far (import the case modules first), in declaration order.

    Example:
        >>> isinstance(registered_cases(), list)
        True
    """
    return list(_REGISTRY.values())
