"""pytest side of the benchmark suite: turns :func:`rlpace.bench.suite.case` setups into tests.

Options:
    --rlpace-set {cpu,gpu}: which set to run (default ``cpu``). In the GPU set, cases
        without ``gpu=True`` are deselected, and every case skips with a reason when
        CUDA is missing.
    --rlpace-threads N: call ``torch.set_num_threads(N)`` once in this process, as
        soon as torch is loaded (after collection, or when a case's setup first imports
        it) and before any case is timed; defaults to ``$RLPACE_BENCH_THREADS``
        (``rlpace-bench run`` sets it to 1); unset leaves torch's default. A suite that
        never imports torch does not load it for this.
    --rlpace-timer {cpu,wall}: time only the cases on that clock, skip the others
        (default ``$RLPACE_BENCH_TIMER``, unset: every case).
    --rlpace-pass {counted,timed}: run only the cases of one pass of ``rlpace-bench
        pr`` and skip the others (default ``$RLPACE_BENCH_PASS``; it supersedes the
        clock): ``counted``, the CPU-clock cases the count tier judges (timed once a
        side, for display); ``timed``, the cases judged on their time (the wall-clock
        ones and the CPU-clock ones declared out of the count tier, timed in duets).
        Each result records its pass in ``extra_info["pass"]``.

Every result file also carries the environment metadata of
:func:`rlpace.bench.environment.collect_environment` under ``machine_info["rlpace"]``,
and every result's ``extra_info`` names its ``set``. Items of the GPU set carry the
``gpu`` marker. A case on CUDA is timed with
``torch.cuda.synchronize()`` after each call and records ``peak_cuda_memory_bytes``.
A case on CUDA or on the wall clock, or on the CPU clock but left out of the count
tier, also records, from a few more calls under
``torch.profiler`` and ``cProfile``, the kernels, syncs, copies, aten ops and Python
calls each call made from its thread (``extra_info["work_counts"]``, see :mod:`rlpace.bench.work_counts`;
``$RLPACE_BENCH_WORK_COUNTS=0`` turns that off, ``$RLPACE_BENCH_WORK_COUNTS_SKIP=torchrl``
leaves out the cases whose ``impl`` is ``torchrl``).
In a duet (``$RLPACE_BENCH_DUET_SYNC``, set by ``rlpace-bench``'s runner), a
case on the host is timed once the run on the other core is ready to time it too
(:mod:`rlpace.bench.duet_sync`).
"""

from __future__ import annotations

import os
import sys

import pytest

from rlpace.bench.duet_sync import DUET_SYNC_ENV, DuetSync
from rlpace.bench.suite import (
    PASS_ENV,
    PASSES,
    WALL_ROUNDS_ENV,
    SkipCase,
    clock_of,
    parse_wall_rounds,
    size_rounds,
)
from rlpace.bench.work_counts.measure import (
    CALLS,
    ENV,
    EXTRA_INFO_KEY,
    SKIP_ENV,
    WORKERS_ENV,
    counting_on,
    measure_work_counts,
    skipped_impls,
)
from rlpace.bench.work_counts.threads import newest_thread
from rlpace.bench.work_counts.workers import install as install_worker_counts


def pytest_addoption(parser):
    group = parser.getgroup("rlpace")
    group.addoption(
        "--rlpace-set",
        choices=("cpu", "gpu"),
        default="cpu",
        help="benchmark set to run: cpu (every case) or gpu (cases with gpu=True, on CUDA)",
    )
    group.addoption(
        "--rlpace-threads",
        type=int,
        default=None,
        help="torch intra-op threads for the whole session (rlpace-bench run passes 1)",
    )
    group.addoption(
        "--rlpace-timer",
        choices=("cpu", "wall"),
        default=None,
        help="time only the cases on this clock and skip the others (default: "
        "$RLPACE_BENCH_TIMER, unset: every case)",
    )
    group.addoption(
        "--rlpace-pass",
        choices=tuple(PASSES),
        default=None,
        help="run only the cases of this pass of rlpace-bench pr and skip the others "
        "(counted: the CPU-clock cases the count tier judges; timed: the rest; default: "
        "$RLPACE_BENCH_PASS, unset: by --rlpace-timer)",
    )


def pytest_configure(config):
    try:
        config.rlpace_work_counts = counting_on(os.environ.get(ENV))
        workers_wanted = counting_on(os.environ.get(WORKERS_ENV), WORKERS_ENV)
        config.rlpace_work_counts_skip = skipped_impls(os.environ.get(SKIP_ENV))
        config.rlpace_wall_rounds = parse_wall_rounds(os.environ.get(WALL_ROUNDS_ENV))
        config.rlpace_duet_sync = DuetSync.from_env(os.environ.get(DUET_SYNC_ENV))
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    # before any case forks its workers, so their Python calls can be counted too (not
    # where nothing is timed, as in the project's tests: no fork hooks there)
    config.rlpace_worker_counts = (
        config.rlpace_work_counts
        and workers_wanted
        and not config.getoption("benchmark_disable", False)
        and not install_worker_counts()
    )
    threads = config.getoption("--rlpace-threads")
    if threads is None and os.environ.get("RLPACE_BENCH_THREADS"):
        try:
            threads = int(os.environ["RLPACE_BENCH_THREADS"])
        except ValueError:
            raise pytest.UsageError(
                "RLPACE_BENCH_THREADS: expected an integer >= 1, "
                f"got {os.environ['RLPACE_BENCH_THREADS']!r}; unset it or fix the value"
            ) from None
    if threads is not None and threads < 1:
        raise pytest.UsageError(
            f"--rlpace-threads: expected an integer >= 1, got {threads}; pass 1 or more"
        )
    config.rlpace_threads = threads
    _apply_threads(config)


def _apply_threads(config):
    """``torch.set_num_threads`` once, as soon as torch is loaded: importing torch
    (over a second) only to set it would slow a pure-Python suite down."""
    if config.rlpace_threads is not None and "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(config.rlpace_threads)
        config.rlpace_threads = None


def pytest_collection_finish(session):
    _apply_threads(session.config)
    sync = getattr(session.config, "rlpace_duet_sync", None)
    if sync is not None:  # the duet's other side never waits for a case this side lacks
        sync.listed(item.nodeid for item in session.items)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    yield
    sync = getattr(item.config, "rlpace_duet_sync", None)
    if sync is not None:  # timed, skipped or failed: the duet's other side waits no more
        sync.leave(item.nodeid)


def pytest_sessionfinish(session, exitstatus):
    sync = getattr(session.config, "rlpace_duet_sync", None)
    if sync is not None:
        sync.end()


def pytest_benchmark_update_machine_info(config, machine_info):
    from rlpace.bench.environment import MACHINE_INFO_KEY, collect_environment

    machine_info[MACHINE_INFO_KEY] = collect_environment(repo=config.rootpath)


def _case_of(obj):
    return getattr(obj, "__rlpace_case__", None)


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makeitem(collector, name, obj):
    """Case tests time through pytest-benchmark's fixture without naming it as an argument."""
    if _case_of(obj) is not None and not getattr(obj, "_rlpace_marked", False):
        obj.pytestmark = [*getattr(obj, "pytestmark", []), pytest.mark.usefixtures("benchmark")]
        obj._rlpace_marked = True


def pytest_generate_tests(metafunc):
    c = _case_of(metafunc.function)
    if c is None:
        return
    set_name = metafunc.config.getoption("--rlpace-set")
    if not c.in_set(set_name):
        return
    for pname, values in zip(c.param_names, c.values(set_name), strict=True):
        metafunc.parametrize(pname, values, ids=[str(v) for v in values])


def pytest_collection_modifyitems(config, items):
    set_name = config.getoption("--rlpace-set")
    keep, drop = [], []
    for item in items:
        c = _case_of(getattr(item, "obj", None))
        (drop if c is not None and not c.in_set(set_name) else keep).append(item)
    only = config.getoption("--rlpace-timer") or os.environ.get("RLPACE_BENCH_TIMER") or None
    if only not in (None, "cpu", "wall"):
        raise pytest.UsageError(
            f"RLPACE_BENCH_TIMER: expected cpu or wall, got {only!r}; unset it or fix the value"
        )
    in_pass = config.getoption("--rlpace-pass") or os.environ.get(PASS_ENV) or None
    if in_pass not in (None, *PASSES):
        raise pytest.UsageError(
            f"{PASS_ENV}: expected {' or '.join(PASSES)}, got {in_pass!r}; "
            "unset it or fix the value"
        )
    for item in keep:  # GPU-set items carry the `gpu` marker, so `-m gpu` selects them too
        callspec = getattr(item, "callspec", None)
        if callspec is not None and callspec.params.get("device") == "cuda":
            item.add_marker(pytest.mark.gpu)
        c = _case_of(getattr(item, "obj", None))
        if c is None or (only is None and in_pass is None):
            continue
        params = dict(callspec.params) if callspec is not None else {}
        own = {k: v for k, v in params.items() if k in c.param_names}
        # skipped, not deselected: a pass with nothing in it still runs
        if in_pass is not None:  # the pass decides, whatever the clock
            runs_in = c.pass_for(**own)
            if runs_in != in_pass:
                item.add_marker(pytest.mark.skip(reason=f"run in the {runs_in} pass"))
        elif c.timer_for(**own) != only:
            item.add_marker(
                pytest.mark.skip(reason=f"timed in the {c.timer_for(**own)}-clock pass")
            )
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    c = _case_of(pyfuncitem.obj)
    if c is None:
        return None
    params = {name: pyfuncitem.funcargs[name] for name in c.param_names}
    if params.get("device") == "cuda":
        import torch

        if not torch.cuda.is_available():
            pytest.skip("GPU set: no CUDA device is available on this machine")
    _apply_threads(pyfuncitem.config)
    # the threads this case starts are counted with its workers; older ones are not its
    since = newest_thread() if pyfuncitem.config.rlpace_worker_counts else 0
    try:
        timed = c.make(**params)
    except SkipCase as exc:
        pytest.skip(str(exc))
    _apply_threads(pyfuncitem.config)  # its setup may be what loaded torch
    benchmark = pyfuncitem.funcargs["benchmark"]
    benchmark.extra_info.update(timed.extra_info)
    benchmark.extra_info["set"] = pyfuncitem.config.getoption("--rlpace-set")
    if timed.items is not None:
        benchmark.extra_info["items_per_call"] = timed.items
        benchmark.extra_info["unit"] = timed.unit
    timer = c.timer_for(**params)
    benchmark.extra_info["timer"] = timer
    runs_in = c.pass_for(**params)
    benchmark.extra_info["pass"] = runs_in
    config = pyfuncitem.config
    count = config.rlpace_work_counts and params.get("impl") not in config.rlpace_work_counts_skip
    if timer != "wall":
        _use_clock(benchmark, clock_of(timer))
    try:
        if params.get("device") == "cuda":
            _time_on_cuda(benchmark, timed.fn, count)
        elif runs_in == "timed":  # the wall clock, or the CPU clock declared out of the count
            # tier: sized rounds either way; the latter's work counted in fewer calls
            calls = CALLS if timer == "wall" else DECLARED_OUT_CALLS
            _time_sized(benchmark, timed.fn, config, count, pyfuncitem.nodeid, calls, since)
        else:  # counted: its counts judge it, its time is shown
            _meet(benchmark, config, pyfuncitem.nodeid)  # before pytest-benchmark's warm-up
            benchmark(timed.fn)
    finally:
        if timed.teardown is not None:
            timed.teardown()
    return True


def _time_sized(benchmark, fn, config, count, nodeid, calls=CALLS, since=0):
    """Rounds sized from the mean cost of a window of calls (see ``size_rounds``), at
    least ``$RLPACE_BENCH_WALL_ROUNDS``'s floor of them; in a duet
    (``$RLPACE_BENCH_DUET_SYNC``), warmed up, sized and timed once the other side is
    ready to do so too (:mod:`rlpace.bench.duet_sync`; the seconds waited go to
    ``extra_info["duet_wait_s"]``); then its work counted in ``calls`` calls. Every
    case judged on its time is timed so: on the wall clock, or on the CPU clock when
    declared out of the count tier (a SAC batch, 108-136 ms a call, got
    pytest-benchmark's five rounds, and a trainer's start-up spread 5-20 % between
    its rounds).

    pytest-benchmark sizes rounds from its fastest calibration call; for a case whose
    calls collect work other processes or threads did ahead (an async collector's
    queued batch) that call is ~300x faster than the steady one, and the case ran for
    40-60 s. Warm-up, then a sizing window, then ``benchmark.pedantic``.
    """
    if benchmark.disabled:  # --benchmark-disable: the one plain call benchmark(fn) makes
        benchmark(fn)
        return
    # before the warm-up: work that threads or processes queue while this side waits
    # (an async collector's batches) is drained before the timed rounds
    _meet(benchmark, config, nodeid)
    if config.getoption("benchmark_warmup"):
        for _ in range(config.getoption("benchmark_warmup_iterations")):
            fn()
    rounds, iterations = size_rounds(  # pytest-benchmark keeps its times as strings
        fn,
        max_time=float(config.getoption("benchmark_max_time")),
        min_rounds=int(config.getoption("benchmark_min_rounds")),
        min_time=float(config.getoption("benchmark_min_time")),
        floor=config.rlpace_wall_rounds,
    )
    benchmark.pedantic(fn, rounds=rounds, iterations=iterations)
    if count:  # CPU work: never initialize CUDA in this process
        workers = config.rlpace_worker_counts
        benchmark.extra_info[EXTRA_INFO_KEY] = _work_counts(
            fn, cuda=False, calls=calls, workers=workers, threads_since=since
        )


def _meet(benchmark, config, nodeid):
    """In a duet, wait until the other side is ready to time this case too; the seconds
    waited go to ``extra_info["duet_wait_s"]``, a meeting that failed to ``["duet_sync"]``."""
    if config.rlpace_duet_sync is None or benchmark.disabled:
        return
    met = config.rlpace_duet_sync.arrive(nodeid)
    benchmark.extra_info["duet_wait_s"] = round(met.waited, 4)
    if met.how != "together":
        benchmark.extra_info["duet_sync"] = met.how


def _use_clock(benchmark, clock):
    """Time this one benchmark on ``clock`` instead of the session's ``--benchmark-timer``.

    pytest-benchmark has no public per-test timer; its fixture keeps the clock in
    ``_timer`` (checked here, so an upgrade that renames it fails loudly, not silently
    on the wall clock).
    """
    if not callable(getattr(benchmark, "_timer", None)):
        raise RuntimeError(
            "pytest-benchmark's fixture has no _timer attribute any more: expected the "
            "clock of pytest-benchmark 5.x; update rlpace's suite plugin for this version"
        )
    benchmark._timer = clock


def _time_on_cuda(benchmark, fn, count):
    """Each timed call waits for the device; the peak memory of the timing is recorded."""
    import torch

    def synchronized():
        out = fn()
        torch.cuda.synchronize()
        return out

    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    benchmark(synchronized)
    benchmark.extra_info["peak_cuda_memory_bytes"] = int(torch.cuda.max_memory_allocated())
    if not benchmark.disabled and count:
        benchmark.extra_info[EXTRA_INFO_KEY] = _work_counts(fn)


DECLARED_OUT_CALLS = 4
"""Calls counted for a CPU-clock case the count tier does not claim (``torch.compile``,
the cases too slow under Valgrind), whose work is counted instead, on the CPU alone (3
in 4 make a typical call): each call costs up to a fifth of a second."""


def _work_counts(fn, cuda=None, calls=CALLS, workers=False, threads_since=0):
    """The kernels, syncs, copies, aten ops and Python calls of a few more calls, counted
    after the timing (see :mod:`rlpace.bench.work_counts`; ``cuda``: profile the device
    too, None: when CUDA is available; ``workers``: count the Python calls of the case's
    forked worker processes and of the threads started since ``threads_since`` too); an
    error is kept, not raised: the timing stands without the counts."""
    try:
        return measure_work_counts(
            fn, cuda=cuda, calls=calls, workers=workers, threads_since=threads_since
        )
    except Exception as exc:  # the profiler can be missing or busy; the timing stands
        return {"error": f"{type(exc).__name__}: {exc}"[:300]}
