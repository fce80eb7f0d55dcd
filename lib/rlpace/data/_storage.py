"""Storages: where a replay buffer's items live, and how other processes reach them.

``TensorStorage`` keeps one pre-allocated tensor per key (in shared memory by default
on CPU), ``MemmapStorage`` keeps them in memory-mapped files in a directory that can be
reopened later, and ``ListStorage`` (``_list_storage.py``) keeps arbitrary Python
objects in this process.
Tensor storages allocate on their first ``extend`` from that batch's structure; when
shared, the structure is written next to the data so a process that received the
storage before the first write attaches to the same files.

The description (``spec.json``) is written last, atomically, under the ledger's lock:
until it exists nobody attaches the leaf files, so an allocation whose writer was
killed is discarded and redone by the next one (:func:`_discard_unfinished_allocation`).
Temporary folders are created and swept by :mod:`rlpace.data._janitor`.
"""

from __future__ import annotations

import json
import os
import weakref
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tensordict import MemoryMappedTensor, TensorDict, TensorDictBase

from rlpace.data._indexing import index_slots
from rlpace.data._janitor import (
    IN_USE,
    create_owned_directory,
    hold_in_use,
    release_in_use,
    remove_owned_directory,
    remove_stale_temporaries,
)
from rlpace.data._ledger import FileLock, SlotLedger, _shared_array

FORMAT_VERSION = 1
_META = "rlpace-storage.json"
_SPEC = "spec.json"

Key = tuple[str, ...]
# the one entry a tensor storage keeps plain-tensor (non-TensorDict) items under
_TENSOR_KEY = "_rlpace_tensor"
_TENSOR_LEAF = (_TENSOR_KEY,)


def _check_max_size(max_size: Any, cls: str) -> int:
    if isinstance(max_size, bool) or not isinstance(max_size, int) or max_size <= 0:
        raise ValueError(
            f"{cls}(max_size=...) expects a positive int (the number of items it holds); "
            f"got {max_size!r}"
        )
    return max_size


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _dtype_of(name: str) -> torch.dtype:
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"storage spec names an unknown dtype {name!r}")
    return dtype


def _nest(flat: dict[Key, torch.Tensor]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in flat.items():
        cur = out
        for part in key[:-1]:
            cur = cur.setdefault(part, {})
        cur[key[-1]] = value
    return out


_LEAF_PREFIX = "leaf"
_LEAF_SUFFIX = ".memmap"
#: files a folder may hold before its storage is described (not "someone else's data")
_BOOKKEEPING = {"lock", IN_USE}


def _is_storage_file(stem: str) -> bool:
    """Whether ``stem`` names a file a storage writes (its temporaries may be swept)."""
    return stem in (_META, _SPEC) or stem.endswith(".bin")


def _discard_unfinished_allocation(directory: Path) -> None:
    """Remove leaf files of an allocation whose writer died before the spec named them.

    Call with the ledger's lock held and the spec missing: nobody attaches leaves
    before the spec exists, so these files are a dead allocator's and are redone.
    """
    remove_stale_temporaries(directory, _is_storage_file)
    for entry in os.scandir(directory):
        if entry.name.startswith(_LEAF_PREFIX) and entry.name.endswith(_LEAF_SUFFIX):
            os.unlink(entry.path)


def _shm_root() -> str | None:
    root = "/dev/shm"
    return root if os.path.isdir(root) and os.access(root, os.W_OK) else None


class _Storage:
    """What every storage offers a :class:`~rlpace.data.ReplayBuffer`."""

    max_size: int
    ledger: SlotLedger
    #: in-place assignments (``storage[i] = x``) made through this handle; samplers
    #: that cache what the items hold (slices) key their cache on it
    _revision = 0

    def __len__(self) -> int:
        return len(self.ledger)

    # ---- indexing ---------------------------------------------------------------
    def __getitem__(self, index: Any) -> Any:
        """The items at ``index`` among the slots written so far (see ``rlpace.data._indexing``).

        An int gives one item; a slice, list or tensor gives a batch.
        """
        slots, single = index_slots(index, min(self.ledger.writes, self.max_size))
        if single:
            return self.get(slots.reshape(1))[0]
        return self.get(slots)

    def __setitem__(self, index: Any, value: Any) -> None:
        """Overwrite written items in place (same keys, dtypes and shapes as stored)."""
        slots, single = index_slots(index, min(self.ledger.writes, self.max_size))
        self._assign(slots.reshape(-1), value, single)
        self._revision += 1

    def _assign(self, slots: torch.Tensor, value: Any, single: bool) -> None:
        raise NotImplementedError

    @property
    def shared(self) -> bool:
        """Whether other processes see this storage's items (and may extend it)."""
        return self.ledger.shared

    def extend(self, data: Any, on_reserve=None, on_commit=None) -> torch.Tensor:
        """Write a batch in the next slots and return the slots written."""
        plan, n = self._prepare(data)
        first = self.ledger.reserve(n, on_reserve)
        self._write(plan, first, n)
        self.ledger.commit(first, n, on_commit)
        return torch.from_numpy(self.ledger.slots(first, n))

    def empty(self, on_empty=None) -> None:
        """Forget every item (the allocation is kept)."""
        with self.ledger.lock:
            self.ledger.reset()
            if on_empty is not None:
                on_empty()

    def shared_array(self, name: str, shape: tuple[int, ...], dtype, fill=None) -> np.ndarray:
        """An array every process holding this storage sees (samplers keep state here)."""
        if self.ledger.directory is None:
            arr = np.zeros(shape, dtype)
            if fill is not None:
                arr[...] = fill
            return arr
        with self.ledger.lock:
            return _shared_array(self.ledger.directory / f"{name}.bin", dtype, shape, fill)

    # subclasses
    def _prepare(self, data: Any) -> tuple[Any, int]:
        raise NotImplementedError

    def _write(self, plan: Any, first: int, n: int) -> None:
        raise NotImplementedError

    def get(self, index: torch.Tensor) -> Any:
        raise NotImplementedError

    def column(self, key: Key | str, slots: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError


class _TensorStorageBase(_Storage):
    """One tensor per key with ``max_size`` rows; in this process or in a shared directory."""

    _kind = "tensor"

    def _setup(
        self,
        max_size: int,
        device: torch.device,
        directory: Path | None,
        owned: bool,
        in_use_fd: int | None = None,
    ):
        self.max_size = max_size
        self.device = device
        self._directory = directory
        self._owned = owned
        self._leaves: dict[Key, torch.Tensor] | None = None
        self._signature: dict[Key, tuple[torch.dtype, torch.Size]] = {}
        self._item_batch: torch.Size | None = None
        self._pid = os.getpid()
        if directory is not None:
            pid = os.getpid()
            if owned:
                self._finalizer = weakref.finalize(
                    self, remove_owned_directory, str(directory), pid, in_use_fd
                )
            elif in_use_fd is not None:
                self._finalizer = weakref.finalize(self, release_in_use, in_use_fd, pid)
            directory.mkdir(parents=True, exist_ok=True)
            with FileLock(directory / "lock"):  # two processes opening one new directory
                self._check_or_write_meta(directory)
        self.ledger = SlotLedger(max_size, directory)
        if directory is not None:
            self._attach_if_allocated()

    def _check_or_write_meta(self, directory: Path) -> None:
        meta_path = directory / _META
        if meta_path.exists():
            # half-written spec or shared arrays of a writer killed in this lock
            remove_stale_temporaries(directory, _is_storage_file)
            meta = json.loads(meta_path.read_text())
            version = meta.get("format_version")
            if version != FORMAT_VERSION:
                raise ValueError(
                    f"{directory} holds a storage in format version {version!r}; this rlpace "
                    f"reads version {FORMAT_VERSION}. Reopen it with the rlpace that wrote it, "
                    "or point the storage at an empty directory."
                )
            if meta.get("max_size") != self.max_size:
                raise ValueError(
                    f"{directory} holds a storage of max_size={meta.get('max_size')}, but "
                    f"max_size={self.max_size} was asked; pass max_size={meta.get('max_size')} "
                    "to reopen it, or use another directory"
                )
            return
        # a half-written meta is the only file a storage writes before the meta
        remove_stale_temporaries(directory, lambda stem: stem == _META)
        if any(p.name not in _BOOKKEEPING for p in directory.iterdir()):
            raise ValueError(
                f"{directory} is not empty and holds no rlpace storage ({_META} is missing); "
                "point the storage at an empty or new directory"
            )
        tmp = meta_path.with_name(f"{_META}.tmp{os.getpid()}")
        tmp.write_text(
            json.dumps(
                {
                    "format": "rlpace.data.storage",
                    "format_version": FORMAT_VERSION,
                    "max_size": self.max_size,
                }
            )
        )
        os.replace(tmp, meta_path)

    # ---- allocation -------------------------------------------------------------
    @property
    def allocated(self) -> bool:
        """Whether the first batch has fixed the keys, shapes and dtypes."""
        return self._leaves is not None or self._attach_if_allocated()

    def _attach_if_allocated(self) -> bool:
        if self._leaves is not None:
            return True
        if self._directory is None or not (self._directory / _SPEC).exists():
            return False
        self._attach(json.loads((self._directory / _SPEC).read_text()))
        return True

    def _attach(self, spec: dict) -> None:
        leaves, signature = {}, {}
        for leaf in spec["leaves"]:
            key = tuple(leaf["key"])
            dtype = _dtype_of(leaf["dtype"])
            shape = torch.Size(leaf["shape"])
            mm = MemoryMappedTensor.from_filename(
                str(self._directory / leaf["file"]), dtype, torch.Size([self.max_size, *shape])
            )
            leaves[key] = mm.as_subclass(torch.Tensor)
            signature[key] = (dtype, shape)
        self._item_batch = torch.Size(spec["item_batch"])
        self._signature = signature
        self._leaves = leaves

    def _allocate(self, data: TensorDictBase) -> None:
        signature = {}
        for key, value in data.items(include_nested=True, leaves_only=True):
            key = key if isinstance(key, tuple) else (key,)
            if not isinstance(value, torch.Tensor):
                raise TypeError(
                    f"{type(self).__name__} stores tensors; entry {key} holds "
                    f"{type(value).__name__}. Store it as a tensor, or use ListStorage for "
                    "arbitrary Python objects"
                )
            signature[key] = (value.dtype, value.shape[1:])
        if not signature:
            raise ValueError(f"{type(self).__name__}.extend got a TensorDict with no entries")
        if self._directory is None:
            with self.ledger.lock:  # threads of this process may race on the first extend
                if self._leaves is not None:
                    return
                leaves = {
                    key: torch.empty((self.max_size, *shape), dtype=dtype, device=self.device)
                    for key, (dtype, shape) in signature.items()
                }
                self._signature = signature
                self._item_batch = data.batch_size[1:]
                self._leaves = leaves  # published last: `allocated` reads it unlocked
            return
        with self.ledger.lock:
            if self._attach_if_allocated():  # another process allocated first
                return
            _discard_unfinished_allocation(self._directory)
            spec = {"format_version": FORMAT_VERSION, "item_batch": list(data.batch_size[1:])}
            spec["leaves"] = []
            for i, (key, (dtype, shape)) in enumerate(signature.items()):
                name = f"{_LEAF_PREFIX}{i:03d}_{'.'.join(key)}{_LEAF_SUFFIX}"
                MemoryMappedTensor.empty(
                    (self.max_size, *shape), dtype=dtype, filename=str(self._directory / name)
                )
                spec["leaves"].append(
                    {
                        "key": list(key),
                        "dtype": _dtype_name(dtype),
                        "shape": list(shape),
                        "file": name,
                    }
                )
            tmp = self._directory / f"{_SPEC}.tmp{os.getpid()}"
            tmp.write_text(json.dumps(spec))
            os.replace(tmp, self._directory / _SPEC)
            self._attach(spec)

    # ---- writing ----------------------------------------------------------------
    def _prepare(self, data: Any) -> tuple[list[tuple[torch.Tensor, torch.Tensor]], int]:
        if self._directory is None and os.getpid() != self._pid:
            raise RuntimeError(_not_shared_message(self, "was inherited by a forked process"))
        if isinstance(data, torch.Tensor):
            data = _tensor_batch(data)
        if not isinstance(data, TensorDictBase):
            raise TypeError(
                f"{type(self).__name__}.extend expects a TensorDict or a tensor with a leading "
                f"batch dimension; got {type(data).__name__}"
            )
        if data.batch_dims == 0:
            raise ValueError(
                "extend expects a batch (a TensorDict with at least one batch dimension); "
                "got batch_size=[]. Use add() for a single item"
            )
        n = data.batch_size[0]
        if n == 0:
            raise ValueError(
                "extend got an empty batch (batch_size[0] == 0); pass at least one item"
            )
        if not self.allocated:
            self._allocate(data)
        _check_plain(self, data)
        if data.batch_size[1:] != self._item_batch:
            raise ValueError(
                f"item batch shape mismatch: the storage holds items of batch shape "
                f"{list(self._item_batch)}, the batch has items of batch shape "
                f"{list(data.batch_size[1:])}"
            )
        plan = []
        for key, value in data.items(include_nested=True, leaves_only=True):
            key = key if isinstance(key, tuple) else (key,)
            expected = self._signature.get(key)
            if expected is None:
                raise KeyError(
                    f"extend got key {key!r} that the storage does not hold; the storage holds "
                    f"{sorted(self._signature)}. Extend with the same keys as the first batch"
                )
            if not isinstance(value, torch.Tensor):
                raise TypeError(f"entry {key} holds {type(value).__name__}, expected a tensor")
            if value.dtype != expected[0] or value.shape[1:] != expected[1]:
                raise ValueError(
                    f"entry {key}: the storage holds dtype {expected[0]} with item shape "
                    f"{list(expected[1])}; the batch has dtype {value.dtype} with item shape "
                    f"{list(value.shape[1:])}. Convert the batch to match (e.g. .to({expected[0]}))"
                )
            plan.append((self._leaves[key], value))
        if len(plan) != len(self._signature):
            missing = sorted(set(self._signature) - {k for k, _ in self._keys_of(data)})
            raise KeyError(
                f"extend got a batch without keys {missing} that the storage holds; every "
                "batch must carry the same keys as the first (the slots would keep stale "
                "values there). Add those entries to the batch (e.g. zeros), or keep such "
                "batches in a buffer of their own"
            )
        if n > self.max_size:  # only the newest max_size items would survive
            plan = [(dst, src[n - self.max_size :]) for dst, src in plan]
            n = self.max_size
        return plan, n

    @staticmethod
    def _keys_of(data: TensorDictBase):
        for key, value in data.items(include_nested=True, leaves_only=True):
            yield (key if isinstance(key, tuple) else (key,)), value

    def _write(self, plan, first: int, n: int) -> None:
        start = first % self.max_size
        stop = start + n
        if stop <= self.max_size:
            for dst, src in plan:
                dst[start:stop].copy_(src)
        else:
            k = self.max_size - start
            for dst, src in plan:
                dst[start:].copy_(src[:k])
                dst[: n - k].copy_(src[k:])

    # ---- reading ----------------------------------------------------------------
    def get(self, index: torch.Tensor) -> TensorDict | torch.Tensor:
        """The items at ``index`` (slots): one TensorDict, or one tensor for plain-tensor items."""
        if self._leaves is None and not self._attach_if_allocated():
            raise RuntimeError("the storage holds no data yet; extend it first")
        if index.device != self.device:
            index = index.to(self.device)
        # index_select, not leaf[index]: advanced indexing goes through a parallel
        # kernel that stalls under CPU contention and costs twice as much when idle
        flat = index.reshape(-1)
        leaves = self._leaves
        if len(leaves) == 1 and _TENSOR_LEAF in leaves:  # plain-tensor items
            out = torch.index_select(leaves[_TENSOR_LEAF], 0, flat)
            return out if index.dim() == 1 else out.reshape(*index.shape, *out.shape[1:])
        gathered = {key: torch.index_select(leaf, 0, flat) for key, leaf in leaves.items()}
        if index.dim() != 1:
            gathered = {k: v.reshape(*index.shape, *v.shape[1:]) for k, v in gathered.items()}
        return TensorDict(_nest(gathered), batch_size=[*index.shape, *self._item_batch])

    def _assign(self, slots: torch.Tensor, value: Any, single: bool) -> None:
        if not self.allocated:
            raise RuntimeError("the storage holds no data yet; extend it before assigning items")
        if single and isinstance(value, TensorDictBase | torch.Tensor):
            value = value.unsqueeze(0)
        plan, n = self._prepare(value)
        if n != len(slots):
            raise ValueError(
                f"storage[index] = value: the index names {len(slots)} slots, the value holds "
                f"{n} items; pass one item per slot"
            )
        slots = slots.to(self.device)
        for dst, src in plan:
            dst.index_copy_(0, slots, src.to(dst.device))

    def get_unless_overwritten(self, index: torch.Tensor) -> TensorDict | None:
        """:meth:`get`, or ``None`` when a writer re-reserved one of the slots meanwhile.

        Once the ring has wrapped, a slot can be reserved for new data while a reader
        copies it. The reader compares the slots' owning tickets (which only grow) and
        commit flags before and after the copy; any change means a torn read.
        """
        ledger = self.ledger
        if ledger.directory is None:  # no other process writes here
            return self.get(index)
        if ledger.writes <= self.max_size:
            data = self.get(index)
            # nothing overwritten yet; if the ring wrapped during the copy, read again
            return data if ledger.writes <= self.max_size else None
        slots = index.reshape(-1).numpy()
        owner = ledger.owner[slots]
        valid = ledger.valid[slots]
        data = self.get(index)
        if valid.all() and ledger.valid[slots].all() and np.array_equal(owner, ledger.owner[slots]):
            return data
        return None

    def column(self, key: Key | str, slots: torch.Tensor) -> torch.Tensor:
        """One entry's values at ``slots``."""
        key = key if isinstance(key, tuple) else (key,)
        if self._leaves is None and not self._attach_if_allocated():
            raise RuntimeError("the storage holds no data yet; extend it first")
        if key not in self._leaves:
            raise KeyError(f"the storage holds no entry {key!r}; it holds {sorted(self._leaves)}")
        return torch.index_select(self._leaves[key], 0, slots.to(self.device).reshape(-1))

    # ---- state ------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """A copy of the items and the write position, detached from shared memory.

        Only the slots written so far are copied: the ring fills slots ``0, 1, ...`` in
        order, so a buffer of capacity 1,000,000 holding 5,000 items saves 5,000 rows.
        """
        data = None
        filled = min(self.ledger.writes, self.max_size)
        if self.allocated and filled:  # plain-tensor items stay under their one key
            data = TensorDict(
                _nest({k: v[:filled].clone() for k, v in self._leaves.items()}),
                batch_size=[filled, *self._item_batch],
            )
        return {
            "kind": self._kind,
            "max_size": self.max_size,
            "writes": self.ledger.writes,
            "valid": torch.from_numpy(np.array(self.ledger.valid, dtype=np.uint8)),
            "data": data,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Replace the contents with a :meth:`state_dict`."""
        _check_state(self, state)
        data = state["data"]
        if data is not None:
            if not self.allocated:
                self._allocate(data)
            plan, n = self._prepare(data)
            for dst, src in plan:
                dst[:n].copy_(src)
        with self.ledger.lock:
            self.ledger.restore(int(state["writes"]), state["valid"].numpy())

    # ---- pickling ---------------------------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        if self._directory is None:
            raise TypeError(_not_shared_message(self, "cannot be sent to another process"))
        return {
            "max_size": self.max_size,
            "device": str(self.device),
            "directory": str(self._directory),
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        directory = Path(state["directory"])
        try:
            # marks the folder as in use first, so no sweeper removes it from now on
            in_use_fd = hold_in_use(directory)
        except FileNotFoundError:
            in_use_fd = None
        if not (directory / _META).exists():
            release_in_use(in_use_fd, os.getpid())
            raise FileNotFoundError(
                f"the shared storage at {state['directory']} is gone: the process that "
                "created it has freed it. Keep the creating buffer alive while others use "
                "it, or use MemmapStorage(max_size, path=...) for files that outlive it"
            )
        self._setup(state["max_size"], torch.device(state["device"]), directory, False, in_use_fd)


def _tensor_batch(data: torch.Tensor) -> TensorDict:
    """A plain-tensor batch as the one-entry TensorDict a tensor storage keeps."""
    if data.dim() == 0:
        raise ValueError(
            "extend expects a batch (a tensor with a leading batch dimension); got a 0-d "
            "tensor. Use add() for a single item"
        )
    return TensorDict({_TENSOR_KEY: data}, batch_size=data.shape[:1])


def _check_plain(storage: _TensorStorageBase, data: TensorDictBase) -> None:
    """Refuse a TensorDict into a storage of plain tensors, and the other way round."""
    holds_tensors = _TENSOR_LEAF in storage._leaves and len(storage._leaves) == 1
    if holds_tensors != (_TENSOR_KEY in data.keys()):  # noqa: SIM118 (a TensorDict refuses `in`)
        have = "plain tensors" if holds_tensors else "TensorDicts"
        got = "a TensorDict" if holds_tensors else "a plain tensor"
        raise TypeError(
            f"{type(storage).__name__} holds {have} (fixed by its first batch); got {got}. "
            f"Extend with {have}, or use another storage"
        )


def _not_shared_message(storage: _Storage, what: str) -> str:
    return (
        f"{type(storage).__name__} {what}: its items live in this process's memory, so "
        "another process would extend and sample a private copy. Use "
        "TensorStorage(max_size) (CPU shared memory, the default) or MemmapStorage(max_size) "
        "to share a buffer between processes"
    )


def _check_state(storage: _Storage, state: dict[str, Any]) -> None:
    if state.get("kind") != storage._kind or state.get("max_size") != storage.max_size:
        raise ValueError(
            f"load_state_dict: this is a {storage._kind} storage of max_size="
            f"{storage.max_size}; the state is a {state.get('kind')!r} storage of max_size="
            f"{state.get('max_size')!r}. Load it into a storage built the same way"
        )


class TensorStorage(_TensorStorageBase):
    """A storage of one pre-allocated tensor per key, shared between processes on CPU.

    The tensors are allocated by the first ``extend`` from that batch's keys, dtypes
    and shapes (nested keys and trailing dimensions kept). With ``shared=True`` (the
    default on CPU) they live in shared memory (``/dev/shm``), with the write cursor,
    so a buffer sent to other processes -- before or after its first write -- is
    extended and sampled by all of them.

    Args:
        max_size: how many items the storage holds; older items are overwritten.
        device: where the tensors live. ``"cuda"`` storages stay in one process.
        shared: keep the items in shared memory (default: ``True`` on CPU, else ``False``).

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> storage = TensorStorage(100)
        >>> storage.extend(TensorDict({"obs": torch.zeros(3, 4)}, [3]))
        tensor([0, 1, 2])
        >>> len(storage), storage.get(torch.tensor([1]))["obs"].shape
        (3, torch.Size([1, 4]))
    """

    def __init__(
        self, max_size: int, device: str | torch.device = "cpu", shared: bool | None = None
    ):
        max_size = _check_max_size(max_size, "TensorStorage")
        device = torch.device(device)
        if shared is None:
            shared = device.type == "cpu"
        if shared and device.type != "cpu":
            raise ValueError(
                f"TensorStorage(shared=True) keeps items in CPU shared memory, but device="
                f"{device} was asked; use shared=False for a {device.type} storage, or "
                "device='cpu' to share it between processes"
            )
        directory = in_use_fd = None
        if shared:
            directory, in_use_fd = create_owned_directory("rlpace-rb-", _shm_root())
        self._setup(max_size, device, directory, shared, in_use_fd)


class MemmapStorage(_TensorStorageBase):
    """A storage of memory-mapped files in a directory, shared and reopenable.

    Each key is a file of ``max_size`` rows (tensordict's ``MemoryMappedTensor``); the
    write cursor and per-item commit flags are files too. Any process that receives
    the storage maps the same files, and ``MemmapStorage(max_size, path=...)`` on a
    directory written before reopens it with every item that was fully written.

    Args:
        max_size: how many items the storage holds; older items are overwritten.
        path: the directory (created if missing). ``None``: a temporary directory,
            removed when this storage object is garbage collected.

    Example:
        >>> import tempfile, torch
        >>> from tensordict import TensorDict
        >>> path = tempfile.mkdtemp()
        >>> storage = MemmapStorage(10, path=path)
        >>> _ = storage.extend(TensorDict({"obs": torch.arange(4.0)}, [4]))
        >>> reopened = MemmapStorage(10, path=path)
        >>> len(reopened), reopened.get(torch.tensor([3]))["obs"]
        (4, tensor([3.]))
        >>> import shutil; shutil.rmtree(path)
    """

    def __init__(self, max_size: int, path: str | os.PathLike | None = None):
        max_size = _check_max_size(max_size, "MemmapStorage")
        if path is None:
            directory, in_use_fd = create_owned_directory("rlpace-memmap-", None)
            self._setup(max_size, torch.device("cpu"), directory, True, in_use_fd)
        else:
            self._setup(max_size, torch.device("cpu"), Path(path), False)

    @property
    def path(self) -> Path:
        """The directory that holds the files."""
        return self._directory
