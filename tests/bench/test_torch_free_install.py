"""The harness installs and runs without torch: the wheel's core dependencies are the
harness's, and ``show``, ``compare``, ``post``, ``history`` and the renderer work in an
environment that has only them.

The environment is built offline and fast: the wheel is built from a copy of the
sources, installed with ``--no-deps --no-index`` into a fresh virtualenv without
system site-packages, and the wheel's own core requirements (and theirs) are made
importable by linking just those distributions from this test environment. torch,
tensordict and torchrl are therefore absent unless the wheel asks for them.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).parent / "fixtures"
RL_ONLY = {"torch", "tensordict", "torchrl"}


def _core_requirements(wheel: Path) -> list[Requirement]:
    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        text = zf.read(meta).decode()
    reqs = [Requirement(line.split(":", 1)[1].strip()) for line in text.splitlines()
            if line.startswith("Requires-Dist:")]  # fmt: skip
    return [r for r in reqs if r.marker is None or r.marker.evaluate({"extra": ""})]


def _closure(reqs: list[Requirement]) -> set[str]:
    """Names of the installed distributions ``reqs`` need, recursively."""
    seen: set[str] = set()
    todo = list(reqs)
    while todo:
        req = todo.pop()
        name = req.name.lower().replace("_", "-")
        if name in seen:
            continue
        seen.add(name)
        for line in importlib.metadata.requires(req.name) or []:
            sub = Requirement(line)
            if sub.marker is None or sub.marker.evaluate({"extra": ""}):
                todo.append(sub)
    return seen


def _link_distributions(names: set[str], into: Path) -> None:
    """Symlink the top-level files of each distribution (and its metadata) into ``into``."""
    into.mkdir()
    for name in names:
        dist = importlib.metadata.distribution(name)
        for file in dist.files or []:
            top = file.parts[0]
            source = Path(dist.locate_file(top))
            target = into / top
            if top.endswith(".pth") or target.exists() or not source.exists():
                continue
            if source.parent.name in ("bin", "Scripts") or ".." in file.parts:
                continue
            target.symlink_to(source)


@pytest.fixture(scope="module")
def harness_env(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("torchfree")
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(
        ROOT / "lib", src / "lib", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
    )
    wheels = tmp / "wheels"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "--no-index", "-q", "-w", str(wheels), str(src)],
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert build.returncode == 0, build.stderr[-3000:]
    (wheel,) = wheels.glob("rlpace-*.whl")
    core = _core_requirements(wheel)
    assert not {r.name for r in core} & RL_ONLY, f"core requirements pull torch: {core}"

    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    install = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
         "--no-index", "-q", str(wheel)],
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert install.returncode == 0, install.stderr[-3000:]
    deps = tmp / "deps"
    names = _closure(core)
    assert not names & RL_ONLY, f"the harness's dependencies pull torch: {sorted(names)}"
    _link_distributions(names, deps)
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    Path(site, "harness_deps.pth").write_text(str(deps) + "\n")
    return venv


def _run(venv: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(
        [str(venv / "bin" / "python"), *args],
        capture_output=True, text=True, timeout=120, env=env, cwd=cwd or venv,
    )  # fmt: skip


def test_torch_is_not_installed_and_the_harness_imports_without_it(harness_env):
    probe = _run(
        harness_env,
        "-c",
        "import importlib.util, sys, rlpace.bench.render, rlpace.bench.compare, "
        "rlpace.bench.cli, rlpace.bench.github;"
        "print(rlpace.bench.render.__file__);"
        "print(sorted(m for m in ('torch', 'tensordict', 'torchrl') "
        "if importlib.util.find_spec(m) or m in sys.modules))",
    )
    assert probe.returncode == 0, probe.stderr
    where, missing = probe.stdout.splitlines()
    assert str(harness_env) in where  # the wheel's copy, not the source tree
    assert missing == "[]"


def test_show_compare_and_json_work_without_torch(harness_env, tmp_path):
    head, base = FIXTURES / "pb5_head.json", FIXTURES / "pb5_base.json"
    show = _run(harness_env, "-m", "rlpace.bench", "show", str(head))
    assert show.returncode == 0, show.stderr
    assert "12 benchmarks" in show.stdout
    out = tmp_path / "cmp.json"
    compare = _run(
        harness_env, "-m", "rlpace.bench", "compare", "--head", str(head), "--base",
        str(base), "--json", str(out), "--fail-on-regression",
    )  # fmt: skip
    assert compare.returncode == 1, compare.stderr  # one regression, one removed
    assert compare.stdout.startswith("<!-- rlpace-bench-report -->")
    assert json.loads(out.read_text())["counts"]["worsened"] == 1
    seed = _run(
        harness_env, "-m", "rlpace.bench", "compare", "--head", str(head), "--style", "seed"
    )
    assert seed.returncode == 0 and "Benchmark results" in seed.stdout


def test_post_and_history_answer_in_one_line_without_torch(harness_env, tmp_path):
    report = tmp_path / "cpu.md"
    report.write_text("<!-- rlpace-bench-report -->\nhello\n")
    post = _run(
        harness_env, "-m", "rlpace.bench", "post", "--repo", "o/r", "--pr", "1",
        "--report", str(report),
    )  # fmt: skip
    # no token here: a clear one-line refusal, not an ImportError
    assert post.returncode in (1, 2), post.stderr
    assert "Traceback" not in post.stderr and "GITHUB_TOKEN" in post.stderr
    history = _run(harness_env, "-m", "rlpace.bench", "history", "--results", str(tmp_path))
    assert history.returncode == 2
    assert "Traceback" not in history.stderr
    assert "rlpace[bench]" in history.stderr  # asv is the bench extra's
