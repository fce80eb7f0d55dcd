"""Replay-buffer benchmarks: rlpace.data side by side with torchrl's replay buffers.

Every case with a torchrl twin takes ``impl`` first. Storages hold 4,000 items
(list) or 10,000 (tensor, memmap); batches of 256 items; slices of 8. A torchrl twin
that cannot run here (its prioritized sampler needs a C++ extension) is skipped with
its reason.
"""

from __future__ import annotations

import itertools
import os

import torch
from tensordict import TensorDict

from rlpace.bench.suite import SkipCase, Timed, case

IMPLS = ["rlpace", "torchrl"]
STORAGES = ["list", "tensor", "memmap"]
SAMPLERS = ["random", "without_replacement", "prioritized", "slice"]
SIZE = {"list": 4_000, "tensor": 10_000, "memmap": 10_000}
BATCH = 256
SLICE_LEN = 8
EPISODE_LEN = 100


def _data(n: int, start: int = 0) -> TensorDict:
    ids = torch.arange(start, start + n)
    return TensorDict(
        {
            "id": ids,
            "obs": torch.randn(n, 16),
            "action": torch.randn(n, 4),
            "episode": ids // EPISODE_LEN,
            "next": {
                "obs": torch.randn(n, 16),
                "reward": torch.randn(n, 1),
                "done": torch.zeros(n, 1, dtype=torch.bool),
            },
        },
        [n],
    )


def _rlpace_buffer(storage: str, sampler: str, device: str = "cpu", size: int | None = None):
    from rlpace.data import (
        ListStorage,
        MemmapStorage,
        PrioritizedSampler,
        RandomSampler,
        ReplayBuffer,
        SamplerWithoutReplacement,
        SliceSampler,
        TensorStorage,
    )

    size = size or SIZE[storage]
    make_storage = {
        "list": lambda: ListStorage(size),
        "tensor": lambda: TensorStorage(size, device=device),
        "memmap": lambda: MemmapStorage(size),
    }[storage]
    make_sampler = {
        "random": RandomSampler,
        "without_replacement": SamplerWithoutReplacement,
        "prioritized": lambda: PrioritizedSampler(size, alpha=0.7, beta=0.5),
        "slice": lambda: SliceSampler(slice_len=SLICE_LEN, traj_key="episode"),
    }[sampler]
    return ReplayBuffer(make_storage(), make_sampler(), batch_size=BATCH)


def _torchrl_buffer(
    storage: str, sampler: str, device: str = "cpu", size: int | None = None, cache: bool = False
):
    import torchrl.data as trd

    size = size or SIZE[storage]
    make_storage = {
        "list": lambda: trd.ListStorage(size),
        "tensor": lambda: trd.LazyTensorStorage(size, device=device),
        "memmap": lambda: trd.LazyMemmapStorage(size),
    }[storage]
    make_sampler = {
        "random": trd.RandomSampler,
        "without_replacement": trd.SamplerWithoutReplacement,
        "prioritized": lambda: trd.PrioritizedSampler(size, alpha=0.7, beta=0.5),
        "slice": lambda: trd.SliceSampler(
            slice_len=SLICE_LEN, traj_key="episode", cache_values=cache
        ),
    }[sampler]
    try:
        chosen = make_sampler()
    except (RuntimeError, ImportError) as exc:
        raise SkipCase(f"torchrl's {sampler} sampler cannot run here: {exc}") from exc
    return trd.TensorDictReplayBuffer(storage=make_storage(), sampler=chosen, batch_size=BATCH)


def _buffer(impl: str, storage: str, sampler: str, device: str = "cpu", **kw):
    if device != "cpu" and storage != "tensor":
        raise SkipCase(f"only the tensor storage lives on {device}; {storage} stays on CPU")
    if impl == "rlpace":
        return _rlpace_buffer(storage, sampler, device, kw.get("size"))
    return _torchrl_buffer(storage, sampler, device, **kw)


def _filled(impl, storage, sampler, device="cpu", **kw):
    rb = _buffer(impl, storage, sampler, device, **kw)
    rb.extend(_data(SIZE[storage]).to(device))
    if impl == "torchrl":
        try:
            rb.sample()
        except Exception as exc:  # a combination torchrl does not support
            raise SkipCase(f"torchrl cannot sample {sampler} from {storage}: {exc}") from exc
    return rb


def _forever(rb):
    while True:
        yield from rb


@case(params={"impl": IMPLS, "storage": STORAGES, "sampler": SAMPLERS}, gpu=True, timer="cpu")
def test_rb_sample(impl, storage, sampler, device):
    rb = _filled(impl, storage, sampler, device, cache=True)
    return Timed(rb.sample, items=BATCH, unit="samples")


@case(params={"impl": IMPLS, "storage": STORAGES, "sampler": SAMPLERS}, timer="cpu")
def test_rb_iterate(impl, storage, sampler):
    rb = _filled(impl, storage, sampler, cache=True)
    batches = _forever(rb)
    return Timed(lambda: next(batches), items=BATCH, unit="samples")


@case(params={"impl": IMPLS, "storage": STORAGES}, timer="cpu")
def test_rb_index(impl, storage):
    """Reads by index, ``rb[idx]`` with 256 fixed random indices: no sampler involved."""
    rb = _filled(impl, storage, "random")
    idx = torch.randint(SIZE[storage], (BATCH,), generator=torch.Generator().manual_seed(0))
    return Timed(lambda: rb[idx], items=BATCH, unit="items")


@case(params={"impl": IMPLS, "storage": STORAGES, "sampler": SAMPLERS}, timer="cpu")
def test_rb_populate(impl, storage, sampler):
    size = SIZE[storage]
    chunks = _data(size).split(1_000)
    _buffer(impl, storage, sampler)  # a skipped twin skips before timing

    def populate():
        rb = _buffer(impl, storage, sampler)
        for chunk in chunks:
            rb.extend(chunk)

    return Timed(populate, items=size, unit="items")


@case(params={"impl": IMPLS, "storage": STORAGES, "sampler": SAMPLERS}, gpu=True, timer="cpu")
def test_rb_extend_sample(impl, storage, sampler, device):
    rb = _filled(impl, storage, sampler, device)
    batch = _data(BATCH, start=SIZE[storage]).to(device)

    def extend_sample():
        rb.extend(batch)
        return rb.sample()

    return Timed(extend_sample, items=BATCH, unit="items")


@case(params={"impl": IMPLS, "storage": STORAGES}, timer="cpu")
def test_storage_write(impl, storage):
    rb = _filled(impl, storage, "random")
    batch = _data(BATCH, start=SIZE[storage])
    if impl == "rlpace":
        write = rb.storage.extend
        return Timed(lambda: write(batch), items=BATCH, unit="items")
    st = rb._storage  # torchrl's storage: set() at the writer's cursor
    cursor = itertools.cycle(range(0, SIZE[storage] - BATCH, BATCH))

    def _span(start):
        return torch.arange(start, start + BATCH)

    return Timed(lambda: st.set(_span(next(cursor)), batch), items=BATCH, unit="items")


# ---- several processes extending one buffer ------------------------------------------

SHARED_BATCH = 512
SHARED_EXTENDS = 32  # per writer per timed call
SHARED_ROUND_STRIDE = 10_000_000


def _shared_writer(rb, conn, writer: int, writers: int) -> None:
    torch.set_num_threads(1)  # GNU OpenMP does not survive fork
    per_writer = SHARED_BATCH * SHARED_EXTENDS
    batch = _data(SHARED_BATCH)
    step = torch.arange(SHARED_BATCH)
    conn.send(True)  # ready
    while (round_ := conn.recv()) is not None:
        start = round_ * SHARED_ROUND_STRIDE + writer * per_writer
        for k in range(SHARED_EXTENDS):
            batch.set("id", step + (start + k * SHARED_BATCH))
            rb.extend(batch)
        conn.send(True)
    conn.close()


@case(params={"impl": IMPLS, "writers": [1, 2, 4]})
def test_rb_shared_extend(impl, writers):
    """``writers`` forked processes each extend 32 batches of 512 items into one memmap buffer.

    Teardown checks the last round: every item it wrote must be in the buffer. rlpace
    raises when one is missing; torchrl's loss is stored as ``extra_info``.
    """
    import multiprocessing as mp

    per_round = writers * SHARED_BATCH * SHARED_EXTENDS
    size = 2 * per_round
    if impl == "rlpace":
        from rlpace.data import MemmapStorage, ReplayBuffer

        rb = ReplayBuffer(MemmapStorage(size))
    else:
        import torchrl.data as trd

        rb = trd.ReplayBuffer(storage=trd.LazyMemmapStorage(size))
        rb.extend(_data(1))  # allocate the files before sharing, as torchrl requires
        rb.empty()
    ctx = mp.get_context("fork")
    pipes, procs = [], []
    for w in range(writers):
        parent, child = ctx.Pipe()
        p = ctx.Process(target=_shared_writer, args=(rb, child, w, writers), daemon=True)
        p.start()
        pipes.append(parent)
        procs.append(p)
    for conn in pipes:
        conn.recv()
    rounds = itertools.count(1)
    last = {"round": 0}
    accounting: dict[str, float] = {}

    def extend_round():
        r = next(rounds)
        for conn in pipes:
            conn.send(r)
        for conn in pipes:
            conn.recv()
        last["round"] = r

    def teardown():
        for conn in pipes:
            conn.send(None)
        for p in procs:
            p.join(30)
            if p.is_alive():
                p.kill()
        if last["round"] == 0:
            return
        stored = rb[:] if impl == "torchrl" else rb.storage.get(torch.arange(size))
        ids = stored["id"]
        base = last["round"] * SHARED_ROUND_STRIDE
        found = torch.unique(ids[(ids >= base) & (ids < base + SHARED_ROUND_STRIDE)]).numel()
        accounting["items_lost_fraction"] = 1 - found / per_round
        if impl == "rlpace" and found != per_round:
            raise AssertionError(
                f"rlpace lost {per_round - found} of {per_round} items under {writers} writers"
            )

    return Timed(
        extend_round,
        teardown=teardown,
        items=per_round,
        unit="items",
        extra_info={"accounting": accounting, "pid": os.getpid()},
    )
