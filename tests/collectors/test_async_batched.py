from __future__ import annotations

import functools
import threading

import pytest
import torch
from tensordict import TensorDict

from rlpace.collectors import (
    AsyncBatchedCollector,
    EnvStepError,
    InferenceServer,
    PolicyError,
    SlotTransport,
    ThreadingTransport,
)
from rlpace.collectors.testing import CountingEnv, make_mlp_policy


@pytest.mark.parametrize("env_threads", [1, 2, 3])
@pytest.mark.parametrize("transport", ["slot", "queue"])
def test_batches_grouped_by_env_with_exact_frames(transport, env_threads, check_trajectories):
    env_fns = [functools.partial(CountingEnv, max_steps=3)] * 3
    before = threading.active_count()
    c = AsyncBatchedCollector(
        env_fns,
        make_mlp_policy(),
        frames_per_batch=30,
        total_frames=50,
        transport=transport,
        env_threads=env_threads,
    )
    assert threading.active_count() == before + 1 + env_threads, "server + env threads"
    batches = list(c)
    assert [b.numel() for b in batches] == [30, 20]
    for batch in batches:
        env_ids = batch["collector", "env_ids"]
        assert torch.equal(env_ids, env_ids.sort().values), "frames are grouped by env"
        check_trajectories(batch)
        with torch.no_grad():
            expected = c.policy.module(batch["observation"])
        assert torch.allclose(batch["action"], expected, atol=1e-5)
    assert c.server_stats().requests >= 50
    c.shutdown()
    c.shutdown()
    assert threading.active_count() == before


def test_min_batch_size_batches_requests():
    env_fns = [functools.partial(CountingEnv, step_sleep=0.001)] * 4
    with AsyncBatchedCollector(
        env_fns, make_mlp_policy(), frames_per_batch=20, min_batch_size=4, server_timeout=5.0
    ) as c:
        c.next()
        stats = c.server_stats()
    # every env has at most one request in flight, so waiting for 4 means batches of 4
    assert stats.mean_batch_size == 4.0
    assert stats.queue_latency_ms["p50"] >= 0.0
    assert stats.forward_latency_ms["p99"] > 0.0


def test_env_error_names_env_and_stops_threads():
    before = threading.active_count()
    env_fns = [functools.partial(CountingEnv, max_steps=50)] * 3
    env_fns[2] = functools.partial(CountingEnv, max_steps=50, fail_at_step=5)
    c = AsyncBatchedCollector(env_fns, make_mlp_policy(), frames_per_batch=100)
    with pytest.raises(EnvStepError, match="env 2 raised RuntimeError"):
        c.next()
    assert threading.active_count() == before


def test_policy_error_surfaces_and_stops_threads():
    before = threading.active_count()

    def broken(td):
        raise ValueError("policy exploded")

    c = AsyncBatchedCollector([CountingEnv] * 2, broken, frames_per_batch=4)
    with pytest.raises(PolicyError, match="policy raised ValueError") as info:
        c.next()
    assert isinstance(info.value.__cause__, ValueError)
    assert threading.active_count() == before


def test_bad_arguments_fail_before_starting():
    before = threading.active_count()
    policy = make_mlp_policy()
    with pytest.raises(ValueError, match="unknown backend='mpi'"):
        AsyncBatchedCollector([CountingEnv], policy, frames_per_batch=4, backend="mpi")
    with pytest.raises(ValueError, match="is not supported; supported combinations"):
        AsyncBatchedCollector(
            [CountingEnv],
            policy,
            frames_per_batch=4,
            env_backend="threading",
            policy_backend="ray",
        )
    with pytest.raises(ValueError, match="exactly one of policy= or policy_factory="):
        AsyncBatchedCollector([CountingEnv], frames_per_batch=4)
    with pytest.raises(ValueError, match="env 0 is batched"):
        AsyncBatchedCollector([functools.partial(CountingEnv, 2)], policy, frames_per_batch=4)
    with pytest.raises(ValueError, match="unknown transport 'pigeon'"):
        AsyncBatchedCollector([CountingEnv], policy, frames_per_batch=4, transport="pigeon")
    assert threading.active_count() == before


@pytest.mark.parametrize("transport_cls", [SlotTransport, ThreadingTransport])
def test_server_drains_pending_requests_up_to_max(transport_cls):
    transport = transport_cls(num_slots=5)
    server = InferenceServer(make_mlp_policy(), transport, min_batch_size=1, max_batch_size=3)
    for slot in range(5):
        transport.submit(slot, TensorDict({"observation": torch.full((4,), float(slot))}))
    assert server.serve_once() == 3
    assert server.serve_once() == 2
    assert server.serve_once(poll=0.01) == 0
    outs = []
    for slot in range(5):
        out = TensorDict({})
        transport.receive_into(slot, out, timeout=1.0)
        outs.append(out["action"])
    with torch.no_grad():
        expected = make_mlp_policy().module(torch.arange(5.0)[:, None].expand(5, 4))
    assert torch.allclose(torch.stack(outs), expected, atol=1e-5)
    stats = server.stats()
    assert (stats.requests, stats.batches) == (5, 2)
    with pytest.raises(ValueError, match="max_batch_size"):
        InferenceServer(make_mlp_policy(), transport, min_batch_size=4, max_batch_size=2)


def test_process_backend_serves_env_processes_through_shared_memory(check_trajectories):
    import multiprocessing as mp

    env_fns = [functools.partial(CountingEnv, max_steps=3)] * 3
    c = AsyncBatchedCollector(
        env_fns,
        make_mlp_policy(),
        frames_per_batch=24,
        total_frames=48,
        backend="multiprocessing",
    )
    batches = list(c)
    assert [b.numel() for b in batches] == [24, 24]
    for batch in batches:
        env_ids = batch["collector", "env_ids"]
        assert torch.equal(env_ids, env_ids.sort().values)
        check_trajectories(batch)
        with torch.no_grad():
            expected = c.policy.module(batch["observation"])
        assert torch.allclose(batch["action"], expected, atol=1e-5)
    assert c.server_stats().requests >= 48
    c.shutdown()
    c.shutdown()
    assert mp.active_children() == []


def test_process_backend_env_error_stops_everything():
    import multiprocessing as mp

    env_fns = [functools.partial(CountingEnv, max_steps=50)] * 2
    env_fns[1] = functools.partial(CountingEnv, max_steps=50, fail_at_step=4)
    c = AsyncBatchedCollector(
        env_fns, make_mlp_policy(), frames_per_batch=40, backend="multiprocessing"
    )
    # env 0 may fill a batch or two before env 1's error arrives (env 1 starts in its
    # own process, which can be late on a loaded machine); the error must surface soon
    with pytest.raises(EnvStepError, match="env 1 raised RuntimeError"):  # noqa: PT012
        for _ in range(50):
            c.next()
    assert mp.active_children() == []
    assert c.server._thread is None


def test_weight_updates_reach_the_server():
    old, new = make_mlp_policy(seed=0), make_mlp_policy(seed=1)
    frames, envs = 8, 2

    def acted_by(policy, batch):
        with torch.no_grad():
            expected = policy.module(batch["observation"])
        return torch.isclose(batch["action"], expected, atol=1e-5).all(-1)

    with AsyncBatchedCollector([CountingEnv] * envs, old, frames_per_batch=frames) as c:
        assert acted_by(old, c.next()).all()
        c.update_policy_weights_(new.state_dict())
        batches = [c.next() for _ in range(12)]
    by_new = torch.cat([acted_by(new, b) for b in batches])
    # Stale frames are bounded: two batches may wait for the consumer and each env may
    # have one action in flight (an env descheduled mid-step can deliver its frame a
    # little after other envs' new-weight frames); the last batch is new weights only.
    stale = int((~by_new).sum())
    assert stale <= 2 * frames + envs + frames, f"{stale} frames acted by stale weights"
    assert by_new[-frames:].all(), "the new weights never took over the inference server"


@pytest.mark.parametrize("env_threads", [1, 2])
def test_env_threads_stop_two_batches_ahead_of_a_lagging_consumer(env_threads, check_back_pressure):
    frames, envs = 8, 2
    with AsyncBatchedCollector(
        [CountingEnv] * envs, make_mlp_policy(), frames_per_batch=frames, env_threads=env_threads
    ) as c:
        check_back_pressure(c, envs, settle=0.3)


def test_env_threads_default_follows_whether_a_step_holds_the_gil():
    policy = make_mlp_policy()
    with AsyncBatchedCollector([CountingEnv] * 4, policy, frames_per_batch=8) as c:
        assert c.env_threads == 1, "pure-torch steps hold the GIL: one thread steps all envs"
        assert c.next().numel() == 8
    sleepy = [functools.partial(CountingEnv, step_sleep=0.005)] * 4
    with AsyncBatchedCollector(sleepy, policy, frames_per_batch=8) as c:
        assert c.env_threads == 4, "steps that sleep overlap in one thread per env"
        assert c.next().numel() == 8


def test_the_gil_probe_leaves_the_global_random_stream_alone():
    from rlpace.collectors._async_batched import threads_to_keep_gil_busy

    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    threads_to_keep_gil_busy(CountingEnv(), num_envs=4)  # random actions, up to 4 steps
    assert torch.equal(torch.rand(3), expected)


def test_one_env_thread_serves_its_whole_round_in_one_forward():
    envs = 6
    with AsyncBatchedCollector(
        [CountingEnv] * envs, make_mlp_policy(), frames_per_batch=60, env_threads=1
    ) as c:
        c.next()
        stats = c.server_stats()
    # a round's requests reach the server together: no forward sees a part of them
    assert stats.mean_batch_size == envs, stats


def test_env_threads_out_of_range_or_without_threads_fails_before_starting():
    before = threading.active_count()
    policy = make_mlp_policy()
    with pytest.raises(
        ValueError, match=r"env_threads must be between 1 and the number of envs \(2\)"
    ):
        AsyncBatchedCollector([CountingEnv] * 2, policy, frames_per_batch=4, env_threads=3)
    with pytest.raises(ValueError, match="env_threads applies to env_backend='threading' only"):
        AsyncBatchedCollector(
            [CountingEnv] * 2, policy, frames_per_batch=4, backend="multiprocessing", env_threads=1
        )
    assert threading.active_count() == before
