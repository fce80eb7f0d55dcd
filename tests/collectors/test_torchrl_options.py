"""The collector options torchrl users look for, as torchrl's collector tests use them.

``len(collector)``, ``max_frames_per_traj``, ``init_random_frames``, ``postproc``,
``split_trajs``, ``set_seed`` and ``state_dict``/``load_state_dict``: on
``Collector`` first, then on the process and async collectors where they apply.
"""

from __future__ import annotations

import functools
import multiprocessing as mp

import pytest
import torch

from rlpace.collectors import AsyncBatchedCollector, Collector, MultiCollector
from rlpace.collectors.testing import CountingEnv, make_mlp_policy


def acted_by_policy(policy, batch) -> torch.Tensor:
    with torch.no_grad():
        expected = policy.module(batch["observation"])
    return torch.isclose(batch["action"], expected, atol=1e-5).all(-1)


def add_marker(batch):
    batch.set("marker", torch.full(batch.batch_size, 7))
    return batch


# -- len ---------------------------------------------------------------------------


def test_len_is_the_number_of_batches_and_endless_collectors_have_none(policy):
    c = Collector(CountingEnv(num_envs=2), policy, frames_per_batch=8, total_frames=20)
    assert len(c) == 3
    assert len(list(c)) == len(c)
    endless = Collector(CountingEnv(), policy, frames_per_batch=4)
    with pytest.raises(TypeError, match=r"total_frames=-1 \(endless\) and has no length"):
        len(endless)


# -- max_frames_per_traj -----------------------------------------------------------


def test_max_frames_per_traj_truncates_and_resets_across_batches(policy, check_trajectories):
    env = CountingEnv(num_envs=2, max_steps=100)
    c = Collector(env, policy, frames_per_batch=14, max_frames_per_traj=5)
    batches = [c.next() for _ in range(3)]
    for batch in batches:
        check_trajectories(batch)
        steps = batch["next", "step_count"].squeeze(-1)
        truncated = batch["next", "truncated"].squeeze(-1)
        assert steps.max() <= 5
        assert torch.equal(truncated, steps == 5), "truncated exactly at the 5th step"
        assert torch.equal(batch["next", "done"].squeeze(-1), truncated)
        assert not batch["next", "terminated"].any(), "a truncation is no termination"
    # 7 steps per env per batch: trajectories span batches and still stop at 5 steps
    first_env0 = batches[0][batches[0]["collector", "env_ids"] == 0]
    second_env0 = batches[1][batches[1]["collector", "env_ids"] == 0]
    assert first_env0["next", "step_count"][-1].item() == 2
    assert second_env0["step_count"][0].item() == 2
    assert second_env0["collector", "traj_ids"][0] == first_env0["collector", "traj_ids"][-1]


def test_max_frames_per_traj_keeps_the_envs_own_ends(policy):
    c = Collector(CountingEnv(max_steps=3), policy, frames_per_batch=12, max_frames_per_traj=10)
    batch = c.next()
    assert batch["next", "step_count"].max() == 3
    assert not batch["next", "truncated"].any()
    assert batch["next", "terminated"].sum() == 4


# -- init_random_frames ------------------------------------------------------------


def test_init_random_frames_rounds_up_to_batches_of_random_actions():
    policy = make_mlp_policy()
    c = Collector(
        CountingEnv(num_envs=2), policy, frames_per_batch=8, total_frames=32, init_random_frames=10
    )
    assert c.init_random_frames == 16
    by_policy = [acted_by_policy(policy, b) for b in c]
    assert not by_policy[0].any() and not by_policy[1].any(), "two batches of random actions"
    assert by_policy[2].all() and by_policy[3].all()
    with pytest.raises(ValueError, match="init_random_frames must be >= 0"):
        Collector(CountingEnv(), policy, frames_per_batch=4, init_random_frames=-5)


# -- postproc and split_trajs ------------------------------------------------------


def test_postproc_runs_on_every_batch_before_the_replay_buffer(policy, list_buffer):
    c = Collector(CountingEnv(), policy, frames_per_batch=4, total_frames=8, postproc=add_marker)
    assert all((b["marker"] == 7).all() for b in c)
    list(Collector(CountingEnv(), policy, 4, 8, replay_buffer=list_buffer, postproc=add_marker))
    assert all((b["marker"] == 7).all() for b in list_buffer.batches)
    with pytest.raises(TypeError, match="postproc must be a callable"):
        Collector(CountingEnv(), policy, frames_per_batch=4, postproc="multistep")


def test_postproc_accepts_torchrl_multistep(policy):
    from torchrl.data.postprocs import MultiStep

    c = Collector(
        CountingEnv(max_steps=5),
        policy,
        frames_per_batch=10,
        postproc=MultiStep(gamma=0.9, n_steps=2),
        split_trajs=True,
    )
    batch = c.next()
    assert ("next", "original_reward") in batch.keys(True)
    assert batch.batch_size[0] == 2


def test_split_trajs_pads_one_trajectory_per_row_with_a_mask(policy):
    c = Collector(
        CountingEnv(num_envs=2, max_steps=3), policy, frames_per_batch=16, split_trajs=True
    )
    batch = c.next()
    mask = batch["collector", "mask"]
    assert batch.batch_size == mask.shape
    assert int(mask.sum()) == 16, "every frame once, padding masked out"
    for row, valid in zip(batch, mask, strict=True):
        ids = row["collector", "traj_ids"][valid]
        assert ids.unique().numel() == 1
        steps = row["step_count"][valid].squeeze(-1)
        assert torch.equal(steps, steps[0] + torch.arange(steps.numel()))
    with pytest.raises(ValueError, match="split_trajs=True pads batches"):
        Collector(CountingEnv(), policy, 4, split_trajs=True, replay_buffer=[])


# -- set_seed ----------------------------------------------------------------------


def _first_random_batch(seed: int):
    c = Collector(CountingEnv(num_envs=2), make_mlp_policy(), 8, init_random_frames=8)
    next_seed = c.set_seed(seed)
    return c.next(), next_seed


def test_set_seed_makes_collection_reproducible():
    a, next_a = _first_random_batch(3)
    b, next_b = _first_random_batch(3)
    c, _ = _first_random_batch(4)
    assert torch.equal(a["action"], b["action"]) and next_a == next_b
    assert isinstance(next_a, int) and next_a != 3
    assert not torch.equal(a["action"], c["action"])


# -- state_dict --------------------------------------------------------------------


def test_state_dict_resumes_frames_and_weights():
    trained = make_mlp_policy(seed=1)
    c = Collector(CountingEnv(num_envs=2), trained, frames_per_batch=8, total_frames=32)
    c.next()
    c.update_policy_weights_()
    state = c.state_dict()
    with torch.no_grad():
        trained.module[0].weight.add_(1.0)  # the state is a copy, not the live weights
    assert not torch.equal(state["policy"]["module.0.weight"], trained.module[0].weight)

    fresh = make_mlp_policy(seed=0)
    resumed = Collector(CountingEnv(num_envs=2), fresh, frames_per_batch=8, total_frames=32)
    resumed.load_state_dict(state)
    assert (resumed.frames, resumed.policy_version) == (8, 1)
    assert len(list(resumed)) == 3, "24 frames were left"
    assert torch.equal(fresh.module[0].weight, state["policy"]["module.0.weight"])
    with pytest.raises(ValueError, match="expected the dict a collector's state_dict"):
        resumed.load_state_dict({"weights": 1})
    with pytest.raises(ValueError, match="state format 99"):
        resumed.load_state_dict({**state, "format": 99})


# -- the process and async collectors ----------------------------------------------


def test_multicollector_options_match_the_single_collector():
    policy = make_mlp_policy()
    fns = [functools.partial(CountingEnv, num_envs=2, max_steps=100)] * 2

    def build(seed):
        c = MultiCollector(
            fns,
            policy,
            frames_per_batch=16,
            total_frames=48,
            max_frames_per_traj=3,
            init_random_frames=16,
            postproc=add_marker,
        )
        c.set_seed(seed)
        return c

    with build(0) as c, build(0) as twin:
        assert len(c) == 3
        batches, twins = list(c), list(twin)
        state = c.state_dict()
    assert torch.equal(batches[0]["action"], twins[0]["action"]), "same seed, same actions"
    assert not acted_by_policy(policy, batches[0]).any(), "the first round is random"
    assert acted_by_policy(policy, batches[2]).all()
    for batch in batches:
        assert batch["next", "step_count"].max() <= 3
        assert torch.equal(batch["next", "truncated"], batch["next", "step_count"] == 3)
        assert (batch["marker"] == 7).all()
    assert state["frames"] == 48 and state["collector"] == "MultiCollector"
    assert mp.active_children() == []


def test_multicollector_split_trajs_and_state_dict_resume():
    fns = [functools.partial(CountingEnv, max_steps=3)] * 2
    policy = make_mlp_policy(seed=0)
    with MultiCollector(fns, policy, frames_per_batch=12, total_frames=36, split_trajs=True) as c:
        c.load_state_dict(
            {**c.state_dict(), "frames": 24, "policy": make_mlp_policy(seed=1).state_dict()}
        )
        batches = list(c)
    assert len(batches) == 1, "resumed at 24 of 36 frames"
    batch = batches[0]
    assert int(batch["collector", "mask"].sum()) == 12
    valid = batch[batch["collector", "mask"]]
    assert acted_by_policy(make_mlp_policy(seed=1), valid).all(), "loaded weights reach workers"


def test_async_batched_collector_options():
    with AsyncBatchedCollector(
        [functools.partial(CountingEnv, max_steps=3)] * 2,
        make_mlp_policy(),
        frames_per_batch=8,
        total_frames=24,
        postproc=add_marker,
        split_trajs=True,
    ) as c:
        assert len(c) == 3
        batches = list(c)
        state = c.state_dict()
    assert all(int(b["collector", "mask"].sum()) == 8 for b in batches)
    assert all((b["marker"] == 7).all() for b in batches)
    assert state["frames"] == 24 and state["collector"] == "AsyncBatchedCollector"


def test_multicollector_async_random_batches_are_split_across_workers():
    policy = make_mlp_policy()
    fns = [functools.partial(CountingEnv, num_envs=2)] * 2
    by_worker: dict[int, list] = {0: [], 1: []}
    with MultiCollector(fns, policy, frames_per_batch=8, sync=False, init_random_frames=16) as c:
        for _ in range(200):  # a worker may start late on a loaded machine
            batch = c.next()
            by_worker[int(batch["collector", "env_ids"][0]) // 2].append(batch)
            if min(len(b) for b in by_worker.values()) >= 2:
                break
    for batches in by_worker.values():  # 16 frames: each worker's first batch of 8
        assert not acted_by_policy(policy, batches[0]).any()
        assert all(acted_by_policy(policy, b).all() for b in batches[1:])


class SharedMarkers:
    """Workers' writes of the "marker" entry, in shared memory."""

    def __init__(self) -> None:
        self.marked = mp.get_context("fork").Value("i", 0)

    def extend(self, batch) -> None:
        with self.marked.get_lock():
            self.marked.value += int((batch["marker"] == 7).sum())


def test_multicollector_workers_apply_postproc_before_writing_to_the_replay_buffer():
    fns = [functools.partial(CountingEnv, num_envs=2)] * 2
    rb = SharedMarkers()
    with MultiCollector(
        fns,
        make_mlp_policy(),
        frames_per_batch=8,
        total_frames=24,
        replay_buffer=rb,
        postproc=add_marker,
    ) as c:
        assert list(c) == [None] * 3
    assert rb.marked.value == 24
