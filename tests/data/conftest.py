"""Shared fixtures for the replay-buffer tests."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rlpace.data import (
    ListStorage,
    MemmapStorage,
    PrioritizedSampler,
    RandomSampler,
    SamplerWithoutReplacement,
    SliceSampler,
    TensorStorage,
)

STORAGES = {
    "list": lambda n, tmp: ListStorage(n),
    "tensor": lambda n, tmp: TensorStorage(n),
    "tensor_local": lambda n, tmp: TensorStorage(n, shared=False),
    "memmap": lambda n, tmp: MemmapStorage(n, path=tmp / "memmap"),
}

SAMPLERS = {
    "random": lambda n: RandomSampler(),
    "without_replacement": lambda n: SamplerWithoutReplacement(),
    "prioritized": lambda n: PrioritizedSampler(n, alpha=0.7, beta=0.5),
    "slice": lambda n: SliceSampler(slice_len=4),
}


@pytest.fixture(params=sorted(STORAGES))
def make_storage(request, tmp_path):
    """A factory ``make_storage(max_size)`` for each storage kind."""
    return lambda n: STORAGES[request.param](n, tmp_path)


@pytest.fixture
def batch():
    """A factory of batches whose every entry encodes the item's id, to check torn writes."""

    def make(start: int, n: int) -> TensorDict:
        ids = torch.arange(start, start + n)
        return TensorDict(
            {
                "id": ids,
                "obs": ids.float().unsqueeze(-1).expand(n, 3).clone(),
                "episode": ids // 8,
                "nested": {"flag": (ids % 2).bool(), "half": ids.to(torch.float16)},
            },
            [n],
        )

    return make
