"""Temporary storage folders that never outlive every process using them.

A ``TensorStorage`` (``rlpace-rb-*`` in ``/dev/shm``) or a ``MemmapStorage`` without a
path (``rlpace-memmap-*`` in the temp dir) lives in a folder its creating process
removes when the storage is garbage collected. A process killed by SIGKILL (or by
SIGTERM, whose default action skips Python's clean-up) never gets there, so:

- every process that uses such a folder holds a *shared* ``flock`` on its
  ``in-use.lock`` (the kernel drops it when the process dies, however it dies; a
  forked child shares its parent's);
- creating a new folder first sweeps the old ones of the same kind (at a process's
  first creation, then at most once every ``SWEEP_INTERVAL_S``): a folder whose
  ``in-use.lock`` takes an *exclusive* lock at once has no live user and is removed
  (a folder without the file is removed only when empty and older than a minute:
  its creator died before marking it);
- the first process to create a folder installs a SIGTERM handler, when SIGTERM still
  has its default action and it runs in the main thread, that removes the folders
  this process created and then dies by SIGTERM as before. Forked children get the
  default action back.

The marker is created under another name, locked, then renamed into place, so a
sweeper never sees an unlocked ``in-use.lock`` of a live process.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import tempfile
import threading
import time
from pathlib import Path

IN_USE = "in-use.lock"
#: a folder without ``in-use.lock`` is swept only when empty and at least this old
UNMARKED_GRACE_S = 60.0
#: a process sweeps a root at its first creation there, then at most this often
SWEEP_INTERVAL_S = 60.0

_owned: dict[str, int] = {}  # folder -> pid of the creating process
_last_sweep: dict[tuple[str, str], float] = {}  # (root, prefix) -> monotonic time
_installed_handler = False
_registry_lock = threading.Lock()


def sweep_orphans(root: str | os.PathLike, prefix: str) -> list[str]:
    """Remove the ``prefix*`` folders under ``root`` that no live process uses.

    Returns the folders removed.

    Example:
        >>> import tempfile
        >>> root = tempfile.mkdtemp()
        >>> dead = Path(root, "rlpace-rb-dead"); dead.mkdir()
        >>> (dead / IN_USE).touch()           # its users are gone: nobody holds the lock
        >>> [Path(p).name for p in sweep_orphans(root, "rlpace-rb-")]
        ['rlpace-rb-dead']
        >>> os.rmdir(root)
    """
    removed = []
    try:
        entries = list(os.scandir(root))
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.startswith(prefix) or not entry.is_dir(follow_symlinks=False):
            continue
        if _remove_if_orphaned(entry.path):
            removed.append(entry.path)
    return removed


def _remove_if_orphaned(path: str) -> bool:
    try:
        fd = os.open(os.path.join(path, IN_USE), os.O_RDWR)
    except FileNotFoundError:
        return _remove_if_empty_and_old(path)
    except OSError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False  # a live process uses it
        # held exclusively: a late attacher blocks on its shared lock, then finds the
        # folder gone and says so
        shutil.rmtree(path, ignore_errors=True)
        return True
    finally:
        os.close(fd)


def _remove_if_empty_and_old(path: str) -> bool:
    try:
        if any(not e.name.startswith(".in-use-") for e in os.scandir(path)):
            return False  # e.g. a folder of an rlpace that did not mark folders
        if time.time() - os.stat(path).st_mtime < UNMARKED_GRACE_S:
            return False  # its creator may be about to mark it
        os.rmdir(path)
        return True
    except OSError:
        return False


def remove_stale_temporaries(directory: Path, is_ours=lambda stem: True) -> list[str]:
    """Delete ``<stem>.tmp<pid>`` files whose ``stem`` passes ``is_ours``: half-written
    files of a killed writer.

    Every rlpace writer of such a file holds the folder's lock while the file exists
    under that name, so with the lock held any one found is a dead writer's.
    Call with the folder's lock held. Returns the names removed.

    Example:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> (folder / "spec.json.tmp4242").write_text("{")
        1
        >>> remove_stale_temporaries(folder), sorted(p.name for p in folder.iterdir())
        (['spec.json.tmp4242'], [])
        >>> folder.rmdir()
    """
    removed = []
    for entry in os.scandir(directory):
        stem, dot, tail = entry.name.rpartition(".tmp")
        if dot and stem and tail.isdigit() and is_ours(stem):
            try:
                os.unlink(entry.path)
            except FileNotFoundError:
                continue
            removed.append(entry.name)
    return removed


def hold_in_use(directory: Path, create: bool = False) -> int | None:
    """Take a shared lock on ``directory/in-use.lock``; returns its descriptor.

    ``create=True`` (the creating process) makes the file, locked before it appears
    under its name. Otherwise an existing file is locked, and ``None`` is returned for
    a folder that has none (a user's ``MemmapStorage(path=...)``).
    """
    marker = directory / IN_USE
    if create:
        staging = directory / f".in-use-{os.getpid()}"
        fd = os.open(staging, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(fd, fcntl.LOCK_SH)
        os.replace(staging, marker)
        return fd
    try:
        fd = os.open(marker, os.O_RDWR)
    except FileNotFoundError:
        return None
    fcntl.flock(fd, fcntl.LOCK_SH)  # waits out a sweeper that is removing it
    return fd


def release_in_use(fd: int | None, pid: int) -> None:
    """Close a descriptor from :func:`hold_in_use` (only in the process that took it)."""
    if fd is not None and os.getpid() == pid:
        with contextlib.suppress(OSError):
            os.close(fd)


def create_owned_directory(prefix: str, root: str | None) -> tuple[Path, int]:
    """Sweep orphans, then make a folder this process owns and marks as in use.

    Returns the folder and the descriptor of its in-use lock.
    """
    root_dir = root or tempfile.gettempdir()
    now = time.monotonic()
    last = _last_sweep.get((root_dir, prefix))
    if last is None or now - last >= SWEEP_INTERVAL_S:
        _last_sweep[(root_dir, prefix)] = now
        sweep_orphans(root_dir, prefix)
    directory = Path(tempfile.mkdtemp(prefix=prefix, dir=root))
    fd = hold_in_use(directory, create=True)
    with _registry_lock:
        _owned[str(directory)] = os.getpid()
    _install_sigterm_handler()
    return directory, fd


def remove_owned_directory(path: str, pid: int, fd: int | None) -> None:
    """Remove a folder made by :func:`create_owned_directory` (only in its creator)."""
    if os.getpid() != pid:  # a forked child never removes its parent's files
        return
    with _registry_lock:
        _owned.pop(path, None)
    shutil.rmtree(path, ignore_errors=True)
    release_in_use(fd, pid)


def _remove_all_owned() -> None:
    pid = os.getpid()
    for path, owner in list(_owned.items()):
        if owner == pid:
            shutil.rmtree(path, ignore_errors=True)


def _on_sigterm(signum: int, frame: object) -> None:
    try:
        _remove_all_owned()
    finally:
        # die of SIGTERM as the default action would, so the exit status is unchanged
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)


def _reset_in_child() -> None:
    global _installed_handler
    _owned.clear()
    _last_sweep.clear()  # a new process: its first creation sweeps
    if _installed_handler and signal.getsignal(signal.SIGTERM) is _on_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _installed_handler = False


def _install_sigterm_handler() -> None:
    global _installed_handler
    if _installed_handler or threading.current_thread() is not threading.main_thread():
        return
    try:
        if signal.getsignal(signal.SIGTERM) != signal.SIG_DFL:
            return  # the program handles SIGTERM itself; the sweep still covers it
        signal.signal(signal.SIGTERM, _on_sigterm)
    except ValueError:  # not the main interpreter
        return
    _installed_handler = True


os.register_at_fork(after_in_child=_reset_in_child)
