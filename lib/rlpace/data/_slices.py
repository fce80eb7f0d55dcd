"""Slice sampling: contiguous sub-trajectories, with the end-of-slice flags a value estimator needs.

Trajectories are read from the storage in write order (oldest first, so the ring's
seam never joins old and new data): either from a trajectory-id entry (``traj_key``)
or, when the storage holds none, from an end-of-trajectory flag (``end_key``, the
item *after* a ``True`` starts a new trajectory). Uncommitted slots break runs too.
"""

from __future__ import annotations

from typing import Any

import torch

from rlpace.data._samplers import Sampler, _committed

NestedKey = str | tuple[str, ...]


def _sibling(key: NestedKey, name: str) -> NestedKey:
    """``key`` with its last part replaced by ``name`` (``("next", "truncated") -> ("next", "done")``)."""
    return (*key[:-1], name) if isinstance(key, tuple) else name


def _column_or_none(storage, key: NestedKey, slots: torch.Tensor) -> torch.Tensor | None:
    try:
        return storage.column(key, slots)
    except KeyError:
        return None


class SliceSampler(Sampler):
    """Contiguous sub-trajectories that never cross an episode end.

    A slice is ``slice_len`` consecutive items (in write order) of one trajectory.
    Trajectories are drawn uniformly among those long enough, then a start uniformly
    within; a sample of ``batch_size`` items holds ``batch_size // slice_len``
    slices, one after the other. Items of one trajectory share the value of
    ``traj_key``; a storage without that entry is split after every item whose
    ``end_key`` flag is set.

    With ``truncated_key`` set (the default), each sample carries end-of-slice flags
    for value estimators: ``truncated`` is ``True`` at the last item of every slice,
    ``done`` is the stored ``done`` or'ed with it, and ``terminated`` is the stored
    one (``False`` where none is stored), each of shape ``[batch, 1]`` under the
    same parent key as ``truncated_key``.

    Args:
        slice_len: items per slice (give this or ``num_slices``).
        num_slices: slices per sample; ``slice_len = batch_size // num_slices``.
        traj_key: the entry that holds each item's trajectory id (one number per item).
        end_key: the end-of-trajectory flag used when the storage holds no
            ``traj_key`` entry.
        strict_length: ``True``: only trajectories of at least ``slice_len`` items
            are drawn. ``False``: shorter ones are drawn too and give a shorter slice
            (whole), so a sample may hold fewer than ``batch_size`` items; the
            ``truncated`` flags mark where each slice ends.
        truncated_key: where the end-of-slice flags go (``None``: no flags).

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from rlpace.data import ReplayBuffer, TensorStorage
        >>> rb = ReplayBuffer(TensorStorage(20), sampler=SliceSampler(slice_len=3), batch_size=6)
        >>> episode = torch.tensor([0, 0, 0, 0, 1, 1, 2, 2, 2])
        >>> _ = rb.extend(TensorDict({"episode": episode}, [9]))
        >>> sample = rb.sample()
        >>> ids = sample["episode"].view(2, 3)
        >>> bool((ids == ids[:, :1]).all()) and set(ids[:, 0].tolist()) <= {0, 2}
        True
        >>> sample["next", "truncated"].view(2, 3).tolist()
        [[False, False, True], [False, False, True]]
    """

    def __init__(
        self,
        slice_len: int | None = None,
        num_slices: int | None = None,
        traj_key: NestedKey = "episode",
        end_key: NestedKey | None = ("next", "done"),
        strict_length: bool = True,
        truncated_key: NestedKey | None = ("next", "truncated"),
    ):
        if (slice_len is None) == (num_slices is None):
            raise ValueError(
                f"SliceSampler takes exactly one of slice_len or num_slices; got "
                f"slice_len={slice_len!r}, num_slices={num_slices!r}"
            )
        for name, value in (("slice_len", slice_len), ("num_slices", num_slices)):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value <= 0
            ):
                raise ValueError(f"SliceSampler({name}=...) expects a positive int; got {value!r}")
        self.slice_len = slice_len
        self.num_slices = num_slices
        self.traj_key = traj_key
        self.end_key = end_key
        self.strict_length = bool(strict_length)
        self.truncated_key = truncated_key
        self._cache_key: tuple | None = None
        self._runs: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None
        self._last_flags: torch.Tensor | None = None  # the truncated flags of full slices
        if truncated_key is not None:
            self._done_key = _sibling(truncated_key, "done")
            self._terminated_key = _sibling(truncated_key, "terminated")

    def _shape(self, batch_size: int) -> tuple[int, int]:
        per = self.slice_len or batch_size // self.num_slices
        if per == 0 or batch_size % per:
            raise ValueError(
                f"SliceSampler: batch size {batch_size} is not a multiple of the slice length "
                f"{per} (slice_len={self.slice_len}, num_slices={self.num_slices}); pick a batch "
                "size that divides into whole slices"
            )
        return batch_size // per, per

    def _run_breaks(self, storage, order: torch.Tensor) -> torch.Tensor:
        """``breaks[i]``: item ``i`` (in write order) starts a new trajectory."""
        n = len(order)
        breaks = torch.ones(n, dtype=torch.bool)
        traj = _column_or_none(storage, self.traj_key, order)
        if traj is not None:
            traj = traj.cpu().reshape(n, -1)
            if traj.shape[1] != 1:
                raise ValueError(
                    f"SliceSampler: entry {self.traj_key!r} must hold one trajectory id per "
                    f"item; it holds {traj.shape[1]} values per item"
                )
            breaks[1:] = traj[1:, 0] != traj[:-1, 0]
            return breaks
        ends = None if self.end_key is None else _column_or_none(storage, self.end_key, order)
        if ends is None:
            raise KeyError(
                f"SliceSampler: the storage holds neither the trajectory-id entry "
                f"traj_key={self.traj_key!r} nor the end flag end_key={self.end_key!r}; pass "
                "the entry that marks trajectories (e.g. traj_key=('collector', 'traj_ids'))"
            )
        ends = ends.cpu().reshape(n, -1).bool().any(dim=1)
        breaks[1:] = ends[:-1]
        return breaks

    def _trajectory_runs(self, storage):
        """(order, run_start, run_len) over committed slots in write order, cached per state."""
        ledger = storage.ledger
        key = (ledger.writes, len(ledger), ledger.generation, storage._revision)
        if key == self._cache_key:
            return self._runs
        order = torch.from_numpy(ledger.logical_order())
        _, slots = ledger.committed()
        if slots is not None:  # drop uncommitted slots; they also break runs
            keep = torch.from_numpy(ledger.valid[order.numpy()].astype(bool))
        else:
            keep = None
        new_run = self._run_breaks(storage, order)
        if keep is not None:
            new_run[1:] |= keep[1:] != keep[:-1]
        run_start = torch.nonzero(new_run).squeeze(1)
        run_len = torch.diff(run_start, append=torch.tensor([len(order)]))
        if keep is not None:
            ok = keep[run_start]
            run_start, run_len = run_start[ok], run_len[ok]
        self._cache_key, self._runs = key, (order, run_start, run_len)
        return self._runs

    def sample(self, storage, batch_size: int):
        _committed(storage)
        num, per = self._shape(batch_size)
        order, run_start, run_len = self._trajectory_runs(storage)
        need = per if self.strict_length else 1
        eligible = torch.nonzero(run_len >= need).squeeze(1)
        if len(eligible) == 0:
            raise ValueError(
                f"SliceSampler: no trajectory holds {per} committed items (longest: "
                f"{int(run_len.max()) if len(run_len) else 0}); lower slice_len, add data, or "
                "pass strict_length=False to draw shorter slices"
            )
        gen = self.generator
        runs = eligible[torch.randint(len(eligible), (num,), generator=gen)]
        if self.strict_length:  # every slice is ``per`` long: the fast path
            room = (run_len[runs] - per + 1).to(torch.float64)
            offset = (torch.rand(num, dtype=torch.float64, generator=gen) * room).long()
            logical = ((run_start[runs] + offset).unsqueeze(1) + torch.arange(per)).reshape(-1)
            index = order[logical]
            return index, self._slice_info(len(index), num, per, None)
        lengths = run_len[runs].clamp(max=per)
        room = (run_len[runs] - lengths + 1).to(torch.float64)
        starts = (
            run_start[runs] + (torch.rand(num, dtype=torch.float64, generator=gen) * room).long()
        )
        first = torch.cumsum(lengths, 0) - lengths  # slices one after the other
        step = torch.arange(int(lengths.sum())) - torch.repeat_interleave(first, lengths)
        logical = torch.repeat_interleave(starts, lengths) + step
        index = order[logical]
        return index, self._slice_info(len(index), num, per, lengths)

    def _slice_info(self, n: int, num: int, per: int, lengths) -> dict:
        """The ``truncated`` flags: ``True`` at the last item of each slice."""
        if self.truncated_key is None:
            return {}
        if lengths is None:
            if self._last_flags is None or self._last_flags.shape[0] != n:
                flags = torch.zeros(num, per, 1, dtype=torch.bool)
                flags[:, -1] = True
                self._last_flags = flags.reshape(n, 1)
            truncated = self._last_flags.clone()
        else:
            truncated = torch.zeros(n, 1, dtype=torch.bool)
            truncated[torch.cumsum(lengths, 0) - 1] = True
        return {self.truncated_key: truncated}

    def complete_info(self, data, info: dict) -> dict:
        """Add ``done`` (stored ``done`` or ``truncated``) and ``terminated`` from the gathered batch."""
        truncated = None if self.truncated_key is None else info.get(self.truncated_key)
        if truncated is None:
            return info
        n = truncated.shape[0]
        done = data.get(self._done_key, None)
        if done is None:
            done = truncated.clone()
        else:
            done = done.reshape(n, -1)
            truncated = truncated.to(done.device)
            done = (done if done.dtype == torch.bool else done.bool()) | truncated
        terminated = data.get(self._terminated_key, None)
        if terminated is None:
            terminated = torch.zeros_like(truncated)
        else:
            terminated = terminated.reshape(n, -1).bool()
        return {**info, self._done_key: done, self._terminated_key: terminated}

    def __getstate__(self) -> dict[str, Any]:
        return {
            "slice_len": self.slice_len,
            "num_slices": self.num_slices,
            "traj_key": self.traj_key,
            "end_key": self.end_key,
            "strict_length": self.strict_length,
            "truncated_key": self.truncated_key,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state)
