"""Who owns which slot: the write cursor, the committed count and a per-slot commit flag.

A :class:`SlotLedger` is the only place where writers coordinate. Extending a buffer is
three steps, and only the first and last hold the lock:

1. ``reserve(n)`` (locked, microseconds): hand out the next ``n`` tickets (ticket ``t``
   lands in slot ``t % capacity``), mark those slots uncommitted and record which
   ticket owns each slot;
2. the caller writes its data with no lock held;
3. ``commit(first, n)`` (locked): mark the slots that this ticket still owns as
   committed and count them in ``len``.

A writer killed between 1 and 3 leaves its slots uncommitted: ``len`` never counts
them and samplers never return them; a later writer that wraps around takes them over.

The lock is an ``flock`` on a file next to the shared arrays, so the kernel releases it
when its holder dies (SIGKILL included); a thread lock serializes threads of one process.

**A holder killed inside the lock.** The kernel frees the lock but not the half-done
update, so every locked section runs under a journal kept in the shared counters:
taking the lock marks the journal ``HELD``; ``reserve``, ``commit`` and ``reset``
record their intent (operation, first ticket, count) before they touch a slot; the
holder marks the journal ``CLEAN`` when it lets go. The next holder that finds the
journal not clean repairs (:meth:`SlotLedger.repair`): it rolls the recorded
operation forward on the per-slot arrays (``owner`` and ``valid``, idempotent
assignments), derives every counter from them (the cursor is the highest owning
ticket, ``len`` the committed slots, the pending count the owned uncommitted ones)
and bumps ``REPAIRS``, which tells samplers with shared state of their own (the
priority tree) to rebuild it from the commit flags. The hot path stays one ``flock``
and O(n) work; only a repair scans the ``capacity`` slots.
"""

from __future__ import annotations

import fcntl
import os
import threading
from contextlib import AbstractContextManager
from pathlib import Path

import numpy as np

# counters[...] fields
WRITES = 0  # tickets handed out so far (monotonic; the ring cursor is WRITES % capacity)
LENGTH = 1  # committed slots (what ``len`` reports)
PENDING = 2  # reserved slots not committed yet (in flight, or left by a dead writer)
GENERATION = 3  # bumped by ``empty()`` so per-process caches know to drop their state
JOURNAL = 4  # what the lock holder is doing: CLEAN, HELD or the operation under way
JOURNAL_FIRST = 5  # the operation's first ticket
JOURNAL_N = 6  # the operation's ticket count
REPAIRS = 7  # bumped by each repair of a dead holder's half-done update
N_COUNTERS = 8

# journal states
CLEAN = 0  # nobody holds the lock, or its holder let go normally
HELD = 1  # the lock is held; no per-slot update recorded
RESERVING = 2  # reserve(JOURNAL_FIRST, JOURNAL_N) is under way
COMMITTING = 3  # commit(JOURNAL_FIRST, JOURNAL_N) is under way
RESETTING = 4  # reset() is under way
RESTORING = 5  # restore() is under way (not rolled forward: its input is gone)


class ThreadOnlyLock(AbstractContextManager):
    """The lock of a ledger that lives in one process: a thread lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def __enter__(self) -> ThreadOnlyLock:
        self._lock.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


class FileLock(AbstractContextManager):
    """An exclusive ``flock`` on ``path`` that the kernel drops when its holder dies.

    Each process opens its own file description (``flock`` locks belong to open file
    descriptions, which ``fork`` would otherwise share with the parent); a thread lock
    orders threads of one process. Pickles as its path.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = str(path)
        self._pid: int | None = None
        self._fd: int | None = None
        self._ino: int | None = None
        self._threads = threading.Lock()

    def _open_for_this_process(self) -> None:
        if self._fd is not None:
            # Inherited through fork: close our copy so a parent killed while holding
            # the lock does not keep it alive through this child's descriptor.
            try:
                if os.fstat(self._fd).st_ino == self._ino:
                    os.close(self._fd)
            except OSError:
                pass
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        self._ino = os.fstat(self._fd).st_ino
        self._pid = os.getpid()
        self._threads = threading.Lock()

    def __enter__(self) -> FileLock:
        if self._pid != os.getpid():
            self._open_for_this_process()
        self._threads.acquire()
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX)
        except BaseException:
            self._threads.release()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        self._threads.release()

    def __getstate__(self) -> dict:
        return {"path": self.path}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["path"])


def _shared_array(path: Path, dtype: np.dtype, shape: tuple[int, ...], fill=None) -> np.ndarray:
    """Open (or create, filled with ``fill``) a file-backed array shared by every process.

    Call with the directory's lock held when the file may not exist yet.
    """
    if path.exists():
        # a plain ndarray view of the mapping: np.memmap's Python-level subclass hooks
        # would cost microseconds on every slice
        return np.asarray(np.memmap(path, dtype=dtype, mode="r+", shape=shape))
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    arr = np.memmap(tmp, dtype=dtype, mode="w+", shape=shape)
    if fill is not None:
        arr[...] = fill
    arr.flush()
    os.replace(tmp, path)
    return np.asarray(np.memmap(path, dtype=dtype, mode="r+", shape=shape))


class JournaledLock(AbstractContextManager):
    """A ledger's lock: taking it repairs what a dead holder left half done.

    Wraps the ledger's :class:`FileLock` (or :class:`ThreadOnlyLock`). Entering marks
    the journal ``HELD`` after repairing if it was not clean; leaving normally marks it
    ``CLEAN``. Leaving by an exception leaves the journal as it is, so the next holder
    repairs whatever the exception interrupted.
    """

    def __init__(self, inner: AbstractContextManager, ledger: SlotLedger) -> None:
        self.inner = inner
        self._ledger = ledger
        self._holder: int | None = None  # the thread holding it
        self._holder_pid: int | None = None

    def held_here(self) -> bool:
        """Whether this thread of this process holds the lock."""
        return self._holder == threading.get_ident() and self._holder_pid == os.getpid()

    def __enter__(self) -> JournaledLock:
        self.inner.__enter__()
        self._holder, self._holder_pid = threading.get_ident(), os.getpid()
        journal = self._ledger.fields
        if journal[JOURNAL] != CLEAN:
            try:
                self._ledger.repair()
            except BaseException:
                self._holder = None
                self.inner.__exit__(None, None, None)
                raise
        journal[JOURNAL] = HELD
        return self

    def __exit__(self, exc_type, *exc: object) -> None:
        if exc_type is None:
            self._ledger.fields[JOURNAL] = CLEAN
        self._holder = None
        self.inner.__exit__(exc_type, *exc)


class SlotLedger:
    """Write cursor, committed count and per-slot commit flags for ``capacity`` slots.

    With ``directory=None`` the ledger lives in this process (a thread lock guards
    it); with a directory, its arrays are files there that every process maps, and
    the lock is an ``flock`` on ``directory/lock``. Either way the lock is journaled
    (:class:`JournaledLock`): a holder killed inside it is repaired after.
    """

    def __init__(self, capacity: int, directory: Path | None = None) -> None:
        self.capacity = int(capacity)
        self.directory = directory
        if directory is None:
            inner: AbstractContextManager = ThreadOnlyLock()
            self.counters = np.zeros(N_COUNTERS, np.int64)
            self.owner = np.zeros(self.capacity, np.int64)
            self.valid = np.zeros(self.capacity, np.uint8)
        else:
            inner = FileLock(directory / "lock")
            with inner:
                self.counters = _shared_array(directory / "counters.bin", np.int64, (N_COUNTERS,))
                # owner[slot] = ticket + 1 of the last reservation (0: never reserved)
                self.owner = _shared_array(directory / "owner.bin", np.int64, (self.capacity,))
                self.valid = _shared_array(directory / "valid.bin", np.uint8, (self.capacity,))
        # the counters as a memoryview: scalar reads and writes at a third of numpy's cost
        self.fields = memoryview(self.counters)
        self.lock = JournaledLock(inner, self)

    @property
    def shared(self) -> bool:
        return self.directory is not None

    def settle(self) -> None:
        """Wait out (or repair) a locked update in progress, so counters read true.

        Free when the journal is clean; otherwise takes the lock once, which waits for
        a live holder or repairs a dead one's update.
        """
        if self.fields[JOURNAL] != CLEAN and not self.lock.held_here():
            with self.lock:
                pass

    def __len__(self) -> int:
        self.settle()
        return self.fields[LENGTH]

    @property
    def writes(self) -> int:
        self.settle()
        return self.fields[WRITES]

    @property
    def generation(self) -> int:
        return self.fields[GENERATION]

    @property
    def repairs(self) -> int:
        """How many times a lock holder repaired a dead holder's update (ever, shared)."""
        return self.fields[REPAIRS]

    def _span(self, first: int, n: int):
        start = first % self.capacity
        if start + n <= self.capacity:
            return slice(start, start + n)
        return np.arange(first, first + n, dtype=np.int64) % self.capacity

    def _journal(self, state: int, first: int = 0, n: int = 0) -> None:
        c = self.fields
        c[JOURNAL_FIRST] = first
        c[JOURNAL_N] = n
        c[JOURNAL] = state  # last: the intent is whole before it counts

    def reserve(self, n: int, on_reserve=None) -> int:
        """Take the next ``n`` tickets; returns the first. Slots lose their old data's flag."""
        with self.lock:
            c = self.fields
            first = c[WRITES]
            c[JOURNAL_FIRST] = first  # the intent, before any slot changes
            c[JOURNAL_N] = n
            c[JOURNAL] = RESERVING
            span = self._span(first, n)
            tickets = np.arange(first + 1, first + n + 1, dtype=np.int64)
            if first + n <= self.capacity:
                # first fill: these slots were never reserved since the last empty()
                c[PENDING] += n
            else:
                was_valid = self.valid[span]
                n_valid = int(np.count_nonzero(was_valid))
                # uncommitted but owned: another writer's (or a dead one's) pending slot
                n_taken = int(np.count_nonzero(self.owner[span][was_valid == 0]))
                c[LENGTH] -= n_valid
                c[PENDING] += n - n_taken
                self.valid[span] = 0
            self.owner[span] = tickets
            if on_reserve is not None:
                on_reserve(self.slots(first, n))
            c[WRITES] = first + n
        return first

    def commit(self, first: int, n: int, on_commit=None) -> int:
        """Flag the slots ticket ``first..first+n`` still owns as written; returns how many."""
        with self.lock:
            c = self.fields
            c[JOURNAL_FIRST] = first
            c[JOURNAL_N] = n
            c[JOURNAL] = COMMITTING
            span = self._span(first, n)
            tickets = np.arange(first + 1, first + n + 1, dtype=np.int64)
            mine = self.owner[span] == tickets
            if mine.all():
                self.valid[span] = 1
                k = n
                committed = self.slots(first, n)
            else:
                idx = (np.arange(first, first + n, dtype=np.int64) % self.capacity)[mine]
                self.valid[idx] = 1
                k = int(idx.size)
                committed = idx
            if k and on_commit is not None:
                on_commit(committed)
            c[LENGTH] += k
            c[PENDING] -= k
        return k

    def repair(self) -> None:
        """Finish what a dead lock holder left half done; call with the lock held.

        Rolls the journaled ``reserve``/``commit``/``reset`` forward on the per-slot
        arrays (each step an assignment, so a repair killed in turn is redone whole),
        then derives the cursor, ``len`` and the pending count from them.
        """
        c = self.counters
        state = int(c[JOURNAL])
        first, n = int(c[JOURNAL_FIRST]), int(c[JOURNAL_N])
        whole = first >= 0 and 0 < n <= self.capacity
        if state == RESERVING and whole:
            span = self._span(first, n)
            self.valid[span] = 0
            self.owner[span] = np.arange(first + 1, first + n + 1, dtype=np.int64)
        elif state == COMMITTING and whole:
            slots = self.slots(first, n)
            mine = slots[self.owner[slots] == np.arange(first + 1, first + n + 1)]
            self.valid[mine] = 1
        elif state == RESETTING:
            self.valid[...] = 0
            self.owner[...] = 0
        if state in (RESETTING, RESTORING):
            c[GENERATION] += 1  # per-process caches of the old contents must go
        self._derive_counters()
        c[REPAIRS] += 1

    def _derive_counters(self) -> None:
        c = self.counters
        owner, valid = self.owner, self.valid
        c[WRITES] = int(owner.max()) if self.capacity else 0
        c[LENGTH] = int(np.count_nonzero(valid))
        c[PENDING] = int(np.count_nonzero((owner > 0) & (valid == 0)))

    def slots(self, first: int, n: int) -> np.ndarray:
        """The slots tickets ``first..first+n`` land in."""
        return np.arange(first, first + n, dtype=np.int64) % self.capacity

    def committed(self) -> tuple[int, np.ndarray | None]:
        """``(n, None)`` when the committed slots are exactly ``0..n-1``; else ``(n, slots)``."""
        self.settle()
        writes = self.fields[WRITES]
        if self.fields[PENDING] == 0:
            return min(writes, self.capacity), None
        # copy first: flatnonzero counts, then fills, and other processes may commit between
        idx = np.flatnonzero(self.valid.copy())
        return int(idx.size), idx

    def logical_order(self) -> np.ndarray:
        """Slots from oldest to newest write (for samplers that need storage order)."""
        writes = self.fields[WRITES]
        if writes <= self.capacity:
            return np.arange(writes, dtype=np.int64)
        start = writes % self.capacity
        return (np.arange(self.capacity, dtype=np.int64) + start) % self.capacity

    def reset(self) -> None:
        """Forget every slot (``empty()``); call with the lock held."""
        self._journal(RESETTING)
        c = self.counters
        self.valid[...] = 0
        self.owner[...] = 0
        c[WRITES] = 0
        c[LENGTH] = 0
        c[PENDING] = 0
        c[GENERATION] += 1

    def restore(self, writes: int, valid: np.ndarray) -> None:
        """Set the ledger from a saved state (``load_state_dict``); call with the lock held."""
        self._journal(RESTORING)
        self.valid[...] = valid.astype(np.uint8)
        order = np.arange(max(writes - self.capacity, 0), writes, dtype=np.int64)
        self.owner[...] = 0
        self.owner[order % self.capacity] = order + 1
        self._derive_counters()
        self.counters[GENERATION] += 1
