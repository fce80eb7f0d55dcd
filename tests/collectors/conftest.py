"""Shared helpers for the collector tests: envs, policies, a list-backed buffer."""

from __future__ import annotations

import functools
import time

import pytest
import torch
from tensordict import TensorDictBase

from rlpace.collectors.testing import CountingEnv, make_mlp_policy


class ListBuffer:
    """The smallest thing with ``extend``: keeps every batch it is given."""

    def __init__(self) -> None:
        self.batches: list[TensorDictBase] = []

    def extend(self, batch: TensorDictBase) -> None:
        self.batches.append(batch.clone())

    def __len__(self) -> int:
        return sum(b.numel() for b in self.batches)


@pytest.fixture
def counting_env_fn():
    """Picklable factory of an unbatched ``CountingEnv``."""
    return functools.partial(CountingEnv, max_steps=4)


@pytest.fixture
def policy():
    return make_mlp_policy()


def assert_consistent_trajectories(batch: TensorDictBase) -> None:
    """Within each env's frames: next obs of frame t is obs of frame t+1 unless done."""
    env_ids = batch["collector", "env_ids"]
    for env in env_ids.unique().tolist():
        frames = batch[env_ids == env]
        done = frames["next", "done"].squeeze(-1)
        traj = frames["collector", "traj_ids"]
        step_next = frames["next", "step_count"].squeeze(-1)
        step = frames["step_count"].squeeze(-1)
        assert torch.equal(step_next, step + 1), "each frame advances the step count by one"
        for t in range(frames.numel() - 1):
            if done[t]:
                assert step[t + 1] == 0, "a done frame is followed by a reset"
                assert traj[t + 1] != traj[t], "a reset starts a new trajectory id"
            else:
                assert torch.equal(frames["next", "observation"][t], frames["observation"][t + 1])
                assert traj[t + 1] == traj[t]


@pytest.fixture
def list_buffer():
    return ListBuffer()


@pytest.fixture
def check_trajectories():
    return assert_consistent_trajectories


def _wait_until_producers_stop(collector, target: int, settle: float, deadline: float):
    """Poll until at least ``target`` frames wait and no request was served for ``settle``
    seconds, or ``deadline`` seconds pass; return (requests, frames waiting) at that point.

    Waiting for the state rather than sleeping a fixed time keeps the test independent of
    the host's load: on a busy CI machine Ray actors took more than 0.5 s to fill two
    batches, and a fixed sleep read a half-filled buffer."""
    end = time.monotonic() + deadline
    requests, since = collector.server_stats().requests, time.monotonic()
    while time.monotonic() < end:
        time.sleep(settle / 10)
        now = collector.server_stats().requests
        if now != requests:
            requests, since = now, time.monotonic()
        elif len(collector._results) >= target and time.monotonic() - since >= settle:
            break
    return requests, len(collector._results)


def assert_bounded_by_back_pressure(
    collector, envs: int, settle: float, deadline: float = 60.0
) -> None:
    """Take one batch, stop consuming: producers (env threads, or the server thread
    driving Ray actors) must stop about two batches ahead and resume on the next take."""
    frames = collector.frames_per_batch
    collector.next()
    settled, buffered = _wait_until_producers_stop(collector, 2 * frames, settle, deadline)
    time.sleep(settle)
    later = collector.server_stats().requests
    assert collector.next().numel() == frames, "the blocked producers resume"
    # taken + two batches waiting + per env at most one frame past the cap and the
    # request sent after that step (answered, then the producer waits for room)
    assert settled <= frames + 2 * frames + 2 * envs, settled
    assert 2 * frames <= buffered <= 2 * frames + envs, buffered
    assert later == settled, "the envs kept stepping although nobody consumed"


@pytest.fixture
def check_back_pressure():
    return assert_bounded_by_back_pressure
