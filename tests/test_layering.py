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

    code = (
        "import multiprocessing as mp\n"
        "import rlpace, rlpace.data, rlpace.collectors, rlpace.envs.llm, rlpace.trainers, rlpace.bench\n"
        "print(mp.get_start_method(allow_none=True))\n"
    )
    out = _fresh_python(code)
    assert out.stdout.strip() == "None"


def _bench_component(module: str) -> str | None:
    """``rlpace.bench.aa._pool`` → ``aa``: a module of ``bench`` or the
    subpackage it belongs to (a subpackage is one component); None outside ``bench``."""
    parts = module.split(".")
    if parts[:2] != ["rlpace", "bench"] or len(parts) < 3:
        return None
    return parts[2]


def _runtime_imports(path: Path) -> set[str]:
    """Every ``rlpace`` module ``path`` imports when it runs, at any depth of the code
    (imports inside functions count; those under ``if TYPE_CHECKING:`` do not)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped |= {id(n) for child in node.body for n in ast.walk(child)}
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return {name for name in found if name.startswith("rlpace.")}


def test_bench_modules_import_each_other_without_a_cycle() -> None:
    from graphlib import CycleError, TopologicalSorter

    graph: dict[str, set[str]] = {}
    for path in sorted((LIB / "bench").rglob("*.py")):
        parts = path.relative_to(LIB / "bench").with_suffix("").parts
        if parts in (("__init__",), ("__main__",)):
            continue  # the package's public face imports lazily; __main__ is the CLI
        me = parts[0]
        deps = {_bench_component(m) for m in _runtime_imports(path)} - {None, me}
        graph.setdefault(me, set()).update(d for d in deps if d is not None)
    try:
        order = list(TopologicalSorter(graph).static_order())
    except CycleError as exc:
        pytest.fail(f"an import cycle inside rlpace.bench: {' -> '.join(exc.args[1])}")
    # the records an A/A pool leaves sit below the judge that reads them; the runs that
    # make them judge with it, so they sit above
    assert order.index("calibration") < order.index("judge") < order.index("aa")
    assert order.index("judge") < order.index("pipeline")


def test_bench_components_have_no_cycle_even_through_type_imports() -> None:
    """A type-only import is still a dependency of the design: a package whose modules
    import the judge for their work and are imported by it for their types is two
    layers in one package."""
    from graphlib import CycleError, TopologicalSorter

    graph: dict[str, set[str]] = {}
    paths = sorted((LIB / "bench").rglob("*.py"))
    modules = {
        ".".join(("rlpace", "bench", *p.relative_to(LIB / "bench").with_suffix("").parts))
        for p in paths
    }
    for path in paths:
        parts = path.relative_to(LIB / "bench").with_suffix("").parts
        if parts in (("__init__",), ("__main__",)):
            continue
        me = parts[0]
        deps = {_bench_component(m) for m in _module_imports(path, modules)} - {None, me}
        graph.setdefault(me, set()).update(d for d in deps if d is not None)
    try:
        list(TopologicalSorter(graph).static_order())
    except CycleError as exc:
        pytest.fail(f"a cycle between rlpace.bench's parts: {' -> '.join(exc.args[1])}")


def _module_imports(path: Path, modules: set[str]) -> set[str]:
    """Every ``rlpace`` module ``path`` names in an import, ``if TYPE_CHECKING:`` ones
    included (``from a.b import c`` names ``a.b.c`` where that is a module)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            subs = {f"{node.module}.{alias.name}" for alias in node.names}
            found |= (subs & modules) or {node.module}
    return found & modules


def test_bench_modules_have_no_cycle_even_through_type_imports() -> None:
    from graphlib import CycleError, TopologicalSorter

    paths = {}
    for path in sorted((LIB / "bench").rglob("*.py")):
        parts = ("rlpace", "bench", *path.relative_to(LIB / "bench").with_suffix("").parts)
        paths[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    modules = set(paths)
    graph = {
        name: {
            m for m in _module_imports(path, modules) if m != name and not name.startswith(m + ".")
        }
        for name, path in paths.items()
    }
    try:
        list(TopologicalSorter(graph).static_order())
    except CycleError as exc:
        pytest.fail(f"an import cycle, type imports included: {' -> '.join(exc.args[1])}")


def test_importing_bench_stays_light() -> None:

    code = (
        "import sys, rlpace.bench as b\n"
        "print(sorted(m for m in ('torch', 'pandas', 'scipy') if m in sys.modules))\n"
        "print(b.Judge.__module__, len(b.PUBLIC_NAMES))\n"
    )
    out = _fresh_python(code)
    assert out.stdout.split("\n")[:2] == ["[]", "rlpace.bench.judge 16"]


def _fresh_python(code: str):
    """Run ``code`` in a fresh interpreter that sees only this checkout's ``lib``."""
    import subprocess
    import sys

    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(LIB.parent), "PATH": "/usr/bin:/bin"},
    )
