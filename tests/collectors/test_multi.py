from __future__ import annotations

import functools
import multiprocessing as mp
import os
import signal
import time

import pytest
import torch

from rlpace.collectors import EnvStepError, MultiCollector, WorkerDiedError
from rlpace.collectors.testing import CountingEnv, make_mlp_policy


def _children() -> list:
    return mp.active_children()


@pytest.fixture
def env_fns():
    return [functools.partial(CountingEnv, num_envs=2, max_steps=4)] * 2


def test_sync_batches_gather_every_worker_and_count_frames(env_fns, check_trajectories):
    c = MultiCollector(env_fns, make_mlp_policy(), frames_per_batch=16, total_frames=40)
    batches = list(c)
    assert [b.numel() for b in batches] == [16, 16, 8]
    assert c.frames == 40
    for b in batches[:2]:
        assert b["collector", "env_ids"].tolist() == [0] * 4 + [1] * 4 + [2] * 4 + [3] * 4
        check_trajectories(b)
    # trajectory ids never collide across workers
    ids = torch.cat([b["collector", "traj_ids"] for b in batches])
    env = torch.cat([b["collector", "env_ids"] for b in batches])
    for traj in ids.unique():
        assert env[ids == traj].unique().numel() == 1
    c.shutdown()
    c.shutdown()
    assert _children() == []


def test_async_yields_single_worker_batches(env_fns):
    with MultiCollector(env_fns, make_mlp_policy(), frames_per_batch=8, sync=False) as c:
        seen = set()
        for _, batch in zip(range(200), c, strict=False):
            assert batch.numel() == 8
            envs = set(batch["collector", "env_ids"].tolist())
            assert envs in ({0, 1}, {2, 3})
            seen |= envs
            if seen == {0, 1, 2, 3}:
                break
    assert seen == {0, 1, 2, 3}
    assert _children() == []


def test_weight_updates_reach_workers_through_shared_memory(env_fns):
    policy = make_mlp_policy(seed=0)
    new = make_mlp_policy(seed=1)
    with MultiCollector(env_fns, policy, frames_per_batch=8) as c:
        first = c.next()
        with torch.no_grad():
            assert torch.allclose(first["action"], policy.module(first["observation"]), atol=1e-5)
        c.update_policy_weights_(new.state_dict())
        # workers run at most two buffers ahead: the third batch on uses new weights
        for _ in range(3):
            batch = c.next()
        with torch.no_grad():
            assert torch.allclose(batch["action"], new.module(batch["observation"]), atol=1e-5)
            assert not torch.allclose(batch["action"], policy.module(batch["observation"]))
    assert c.policy_version == 1


def test_env_error_names_env_and_stops_everything():
    fns = [functools.partial(CountingEnv, max_steps=50)] * 2
    fns[1] = functools.partial(CountingEnv, max_steps=50, fail_at_step=3)
    c = MultiCollector(fns, make_mlp_policy(), frames_per_batch=8)
    with pytest.raises(EnvStepError, match="env 1 raised RuntimeError") as info:
        for _ in c:
            pass
    assert info.value.env_index == 1
    assert "failed on purpose" in str(info.value.original)
    assert _children() == []


def test_killed_worker_is_reported_quickly(env_fns):
    c = MultiCollector(env_fns, make_mlp_policy(), frames_per_batch=8, sync=True)
    c.next()
    os.kill(c._procs[0].pid, signal.SIGKILL)
    start = time.monotonic()
    with pytest.raises(WorkerDiedError, match="worker 0 died with exit code -9"):
        for _ in range(100):
            c.next()
    assert time.monotonic() - start < 5
    assert _children() == []
    c.shutdown()


def test_bad_arguments_fail_before_starting(env_fns):
    policy = make_mlp_policy()
    with pytest.raises(ValueError, match="exactly one of policy= or policy_factory=; got both"):
        MultiCollector(env_fns, policy, policy_factory=make_mlp_policy, frames_per_batch=8)
    with pytest.raises(ValueError, match="got neither"):
        MultiCollector(env_fns, frames_per_batch=8)
    with pytest.raises(ValueError, match="multiple of num_workers=2"):
        MultiCollector(env_fns, policy, frames_per_batch=9)
    with pytest.raises(ValueError, match="multiple of the number of envs"):
        MultiCollector(env_fns, policy, frames_per_batch=6)
    with pytest.raises(ValueError, match="num_workers must be between 1 and"):
        MultiCollector(env_fns, policy, frames_per_batch=8, num_workers=3)
    assert _children() == []


class SharedStepBuffer:
    """A replay-buffer stand-in whose storage is in shared memory (workers write it)."""

    def __init__(self, capacity: int) -> None:
        self.steps = torch.full((capacity,), -1, dtype=torch.int64).share_memory_()
        self.cursor = mp.get_context("fork").Value("i", 0)

    def extend(self, batch) -> None:
        with self.cursor.get_lock():
            start = self.cursor.value
            self.cursor.value += batch.numel()
        steps = batch["step_count"].squeeze(-1)[: max(0, self.steps.numel() - start)]
        self.steps[start : start + steps.numel()] = steps


def test_workers_write_straight_into_a_shared_buffer(env_fns):
    buffer = SharedStepBuffer(64)
    c = MultiCollector(
        env_fns,
        policy_factory=make_mlp_policy,
        frames_per_batch=16,
        total_frames=32,
        replay_buffer=buffer,
    )
    assert list(c) == [None, None]
    c.shutdown()
    assert buffer.cursor.value == 32, "workers write exactly total_frames"
    assert (buffer.steps[:32] >= 0).all()


@pytest.mark.slow
def test_spawn_start_method_works():
    fns = [functools.partial(CountingEnv, max_steps=3)] * 2
    start = time.monotonic()
    with MultiCollector(
        fns, make_mlp_policy(), frames_per_batch=8, sync=False, start_method="spawn"
    ) as c:
        batch = c.next()
    assert batch.numel() == 8
    assert time.monotonic() - start < 30
    assert _children() == []


def test_workers_extend_an_rlpace_data_buffer(env_fns):
    from rlpace.data import ReplayBuffer, TensorStorage

    rb = ReplayBuffer(storage=TensorStorage(100), batch_size=8)
    with MultiCollector(
        env_fns,
        make_mlp_policy(),
        frames_per_batch=8,
        sync=False,
        total_frames=24,
        replay_buffer=rb,
    ) as c:
        assert list(c) == [None] * 3
    assert len(rb) == 24
    sample = rb.sample()
    assert set(sample["collector", "env_ids"].tolist()) <= {0, 1, 2, 3}
    assert torch.equal(sample["next", "step_count"], sample["step_count"] + 1)
    with pytest.raises(ValueError, match="multiple of frames_per_batch=8"):
        MultiCollector(
            env_fns, make_mlp_policy(), frames_per_batch=8, total_frames=12, replay_buffer=rb
        )


def test_env_step_error_chains_its_cause_across_processes():
    import traceback

    from rlpace.collectors._errors import RemoteTraceback

    fns = [functools.partial(CountingEnv, max_steps=50, fail_at_step=2)]
    with (
        MultiCollector(fns, make_mlp_policy(), frames_per_batch=4) as c,
        pytest.raises(EnvStepError) as info,
    ):
        c.next()
    err = info.value
    cause = err.__cause__
    assert isinstance(cause, RuntimeError) and "failed on purpose" in str(cause)
    assert cause is err.original
    assert "CountingEnv failed on purpose" in err.remote_traceback
    assert "_step" in err.remote_traceback, "the worker's frames travel as text"
    assert isinstance(cause.__cause__, RemoteTraceback)
    printed = "".join(traceback.format_exception(err))
    assert "in _step" in printed and "failed on purpose at step 2" in printed


class RecordingBuffer:
    """Shared-memory rows of (observation, action) in write order, plus a cursor."""

    def __init__(self, capacity: int, obs_dim: int = 4) -> None:
        self.obs = torch.zeros(capacity, obs_dim).share_memory_()
        self.action = torch.zeros(capacity, 1).share_memory_()
        self.cursor = mp.get_context("fork").Value("i", 0)

    def extend(self, batch) -> None:
        with self.cursor.get_lock():
            start = self.cursor.value
            self.cursor.value += batch.numel()
        end = start + batch.numel()
        self.obs[start:end] = batch["observation"]
        self.action[start:end] = batch["action"]

    def __len__(self) -> int:
        return self.cursor.value


def test_multicollector_sync_replay_buffer_is_synchronous(env_fns):
    from rlpace.data import ReplayBuffer, TensorStorage

    rb = ReplayBuffer(storage=TensorStorage(200), batch_size=8)
    with MultiCollector(
        env_fns, make_mlp_policy(), frames_per_batch=16, total_frames=80, replay_buffer=rb
    ) as c:
        lengths = []
        for _ in c:
            lengths.append(len(rb))
            time.sleep(0.05)  # a learner's update: workers must not collect meanwhile
            lengths.append(len(rb))
    assert lengths == [16, 16, 32, 32, 48, 48, 64, 64, 80, 80]


def test_multicollector_sync_replay_buffer_frames_after_an_update_use_the_new_weights(env_fns):
    old, new = make_mlp_policy(seed=0), make_mlp_policy(seed=1)
    rb = RecordingBuffer(64)
    with MultiCollector(env_fns, old, frames_per_batch=16, total_frames=48, replay_buffer=rb) as c:
        for i, _ in enumerate(c):
            if i == 0:
                c.update_policy_weights_(new.state_dict())
    assert len(rb) == 48
    with torch.no_grad():
        by_old = torch.isclose(rb.action, old.module(rb.obs), atol=1e-5).squeeze(-1)
        by_new = torch.isclose(rb.action, new.module(rb.obs), atol=1e-5).squeeze(-1)
    assert by_old[:16].all(), "the first round ran before the update"
    assert by_new[16:48].all(), "every frame written after the update used the new weights"
