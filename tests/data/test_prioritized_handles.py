"""A prioritized sampler sees items written through other handles of its storage.

A writer process often extends the buffer through its own handle (a uniform
buffer, a collector's, a bare storage) while the learner samples with priorities:
the learner must give those items the highest priority, not a mass of zero.
"""

from __future__ import annotations

import pytest
import torch
import torch.multiprocessing as tmp_mp
from tensordict import TensorDict

from rlpace.data import (
    EmptyBufferError,
    MemmapStorage,
    PrioritizedSampler,
    ReplayBuffer,
    TensorStorage,
)


def _batch(start: int, n: int) -> TensorDict:
    return TensorDict({"id": torch.arange(start, start + n)}, [n])


def _learner_and_writer(tmp_path, size=16):
    learner = ReplayBuffer(
        MemmapStorage(size, path=tmp_path / "rb"), PrioritizedSampler(size, 1.0, 1.0)
    )
    writer = ReplayBuffer(MemmapStorage(size, path=tmp_path / "rb"))  # uniform sampler
    return learner, writer


def test_prioritized_sampler_sees_items_written_through_another_handle(tmp_path):
    learner, writer = _learner_and_writer(tmp_path)
    writer.extend(_batch(0, 4))
    sample = learner.sample(400)
    assert sorted(set(sample["id"].tolist())) == [0, 1, 2, 3]
    assert torch.allclose(sample["weight"], torch.ones(400))  # all at the same (max) priority
    # the new items get the highest priority seen so far
    learner.update_priority(torch.arange(4), torch.tensor([8.0, 1.0, 1.0, 1.0]))
    writer.extend(_batch(4, 2))
    counts = torch.bincount(learner.sample(4000)["id"], minlength=6)
    share = counts.float() / 4000
    expected = torch.tensor([8.0, 1, 1, 1, 8, 8]) / 27
    assert torch.allclose(share, expected, atol=0.03)


def test_prioritized_sampler_gives_an_overwritten_slot_the_new_items_priority(tmp_path):
    learner, writer = _learner_and_writer(tmp_path, size=4)
    learner.extend(_batch(0, 4))
    learner.update_priority(torch.arange(4), torch.tensor([1e-6, 1.0, 1.0, 1.0]))
    writer.extend(_batch(4, 1))  # overwrites slot 0, whose old item had priority ~0
    counts = torch.bincount(learner.sample(3000)["index"], minlength=4)
    assert counts[0] > 500  # the new item holds the max priority (1.0), not the old one


def test_prioritized_sampler_skips_a_slot_another_handle_is_writing(tmp_path):
    learner, _ = _learner_and_writer(tmp_path, size=4)
    learner.extend(_batch(0, 4))
    # another handle reserves slot 0 (in flight: not committed) and has not written it yet
    other = MemmapStorage(4, path=tmp_path / "rb")
    first = other.ledger.reserve(1)
    assert set(learner.sample(500)["index"].tolist()) == {1, 2, 3}
    other.ledger.commit(first, 1)
    assert 0 in set(learner.sample(500)["index"].tolist())


def test_prioritized_sampler_follows_an_empty_made_through_another_handle(tmp_path):
    learner, writer = _learner_and_writer(tmp_path)
    learner.extend(_batch(0, 8))
    writer.empty()
    with pytest.raises(EmptyBufferError):
        learner.sample(2)
    writer.extend(_batch(100, 3))
    assert set(learner.sample(200)["id"].tolist()) == {100, 101, 102}


def test_prioritized_sampler_attached_to_a_reopened_directory_samples_its_items(tmp_path):
    writer = ReplayBuffer(MemmapStorage(16, path=tmp_path / "rb"))
    writer.extend(_batch(0, 5))
    learner = ReplayBuffer(
        MemmapStorage(16, path=tmp_path / "rb"), PrioritizedSampler(16, 1.0, 1.0)
    )
    assert set(learner.sample(300)["id"].tolist()) == {0, 1, 2, 3, 4}


def _write_from_child(storage):
    torch.set_num_threads(1)  # a forked child: OpenMP's pool does not survive fork
    ReplayBuffer(storage).extend(_batch(10, 6))


def test_prioritized_sampler_sees_items_a_writer_process_extended():
    learner = ReplayBuffer(TensorStorage(32), PrioritizedSampler(32, 1.0, 1.0))
    learner.extend(_batch(0, 2))
    ctx = tmp_mp.get_context("fork")
    p = ctx.Process(target=_write_from_child, args=(learner.storage,), daemon=True)
    p.start()
    p.join(60)
    assert p.exitcode == 0
    assert len(learner) == 8
    assert set(learner.sample(500)["id"].tolist()) == {0, 1, *range(10, 16)}
