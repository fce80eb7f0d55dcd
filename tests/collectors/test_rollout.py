from __future__ import annotations

import torch
from tensordict import LazyStackedTensorDict, NonTensorData, TensorDict

from rlpace.collectors._rollout import stack_frames
from rlpace.collectors.testing import CountingEnv


def _frames(n: int) -> list[TensorDict]:
    env = CountingEnv(max_steps=3)
    root, frames = env.reset(), []
    for _ in range(n):
        frame = env.rand_step(root)
        frames.append(frame)
        root = env.reset() if frame["next", "done"].any() else frame["next"].exclude("reward")
    return frames


def test_stack_frames_matches_torch_stack_on_nested_env_frames():
    frames = _frames(7)
    ours, reference = stack_frames(frames), torch.stack(frames)
    assert ours.batch_size == reference.batch_size == torch.Size([7])
    assert set(ours.keys(True, True)) == set(reference.keys(True, True))
    for key in reference.keys(True, True):
        assert ours.get(key).dtype == reference.get(key).dtype
        assert torch.equal(ours.get(key), reference.get(key)), key


def test_stack_frames_keeps_text_and_falls_back_to_a_lazy_stack_for_ragged_frames():
    text = [TensorDict({"x": torch.zeros(2), "note": NonTensorData(f"t{i}")}) for i in range(3)]
    stacked = stack_frames(text, dim=0)
    assert stacked.get("note").tolist() == ["t0", "t1", "t2"]
    ragged = [TensorDict({"tokens": torch.zeros(n)}) for n in (3, 5)]
    lazy = stack_frames(ragged)
    assert isinstance(lazy, LazyStackedTensorDict)
    assert [td["tokens"].numel() for td in lazy.tensordicts] == [3, 5]
