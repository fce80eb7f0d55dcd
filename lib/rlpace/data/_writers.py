"""Writers: where the next items go."""

from __future__ import annotations


class RoundRobinWriter:
    """A ring buffer: items go to the next slots in order, overwriting the oldest.

    The cursor itself lives in the storage's ledger (shared memory when the storage is
    shared), so every process writing to one buffer advances the same ring.

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from rlpace.data import ReplayBuffer, TensorStorage
        >>> rb = ReplayBuffer(TensorStorage(4), writer=RoundRobinWriter())
        >>> rb.extend(TensorDict({"x": torch.arange(3)}, [3]))
        tensor([0, 1, 2])
        >>> rb.extend(TensorDict({"x": torch.arange(3)}, [3]))
        tensor([3, 0, 1])
    """

    def extend(self, storage, data, on_reserve=None, on_commit=None):
        """Write ``data`` at the ring's next slots of ``storage``; returns the slots."""
        return storage.extend(data, on_reserve=on_reserve, on_commit=on_commit)

    def __repr__(self) -> str:
        return "RoundRobinWriter()"
