"""A minimal case that exercises the suite machinery on plain torch."""

import torch

from rlpace.bench.suite import Timed, case


@case(params={"n": [1_000]}, gpu=True, timer="cpu")
def test_torch_add(n, device):
    x = torch.ones(n, device=device)
    y = torch.ones(n, device=device)
    # one add is ~11 k instructions that move by ~200 from process to process: the
    # count tier counts 100 of them, so its gate is not set by that wobble
    return Timed(lambda: torch.add(x, y), items=n, unit="elements", count_calls=100)
