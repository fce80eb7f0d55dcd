"""The base revision of a comparison: its git worktree and its Python environment.

The base is checked out in a detached ``git worktree`` cached per commit, and gets an
interpreter from a virtual environment cached by a hash of its pinned requirements
(``ci/requirements.txt``). When the base pins exactly what the head pins, the
environment is an *overlay*: a venv with no packages of its own that sees the head's
site-packages, created in a fraction of a second; only the base's own rlpace differs.

Example:
    >>> requirements_hash(Path("/nonexistent")) == requirements_hash(Path("/also-missing"))
    True
    >>> sha, tree = checkout_base(Path("."), "HEAD", Path("build/rlpace-bench"))  # doctest: +SKIP
    >>> prepare_base_python(tree, Path("."), Path("build/rlpace-bench"))  # doctest: +SKIP
    (PosixPath('build/rlpace-bench/venvs/overlay-…/bin/python'), 'overlay')
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from dataclasses import dataclass
from pathlib import Path

from rlpace.bench.errors import BenchInputError

__all__ = [
    "BASE_ENV_MODES",
    "BaseCheckout",
    "PipelineError",
    "checkout_base",
    "prepare_base_python",
    "repository_root",
    "requirements_hash",
]

BASE_ENV_MODES = ("auto", "overlay", "full", "current")
REQUIREMENTS = Path("ci") / "requirements.txt"


class PipelineError(RuntimeError):
    """A step of the pipeline failed (git, the base environment, a benchmark run).

    Example:
        >>> raise PipelineError("git worktree add failed: ...")
        Traceback (most recent call last):
        ...
        rlpace.bench.base_revision.PipelineError: git worktree add failed: ...
    """


@dataclass(frozen=True)
class BaseCheckout:
    """The base revision, checked out and ready to run.

    Example:
        >>> BaseCheckout("HEAD", "0" * 40, Path("wt"), Path("py"), "current").short
        '000000000000'
    """

    ref: str
    """The revision as asked for (``HEAD``, ``main``...)."""
    sha: str
    """The commit it resolved to."""
    tree: Path
    """The worktree holding that commit."""
    python: Path
    """The interpreter that runs the base."""
    env_mode: str
    """How that interpreter was prepared (``overlay``, ``full`` or ``current``)."""

    @property
    def short(self) -> str:
        """The abbreviated commit."""
        return self.sha[:12]


def _git(repo: Path, *args: str) -> str:
    proc = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise PipelineError(
            f"`git {' '.join(args)}` in {repo} failed (exit {proc.returncode}): "
            f"{proc.stderr.strip() or proc.stdout.strip()}"
        )
    return proc.stdout.strip()


def repository_root(path: Path) -> Path:
    """The top of the git working tree containing ``path``.

    Example:
        >>> repository_root(Path(".")).is_dir()  # doctest: +SKIP
        True
    """
    try:
        return Path(_git(path, "rev-parse", "--show-toplevel")).resolve()
    except PipelineError as exc:
        raise BenchInputError(
            f"{path}: expected a git working tree (the head to benchmark), got none: {exc}. "
            "Fix: run from inside the repository"
        ) from None


def checkout_base(repo: Path, ref: str, cache_dir: Path) -> tuple[str, Path]:
    """Check ``ref`` out in a detached worktree under ``cache_dir``; reuse it when current.

    Worktrees of other commits left there by earlier runs are removed.

    Returns:
        The commit ``ref`` resolved to and the worktree's path.

    Example:
        >>> sha, tree = checkout_base(Path("."), "HEAD", Path("build/rlpace-bench"))  # doctest: +SKIP
    """
    try:
        sha = _git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    except PipelineError:
        raise BenchInputError(
            f"--base {ref}: expected a git revision of {repo}, found none. "
            "Fix: pass a branch, tag or commit that exists (fetch it first in a shallow clone)"
        ) from None
    root = cache_dir / "worktrees"
    root.mkdir(parents=True, exist_ok=True)
    tree = root / sha[:12]
    for stale in root.iterdir():
        if stale != tree and stale.is_dir():
            subprocess.run(
                ["git", "-C", str(repo), "worktree", "remove", "--force", str(stale)],
                capture_output=True,
                check=False,
            )
            shutil.rmtree(stale, ignore_errors=True)
    if tree.is_dir():
        try:
            if _git(tree, "rev-parse", "HEAD") == sha and not _git(tree, "status", "--porcelain"):
                return sha, tree.resolve()
        except PipelineError:
            pass
        subprocess.run(
            ["git", "-C", str(repo), "worktree", "remove", "--force", str(tree)],
            capture_output=True,
            check=False,
        )
        shutil.rmtree(tree, ignore_errors=True)
    _git(repo, "worktree", "prune")
    _git(repo, "worktree", "add", "--detach", "--force", str(tree), sha)
    return sha, tree.resolve()


def requirements_hash(tree: Path) -> str:
    """A hash of the tree's pinned requirements and this interpreter's version.

    Two trees with the same hash can share one environment.

    Example:
        >>> len(requirements_hash(Path("/nonexistent")))
        16
    """
    digest = hashlib.sha256()
    digest.update(sys.version.encode())
    path = tree / REQUIREMENTS
    digest.update(path.read_bytes() if path.is_file() else b"<no pinned requirements>")
    return digest.hexdigest()[:16]


def _venv_python(env_dir: Path) -> Path:
    return env_dir / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _venv_site_packages(python: Path) -> Path:
    out = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(out.stdout.strip())


def prepare_base_python(
    base_tree: Path, head_tree: Path, cache_dir: Path, mode: str = "auto"
) -> tuple[Path, str]:
    """An interpreter for the base revision, from an environment cached by requirements.

    Modes:

    - ``overlay``: a venv without packages of its own that sees the head's
      site-packages (``site.addsitedir`` in a ``.pth``), for when the base pins the same
      requirements; creating it takes a fraction of a second.
    - ``full``: a venv with the base's ``ci/requirements.txt`` installed by pip.
    - ``current``: this interpreter.
    - ``auto``: ``overlay`` when both trees' requirements hash alike, else ``full``.

    In every mode only the base's rlpace is "installed": a ``.pth`` file in the venv
    puts ``<base_tree>/lib`` first on the path (``current`` relies on the runner's
    working directory and pytest's ``pythonpath`` instead).

    Returns:
        The interpreter and the mode used.

    Example:
        >>> prepare_base_python(Path("wt"), Path("."), Path("build/x"), "current")[1]
        'current'
    """
    if mode not in BASE_ENV_MODES:
        raise BenchInputError(
            f"base environment mode: expected one of {BASE_ENV_MODES}, got {mode!r}"
        )
    if mode == "current":
        return Path(sys.executable), "current"
    key = requirements_hash(base_tree)
    if mode == "auto":
        mode = "overlay" if key == requirements_hash(head_tree) else "full"
    if mode == "overlay":  # an overlay is only valid over the head environment it was made for
        head_site = sysconfig.get_paths()["purelib"]
        key += "-" + hashlib.sha256(head_site.encode()).hexdigest()[:8]
    env_dir = cache_dir / "venvs" / f"{mode}-{key}"
    ready = env_dir / ".rlpace-ready"
    python = _venv_python(env_dir)
    if not ready.is_file() or not python.exists():
        shutil.rmtree(env_dir, ignore_errors=True)
        venv.EnvBuilder(with_pip=(mode == "full"), symlinks=os.name != "nt").create(env_dir)
        site = _venv_site_packages(python)
        if mode == "overlay":
            head_site = sysconfig.get_paths()["purelib"]
            (site / "_rlpace_head_env.pth").write_text(
                f"import site; site.addsitedir({head_site!r})\n"
            )
        else:
            requirements = base_tree / REQUIREMENTS
            if not requirements.is_file():
                raise PipelineError(
                    f"base environment: expected pinned requirements at {requirements}, found "
                    "none. Fix: pass --base-env overlay or current to reuse the head's packages"
                )
            proc = subprocess.run(
                [str(python), "-m", "pip", "install", "--quiet", "-r", str(requirements)],
                capture_output=True,
                text=True,
                check=False,
            )
            if proc.returncode != 0:
                raise PipelineError(
                    f"base environment: `pip install -r {requirements}` failed "
                    f"(exit {proc.returncode}): {proc.stderr.strip()[-2000:]}"
                )
        ready.write_text(key + "\n")
    site = _venv_site_packages(python)
    # sorts before _rlpace_head_env.pth, so the base's rlpace shadows the head's
    (site / "_rlpace_base.pth").write_text(str(base_tree / "lib") + "\n")
    return python, mode
