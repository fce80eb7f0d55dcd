"""Turning ``storage[index]`` / ``rb[index]`` into storage slots.

Indices address the slots written so far, ``0 .. min(writes, max_size) - 1``, in
storage order (the order of a plain list that the ring overwrites from its start),
as torchrl's storages do; negative indices count from the end of that range.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch


def index_slots(index: Any, filled: int) -> tuple[torch.Tensor, bool]:
    """The int64 slots ``index`` names among ``filled`` slots, and whether it names one item.

    Example:
        >>> index_slots(slice(None, 3), 10)
        (tensor([0, 1, 2]), False)
        >>> index_slots(-1, 10)
        (tensor(9), True)
    """
    if isinstance(index, slice):
        return torch.arange(filled)[index], False
    if isinstance(index, bool) or index is None or index is Ellipsis:
        raise TypeError(
            f"a storage index is an int, a slice, or an int/bool tensor, list or array; got "
            f"{index!r}"
        )
    single = isinstance(index, int | np.integer)
    slots = torch.as_tensor(np.asarray(index) if isinstance(index, list | np.ndarray) else index)
    if slots.dtype == torch.bool:
        if slots.shape != (filled,):
            raise IndexError(
                f"a boolean index must have one entry per stored slot ({filled}); got shape "
                f"{list(slots.shape)}"
            )
        return torch.nonzero(slots).squeeze(1), False
    if slots.is_floating_point() or slots.is_complex():
        raise TypeError(f"a storage index must hold integers; got dtype {slots.dtype}")
    slots = slots.to(torch.int64).cpu()
    single = single or slots.dim() == 0
    if slots.numel():
        low, high = int(slots.min()), int(slots.max())
        if low < -filled or high >= filled:
            bad = low if low < -filled else high
            raise IndexError(
                f"index {bad} is out of range: the storage holds {filled} written slots "
                f"(indices {-filled}..{filled - 1}); extend it before reading or writing there"
            )
    slots = torch.where(slots < 0, slots + filled, slots)
    return slots, single
