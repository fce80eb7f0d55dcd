"""Policy weights shared with worker processes through shared memory.

The parent keeps one TensorDict of parameters in shared memory and a version
counter next to it. Publishing copies new weights into that TensorDict in place;
workers copy it into their own policy when the version moved. Nothing is pickled
per update. The counter doubles as a sequence lock: it is odd while a write is in
progress, so a worker never keeps a half-written set of weights.
"""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase


class SharedWeights:
    """A policy's parameters and buffers in shared memory, plus a version counter.

    Args:
        policy: the ``torch.nn.Module`` whose parameters and buffers are shared.
        ctx: the multiprocessing context the workers are started with.

    Example:
        >>> import multiprocessing as mp
        >>> import torch
        >>> net = torch.nn.Linear(2, 1)
        >>> weights = SharedWeights(net, mp.get_context("spawn"))
        >>> worker_net = torch.nn.Linear(2, 1)
        >>> weights.pull(worker_net, seen=-1)
        0
        >>> torch.equal(worker_net.weight, net.weight)
        True
        >>> weights.publish({"weight": torch.zeros(1, 2), "bias": torch.zeros(1)})
        2
        >>> weights.pull(worker_net, seen=0)
        2
        >>> worker_net.weight.abs().sum().item()
        0.0
    """

    def __init__(self, policy: torch.nn.Module, ctx: Any) -> None:
        self.params = TensorDict.from_module(policy).data.clone().share_memory_()
        self._version = ctx.RawValue("q", 0)

    @property
    def version(self) -> int:
        """Number of completed writes times two (even when no write is in progress)."""
        return int(self._version.value)

    def publish(self, weights: TensorDictBase | dict | torch.nn.Module) -> int:
        """Copy ``weights`` into shared memory in place; returns the new version.

        Args:
            weights: a module, a ``state_dict`` or a TensorDict of parameters laid
                out like the policy's.
        """
        if isinstance(weights, torch.nn.Module):
            new = TensorDict.from_module(weights).data
        elif isinstance(weights, TensorDictBase):
            new = weights
        elif isinstance(weights, dict):
            new = TensorDict(weights).unflatten_keys(".")
        else:
            raise TypeError(
                "policy weights must be a module, a state_dict or a TensorDict of "
                f"parameters; got {type(weights).__name__}"
            )
        self._version.value += 1  # odd: write in progress
        try:
            with torch.no_grad():
                self.params.update_(new)
        finally:
            self._version.value += 1
        return self.version

    def pull(self, policy: torch.nn.Module, seen: int) -> int:
        """Copy the shared weights into ``policy`` if they changed since ``seen``.

        Returns the version now held by ``policy`` (``seen`` when nothing was copied,
        e.g. because a write was in progress; the next call tries again).
        """
        version = self.version
        if version == seen or version % 2:
            return seen
        with torch.no_grad():
            TensorDict.from_module(policy).data.update_(self.params)
        return version if self.version == version else seen
