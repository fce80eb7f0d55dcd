"""``rlpace-bench aa`` on a tiny suite: figures computed from real runs."""

from __future__ import annotations

import json
import math
import statistics
import subprocess
from pathlib import Path

import pytest

from rlpace.bench.calibration import (
    Calibration,
    CalibrationConfig,
    format_calibration,
    noise_gate,
    read_calibration,
)
from rlpace.bench.cli import main as cli_main
from rlpace.bench.compare import compare_runs
from rlpace.bench.errors import BenchInputError
from rlpace.bench.results import load_results, merge_runs

SUITE_PLUGIN = Path(__file__).resolve().parents[1] / "benchmarks" / "conftest.py"
CASES = """from rlpace.bench.suite import Timed, case

DATA = list(range(2000))


@case()
def test_alpha():
    return Timed(lambda: sum(DATA), items=len(DATA), unit="numbers")


@case()
def test_beta():
    return Timed(lambda: sum(DATA), items=len(DATA), unit="numbers")
"""


@pytest.fixture
def tiny_suite(tmp_path: Path) -> Path:
    repo = tmp_path / "tiny"
    suite = repo / "tests" / "benchmarks"
    suite.mkdir(parents=True)
    (repo / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\naddopts = "--import-mode=importlib"\n'
    )
    (suite / "conftest.py").write_text(SUITE_PLUGIN.read_text())
    (suite / "test_tiny.py").write_text(CASES)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    return repo


def test_noise_gate_is_bonferroni_wide_and_never_below_what_was_seen():
    gate, spread, mdc = noise_gate([0.5, -0.5, 0.4, -0.4, 3.0], n_benchmarks=20)
    assert gate >= 3.0  # the largest A/A change seen
    assert math.isclose(spread, statistics.stdev([0.5, -0.5, 0.4, -0.4, 3.0]))
    assert mdc > max(gate, 5.0)
    wide, _, _ = noise_gate([1.0, -1.0, 0.5, -0.5], n_benchmarks=100)
    narrow, _, _ = noise_gate([1.0, -1.0, 0.5, -0.5], n_benchmarks=1)
    assert wide > narrow
    assert all(math.isnan(x) for x in noise_gate([1.0], n_benchmarks=1))


def test_config_rejects_a_pool_smaller_than_one_comparison():
    with pytest.raises(BenchInputError, match="--pool: expected at least 2 x repeats = 6"):
        CalibrationConfig(repeats=3, pool=4)
    with pytest.raises(BenchInputError, match="PATTERN=FRACTION"):
        CalibrationConfig(inject="test_x")


def test_aa_on_a_tiny_suite(tiny_suite, monkeypatch, capsys):
    monkeypatch.chdir(tiny_suite)
    args = ["aa", "--runs", "3", "--repeats", "1", "--pool", "3", "--max-time", "0.05"]
    args += ["--inject", "test_beta=1.0"]
    assert cli_main(args) == 0
    printed = capsys.readouterr().out
    assert "A/A calibration, cpu set: 3 comparisons of 1 runs per side (pool of 3 runs)" in printed

    cal = read_calibration(tiny_suite / "reports" / "aa" / "cpu.json")
    assert isinstance(cal, Calibration) and (cal.runs, cal.repeats, cal.pool) == (3, 1, 3)
    assert 0.0 <= cal.false_alarm_rate <= 1.0
    runs_dir = Path(cal.runs_dir)
    assert sorted(p.name for p in runs_dir.glob("*.json")) == [
        "clean-0.json", "clean-1.json", "clean-2.json",
        "slow-0.json", "slow-1.json", "slow-2.json",
    ]  # fmt: skip
    by_name = {b.fullname.rsplit("::", 1)[-1]: b for b in cal.benchmarks}
    assert set(by_name) == {"test_alpha", "test_beta"}

    # the figures are the comparator's verdicts on the real pool files
    (a, b), *_ = cal.draws
    side_a = merge_runs([load_results(runs_dir / f"clean-{i}.json") for i in a])
    side_b = merge_runs([load_results(runs_dir / f"clean-{i}.json") for i in b])
    redone = {r.name: r.median_change_pct for r in compare_runs(side_b, side_a).rows}
    for name, bench in by_name.items():
        assert bench.comparisons == 3 and len(bench.changes_pct) == 3, md_table(cal)
        assert math.isclose(bench.changes_pct[0], redone[name], abs_tol=1e-3)
        assert bench.gate_pct >= max(abs(c) for c in bench.changes_pct) - 1e-3  # stored rounded
        assert bench.mdc_pct > bench.gate_pct
        assert 0 < bench.noise_fraction <= 1

    # the injected 100% slowdown of test_beta is seen; test_alpha was not slowed
    assert by_name["test_beta"].injected == 1.0 and by_name["test_alpha"].injected == 0.0
    assert by_name["test_beta"].detected_raw == 1.0, md_table(cal)
    slowed = json.loads((runs_dir / "slow-0.json").read_text())["benchmarks"]
    assert {b["name"]: b["extra_info"].get("injected_slowdown") for b in slowed} == {
        "test_alpha": None,
        "test_beta": 1.0,
    }
    md = (tiny_suite / "reports" / "aa" / "cpu.md").read_text()
    assert md == format_calibration(cal) and "`test_beta`" in md
    assert 0.0 <= cal.bare_threshold_rate <= 1.0 and 0.0 <= cal.bare_threshold_share <= 1.0

    # the figures can be recomputed from the same files without running anything again
    before = {p: p.stat().st_mtime_ns for p in runs_dir.glob("*.json")}
    assert cli_main([*args, "--reuse-runs"]) == 0
    again = read_calibration(tiny_suite / "reports" / "aa" / "cpu.json")
    assert [b.changes_pct for b in again.benchmarks] == [b.changes_pct for b in cal.benchmarks]
    assert {p: p.stat().st_mtime_ns for p in runs_dir.glob("*.json")} == before


def md_table(cal):
    """The calibration's own table, shown when an assertion about it fails."""
    return "\n" + format_calibration(cal)


def test_reading_a_foreign_file_says_what_to_do(tmp_path):
    path = tmp_path / "x.json"
    path.write_text(json.dumps({"format": "rlpace-comparison", "version": 1}))
    with pytest.raises(BenchInputError, match="expected format 'rlpace-bench-calibration'"):
        read_calibration(path)
    path.write_text(json.dumps({"format": "rlpace-bench-calibration", "version": 99}))
    with pytest.raises(BenchInputError, match="rerun `rlpace-bench aa`"):
        read_calibration(path)
