"""The vectorized sum/min tree against a plain array of priorities."""

from __future__ import annotations

import numpy as np
import torch

from rlpace.data._sumtree import SumMinTree, tree_size


def _tree(capacity: int) -> SumMinTree:
    size = tree_size(capacity)
    return SumMinTree(capacity, np.zeros(2 * size), np.full(2 * size, np.inf))


def test_tree_size_is_the_next_power_of_two():
    assert [tree_size(n) for n in (1, 2, 3, 1000, 1024, 1025)] == [1, 2, 4, 1024, 1024, 2048]


def test_updates_keep_sum_and_min_exact():
    rng = np.random.default_rng(0)
    torch.manual_seed(0)
    capacity = 1000
    tree, ref = _tree(capacity), np.zeros(capacity)
    for step in range(200):
        if step % 2:  # contiguous runs take the slice path
            start, n = int(rng.integers(0, capacity - 50)), int(rng.integers(1, 50))
            index = torch.arange(start, start + n)
        else:
            index = torch.randint(0, capacity, (int(rng.integers(1, 40)),)).unique()
        value = torch.rand(len(index), dtype=torch.float64) * (torch.rand(len(index)) > 0.2)
        if step % 3 == 0:
            value = float(value[0])
        tree.set(index, value)
        ref[index.numpy()] = value.numpy() if torch.is_tensor(value) else value
        assert tree.total == np.float64(ref.sum()) or abs(tree.total - ref.sum()) < 1e-9
        positive = ref[ref > 0]
        assert tree.min == (positive.min() if len(positive) else np.inf)
    rebuilt = SumMinTree(capacity, tree.sums.numpy().copy(), tree.mins.numpy().copy())
    rebuilt.sums[1 : rebuilt.size] = 0
    rebuilt.mins[1 : rebuilt.size] = np.inf
    rebuilt.rebuild()
    assert torch.allclose(rebuilt.sums, tree.sums) and torch.equal(rebuilt.mins, tree.mins)


def test_draws_follow_the_priorities_and_skip_absent_leaves():
    torch.manual_seed(1)
    tree = _tree(6)
    tree.set(torch.arange(6), torch.tensor([1.0, 0.0, 2.0, 0.0, 0.0, 7.0], dtype=torch.float64))
    counts = torch.bincount(tree.draw(100_000), minlength=6).double() / 100_000
    assert counts[1] == counts[3] == counts[4] == 0
    assert torch.allclose(
        counts[[0, 2, 5]], torch.tensor([0.1, 0.2, 0.7], dtype=torch.float64), atol=0.01
    )
