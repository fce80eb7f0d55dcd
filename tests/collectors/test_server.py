"""InferenceServer on its own: lifecycle, clients and futures, failing policies."""

from __future__ import annotations

import functools
import multiprocessing as mp
import threading
from concurrent.futures import Future

import pytest
import torch
from tensordict import TensorDict

from rlpace.collectors import (
    AsyncBatchedCollector,
    InferenceServer,
    PolicyError,
    SlotTransport,
    ThreadingTransport,
    TransportClosed,
)
from rlpace.collectors.testing import CountingEnv, make_mlp_policy

TRANSPORTS = [SlotTransport, ThreadingTransport]


def obs(value: float) -> TensorDict:
    return TensorDict({"observation": torch.full((4,), float(value))})


class PicksyPolicy:
    """Doubles the observation into "action"; raises on a negative observation."""

    in_keys = ["observation"]

    def __call__(self, td):
        if (td["observation"] < 0).any():
            raise ValueError("negative observation")
        td.set("action", td["observation"][..., :1] * 2)
        return td


@pytest.mark.parametrize("transport_cls", TRANSPORTS)
def test_a_raising_policy_fails_only_its_request_and_the_server_keeps_serving(transport_cls):
    with InferenceServer(PicksyPolicy(), transport_cls(num_slots=2)) as server:
        bad, good = server.clients(2)
        with pytest.raises(PolicyError, match="negative observation") as info:
            bad(obs(-1.0), timeout=5)
        assert isinstance(info.value.__cause__, ValueError)
        assert server.is_alive(), "one failing batch does not stop the server"
        assert good(obs(3.0), timeout=5)["action"].item() == 6.0
        assert bad(obs(1.0), timeout=5)["action"].item() == 2.0, "the failed client goes on"
        stats = server.stats()
    assert stats.failed_requests == 1
    assert stats.requests == 3


def test_a_raising_policy_reaches_env_processes_as_policy_error():
    def policy(td):
        if (td["step_count"] >= 2).any():
            raise ValueError("policy exploded at step 2")
        td.set("action", torch.ones(*td.batch_size, 1))
        return td

    fns = [functools.partial(CountingEnv, max_steps=50)] * 2
    c = AsyncBatchedCollector(fns, policy, frames_per_batch=8, backend="multiprocessing")
    with pytest.raises(PolicyError, match="policy exploded") as info:
        for _ in range(20):
            c.next()
    cause = info.value.__cause__
    assert isinstance(cause, ValueError)
    assert "policy exploded at step 2" in info.value.remote_traceback
    assert mp.active_children() == []


def test_shared_memory_transport_delivers_the_error_to_the_slot():
    from rlpace.collectors._shm_transport import SharedMemorySlotTransport

    t = SharedMemorySlotTransport(
        2, obs(0.0), TensorDict({"action": torch.zeros(1)}), mp.get_context("fork")
    )
    server = InferenceServer(PicksyPolicy(), t)
    t.submit(0, obs(-2.0))
    assert server.serve_once(poll=1.0) == 1
    with pytest.raises(PolicyError) as info:
        t.receive_into(0, TensorDict({}), timeout=1.0)
    assert isinstance(info.value.__cause__, ValueError)
    t.submit(1, obs(2.0))
    server.serve_once(poll=1.0)
    out = TensorDict({})
    t.receive_into(1, out, timeout=1.0)
    assert out["action"].item() == 4.0
    t.close()


@pytest.mark.parametrize("transport_cls", TRANSPORTS)
def test_lifecycle_is_alive_shutdown_and_context_manager(transport_cls):
    before = threading.active_count()
    server = InferenceServer(make_mlp_policy(), transport_cls(num_slots=1))
    assert not server.is_alive()
    with server:
        assert server.is_alive()
        assert threading.active_count() == before + 1
    assert not server.is_alive()
    assert threading.active_count() == before
    server.shutdown()  # idempotent
    with pytest.raises(RuntimeError, match="was shut down"):
        server.start()


@pytest.mark.parametrize("transport_cls", TRANSPORTS)
def test_futures_from_many_threads_are_batched_and_answered(transport_cls):
    policy = make_mlp_policy()
    n = 6
    with InferenceServer(policy, transport_cls(num_slots=n), min_batch_size=n, timeout=30) as s:
        clients = s.clients(n)
        futures: list[Future] = [None] * n
        barrier = threading.Barrier(n)

        def ask(i: int) -> None:
            barrier.wait()
            futures[i] = clients[i].submit(obs(i))

        threads = [threading.Thread(target=ask, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        results = [f.result(timeout=5) for f in futures]
        stats = s.stats()
    with torch.no_grad():
        expected = policy.module(torch.arange(float(n))[:, None].expand(n, 4))
    assert torch.allclose(torch.stack([r["action"] for r in results]), expected, atol=1e-5)
    assert [r["observation"][0].item() for r in results] == list(range(n))
    assert stats.batches == 1 and stats.mean_batch_size == n, stats


def test_one_request_in_flight_per_client_and_slots_are_counted():
    release = threading.Event()

    def gated_policy(td):
        release.wait(5)
        td.set("action", td["observation"][..., :1])
        return td

    with InferenceServer(gated_policy, SlotTransport(num_slots=1)) as s:
        client = s.client()
        with pytest.raises(RuntimeError, match="all 1 slots of the transport are taken"):
            s.client()
        future = client.submit(obs(1.0))
        with pytest.raises(RuntimeError, match="already has a request in flight"):
            client.submit(obs(2.0))
        release.set()
        assert future.result(timeout=5)["action"].item() == 1.0
        assert client.submit(obs(3.0)).result(timeout=5)["action"].item() == 3.0
        client.close()
        assert s.client().slot == 0, "a closed client gives its slot back"


def test_shutdown_fails_pending_futures_and_a_stopped_server_refuses_calls():
    entered, release = threading.Event(), threading.Event()

    def slow_policy(td):
        entered.set()
        release.wait(5)
        td.set("action", td["observation"][..., :1])
        return td

    server = InferenceServer(slow_policy, SlotTransport(num_slots=1))
    client = server.client()
    with pytest.raises(RuntimeError, match="not serving"):
        client(obs(0.0))
    server.start()
    future = client.submit(obs(0.0))
    assert entered.wait(5)
    server.shutdown(timeout=0.1)  # the forward is still running
    with pytest.raises(TransportClosed):
        future.result(timeout=5)
    release.set()


def test_policy_version_counts_weight_updates_and_new_weights_serve():
    old, new = make_mlp_policy(seed=0), make_mlp_policy(seed=1)
    with InferenceServer(old, SlotTransport(num_slots=1)) as server:
        client = server.client()
        before = client(obs(1.0), timeout=5)["action"]
        server.update_policy_weights_(new.state_dict())
        after = client(obs(1.0), timeout=5)["action"]
        assert server.stats().policy_version == 1
    with torch.no_grad():
        assert torch.allclose(after, new.module(torch.ones(4)), atol=1e-5)
    assert not torch.allclose(before, after)


def test_collectors_keep_their_env_slots_from_clients():
    with AsyncBatchedCollector([CountingEnv] * 2, make_mlp_policy(), frames_per_batch=4) as c:
        with pytest.raises(RuntimeError, match="slots of the transport are taken"):
            c.server.client()
        c.update_policy_weights_(make_mlp_policy(seed=1).state_dict())
        assert c.policy_version == 1 and c.server_stats().policy_version == 1
