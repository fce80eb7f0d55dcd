"""Samplers: which committed slots a replay buffer returns next.

A sampler never sees uncommitted slots: it asks the storage's ledger for the
committed set, which is ``0..n-1`` in the common case (no writer in flight) and an
explicit list of slots otherwise.
"""

from __future__ import annotations

from typing import Any

import torch


class EmptyBufferError(RuntimeError):
    """Sampling a buffer that holds no committed item.

    Example:
        >>> from rlpace.data import ReplayBuffer, TensorStorage
        >>> ReplayBuffer(TensorStorage(4)).sample(2)
        Traceback (most recent call last):
        ...
        rlpace.data._samplers.EmptyBufferError: cannot sample: the buffer holds no committed item; extend it before sampling
    """


def _committed(storage) -> tuple[int, torch.Tensor | None]:
    n, slots = storage.ledger.committed()
    if n == 0:
        raise EmptyBufferError(
            "cannot sample: the buffer holds no committed item; extend it before sampling"
        )
    return n, (None if slots is None else torch.from_numpy(slots))


class Sampler:
    """Base of the samplers: ``sample(storage, batch_size) -> (slots, info)``.

    ``slots`` is a 1-D int64 tensor of committed slots; ``info`` holds extra entries
    for the batch (``weight`` for prioritized sampling). Samplers that keep state
    other processes must see allocate it in :meth:`attach` with
    ``storage.shared_array`` and update it in ``on_reserve``/``on_commit``, which the
    storage calls with its lock held.

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from rlpace.data import ReplayBuffer, TensorStorage
        >>> class Newest(Sampler):
        ...     def sample(self, storage, batch_size):
        ...         last = (storage.ledger.writes - 1) % storage.max_size
        ...         return torch.full((batch_size,), last), {}
        >>> rb = ReplayBuffer(TensorStorage(4), sampler=Newest())
        >>> _ = rb.extend(TensorDict({"x": torch.arange(6)}, [6]))
        >>> rb.sample(2)["x"].tolist()
        [5, 5]
    """

    #: whether ``iter(buffer)`` stops after one pass (an epoch)
    has_epochs = False
    #: called by the ledger with the lock held (only samplers that keep shared state)
    on_reserve = None
    on_commit = None

    def attach(self, storage) -> None:
        """Bind to a storage (allocate shared state); called by the buffer."""

    def sample(self, storage, batch_size: int) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        raise NotImplementedError

    def on_empty(self) -> None:
        """The buffer was emptied (called with the storage lock held)."""

    def start_epoch(self) -> None:
        """Begin a fresh pass (``iter(buffer)``)."""

    @property
    def ran_out(self) -> bool:
        """Whether the current epoch has given every item."""
        return False

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass


class RandomSampler(Sampler):
    """Uniform sampling with replacement over the committed items.

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from rlpace.data import ReplayBuffer, TensorStorage
        >>> rb = ReplayBuffer(TensorStorage(10), sampler=RandomSampler(), batch_size=4)
        >>> _ = rb.extend(TensorDict({"x": torch.arange(3)}, [3]))
        >>> bool((rb.sample()["index"] < 3).all())
        True
    """

    def sample(self, storage, batch_size: int):
        n, slots = _committed(storage)
        index = torch.randint(n, (batch_size,))
        if slots is not None:
            index = slots[index]
        return index, {}


class SamplerWithoutReplacement(Sampler):
    """Every committed item once per epoch, in shuffled (or storage) order.

    An epoch is fixed when it starts: items added during it wait for the next one.
    The epoch state is per process.

    Args:
        drop_last: drop the epoch's last batch when it would be smaller than the batch
            size (and start a new epoch); with ``False`` the last batch is smaller.
        shuffle: random order (``True``) or storage order.

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from rlpace.data import ReplayBuffer, TensorStorage
        >>> rb = ReplayBuffer(TensorStorage(10), sampler=SamplerWithoutReplacement(), batch_size=4)
        >>> _ = rb.extend(TensorDict({"x": torch.arange(10)}, [10]))
        >>> sorted(torch.cat([b["x"] for b in rb]).tolist()) == list(range(10))
        True
    """

    has_epochs = True

    def __init__(self, drop_last: bool = False, shuffle: bool = True):
        self.drop_last = bool(drop_last)
        self.shuffle = bool(shuffle)
        self._order: torch.Tensor | None = None
        self._pos = 0
        self._generation = -1
        self._last_batch = 1

    def start_epoch(self) -> None:
        self._order = None
        self._pos = 0

    @property
    def ran_out(self) -> bool:
        if self._order is None:
            return False
        remaining = len(self._order) - self._pos
        return remaining == 0 or (self.drop_last and remaining < self._last_batch)

    def sample(self, storage, batch_size: int):
        n, slots = _committed(storage)
        if self.drop_last and batch_size > n:
            raise ValueError(
                f"batch size {batch_size} is larger than the {n} items a without-replacement "
                "epoch can give with drop_last=True; lower the batch size, add items first, "
                "or use drop_last=False"
            )
        generation = storage.ledger.generation
        remaining = 0 if self._order is None else len(self._order) - self._pos
        if (
            self._order is None
            or (self._generation is not None and generation != self._generation)
            or remaining == 0
            or (self.drop_last and remaining < batch_size)
        ):
            order = torch.randperm(n) if self.shuffle else torch.arange(n)
            self._order = order if slots is None else slots[order]
            self._pos = 0
            self._generation = generation
        self._generation = generation
        self._last_batch = batch_size
        index = self._order[self._pos : self._pos + batch_size]
        self._pos += len(index)
        return index, {}

    def state_dict(self) -> dict[str, Any]:
        return {"order": self._order, "pos": self._pos}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._order = state.get("order")
        self._pos = int(state.get("pos", 0))
        self._generation = None  # the loaded epoch holds until the next empty()

    def __getstate__(self) -> dict[str, Any]:
        # the epoch is per process: a copy sent elsewhere starts its own
        return {"drop_last": self.drop_last, "shuffle": self.shuffle}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state)


class SliceSampler(Sampler):
    """Contiguous sub-trajectories that never cross an episode end.

    Items of one trajectory share the value of ``traj_key``; a slice is ``slice_len``
    consecutive items (in write order) of one trajectory. Trajectories are drawn
    uniformly among those with at least ``slice_len`` committed items, then a start
    uniformly within. A sample of ``batch_size`` items holds
    ``batch_size // slice_len`` slices, one after the other.

    Args:
        slice_len: items per slice (give this or ``num_slices``).
        num_slices: slices per sample; ``slice_len = batch_size // num_slices``.
        traj_key: the entry that holds each item's trajectory id (one number per item).

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from rlpace.data import ReplayBuffer, TensorStorage
        >>> rb = ReplayBuffer(TensorStorage(20), sampler=SliceSampler(slice_len=3), batch_size=6)
        >>> episode = torch.tensor([0, 0, 0, 0, 1, 1, 2, 2, 2])
        >>> _ = rb.extend(TensorDict({"episode": episode}, [9]))
        >>> ids = rb.sample()["episode"].view(2, 3)
        >>> bool((ids == ids[:, :1]).all()) and set(ids[:, 0].tolist()) <= {0, 2}
        True
    """

    def __init__(
        self,
        slice_len: int | None = None,
        num_slices: int | None = None,
        traj_key: str | tuple[str, ...] = "episode",
    ):
        if (slice_len is None) == (num_slices is None):
            raise ValueError(
                f"SliceSampler takes exactly one of slice_len or num_slices; got "
                f"slice_len={slice_len!r}, num_slices={num_slices!r}"
            )
        for name, value in (("slice_len", slice_len), ("num_slices", num_slices)):
            if value is not None and (not isinstance(value, int) or value <= 0):
                raise ValueError(f"SliceSampler({name}=...) expects a positive int; got {value!r}")
        self.slice_len = slice_len
        self.num_slices = num_slices
        self.traj_key = traj_key
        self._cache_key: tuple | None = None
        self._runs: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None

    def _shape(self, batch_size: int) -> tuple[int, int]:
        per = self.slice_len or batch_size // self.num_slices
        if per == 0 or batch_size % per:
            raise ValueError(
                f"SliceSampler: batch size {batch_size} is not a multiple of the slice length "
                f"{per} (slice_len={self.slice_len}, num_slices={self.num_slices}); pick a batch "
                "size that divides into whole slices"
            )
        return batch_size // per, per

    def _trajectory_runs(self, storage):
        """(order, run_start, run_len) over committed slots in write order, cached per state."""
        ledger = storage.ledger
        key = (ledger.writes, len(ledger), ledger.generation)
        if key == self._cache_key:
            return self._runs
        order = torch.from_numpy(ledger.logical_order())
        _, slots = ledger.committed()
        if slots is not None:  # drop uncommitted slots; they also break runs
            keep = torch.from_numpy(ledger.valid[order.numpy()].astype(bool))
        else:
            keep = None
        traj = storage.column(self.traj_key, order).cpu().reshape(len(order), -1)
        if traj.shape[1] != 1:
            raise ValueError(
                f"SliceSampler: entry {self.traj_key!r} must hold one trajectory id per item; "
                f"it holds {traj.shape[1]} values per item"
            )
        traj = traj[:, 0]
        new_run = torch.ones(len(order), dtype=torch.bool)
        new_run[1:] = traj[1:] != traj[:-1]
        if keep is not None:
            new_run[1:] |= keep[1:] != keep[:-1]
        run_start = torch.nonzero(new_run).squeeze(1)
        run_len = torch.diff(run_start, append=torch.tensor([len(order)]))
        if keep is not None:
            ok = keep[run_start]
            run_start, run_len = run_start[ok], run_len[ok]
        self._cache_key, self._runs = key, (order, run_start, run_len)
        return self._runs

    def sample(self, storage, batch_size: int):
        _committed(storage)
        num, per = self._shape(batch_size)
        order, run_start, run_len = self._trajectory_runs(storage)
        eligible = torch.nonzero(run_len >= per).squeeze(1)
        if len(eligible) == 0:
            raise ValueError(
                f"SliceSampler: no trajectory holds {per} committed items (longest: "
                f"{int(run_len.max()) if len(run_len) else 0}); lower slice_len or add data"
            )
        runs = eligible[torch.randint(len(eligible), (num,))]
        room = (run_len[runs] - per + 1).to(torch.float64)
        starts = run_start[runs] + (torch.rand(num, dtype=torch.float64) * room).long()
        logical = (starts.unsqueeze(1) + torch.arange(per)).reshape(-1)
        return order[logical], {}

    def __getstate__(self) -> dict[str, Any]:
        return {
            "slice_len": self.slice_len,
            "num_slices": self.num_slices,
            "traj_key": self.traj_key,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state)
