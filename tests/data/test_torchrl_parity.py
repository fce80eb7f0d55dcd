"""What torchrl users expect of a replay buffer, in rlpace's spelling.

Ported from the behaviour torchrl's own replay-buffer tests check (indexing,
plain-tensor items, ``generator=``, ``write_count``, slice sampling with
``end_key``/``strict_length`` and end-of-slice flags, partial batches). Where rlpace
deliberately differs, the replay-buffer guide's "coming from torchrl" section says so.
"""

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

from .conftest import STORAGES


def _items(n: int, start: int = 0) -> TensorDict:
    ids = torch.arange(start, start + n)
    return TensorDict({"id": ids, "obs": ids.float().unsqueeze(-1).expand(n, 2).clone()}, [n])


# ---- rb[idx], rb[:n], storage indexing and assignment ---------------------------------


def test_index_reads_written_slots_in_storage_order(make_storage):
    rb = ReplayBuffer(make_storage(8))
    rb.extend(_items(5))
    assert rb[:3]["id"].tolist() == [0, 1, 2]
    assert rb[1:4]["id"].tolist() == [1, 2, 3]
    assert rb[:]["id"].tolist() == [0, 1, 2, 3, 4]  # only the written slots
    assert int(rb[2]["id"]) == 2 and rb[2].batch_size == torch.Size([])
    assert int(rb[-1]["id"]) == 4
    assert rb[torch.tensor([4, 0])]["id"].tolist() == [4, 0]
    assert rb[[1, 1]]["id"].tolist() == [1, 1]
    assert rb["id"].tolist() == [0, 1, 2, 3, 4]  # one entry of every item
    assert rb["obs"].shape == (5, 2)
    assert sorted(rb[:2].keys()) == ["id", "obs"]
    rb.extend(_items(5, start=5))  # wraps: slots 0, 1 now hold ids 8, 9
    assert rb[:]["id"].tolist() == [8, 9, 2, 3, 4, 5, 6, 7]
    assert torch.equal(rb.storage[:3]["id"], rb[:3]["id"])


def test_index_out_of_range_and_bad_indices_say_what_is_allowed():
    rb = ReplayBuffer(TensorStorage(8))
    rb.extend(_items(3))
    with pytest.raises(IndexError, match=r"index 3 is out of range: the storage holds 3 written"):
        rb[3]
    with pytest.raises(IndexError, match="index -4 is out of range"):
        rb[torch.tensor([0, -4])]
    with pytest.raises(TypeError, match="must hold integers"):
        rb[torch.tensor([0.5])]
    mask = torch.tensor([True, False, True])
    assert rb[mask]["id"].tolist() == [0, 2]


def test_storage_assignment_overwrites_written_items_in_place(make_storage):
    rb = ReplayBuffer(make_storage(8))
    rb.extend(_items(4))
    rb[1] = _items(1, start=100)[0]
    rb[torch.tensor([2, 3])] = _items(2, start=200)
    assert rb[:]["id"].tolist() == [0, 100, 200, 201]
    assert rb[:]["obs"][:, 0].tolist() == [0.0, 100.0, 200.0, 201.0]
    rb.storage[0] = _items(1, start=7)[0]
    assert int(rb[0]["id"]) == 7
    assert len(rb) == 4 and rb.write_count == 4  # assignment is not a write


def test_storage_assignment_refuses_unwritten_slots_and_wrong_layouts():
    rb = ReplayBuffer(TensorStorage(8))
    rb.extend(_items(4))
    with pytest.raises(IndexError, match="extend it before reading or writing there"):
        rb[5] = _items(1)[0]
    with pytest.raises(ValueError, match="names 2 slots, the value holds 3 items"):
        rb[:2] = _items(3)
    with pytest.raises(ValueError, match="dtype torch.int64 with item shape"):
        rb[:1] = TensorDict(
            {"id": torch.zeros(1, 3, dtype=torch.long), "obs": torch.zeros(1, 2)}, [1]
        )
    assert rb[:]["id"].tolist() == [0, 1, 2, 3]  # unchanged


def test_list_storage_assignment_takes_any_object():
    rb = ReplayBuffer(ListStorage(4))
    rb.extend(["a", "b", "c"])
    rb[1] = {"b": 2}
    rb[[0, 2]] = ["x", "z"]
    assert rb[:] == ["x", {"b": 2}, "z"] and rb[-1] == "z"


def test_slice_sampler_sees_trajectories_changed_by_assignment():
    rb = ReplayBuffer(TensorStorage(8), SliceSampler(slice_len=4), batch_size=4)
    rb.extend(TensorDict({"episode": torch.tensor([0, 0, 1, 1, 1, 1, 2, 2])}, [8]))
    assert set(rb.sample()["episode"].tolist()) == {1}
    rb[:] = TensorDict({"episode": torch.zeros(8, dtype=torch.long)}, [8])
    starts = {int(rb.sample()["index"][0]) for _ in range(100)}
    assert starts == {0, 1, 2, 3, 4}


# ---- plain-tensor items ----------------------------------------------------------------


@pytest.mark.parametrize("storage_name", sorted(STORAGES))
@pytest.mark.parametrize("sampler", ["random", "without_replacement", "prioritized"])
def test_plain_tensor_items(storage_name, sampler, tmp_path):
    make_sampler = {
        "random": RandomSampler,
        "without_replacement": SamplerWithoutReplacement,
        "prioritized": lambda: PrioritizedSampler(16, 0.7, 0.5),
    }[sampler]
    rb = ReplayBuffer(STORAGES[storage_name](16, tmp_path), make_sampler(), batch_size=4)
    data = torch.arange(30.0).reshape(10, 3)
    assert rb.extend(data).tolist() == list(range(10))
    sample = rb.sample()
    assert isinstance(sample, torch.Tensor) and sample.shape == (4, 3)
    sample, info = rb.sample(return_info=True)
    assert torch.equal(sample, data[info["index"]])
    if sampler == "prioritized":
        assert info["weight"].shape == (4,)
    assert torch.equal(rb[:], data) and torch.equal(rb[3], data[3])
    assert rb.add(torch.full((3,), -1.0)) == 10
    assert torch.equal(rb[10], torch.full((3,), -1.0))
    other = ReplayBuffer(STORAGES[storage_name](16, tmp_path / "other"), make_sampler())
    other.load_state_dict(rb.state_dict())
    assert torch.equal(other[:], rb[:])


def test_a_tensor_storage_keeps_to_the_kind_of_its_first_batch():
    tensors = ReplayBuffer(TensorStorage(8))
    tensors.extend(torch.zeros(2, 3))
    with pytest.raises(TypeError, match="holds plain tensors .* got a TensorDict"):
        tensors.extend(_items(2))
    dicts = ReplayBuffer(TensorStorage(8))
    dicts.extend(_items(2))
    with pytest.raises(TypeError, match="holds TensorDicts .* got a plain tensor"):
        dicts.extend(torch.zeros(2, 3))
    with pytest.raises(ValueError, match="0-d tensor"):
        tensors.extend(torch.tensor(1.0))
    assert len(tensors) == 2 and len(dicts) == 2


def test_plain_tensor_items_are_shared_with_other_handles(tmp_path):
    rb = ReplayBuffer(MemmapStorage(8, path=tmp_path / "rb"))
    rb.extend(torch.ones(3, 2))
    reopened = ReplayBuffer(MemmapStorage(8, path=tmp_path / "rb"))
    assert torch.equal(reopened[:], torch.ones(3, 2))


# ---- generator= ------------------------------------------------------------------------

SAMPLERS = {
    "random": lambda: RandomSampler(),
    "without_replacement": lambda: SamplerWithoutReplacement(),
    "prioritized": lambda: PrioritizedSampler(64, 0.7, 0.5),
    "slice": lambda: SliceSampler(slice_len=4),
}


@pytest.mark.parametrize("sampler", sorted(SAMPLERS))
def test_generator_makes_sampling_reproducible(sampler):
    def draws(seed):
        rb = ReplayBuffer(
            TensorStorage(64),
            SAMPLERS[sampler](),
            batch_size=8,
            generator=torch.Generator().manual_seed(seed),
        )
        rb.extend(TensorDict({"episode": torch.arange(64) // 16, "x": torch.arange(64)}, [64]))
        torch.manual_seed(seed + 1000)  # the global RNG must not matter
        return [rb.sample()["index"].tolist() for _ in range(5)]

    assert draws(0) == draws(0)
    assert draws(0) != draws(1)


def test_generator_state_travels_with_state_dict():
    rb = ReplayBuffer(TensorStorage(32), generator=torch.Generator().manual_seed(3))
    rb.extend(_items(32))
    state = rb.state_dict()
    expected = [rb.sample(4)["id"].tolist() for _ in range(3)]
    other = ReplayBuffer(TensorStorage(32))
    other.load_state_dict(state)
    assert other.generator is not None
    assert [other.sample(4)["id"].tolist() for _ in range(3)] == expected


def test_a_generator_stays_in_its_process():
    import pickle

    rb = ReplayBuffer(TensorStorage(8), generator=torch.Generator().manual_seed(0))
    rb.extend(_items(8))
    copy = pickle.loads(pickle.dumps(rb))  # what sending it to another process does
    assert copy.generator is None and copy.sampler.generator is None
    assert rb.sampler.generator is rb.generator
    assert len(copy) == 8


def test_set_rng_refuses_what_is_not_a_generator():
    rb = ReplayBuffer(TensorStorage(4))
    with pytest.raises(TypeError, match="expects a torch.Generator"):
        rb.set_rng(0)
    rb.set_rng(None)
    assert rb.generator is None


# ---- write_count -----------------------------------------------------------------------


def test_write_count_counts_every_written_item(make_storage):
    rb = ReplayBuffer(make_storage(4))
    assert rb.write_count == 0
    rb.add(_items(1)[0])
    rb.extend(_items(3))
    rb.extend(_items(2))
    assert rb.write_count == 6 and len(rb) == 4
    # a batch larger than the buffer writes only its newest max_size items (a
    # documented difference: torchrl writes them all, overwriting its own first ones)
    rb.extend(_items(9))
    assert rb.write_count == 10
    rb.empty()
    assert rb.write_count == 0


# ---- return_info -----------------------------------------------------------------------


def test_sample_return_info_gives_the_index_and_weights():
    rb = ReplayBuffer(TensorStorage(8), PrioritizedSampler(8, 1.0, 1.0))
    rb.extend(_items(8))
    data, info = rb.sample(6, return_info=True)
    assert torch.equal(info["index"], data["index"]) and torch.equal(info["weight"], data["weight"])
    texts = ReplayBuffer(ListStorage(4))
    texts.extend(["a", "b"])
    items, info = texts.sample(3, return_info=True)
    assert items == [["a", "b"][i] for i in info["index"].tolist()]


# ---- slice sampling: strict_length, end_key, end-of-slice flags ------------------------


def _two_trajectories():
    # trajectory 1 holds 2 items, trajectory 0 holds 10
    traj = torch.cat([torch.ones(2, dtype=torch.long), torch.zeros(10, dtype=torch.long)])
    return TensorDict({"traj": traj, "x": torch.arange(12)}, [12])


def test_slice_sampler_strict_length():
    torch.manual_seed(0)
    strict = ReplayBuffer(
        TensorStorage(12), SliceSampler(num_slices=2, traj_key="traj"), batch_size=8
    )
    strict.extend(_two_trajectories())
    for _ in range(50):
        sample = strict.sample()
        assert sample.shape == (8,) and bool((sample["traj"] == 0).all())

    loose = ReplayBuffer(
        TensorStorage(12),
        SliceSampler(num_slices=2, traj_key="traj", strict_length=False),
        batch_size=8,
    )
    loose.extend(_two_trajectories())
    shorter = False
    for _ in range(50):
        sample = loose.sample()
        ends = torch.nonzero(sample["next", "truncated"].squeeze(-1)).squeeze(-1)
        starts = torch.cat([torch.zeros(1, dtype=torch.long), ends[:-1] + 1])
        for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
            piece = sample[start : end + 1]
            assert len(piece["traj"].unique()) == 1  # a slice stays in one trajectory
            if int(piece["traj"][0]) == 1:  # too short: the whole trajectory, in order
                assert piece["x"].tolist() == [0, 1]
            else:
                assert len(piece) == 4
        shorter |= sample.shape[0] < 8
    assert shorter


def test_slice_sampler_finds_trajectories_from_end_flags():
    done = torch.zeros(12, 1, dtype=torch.bool)
    done[[2, 7]] = True  # trajectories: 0..2, 3..7, 8..11 (the last one still running)
    data = TensorDict({"x": torch.arange(12), "next": {"done": done}}, [12])
    rb = ReplayBuffer(TensorStorage(12), SliceSampler(slice_len=4), batch_size=8)
    rb.extend(data)
    starts = set()
    for _ in range(100):
        x = rb.sample()["x"].view(2, 4)
        assert bool((x - x[:, :1] == torch.arange(4)).all())
        starts |= set(x[:, 0].tolist())
    assert starts == {3, 4, 8}  # never across an end, never in the 3-item trajectory

    custom = ReplayBuffer(
        TensorStorage(12), SliceSampler(slice_len=4, end_key="stop"), batch_size=4
    )
    custom.extend(TensorDict({"x": torch.arange(12), "stop": done.squeeze(-1)}, [12]))
    assert {int(custom.sample()["x"][0]) for _ in range(100)} == {3, 4, 8}


def test_slice_sampler_without_trajectory_entries_names_both_keys():
    rb = ReplayBuffer(TensorStorage(8), SliceSampler(slice_len=2), batch_size=4)
    rb.extend(_items(8))
    with pytest.raises(KeyError, match="neither the trajectory-id entry traj_key='episode'"):
        rb.sample()


def test_slice_sampler_marks_slice_ends_truncated_and_done():
    done = torch.zeros(16, 1, dtype=torch.bool)
    terminated = torch.zeros(16, 1, dtype=torch.bool)
    done[7] = terminated[7] = True
    data = TensorDict(
        {
            "episode": torch.arange(16) // 8,
            "next": {"done": done, "terminated": terminated},
        },
        [16],
    )
    rb = ReplayBuffer(TensorStorage(16), SliceSampler(slice_len=4), batch_size=8)
    rb.extend(data)
    for _ in range(30):
        sample = rb.sample()
        truncated = sample["next", "truncated"]
        assert truncated.shape == (8, 1)
        assert truncated.squeeze(-1).tolist() == [False, False, False, True] * 2
        stored_done = done[sample["index"]]
        assert torch.equal(sample["next", "done"], stored_done | truncated)
        assert torch.equal(sample["next", "terminated"], terminated[sample["index"]])
    flags_off = ReplayBuffer(
        TensorStorage(16), SliceSampler(slice_len=4, truncated_key=None), batch_size=8
    )
    flags_off.extend(data)
    sample = flags_off.sample()
    assert sorted(sample["next"].keys()) == ["done", "terminated"]
    assert torch.equal(sample["next", "done"], done[sample["index"]])


def test_slice_sampler_flags_without_stored_done():
    rb = ReplayBuffer(TensorStorage(8), SliceSampler(slice_len=2), batch_size=4)
    rb.extend(TensorDict({"episode": torch.zeros(8, dtype=torch.long)}, [8]))
    sample = rb.sample()
    assert sample["next", "done"].squeeze(-1).tolist() == [False, True, False, True]
    assert not bool(sample["next", "terminated"].any())


# ---- extending with a subset of the stored keys ----------------------------------------


def test_extending_with_a_subset_of_keys_names_the_missing_ones(make_storage):
    storage = make_storage(8)
    rb = ReplayBuffer(storage)
    rb.extend(TensorDict({"obs": torch.zeros(2, 3), "next": {"reward": torch.zeros(2, 1)}}, [2]))
    partial = TensorDict({"obs": torch.ones(2, 3)}, [2])
    if isinstance(storage, ListStorage):
        rb.extend(partial)  # a list keeps whatever it is given
        assert len(rb) == 4
        return
    with pytest.raises(KeyError, match=r"without keys \[\('next', 'reward'\)\]"):
        rb.extend(partial)
    assert len(rb) == 2 and rb.write_count == 2


def test_sampling_an_empty_buffer_by_index_is_an_index_error():
    rb = ReplayBuffer(TensorStorage(4))
    with pytest.raises(IndexError, match="holds 0 written slots"):
        rb[0]
    with pytest.raises(EmptyBufferError):
        rb.sample(1)
