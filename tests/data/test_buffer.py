"""ReplayBuffer behaviour in one process: every storage with every sampler, and bad input."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rlpace.data import (
    EmptyBufferError,
    ListStorage,
    MemmapStorage,
    PrioritizedSampler,
    RandomSampler,
    ReplayBuffer,
    SamplerWithoutReplacement,
    SliceSampler,
    TensorStorage,
)

from .conftest import SAMPLERS


def _consistent(sample: TensorDict) -> None:
    ids = sample["id"]
    assert torch.equal(sample["obs"], ids.float().unsqueeze(-1).expand(len(ids), 3))
    assert torch.equal(sample["nested", "flag"], (ids % 2).bool())
    assert torch.equal(sample["episode"], ids // 8)


@pytest.mark.parametrize("sampler_name", sorted(SAMPLERS))
def test_every_storage_with_every_sampler(make_storage, batch, sampler_name):
    rb = ReplayBuffer(make_storage(64), sampler=SAMPLERS[sampler_name](64), batch_size=8)
    assert rb.extend(batch(0, 40)).tolist() == list(range(40))
    assert len(rb) == 40
    sample = rb.sample()
    assert sample.batch_size == torch.Size([8])
    _consistent(sample)
    assert torch.equal(sample["index"], sample["id"])  # slots 0..39 hold ids 0..39
    if sampler_name == "slice":
        slices = sample["id"].view(2, 4)
        assert torch.equal(slices - slices[:, :1], torch.arange(4).expand(2, 4))
        assert bool((sample["episode"].view(2, 4) == sample["episode"].view(2, 4)[:, :1]).all())
    if sampler_name == "prioritized":
        assert sample["weight"].shape == (8,)
    # wrap around: 40 more items overwrite the oldest 16
    assert rb.extend(batch(40, 40)).tolist() == list(range(40, 64)) + list(range(16))
    assert len(rb) == 64
    sample = rb.sample()
    _consistent(sample)
    assert bool((sample["id"] >= 16).all())


def test_nested_keys_dtypes_and_trailing_shapes_round_trip(tmp_path):
    data = TensorDict(
        {
            "pixels": torch.randint(0, 255, (5, 2, 3, 4), dtype=torch.uint8),
            "next": {
                "reward": torch.randn(5, 2, 1),
                "done": torch.zeros(5, 2, 1, dtype=torch.bool),
            },
            "action": torch.randn(5, 2, 6, dtype=torch.float64),
        },
        [5, 2],
    )
    for storage in (TensorStorage(10), MemmapStorage(10, path=tmp_path / "m")):
        rb = ReplayBuffer(storage)
        rb.extend(data[:, :])  # items have batch shape [2]
        got = storage.get(torch.arange(5))
        assert got.batch_size == torch.Size([5, 2])
        assert (got == data).all()
        assert got["pixels"].dtype == torch.uint8


def test_add_appends_one_item_and_returns_its_slot():
    rb = ReplayBuffer(TensorStorage(3))
    for i in range(4):
        slot = rb.add(TensorDict({"x": torch.tensor(i)}, []))
    assert slot == 0 and len(rb) == 3
    assert sorted(rb.storage.get(torch.arange(3))["x"].tolist()) == [1, 2, 3]


def test_list_storage_holds_arbitrary_objects():
    rb = ReplayBuffer(ListStorage(5), batch_size=3)
    rb.extend(["a", ("b", 1), {"c": None}])
    rb.add(7)
    assert len(rb) == 4
    assert all(x in ("a", ("b", 1), {"c": None}, 7) for x in rb.sample())


def test_batch_larger_than_storage_keeps_the_newest(batch):
    rb = ReplayBuffer(TensorStorage(10))
    rb.extend(batch(0, 25))
    assert len(rb) == 10
    assert sorted(rb.storage.get(torch.arange(10))["id"].tolist()) == list(range(15, 25))


def test_without_replacement_epochs_cover_every_item_once(batch):
    rb = ReplayBuffer(TensorStorage(50), SamplerWithoutReplacement(), batch_size=8)
    rb.extend(batch(0, 30))
    for _ in range(2):
        sizes, seen = [], []
        for b in rb:
            sizes.append(len(b))
            seen += b["id"].tolist()
        assert sizes == [8, 8, 8, 6] and sorted(seen) == list(range(30))


def test_without_replacement_drop_last_and_no_shuffle(batch):
    rb = ReplayBuffer(TensorStorage(50), SamplerWithoutReplacement(drop_last=True, shuffle=False))
    rb.extend(batch(0, 10))
    rb.batch_size = 4
    assert [b["id"].tolist() for b in rb] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert rb.sample(4)["id"].tolist() == [0, 1, 2, 3]  # a new epoch started
    with pytest.raises(ValueError, match="larger than the 10 items .* drop_last=True"):
        rb.sample(11)


def test_random_sampler_iterates_without_end(batch):
    rb = ReplayBuffer(TensorStorage(50), RandomSampler(), batch_size=4)
    rb.extend(batch(0, 10))
    it = iter(rb)
    assert all(len(next(it)) == 4 for _ in range(20))


def test_prioritized_sampling_follows_priorities(batch):
    torch.manual_seed(0)
    rb = ReplayBuffer(TensorStorage(16), PrioritizedSampler(16, alpha=1.0, beta=1.0, eps=0.0))
    rb.extend(batch(0, 4))
    rb.update_priority(torch.arange(4), torch.tensor([1.0, 3.0, 0.0, 0.0]))
    counts = torch.bincount(rb.sample(4000)["index"], minlength=4)
    assert counts[2] == 0 and counts[3] == 0
    assert 2.5 < counts[1] / counts[0] < 3.5
    weight = rb.sample(100)
    w = {int(i): float(x) for i, x in zip(weight["index"], weight["weight"])}
    assert w[0] == pytest.approx(1.0) and w[1] == pytest.approx(1 / 3)
    # new items enter at the highest priority seen
    rb.extend(batch(4, 1))
    assert float(rb.sampler._tree.leaves(torch.tensor([4]))) == pytest.approx(3.0)


def test_prioritized_sampler_smaller_than_storage_is_refused():
    with pytest.raises(ValueError, match="max_capacity=8.*max_size=16"):
        ReplayBuffer(TensorStorage(16), PrioritizedSampler(8, 0.6, 0.4))


def test_slice_sampler_never_crosses_an_episode_end():
    episode = torch.tensor([0] * 5 + [1] * 2 + [2] * 9 + [3] * 4)
    rb = ReplayBuffer(TensorStorage(40), SliceSampler(num_slices=8, traj_key="episode"))
    rb.extend(TensorDict({"episode": episode, "t": torch.arange(20)}, [20]))
    for _ in range(20):
        s = rb.sample(32)
        ep, t = s["episode"].view(8, 4), s["t"].view(8, 4)
        assert bool((ep == ep[:, :1]).all())
        assert bool((t - t[:, :1] == torch.arange(4)).all())
        assert 1 not in ep[:, 0].tolist()  # too short for a slice of 4
    with pytest.raises(ValueError, match="no trajectory holds 10"):
        rb.sample(10 * 8)
    short = ReplayBuffer(TensorStorage(4), SliceSampler(slice_len=3))
    short.extend(TensorDict({"episode": torch.zeros(4)}, [4]))
    with pytest.raises(ValueError, match="not a multiple"):
        short.sample(4)


def test_slice_sampler_does_not_join_old_and_new_data_at_the_ring_cursor():
    rb = ReplayBuffer(TensorStorage(8), SliceSampler(slice_len=3))
    rb.extend(TensorDict({"episode": torch.zeros(8, dtype=torch.long)}, [8]))
    rb.extend(TensorDict({"episode": torch.zeros(2, dtype=torch.long)}, [2]))
    # write order is slots 2..7 then 0, 1: a slice never runs 7 -> 0 -> ... across the cursor
    for _ in range(20):
        idx = rb.sample(3)["index"].tolist()
        assert idx in ([2, 3, 4], [3, 4, 5], [4, 5, 6], [5, 6, 7], [6, 7, 0], [7, 0, 1])


def test_state_dict_round_trip(make_storage, batch, tmp_path):
    storage = make_storage(32)
    rb = ReplayBuffer(storage, PrioritizedSampler(32, 0.6, 0.4))
    rb.extend(batch(0, 20))
    rb.extend(batch(20, 20))
    rb.update_priority(torch.tensor([0, 1]), torch.tensor([5.0, 0.5]))
    state = rb.state_dict()
    kind = type(storage)
    other_storage = (
        MemmapStorage(32, path=tmp_path / "other") if kind is MemmapStorage else type(storage)(32)
    )
    other = ReplayBuffer(other_storage, PrioritizedSampler(32, 0.6, 0.4))
    other.load_state_dict(state)
    assert len(other) == 32
    idx = torch.arange(32)
    assert other.storage.get(idx)["id"].tolist() == storage.get(idx)["id"].tolist()
    assert torch.equal(
        other.sampler.state_dict()["priorities"], rb.sampler.state_dict()["priorities"]
    )
    # the restored ring continues where the saved one stopped
    assert other.extend(batch(40, 1)).tolist() == [8]


def test_state_dict_of_a_partly_filled_buffer_holds_only_the_written_rows(
    make_storage, batch, tmp_path
):
    storage = make_storage(1000)
    rb = ReplayBuffer(storage)
    rb.extend(batch(0, 7))
    state = rb.state_dict()
    saved = state["storage"]
    rows = saved["data"].batch_size[0] if "data" in saved else len(saved["items"])
    assert rows == 7  # not the capacity of 1000
    kind = type(storage)
    other = ReplayBuffer(
        MemmapStorage(1000, path=tmp_path / "other") if kind is MemmapStorage else kind(1000)
    )
    other.load_state_dict(state)
    assert len(other) == 7
    assert other.storage.get(torch.arange(7))["id"].tolist() == list(range(7))
    assert other.extend(batch(7, 2)).tolist() == [7, 8]  # the ring goes on after the copy


def test_dumps_and_loads(batch, tmp_path):
    rb = ReplayBuffer(TensorStorage(16))
    rb.extend(batch(0, 10))
    rb.dumps(tmp_path / "dump")
    other = ReplayBuffer(TensorStorage(16))
    other.loads(tmp_path / "dump")
    assert len(other) == 10
    _consistent(other.sample(5))
    with pytest.raises(FileNotFoundError, match="no saved replay buffer"):
        other.loads(tmp_path)
    (tmp_path / "dump" / "rlpace-replay-buffer.json").write_text('{"format_version": 99}')
    with pytest.raises(ValueError, match="format version 99"):
        other.loads(tmp_path / "dump")


def test_memmap_storage_reopens_its_directory(batch, tmp_path):
    rb = ReplayBuffer(MemmapStorage(16, path=tmp_path / "rb"))
    rb.extend(batch(0, 12))
    del rb
    reopened = ReplayBuffer(MemmapStorage(16, path=tmp_path / "rb"))
    assert len(reopened) == 12
    assert reopened.extend(batch(12, 2)).tolist() == [12, 13]
    assert sorted(reopened.storage.get(torch.arange(14))["id"].tolist()) == list(range(14))
    with pytest.raises(ValueError, match="max_size=16, but max_size=8"):
        MemmapStorage(8, path=tmp_path / "rb")
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "file").write_text("x")
    with pytest.raises(ValueError, match="not empty and holds no rlpace storage"):
        MemmapStorage(8, path=tmp_path / "junk")


def test_empty_forgets_items(make_storage, batch):
    rb = ReplayBuffer(make_storage(16), PrioritizedSampler(16, 0.6, 0.4))
    rb.extend(batch(0, 10))
    rb.empty()
    assert len(rb) == 0
    with pytest.raises(EmptyBufferError):
        rb.sample(2)
    assert rb.extend(batch(0, 3)).tolist() == [0, 1, 2]
    assert len(rb) == 3


# ---- bad input: a clear error, and the buffer unchanged ---------------------------


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (lambda b: b.exclude("obs"), "without keys .*obs"),
        (
            lambda b: b.set("extra", torch.zeros(4)),
            "key \\('extra',\\) that the storage does not hold",
        ),
        (lambda b: b.set("obs", torch.zeros(4, 2)), "item shape \\[3\\].*item shape \\[2\\]"),
        (lambda b: b.set("id", b["id"].float()), "dtype torch.int64.*dtype torch.float32"),
        (lambda b: b[:0], "empty batch"),
        (lambda b: b[0], "Use add\\(\\) for a single item"),
        (lambda b: {"id": b["id"]}, "expects a TensorDict"),
    ],
)
def test_bad_batches_are_refused_and_change_nothing(batch, bad, message, tmp_path):
    for storage in (TensorStorage(16), MemmapStorage(16, path=tmp_path / "m")):
        rb = ReplayBuffer(storage, PrioritizedSampler(16, 0.6, 0.4))
        rb.extend(batch(0, 4))
        with pytest.raises((ValueError, KeyError, TypeError), match=message):
            rb.extend(bad(batch(4, 4)))
        assert len(rb) == 4
        assert rb.extend(batch(4, 1)).tolist() == [4]
        tmp_path = tmp_path / "again"


def test_sampling_errors(batch):
    rb = ReplayBuffer(TensorStorage(8))
    with pytest.raises(EmptyBufferError, match="holds no committed item"):
        rb.sample(2)
    rb.extend(batch(0, 2))
    with pytest.raises(ValueError, match="needs a batch size"):
        rb.sample()
    with pytest.raises(ValueError, match="positive int; got 0"):
        rb.sample(0)


@pytest.mark.parametrize(
    ("priority", "message"),
    [
        (torch.tensor([1.0, float("nan")]), "finite and non-negative.*nan"),
        (torch.tensor([-1.0, 1.0]), "finite and non-negative.*-1.0"),
        (torch.tensor([1.0, 2.0, 3.0]), "2 indices and 3 priorities"),
    ],
)
def test_bad_priorities_are_refused_and_change_nothing(batch, priority, message):
    rb = ReplayBuffer(TensorStorage(8), PrioritizedSampler(8, 1.0, 1.0))
    rb.extend(batch(0, 4))
    before = rb.sampler.state_dict()["priorities"].clone()
    with pytest.raises(ValueError, match=message):
        rb.update_priority(torch.tensor([0, 1]), priority)
    assert torch.equal(rb.sampler.state_dict()["priorities"], before)
    with pytest.raises(IndexError, match="must lie in \\[0, 8\\)"):
        rb.update_priority(torch.tensor([9]), torch.tensor([1.0]))
    with pytest.raises(TypeError, match="needs a PrioritizedSampler"):
        ReplayBuffer(TensorStorage(8)).update_priority([0], [1.0])


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: TensorStorage(0), "positive int"),
        (lambda: MemmapStorage(-1), "positive int"),
        (lambda: ListStorage(2.5), "positive int"),
        (lambda: TensorStorage(4, device="meta", shared=True), "use shared=False"),
        (lambda: SliceSampler(), "exactly one of slice_len or num_slices"),
        (lambda: PrioritizedSampler(8, alpha=float("nan"), beta=0.4), "finite number"),
        (lambda: PrioritizedSampler(8, alpha=0.6, beta=-1), "non-negative"),
        (lambda: ReplayBuffer([]), "expects TensorStorage"),
        (lambda: ReplayBuffer(TensorStorage(2), sampler="random"), "rlpace.data sampler"),
    ],
)
def test_bad_configuration_is_refused(build, message):
    with pytest.raises((ValueError, TypeError), match=message):
        build()


@pytest.mark.parametrize("shared", [True, False])
def test_threads_extending_one_buffer_lose_nothing(batch, shared):
    import threading

    rb = ReplayBuffer(TensorStorage(2_000, shared=shared))
    threads = [
        threading.Thread(
            target=lambda w=w: [rb.extend(batch(w * 1000 + 10 * k, 10)) for k in range(50)]
        )
        for w in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stored = rb.storage.get(torch.arange(2_000))
    _consistent(stored)
    assert len(rb) == 2_000
    assert sorted(stored["id"].tolist()) == [w * 1000 + i for w in range(4) for i in range(500)]


# ---- regressions (issue 19) -------------------------------------------------------


def test_list_storage_samples_a_ragged_batch_as_a_lazy_stack():
    from tensordict import LazyStackedTensorDict

    def rollout(lengths):
        return LazyStackedTensorDict.lazy_stack(
            [
                TensorDict({"tokens": torch.full((n,), n), "reward": torch.tensor(float(n))})
                for n in lengths
            ]
        )

    rb = ReplayBuffer(ListStorage(10), batch_size=6)
    rb.extend(rollout([1, 2, 3]))
    rb.extend(rollout([4, 5]))  # a second batch: sampling gathers from both
    sample = rb.sample()
    assert isinstance(sample, LazyStackedTensorDict) and sample.batch_size == (6,)
    for item, slot in zip(sample.tensordicts, sample["index"].tolist(), strict=True):
        length = slot + 1
        assert torch.equal(item["tokens"], torch.full((length,), length))
    assert torch.equal(sample["reward"], sample["index"].float() + 1)
    one = rb.storage.get(torch.tensor([2]))  # one batch only
    assert one.tensordicts[0]["tokens"].tolist() == [3, 3, 3]


def test_state_dict_returns_a_copy_and_load_state_dict_does_not_alias(batch):
    for sampler in (SamplerWithoutReplacement(), PrioritizedSampler(16, 1.0, 1.0)):
        rb = ReplayBuffer(TensorStorage(16), sampler, batch_size=4)
        rb.extend(batch(0, 10))
        rb.sample()
        state = rb.state_dict()
        saved = {
            k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in state["sampler"].items()
        }
        # the buffer changes after state_dict: the state must not
        rb.extend(batch(10, 6))
        rb.sample()
        if isinstance(sampler, PrioritizedSampler):
            rb.update_priority(torch.arange(16), torch.rand(16) + 5)
        for key, value in saved.items():
            if isinstance(value, torch.Tensor):
                assert torch.equal(state["sampler"][key], value), key
        # the state changes after load_state_dict: the buffer must not
        other = ReplayBuffer(
            TensorStorage(16), type(sampler)(**sampler.__getstate__()), batch_size=4
        )
        other.load_state_dict(state)
        before = other.state_dict()["sampler"]
        for value in state["sampler"].values():
            if isinstance(value, torch.Tensor):
                value.fill_(3)
        after = other.state_dict()["sampler"]
        for key, value in before.items():
            if isinstance(value, torch.Tensor):
                assert torch.equal(after[key], value), key


def test_list_storage_state_dict_is_a_copy_of_its_items():
    rb = ReplayBuffer(ListStorage(4))
    batch = TensorDict({"x": torch.zeros(3)}, [3])
    rb.extend(batch)
    state = rb.state_dict()
    batch["x"] += 1  # ListStorage keeps references: the stored items change ...
    assert rb[:]["x"].tolist() == [1.0, 1.0, 1.0]
    other = ReplayBuffer(ListStorage(4))
    other.load_state_dict(state)
    assert other[:]["x"].tolist() == [0.0, 0.0, 0.0]  # ... the saved ones do not
