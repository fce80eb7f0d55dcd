"""Where ``pr`` and ``aa --duets`` leave their duets, read back for a duet calibration.

A duet is ``base-<k>.json`` and ``head-<k>.json`` in one directory. ``aa --duets N``
writes ``N`` of them to one directory; a ``pr`` run writes one directory a stage under
``build/rlpace-bench/runs``: ``<set>`` (the first duets, every timed case and the
torchrl twins), ``<set>-extend-<k>`` (extra duets of the cases that asked for more
pairs) and ``<set>-confirm`` (the confirmation's, when something was flagged).

Example:
    >>> duet_files([Path("nowhere")])
    Traceback (most recent call last):
    ...
    rlpace.bench.errors.BenchInputError: nowhere: expected three or more duets as head-<k>.json and base-<k>.json, found 0. Fix: pass the runs directory of `aa --duets` (under build/rlpace-bench/aa/), several directories (repeat --duets-from), or run `rlpace-bench aa --duets 16`
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from rlpace.bench.calibration._duets import PrRunDuets
from rlpace.bench.errors import BenchInputError

__all__ = ["duet_files", "pr_run_duets"]


def duet_files(runs_dirs: Sequence[Path]) -> tuple[list[Path], list[Path]]:
    """``head-<k>.json`` and ``base-<k>.json`` of each of ``runs_dirs``, in ``k`` order,
    paired; three or more pairs in all.

    Example:
        >>> import tempfile
        >>> d = Path(tempfile.mkdtemp())
        >>> for k, side in [(k, s) for k in (0, 1, 2, 10) for s in ("head", "base")]:
        ...     (d / f"{side}-{k}.json").touch()
        >>> [p.name for p in duet_files([d])[0]]
        ['head-0.json', 'head-1.json', 'head-2.json', 'head-10.json']
        >>> import shutil; shutil.rmtree(d)
    """
    seen: set[Path] = set()
    heads_all: list[Path] = []
    bases_all: list[Path] = []
    for runs_dir in runs_dirs:
        if runs_dir.resolve() in seen:
            raise BenchInputError(
                f"{runs_dir}: expected each directory of duets once, got it twice: its "
                "duets would count twice and every spread would look narrower than it is. "
                "Fix: name each directory once"
            )
        seen.add(runs_dir.resolve())
        heads, bases = _paired(runs_dir)
        if not heads and len(runs_dirs) > 1:
            raise BenchInputError(
                f"{runs_dir}: expected duets as head-<k>.json and base-<k>.json, found none. "
                "Fix: pass a runs directory of `aa --duets` (under build/rlpace-bench/aa/) or "
                "of `pr` (build/rlpace-bench/runs/<set>, <set>-extend-<k>)"
            )
        heads_all += heads
        bases_all += bases
    if len(heads_all) < 3:
        where = str(runs_dirs[0]) if len(runs_dirs) == 1 else f"{len(runs_dirs)} directories"
        raise BenchInputError(
            f"{where}: expected three or more duets as head-<k>.json and base-<k>.json, "
            f"found {len(heads_all)}. Fix: pass the runs directory of `aa --duets` (under "
            "build/rlpace-bench/aa/), several directories (repeat --duets-from), or run "
            "`rlpace-bench aa --duets 16`"
        )
    return heads_all, bases_all


def _numbered(runs_dir: Path, side: str) -> dict[int, Path]:
    """``k → <side>-<k>.json`` in ``runs_dir``."""
    out = {}
    for path in runs_dir.glob(f"{side}-*.json"):
        tail = path.stem.split("-", 1)[1]
        if tail.isdigit():
            out[int(tail)] = path
    return out


def _paired(runs_dir: Path) -> tuple[tuple[Path, ...], tuple[Path, ...]]:
    """The head and base files of the duets in ``runs_dir`` that have both, in order."""
    heads, bases = _numbered(runs_dir, "head"), _numbered(runs_dir, "base")
    pairs = sorted(set(heads) & set(bases))
    return tuple(heads[k] for k in pairs), tuple(bases[k] for k in pairs)


def pr_run_duets(dirs: Sequence[Path], set_name: str) -> list[PrRunDuets]:
    """One :class:`~rlpace.bench.calibration.PrRunDuets` per directory a ``pr`` run
    left: ``<set>`` (the first duets), ``<set>-extend-<k>`` in ``k`` order (the extra
    duets) and ``<set>-confirm``, in ``DIR`` or in ``DIR/build/rlpace-bench/runs``.

    Example:
        >>> pr_run_duets([Path("/nowhere")], "cpu")
        Traceback (most recent call last):
        ...
        rlpace.bench.errors.BenchInputError: /nowhere: expected the runs directory of an A/A `pr` run (build/rlpace-bench/runs, holding cpu/), found no cpu/ there. Fix: pass a checkout where `make bench` ran, or its build/rlpace-bench/runs
    """
    runs: list[PrRunDuets] = []
    seen: set[Path] = set()
    for given in dirs:
        nested = given / "build" / "rlpace-bench" / "runs"
        runs_dir = nested if (nested / set_name).is_dir() else given
        if not (runs_dir / set_name).is_dir():
            raise BenchInputError(
                f"{given}: expected the runs directory of an A/A `pr` run "
                f"(build/rlpace-bench/runs, holding {set_name}/), found no {set_name}/ "
                "there. Fix: pass a checkout where `make bench` ran, or its "
                "build/rlpace-bench/runs"
            )
        if runs_dir.resolve() in seen:
            raise BenchInputError(
                f"{given}: expected each A/A pr run once, got it twice: its duets would "
                "count twice and be judged with themselves in the prior. Fix: name each "
                "run once"
            )
        seen.add(runs_dir.resolve())
        stages = [runs_dir / set_name] + sorted(
            (
                d
                for d in runs_dir.glob(f"{set_name}-extend-*")
                if d.name.rsplit("-", 1)[1].isdigit()
            ),
            key=lambda d: int(d.name.rsplit("-", 1)[1]),
        )
        paired = [_paired(d) for d in stages]
        heads = tuple(p for h, _ in paired for p in h)
        bases = tuple(p for _, b in paired for p in b)
        if not heads:
            raise BenchInputError(
                f"{runs_dir / set_name}: expected the duets of a `pr` run (head-<k>.json and "
                "base-<k>.json), found none: did its count tier run (duets need it)? Fix: "
                "pass a run whose comment says its timed cases ran as duets"
            )
        head_tree, base_tree = _tree(heads[0]), _tree(bases[0])
        if head_tree[1] or (head_tree[0] and base_tree[0] and head_tree[0] != base_tree[0]):
            raise BenchInputError(
                f"{given}: expected an A/A `pr` run (head the base commit, nothing "
                f"uncommitted), got head {head_tree[0] or '?'}"
                f"{' with uncommitted changes' if head_tree[1] else ''} against base "
                f"{base_tree[0] or '?'}: its real changes would be pooled as noise. Fix: "
                "pass only runs of `make bench` on a clean checkout of its base (BASE=HEAD)"
            )
        confirm = _paired(runs_dir / f"{set_name}-confirm")
        runs.append(PrRunDuets(str(given), heads, bases, *confirm))
    return runs


def _tree(path: Path) -> tuple[str, bool]:
    """``(git commit, uncommitted changes)`` a result file's run recorded (``""``,
    False where it recorded none, as files of other tools do)."""
    try:
        info = json.loads(path.read_text(encoding="utf-8"))["machine_info"]["rlpace"]
        return str(info.get("git_commit") or ""), bool(info.get("git_dirty"))
    except (OSError, ValueError, KeyError, TypeError):
        return "", False  # unreadable: load_results names the problem when it reads it
