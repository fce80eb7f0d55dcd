"""``rlpace-bench calibrate`` on a tiny throwaway repository: A/A ``pr`` runs, then the
count gates and the duet pool from them, as a CI runner would make its own."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from tests.bench.fixtures.git_repo import git

from rlpace.bench.calibration import DuetCalibration
from rlpace.bench.cli import main as cli_main
from rlpace.bench.counts import toolchain
from rlpace.bench.counts.gates import read_gates

SUITE_PLUGIN = Path(__file__).resolve().parents[1] / "benchmarks" / "conftest.py"
CASES = """import time

from rlpace.bench.suite import Timed, case

DATA = list(range(2000))


@case(timer="cpu")
def test_counted():
    return Timed(lambda: sorted(DATA, key=lambda x: -x), items=len(DATA), unit="numbers")


@case()
def test_waits():
    return lambda: time.sleep(0.002)
"""

needs_valgrind = pytest.mark.skipif(
    shutil.which("valgrind") is None or shutil.which("gcc") is None,
    reason="valgrind or gcc is not installed: calibrate needs the count tier",
)


@pytest.fixture
def repo(tmp_path: Path, monkeypatch) -> Path:
    """One commit: a case the count tier claims and one that waits (timed as duets)."""
    root = tmp_path / "tiny"
    suite = root / "tests" / "benchmarks"
    suite.mkdir(parents=True)
    (root / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\naddopts = "--import-mode=importlib"\n'
    )
    (root / ".gitignore").write_text("build/\nreports/\n")
    (suite / "conftest.py").write_text(SUITE_PLUGIN.read_text())
    (suite / "test_tiny.py").write_text(CASES)
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "one commit")
    monkeypatch.chdir(root)
    return root


@needs_valgrind
def test_calibrate_makes_count_gates_and_a_duet_pool_from_aa_pr_runs(repo, capsys):
    # what an earlier calibrate left (more runs than this one makes) and an interrupted
    # one's duets in the shared cache: neither may be pooled with this calibrate's runs
    work = repo / "build" / "rlpace-bench" / "calibrate"
    (work / "run-7" / "runs" / "cpu").mkdir(parents=True)
    stale = work / "cache" / "runs" / "cpu-extend-9"
    stale.mkdir(parents=True)
    (stale / "head-0.json").write_text("{}")
    code = cli_main(["calibrate", "--runs", "2", "--max-time", "0.05"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    out = repo / "reports" / "aa"
    # the count gates: every count file of both runs (two a run), the counted case only
    gates, *_ = read_gates(out / "count-gates.json")
    assert list(gates) == ["test_counted"]
    assert gates["test_counted"].runs == 4
    # the duet pool: the waiting case's pairs, 4 duets a run (2 repeats, as pr judges)
    duets = DuetCalibration.from_dict(json.loads((out / "cpu-duets.json").read_text()))
    assert set(duets.spreads) == {"tests/benchmarks/test_tiny.py::test_waits"}
    assert duets.pairs == 8 and duets.held_out_runs == 2
    assert "held out, each of the 2 A/A pr runs judged as pr judged it" in printed
    assert "check them in:" in printed
    # each run's raw files kept apart, the earlier ones gone
    assert sorted(p.name for p in work.glob("run-*")) == ["run-1", "run-2"]
    for run in ("run-1", "run-2"):
        assert (work / run / "counts" / "head.json").is_file()
        assert (work / run / "runs" / "cpu" / "head-0.json").is_file()
        assert (work / run / "report" / "cpu.json").is_file()
        assert not (work / run / "runs" / "cpu-extend-9").exists()


def test_calibrate_refuses_a_dirty_checkout_before_running_anything(repo, capsys):
    (repo / "tests" / "benchmarks" / "test_tiny.py").write_text(CASES + "\n# edited\n")
    assert cli_main(["calibrate", "--runs", "2"]) == 2
    err = capsys.readouterr().err
    assert "expected a clean checkout (an A/A run compares HEAD with itself)" in err
    assert "tests/benchmarks/test_tiny.py" in err and "Fix: commit or stash them" in err
    assert not (repo / "build").exists() and not (repo / "reports").exists()


def test_calibrate_without_valgrind_says_so_and_runs_nothing(repo, capsys, monkeypatch):
    real_which = shutil.which
    monkeypatch.setattr(
        toolchain.shutil, "which", lambda name: None if name == "valgrind" else real_which(name)
    )
    assert cli_main(["calibrate", "--runs", "2"]) == 3
    err = capsys.readouterr().err
    assert "valgrind is not installed" in err and "nothing was run" in err
    assert not (repo / "build").exists() and not (repo / "reports").exists()


@pytest.mark.parametrize("runs", ["0", "-1"])
def test_calibrate_refuses_fewer_than_one_run(repo, capsys, runs):
    assert cli_main(["calibrate", "--runs", runs]) == 2
    assert f"--runs: expected the number of A/A pr runs (an integer >= 1), got {runs}" in (
        capsys.readouterr().err
    )


def test_calibrate_outside_a_project_with_a_suite_says_what_it_expected(
    tmp_path, monkeypatch, capsys
):
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")
    monkeypatch.chdir(empty)
    assert cli_main(["calibrate"]) == 2
    err = capsys.readouterr().err
    assert "expected a benchmark suite in tests/benchmarks, found none" in err
    assert [p.name for p in empty.iterdir()] == [".git"]  # nothing written
