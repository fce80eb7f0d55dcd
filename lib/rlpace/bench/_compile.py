"""Small C libraries rlpace.bench compiles on first use (once per source, interpreter and
machine) and loads with ``ctypes``: the count tier's Callgrind client requests and the
work counts' thread counter.

Example:
    >>> from pathlib import Path
    >>> source = Path(__file__).parent / "counts" / "_callgrind_shim.c"
    >>> compile_library(source, "callgrind-shim", "/usr/bin/gcc").suffix  # doctest: +SKIP
    '.so'
"""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
from pathlib import Path

__all__ = ["CompileFailed", "cache_dir", "compile_library"]


class CompileFailed(RuntimeError):
    """The compiler failed; the message ends with the end of what it printed.

    Example:
        >>> str(CompileFailed("gcc could not build x.c: no such file"))
        'gcc could not build x.c: no such file'
    """


def cache_dir() -> Path:
    """Where compiled libraries are kept: ``$RLPACE_COUNT_CACHE``, else the user's cache.

    Example:
        >>> cache_dir().name in ("counts", os.environ.get("RLPACE_COUNT_CACHE", "counts"))
        True
    """
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(os.environ.get("RLPACE_COUNT_CACHE", Path(base) / "rlpace" / "counts"))


def compile_library(
    source: Path,
    stem: str,
    compiler: str,
    flags: tuple[str, ...] = (),
    cache: Path | None = None,
) -> Path:
    """Compile ``source`` into a shared library ``<stem>-<key>.so`` in ``cache`` (default
    :func:`cache_dir`), unless it is there already; ``key`` hashes the source, the
    flags and the machine. Two processes building at once both end with one file.

    Raises:
        CompileFailed: the compiler failed (its message's end is kept).

    Example:
        >>> compile_library(Path("shim.c"), "shim", "/usr/bin/gcc").name  # doctest: +SKIP
        'shim-0123456789abcdef.so'
    """
    text = source.read_bytes()
    key = hashlib.sha256(text + "\0".join(flags).encode() + platform.machine().encode())
    target = (cache or cache_dir()) / f"{stem}-{key.hexdigest()[:16]}.so"
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(f".{os.getpid()}.tmp")
    done = subprocess.run(
        [compiler, "-O1", "-shared", "-fPIC", *flags, "-o", str(partial), str(source)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        partial.unlink(missing_ok=True)
        raise CompileFailed(
            f"{Path(compiler).name} could not build {source.name}: {done.stderr.strip()[-300:]}"
        )
    partial.replace(target)  # atomic
    return target
