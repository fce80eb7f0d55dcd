"""Files written whole or not at all, so a killed process leaves no half file behind;
output directories checked before the work that would fill them."""

from __future__ import annotations

import os
from pathlib import Path

from rlpace.bench.errors import BenchInputError

__all__ = ["writable_dir", "write_whole"]


def writable_dir(path: Path | str, option: str, fix: str | None = None) -> Path:
    """``path`` checked, without writing anything, to be a directory this user may
    write in, or one that can be made there, before a long run fills it: a bad
    ``option`` then fails in a second rather than after the run, with a
    :class:`~rlpace.bench.errors.BenchInputError` that says what was wrong (and
    ``fix``, else "give ``option`` a directory you can write to").

    Example:
        >>> writable_dir("/dev/null/reports", "--out-dir")
        Traceback (most recent call last):
        ...
        rlpace.bench.errors.BenchInputError: --out-dir /dev/null/reports: expected a directory rlpace-bench can write to, got a file at /dev/null. Fix: give --out-dir a directory you can write to
    """
    path = Path(path)
    fix = f"Fix: {fix or f'give {option} a directory you can write to'}"
    existing = path
    while not existing.exists() and existing.parent != existing:  # to be made in there
        existing = existing.parent
    where = "" if existing == path else f" at {existing}"
    if not existing.is_dir():
        raise BenchInputError(
            f"{option} {path}: expected a directory rlpace-bench can write to, got a "
            f"file{where}. {fix}"
        )
    if not os.access(existing, os.W_OK | os.X_OK):
        raise BenchInputError(
            f"{option} {path}: expected a directory rlpace-bench can write to, got a "
            f"directory{where} this user may not write in. {fix}"
        )
    return path


def write_whole(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` through a ``.partial`` file and a rename: a reader (or
    a later run reading the file it is replacing) sees the old file or the new one.

    Example:
        >>> import tempfile
        >>> p = Path(tempfile.mkdtemp()) / "a" / "g.json"
        >>> write_whole(p, "{}").read_text()
        '{}'
        >>> sorted(x.name for x in p.parent.iterdir())
        ['g.json']
        >>> import shutil; shutil.rmtree(p.parent.parent)
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    partial.replace(path)
    return path
