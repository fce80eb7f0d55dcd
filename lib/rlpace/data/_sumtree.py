"""Sum and min segment trees over flat tensors, updated and searched level by level.

Both trees live in arrays of ``2 * size`` entries (``size`` a power of two): the root
is entry 1, the children of ``i`` are ``2i`` and ``2i + 1``, leaf ``j`` is entry
``size + j``. Every operation is a loop over the ``log2(size)`` levels with one
vectorized torch step per level, so there is no compiled extension to break against
a torch version. The arrays may be views of shared memory.
"""

from __future__ import annotations

import math

import numpy as np
import torch


def tree_size(capacity: int) -> int:
    """The number of leaves (a power of two) for ``capacity`` items."""
    return 1 << max(0, math.ceil(math.log2(max(capacity, 1))))


class SumMinTree:
    """Priorities of ``capacity`` slots with their running sum and minimum.

    A leaf of priority 0 is "absent": it is never drawn and does not count in the
    minimum.

    Args:
        capacity: number of slots.
        sums: float64 array of ``2 * tree_size(capacity)`` zeros (may be shared).
        mins: float64 array of the same size filled with ``inf`` (may be shared).
    """

    def __init__(self, capacity: int, sums: np.ndarray, mins: np.ndarray):
        self.capacity = capacity
        self.size = tree_size(capacity)
        self.levels = int(math.log2(self.size))
        self.sums = torch.from_numpy(sums)
        self.mins = torch.from_numpy(mins)

    @property
    def total(self) -> float:
        return float(self.sums[1])

    @property
    def min(self) -> float:
        return float(self.mins[1])

    def leaves(self, index: torch.Tensor) -> torch.Tensor:
        return torch.index_select(self.sums, 0, index + self.size)

    def set(self, index: torch.Tensor, value: torch.Tensor | float) -> None:
        """Set leaves ``index`` to ``value`` (0 removes them) and refresh their ancestors."""
        index = index.to(torch.int64)
        n = index.numel()
        if (
            n
            and int(index[-1]) - int(index[0]) == n - 1
            and torch.equal(index, torch.arange(int(index[0]), int(index[0]) + n))
        ):
            self._set_range(int(index[0]), int(index[0]) + n, value)
            return
        value = torch.as_tensor(value, dtype=torch.float64).expand(n).contiguous()
        pos = index + self.size
        self.sums.index_copy_(0, pos, value)
        self.mins.index_copy_(0, pos, torch.where(value > 0, value, torch.inf))
        for _ in range(self.levels):
            pos = torch.unique(pos >> 1)
            left = 2 * pos
            pair_sums = torch.index_select(self.sums, 0, left) + torch.index_select(
                self.sums, 0, left + 1
            )
            pair_mins = torch.minimum(
                torch.index_select(self.mins, 0, left), torch.index_select(self.mins, 0, left + 1)
            )
            self.sums.index_copy_(0, pos, pair_sums)
            self.mins.index_copy_(0, pos, pair_mins)

    def _set_range(self, start: int, stop: int, value: torch.Tensor | float) -> None:
        """:meth:`set` for the contiguous leaves ``start..stop-1``: slices, level by level."""
        lo, hi = start + self.size, stop + self.size  # half-open
        value = torch.as_tensor(value, dtype=torch.float64)
        self.sums[lo:hi] = value
        self.mins[lo:hi] = torch.where(value > 0, value, torch.inf)
        for _ in range(self.levels):
            lo, hi = lo >> 1, ((hi - 1) >> 1) + 1
            torch.add(
                self.sums[2 * lo : 2 * hi : 2],
                self.sums[2 * lo + 1 : 2 * hi : 2],
                out=self.sums[lo:hi],
            )
            torch.minimum(
                self.mins[2 * lo : 2 * hi : 2],
                self.mins[2 * lo + 1 : 2 * hi : 2],
                out=self.mins[lo:hi],
            )

    def rebuild(self) -> None:
        """Recompute every inner node from the leaves."""
        size = self.size
        while size > 1:
            half = size // 2
            self.sums[half:size] = (
                self.sums[size : 2 * size : 2] + self.sums[size + 1 : 2 * size : 2]
            )
            self.mins[half:size] = torch.minimum(
                self.mins[size : 2 * size : 2], self.mins[size + 1 : 2 * size : 2]
            )
            size = half

    def clear(self) -> None:
        self.sums.zero_()
        self.mins.fill_(torch.inf)

    def draw(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """``n`` leaf indices drawn with probability proportional to their priority."""
        total = self.sums[1]
        mass = torch.rand(n, dtype=torch.float64, generator=generator) * total
        node = torch.ones(n, dtype=torch.int64)
        for _ in range(self.levels):
            left = 2 * node
            left_mass = torch.index_select(self.sums, 0, left)
            go_right = mass >= left_mass
            mass -= left_mass * go_right
            node = left + go_right
        leaf = node - self.size
        # rounding can walk onto an absent leaf at the edge of the mass: redraw those
        absent = torch.index_select(self.sums, 0, node) <= 0
        if bool(absent.any()):
            weights = self.sums[self.size : self.size + self.capacity]
            leaf[absent] = torch.multinomial(
                weights, int(absent.sum()), replacement=True, generator=generator
            )
        return leaf
