"""Prioritized experience replay over a shared sum/min tree."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from rlpace.data._samplers import Sampler, _committed
from rlpace.data._sumtree import SumMinTree, tree_size


def _check_number(name: str, value: Any, allow_zero: bool = True) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"PrioritizedSampler({name}=...) expects a finite number; got {value!r}")
    if value < 0 or (value == 0 and not allow_zero):
        bound = "non-negative" if allow_zero else "positive"
        raise ValueError(f"PrioritizedSampler({name}=...) must be {bound}; got {value!r}")
    return float(value)


class PrioritizedSampler(Sampler):
    """Prioritized replay: item ``i`` is drawn with probability ``p_i^alpha / sum p^alpha``.

    New items get the highest priority seen so far, including items written through
    another handle of the same storage (a writer process whose buffer samples
    uniformly, a bare ``storage.extend``): before each draw the sampler compares the
    ledger's write count with the writes it has seen and gives unseen committed slots
    the highest priority. Samples carry a ``weight`` entry,
    the importance weight ``(N * P(i))^-beta`` divided by the largest possible one
    (that of the lowest-priority item), so weights lie in (0, 1]. The sum/min
    tree lives next to a shared storage's data, so every process draws from, and
    updates, the same priorities.

    Args:
        max_capacity: the most slots the tree holds (at least the storage's max_size).
        alpha: how strongly priorities shape sampling (0: uniform).
        beta: importance-weight exponent (0: no correction, 1: full correction).
        eps: added to every priority so none is exactly zero.

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from rlpace.data import ReplayBuffer, TensorStorage
        >>> rb = ReplayBuffer(TensorStorage(8), sampler=PrioritizedSampler(8, alpha=0.7, beta=0.5))
        >>> _ = rb.extend(TensorDict({"obs": torch.zeros(4, 2)}, [4]))
        >>> rb.update_priority(torch.tensor([0, 1]), torch.tensor([10.0, 0.1]))
        >>> batch = rb.sample(16)
        >>> batch["weight"].shape, bool((batch["weight"] <= 1.0).all())
        (torch.Size([16]), True)
    """

    def __init__(self, max_capacity: int, alpha: float, beta: float, eps: float = 1e-8):
        if isinstance(max_capacity, bool) or not isinstance(max_capacity, int) or max_capacity <= 0:
            raise ValueError(
                f"PrioritizedSampler(max_capacity=...) expects a positive int; got {max_capacity!r}"
            )
        self.max_capacity = max_capacity
        self.alpha = _check_number("alpha", alpha)
        self.beta = _check_number("beta", beta)
        self.eps = _check_number("eps", eps)
        self._tree: SumMinTree | None = None

    def attach(self, storage) -> None:
        if storage.max_size > self.max_capacity:
            raise ValueError(
                f"PrioritizedSampler(max_capacity={self.max_capacity}) is smaller than the "
                f"storage's max_size={storage.max_size}; give the sampler "
                f"max_capacity={storage.max_size} or more"
            )
        n = 2 * tree_size(self.max_capacity)
        sums = storage.shared_array("priority_sum", (n,), np.float64)
        mins = storage.shared_array("priority_min", (n,), np.float64, fill=np.inf)
        self._max = storage.shared_array("priority_max", (1,), np.float64, fill=1.0)
        self._tree = SumMinTree(self.max_capacity, sums, mins)
        # seen[slot]: the ledger ticket whose priority the tree holds (0: none)
        self._seen = storage.shared_array("priority_seen", (storage.max_size,), np.int64)
        # [tickets reserved through these hooks, ledger generation they belong to]
        self._synced = storage.shared_array("priority_synced", (2,), np.int64)
        self._ledger = storage.ledger
        self._lock = storage.ledger.lock
        # the ledger repair this tree was last rebuilt after (see _rebuild_after_repair)
        self._repaired = storage.shared_array("priority_repairs", (1,), np.int64)

    def _rebuild_after_repair(self) -> None:
        """With the lock held: rebuild the tree if a holder died since it was last built.

        A writer killed inside ``on_reserve``/``on_commit`` (or ``update_priority``)
        leaves leaves and inner sums out of step; the ledger's repair bumps its
        ``repairs`` count. Then uncommitted slots get priority 0, committed ones that
        have none get the current maximum, and the inner nodes are summed again.
        """
        repairs = self._ledger.repairs
        if int(self._repaired[0]) == repairs:
            return
        tree = self._tree
        flags = self._ledger.valid
        n = len(flags)
        leaves = tree.sums[tree.size : tree.size + n]
        valid = torch.from_numpy(flags.astype(bool))
        leaves[~valid] = 0.0
        leaves[valid & (leaves <= 0)] = float(self._max[0]) ** self.alpha
        tree.mins[tree.size : tree.size + n] = torch.where(leaves > 0, leaves, torch.inf)
        tree.rebuild()
        self._repaired[0] = repairs

    # called by the ledger with the lock held
    def on_reserve(self, slots: np.ndarray) -> None:
        self._rebuild_after_repair()
        self._tree.set(torch.from_numpy(slots), 0.0)
        self._seen[slots] = 0
        self._synced[0] += len(slots)

    def on_commit(self, slots: np.ndarray) -> None:
        self._rebuild_after_repair()
        self._tree.set(torch.from_numpy(slots), float(self._max[0]) ** self.alpha)
        self._seen[slots] = self._ledger.owner[slots]

    def on_empty(self) -> None:
        self._tree.clear()
        self._max[0] = 1.0
        self._seen[...] = 0
        self._synced[:] = (0, self._ledger.generation)

    def _catch_up(self) -> None:
        """Give items written without this sampler's hooks their priority (lock held).

        Every write through a buffer with this sampler counts its tickets in
        ``synced[0]``; when that equals the ledger's write count nothing was written
        elsewhere and this is two integer reads. Otherwise the committed slots whose
        ticket the tree has not seen get the highest priority, slots re-reserved
        elsewhere lose theirs, and once no write is in flight the count is caught up.
        """
        self._rebuild_after_repair()
        ledger, synced = self._ledger, self._synced
        writes, generation = ledger.writes, ledger.generation
        if synced[0] == writes and synced[1] == generation:
            return
        if synced[1] != generation:  # emptied or restored through another handle
            self._tree.clear()
            self._seen[...] = 0
        owner = np.array(ledger.owner)
        valid = np.array(ledger.valid, dtype=bool)
        fresh = np.flatnonzero(valid & (self._seen != owner))
        if fresh.size:
            self._tree.set(torch.from_numpy(fresh), float(self._max[0]) ** self.alpha)
            self._seen[fresh] = owner[fresh]
        gone = np.flatnonzero(~valid & (self._seen != 0))
        if gone.size:
            self._tree.set(torch.from_numpy(gone), 0.0)
            self._seen[gone] = 0
        in_flight = bool(np.any((owner > 0) & ~valid))
        synced[:] = (synced[0] if in_flight else writes, generation)

    def sample(self, storage, batch_size: int):
        n, _ = _committed(storage)
        with self._lock:
            self._catch_up()
            index = self._tree.draw(batch_size, self.generator)
            priority = self._tree.leaves(index)
            total, smallest = self._tree.total, self._tree.min
        weight = (priority / total * n) ** -self.beta
        weight = weight / ((smallest / total * n) ** -self.beta)
        return index, {"weight": weight.to(torch.float32)}

    def update_priority(self, storage, index: Any, priority: Any) -> None:
        """Set the priority of slots ``index``; slots being rewritten are skipped."""
        index = torch.as_tensor(index).reshape(-1).to(torch.int64).cpu()
        priority = torch.as_tensor(priority, dtype=torch.float64).reshape(-1).cpu()
        if priority.numel() == 1 and index.numel() != 1:
            priority = priority.expand(index.numel())
        if priority.numel() != index.numel():
            raise ValueError(
                f"update_priority got {index.numel()} indices and {priority.numel()} "
                "priorities; pass one priority per index (or a single one for all)"
            )
        bad = ~torch.isfinite(priority) | (priority < 0)
        if bool(bad.any()):
            raise ValueError(
                f"priorities must be finite and non-negative; got {priority[bad][:5].tolist()} "
                f"at positions {torch.nonzero(bad).squeeze(1)[:5].tolist()}. Take abs() of "
                "TD errors and replace NaNs before updating"
            )
        if index.numel() and (int(index.min()) < 0 or int(index.max()) >= storage.max_size):
            raise IndexError(
                f"update_priority indices must lie in [0, {storage.max_size}); got "
                f"min={int(index.min())}, max={int(index.max())}. Pass the 'index' entry of a sample"
            )
        value = priority + self.eps
        with self._lock:
            self._catch_up()
            live = torch.from_numpy(self._ledger.valid[index.numpy()].astype(bool))
            if bool(live.any()):
                self._tree.set(index[live], value[live] ** self.alpha)
                self._max[0] = max(float(self._max[0]), float(value[live].max()))

    def state_dict(self) -> dict[str, Any]:
        tree = self._tree
        with self._lock:
            self._catch_up()
            return {
                "priorities": tree.sums[tree.size : tree.size + tree.capacity].clone(),
                "max_priority": float(self._max[0]),
            }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Set the priorities from :meth:`state_dict`; call after the storage's (the buffer does)."""
        tree = self._tree
        with self._lock:
            # a copy: the caller's tensor must not alias the tree
            leaves = torch.as_tensor(state["priorities"], dtype=torch.float64).clone()
            tree.clear()
            tree.sums[tree.size : tree.size + len(leaves)] = leaves
            tree.mins[tree.size : tree.size + len(leaves)] = torch.where(
                leaves > 0, leaves, torch.inf
            )
            tree.rebuild()
            self._max[0] = state["max_priority"]
            # the saved priorities belong to the slots the storage now holds
            ledger = self._ledger
            valid = np.array(ledger.valid, dtype=bool)
            self._seen[...] = np.where(valid, np.array(ledger.owner), 0)
            self._synced[:] = (ledger.writes, ledger.generation)

    def __getstate__(self) -> dict[str, Any]:
        # the tree itself is reattached from the storage by the buffer
        return {
            "max_capacity": self.max_capacity,
            "alpha": self.alpha,
            "beta": self.beta,
            "eps": self.eps,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state)
