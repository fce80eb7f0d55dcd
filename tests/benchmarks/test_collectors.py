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

import torch
from tensordict.nn import TensorDictModule, TensorDictSequential

from rlpace.bench.suite import SkipCase, Timed, case
from rlpace.collectors.testing import CountingEnv, make_mlp_policy

FRAMES = 256


class _OneHotArgmax(torch.nn.Module):
    def forward(self, logits: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.one_hot(logits.argmax(-1), logits.shape[-1])


def make_cartpole() -> object:
    from torchrl.envs import GymEnv

    return GymEnv("CartPole-v1")


def make_policy(env_name: str) -> TensorDictModule | TensorDictSequential:
    if env_name == "cartpole":
        return TensorDictSequential(
            make_mlp_policy(obs_dim=4, act_dim=2),
            TensorDictModule(_OneHotArgmax(), ["action"], ["action"]),
        )
    return make_mlp_policy(obs_dim=4, act_dim=1)


def env_factory(env_name: str, num_envs: int | None = None, step_sleep: float = 0.0):
    if env_name == "cartpole":
        return make_cartpole
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


@case(params={"impl": ["rlpace", "torchrl"], "env": ["cartpole", "counting"]})
def test_collector_single(impl, env):
    """One env in the main process (counting: a batch of 8 envs)."""
    make_env = env_factory(env, num_envs=8)
    policy = make_policy(env)
    if impl == "rlpace":
        from rlpace.collectors import Collector

        collector = Collector(make_env(), policy, frames_per_batch=FRAMES)
    else:
        tc = _torchrl_collectors()
        collector = tc.Collector(make_env(), policy, frames_per_batch=FRAMES, total_frames=-1)
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


@case(
    params={
        "impl": ["rlpace", "torchrl"],
        "backend": ["threading", "multiprocessing"],
        "transport": ["slot", "queue", "shm"],
        "envs": [8],
        "env": ["counting", "cartpole", "sleep2ms"],
    }
)
def test_async_batched(impl, backend, transport, envs, env):
    """Envs stepping on their own, one inference server batching their requests.

    ``sleep2ms`` sleeps 2 ms per step (a slow simulator); it waits for
    ``min_batch_size=envs // 2`` requests per forward pass (``extra_info`` records the
    mean batch size reached). Threads use ``slot`` or ``queue``, processes ``shm``;
    torchrl's twin runs with its own default transport under the ``slot``/``shm`` ids.
    """
    valid = {"threading": ("slot", "queue"), "multiprocessing": ("shm",)}
    if transport not in valid[backend]:
        raise SkipCase(f"{backend} envs use transports {valid[backend]}, not {transport!r}")
    env_fns = _async_batched_env_fns(env, envs)
    policy = make_policy("cartpole" if env == "cartpole" else "counting")
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
        timed = _throughput(collector, FRAMES, min_batch_size=min_batch)
        inner = timed.fn

        def one_batch() -> None:
            inner()
            timed.extra_info["mean_batch_size"] = collector.server_stats().mean_batch_size

        timed.fn = one_batch
        return timed
    if transport == "queue":
        raise SkipCase("torchrl's AsyncBatchedCollector has no queue transport for threads")
    tc = _torchrl_collectors()
    if not hasattr(tc, "AsyncBatchedCollector"):
        raise SkipCase("torchrl 0.14.1 has no AsyncBatchedCollector")
    collector = tc.AsyncBatchedCollector(
        env_fns,
        policy=policy,
        frames_per_batch=FRAMES,
        total_frames=-1,
        backend=backend,
        min_batch_size=min_batch,
        server_timeout=0.005,
    )
    return _throughput(collector, FRAMES, min_batch_size=min_batch)
