"""Collection-time fast paths of the actors :func:`~rlpace.trainers._envs.make_actor` builds.

A ``ProbabilisticActor`` spends most of a collection step in TensorDict dispatch, not in
its network: for CartPole's 64x64 MLP the dispatch is several times the matmuls. The
collector calls the policy once per env step, so the trainers hand it a plain module that
runs the same network and samples the same distribution with a few tensor ops.
"""

from __future__ import annotations

import math

import torch
from tensordict import TensorDictBase
from tensordict.nn import InteractionType, TensorDictModule
from tensordict.nn.probabilistic import interaction_type
from torch import nn
from torch.nn import functional as F  # noqa: N812 - the usual name

__all__ = ["OneHotCategoricalPolicy", "TanhNormalPolicy", "collection_policy"]


class OneHotCategoricalPolicy(nn.Module):
    """Samples a one-hot action from ``net``'s logits, writing what the actor writes.

    The same network (shared, not copied) and the same outputs as ``make_actor``'s
    discrete ``ProbabilisticActor``: ``logits``, a one-hot ``action`` and its
    ``action_log_prob``. Under ``set_exploration_type(DETERMINISTIC)`` (or any type other
    than ``RANDOM``) it takes the most likely action instead of sampling.

    Args:
        net: maps the observation to logits over the actions (last dim).
        in_key: the observation's key.
        out_keys: keys of the logits, the one-hot action and its log-probability.
        action_dtype: dtype of the one-hot action (the action spec's).

    Example:
        >>> from tensordict import TensorDict
        >>> net = nn.Linear(4, 3)
        >>> policy = OneHotCategoricalPolicy(net)
        >>> td = policy(TensorDict({"observation": torch.zeros(5, 4)}, [5]))
        >>> td["action"].sum(-1).tolist(), td["action_log_prob"].shape
        ([1, 1, 1, 1, 1], torch.Size([5]))
    """

    def __init__(
        self,
        net: nn.Module,
        *,
        in_key: str = "observation",
        out_keys: tuple[str, str, str] = ("logits", "action", "action_log_prob"),
        action_dtype: torch.dtype = torch.int64,
    ) -> None:
        super().__init__()
        self.net = net
        self.in_key = in_key
        self.logits_key, self.action_key, self.log_prob_key = out_keys
        self.action_dtype = action_dtype

    def forward(self, td: TensorDictBase) -> TensorDictBase:
        """Write logits, action and log-probability into ``td`` and return it."""
        logits = self.net(td.get(self.in_key))
        n = logits.shape[-1]
        mode = interaction_type()
        if mode is None or mode == InteractionType.RANDOM:
            probs = logits.softmax(-1).reshape(-1, n)
            index = torch.multinomial(probs, 1).reshape(logits.shape[:-1])
        else:
            index = logits.argmax(-1)
        log_prob = logits.log_softmax(-1).gather(-1, index.unsqueeze(-1)).squeeze(-1)
        td.set(self.logits_key, logits)
        td.set(self.action_key, F.one_hot(index, n).to(self.action_dtype))
        td.set(self.log_prob_key, log_prob)
        return td


class TanhNormalPolicy(nn.Module):
    """Samples a tanh-normal action from ``net``'s ``(loc, scale)``, writing what the actor writes.

    Stands in for ``make_actor``'s continuous ``ProbabilisticActor`` (a ``TanhNormal``
    between ``low`` and ``high``) while it samples: the same network (shared), the same
    action for the same seed (a normal draw, a tanh clamped just inside ±1 as torchrl's
    safe tanh does, then scaled to ``[low, high]``) and its log-probability. The
    log-probability is computed from the action through the clamped inverse, as the
    actor scores it; it agrees to float rounding, and to about 1e-3 relative where the
    tanh saturates. Any exploration type other than ``RANDOM`` is handed to ``actor``
    (the tanh-normal's deterministic action has no closed form worth copying).

    Args:
        net: maps the observation to ``(loc, scale)``.
        actor: the actor this stands in for (used outside ``RANDOM`` exploration).
        low: the action's lower bound.
        high: the action's upper bound.
        in_key: the observation's key.
        out_keys: keys of loc, scale, the action and its log-probability.

    Example:
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import NormalParamExtractor
        >>> net = nn.Sequential(nn.Linear(3, 2), NormalParamExtractor())
        >>> policy = TanhNormalPolicy(net, None, low=torch.tensor([-2.0]), high=torch.tensor([2.0]))
        >>> td = policy(TensorDict({"observation": torch.zeros(5, 3)}, [5]))
        >>> bool(td["action"].abs().max() < 2), td["action"].shape, td["action_log_prob"].shape
        (True, torch.Size([5, 1]), torch.Size([5]))
    """

    def __init__(
        self,
        net: nn.Module,
        actor: nn.Module | None,
        *,
        low: torch.Tensor,
        high: torch.Tensor,
        in_key: str = "observation",
        out_keys: tuple[str, str, str, str] = ("loc", "scale", "action", "action_log_prob"),
    ) -> None:
        super().__init__()
        self.net = net
        self.actor = actor
        self.in_key = in_key
        self.loc_key, self.scale_key, self.action_key, self.log_prob_key = out_keys
        # buffers, so that .to(device) moves them; not persistent: derived from the spec
        self.register_buffer("action_mid", (high + low) / 2, persistent=False)
        self.register_buffer("half_range", (high - low) / 2, persistent=False)
        self.register_buffer("log_half_range", self.half_range.log(), persistent=False)

    def forward(self, td: TensorDictBase) -> TensorDictBase:
        """Write loc, scale, action and log-probability into ``td`` and return it."""
        mode = interaction_type()
        if mode is not None and mode != InteractionType.RANDOM and self.actor is not None:
            return self.actor(td)
        loc, scale = self.net(td.get(self.in_key))
        pre_tanh = loc + torch.empty_like(loc).normal_() * scale
        lim = 1.0 - torch.finfo(pre_tanh.dtype).resolution
        action = pre_tanh.tanh().clamp(-lim, lim) * self.half_range + self.action_mid
        # score the action as the actor does: back through the affine map and the tanh
        x = ((action - self.action_mid) / self.half_range).clamp(-lim, lim).atanh()
        log_normal = -((x - loc) ** 2) / (2 * scale**2) - scale.log() - _LOG_SQRT_2PI
        log_det_tanh = 2 * (_LOG_2 - x - F.softplus(-2 * x))
        log_prob = (log_normal - log_det_tanh - self.log_half_range).sum(-1)
        td.set(self.loc_key, loc)
        td.set(self.scale_key, scale)
        td.set(self.action_key, action)
        td.set(self.log_prob_key, log_prob)
        return td


_LOG_2 = math.log(2.0)
_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def collection_policy(actor: nn.Module) -> nn.Module:
    """The policy a collector should run for ``actor``: a fast path when there is one.

    ``make_actor``'s discrete actor (network → logits → ``OneHotCategorical``) becomes a
    :class:`OneHotCategoricalPolicy` and its continuous one (network → loc, scale →
    ``TanhNormal(low, high)``) a :class:`TanhNormalPolicy`, over the same network; any
    other actor is returned as is.

    Example:
        >>> from rlpace.trainers._envs import make_actor, make_env
        >>> env = make_env("CartPole-v1", 0)
        >>> type(collection_policy(make_actor(env, (8,), nn.Tanh))).__name__
        'OneHotCategoricalPolicy'
        >>> env.close(); env = make_env("Pendulum-v1", 0)
        >>> type(collection_policy(make_actor(env, (8,), nn.Tanh))).__name__
        'TanhNormalPolicy'
        >>> env.close()
    """
    from torchrl.modules import OneHotCategorical, ProbabilisticActor, TanhNormal

    if type(actor) is not ProbabilisticActor or len(actor.module) != 2:
        return actor
    head, sampler = actor.module
    if (
        type(head) is not TensorDictModule
        or len(head.in_keys) != 1
        or list(sampler.in_keys) != list(head.out_keys)
        or len(sampler.out_keys) != 2  # the action and its log-probability
    ):
        return actor
    dist, kwargs = getattr(sampler, "distribution_class", None), sampler.distribution_kwargs
    if dist is OneHotCategorical and not kwargs and len(head.out_keys) == 1:
        spec = getattr(actor, "spec", None)
        action_spec = spec.get(sampler.out_keys[0], None) if spec is not None else None
        return OneHotCategoricalPolicy(
            head.module,
            in_key=head.in_keys[0],
            out_keys=(head.out_keys[0], *sampler.out_keys),
            action_dtype=action_spec.dtype if action_spec is not None else torch.int64,
        )
    if dist is TanhNormal and set(kwargs) == {"low", "high"} and len(head.out_keys) == 2:
        return TanhNormalPolicy(
            head.module,
            actor,
            low=torch.as_tensor(kwargs["low"]),
            high=torch.as_tensor(kwargs["high"]),
            in_key=head.in_keys[0],
            out_keys=(*head.out_keys, *sampler.out_keys),
        )
    return actor
