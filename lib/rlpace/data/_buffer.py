"""The replay buffer: a storage, a sampler and a writer behind one small API."""

from __future__ import annotations

import json
import os
import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase

from rlpace.data._samplers import EmptyBufferError, RandomSampler, Sampler
from rlpace.data._storage import FORMAT_VERSION, _Storage
from rlpace.data._writers import RoundRobinWriter

_DUMP_META = "rlpace-replay-buffer.json"
_DUMP_STATE = "state.pt"
_TORN_READ_RETRIES = 32


class ReplayBuffer:
    """A replay buffer that many processes may extend and sample at once.

    Send it to another process (``multiprocessing`` or ``torch.multiprocessing``, fork
    or spawn) and both see the same items, provided its storage is shared
    (``TensorStorage`` on CPU, ``MemmapStorage``). Writers reserve slots atomically,
    write outside any lock and then commit, so no item is lost or duplicated and
    ``len`` and the samplers only ever count fully written items.

    A forked child that runs torch ops should call ``torch.set_num_threads(1)`` first
    (as torch's DataLoader workers do): GNU OpenMP's thread pool does not survive fork,
    and a parallel op in the child can hang once the parent has run one.

    Args:
        storage: where items live (``TensorStorage``, ``MemmapStorage``, ``ListStorage``).
        sampler: which items ``sample`` returns (default: ``RandomSampler()``).
        writer: where new items go (default: ``RoundRobinWriter()``).
        batch_size: the default ``sample`` size.
        generator: the ``torch.Generator`` the sampler draws from, for reproducible
            sampling (default: torch's global RNG); see :meth:`set_rng`.

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from rlpace.data import ReplayBuffer, TensorStorage
        >>> rb = ReplayBuffer(TensorStorage(1000), batch_size=32)
        >>> rb.extend(TensorDict({"obs": torch.randn(8, 4)}, [8]))
        tensor([0, 1, 2, 3, 4, 5, 6, 7])
        >>> batch = rb.sample()
        >>> batch["obs"].shape, batch["index"].shape, len(rb)
        (torch.Size([32, 4]), torch.Size([32]), 8)
    """

    def __init__(
        self,
        storage: _Storage,
        sampler: Sampler | None = None,
        writer: RoundRobinWriter | None = None,
        batch_size: int | None = None,
        generator: torch.Generator | None = None,
    ):
        if not isinstance(storage, _Storage):
            raise TypeError(
                "ReplayBuffer(storage=...) expects TensorStorage, MemmapStorage or "
                f"ListStorage; got {type(storage).__name__}"
            )
        sampler = RandomSampler() if sampler is None else sampler
        if not isinstance(sampler, Sampler):
            raise TypeError(
                f"ReplayBuffer(sampler=...) expects an rlpace.data sampler; got "
                f"{type(sampler).__name__}"
            )
        writer = RoundRobinWriter() if writer is None else writer
        if not isinstance(writer, RoundRobinWriter):
            raise TypeError(
                f"ReplayBuffer(writer=...) expects RoundRobinWriter; got {type(writer).__name__}"
            )
        if batch_size is not None:
            _check_batch_size(batch_size)
        self._storage = storage
        self._sampler = sampler
        self._writer = writer
        self.batch_size = batch_size
        self._generator: torch.Generator | None = None
        sampler.attach(storage)
        if generator is not None:
            self.set_rng(generator)

    def set_rng(self, generator: torch.Generator | None) -> None:
        """Draw samples from ``generator`` (``None``: torch's global RNG).

        Two buffers holding the same items with generators seeded alike sample the
        same indices. The generator belongs to this process: a buffer sent to
        another process samples from that process's global RNG until ``set_rng``
        is called there.

        Example:
            >>> from tensordict import TensorDict
            >>> from rlpace.data import ReplayBuffer, TensorStorage
            >>> rb = ReplayBuffer(TensorStorage(100))
            >>> _ = rb.extend(TensorDict({"x": torch.arange(100)}, [100]))
            >>> rb.set_rng(torch.Generator().manual_seed(0)); first = rb.sample(5)["x"]
            >>> rb.set_rng(torch.Generator().manual_seed(0)); again = rb.sample(5)["x"]
            >>> torch.equal(first, again)
            True
        """
        if generator is not None and not isinstance(generator, torch.Generator):
            raise TypeError(
                f"set_rng expects a torch.Generator (or None for the global RNG); got "
                f"{type(generator).__name__}"
            )
        self._generator = generator
        self._sampler.generator = generator

    @property
    def generator(self) -> torch.Generator | None:
        """The generator samples are drawn from (``None``: torch's global RNG)."""
        return self._generator

    @property
    def write_count(self) -> int:
        """Items written since the buffer was created or last emptied, by every process.

        Counts every item an ``extend`` reserved, overwritten ones included, so it
        keeps growing once the ring is full while ``len`` stays at ``max_size``.

        Example:
            >>> from tensordict import TensorDict
            >>> from rlpace.data import ReplayBuffer, TensorStorage
            >>> rb = ReplayBuffer(TensorStorage(4))
            >>> _ = rb.extend(TensorDict({"x": torch.arange(6)}, [6]))
            >>> _ = rb.extend(TensorDict({"x": torch.arange(3)}, [3]))
            >>> rb.write_count, len(rb)
            (7, 4)
        """
        return self._storage.ledger.writes

    @property
    def storage(self) -> _Storage:
        """The storage holding the items."""
        return self._storage

    @property
    def sampler(self) -> Sampler:
        """The sampler choosing the items ``sample`` returns."""
        return self._sampler

    def __len__(self) -> int:
        return len(self._storage)

    def __getitem__(self, index: Any) -> Any:
        """Items by storage index: ``rb[3]``, ``rb[:10]``, ``rb[tensor]``; ``rb["obs"]``: one entry of all.

        Indices address the slots written so far in storage order (slot ``i`` holds
        the ``i``-th item written until the ring wraps); negative ones count from the
        end. Unlike :meth:`sample`, no ``index`` entry is added.

        Example:
            >>> from tensordict import TensorDict
            >>> from rlpace.data import ReplayBuffer, TensorStorage
            >>> rb = ReplayBuffer(TensorStorage(10))
            >>> _ = rb.extend(TensorDict({"x": torch.arange(5) * 10}, [5]))
            >>> rb[:3]["x"], rb[-1]["x"], rb["x"]
            (tensor([ 0, 10, 20]), tensor(40), tensor([ 0, 10, 20, 30, 40]))
        """
        if isinstance(index, str) or (
            isinstance(index, tuple) and index and all(isinstance(k, str) for k in index)
        ):
            return self._storage[:][index]
        return self._storage[index]

    def __setitem__(self, index: Any, value: Any) -> None:
        """Overwrite written items in place, e.g. ``rb[idx] = relabelled`` (same layout as stored).

        Example:
            >>> from tensordict import TensorDict
            >>> from rlpace.data import ReplayBuffer, TensorStorage
            >>> rb = ReplayBuffer(TensorStorage(10))
            >>> _ = rb.extend(TensorDict({"x": torch.zeros(3)}, [3]))
            >>> rb[1] = TensorDict({"x": torch.tensor(7.0)}, [])
            >>> rb[:]["x"]
            tensor([0., 7., 0.])
        """
        self._storage[index] = value

    def __repr__(self) -> str:
        return (
            f"ReplayBuffer(storage={type(self._storage).__name__}(max_size="
            f"{self._storage.max_size}), sampler={type(self._sampler).__name__}, "
            f"len={len(self)}, batch_size={self.batch_size})"
        )

    # ---- writing ----------------------------------------------------------------
    def extend(self, data: Any) -> torch.Tensor:
        """Append a batch of items: a TensorDict or a tensor along its first dim (or a list for ListStorage).

        Returns:
            The slots written, in the batch's order.

        Example:
            >>> from tensordict import TensorDict
            >>> from rlpace.data import ReplayBuffer, TensorStorage
            >>> rb = ReplayBuffer(TensorStorage(5))
            >>> rb.extend(TensorDict({"r": torch.ones(2)}, [2]))
            tensor([0, 1])
        """
        return self._writer.extend(
            self._storage, data, self._sampler.on_reserve, self._sampler.on_commit
        )

    def add(self, item: Any) -> int:
        """Append one item; returns its slot.

        Example:
            >>> from tensordict import TensorDict
            >>> from rlpace.data import ReplayBuffer, TensorStorage
            >>> rb = ReplayBuffer(TensorStorage(5))
            >>> rb.add(TensorDict({"r": torch.tensor(1.0)}, []))
            0
        """
        batch = item.unsqueeze(0) if isinstance(item, TensorDictBase | torch.Tensor) else [item]
        return int(self.extend(batch)[0])

    def empty(self) -> None:
        """Forget every item, in every process that shares the buffer.

        Example:
            >>> from tensordict import TensorDict
            >>> from rlpace.data import ReplayBuffer, TensorStorage
            >>> rb = ReplayBuffer(TensorStorage(5))
            >>> _ = rb.extend(TensorDict({"r": torch.ones(2)}, [2]))
            >>> rb.empty(); len(rb)
            0
        """
        self._storage.empty(self._sampler.on_empty)

    def update_priority(self, index: Any, priority: Any) -> None:
        """Set the priorities of items (``PrioritizedSampler`` only).

        Example:
            >>> from tensordict import TensorDict
            >>> from rlpace.data import PrioritizedSampler, ReplayBuffer, TensorStorage
            >>> rb = ReplayBuffer(TensorStorage(8), sampler=PrioritizedSampler(8, 1.0, 1.0))
            >>> _ = rb.extend(TensorDict({"r": torch.ones(4)}, [4]))
            >>> rb.update_priority(torch.tensor([0, 1, 2, 3]), torch.tensor([0.0, 0.0, 1.0, 0.0]))
            >>> rb.sample(5)["index"].tolist()
            [2, 2, 2, 2, 2]
        """
        update = getattr(self._sampler, "update_priority", None)
        if update is None:
            raise TypeError(
                f"update_priority needs a PrioritizedSampler; this buffer samples with "
                f"{type(self._sampler).__name__}"
            )
        update(self._storage, index, priority)

    # ---- reading ----------------------------------------------------------------
    def sample(self, batch_size: int | None = None, return_info: bool = False) -> Any:
        """Draw a batch of committed items.

        Args:
            batch_size: how many items (default: the buffer's ``batch_size``).
            return_info: also return the sampling info (``index``, ``weight``, slice
                flags) as a dict, as ``(data, info)``.

        Returns:
            A TensorDict with the items and an ``index`` entry (their slots), plus
            ``weight`` for prioritized sampling; a tensor for plain-tensor items and
            a list for other objects (these carry no ``index``: use ``return_info``).

        Example:
            >>> from tensordict import TensorDict
            >>> from rlpace.data import ReplayBuffer, TensorStorage
            >>> rb = ReplayBuffer(TensorStorage(5))
            >>> _ = rb.extend(TensorDict({"r": torch.arange(5)}, [5]))
            >>> batch = rb.sample(3)
            >>> bool((batch["r"] == batch["index"]).all())
            True
        """
        if batch_size is None:
            batch_size = self.batch_size
            if batch_size is None:
                raise ValueError(
                    "sample() needs a batch size: pass sample(batch_size) or build the "
                    "buffer with ReplayBuffer(..., batch_size=N)"
                )
        else:
            _check_batch_size(batch_size)
        if len(self._storage) == 0:
            raise EmptyBufferError(
                "cannot sample: the buffer holds no committed item; extend it before sampling"
            )
        storage = self._storage
        if not hasattr(storage, "get_unless_overwritten"):
            index, info = self._sampler.sample(storage, batch_size)
            data = storage.get(index)
        else:
            for _ in range(_TORN_READ_RETRIES):
                index, info = self._sampler.sample(storage, batch_size)
                data = storage.get_unless_overwritten(index)
                if data is not None:
                    break
            else:
                raise RuntimeError(
                    f"sample: writers overwrote sampled items {_TORN_READ_RETRIES} times in a row "
                    f"while they were read; the buffer (max_size={storage.max_size}) is too "
                    "small for its write rate. Give it a larger max_size"
                )
        if isinstance(data, TensorDictBase):
            info = self._sampler.complete_info(data, info)
            data.set("index", index.to(data.device) if data.device is not None else index)
            for key, value in info.items():
                data.set(key, value)
        if return_info:
            return data, {"index": index, **info}
        return data

    def __iter__(self) -> Iterator[Any]:
        """Batches of ``batch_size``: one epoch for samplers that have one, else endless.

        Example:
            >>> from tensordict import TensorDict
            >>> from rlpace.data import ReplayBuffer, SamplerWithoutReplacement, TensorStorage
            >>> rb = ReplayBuffer(TensorStorage(10), SamplerWithoutReplacement(), batch_size=4)
            >>> _ = rb.extend(TensorDict({"r": torch.arange(10)}, [10]))
            >>> [len(b) for b in rb]
            [4, 4, 2]
        """
        if self.batch_size is None:
            raise ValueError(
                "iterating a buffer needs ReplayBuffer(..., batch_size=N); none was given"
            )
        sampler = self._sampler
        if not sampler.has_epochs:
            while True:
                yield self.sample()
        sampler.start_epoch()
        if len(self) == 0:
            return
        while True:
            yield self.sample()
            if sampler.ran_out:
                return

    # ---- state ------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Items, write position and sampler state, as plain tensors (a copy).

        Example:
            >>> from tensordict import TensorDict
            >>> from rlpace.data import ReplayBuffer, TensorStorage
            >>> rb = ReplayBuffer(TensorStorage(5))
            >>> _ = rb.extend(TensorDict({"r": torch.arange(3)}, [3]))
            >>> other = ReplayBuffer(TensorStorage(5))
            >>> other.load_state_dict(rb.state_dict())
            >>> len(other), other.sample(2)["r"].shape
            (3, torch.Size([2]))
        """
        state = {
            "format_version": FORMAT_VERSION,
            "storage": self._storage.state_dict(),
            # a copy: the sampler's tensors go on changing with the buffer
            "sampler": _copy_tensors(self._sampler.state_dict()),
        }
        if self._generator is not None:
            state["generator"] = self._generator.get_state()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Replace this buffer's contents with a :meth:`state_dict`.

        Example:
            >>> from rlpace.data import ReplayBuffer, TensorStorage
            >>> ReplayBuffer(TensorStorage(5)).load_state_dict({"format_version": 0})
            Traceback (most recent call last):
            ...
            ValueError: replay-buffer state has format version 0; this rlpace reads version 1. Load it with the rlpace that saved it
        """
        version = state.get("format_version")
        if version != FORMAT_VERSION:
            raise ValueError(
                f"replay-buffer state has format version {version!r}; this rlpace reads "
                f"version {FORMAT_VERSION}. Load it with the rlpace that saved it"
            )
        self._storage.load_state_dict(state["storage"])
        # a copy: later changes to ``state`` must not reach the buffer, nor the other way
        self._sampler.load_state_dict(_copy_tensors(state["sampler"]))
        if state.get("generator") is not None:
            generator = self._generator if self._generator is not None else torch.Generator()
            generator.set_state(state["generator"])
            self.set_rng(generator)

    def dumps(self, path: str | os.PathLike) -> None:
        """Save the buffer's state to directory ``path`` (created if missing).

        Example:
            >>> import tempfile
            >>> from tensordict import TensorDict
            >>> from rlpace.data import ReplayBuffer, TensorStorage
            >>> rb = ReplayBuffer(TensorStorage(5))
            >>> _ = rb.extend(TensorDict({"r": torch.arange(3)}, [3]))
            >>> path = tempfile.mkdtemp()
            >>> rb.dumps(path)
            >>> other = ReplayBuffer(TensorStorage(5))
            >>> other.loads(path)
            >>> len(other)
            3
            >>> import shutil; shutil.rmtree(path)
        """
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        torch.save(self.state_dict(), path / _DUMP_STATE)
        (path / _DUMP_META).write_text(
            json.dumps({"format": "rlpace.data.ReplayBuffer", "format_version": FORMAT_VERSION})
        )

    def loads(self, path: str | os.PathLike) -> None:
        """Load a buffer saved by :meth:`dumps` into this one (see :meth:`dumps`).

        Example:
            >>> import tempfile
            >>> from rlpace.data import ReplayBuffer, TensorStorage
            >>> with tempfile.TemporaryDirectory() as empty:
            ...     ReplayBuffer(TensorStorage(5)).loads(empty)
            Traceback (most recent call last):
            ...
            FileNotFoundError: ... holds no saved replay buffer (rlpace-replay-buffer.json is missing); pass the directory given to ReplayBuffer.dumps
        """
        path = Path(path)
        meta_path = path / _DUMP_META
        if not meta_path.exists():
            raise FileNotFoundError(
                f"{path} holds no saved replay buffer ({_DUMP_META} is missing); pass the "
                "directory given to ReplayBuffer.dumps"
            )
        version = json.loads(meta_path.read_text()).get("format_version")
        if version != FORMAT_VERSION:
            raise ValueError(
                f"{path} holds a replay buffer saved in format version {version!r}; this "
                f"rlpace reads version {FORMAT_VERSION}. Load it with the rlpace that saved it"
            )
        self.load_state_dict(_load_tensors_only(path / _DUMP_STATE))

    # ---- pickling ---------------------------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        return {
            "storage": self._storage,
            "sampler": self._sampler,
            "writer": self._writer,
            "batch_size": self.batch_size,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._storage = state["storage"]
        self._sampler = state["sampler"]
        self._writer = state["writer"]
        self.batch_size = state["batch_size"]
        self._generator = None  # per process (see set_rng)
        self._sampler.attach(self._storage)


def _copy_tensors(tree: Any) -> Any:
    """``tree`` with every tensor (and TensorDict) in its dicts, lists and tuples cloned."""
    if isinstance(tree, torch.Tensor | TensorDictBase):
        return tree.clone()
    if isinstance(tree, dict):
        return {key: _copy_tensors(value) for key, value in tree.items()}
    if isinstance(tree, list | tuple):
        return type(tree)(_copy_tensors(value) for value in tree)
    return tree


def _load_tensors_only(file: Path) -> dict[str, Any]:
    """``torch.load`` that runs no pickled code: tensors, TensorDicts, plain containers."""
    from tensordict import LazyStackedTensorDict
    from tensordict._reductions import _make_td

    from rlpace.data._list_storage import _Row  # a ListStorage item: (batch, row)

    try:
        with torch.serialization.safe_globals([_make_td, TensorDict, LazyStackedTensorDict, _Row]):
            return torch.load(file, weights_only=True)
    except pickle.UnpicklingError:
        raise ValueError(
            f"{file} holds Python objects other than tensors, TensorDicts and plain "
            "containers (e.g. a ListStorage of custom objects, or a file that is not an "
            "rlpace dump); loads() refuses to run the code that unpickling them would run. "
            f"If you trust the file: rb.load_state_dict(torch.load({str(file)!r}, "
            "weights_only=False))"
        ) from None


def _check_batch_size(batch_size: Any) -> None:
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
        raise ValueError(f"batch size must be a positive int; got {batch_size!r}")
