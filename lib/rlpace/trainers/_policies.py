"""Collection-time fast paths of the actors :func:`~rlpace.trainers._envs.make_actor` builds.

A ``ProbabilisticActor`` spends most of a collection step in TensorDict dispatch, not in
its network: for CartPole's 64x64 MLP the dispatch is several times the matmuls. The
collector calls the policy once per env step, so the trainers hand it a plain module that
runs the same network and samples the same distribution with a few tensor ops.
"""

from __future__ import annotations

import torch
from tensordict import TensorDictBase
from tensordict.nn import InteractionType, TensorDictModule
from tensordict.nn.probabilistic import interaction_type
from torch import nn
from torch.nn import functional as F  # noqa: N812 - the usual name

__all__ = ["OneHotCategoricalPolicy", "collection_policy"]


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


def collection_policy(actor: nn.Module) -> nn.Module:
    """The policy a collector should run for ``actor``: a fast path when there is one.

    ``make_actor``'s discrete actor (network → logits → ``OneHotCategorical``) becomes a
    :class:`OneHotCategoricalPolicy` over the same network; any other actor (tanh-normal
    ones included) is returned as is.

    Example:
        >>> from rlpace.trainers._envs import make_actor, make_env
        >>> env = make_env("CartPole-v1", 0)
        >>> type(collection_policy(make_actor(env, (8,), nn.Tanh))).__name__
        'OneHotCategoricalPolicy'
        >>> env.close(); env = make_env("Pendulum-v1", 0)
        >>> type(collection_policy(make_actor(env, (8,), nn.Tanh))).__name__
        'ProbabilisticActor'
        >>> env.close()
    """
    from torchrl.modules import OneHotCategorical, ProbabilisticActor

    if type(actor) is not ProbabilisticActor or len(actor.module) != 2:
        return actor
    head, sampler = actor.module
    if (
        type(head) is not TensorDictModule
        or getattr(sampler, "distribution_class", None) is not OneHotCategorical
        or getattr(sampler, "distribution_kwargs", None)
        or len(head.in_keys) != 1
        or len(head.out_keys) != 1
        or list(sampler.in_keys) != list(head.out_keys)
        or len(sampler.out_keys) != 2
    ):
        return actor
    spec = getattr(actor, "spec", None)
    action_spec = spec.get(sampler.out_keys[0], None) if spec is not None else None
    dtype = action_spec.dtype if action_spec is not None else torch.int64
    return OneHotCategoricalPolicy(
        head.module,
        in_key=head.in_keys[0],
        out_keys=(head.out_keys[0], *sampler.out_keys),
        action_dtype=dtype,
    )
