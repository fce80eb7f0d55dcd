"""Collector throughput, rlpace against its torchrl 0.14.1 twin in the same run.

Every throughput case builds the collector and its iterator in setup (and collects
one batch to warm up); each timed call is one batch, so ``items=frames_per_batch``
gives frames/s. Start-up plus shutdown is timed separately by
``test_collector_startup``.

Envs: ``cartpole`` (gymnasium CartPole-v1 through torchrl's GymEnv) and ``counting``
(rlpace's pure-torch ``CountingEnv``), both with a small MLP policy.
"""

from __future__ import annotations

import functools

from rlpace.bench.suite import SkipCase, Timed, case
from rlpace.collectors.testing import CountingEnv, make_mlp_policy

FRAMES = 256


def make_policy(env_name: str):
    if env_name == "cartpole":
        return make_mlp_policy(obs_dim=4, act_dim=2, one_hot=True)
    return make_mlp_policy(obs_dim=4, act_dim=1)


def env_factory(env_name: str, num_envs: int | None = None, step_sleep: float = 0.0):
    if env_name == "cartpole":
        # importable from any process (torchrl's workers start with spawn)
        from torchrl.envs import GymEnv

        return functools.partial(GymEnv, "CartPole-v1")
    return functools.partial(CountingEnv, num_envs=num_envs, step_sleep=step_sleep)


def _torchrl_collectors():
    try:
        import torchrl.collectors as tc
    except ImportError as exc:  # pragma: no cover - torchrl is a dependency
        raise SkipCase(f"torchrl collectors cannot be imported: {exc}") from exc
    return tc


def _throughput(collector, frames: int, **extra) -> Timed:
    it = iter(collector)
    next(it)

    def one_batch() -> None:
        next(it)

    return Timed(
        one_batch,
        teardown=collector.shutdown,
        items=frames,
        unit="frames",
        extra_info=extra,
    )


@case(params={"impl": ["rlpace", "torchrl"], "env": ["cartpole", "counting"]}, timer="cpu")
def test_collector_single(impl, env):
    """One env in the main process (counting: a batch of 8 envs)."""
    make_env = env_factory(env, num_envs=8)
    policy = make_policy(env)
    base_env = make_env()
    if env == "cartpole":
        # unseeded, gymnasium draws CartPole's starts from OS entropy: the episodes, and
        # so the resets a batch holds, would differ from process to process
        base_env.set_seed(0)
    if impl == "rlpace":
        from rlpace.collectors import Collector

        collector = Collector(base_env, policy, frames_per_batch=FRAMES)
    else:
        tc = _torchrl_collectors()
        collector = tc.Collector(base_env, policy, frames_per_batch=FRAMES, total_frames=-1)
    return _throughput(collector, FRAMES)


def _multi(impl: str, env: str, sync: bool) -> Timed:
    env_fns = [env_factory(env, num_envs=8)] * 2
    policy = make_policy(env)
    if impl == "rlpace":
        from rlpace.collectors import MultiCollector

        collector = MultiCollector(env_fns, policy, frames_per_batch=FRAMES, sync=sync)
    else:
        tc = _torchrl_collectors()
        cls = tc.MultiSyncCollector if sync else tc.MultiAsyncCollector
        collector = cls(env_fns, policy, frames_per_batch=FRAMES, total_frames=-1)
    return _throughput(collector, FRAMES)


@case(params={"impl": ["rlpace", "torchrl"], "env": ["cartpole", "counting"]})
def test_collector_sync(impl, env):
    """Two worker processes, each batch gathered from both (counting: 8 envs per worker)."""
    return _multi(impl, env, sync=True)


@case(params={"impl": ["rlpace", "torchrl"], "env": ["cartpole", "counting"]})
def test_collector_async(impl, env):
    """Two worker processes, each batch from whichever worker finished first."""
    return _multi(impl, env, sync=False)


def _async_batched_env_fns(env: str, envs: int) -> list:
    if env == "sleep2ms":
        return [functools.partial(CountingEnv, step_sleep=0.002)] * envs
    return [env_factory(env)] * envs


def _forward_in_main_thread(policy, rows: int) -> None:
    """One batched forward in the main thread, as any training loop runs, before timing.

    A threaded collector runs its forwards in a server thread. If no other thread
    ever ran an OpenMP region, that thread's team is the only one and libgomp lets
    its worker busy-wait between regions (it throttles only when more OpenMP
    threads exist than CPUs): on the shared 2-core machine that worker takes a core
    from the env threads and both impls run 5-10x slower. Without this, the figures
    depended on whether an earlier case (e.g. ``test_collector_single``) happened to
    run in the same process.
    """
    import torch
    from tensordict import TensorDict

    with torch.no_grad():
        policy(TensorDict({"observation": torch.zeros(rows, 4)}, batch_size=[rows]))


@case(
    params={
        "impl": ["rlpace", "torchrl"],
        # one value per supported pair, so ids read impl-backend-transport-envs-env
        "backend_transport": ["threading-slot", "threading-queue", "multiprocessing-shm"],
        "envs": [8],
        "env": ["counting", "cartpole", "sleep2ms"],
    }
)
def test_async_batched(impl, backend_transport, envs, env):
    """Envs stepping on their own, one inference server batching their requests.

    ``sleep2ms`` sleeps 2 ms per step (a slow simulator); it waits for
    ``min_batch_size=envs // 2`` requests per forward pass (``extra_info`` records the
    mean batch size reached, and for threads the ``env_threads`` the collector chose
    by default). Threads use ``slot`` or ``queue``, processes ``shm``;
    torchrl's twin runs with its own default transport under the ``slot``/``shm`` ids,
    its process-backed pool (on ``counting`` only, for its start-up cost) as one
    worker process hosting all envs (``envs_per_worker=envs``; rlpace starts one
    process per env).
    """
    backend, transport = backend_transport.split("-")
    env_fns = _async_batched_env_fns(env, envs)
    policy = make_policy("cartpole" if env == "cartpole" else "counting")
    _forward_in_main_thread(policy, envs)
    min_batch = envs // 2 if env == "sleep2ms" else 1
    if impl == "rlpace":
        from rlpace.collectors import AsyncBatchedCollector

        collector = AsyncBatchedCollector(
            env_fns,
            policy,
            frames_per_batch=FRAMES,
            backend=backend,
            transport=None if transport == "shm" else transport,
            min_batch_size=min_batch,
            server_timeout=0.005,
        )
        extra = {"min_batch_size": min_batch}
        if collector.env_threads is not None:  # threads: how many the GIL probe chose
            extra["env_threads"] = collector.env_threads
        timed = _throughput(collector, FRAMES, **extra)
        inner = timed.fn

        def one_batch() -> None:
            inner()
            timed.extra_info["mean_batch_size"] = collector.server_stats().mean_batch_size

        timed.fn = one_batch
        return timed
    if transport == "queue":
        raise SkipCase("torchrl's AsyncBatchedCollector has no queue transport for threads")
    if backend == "multiprocessing" and env != "counting":
        raise SkipCase(
            "torchrl's process-backed AsyncBatchedCollector spawns its worker (about 6 s "
            "per case on the shared 2-core machine); to keep the suite's budget it is "
            "compared on the counting env only"
        )
    tc = _torchrl_collectors()
    if not hasattr(tc, "AsyncBatchedCollector"):
        raise SkipCase("torchrl 0.14.1 has no AsyncBatchedCollector")
    # With one spawned worker process per env (its default), torchrl's process-backed
    # pool takes 90-120 s to start on the shared 2-core machine; one worker hosting
    # every env (envs_per_worker) starts in about 6 s.
    grouping = {"envs_per_worker": envs} if backend == "multiprocessing" else {}
    collector = tc.AsyncBatchedCollector(
        env_fns,
        policy=policy,
        frames_per_batch=FRAMES,
        total_frames=-1,
        backend=backend,
        min_batch_size=min_batch,
        server_timeout=0.005,
        **grouping,
    )
    return _throughput(collector, FRAMES, min_batch_size=min_batch, **grouping)


def _build(kind: str):
    from rlpace.collectors import AsyncBatchedCollector, Collector, MultiCollector

    policy = make_policy("counting")
    if kind == "single":
        return Collector(env_factory("counting", num_envs=8)(), policy, frames_per_batch=FRAMES)
    if kind in ("sync", "async"):
        env_fns = [env_factory("counting", num_envs=8)] * 2
        return MultiCollector(env_fns, policy, frames_per_batch=FRAMES, sync=kind == "sync")
    backend = kind.removeprefix("async_batched_")
    env_fns = [env_factory("counting")] * 8
    return AsyncBatchedCollector(env_fns, policy, frames_per_batch=FRAMES, backend=backend)


def _single_process(kind, impl="rlpace"):
    """The count tier's decision: a ``single`` collector steps its env and policy in the
    benchmark process, so Callgrind sees all its work (it stays timed on the wall
    clock, like the others of its case); the other kinds work in other processes or
    threads, which counts do not see."""
    return kind == "single" or f"{kind}: the work runs in worker processes or threads"


@case(
    params={
        "kind": [
            "single",
            "sync",
            "async",
            "async_batched_threading",
            "async_batched_multiprocessing",
        ]
    },
    count=_single_process,
)
def test_collector_startup(kind):
    """Start-up (construct + first batch) and shutdown of rlpace collectors, timed together.

    One timed call builds the collector, collects one batch and shuts it down;
    ``extra_info`` keeps the start-up and shutdown seconds of the first call apart.
    The issue's bar: process-backed collectors start in at most 3 s.
    """
    import time

    info: dict = {}

    def lifecycle() -> None:
        start = time.perf_counter()
        collector = _build(kind)
        next(iter(collector))
        started = time.perf_counter()
        collector.shutdown()
        info.setdefault("startup_s", started - start)
        info.setdefault("shutdown_s", time.perf_counter() - started)

    lifecycle()  # the first call's split is what extra_info reports
    return Timed(lifecycle, items=1, unit="starts", extra_info=info)


@case(params={"impl": ["rlpace", "torchrl"], "kind": ["single", "sync"]}, count=_single_process)
def test_collector_with_rb(impl, kind):
    """Collect straight into a replay buffer (counting env, 8 per worker).

    rlpace: ``rlpace.data.ReplayBuffer(TensorStorage)``, which ``sync`` workers
    extend from their own processes; torchrl: its ``ReplayBuffer(LazyTensorStorage)``
    passed as ``replay_buffer=`` to its Collector / MultiSyncCollector.
    """
    env_fns = [env_factory("counting", num_envs=8)] * 2
    policy = make_policy("counting")
    if impl == "rlpace":
        from rlpace.collectors import Collector, MultiCollector
        from rlpace.data import ReplayBuffer, TensorStorage

        rb = ReplayBuffer(storage=TensorStorage(100_000), batch_size=FRAMES)
        if kind == "single":
            collector = Collector(env_fns[0](), policy, frames_per_batch=FRAMES, replay_buffer=rb)
        else:
            collector = MultiCollector(env_fns, policy, frames_per_batch=FRAMES, replay_buffer=rb)
    else:
        tc = _torchrl_collectors()
        from torchrl.data import LazyTensorStorage, ReplayBuffer

        rb = ReplayBuffer(storage=LazyTensorStorage(100_000), batch_size=FRAMES)
        if kind == "single":
            collector = tc.Collector(
                env_fns[0](), policy, frames_per_batch=FRAMES, total_frames=-1, replay_buffer=rb
            )
        else:
            collector = tc.MultiSyncCollector(
                env_fns, policy, frames_per_batch=FRAMES, total_frames=-1, replay_buffer=rb
            )
            try:
                return _throughput(collector, FRAMES)
            except RuntimeError as exc:
                collector.shutdown()
                raise SkipCase(
                    f"torchrl 0.14.1's MultiSyncCollector with replay_buffer= fails here: {exc}"
                ) from exc
    return _throughput(collector, FRAMES)


def compare_interleaved(blocks: int = 3, only: str | None = None) -> None:
    """rlpace against torchrl in one process, alternating blocks of 8 batches.

    On a shared machine the load drifts between pytest-benchmark's back-to-back
    cases; alternating blocks exposes both sides to the same load, so the median
    of the paired ratios is the figure to quote. Threaded collectors are built
    afresh for every block and shut down after it: an idle threaded collector
    left alive in the process (torchrl's env threads poll) would take GIL time
    from the one being timed. Run it as
    ``python tests/benchmarks/test_collectors.py [blocks] [case-prefix]``.
    """
    import statistics
    import time

    threads = {"backend_transport": "threading-slot", "envs": 8}
    grid = [
        (test_collector_single, {"env": "counting"}),
        (test_collector_single, {"env": "cartpole"}),
        (test_async_batched, {**threads, "env": "counting"}),
        (test_async_batched, {**threads, "env": "cartpole"}),
        (test_async_batched, {**threads, "env": "sleep2ms"}),
        (test_collector_sync, {"env": "counting"}),
        (test_collector_sync, {"env": "cartpole"}),
        (test_collector_async, {"env": "counting"}),
        (test_collector_async, {"env": "cartpole"}),
    ]
    for setup, params in grid:
        name = setup.__name__
        if only and not name.startswith(only):
            continue
        fresh = setup is test_async_batched
        built = (
            {} if fresh else {impl: setup(impl=impl, **params) for impl in ("rlpace", "torchrl")}
        )
        rates: dict[str, list[float]] = {"rlpace": [], "torchrl": []}
        extra: dict = {}
        for _ in range(blocks):
            for impl in ("rlpace", "torchrl"):
                timed = setup(impl=impl, **params) if fresh else built[impl]
                start = time.perf_counter()
                for _ in range(8):
                    timed.fn()
                rates[impl].append(8 * timed.items / (time.perf_counter() - start))
                if impl == "rlpace":
                    extra = dict(timed.extra_info)
                if fresh:
                    timed.teardown()
        for timed in built.values():
            timed.teardown()
        ratio = statistics.median(a / b for a, b in zip(rates["rlpace"], rates["torchrl"]))
        print(
            f"{name:22s} {params['env']:9s} rlpace {statistics.median(rates['rlpace']):8.0f} "
            f"frames/s  torchrl {statistics.median(rates['torchrl']):8.0f} frames/s  "
            f"ratio {ratio:5.2f}  {extra}",
            flush=True,
        )


if __name__ == "__main__":
    import os
    import sys
    import warnings

    warnings.filterwarnings("ignore")
    compare_interleaved(
        int(sys.argv[1]) if len(sys.argv) > 1 else 3, sys.argv[2] if len(sys.argv) > 2 else None
    )
    # Every collector is shut down by now, but after torchrl 0.14.1's multi-process
    # collectors the interpreter can hang at exit, joining a multiprocessing queue
    # feeder thread blocked on a pipe whose reader is gone; the results are printed.
    sys.stdout.flush()
    os._exit(0)
