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
    #: the random number generator draws use (``None``: torch's global one); set by
    #: ``ReplayBuffer(generator=...)`` / ``ReplayBuffer.set_rng``, never sent to
    #: another process
    generator: torch.Generator | None = None
    #: called by the ledger with the lock held (only samplers that keep shared state)
    on_reserve = None
    on_commit = None

    def attach(self, storage) -> None:
        """Bind to a storage (allocate shared state); called by the buffer."""

    def sample(self, storage, batch_size: int) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        raise NotImplementedError

    def complete_info(self, data: Any, info: dict[str, Any]) -> dict[str, Any]:
        """``info`` with entries derived from the gathered TensorDict batch (default: as is).

        The buffer calls it after reading the sampled items, so a sampler can build
        entries from what the items hold without reading the storage twice.
        """
        return info

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

    def __getstate__(self) -> dict[str, Any]:
        # a generator is per process: a copy sent elsewhere draws from its own RNG
        state = dict(self.__dict__)
        state.pop("generator", None)
        return state


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
        index = torch.randint(n, (batch_size,), generator=self.generator)
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
            order = torch.randperm(n, generator=self.generator) if self.shuffle else torch.arange(n)
            self._order = order if slots is None else slots[order]
            self._pos = 0
            self._generation = generation
        self._generation = generation
        self._last_batch = batch_size
        index = self._order[self._pos : self._pos + batch_size]
        self._pos += len(index)
        return index, {}

    def state_dict(self) -> dict[str, Any]:
        order = None if self._order is None else self._order.clone()
        return {"order": order, "pos": self._pos}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        order = state.get("order")
        self._order = None if order is None else torch.as_tensor(order).clone()
        self._pos = int(state.get("pos", 0))
        self._generation = None  # the loaded epoch holds until the next empty()

    def __getstate__(self) -> dict[str, Any]:
        # the epoch is per process: a copy sent elsewhere starts its own
        return {"drop_last": self.drop_last, "shuffle": self.shuffle}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state)
