"""What the count tier needs on this machine: Valgrind, its header, gcc, the shim, and
an allocator whose cost does not depend on the heap's history.

The client requests (start/stop instrumentation, zero and dump the counters) are
macros of ``<valgrind/callgrind.h>``; a five-function C file over them is compiled once
with gcc into a cache directory and loaded by the counting process with ctypes.
:func:`find_toolchain` says plainly what is missing, so callers can fall back to
timing with that sentence in the report.

The counting process allocates through pymalloc (Python's small objects) and glibc's
``malloc`` with :data:`GLIBC_TUNABLES` (everything else, tensors included). Plain
``malloc`` for everything (CodSpeed's ``PYTHONMALLOC=malloc``) walks and merges free
chunks whose layout follows whatever the process did before, timing readings
included: two processes of one tree differed by up to 2.1 % per case, and a
1000-element ``torch.add`` cost +91 % after other cases had fragmented the heap.
:func:`find_allocator` names the allocator in the count files.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from rlpace.bench._compile import CompileFailed, compile_library

__all__ = [
    "Allocator",
    "CountUnavailable",
    "Toolchain",
    "find_allocator",
    "find_toolchain",
    "missing_reason",
]

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


ALLOCATOR_ENV = "RLPACE_COUNT_ALLOCATOR"
"""Environment variable choosing another allocator for the counting process: the path
of a ``malloc`` library to preload (e.g. a ``libjemalloc.so``); unset or ``glibc``,
glibc's with :data:`GLIBC_TUNABLES`."""

GLIBC_TUNABLES = ":".join(
    (
        "glibc.malloc.mxfast=0",  # no fast bins: nothing for malloc_consolidate to merge
        "glibc.malloc.tcache_count=65535",  # small blocks reused from per-size caches
        "glibc.malloc.mmap_threshold=67108864",  # a fixed threshold (no dynamic one)
        "glibc.malloc.trim_threshold=4294967295",  # never give the heap's top back
        "glibc.malloc.top_pad=268435456",  # grow the heap rarely, in large steps
    )
)
"""glibc settings of the counting process: they turn off the paths whose cost depends
on the heap's history most (fast-bin consolidation, trimming, growing the heap in small
steps, a moving mmap threshold). Over the CPU set's 68 counted cases, A/A spreads went
from 0.11 / 0.55 / 2.1 % (median / p90 / max, plain ``malloc``) to 0.033 / 0.11 /
0.32 %; jemalloc preloaded instead gave 0.099 / 0.38 / 1.6 % (``reports/README.md``)."""


@dataclass(frozen=True)
class Allocator:
    """The allocator of the counting process, and how to select it.

    Example:
        >>> glibc = Allocator("glibc", None, "glibc 2.36 (tuned 1a2b3c4d)")
        >>> sorted(glibc.environ())
        ['GLIBC_TUNABLES', 'PYTHONMALLOC']
        >>> Allocator("preload", "/opt/libjemalloc.so", "libjemalloc.so 0123").environ()["LD_PRELOAD"]
        '/opt/libjemalloc.so'
    """

    name: str
    """``glibc`` (the system's, tuned) or ``preload`` (:data:`ALLOCATOR_ENV`)."""
    library: str | None
    """The preloaded library's path (None: the system allocator)."""
    identity: str
    """What the count files record (``allocator``): a different one changes every
    count, so files counted with another are refused like another Valgrind."""

    def environ(self) -> dict[str, str]:
        """The environment variables that select this allocator in a child process."""
        env = {"PYTHONMALLOC": "pymalloc"}  # Python's small objects: constant-cost pools
        if self.library is not None:
            env["LD_PRELOAD"] = self.library
        else:
            env["GLIBC_TUNABLES"] = GLIBC_TUNABLES
        return env


def _glibc() -> Allocator:
    libc, version = platform.libc_ver()
    if libc != "glibc":  # another C library ignores the tunables: name what runs
        return Allocator("glibc", None, f"system malloc ({libc or 'unknown C library'})")
    settings = hashlib.sha256(GLIBC_TUNABLES.encode()).hexdigest()[:8]
    return Allocator("glibc", None, f"glibc {version} (tuned {settings})")


def _preloads(library: str, python: Path) -> str | None:
    """None when ``python`` starts with ``library`` preloaded, else why not."""
    try:
        done = subprocess.run(
            [str(python), "-c", "pass"],
            env={**os.environ, "LD_PRELOAD": library},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    if done.returncode != 0 or "ld.so" in done.stderr:
        return (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1][:200]
    return None


def find_allocator(python: Path | None = None) -> Allocator:
    """The counting process's allocator: glibc's with :data:`GLIBC_TUNABLES`, or the
    library :data:`ALLOCATOR_ENV` names, preloaded.

    Raises:
        CountUnavailable: :data:`ALLOCATOR_ENV` names a library that does not exist
            or cannot be preloaded (the message says which and how to fix it).

    Example:
        >>> find_allocator().name  # doctest: +SKIP
        'glibc'
    """
    chosen = os.environ.get(ALLOCATOR_ENV, "").strip()
    if not chosen or chosen.lower() == "glibc":
        return _glibc()
    if any(c in chosen for c in ": \t"):  # the dynamic loader splits LD_PRELOAD there
        raise CountUnavailable(
            f"{ALLOCATOR_ENV}={chosen!r}: expected the path of one library, got one with a "
            "colon or a space, where the dynamic loader splits its list; fix: link the "
            "library from a path without them"
        )
    why = _preloads(chosen, Path(python or sys.executable)) if Path(chosen).is_file() else None
    if not Path(chosen).is_file() or why is not None:
        raise CountUnavailable(
            f"{ALLOCATOR_ENV}={chosen}: expected a malloc library the interpreter can "
            f"preload, got one that cannot be ({why or 'no such file'}); fix: point it at "
            f"a library such as libjemalloc.so, or unset {ALLOCATOR_ENV} for glibc's"
        )
    library = os.path.abspath(chosen)  # the counting process runs elsewhere
    digest = hashlib.sha256(Path(library).read_bytes()).hexdigest()[:12]
    return Allocator("preload", library, f"{Path(library).name} {digest}")


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
    allocator: Allocator = field(default_factory=_glibc)
    """The counting process's allocator (:func:`find_allocator`)."""


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


def build_shim(gcc: str, cache_dir: Path | None = None) -> Path:
    """Compile the client-request shim (once per source and machine) and return its path.

    Example:
        >>> build_shim("/usr/bin/gcc").suffix  # doctest: +SKIP
        '.so'
    """
    try:
        return compile_library(SHIM_SOURCE, "callgrind-shim", gcc, cache=cache_dir)
    except CompileFailed as exc:
        raise CountUnavailable(
            f"{exc}; the count tier is off and the run falls back to timing"
        ) from None


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
    return Toolchain(valgrind, version, build_shim(gcc, cache_dir), _setarch(), find_allocator())
