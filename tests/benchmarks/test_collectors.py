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

FRAMES = 200


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
