"""Kill-anywhere: a process SIGKILLed at any line of a locked section or of allocation.

Each kill point is a forked child that traces itself (``sys.settrace``) and sends
itself SIGKILL when it reaches the chosen line; the parent then checks ``len``, the
items (against a model of the ring it keeps itself), the sampler's shared state, and
that new writers go on.
"""

from __future__ import annotations

import gc
import inspect
import os
import pickle
import random
import signal
import sys
import traceback
from pathlib import Path

import numpy as np
import pytest
import torch
from tensordict import TensorDict

import rlpace.data._janitor as janitor_module
import rlpace.data._ledger as ledger_module
import rlpace.data._prioritized as prioritized_module
import rlpace.data._storage as storage_module
import rlpace.data._sumtree as sumtree_module
from rlpace.data import (
    MemmapStorage,
    PrioritizedSampler,
    ReplayBuffer,
    TensorStorage,
)
from rlpace.data._janitor import sweep_orphans
from rlpace.data._ledger import CLEAN, JOURNAL, SlotLedger

CAPACITY = 8
WIDTH = 3
#: allocation sweeps kill at every STRIDE-th line (RLPACE_KILL_SWEEP=full: every line)
STRIDE = 1 if os.environ.get("RLPACE_KILL_SWEEP") == "full" else 3

# the locked sections: the ledger, and what samplers do under its lock
LOCKED_FILES = {m.__file__ for m in (ledger_module, prioritized_module, sumtree_module)}
_S = storage_module._TensorStorageBase
# allocation: opening a folder, writing its meta, creating the ledger, the first extend
ALLOCATION_CODE = {
    f.__code__
    for f in (
        _S._setup,
        _S._check_or_write_meta,
        _S._allocate,
        _S._attach,
        _S._attach_if_allocated,
        storage_module._discard_unfinished_allocation,
        janitor_module.remove_stale_temporaries,
        janitor_module.create_owned_directory,
        janitor_module.hold_in_use,
        ledger_module._shared_array,
        SlotLedger.__init__,
    )
}


def _batch(start: int, n: int) -> TensorDict:
    ids = torch.arange(start, start + n)
    return TensorDict({"id": ids, "obs": ids.float().unsqueeze(-1).expand(n, WIDTH).clone()}, [n])


# ---- a child that kills itself at the n-th traced line ------------------------------


def _trace_lines(n: int, wanted) -> None:
    """Send SIGKILL to this process at the ``n``-th line event ``wanted(code)`` accepts."""
    seen = 0

    def local(frame, event, arg):
        nonlocal seen
        if event == "line":
            seen += 1
            if seen == n:
                os.kill(os.getpid(), signal.SIGKILL)
        return local

    def calls(frame, event, arg):
        return local if wanted(frame.f_code) else None

    sys.settrace(calls)


def _run_child(work, kill_at: int | None = None, wanted=None) -> str:
    """Run ``work()`` in a forked child, killed at traced line ``kill_at``.

    Returns ``"killed"`` or ``"finished"`` (the child ran out of lines first).
    """
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 0
        try:
            torch.set_num_threads(1)  # OpenMP's pool does not survive fork
            if kill_at is not None:
                _trace_lines(kill_at, wanted)
            work()
        except BaseException:  # noqa: BLE001 - reported to the parent by the exit code
            traceback.print_exc()
            code = 3
        finally:
            sys.settrace(None)
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL:
        return "killed"
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, f"child failed: {status}"
    return "finished"


def _in_locked_files(code) -> bool:
    return code.co_filename in LOCKED_FILES


def _in_allocation(code) -> bool:
    return code in ALLOCATION_CODE


def _at_source_line(func, text: str):
    """``(code, lineno)`` of the first line of ``func`` that contains ``text``."""
    lines, start = inspect.getsourcelines(func)
    lineno = start + next(i for i, line in enumerate(lines) if text in line)
    code = func.__code__
    return code, lineno


def _kill_before(code, lineno) -> None:
    def local(frame, event, arg):
        if event == "line" and frame.f_lineno == lineno:
            os.kill(os.getpid(), signal.SIGKILL)
        return local

    sys.settrace(lambda frame, event, arg: local if frame.f_code is code else None)


def _run_child_killed_before(work, code, lineno) -> str:
    """Run ``work()`` in a forked child, killed just before line ``lineno`` of ``code``."""
    pid = os.fork()
    if pid == 0:
        exit_code = 0
        try:
            torch.set_num_threads(1)
            _kill_before(code, lineno)
            work()
        except BaseException:  # noqa: BLE001 - reported to the parent by the exit code
            traceback.print_exc()
            exit_code = 3
        finally:
            os._exit(exit_code)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL:
        return "killed"
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, f"child failed: {status}"
    return "finished"


# ---- the model the parent keeps -----------------------------------------------------


class RingModel:
    """What the buffer must hold: slot -> id of every committed item, and the cursor."""

    def __init__(self) -> None:
        self.items: dict[int, int] = {}
        self.writes = 0

    def committed(self, first: int, ids: list[int]) -> None:
        for k, item in enumerate(ids):
            self.items[(first + k) % CAPACITY] = item
        self.writes = first + len(ids)

    def after_child(self, rb: ReplayBuffer, *batches: list[int]) -> None:
        """Account for children's extends of ``batches`` (in order), killed somewhere."""
        ledger = rb.storage.ledger
        writes = ledger.writes  # settles: repairs the dead holder's update
        ends = [self.writes]
        for ids in batches:
            ends.append(ends[-1] + len(ids))
        assert writes in ends, (writes, ends)
        for ids in batches:
            first = self.writes
            if writes < first + len(ids):
                return  # killed before it reserved anything
            slots = [(first + k) % CAPACITY for k in range(len(ids))]
            for slot in slots:
                self.items.pop(slot, None)  # reserved: their old items are gone
            valid = ledger.valid[slots]
            assert valid.all() or not valid.any(), f"half-committed batch: {valid}"
            self.writes = first + len(ids)
            if valid.all():
                for slot, item in zip(slots, ids, strict=True):
                    self.items[slot] = item

    def check(self, rb: ReplayBuffer) -> None:
        ledger = rb.storage.ledger
        assert len(rb) == len(self.items)
        assert ledger.writes == self.writes
        n, slots = ledger.committed()
        slots = np.arange(n) if slots is None else slots
        assert sorted(slots.tolist()) == sorted(self.items)
        assert ledger.counters[JOURNAL] == CLEAN
        if self.items:
            index = torch.tensor(sorted(self.items))
            data = rb.storage.get(index)
            assert data["id"].tolist() == [self.items[s] for s in sorted(self.items)]
            assert torch.equal(data["obs"], data["id"].float().unsqueeze(-1).expand(-1, WIDTH))
            batch = rb.sample(64)
            assert set(batch["index"].tolist()) <= set(self.items)
            assert all(self.items[s] == i for s, i in zip(batch["index"].tolist(), batch["id"]))
        sampler = rb.sampler
        if isinstance(sampler, PrioritizedSampler) and self.items:  # sample() rebuilt it
            tree = sampler._tree
            leaves = tree.sums[tree.size : tree.size + CAPACITY]
            live = torch.zeros(CAPACITY, dtype=torch.bool)
            live[list(self.items)] = True
            assert bool((leaves[~live] == 0).all()), "an uncommitted slot can be drawn"
            assert bool((leaves[live] > 0).all()), "a committed slot cannot be drawn"
            assert tree.total == pytest.approx(float(leaves.sum()))


def _snapshot(directory) -> dict[str, bytes]:
    """The bytes of every shared file of a storage (what a dead process leaves behind)."""
    return {
        p.name: p.read_bytes()
        for p in sorted(directory.iterdir())
        if p.is_file() and p.name not in ("lock", "in-use.lock")
    }


def _restore(directory, snapshot: dict[str, bytes]) -> None:
    """Put the bytes back in place: every process's mappings of the files see them."""
    for name, data in snapshot.items():
        with open(directory / name, "r+b") as f:
            f.write(data)


def _killed_writer_then_parent(rb, model, ids, point, wanted, parent_ids) -> str:
    """A child extends ``ids`` and dies at traced line ``point``; then the parent extends."""
    outcome = _run_child(lambda: rb.extend(_batch(ids[0], len(ids))), point, wanted)
    model.after_child(rb, ids)
    model.check(rb)
    first = model.writes
    rb.extend(_batch(parent_ids[0], len(parent_ids)))  # a new writer goes on
    model.committed(first, parent_ids)
    model.check(rb)
    return outcome


def _wrapped_buffer_with_a_dead_writer() -> tuple[ReplayBuffer, RingModel]:
    """A prioritized buffer whose next extend of 5 wraps the ring and takes over a slot
    that a writer killed between reserve and commit left pending."""
    rb = ReplayBuffer(TensorStorage(CAPACITY), PrioritizedSampler(CAPACITY, 0.7, 0.5))
    model = RingModel()
    rb.extend(_batch(0, 6))
    model.committed(0, list(range(6)))
    rb.storage.ledger.reserve(1)  # ticket 6 (slot 6): reserved, never committed
    model.writes = 7
    rb.extend(_batch(7, 7))  # tickets 7..13
    model.committed(7, list(range(7, 14)))
    model.check(rb)
    return rb, model


# ---- the locked sections -------------------------------------------------------------


def test_sigkill_at_every_line_of_the_locked_sections_keeps_len_and_items_true():
    """One writer killed at line 1, 2, ... of everything it runs under the lock.

    Each kill point starts from the same state (restored byte for byte): a wrapped
    ring, a slot left pending by an earlier dead writer in the batch's way, and a
    prioritized sampler, so reserve's overwrite path, the takeover of the dead slot,
    commit and the priority tree's updates are all crossed. After each kill the
    parent checks ``len``, the cursor, the committed slots, the items and the tree,
    extends the buffer itself and checks again.
    """
    rb, start_model = _wrapped_buffer_with_a_dead_writer()
    directory = rb.storage.ledger.directory
    start = _snapshot(directory)
    point = 0
    while True:
        point += 1
        _restore(directory, start)
        model = RingModel()
        model.items, model.writes = dict(start_model.items), start_model.writes
        outcome = _killed_writer_then_parent(
            rb, model, list(range(100, 105)), point, _in_locked_files, [200, 201, 202]
        )
        if outcome == "finished":
            break
    assert point > 50  # the sweep really went through the locked code


def test_random_sigkills_of_writers_do_not_drift_len():
    """The issue's experiment: writers killed at random locked lines, one after another.

    Before, the counters drifted after 11-17 kills (``len`` 31 for 32 valid items).
    """
    rng = random.Random(19)
    rb = ReplayBuffer(TensorStorage(CAPACITY), PrioritizedSampler(CAPACITY, 0.7, 0.5))
    model = RingModel()
    next_id = 0
    for _ in range(30):
        ids = list(range(next_id, next_id + rng.randint(1, CAPACITY)))
        parent = list(range(ids[-1] + 1, ids[-1] + 1 + rng.randint(1, 3)))
        next_id = parent[-1] + 1
        _killed_writer_then_parent(rb, model, ids, rng.randint(1, 120), _in_locked_files, parent)


def test_sigkill_inside_reserve_keeps_a_full_buffer_len_true():
    """A kill at any line of ``reserve``, three times at that line, then more extends.

    The issue's case: one line of ``reserve`` left a full buffer at ``len(rb) == 0``
    (sampling raised ``EmptyBufferError``) and a third kill made ``len`` negative.
    """
    lines, start = inspect.getsourcelines(SlotLedger.reserve)
    body = [start + i for i, line in enumerate(lines) if line.strip() and i > 0]
    code = SlotLedger.reserve.__code__
    rb = ReplayBuffer(TensorStorage(CAPACITY))
    rb.extend(_batch(0, CAPACITY))
    next_id = CAPACITY
    for lineno in body:
        for _ in range(3):
            _run_child_killed_before(lambda: rb.extend(_batch(1000, 4)), code, lineno)
        assert 0 <= len(rb) <= CAPACITY
        for _ in range(4):
            rb.extend(_batch(next_id, 4))
            next_id += 4
        assert len(rb) == CAPACITY, f"killed before line {lineno} of reserve"
        ids = rb.sample(64)["id"]
        assert bool((ids >= next_id - CAPACITY).all())


def test_sigkill_during_a_repair_is_repaired_by_the_next_holder():
    """A dead writer's half-done reserve, then its repairer killed at every line."""
    rb, start_model = _wrapped_buffer_with_a_dead_writer()
    directory = rb.storage.ledger.directory
    code, lineno = _at_source_line(SlotLedger.reserve, "self.owner[span] = tickets")
    # a first writer dies with valid[] cleared and owner[] not yet written
    assert _run_child_killed_before(lambda: rb.extend(_batch(1, 3)), code, lineno) == "killed"
    assert rb.storage.ledger.counters[JOURNAL] != CLEAN
    dirty = _snapshot(directory)
    point = 0
    while True:
        point += 1
        _restore(directory, dirty)
        model = RingModel()
        model.items, model.writes = dict(start_model.items), start_model.writes
        # the second one repairs it on taking the lock, and is killed somewhere in there
        outcome = _run_child(
            lambda: rb.extend(_batch(100, 4)),
            point,
            lambda code: code.co_name in ("repair", "_derive_counters", "__enter__", "_span"),
        )
        model.after_child(rb, [1, 2, 3], [100, 101, 102, 103])
        model.check(rb)
        first = model.writes
        rb.extend(_batch(200, 3))
        model.committed(first, [200, 201, 202])
        model.check(rb)
        if outcome == "finished":
            break
    assert point > 10


# ---- allocation ---------------------------------------------------------------------


def _allocation_points():
    point = 1
    while True:
        yield point
        point += STRIDE


def test_writer_killed_during_first_extend_allocation_does_not_brick_the_buffer():
    """A worker killed in the first extend's allocation of a buffer it shares.

    Before: every later extend raised ``The file .../leaf000_x.memmap already exists``.
    Every ``STRIDE``-th line of allocation is a kill point.
    """
    for point in _allocation_points():
        rb = ReplayBuffer(TensorStorage(CAPACITY))
        model = RingModel()
        outcome = _killed_writer_then_parent(
            rb, model, list(range(5)), point, _in_allocation, [50, 51, 52]
        )
        if outcome == "finished":
            break
    assert point > 10


def test_writer_killed_after_the_first_leaf_file_does_not_brick_the_buffer():
    code, lineno = _at_source_line(_S._allocate, 'spec["leaves"].append(')
    rb = ReplayBuffer(TensorStorage(CAPACITY))
    assert _run_child_killed_before(lambda: rb.extend(_batch(0, 5)), code, lineno) == "killed"
    assert any(p.name.startswith("leaf") for p in rb.storage.ledger.directory.iterdir())
    assert rb.extend(_batch(10, 2)).tolist() == [0, 1]
    assert len(rb) == 2
    assert set(rb.sample(16)["id"].tolist()) == {10, 11}


def test_memmap_writer_killed_during_meta_write_leaves_a_reopenable_directory(tmp_path):
    code, lineno = _at_source_line(_S._check_or_write_meta, "os.replace(tmp, meta_path)")
    path = tmp_path / "rb"
    outcome = _run_child_killed_before(lambda: MemmapStorage(CAPACITY, path=path), code, lineno)
    assert outcome == "killed"
    assert any(".tmp" in p.name for p in path.iterdir())  # the half-written meta
    rb = ReplayBuffer(MemmapStorage(CAPACITY, path=path))
    assert rb.extend(_batch(0, 2)).tolist() == [0, 1]
    assert len(ReplayBuffer(MemmapStorage(CAPACITY, path=path))) == 2


def test_memmap_writer_killed_during_open_or_allocation_leaves_a_reopenable_directory(
    tmp_path,
):
    """``MemmapStorage(path=...)`` killed from opening the folder to the first commit.

    Every ``STRIDE``-th line is a kill point; then the folder is reopened, extended
    and reopened again.
    """
    for point in _allocation_points():
        path = tmp_path / f"rb{point}"

        def work(path=path):
            ReplayBuffer(MemmapStorage(CAPACITY, path=path)).extend(_batch(0, 5))

        outcome = _run_child(work, point, _in_allocation)
        rb = ReplayBuffer(MemmapStorage(CAPACITY, path=path))
        model = RingModel()
        model.after_child(rb, list(range(5)))
        model.check(rb)
        first = model.writes
        rb.extend(_batch(50, 4))
        model.committed(first, list(range(50, 54)))
        model.check(rb)
        del rb
        model.check(ReplayBuffer(MemmapStorage(CAPACITY, path=path)))
        if outcome == "finished":
            break
    assert point > 10


# ---- loading a dump ------------------------------------------------------------------


class _Payload:
    """A pickle that runs code when loaded (what a tampered dump could hold)."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_loads_does_not_run_pickled_code(tmp_path):
    rb = ReplayBuffer(TensorStorage(4))
    rb.extend(_batch(0, 3))
    rb.dumps(tmp_path / "dump")
    state = torch.load(tmp_path / "dump" / "state.pt", weights_only=False)
    marker = tmp_path / "pwned"
    state["sampler"] = {"payload": _Payload(str(marker))}
    torch.save(state, tmp_path / "dump" / "state.pt")
    other = ReplayBuffer(TensorStorage(4))
    with pytest.raises(ValueError, match="refuses to run the code.*weights_only=False"):
        other.loads(tmp_path / "dump")
    assert not marker.exists()
    assert len(other) == 0


def test_loads_reads_tensor_and_list_dumps_without_pickled_code(tmp_path):
    from rlpace.data import ListStorage

    rb = ReplayBuffer(TensorStorage(4), PrioritizedSampler(4, 1.0, 1.0))
    rb.extend(_batch(0, 3))
    rb.dumps(tmp_path / "tensor")
    other = ReplayBuffer(TensorStorage(4), PrioritizedSampler(4, 1.0, 1.0))
    other.loads(tmp_path / "tensor")
    assert sorted(other.sample(32)["id"].unique().tolist()) == [0, 1, 2]
    texts = ReplayBuffer(ListStorage(4))
    texts.extend(["a prompt", {"turns": [1, 2]}])
    texts.extend(_batch(5, 1))
    texts.dumps(tmp_path / "list")
    back = ReplayBuffer(ListStorage(4))
    back.loads(tmp_path / "list")
    assert back.storage.get(torch.tensor([0, 1])) == ["a prompt", {"turns": [1, 2]}]
    assert back.storage.get(torch.tensor([2]))["id"].tolist() == [5]


# ---- temporary folders of dead processes ---------------------------------------------


def _child_owning_folders(send_storage: bool = False):
    """Fork a child that creates a TensorStorage and a MemmapStorage, reports their
    folders (and, with ``send_storage``, the pickled buffer) and waits to be killed."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read)
            # a fresh program's SIGTERM: earlier tests in this pytest process (Ray, say)
            # may have installed a handler of their own, which rlpace leaves in place
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            torch.set_num_threads(1)
            shm = ReplayBuffer(TensorStorage(4))
            shm.extend(_batch(0, 2))
            mm = ReplayBuffer(MemmapStorage(4))
            mm.extend(_batch(0, 2))
            payload = {
                "folders": [str(shm.storage.ledger.directory), str(mm.storage.path)],
                "buffer": pickle.dumps(shm) if send_storage else None,
            }
            with os.fdopen(write, "wb") as pipe:
                pickle.dump(payload, pipe)
            signal.pause()
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        payload = pickle.load(pipe)
    return pid, payload


def _wait_killed(pid: int, sig: int) -> None:
    os.kill(pid, sig)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == sig  # died of it, as before


def test_shared_memory_folders_do_not_leak_when_the_creator_is_sigkilled():
    pid, payload = _child_owning_folders()
    folders = [Path(f) for f in payload["folders"]]
    assert all(f.is_dir() for f in folders)
    _wait_killed(pid, signal.SIGKILL)
    assert all(f.is_dir() for f in folders)  # nothing ran in the child
    # a process's first creation of each kind sweeps the orphans (later ones at most
    # once a minute); a forked child counts as a new process
    _run_child(lambda: (TensorStorage(4), MemmapStorage(4)))
    assert not any(f.exists() for f in folders)


def test_shared_memory_folders_do_not_leak_when_the_creator_is_sigtermed():
    pid, payload = _child_owning_folders()
    folders = [Path(f) for f in payload["folders"]]
    _wait_killed(pid, signal.SIGTERM)
    assert not any(f.exists() for f in folders)  # removed by the child on its way out


def test_a_dead_creators_folder_stays_while_another_process_uses_it():
    pid, payload = _child_owning_folders(send_storage=True)
    shm_folder = Path(payload["folders"][0])
    rb = pickle.loads(payload["buffer"])  # this process now uses the child's folder
    _wait_killed(pid, signal.SIGKILL)
    _run_child(lambda: TensorStorage(4))
    assert shm_folder.is_dir()
    rb.extend(_batch(10, 2))
    assert len(rb) == 4
    del rb
    gc.collect()
    _run_child(lambda: TensorStorage(4))
    assert not shm_folder.exists()


def test_sweeping_leaves_folders_of_live_processes_and_unmarked_data_alone(tmp_path):
    live = TensorStorage(4)
    live.extend(_batch(0, 1))
    unmarked = tmp_path / "rlpace-rb-old"  # e.g. written by an rlpace that did not mark
    unmarked.mkdir()
    (unmarked / "counters.bin").write_bytes(b"\0" * 64)
    sweep_orphans(tmp_path, "rlpace-rb-")
    sweep_orphans(live.ledger.directory.parent, "rlpace-rb-")
    assert unmarked.is_dir() and live.ledger.directory.is_dir()
    assert len(live) == 1
