"""A minimal case that exercises the suite machinery on plain torch."""

import torch

from rlpace.bench.suite import Timed, case


@case(params={"n": [1_000]}, gpu=True, timer="cpu")
def test_torch_add(n, device):
    x = torch.ones(n, device=device)
    y = torch.ones(n, device=device)
    return Timed(lambda: torch.add(x, y), items=n, unit="elements")
