"""Buffers shared between processes: fork and spawn, concurrent writers, killed writers."""

from __future__ import annotations

import os
import pickle
import signal
import time

import pytest
import torch
import torch.multiprocessing as tmp_mp
from tensordict import TensorDict

from rlpace.data import (
    ListStorage,
    MemmapStorage,
    PrioritizedSampler,
    ReplayBuffer,
    SamplerWithoutReplacement,
    TensorStorage,
)

FORK = tmp_mp.get_context("fork")


def _batch(start: int, n: int) -> TensorDict:
    ids = torch.arange(start, start + n)
    return TensorDict({"id": ids, "obs": ids.float().unsqueeze(-1).expand(n, 64).clone()}, [n])


def _check_items(data: TensorDict) -> None:
    ids = data["id"]
    assert torch.equal(data["obs"], ids.float().unsqueeze(-1).expand(len(ids), 64)), "torn item"


def _in_child(target, *args):
    # GNU OpenMP does not survive fork: a forked child that runs a parallel torch op
    # after its parent did hangs, unless it stays on one thread (as DataLoader workers do)
    torch.set_num_threads(1)
    target(*args)


@pytest.fixture
def start():
    """``start(ctx, target, *args)`` starts a child; every child is killed at teardown."""
    procs = []

    def launch(ctx, target, *args):
        p = ctx.Process(target=_in_child, args=(target, *args), daemon=True)
        p.start()
        procs.append(p)
        return p

    yield launch
    for p in procs:
        if p.is_alive():
            p.kill()
        p.join(30)


def _finish(p, timeout=120):
    p.join(timeout)
    if p.is_alive():
        raise AssertionError(f"child {p.name} did not finish in {timeout}s")
    return p.exitcode


# ---- workers (module level so spawn can import them) -------------------------------


def _extend_ones(rb):
    rb.extend(TensorDict({"a": torch.ones(10)}, [10]))


def _extend_range(rb, start, n_batches, batch_len):
    for b in range(n_batches):
        rb.extend(_batch(start + b * batch_len, batch_len))


def _sample_and_check(rb, stop, errors):
    try:
        while not stop.is_set():
            if len(rb):
                _check_items(rb.sample(64))
    except BaseException as exc:  # reported to the parent
        errors.put(repr(exc)[:500])


def _extend_then_hang(rb, ready):
    """Reserve and half-write a batch, then wait to be killed."""
    storage = rb.storage
    write = storage._write

    def half_write(plan, first, n):
        write([(dst, src) for dst, src in plan[:1]], first, n)  # 'id' written, 'obs' not
        ready.set()
        time.sleep(600)

    storage._write = half_write
    rb.extend(_batch(1000, 16))


def _hold_lock(rb, ready):
    with rb.storage.ledger.lock:
        ready.set()
        time.sleep(600)


def _extend_inherited(rb):
    try:
        rb.extend(["x"])
    except RuntimeError as exc:
        os._exit(3 if "inherited by a forked process" in str(exc) else 4)
    os._exit(0)


def _set_priority(rb):
    rb.update_priority(torch.tensor([1]), torch.tensor([100.0]))


def _spawned_child(rbs):
    for rb in rbs:
        _extend_ones(rb)


# ---- the issue's example ----------------------------------------------------------


@pytest.mark.parametrize("storage_cls", [TensorStorage, MemmapStorage])
def test_issue_example_with_fork_after_and_before_the_first_write(storage_cls, start):
    rb = ReplayBuffer(storage=storage_cls(21))
    rb.extend(TensorDict({"a": torch.zeros(10)}, [10]))
    assert _finish(start(FORK, _extend_ones, rb)) == 0
    assert len(rb) == 20
    assert sorted(rb.storage.get(torch.arange(20))["a"].tolist()) == [0.0] * 10 + [1.0] * 10

    fresh = ReplayBuffer(storage=storage_cls(21))  # shared before its first write
    assert _finish(start(FORK, _extend_ones, fresh)) == 0
    assert len(fresh) == 10 and fresh.sample(4)["a"].tolist() == [1.0] * 4
    fresh.extend(TensorDict({"a": torch.zeros(10)}, [10]))
    assert len(fresh) == 20


def test_issue_example_with_spawn(start):
    spawn = tmp_mp.get_context("spawn")
    before = [ReplayBuffer(storage=TensorStorage(21)), ReplayBuffer(storage=MemmapStorage(21))]
    for rb in before:
        rb.extend(TensorDict({"a": torch.zeros(10)}, [10]))
    unwritten = ReplayBuffer(storage=TensorStorage(21))
    assert _finish(start(spawn, _spawned_child, [*before, unwritten]), timeout=240) == 0
    assert [len(rb) for rb in before] == [20, 20]
    assert len(unwritten) == 10 and unwritten.sample(3)["a"].tolist() == [1.0] * 3


# ---- concurrent writers and readers ------------------------------------------------


@pytest.mark.parametrize("storage_cls", [TensorStorage, MemmapStorage])
def test_concurrent_extends_lose_and_duplicate_nothing(storage_cls, start):
    writers, n_batches, batch_len = 3, 40, 7
    total = writers * n_batches * batch_len
    rb = ReplayBuffer(storage_cls(total + 5))
    stop, errors = FORK.Event(), FORK.Queue()
    reader = start(FORK, _sample_and_check, rb, stop, errors)
    procs = [
        start(FORK, _extend_range, rb, w * 10_000, n_batches, batch_len) for w in range(writers)
    ]
    _extend_range(rb, 99_000, 5, 1)  # the parent writes too
    for p in procs:
        _finish(p)
    stop.set()
    _finish(reader, 60)
    assert [p.exitcode for p in procs] == [0] * writers and reader.exitcode == 0
    assert errors.empty(), errors.get()
    assert len(rb) == total + 5
    stored = rb.storage.get(torch.arange(total + 5))
    _check_items(stored)
    expected = [w * 10_000 + i for w in range(writers) for i in range(n_batches * batch_len)]
    assert sorted(stored["id"].tolist()) == sorted(expected + list(range(99_000, 99_005)))


def test_concurrent_extends_around_the_ring_count_every_write(start):
    rb = ReplayBuffer(TensorStorage(50))
    stop, errors = FORK.Event(), FORK.Queue()
    reader = start(FORK, _sample_and_check, rb, stop, errors)  # reads while writers overwrite
    procs = [start(FORK, _extend_range, rb, w * 10_000, 30, 9) for w in range(3)]
    for p in procs:
        _finish(p)
    stop.set()
    _finish(reader, 60)
    assert [p.exitcode for p in procs] == [0, 0, 0] and reader.exitcode == 0
    assert errors.empty(), errors.get()
    assert rb.storage.ledger.writes == 3 * 30 * 9 and len(rb) == 50
    stored = rb.storage.get(torch.arange(50))
    _check_items(stored)
    assert len(set(stored["id"].tolist())) == 50


def test_priorities_are_shared(start):
    rb = ReplayBuffer(TensorStorage(8), PrioritizedSampler(8, alpha=1.0, beta=1.0))
    rb.extend(_batch(0, 4))
    assert _finish(start(FORK, _set_priority, rb)) == 0
    assert float(rb.sampler._tree.leaves(torch.tensor([1]))) == pytest.approx(100.0)
    counts = torch.bincount(rb.sample(1000)["index"], minlength=4)
    assert counts[1] > 900


# ---- killed processes ---------------------------------------------------------------


def test_writer_killed_mid_extend_leaves_the_buffer_consistent(tmp_path, start):
    path = tmp_path / "rb"
    rb = ReplayBuffer(MemmapStorage(64, path=path), SamplerWithoutReplacement())
    rb.extend(_batch(0, 8))
    ready = FORK.Event()
    p = start(FORK, _extend_then_hang, rb, ready)
    assert ready.wait(60)
    os.kill(p.pid, signal.SIGKILL)
    p.join()
    assert len(rb) == 8  # the half-written batch is not counted
    assert rb.extend(_batch(100, 8)).tolist() == list(range(24, 32))  # others go on
    assert len(rb) == 16
    seen = torch.cat([b["id"] for b in (rb.sample(16),)]).tolist()
    assert sorted(seen) == list(range(8)) + list(range(100, 108))
    del rb
    reopened = ReplayBuffer(MemmapStorage(64, path=path), batch_size=4)
    assert len(reopened) == 16
    for _ in range(20):
        _check_items(reopened.sample())
        assert not set(reopened.sample()["index"].tolist()) & set(range(8, 24))


def test_a_process_killed_holding_the_lock_does_not_block_others(start):
    rb = ReplayBuffer(TensorStorage(16))
    ready = FORK.Event()
    p = start(FORK, _hold_lock, rb, ready)
    assert ready.wait(60)
    os.kill(p.pid, signal.SIGKILL)
    p.join()
    rb.extend(_batch(0, 4))
    assert len(rb) == 4


# ---- what cannot be shared says so ---------------------------------------------------


@pytest.mark.parametrize(
    "storage",
    [lambda: ListStorage(4), lambda: TensorStorage(4, shared=False)],
    ids=["list", "local"],
)
def test_unshareable_storage_refuses_to_be_sent(storage):
    rb = ReplayBuffer(storage())
    with pytest.raises(TypeError, match="cannot be sent to another process.*MemmapStorage"):
        pickle.dumps(rb)
    spawn = tmp_mp.get_context("spawn")
    p = spawn.Process(target=_extend_ones, args=(rb,))
    with pytest.raises(TypeError, match="cannot be sent to another process"):
        p.start()


def test_forked_list_storage_refuses_to_write_a_private_copy(start):
    rb = ReplayBuffer(ListStorage(4))
    assert _finish(start(FORK, _extend_inherited, rb)) == 3


def test_unpickling_a_freed_shared_storage_says_so():
    rb = ReplayBuffer(TensorStorage(4))
    payload = pickle.dumps(rb)
    del rb
    with pytest.raises(FileNotFoundError, match="is gone: the process that created it"):
        pickle.loads(payload)


def _open_memmap(path, n):
    MemmapStorage(n, path=path)


def test_processes_opening_one_new_directory_agree(tmp_path, start):
    path = tmp_path / "new"
    procs = [start(FORK, _open_memmap, path, 32) for _ in range(4)]
    assert [_finish(p) for p in procs] == [0, 0, 0, 0]
    rb = ReplayBuffer(MemmapStorage(32, path=path))
    assert rb.extend(_batch(0, 3)).tolist() == [0, 1, 2]
