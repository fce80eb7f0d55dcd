"""What the count tier needs on this machine: Valgrind, its header, gcc, the shim.

The client requests (start/stop instrumentation, zero and dump the counters) are
macros of ``<valgrind/callgrind.h>``; a five-function C file over them is compiled once
with gcc into a cache directory and loaded by the counting process with ctypes.
:func:`find_toolchain` says plainly what is missing, so callers can fall back to
timing with that sentence in the report.

Example:
    >>> tools = find_toolchain()  # doctest: +SKIP
    >>> tools.valgrind_version  # doctest: +SKIP
    'valgrind-3.19.0'
    >>> missing_reason(valgrind=None, gcc="/usr/bin/gcc", header=True)
    'valgrind is not installed (apt-get install valgrind); the count tier is off and the run falls back to timing'
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CountUnavailable", "Toolchain", "find_toolchain", "missing_reason"]

SHIM_SOURCE = Path(__file__).with_name("_callgrind_shim.c")
HEADER_DIRS = (Path("/usr/include"), Path("/usr/local/include"))


class CountUnavailable(RuntimeError):
    """The count tier cannot run here; the message says why and that timing is used.

    Example:
        >>> raise CountUnavailable(missing_reason(valgrind=None, gcc=None, header=False))
        Traceback (most recent call last):
        ...
        rlpace.bench.counts.toolchain.CountUnavailable: valgrind is not installed (apt-get install valgrind); the count tier is off and the run falls back to timing
    """


@dataclass(frozen=True)
class Toolchain:
    """The programs the count tier runs, found on this machine.

    Example:
        >>> t = Toolchain("/usr/bin/valgrind", "valgrind-3.19.0", Path("shim.so"), "/usr/bin/setarch")
        >>> t.valgrind_version
        'valgrind-3.19.0'
    """

    valgrind: str
    """Path of the ``valgrind`` program."""
    valgrind_version: str
    """``valgrind --version``, e.g. ``valgrind-3.19.0``; recorded in count files."""
    shim: Path
    """The compiled client-request library."""
    setarch: str | None
    """``setarch`` when it can turn address randomisation off here, else None."""


def missing_reason(*, valgrind: str | None, gcc: str | None, header: bool) -> str | None:
    """The sentence telling what the count tier lacks, or None when nothing is missing.

    Example:
        >>> missing_reason(valgrind="/usr/bin/valgrind", gcc="/usr/bin/gcc", header=True) is None
        True
    """
    tail = "; the count tier is off and the run falls back to timing"
    if valgrind is None:
        return "valgrind is not installed (apt-get install valgrind)" + tail
    if not header:
        return "valgrind/callgrind.h is missing (apt-get install valgrind)" + tail
    if gcc is None:
        return "gcc is not installed, so the Callgrind client requests cannot be built" + tail
    return None


def _header_present() -> bool:
    return any((d / "valgrind" / "callgrind.h").is_file() for d in HEADER_DIRS)


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(os.environ.get("RLPACE_COUNT_CACHE", Path(base) / "rlpace" / "counts"))


def build_shim(gcc: str, cache_dir: Path | None = None) -> Path:
    """Compile the client-request shim (once per source and machine) and return its path.

    Example:
        >>> build_shim("/usr/bin/gcc").suffix  # doctest: +SKIP
        '.so'
    """
    source = SHIM_SOURCE.read_bytes()
    key = hashlib.sha256(source + platform.machine().encode()).hexdigest()[:16]
    target = (cache_dir or _cache_dir()) / f"callgrind-shim-{key}.so"
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(f".{os.getpid()}.tmp")
    done = subprocess.run(
        [gcc, "-O1", "-shared", "-fPIC", "-o", str(partial), str(SHIM_SOURCE)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        partial.unlink(missing_ok=True)
        raise CountUnavailable(
            f"gcc could not build the Callgrind shim ({done.stderr.strip()[-300:]}); "
            "the count tier is off and the run falls back to timing"
        )
    partial.replace(target)  # atomic: two sides building at once both end with one file
    return target


def _setarch() -> str | None:
    found = shutil.which("setarch")
    if found is None:
        return None
    probe = subprocess.run(
        [found, platform.machine(), "-R", "true"], capture_output=True, check=False
    )
    return found if probe.returncode == 0 else None


def find_toolchain(cache_dir: Path | None = None) -> Toolchain:
    """Find Valgrind, build the shim, probe ``setarch -R``; raise :class:`CountUnavailable`.

    Example:
        >>> find_toolchain().valgrind  # doctest: +SKIP
        '/usr/bin/valgrind'
    """
    valgrind = shutil.which("valgrind")
    gcc = shutil.which("gcc") or shutil.which("cc")
    reason = missing_reason(valgrind=valgrind, gcc=gcc, header=_header_present())
    if reason is not None:
        raise CountUnavailable(reason)
    version = subprocess.run(
        [valgrind, "--version"], capture_output=True, text=True, check=False
    ).stdout.strip()
    return Toolchain(valgrind, version, build_shim(gcc, cache_dir), _setarch())
