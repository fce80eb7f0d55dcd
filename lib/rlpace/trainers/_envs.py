"""Environments and network heads the trainers build from a config."""

from __future__ import annotations

from collections.abc import Sequence

import torch  # noqa: F401 - used by the doctests
from tensordict.nn import InteractionType, NormalParamExtractor, TensorDictModule
from torch import nn
from torchrl.data import Bounded, OneHot
from torchrl.envs import EnvBase, GymEnv, GymWrapper
from torchrl.modules import MLP, OneHotCategorical, ProbabilisticActor, TanhNormal

__all__ = ["action_kind", "make_actor", "make_env"]


def make_env(name: str, seed: int, num_envs: int = 1) -> EnvBase:
    """A gymnasium env through torchrl's ``GymEnv``, seeded, with no transforms.

    With ``num_envs > 1`` the copies step in one process through gymnasium's
    synchronous vector env (batch shape ``[num_envs]``), which cuts the per-frame
    Python overhead of collection several times. There is deliberately no per-step
    transform: a ``TransformedEnv`` layer costs about as much per step as the
    ``GymEnv`` itself (Pendulum: 74 us bare, 134 us with ``RewardSum``), so the trainer
    sums episode returns per batch instead (:class:`~rlpace.trainers._episodes.EpisodeReturns`).

    Example:
        >>> env = make_env("CartPole-v1", seed=0)
        >>> td = env.rollout(3)
        >>> td["next", "reward"].shape, td["next", "done"].shape
        (torch.Size([3, 1]), torch.Size([3, 1]))
        >>> env.close()
    """
    if num_envs == 1:
        base = GymEnv(name)
    else:
        import gymnasium as gym

        base = GymWrapper(
            gym.make_vec(
                name,
                num_envs=num_envs,
                vectorization_mode="sync",
                vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.DISABLED},
            )
        )
    base.set_seed(seed)
    return base


def action_kind(env: EnvBase) -> str:
    """``"discrete"`` for a one-hot action spec, ``"continuous"`` for a bounded box.

    Raises:
        ValueError: any other action spec, naming it.

    Example:
        >>> env = make_env("Pendulum-v1", seed=0)
        >>> action_kind(env)
        'continuous'
        >>> env.close()
    """
    spec = env.action_spec
    if isinstance(spec, OneHot):
        return "discrete"
    if isinstance(spec, Bounded) and spec.dtype.is_floating_point:
        return "continuous"
    raise ValueError(
        f"expected a one-hot (discrete) or bounded float (continuous) action spec, got "
        f"{type(spec).__name__}; pick an env with a Discrete or Box action space"
    )


def mlp(in_features: int, out_features: int, hidden: Sequence[int], act: type) -> nn.Module:
    """A plain MLP with ``act`` between layers (lazy-free, so parameters exist at once).

    Example:
        >>> mlp(4, 2, (8,), nn.Tanh)(torch.zeros(3, 4)).shape
        torch.Size([3, 2])
    """
    return MLP(
        in_features=in_features,
        out_features=out_features,
        num_cells=list(hidden),
        activation_class=act,
    )


def make_actor(env: EnvBase, hidden: Sequence[int], act: type) -> ProbabilisticActor:
    """A stochastic policy for the env's action spec: one-hot categorical or tanh-normal.

    The actor samples by default (collection explores); evaluation wraps calls in
    ``set_exploration_type(ExplorationType.DETERMINISTIC)``.

    Example:
        >>> env = make_env("CartPole-v1", seed=0)
        >>> actor = make_actor(env, (16,), nn.Tanh)
        >>> actor(env.reset())["action"].shape
        torch.Size([2])
        >>> env.close()
    """
    kind = action_kind(env)
    n_obs = env.observation_spec["observation"].shape[-1]
    spec = env.action_spec
    if kind == "discrete":
        net = TensorDictModule(mlp(n_obs, spec.shape[-1], hidden, act), ["observation"], ["logits"])
        return ProbabilisticActor(
            net,
            in_keys=["logits"],
            out_keys=["action"],
            spec=spec,
            distribution_class=OneHotCategorical,
            return_log_prob=True,
            default_interaction_type=InteractionType.RANDOM,
        )
    n_act = spec.shape[-1]
    net = TensorDictModule(
        nn.Sequential(mlp(n_obs, 2 * n_act, hidden, act), NormalParamExtractor()),
        ["observation"],
        ["loc", "scale"],
    )
    return ProbabilisticActor(
        net,
        in_keys=["loc", "scale"],
        out_keys=["action"],
        spec=spec,
        distribution_class=TanhNormal,
        distribution_kwargs={"low": spec.space.low, "high": spec.space.high},
        return_log_prob=True,
        default_interaction_type=InteractionType.RANDOM,
    )
