"""``EpisodeReturns``: per-batch episode returns against a step-by-step running sum."""

from __future__ import annotations

import pytest
import torch

from rlpace.trainers._episodes import EpisodeReturns


def step_by_step(batches):
    """What a per-step running-sum transform would report, batch by batch."""
    running, out = None, []
    for reward, done in batches:
        if reward.ndim == 1:
            reward, done = reward.unsqueeze(0), done.unsqueeze(0)
        if running is None:
            running = [0.0] * reward.shape[0]
        ended = []
        for t in range(reward.shape[1]):
            for e in range(reward.shape[0]):
                running[e] += float(reward[e, t])
                if done[e, t]:
                    ended.append((t, running[e]))
                    running[e] = 0.0
        out.append(ended)
    return out


@pytest.mark.parametrize("shape", [(3, 7), (1, 5), (11,), (4, 1)])
def test_returns_match_a_running_sum_across_batches(shape):
    gen = torch.Generator().manual_seed(sum(shape))
    batches = [
        (torch.randn(shape, generator=gen), torch.rand(shape, generator=gen) < 0.3)
        for _ in range(6)
    ]
    tracker = EpisodeReturns()
    got = [tracker.update(r, d) for r, d in batches]
    want = step_by_step(batches)
    assert [[t for t, _ in b] for b in got] == [[t for t, _ in b] for b in want]
    for g, w in zip(got, want, strict=True):
        assert [r for _, r in g] == pytest.approx([r for _, r in w], abs=1e-9)
    assert sum(len(b) for b in got) > 0  # the draw has episodes to check


def test_an_episode_spanning_batches_sums_all_of_them_and_reset_forgets_it():
    tracker = EpisodeReturns()
    ones, never = torch.ones(2, 4), torch.zeros(2, 4, dtype=torch.bool)
    assert tracker.update(ones, never) == []
    assert tracker.update(ones, never) == []
    last = torch.tensor([[False, False, True, False], [False, False, False, False]])
    assert tracker.update(ones, last) == [(2, 11.0)]  # 4 + 4 + 3
    tracker.reset()
    assert tracker.update(ones, last) == [(2, 3.0)]


def test_bad_shapes_are_refused_with_the_fix():
    tracker = EpisodeReturns()
    with pytest.raises(ValueError, match=r"one \[envs, time\] or \[time\] shape.*\[2, 3\]"):
        tracker.update(torch.zeros(2, 3), torch.zeros(3, 2, dtype=torch.bool))
    tracker.update(torch.zeros(2, 3), torch.zeros(2, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="expected 2 envs as in the last batch, got 3"):
        tracker.update(torch.zeros(3, 3), torch.zeros(3, 3, dtype=torch.bool))


def test_agrees_with_torchrls_reward_sum_on_collected_batches():
    from torch import nn
    from torchrl.envs import RewardSum, TransformedEnv

    from rlpace.trainers._envs import make_actor, make_env
    from rlpace.trainers._wiring import make_collector

    n_envs = 8
    actor = make_actor(make_env("CartPole-v1", 0, n_envs), (16,), nn.Tanh)
    collector = make_collector(
        lambda: TransformedEnv(make_env("CartPole-v1", 0, n_envs), RewardSum()),
        actor,
        frames_per_batch=256,
        total_frames=256 * 8,
    )
    tracker, got, want = EpisodeReturns(), [], []
    try:
        for batch in collector:
            batch = batch.reshape(n_envs, -1)
            done = batch["next", "done"].reshape(batch.shape)
            got += tracker.update(batch["next", "reward"].reshape(batch.shape), done)
            t = torch.nonzero(done)[:, -1]
            ended = batch["next", "episode_reward"].reshape(batch.shape)[done]
            want += ended[torch.argsort(t, stable=True)].tolist()
    finally:
        collector.shutdown()
    assert len(want) > 20  # episodes end inside batches and across their borders
    assert [r for _, r in got] == want
