from __future__ import annotations

import pytest
import torch

from rlpace.collectors import Collector, EnvStepError
from rlpace.collectors.testing import CountingEnv, make_mlp_policy


def test_batches_are_flat_time_ordered_and_reset(policy, check_trajectories):
    with Collector(CountingEnv(num_envs=3, max_steps=4), policy, frames_per_batch=30) as c:
        it = iter(c)
        first, second = next(it), next(it)
    for batch in (first, second):
        assert batch.batch_size == torch.Size([30])
        assert batch["next", "reward"].shape == (30, 1)
        check_trajectories(batch)
    # env-major layout: frames 0..9 are env 0, in time order
    assert batch["collector", "env_ids"].tolist() == [0] * 10 + [1] * 10 + [2] * 10
    # trajectory ids are unique across envs and continue across batches
    ids_first = set(first["collector", "traj_ids"].tolist())
    ids_second = set(second["collector", "traj_ids"].tolist())
    assert max(ids_first) < max(ids_second)
    # collection carries on: env 0's second batch continues its first batch
    last = first[first["collector", "env_ids"] == 0][-1]
    nxt = second[second["collector", "env_ids"] == 0][0]
    if not last["next", "done"]:
        assert torch.equal(last["next", "observation"], nxt["observation"])


def test_total_frames_is_exact_and_last_batch_cut(counting_env_fn, policy):
    c = Collector(counting_env_fn, policy, frames_per_batch=8, total_frames=20)
    sizes = [b.numel() for b in c]
    assert sizes == [8, 8, 4]
    assert c.frames == 20
    c.shutdown()
    c.shutdown()  # idempotent
    assert c.env.is_closed
    with pytest.raises(RuntimeError, match="shut down"):
        c.next()


def test_gym_env_unbatched():
    from torchrl.envs import GymEnv

    env = GymEnv("Pendulum-v1")
    pol = make_mlp_policy(obs_dim=3, act_dim=1)
    with Collector(env, pol, frames_per_batch=250) as c:
        batch = c.next()
    assert batch.batch_size == (250,)
    # Pendulum truncates at 200 steps: one reset, two trajectories
    assert batch["next", "truncated"].sum() == 1
    assert batch["collector", "traj_ids"].unique().numel() == 2


def test_bad_arguments_fail_fast(policy):
    with pytest.raises(ValueError, match="multiple of the number of envs"):
        Collector(CountingEnv(num_envs=3), policy, frames_per_batch=10)
    with pytest.raises(TypeError, match="policy must be a callable"):
        Collector(CountingEnv(), "not a policy", frames_per_batch=10)
    with pytest.raises(TypeError, match="EnvBase"):
        Collector(42, policy, frames_per_batch=10)
    with pytest.raises(ValueError, match="total_frames"):
        Collector(CountingEnv(), policy, frames_per_batch=10, total_frames=0)


def test_weight_update_changes_actions():
    env = CountingEnv(num_envs=2)
    c = Collector(env, make_mlp_policy(seed=0), frames_per_batch=2)
    other = make_mlp_policy(seed=1)
    obs = torch.ones(2, 4)
    before = c.policy.module(obs)
    c.update_policy_weights_(other.state_dict())
    assert torch.allclose(c.policy.module(obs), other.module(obs))
    assert not torch.allclose(before, other.module(obs))
    from tensordict import TensorDict

    c.update_policy_weights_(TensorDict.from_module(make_mlp_policy(seed=0)))
    assert torch.allclose(c.policy.module(obs), before)
    assert c.policy_version == 2


def test_env_error_names_env_and_keeps_cause(policy):
    c = Collector(CountingEnv(num_envs=2, fail_at_step=3), policy, frames_per_batch=10)
    with pytest.raises(EnvStepError, match="env 0") as info:
        c.next()
    assert isinstance(info.value.__cause__, RuntimeError)
    assert "failed on purpose" in str(info.value)
    c.shutdown()


def test_replay_buffer_receives_batches(counting_env_fn, policy, list_buffer):
    buffer = list_buffer
    out = list(Collector(counting_env_fn, policy, 6, total_frames=12, replay_buffer=buffer))
    assert out == [None, None]
    assert len(buffer) == 12


def test_stack_frames_keeps_non_tensor_entries_and_ragged_frames():
    from tensordict import LazyStackedTensorDict, NonTensorData, TensorDict

    from rlpace.collectors._rollout import stack_frames

    dense = [TensorDict({"obs": torch.zeros(3), "text": NonTensorData("hi")}) for _ in range(2)]
    out = stack_frames(dense)
    assert out["obs"].shape == (2, 3) and out["text"] == ["hi", "hi"]
    ragged = [TensorDict({"tokens": torch.zeros(n)}) for n in (2, 5)]
    lazy = stack_frames(ragged)
    assert isinstance(lazy, LazyStackedTensorDict)
    assert [t.shape[0] for t in lazy.get("tokens", as_list=True)] == [2, 5]
