"""Where a benchmark ran: versions, CPU, thread settings and git commit.

The pytest plugin of the suite stores :func:`collect_environment` under
``machine_info["rlpace"]`` of every result file. Before two runs are compared,
:func:`check_compatible` lists what differs between their environments in ways that
move timings (library versions, interpreter, CPU, thread settings);
:func:`require_compatible` turns a non-empty list into an
:class:`~rlpace.bench.errors.EnvironmentMismatchError` unless the caller explicitly
allows the mismatch. The git commit and rlpace's own version are recorded but never
compared: they are what a comparison is about.

Example:
    >>> head = collect_environment(repo=None)
    >>> check_compatible(head, dict(head))
    []
    >>> base = {**head, "torch": "0.0.1"}
    >>> check_compatible(head, base)[0].startswith("torch: head ")
    True
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rlpace.bench.duet_sync import DUET_SYNC_ENV
from rlpace.bench.errors import BenchInputError, EnvironmentMismatchError
from rlpace.bench.suite import WALL_ROUNDS_ENV

__all__ = [
    "COMPARED_KEYS",
    "ENVIRONMENT_FORMAT_VERSION",
    "MACHINE_INFO_KEY",
    "check_compatible",
    "collect_environment",
    "environment_of",
    "require_compatible",
    "require_compatible_runs",
]

ENVIRONMENT_FORMAT_VERSION = 1
"""Version of the metadata dict; bumped when a key changes meaning."""

MACHINE_INFO_KEY = "rlpace"
"""The key of pytest-benchmark's ``machine_info`` under which the metadata is stored."""

COMPARED_KEYS = (
    "python",
    "python_implementation",
    "machine",
    "cpu",
    "cpu_count",
    "torch",
    "tensordict",
    "torchrl",
    "numpy",
    "torch_num_threads",
    "omp_num_threads",
    "mkl_num_threads",
    "cuda_device",
)
"""Keys that must be equal for two runs to be comparable."""

_PACKAGES = {
    "torch": "torch",
    "tensordict": "tensordict",
    "torchrl": "torchrl",
    "numpy": "numpy",
    "rlpace": "rlpace",
    "pytest_benchmark": "pytest-benchmark",
}


def _package_version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git(repo: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(
            ["git", *args], cwd=repo, capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _torch_settings() -> dict[str, Any]:
    # torch's settings as this process has them: a process that never imported torch
    # (a suite of pure-Python cases, the driver) ran none of its code, and importing it
    # only to read them would cost more than such a run
    torch = sys.modules.get("torch")
    if torch is None:
        return dict.fromkeys(
            ("torch_num_threads", "torch_num_interop_threads", "cuda_device", "cuda_version")
        )
    cuda = torch.cuda.is_available()
    return {
        "torch_num_threads": torch.get_num_threads(),
        "torch_num_interop_threads": torch.get_num_interop_threads(),
        "cuda_device": torch.cuda.get_device_name(0) if cuda else None,
        "cuda_version": torch.version.cuda,
    }


def collect_environment(*, repo: Path | str | None = ".") -> dict[str, Any]:
    """Describe this process's benchmark environment as a JSON-ready dict.

    Args:
        repo: a directory inside the git repository whose commit is recorded; ``None``
            skips git (``git_commit`` and ``git_dirty`` are then ``None``).

    Returns:
        Versions (python, torch, tensordict, torchrl, numpy, rlpace,
        pytest-benchmark), CPU model and count, torch's intra-/inter-op threads and
        CUDA device (``None`` when this process has not imported torch: it ran none
        of torch's code), the ``OMP_NUM_THREADS`` / ``MKL_NUM_THREADS`` variables, and
        the git commit with a dirty flag.

    Example:
        >>> env = collect_environment(repo=None)
        >>> env["format_version"], env["git_commit"]
        (1, None)
        >>> sorted(k for k in ("torch", "torchrl", "tensordict") if env[k])
        ['tensordict', 'torch', 'torchrl']
    """
    env: dict[str, Any] = {
        "format_version": ENVIRONMENT_FORMAT_VERSION,
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
    }
    env.update({key: _package_version(dist) for key, dist in _PACKAGES.items()})
    env.update(_torch_settings())
    env["omp_num_threads"] = os.environ.get("OMP_NUM_THREADS")
    env["mkl_num_threads"] = os.environ.get("MKL_NUM_THREADS")
    # the wall-clock cases' rounds floor (``rlpace-bench run`` sets it): a calibration of
    # their pairs holds only for runs of the same floor
    env["wall_rounds"] = os.environ.get(WALL_ROUNDS_ENV)
    # whether this run met its duet twin before each wall-clock case (for the record)
    env["duet_sync"] = bool(os.environ.get(DUET_SYNC_ENV))
    commit = dirty = None
    if repo is not None:
        commit = _git(Path(repo), "rev-parse", "HEAD")
        status = _git(Path(repo), "status", "--porcelain", "--untracked-files=no")
        dirty = None if status is None else bool(status)
    env["git_commit"] = commit
    env["git_dirty"] = dirty
    return env


def environment_of(machine_info: Mapping[str, Any], *, source: str = "result file") -> dict:
    """Return the rlpace environment stored in a result file's ``machine_info``.

    Args:
        machine_info: pytest-benchmark's ``machine_info`` dict (or the environment
            dict itself, recognised by its ``format_version``).
        source: how to name the file in the error message.

    Raises:
        BenchInputError: when no rlpace metadata is present, or its format is newer
            than this rlpace understands.

    Example:
        >>> environment_of({"node": "x", "rlpace": {"format_version": 1, "torch": "2.13"}})
        {'format_version': 1, 'torch': '2.13'}
        >>> environment_of({"node": "x"}, source="base.json")
        Traceback (most recent call last):
        ...
        rlpace.bench.errors.BenchInputError: base.json: expected environment metadata under machine_info['rlpace'], found none (keys: node); re-run it with `rlpace-bench run`, which records it
    """
    meta = machine_info.get(MACHINE_INFO_KEY, machine_info)
    if not isinstance(meta, Mapping) or "format_version" not in meta:
        keys = ", ".join(sorted(machine_info)) or "none"
        raise BenchInputError(
            f"{source}: expected environment metadata under machine_info[{MACHINE_INFO_KEY!r}], "
            f"found none (keys: {keys}); re-run it with `rlpace-bench run`, which records it"
        )
    version = meta["format_version"]
    if not isinstance(version, int) or version > ENVIRONMENT_FORMAT_VERSION:
        raise BenchInputError(
            f"{source}: environment metadata format_version {version!r} is newer than the "
            f"{ENVIRONMENT_FORMAT_VERSION} this rlpace reads; upgrade rlpace to compare it"
        )
    return dict(meta)


def check_compatible(head_meta: Mapping[str, Any], base_meta: Mapping[str, Any]) -> list[str]:
    """List the differences between two environments that make timings incomparable.

    Args:
        head_meta: the environment of the run under test (from
            :func:`collect_environment` or :func:`environment_of`).
        base_meta: the environment of the reference run.

    Returns:
        One line per differing key in :data:`COMPARED_KEYS`, ``"key: head X, base
        Y"``; empty when the runs may be compared.

    Example:
        >>> head = {"torch": "2.13.0", "omp_num_threads": "1", "git_commit": "abc"}
        >>> base = {"torch": "2.12.0", "omp_num_threads": None, "git_commit": "def"}
        >>> check_compatible(head, base)
        ["torch: head '2.13.0', base '2.12.0'", "omp_num_threads: head '1', base None"]
    """
    return [
        f"{key}: head {head_meta.get(key)!r}, base {base_meta.get(key)!r}"
        for key in COMPARED_KEYS
        if head_meta.get(key) != base_meta.get(key)
    ]


def require_compatible(
    head_meta: Mapping[str, Any], base_meta: Mapping[str, Any], *, allow_mismatch: bool = False
) -> list[str]:
    """Refuse two environments that differ, unless ``allow_mismatch`` says otherwise.

    Returns:
        The differences (empty when none); with ``allow_mismatch`` the caller shows
        them as a warning.

    Raises:
        EnvironmentMismatchError: when the environments differ and ``allow_mismatch``
            is false; the message lists every difference and the two ways out.

    Example:
        >>> require_compatible({"torch": "2.13.0"}, {"torch": "2.13.0"})
        []
        >>> require_compatible({"torch": "2.13.0"}, {"torch": "2.12.0"}, allow_mismatch=True)
        ["torch: head '2.13.0', base '2.12.0'"]
        >>> require_compatible({"cpu": "A"}, {"cpu": "B"})
        Traceback (most recent call last):
        ...
        rlpace.bench.errors.EnvironmentMismatchError: head and base were measured in different environments (cpu: head 'A', base 'B'); expected equal versions, CPU and thread settings. Re-run both with `rlpace-bench run` on one machine, or pass --allow-env-mismatch to compare anyway
    """
    differences = check_compatible(head_meta, base_meta)
    if differences and not allow_mismatch:
        raise EnvironmentMismatchError(
            "head and base were measured in different environments ("
            + "; ".join(differences)
            + "); expected equal versions, CPU and thread settings. Re-run both with "
            "`rlpace-bench run` on one machine, or pass --allow-env-mismatch to compare anyway"
        )
    return differences


def require_compatible_runs(
    head: Any, base: Any, *, allow_mismatch: bool = False, require_metadata: bool = True
) -> list[str]:
    """:func:`require_compatible` for two results tables (their ``attrs["machine_info"]``).

    This is the check a comparison runs before deciding anything: results tables of
    :func:`rlpace.bench.results.load_results` carry the file's ``machine_info``.

    Args:
        head: results table of the new run.
        base: results table of the reference run.
        allow_mismatch: return the differences instead of raising.
        require_metadata: when false, a table without rlpace metadata (a file not
            written by ``rlpace-bench run``, or an asv result) skips the check and
            returns ``[]``; when true it is an error.

    Raises:
        BenchInputError: when a table has no rlpace environment metadata and
            ``require_metadata`` is true.
        EnvironmentMismatchError: when the environments differ and ``allow_mismatch``
            is false.

    Example:
        >>> import pandas as pd
        >>> head, base = pd.DataFrame(), pd.DataFrame()
        >>> head.attrs["machine_info"] = {"rlpace": {"format_version": 1, "torch": "2.13.0"}}
        >>> base.attrs["machine_info"] = {"rlpace": {"format_version": 1, "torch": "2.13.0"}}
        >>> require_compatible_runs(head, base)
        []
    """
    if not require_metadata and not all(
        isinstance((df.attrs.get("machine_info") or {}).get(MACHINE_INFO_KEY), Mapping)
        for df in (head, base)
    ):
        return []
    head_meta = environment_of(
        head.attrs.get("machine_info") or {}, source=str(head.attrs.get("source", "head"))
    )
    base_meta = environment_of(
        base.attrs.get("machine_info") or {}, source=str(base.attrs.get("source", "base"))
    )
    return require_compatible(head_meta, base_meta, allow_mismatch=allow_mismatch)
