"""The worker processes' Python calls: counted from the measuring process, judged by the
functions called equally often in every call.

The measuring runs in a fresh process each (``fixtures/worker_probe.py``): its fork
hooks stay out of this session. The probe's worker steps an episode whose length cycles,
so its total calls move from call to call as a collector's do.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from tests.bench.fixtures.forked_case import FORKED_CASE
from tests.bench.fixtures.worker_probe import run as run_probe

from rlpace.bench.comparison import BenchmarkChange, Comparison, Verdict
from rlpace.bench.render import render_report
from rlpace.bench.work_counts.verdict import (
    ANCHORS_MIN,
    RATED_MIN_CALLS,
    WORKERS_PREFIX,
    compare_work_counts,
    worker_names_moved,
)
from rlpace.bench.work_counts.workers import steady_names

PROBE = Path(__file__).parent / "fixtures" / "worker_probe.py"
CHECK = "fixtures/worker_probe.py:_check"


def _probe(variant: str, phase: int = 0) -> dict:
    return run_probe(variant, phase)


@pytest.fixture(scope="module")
def plain() -> dict:
    return _probe("plain", 0)


def test_the_same_worker_code_counts_the_same_whatever_the_phase(plain):
    again = _probe("plain", 5)  # five calls later: other episodes end in each call
    assert plain["workers"] == again["workers"] == 1
    assert len(plain["worker_py_calls"]) == 8
    assert len(set(plain["worker_py_calls"])) > 1  # the total follows the episodes
    assert plain["worker_names"]["steady"] == again["worker_names"]["steady"]
    assert "fixtures/worker_probe.py:_reset" in plain["worker_names"]["unsteady"]
    assert compare_work_counts("t", again, plain).verdict == "same"


def test_a_check_the_worker_runs_is_flagged_and_named(plain):
    head = _probe("check", 3)
    change = compare_work_counts("t", head, plain)
    assert change.verdict == "regression"
    assert change.moved == ("worker_py_calls",)
    moved = {name: (base, now) for name, base, now in change.names}
    assert moved[WORKERS_PREFIX + CHECK] == (0.0, 16.0)  # once a step, 16 steps a call
    assert moved[WORKERS_PREFIX + "<built-in method builtins.abs>"] == (0.0, 16.0)
    assert change.summary().endswith(f"; the workers call {CHECK} 0 → 16 times a call")
    assert compare_work_counts("t", plain, head).verdict == "improvement"


def test_a_worker_polling_while_it_waits_is_not_steady_so_cannot_flag():
    """Calls that follow the clock differ between windows, so they are never taken as
    the code's (the counter also idles longer before every other mark, so they differ
    even where a wait's rounds would line up with the windows)."""
    one, other = _probe("poll", 0), _probe("poll", 3)
    assert "fixtures/worker_probe.py:_idle" in one["worker_names"]["unsteady"]
    assert "fixtures/worker_probe.py:_idle" not in one["worker_names"]["steady"]
    assert compare_work_counts("t", other, one).verdict == "same"
    assert one["worker_names"]["steady"] == other["worker_names"]["steady"]


def test_a_worker_that_cannot_be_counted_is_said_so_and_the_rest_stands():
    counts = _probe("handler")
    assert counts["workers"].startswith("not counted: 1 of 1 worker processes did not start")
    assert "SIGUSR2" in counts["workers"]
    assert "worker_py_calls" not in counts and "worker_names" not in counts
    assert len(counts["py_calls"]) == 8  # the calling thread's counts are kept


def test_workers_that_never_go_quiet_are_said_so_and_the_rest_stands():
    counts = _probe("runahead")
    assert counts["workers"].startswith(
        "not counted: the workers did not go quiet within 2 s between calls"
    )
    assert "worker_py_calls" not in counts and len(counts["py_calls"]) == 8


def test_a_worker_killed_mid_measurement_is_said_so_at_once_and_the_rest_stands():
    # told from its zombie (unreaped, as a collector that has not noticed leaves it) at
    # the next mark, not taken for a live worker that never answers
    counts = _probe("killed", 1)
    pid = counts["workers"].removeprefix("not counted: worker process ").split()[0]
    assert counts["workers"] == (
        f"not counted: worker process {pid} ended during the measurement (killed, or it "
        "crashed): the calls of the others alone are not the call's work"
    )
    assert "worker_py_calls" not in counts and "worker_names" not in counts
    assert len(counts["py_calls"]) == 8  # the calling thread's counts are kept


def test_a_child_that_ran_exec_is_left_alone():
    counts = _probe("exec")
    assert counts["exec_child_alive"] is True  # the signal would have ended it
    assert counts["workers"] == 1


def test_steady_names_keeps_the_most_called_when_there_are_too_many():
    windows = [{"a": 3, "b": 1, "c": 2}, {"a": 3, "b": 1, "c": 5}]
    assert steady_names(windows, limit=1) == {
        "steady": {"a": 3},
        "unsteady": [],
        "complete": False,
        "rated": {},
    }
    assert steady_names([]) == {"steady": {}, "unsteady": [], "complete": True, "rated": {}}


def test_rated_names_are_those_called_in_proportion_to_the_work():
    # steps per call follow the clock; a reset follows the episodes; one wait helper
    # is called once a call whatever the steps
    steps = [250, 262, 255, 248]
    windows = [
        {"step": n, "obs": 2 * n, "reset": r, "wait": 1}
        for n, r in zip(steps, [3, 9, 1, 6], strict=True)
    ]
    names = steady_names(windows)
    assert names["steady"] == {"wait": 1}
    assert names["rated"] == {"step": 253.75, "obs": 507.5}


def _rated_side(rated: dict, steady=None, unsteady=(), complete=True) -> dict:
    seen = sorted(set(rated) | set(unsteady))
    return {
        "worker_names": {
            "steady": dict(steady or {}),
            "unsteady": seen,
            "complete": complete,
            "rated": rated,
        }
    }


STEPPED = {f"per_step{i}": 256.0 for i in range(ANCHORS_MIN)}


def test_where_nothing_is_steady_a_function_new_to_the_rated_ones_is_judged():
    faster = {name: 300.0 for name in STEPPED}  # another pace: the clock's
    head = _rated_side({**faster, "isfinite": 300.0})
    assert worker_names_moved(head, _rated_side(STEPPED)) == (("isfinite", 0.0, 256.0),)
    assert worker_names_moved(_rated_side(STEPPED), head) == (("isfinite", 300.0, 0.0),)
    assert worker_names_moved(_rated_side(faster), _rated_side(STEPPED)) == ()
    # not where the base may have called it (it does not list every function), nor
    # where it called it out of proportion, nor under RATED_MIN_CALLS a call
    assert worker_names_moved(head, _rated_side(STEPPED, complete=False)) == ()
    assert worker_names_moved(head, _rated_side(STEPPED, unsteady=["isfinite"])) == ()
    rare = _rated_side({**faster, "wait_for_room": (RATED_MIN_CALLS - 1) * 300 / 256})
    assert worker_names_moved(rare, _rated_side(STEPPED)) == ()


def test_rated_functions_called_more_or_too_few_agreeing_are_not_judged():
    # an A/A pair of the threaded sleep-bound collector: its server's rounds took 1.55
    # times the share of the calls in one process, the steps the same
    rounds = {f"per_round{i}": 165.0 for i in range(3)}
    base = _rated_side({**STEPPED, **rounds})
    head = _rated_side({**STEPPED, **{name: 256.0 for name in rounds}})
    assert worker_names_moved(head, base) == ()
    few = dict(list(STEPPED.items())[: ANCHORS_MIN - 1])
    assert worker_names_moved(_rated_side({**few, "isfinite": 256.0}), _rated_side(few)) == ()
    # half the functions at another pace: no pace agreed on, nothing judged
    split = {**STEPPED, **{f"other{i}": 100.0 for i in range(ANCHORS_MIN)}}
    moved = {**STEPPED, **{f"other{i}": 200.0 for i in range(ANCHORS_MIN)}, "isfinite": 256.0}
    assert worker_names_moved(_rated_side(moved), _rated_side(split)) == ()


def test_the_rated_level_is_left_alone_where_enough_is_steady():
    steady = {f"anchor{i}": 16 for i in range(ANCHORS_MIN)}
    head = _rated_side({**STEPPED, "isfinite": 256.0}, steady=steady)
    base = _rated_side(STEPPED, steady=steady)
    assert worker_names_moved(head, base) == ()  # the steady calls judged: none moved


def _side(steady: dict, unsteady=(), complete=True) -> dict:
    return {"worker_names": {"steady": steady, "unsteady": list(unsteady), "complete": complete}}


ANCHORS = {f"anchor{i}": 16 for i in range(ANCHORS_MIN)}


def test_a_function_missing_from_a_side_counts_zero_only_where_that_side_lists_all():
    head = _side({**ANCHORS, "step": 16, "check": 16})
    base = {**ANCHORS, "step": 16}
    assert worker_names_moved(head, _side(base)) == (("check", 0.0, 16.0),)
    assert worker_names_moved(head, _side(base, complete=False)) == ()
    assert worker_names_moved(head, _side(base, unsteady=["check"])) == ()
    assert worker_names_moved(_side({**ANCHORS, "step": 17}), _side(base)) == (
        ("step", 16.0, 17.0),
    )


def test_functions_steady_by_chance_where_the_workers_follow_the_clock_are_not_judged():
    # an A/A run of the threaded sleep-bound collector: one function steady on each side,
    # a wait helper called 7 times a call in one process and 8 in the other
    wait = "rlpace/collectors/_async_batched.py:FrameInbox.wait_for_room"
    assert worker_names_moved(_side({wait: 8}), _side({wait: 7})) == ()
    few = dict(list(ANCHORS.items())[: ANCHORS_MIN - 1])
    assert worker_names_moved(_side({**few, wait: 8}), _side({**few, wait: 7})) == ()
    assert worker_names_moved(_side({**ANCHORS, wait: 8}), _side({**ANCHORS, wait: 7})) == (
        (wait, 7.0, 8.0),
    )


def test_a_round_function_steady_by_chance_at_nearby_counts_is_not_judged():
    # an A/A pair of the threaded CartPole collector: the server's round function steady
    # in both processes, 33 and 32 times a call (batches formed as the threads met)
    serve = "rlpace/collectors/_server.py:InferenceServer.serve_once"
    got = {**ANCHORS, serve: 32, "<method 'get' of 'SimpleQueue' objects>": 288}
    was = {**ANCHORS, serve: 33, "<method 'get' of 'SimpleQueue' objects>": 289}
    assert worker_names_moved(_side(got), _side(was)) == ()
    assert worker_names_moved(_side({**got, serve: 64}), _side(was)) == ((serve, 33.0, 64.0),)


@pytest.mark.parametrize(
    "bad",
    [
        {"worker_names": {"steady": {"a": -1}, "unsteady": [], "complete": True}},
        {"worker_names": {"steady": {"a": True}, "unsteady": [], "complete": True}},
        {"worker_names": {"steady": {}, "unsteady": "a", "complete": True}},
        {"worker_names": {"steady": {}, "unsteady": [], "complete": "yes"}},
        {"worker_names": ["a"]},
        None,
    ],
)
def test_worker_names_another_tool_wrote_are_not_judged(bad):
    assert worker_names_moved(_side({"a": 1}), bad) == ()
    assert worker_names_moved(bad, _side({"a": 1})) == ()


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -1.0, 0, True, "256"])
def test_rated_calls_another_tool_wrote_are_not_judged(value):
    head = _rated_side({**STEPPED, "isfinite": 256.0})
    assert worker_names_moved(head, _rated_side(STEPPED)) == (("isfinite", 0.0, 256.0),)
    bad = _rated_side({**STEPPED, "per_step0": value})
    assert worker_names_moved(head, bad) == ()
    assert worker_names_moved(bad, head) == ()
    listed = _rated_side(STEPPED)
    listed["worker_names"]["rated"] = list(STEPPED)
    assert worker_names_moved(head, listed) == ()


def test_the_comment_shows_the_workers_calls_and_names_the_function(plain):
    head = _probe("check", 1)
    change = compare_work_counts("t", head, plain)
    row = BenchmarkChange(
        "tests/benchmarks/test_c.py::test_collector_sync[rlpace-x]",
        "test_collector_sync[rlpace-x]",
        Verdict.WORSENED,
        median_change_pct=-1.0,
        work_verdict=change.verdict,
        work_base=dict(change.base),
        work_head=dict(change.head),
        work_moved=change.moved,
        work_names=change.names,
        work_note="work-count regression",
    )
    text = render_report({"cpu": Comparison(rows=(row,), threshold=5.0)}, title="PR")
    assert "| Workers' Python calls |" in text
    base, now = change.base["worker_py_calls"], change.head["worker_py_calls"]
    assert f"**{base:g} → {now:g}** |" in text
    assert f"| `{WORKERS_PREFIX}{CHECK}` | 0 | 16 |" in text


def test_the_sensitivity_line_counts_rows_whose_workers_were_counted_as_not_handed_off():
    from rlpace.bench.render_notes import sensitivity_text
    from rlpace.bench.sensitivity import sensitivity

    thread = {"kernels": 0, "syncs": 0, "copies": 0, "ops": 0, "py_calls": 40}
    counted = {**thread, "worker_py_calls": 20872}
    rows = tuple(
        BenchmarkChange(f"t::{name}", name, Verdict.UNCHANGED, median_change_pct=1.0,
                        mdc_pct=9.0, work_verdict="same", work_base=work, work_head=work)
        for name, work in (("sync", counted), ("threads", thread))
    )  # fmt: skip
    seen = sensitivity(Comparison(rows=rows))
    assert (seen.work_counted, seen.work_workers, seen.work_handoff) == (2, 1, 1)
    assert sensitivity_text(Comparison(rows=rows)).endswith(
        "whatever its size in time; 1 of them also counts the Python calls of their worker "
        "processes and threads; in 1 of them that thread dispatches no operator: it hands the "
        "work to other threads or processes, whose work is left to the clock."
    )


def _run_suite(tmp_path, **env) -> subprocess.CompletedProcess:
    import os
    import shutil

    bench = tmp_path / "repo" / "tests" / "benchmarks"
    bench.mkdir(parents=True)
    shutil.copy(Path(__file__).parents[1] / "benchmarks" / "conftest.py", bench / "conftest.py")
    (bench / "test_forked.py").write_text(FORKED_CASE)
    lib = str(Path(__file__).parents[2] / "lib")
    return subprocess.run(
        [sys.executable, "-m", "pytest", str(bench), "-q", "-p", "no:cacheprovider",
         "--benchmark-max-time=0.02", f"--benchmark-json={tmp_path / 'out.json'}"],
        env={**os.environ, "PYTHONPATH": lib, **env}, capture_output=True, text=True,
        cwd=tmp_path / "repo", timeout=300, check=False,
    )  # fmt: skip


def test_the_suite_plugin_counts_a_cases_forked_worker_unless_told_not_to(tmp_path):
    done = _run_suite(tmp_path / "on")
    assert done.returncode == 0, done.stdout + done.stderr
    (result,) = json.loads((tmp_path / "on" / "out.json").read_text())["benchmarks"]
    counts = result["extra_info"]["work_counts"]
    assert counts["workers"] == 1
    # sorted, and its key 8 times, in the worker (its pipe's are the standard library's)
    assert counts["worker_py_calls"] == [9] * counts["calls"]
    assert counts["worker_names"]["steady"] == {
        "<built-in method builtins.sorted>": 1,
        "benchmarks/test_forked.py:_neg": 8,
    }
    off = _run_suite(tmp_path / "off", RLPACE_BENCH_WORKER_COUNTS="0")
    assert off.returncode == 0, off.stdout + off.stderr
    (result,) = json.loads((tmp_path / "off" / "out.json").read_text())["benchmarks"]
    assert "workers" not in result["extra_info"]["work_counts"]
    assert "py_calls" in result["extra_info"]["work_counts"]  # the rest is counted
    bad = _run_suite(tmp_path / "bad", RLPACE_BENCH_WORKER_COUNTS="maybe")
    said = bad.stdout + bad.stderr
    assert bad.returncode == 4, said
    assert "RLPACE_BENCH_WORKER_COUNTS: expected 1 or 0, got 'maybe'" in said
    assert "Traceback" not in said


def test_a_process_that_took_an_ended_workers_pid_is_not_signalled():
    # the table still names an ended worker's pid until a fork takes its slot; a process
    # the system gave that pid since has no handler, and the signal would end it
    from rlpace.bench.work_counts import workers

    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        workers._poke(stranger.pid)
        with pytest.raises(subprocess.TimeoutExpired):
            stranger.wait(0.5)
    finally:
        stranger.kill()
        stranger.wait()
