"""The package's dependency direction, checked on the source text.

``bench`` and the RL packages never import each other; ``trainers → collectors →
envs, data``; ``data`` imports none of the other rlpace packages.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

LIB = Path(__file__).resolve().parents[1] / "lib" / "rlpace"

# package -> rlpace packages it must never import
FORBIDDEN = {
    "bench": {"data", "collectors", "envs", "trainers"},
    "data": {"bench", "collectors", "envs", "trainers"},
    "envs": {"bench", "collectors", "trainers"},
    "collectors": {"bench", "trainers"},
    "trainers": {"bench"},
}


def _rlpace_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        for name in names:
            parts = name.split(".")
            if parts[0] == "rlpace" and len(parts) > 1:
                found.add(parts[1])
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_imports_point_one_way(package: str) -> None:
    offenders = []
    for path in sorted((LIB / package).rglob("*.py")):
        bad = _rlpace_imports(path) & FORBIDDEN[package]
        if bad:
            offenders.append(
                f"{path.relative_to(LIB)} imports rlpace.{', rlpace.'.join(sorted(bad))}"
            )
    assert not offenders, "dependency direction broken:\n" + "\n".join(offenders)


def test_import_does_not_touch_multiprocessing_start_method() -> None:
    import subprocess
    import sys

    code = (
        "import multiprocessing as mp\n"
        "import rlpace, rlpace.data, rlpace.collectors, rlpace.envs.llm, rlpace.trainers, rlpace.bench\n"
        "print(mp.get_start_method(allow_none=True))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(LIB.parent), "PATH": "/usr/bin:/bin"},
    )
    assert out.stdout.strip() == "None"
