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
        return self.sums[index + self.size]

    def set(self, index: torch.Tensor, value: torch.Tensor | float) -> None:
        """Set leaves ``index`` to ``value`` (0 removes them) and refresh their ancestors."""
        value = torch.as_tensor(value, dtype=torch.float64)
        pos = index.to(torch.int64) + self.size
        self.sums[pos] = value
        self.mins[pos] = torch.where(value > 0, value, torch.inf)
        for _ in range(self.levels):
            pos = torch.unique(pos >> 1)
            left, right = 2 * pos, 2 * pos + 1
            self.sums[pos] = self.sums[left] + self.sums[right]
            self.mins[pos] = torch.minimum(self.mins[left], self.mins[right])

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

    def draw(self, n: int) -> torch.Tensor:
        """``n`` leaf indices drawn with probability proportional to their priority."""
        total = self.sums[1]
        mass = torch.rand(n, dtype=torch.float64) * total
        node = torch.ones(n, dtype=torch.int64)
        for _ in range(self.levels):
            left = 2 * node
            left_mass = self.sums[left]
            go_right = mass >= left_mass
            mass = torch.where(go_right, mass - left_mass, mass)
            node = left + go_right
        leaf = node - self.size
        # rounding can walk onto an absent leaf at the edge of the mass: redraw those
        absent = self.sums[node] <= 0
        if bool(absent.any()):
            weights = self.sums[self.size : self.size + self.capacity]
            leaf[absent] = torch.multinomial(weights, int(absent.sum()), replacement=True)
        return leaf
