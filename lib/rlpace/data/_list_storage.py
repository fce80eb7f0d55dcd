"""The list storage: arbitrary Python objects (or batches kept by reference) in this process."""

from __future__ import annotations

import copy
import os
from typing import Any, NamedTuple

import torch
from tensordict import LazyStackedTensorDict, TensorDictBase

from rlpace.data._ledger import SlotLedger
from rlpace.data._storage import Key, _check_max_size, _check_state, _not_shared_message, _Storage


def _take(batch: TensorDictBase | torch.Tensor, rows: torch.Tensor) -> Any:
    """``batch[rows]`` through index_select (see :meth:`_TensorStorageBase.get`).

    A lazy stack (items of different shapes, e.g. token sequences of different
    lengths) is indexed as a lazy stack: there is no dense tensor to select from.
    """
    if isinstance(batch, torch.Tensor):
        return torch.index_select(batch, 0, rows)
    if isinstance(batch, LazyStackedTensorDict):
        return batch[rows]
    return batch.apply(
        lambda t: torch.index_select(t, 0, rows), batch_size=[len(rows), *batch.batch_size[1:]]
    )


class _Row(NamedTuple):
    """One item of a batch (TensorDict or tensor) held by a ListStorage: the batch and the row."""

    batch: TensorDictBase | torch.Tensor
    row: int


def _entry(item: Any, key: Key | str) -> Any:
    """``item[key]``, or a KeyError that names the key when the item has no such entry."""
    value = item.get(key, None) if isinstance(item, TensorDictBase) else None
    if value is None:
        try:
            value = item[key]
        except (KeyError, TypeError, IndexError):
            raise KeyError(f"the stored items hold no entry {key!r}") from None
    return value


def _stack_items(items: list[Any]) -> Any:
    """Stack items one by one; items of different shapes give a lazy stack."""
    try:
        return torch.stack(items)
    except Exception:
        if all(isinstance(x, TensorDictBase) for x in items):
            return LazyStackedTensorDict.lazy_stack(items)
        return items  # tensors of different shapes


class ListStorage(_Storage):
    """A storage of arbitrary Python objects in a list, private to this process.

    ``extend`` takes a list of objects, or a TensorDict or tensor batch stored item
    by item; reading stacks TensorDict (or tensor) items back into one TensorDict (or
    tensor) and returns other objects as a list. Items of different shapes (a lazy
    stack of token sequences of different lengths, as an LLM environment returns)
    come back as a lazy stack. It keeps references, not copies: a batch changed in place
    after ``extend`` changes the stored items too (TensorStorage copies). It cannot be
    shared: sending it to another process raises.

    Args:
        max_size: how many items the storage holds; older items are overwritten.

    Example:
        >>> storage = ListStorage(10)
        >>> storage.extend(["a", {"b": 1}])
        tensor([0, 1])
        >>> storage.get(torch.tensor([1, 0]))
        [{'b': 1}, 'a']
    """

    _kind = "list"

    def __init__(self, max_size: int):
        self.max_size = _check_max_size(max_size, "ListStorage")
        self.ledger = SlotLedger(self.max_size, None)
        self._items: list[Any] = [None] * self.max_size
        self._pid = os.getpid()

    def _prepare(self, data: Any) -> tuple[list[Any], int]:
        if os.getpid() != self._pid:
            raise RuntimeError(_not_shared_message(self, "was inherited by a forked process"))
        if isinstance(data, TensorDictBase):
            if data.batch_dims == 0:
                raise ValueError(
                    "extend expects a batch; got batch_size=[]. Use add() for one item"
                )
            batch = data[-self.max_size :] if data.batch_size[0] > self.max_size else data
            # rows refer to their batch: no per-item split now, one gather per batch later
            items = [_Row(batch, i) for i in range(batch.batch_size[0])]
        elif isinstance(data, torch.Tensor):
            if data.dim() == 0:
                raise ValueError("extend expects a batch; got a 0-d tensor. Use add() for one item")
            batch = data[-self.max_size :]
            items = [_Row(batch, i) for i in range(batch.shape[0])]
        elif isinstance(data, list | tuple):
            items = list(data)
        else:
            raise TypeError(
                f"ListStorage.extend expects a list of items, a TensorDict or a tensor batch; "
                f"got {type(data).__name__}"
            )
        if not items:
            raise ValueError("extend got an empty batch; pass at least one item")
        items = items[-self.max_size :]
        return items, len(items)

    def _write(self, plan: list[Any], first: int, n: int) -> None:
        start = first % self.max_size
        for i, item in enumerate(plan):
            self._items[(start + i) % self.max_size] = item

    def get(self, index: torch.Tensor) -> Any:
        """The items at ``index`` (slots): a stacked TensorDict (or tensor), or a list of objects."""
        items = [self._items[i] for i in index.reshape(-1).tolist()]
        n_rows = sum(type(x) is _Row for x in items)
        if n_rows == 0:
            return items
        if n_rows != len(items):
            return [x.batch[x.row] if type(x) is _Row else x for x in items]
        groups: dict[int, tuple[TensorDictBase, list[int], list[int]]] = {}
        for pos, (batch, row) in enumerate(items):
            group = groups.setdefault(id(batch), (batch, [], []))
            group[1].append(pos)
            group[2].append(row)
        if len(groups) == 1:
            batch, _, rows = next(iter(groups.values()))
            return _take(batch, torch.tensor(rows))
        try:
            parts = torch.cat([_take(b, torch.tensor(rows)) for b, _, rows in groups.values()])
        except Exception:  # batches of different structure: stack item by item
            return _stack_items([batch[row] for batch, row in items])
        positions = torch.tensor([p for _, pos, _ in groups.values() for p in pos])
        return _take(parts, torch.argsort(positions))

    def _assign(self, slots: torch.Tensor, value: Any, single: bool) -> None:
        if single and isinstance(value, TensorDictBase | torch.Tensor):
            items = [_Row(value.unsqueeze(0), 0)]  # stacks with the other rows on reading
        elif single:
            items = [value]
        elif isinstance(value, TensorDictBase | torch.Tensor) and value.dim() > 0:
            items = [_Row(value, i) for i in range(value.shape[0])]
        elif isinstance(value, list | tuple):
            items = list(value)
        else:
            raise TypeError(
                f"storage[index] = value with several slots expects a list, a TensorDict or a "
                f"tensor batch; got {type(value).__name__}"
            )
        if len(items) != len(slots):
            raise ValueError(
                f"storage[index] = value: the index names {len(slots)} slots, the value holds "
                f"{len(items)} items; pass one item per slot"
            )
        for slot, item in zip(slots.tolist(), items, strict=True):
            self._items[slot] = item

    def column(self, key: Key | str, slots: torch.Tensor) -> torch.Tensor:
        """One entry's values at ``slots`` (items must be TensorDicts)."""
        items = [self._items[i] for i in slots.reshape(-1).tolist()]
        if items and all(type(x) is _Row for x in items):
            # gather only this entry, one index_select per run of rows from one batch
            parts, run_batch, run_rows = [], None, []
            for batch, row in items:
                if batch is not run_batch and run_rows:
                    parts.append(
                        torch.index_select(_entry(run_batch, key), 0, torch.tensor(run_rows))
                    )
                    run_rows = []
                run_batch = batch
                run_rows.append(row)
            parts.append(torch.index_select(_entry(run_batch, key), 0, torch.tensor(run_rows)))
            return torch.cat(parts)
        return torch.stack(
            [torch.as_tensor(_entry(x.batch[x.row] if type(x) is _Row else x, key)) for x in items]
        )

    def state_dict(self) -> dict[str, Any]:
        """The items and the write position (items must be picklable to save).

        Only the slots written so far are kept, as for the tensor storages.
        """
        writes = self.ledger.writes
        return {
            "kind": self._kind,
            "max_size": self.max_size,
            "writes": writes,
            "valid": torch.from_numpy(self.ledger.valid.copy()),
            # a copy: later in-place changes to stored batches must not reach the state
            "items": copy.deepcopy(self._items[: min(writes, self.max_size)]),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Replace the contents with a :meth:`state_dict`."""
        _check_state(self, state)
        items = copy.deepcopy(list(state["items"]))
        self._items = items + [None] * (self.max_size - len(items))
        with self.ledger.lock:
            self.ledger.restore(int(state["writes"]), state["valid"].numpy())

    def __reduce__(self):
        raise TypeError(_not_shared_message(self, "cannot be sent to another process"))
