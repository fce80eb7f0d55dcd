"""The suite's passes (``RLPACE_BENCH_PASS``): which cases a run of ``pr``'s counted or
timed pass runs, on which clock, and what a suite from before passes does instead.

Real pytest runs of the suite plugin over a throwaway suite of one counted case, one
CPU-clock case declared out of the count tier and one wall-clock case.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlpace.bench.suite import PASS_ENV, PASSES

ROOT = Path(__file__).resolve().parents[2]

CASES = """
from rlpace.bench.suite import case


@case(timer="cpu")
def test_counted():
    return lambda: sum(range(100))


@case(timer="cpu", count="compiled kernels, say")
def test_declared_out():
    return lambda: max(range(100))


@case()
def test_wall():
    return lambda: min(range(100))
"""


def _suite(tmp_path: Path) -> Path:
    bench = tmp_path / "repo" / "tests" / "benchmarks"
    bench.mkdir(parents=True)
    (bench / "conftest.py").write_text((ROOT / "tests" / "benchmarks" / "conftest.py").read_text())
    (bench / "test_cases.py").write_text(CASES)
    return bench


def _run(tmp_path: Path, **variables: str) -> tuple[subprocess.CompletedProcess, dict]:
    bench = _suite(tmp_path)
    out = tmp_path / "out.json"
    env = {k: v for k, v in os.environ.items() if k not in (PASS_ENV, "RLPACE_BENCH_TIMER")}
    env.update(variables, PYTHONPATH=str(ROOT / "lib"), RLPACE_BENCH_WORK_COUNTS="0")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", str(bench), "-q", "-p", "no:cacheprovider",
         "--benchmark-max-time=0.01", f"--benchmark-json={out}"],
        env=env, capture_output=True, text=True, cwd=bench.parent.parent, check=False,
    )  # fmt: skip
    ran = {}
    if out.is_file():
        for b in json.loads(out.read_text())["benchmarks"]:
            ran[b["name"]] = (b["extra_info"]["timer"], b["extra_info"]["pass"])
    return done, ran


@pytest.mark.parametrize(
    ("variables", "expected"),
    [
        ({PASS_ENV: "counted"}, {"test_counted": ("cpu", "counted")}),
        ({PASS_ENV: "timed"},
         {"test_declared_out": ("cpu", "timed"), "test_wall": ("wall", "timed")}),
        # what `pr` sets: the pass, and beside it the clock a suite before passes follows
        ({PASS_ENV: "timed", "RLPACE_BENCH_TIMER": "wall"},
         {"test_declared_out": ("cpu", "timed"), "test_wall": ("wall", "timed")}),
        ({"RLPACE_BENCH_TIMER": "cpu"},
         {"test_counted": ("cpu", "counted"), "test_declared_out": ("cpu", "timed")}),
        ({}, {"test_counted": ("cpu", "counted"), "test_declared_out": ("cpu", "timed"),
              "test_wall": ("wall", "timed")}),
    ],
    ids=["counted", "timed", "timed-beside-wall", "clock-only", "neither"],
)  # fmt: skip
def test_a_pass_runs_its_cases_each_on_its_own_clock_and_skips_the_rest(
    tmp_path, variables, expected
):
    done, ran = _run(tmp_path, **variables)
    assert done.returncode == 0, done.stdout + done.stderr
    assert ran == expected
    skipped = 3 - len(expected)
    assert (f"{skipped} skipped" in done.stdout) is (skipped > 0), done.stdout


def test_a_malformed_pass_is_a_usage_error_naming_the_passes(tmp_path):
    done, ran = _run(tmp_path, **{PASS_ENV: "wall"})
    said = done.stdout + done.stderr
    assert done.returncode == 4 and ran == {}, said
    assert f"{PASS_ENV}: expected {' or '.join(PASSES)}, got 'wall'" in said
    assert "Traceback" not in said


def test_an_old_base_s_rows_are_kept_from_the_pass_of_their_clock(write_json):
    """A base from before passes ran its declared-out case in the CPU-clock pass (once),
    the head in the timed duets: each side's row is kept from the pass that ran it."""
    from rlpace.bench.pass_rows import side_results

    def result(name, rows):
        benchmarks = [
            {"name": n, "fullname": f"t.py::{n}", "params": {}, "extra_info": extra,
             "stats": {"data": [1.0, 1.1, 1.0]}}
            for n, extra in rows
        ]  # fmt: skip
        return write_json({"version": "5.1.0", "benchmarks": benchmarks}, name)

    # the old base: its clock pass timed every CPU-clock case, its wall pass the rest
    old_clock = result("old-clock.json", [("counted", {"timer": "cpu"}),
                                          ("declared", {"timer": "cpu"})])  # fmt: skip
    old_main = result("old-main.json", [("wall", {"timer": "wall"})])
    new_clock = result("new-clock.json", [("counted", {"timer": "cpu", "pass": "counted"})])
    new_main = result("new-main.json", [("declared", {"timer": "cpu", "pass": "timed"}),
                                        ("wall", {"timer": "wall", "pass": "timed"})])  # fmt: skip
    for main, clock in ((old_main, old_clock), (new_main, new_clock)):
        frame = side_results([main], [clock])
        assert sorted(frame["name"]) == ["counted", "declared", "wall"]
    # a suite that skips nothing ran everything in both passes: no row is kept twice
    frame = side_results([old_clock, old_main], [old_clock, old_main])
    assert sorted(frame["name"]) == ["counted", "declared", "wall"]
    # the counted pass's two duets are one measurement a side; the timed runs stay runs
    frame = side_results([new_main, new_main], [new_clock, new_clock]).set_index("name")
    assert frame.loc["counted", "run_medians"] == [1.0] and frame.loc["counted", "rounds"] == 6
    assert frame.loc["wall", "run_medians"] == [1.0, 1.0]


def test_compare_reads_pr_s_counted_pass_as_pr_does(write_json, tmp_path):
    """``rlpace-bench compare --paired`` over ``pr``'s run files (its timed duets and its
    counted pass's two duets) judges each row from as many runs as ``pr``'s judge did:
    the counted pass pooled into one, the timed duets pair by pair."""
    from rlpace.bench.commands.compare import compare_files
    from rlpace.bench.judge import Judge
    from rlpace.bench.pass_rows import side_results

    def result(name, rows):
        benchmarks = [
            {"name": n, "fullname": f"t.py::{n}", "params": {}, "extra_info": {"pass": p},
             "stats": {"data": data}}
            for n, p, data in rows
        ]  # fmt: skip
        return write_json({"version": "5.1.0", "benchmarks": benchmarks}, name)

    files = {}
    for side, slow in (("base", 1.0), ("head", 1.3)):
        files[side] = (
            [result(f"{side}-timed-{k}.json", [("wall", "timed", [slow + k / 10] * 5)])
             for k in range(2)],
            [result(f"{side}-counted-{k}.json", [("counted", "counted", [slow + k / 10] * 5)])
             for k in range(2)],
        )  # fmt: skip
    out = tmp_path / "compare.json"
    compare_files(
        head=[*files["head"][0], *files["head"][1]],
        base=[*files["base"][0], *files["base"][1]],
        paired=True,
        json_path=out,
        stdout=io.StringIO(),
    )
    said = {r["name"]: r for r in json.loads(out.read_text())["rows"]}
    judged = Judge(paired=True).judge(side_results(*files["head"]), side_results(*files["base"]))
    by_pr = {r.name: r for r in judged.rows}
    assert said["counted"]["head_runs"] == by_pr["counted"].head_runs == 1
    assert said["wall"]["head_runs"] == by_pr["wall"].head_runs == 2
    assert {n: r["verdict"] for n, r in said.items()} == {
        n: r.verdict.value for n, r in by_pr.items()
    }
