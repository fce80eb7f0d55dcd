"""``make asv`` end to end on a tiny throwaway git repository, then ``rlpace-bench history``.

The repository has its own small asv.conf.json and one benchmark; its third of four
commits makes the benchmarked function ten times slower. ``make asv`` (run with this
interpreter instead of .venv) must build every commit in a fresh virtualenv, run,
continuous-compare the last two commits, compare, publish HTML, and the history step
must name the third commit as the first of a regression and write its plot.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from tests.bench.fixtures.git_repo import git

from rlpace.bench.history import detect_step_changes, load_asv_series

ROOT = Path(__file__).resolve().parents[2]

PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "tinypkg"
version = "0.0.1"
"""

ASV_CONF = {
    "version": 1,
    "project": "tinypkg",
    "project_url": "https://example.invalid/tinypkg",
    "repo": ".",
    "branches": ["HEAD"],
    "dvcs": "git",
    "environment_type": "virtualenv",
    "pythons": [f"{sys.version_info.major}.{sys.version_info.minor}"],
    "matrix": {"env_nobuild": {"OMP_NUM_THREADS": "1"}},
    "build_command": [
        "python -m pip wheel --no-deps --no-build-isolation --no-index -w {build_cache_dir} {build_dir}"
    ],
    "install_command": [
        "in-dir={env_dir} python -m pip install --no-deps --force-reinstall {wheel_file}"
    ],
    "benchmark_dir": "benchmarks",
    "env_dir": ".asv/env",
    "results_dir": "results",
    "html_dir": "html",
    "build_cache_size": 8,
}

BENCH = """\
import time

import tinypkg


class Work:
    # CPU time, not wall time: other processes on shared cores must not fake a step
    timer = time.process_time
    params = [[20000]]
    param_names = ["n"]
    number = 1
    repeat = (3, 5, 0.2)
    rounds = 1
    warmup_time = 0.0

    def time_work(self, n):
        tinypkg.work(n)
"""


def _module(loops: int, note: str) -> str:
    return textwrap.dedent(
        f'''\
        """A function whose cost changes across commits ({note})."""


        def work(n):
            total = 0
            for _ in range({loops}):
                total += sum(range(n))
            return total
        '''
    )


@pytest.fixture
def tiny_repo(tmp_path):
    repo = tmp_path / "tiny"
    (repo / "tinypkg").mkdir(parents=True)
    (repo / "benchmarks").mkdir()
    (repo / "pyproject.toml").write_text(PYPROJECT)
    (repo / "asv.conf.json").write_text(json.dumps(ASV_CONF, indent=2))
    (repo / "benchmarks" / "__init__.py").write_text("")
    (repo / "benchmarks" / "bench_tiny.py").write_text(BENCH)
    (repo / ".gitignore").write_text(".asv/\nresults/\nhtml/\n")
    git(repo, "init", "-q", "-b", "main")
    commits = []
    for i, loops in enumerate([1, 1, 30, 30]):
        (repo / "tinypkg" / "__init__.py").write_text(_module(loops, f"commit {i}"))
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", f"commit {i}", date=f"2026-01-0{i + 1}T12:00:00")
        commits.append(git(repo, "rev-parse", "HEAD"))
    return repo, commits


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_make_asv_runs_commits_publishes_and_history_names_the_step(tiny_repo, tmp_path):
    if shutil.which("make") is None or shutil.which("git") is None:
        pytest.skip("needs make and git")
    repo, commits = tiny_repo
    home = tmp_path / "home"
    home.mkdir()
    fake_venv = tmp_path / "venv"  # the Makefile's stamp, so make does not build .venv
    fake_venv.mkdir()
    (fake_venv / ".rlpace-installed").touch()
    env = {
        **os.environ,
        "HOME": str(home),  # asv machine --yes writes ~/.asv-machine.json
        "XDG_CONFIG_HOME": os.environ.get("XDG_CONFIG_HOME", str(Path.home() / ".config")),
    }
    history_dir = tmp_path / "history"
    out = subprocess.run(
        [
            "make",
            "--no-print-directory",
            "-C",
            str(ROOT),
            "asv",
            f"VENV={fake_venv}",
            f"PY={sys.executable}",
            f"ASV_CONF={repo / 'asv.conf.json'}",
            "ASV_BENCH=.",
            f"ASV_HISTORY={history_dir}",
            # the full range is one variable away (the default measures base and head)
            "ASV_RANGE=HEAD~3..HEAD",
            # two engineers' worth of noise on shared cores: only a 30x step counts
            "ASV_FACTOR=5",
            "ASV_STEP=2",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=230,
    )
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    # asv's machine questions stay out of the log
    assert "ask you some questions" not in out.stdout + out.stderr

    # asv run HEAD~3..HEAD stored one result per commit of the range (the last three),
    # in the repository's results dir
    series = load_asv_series(repo / "results", commit_order=commits)
    (work,) = [s for s in series if s.benchmark == "bench_tiny.Work.time_work(20000)"]
    shown = out.stdout[-3000:]
    assert work.commits == tuple(commits[1:]), shown
    assert all(v > 0 for v in work.values), (work.values, shown)
    # asv publish wrote the HTML site
    assert (repo / "html" / "index.html").is_file()
    # history (the last step of make asv) named the third commit and drew the plot
    changes = detect_step_changes(work, threshold=2)
    assert len(changes) == 1, (work.values, shown)
    assert changes[0].first_commit == commits[2] and changes[0].kind == "regression"
    assert f"first commit {commits[2]}" in out.stdout, shown
    plots = list(history_dir.glob("*.png"))
    assert len(plots) == 1 and plots[0].stat().st_size > 0
