"""Collection-time fast paths of the actors :func:`~rlpace.trainers._envs.make_actor` builds.

A ``ProbabilisticActor`` spends most of a collection step in TensorDict dispatch, not in
its network: for CartPole's 64x64 MLP the dispatch is several times the matmuls. The
collector calls the policy once per env step, so the trainers hand it a plain module that
runs the same network and samples the same distribution with a few tensor ops.

The network itself is run as a :class:`DirectChain` when it is a plain chain of linear
layers and elementwise activations: the same layers, called without ``nn.Module``'s
per-call machinery, which for a one-row 256x256 MLP costs as much as the matmuls.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from tensordict import TensorDictBase
from tensordict.nn import InteractionType, TensorDictModule
from tensordict.nn.probabilistic import interaction_type
from torch import nn
from torch.nn import functional as F  # noqa: N812 - the usual name

__all__ = ["DirectChain", "OneHotCategoricalPolicy", "TanhNormalPolicy", "collection_policy"]

_LOG_2 = math.log(2.0)
_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)
_ELEMENTWISE = {nn.ReLU: torch.relu, nn.Tanh: torch.tanh, nn.Sigmoid: torch.sigmoid}
_LINEAR = "linear"  # marks a step that is an nn.Linear (a string: it survives pickling)


def _has_hooks(module: nn.Module) -> bool:
    return bool(
        module._forward_hooks
        or module._forward_pre_hooks
        or module._backward_hooks
        or module._backward_pre_hooks
    )


def _global_hooks() -> bool:
    from torch.nn.modules import module as module_lib

    names = ("_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks")
    return any(getattr(module_lib, name, None) for name in names)


class DirectChain:
    """Runs a chain of ``nn.Sequential`` layers as direct calls, for inference.

    ``nn.Linear`` becomes ``F.linear`` on the layer's current parameters, ``ReLU`` /
    ``Tanh`` / ``Sigmoid`` their tensor functions, and any other layer is called as it is.
    Nested ``nn.Sequential`` and single-output torchrl ``MLP`` are flattened. The layers
    are shared, not copied, so weight updates and ``.to()`` apply at once; module hooks
    would be skipped, so :meth:`plan` refuses a network that has any (its own or global
    ones registered when it plans; a hook added later is not seen).

    Example:
        >>> net = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 2))
        >>> chain = DirectChain.plan(net)
        >>> x = torch.randn(4, 3)
        >>> torch.equal(chain(x), net(x))
        True
        >>> net.register_forward_hook(lambda *a: None) is not None, DirectChain.plan(net)
        (True, None)
    """

    def __init__(self, steps: list[tuple[Any, nn.Module | None]]) -> None:
        self.steps = tuple(steps)

    @classmethod
    def plan(cls, net: nn.Module) -> DirectChain | None:
        """A chain running ``net`` layer by layer, or None when ``net`` is no such chain."""
        from torchrl.modules import MLP

        steps: list[tuple[Any, nn.Module | None]] = []

        def walk(module: nn.Module) -> bool:
            if _has_hooks(module):
                return False
            kind = type(module)
            flat_mlp = kind is MLP and isinstance(module.out_features, int)
            if kind is nn.Sequential or flat_mlp:
                return all(walk(child) for child in module)
            if kind is nn.Linear:
                steps.append((_LINEAR, module))
            elif kind in _ELEMENTWISE:
                steps.append((_ELEMENTWISE[kind], None))
            else:
                steps.append((None, module))
            return True

        if type(net) is not nn.Sequential and type(net) is not MLP:
            return None
        if _global_hooks():
            return None
        return cls(steps) if walk(net) else None

    def __call__(self, x: torch.Tensor) -> Any:
        for fn, module in self.steps:
            if fn == _LINEAR:
                x = F.linear(x, module.weight, module.bias)
            elif module is None:
                x = fn(x)
            else:
                x = module(x)
        return x


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
        self._chain = DirectChain.plan(net)  # not a module: the net is registered once

    def forward(self, td: TensorDictBase) -> TensorDictBase:
        """Write logits, action and log-probability into ``td`` and return it."""
        logits = (self._chain or self.net)(td.get(self.in_key))
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
        shift = (self.half_range.log() + _LOG_SQRT_2PI + 2 * _LOG_2).sum(-1)
        self.register_buffer("log_prob_shift", shift, persistent=False)
        self._chain = DirectChain.plan(net)  # not a module: the net is registered once

    def forward(self, td: TensorDictBase) -> TensorDictBase:
        """Write loc, scale, action and log-probability into ``td`` and return it."""
        mode = interaction_type()
        if mode is not None and mode != InteractionType.RANDOM and self.actor is not None:
            return self.actor(td)
        loc, scale = (self._chain or self.net)(td.get(self.in_key))
        # loc + N(0, 1) * scale, drawn as torch.distributions.Normal.rsample draws it
        pre_tanh = torch.randn_like(loc).mul_(scale).add_(loc)
        lim = 1.0 - torch.finfo(pre_tanh.dtype).resolution
        action = pre_tanh.tanh_().clamp_(-lim, lim).mul_(self.half_range).add_(self.action_mid)
        # score the action as the actor does: back through the affine map and the tanh
        x = (action - self.action_mid).div_(self.half_range).clamp_(-lim, lim).atanh_()
        # log N(x; loc, scale) - log|d tanh(x)/dx| - log(half_range), summed over the action:
        # -z^2/2 - log(scale) + 2x + 2 softplus(-2x) - (log sqrt(2 pi) + 2 log 2 + log half)
        log_prob = (x - loc).div_(scale).square_().mul_(-0.5).sub_(scale.log())
        log_prob.add_(x, alpha=2.0).add_(F.softplus(x * -2.0), alpha=2.0)
        log_prob = log_prob.sum(-1).sub_(self.log_prob_shift)
        td.set(self.loc_key, loc)
        td.set(self.scale_key, scale)
        td.set(self.action_key, action)
        td.set(self.log_prob_key, log_prob)
        return td


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
