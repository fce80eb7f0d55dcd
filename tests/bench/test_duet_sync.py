"""The duet's rendezvous: both runs start timing each case together.

The protocol is checked with two :class:`DuetSync` sides in threads; the plugin and the
runner with two real pytest runs of a throwaway suite whose one side takes 3 s longer
to set up a case: with the rendezvous both time it at the same moment, without it
about 3 s apart (at least 1 s: a busy host starts one side's process up to a second or
so later than the other's, which once brought 1.5 s of setup down to 0.91 s apart).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from rlpace.bench.duet_sync import DUET_SYNC_ENV, DuetSync, Rendezvous, plugin_meets, sync_value

ROOT = Path(__file__).resolve().parents[2]


def test_both_sides_go_only_once_both_arrived(tmp_path):
    a, b = DuetSync(tmp_path, "a"), DuetSync(tmp_path, "b")
    went = {}

    def late_b():
        time.sleep(0.3)
        went["b"] = (time.monotonic(), b.arrive("case"))

    thread = threading.Thread(target=late_b)
    thread.start()
    start = time.monotonic()
    met = a.arrive("case")
    went["a"] = (time.monotonic(), met)
    thread.join()
    assert met.how == went["b"][1].how == "together"
    assert met.waited >= 0.25  # a waited for b
    assert went["a"][0] - start >= 0.25
    assert abs(went["a"][0] - went["b"][0]) < 0.1  # and both went at once


def test_a_side_past_the_case_or_finished_lets_the_other_go_at_once(tmp_path):
    a, b = DuetSync(tmp_path, "a"), DuetSync(tmp_path, "b")
    b.leave("skipped-by-b")
    assert a.arrive("skipped-by-b").how == "other past"
    b.end()
    met = a.arrive("later")
    assert met.how == "other ended" and met.waited < 0.1


@pytest.mark.parametrize("listed", [True, False], ids=["listed", "unlisted"])
def test_a_case_only_one_side_has_never_deadlocks_and_both_meet_again(tmp_path, listed):
    """Side a has a case b lacks. With their lists, a times it without waiting and b
    waits for a at the next case they share; unlisted, each side waits at a case the
    other has not reached and both go on alone, instead of waiting for the time-out."""
    a = DuetSync(tmp_path, "a", timeout=30)
    b = DuetSync(tmp_path, "b", timeout=30)
    if listed:
        a.listed(["only-in-a", "common"])
        b.listed(["common"])

    def side_a():
        time.sleep(0.1)
        return [a.arrive("only-in-a").how, time.sleep(0.3), a.arrive("common").how]

    def side_b():
        return [b.arrive("common").how]

    start = time.monotonic()
    with ThreadPoolExecutor(2) as pool:
        fa, fb = pool.submit(side_a), pool.submit(side_b)
        got_a, got_b = fa.result(timeout=10), fb.result(timeout=10)
    assert time.monotonic() - start < 5
    if listed:
        assert got_a == ["other lacks it", None, "together"]
        assert got_b == ["together"]  # b waited at "common" while a timed its own case
    else:
        assert got_a == ["orders differ", None, "together"]
        assert got_b == ["orders differ"]


def test_two_lists_in_opposite_orders_never_deadlock(tmp_path):
    a = DuetSync(tmp_path, "a", timeout=30)
    b = DuetSync(tmp_path, "b", timeout=30)
    a.listed(["x", "y"])
    b.listed(["y", "x"])
    start = time.monotonic()
    with ThreadPoolExecutor(2) as pool:
        fa = pool.submit(lambda: [a.arrive("x").how, a.arrive("y").how])
        fb = pool.submit(lambda: [b.arrive("y").how, b.arrive("x").how])
        got_a, got_b = fa.result(timeout=10), fb.result(timeout=10)
    assert time.monotonic() - start < 5
    assert "orders differ" in got_a + got_b  # one side went alone, then they met again


def test_a_twin_that_never_writes_a_line_is_waited_for_once_then_never(tmp_path):
    a = DuetSync(tmp_path, "a", absent_timeout=0.2)
    first = a.arrive("x")
    assert first.how == "other absent" and 0.2 <= first.waited < 2
    assert a.arrive("y") == Rendezvous("off", 0.0)


def test_a_twin_that_never_comes_costs_one_time_out_then_no_waits(tmp_path):
    DuetSync(tmp_path, "b").listed(["x", "y"])  # it started, then hung
    a = DuetSync(tmp_path, "a", timeout=0.2)
    first = a.arrive("x")
    assert first.how == "timed out" and 0.2 <= first.waited < 2
    again = a.arrive("y")
    assert again.how == "off" and again.waited == 0.0


@pytest.mark.parametrize(
    "value", ["a", "c:/tmp", "a:/no/such/dir/for/rlpace", ":/tmp", "b:"], ids=repr
)
def test_a_malformed_value_names_the_variable_and_the_fix(value):
    with pytest.raises(ValueError) as err:
        DuetSync.from_env(value)
    said = str(err.value)
    assert said.startswith(f"{DUET_SYNC_ENV}: expected SIDE:DIRECTORY") and repr(value) in said
    assert "unset it" in said


def test_sync_value_round_trips_a_directory_with_colons(tmp_path):
    odd = tmp_path / "a:b c"
    odd.mkdir()
    sync = DuetSync.from_env(sync_value("b", odd))
    assert sync.side == "b" and sync.directory == odd and sync.other == "a"


SLOW_SETUP = """
import json
import os
import time

from rlpace.bench.suite import Timed, case

MARKS = os.environ["RLPACE_TEST_MARKS"]


@case(params={"n": [1]})
def test_first(n):
    time.sleep(float(os.environ.get("RLPACE_TEST_SETUP_S", "0")))  # one side sets up slowly
    seen = []

    def teardown():  # when the timed rounds ended (warm-up and sizing come before the meeting)
        with open(MARKS, "w") as fh:
            json.dump(seen[-1:], fh)
    return Timed(lambda: seen.append(time.time()), teardown=teardown)


@case(params={"n": [1]})
def test_second(n):
    return lambda: n
"""


def _slow_setup_repo(path, plugin_text=None, cases=SLOW_SETUP):
    bench = path / "tests" / "benchmarks"
    bench.mkdir(parents=True)
    plugin = (ROOT / "tests" / "benchmarks" / "conftest.py").read_text()
    (bench / "conftest.py").write_text(plugin if plugin_text is None else plugin_text(plugin))
    (bench / "test_cases.py").write_text(cases)
    return path


def _slow_setup_duet(tmp_path, base_root, head_root, sync=True):
    from rlpace.bench.interleave import run_interleaved
    from rlpace.bench.runner import RunSettings

    marks = {side: tmp_path / f"{side}.marks" for side in ("base", "head")}
    environ = {
        "base": {"RLPACE_TEST_MARKS": str(marks["base"]), "RLPACE_TEST_SETUP_S": "3.0"},
        "head": {"RLPACE_TEST_MARKS": str(marks["head"])},
    }
    runs = run_interleaved(
        set_name="cpu",
        sides={
            "base": (base_root, Path(sys.executable)),
            "head": (head_root, Path(sys.executable)),
        },
        runs_dir=tmp_path / "runs",
        repeats=1,
        settings=RunSettings(max_time=0.05, wall_rounds=0),
        environ=environ,
        duet=True,
        count_work=False,
        duet_sync=sync,
    )
    first = {side: json.loads(marks[side].read_text())[0] for side in marks}
    head = json.loads(runs.head[0].read_text())
    waits = {b["name"]: b["extra_info"].get("duet_wait_s") for b in head["benchmarks"]}
    return abs(first["base"] - first["head"]), waits, head


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="a duet pins its runs to cores")
@pytest.mark.parametrize("sync", [True, False], ids=["rendezvous", "drifting"])
def test_a_duet_times_a_case_on_both_sides_at_once_despite_a_slower_setup(tmp_path, sync):
    root = _slow_setup_repo(tmp_path / "repo")
    apart, waits, head = _slow_setup_duet(tmp_path, root, root, sync)
    assert head["machine_info"]["rlpace"]["duet_sync"] is sync
    if sync:
        assert apart < 0.5, f"both sides should time test_first together, were {apart:.2f} s apart"
        assert waits["test_first[1]"] >= 1.0  # head waited for base's slow setup
    else:
        assert apart >= 1.0, f"without the rendezvous the sides drift, were {apart:.2f} s apart"
        assert set(waits.values()) == {None}


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="a duet pins its runs to cores")
def test_a_case_on_the_cpu_clock_declared_out_of_the_count_tier_meets_too(tmp_path):
    """``pr`` times such a case in duets, judged pair by pair: both sides start its
    timing (pytest-benchmark's own warm-up and rounds) together as well."""
    on_cpu = SLOW_SETUP.replace(
        '@case(params={"n": [1]})\ndef test_first',
        '@case(params={"n": [1]}, timer="cpu", count="declared out")\ndef test_first',
    )
    assert on_cpu != SLOW_SETUP
    root = _slow_setup_repo(tmp_path / "repo", cases=on_cpu)
    apart, waits, head = _slow_setup_duet(tmp_path, root, root)
    first = next(b for b in head["benchmarks"] if b["name"] == "test_first[1]")
    assert first["extra_info"]["timer"] == "cpu" and first["extra_info"]["pass"] == "timed"
    assert apart < 0.5, f"both sides should time test_first together, were {apart:.2f} s apart"
    assert waits["test_first[1]"] >= 1.0  # head waited for base's slow setup


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="a duet pins its runs to cores")
def test_a_base_whose_plugin_predates_the_rendezvous_is_never_waited_for(tmp_path):
    """A PR's base checked out from before the rendezvous writes no log: its twin is
    not asked to meet it (it would wait at each duet's first case)."""

    def old_plugin(text):
        text = text.replace("from rlpace.bench.duet_sync import DUET_SYNC_ENV, DuetSync\n", "")
        return text.replace("DuetSync.from_env(os.environ.get(DUET_SYNC_ENV))", "None")

    base = _slow_setup_repo(tmp_path / "base", old_plugin)
    head = _slow_setup_repo(tmp_path / "head")
    assert not plugin_meets(base / "tests/benchmarks/conftest.py")
    assert plugin_meets(head / "tests/benchmarks/conftest.py")
    start = time.monotonic()
    apart, waits, result = _slow_setup_duet(tmp_path, base, head)
    assert time.monotonic() - start < 45  # the head never waited out ABSENT_TIMEOUT
    assert set(waits.values()) == {None} and result["machine_info"]["rlpace"]["duet_sync"] is False
    assert apart >= 1.0  # and the two drifted, as before the rendezvous


def test_a_malformed_rendezvous_is_a_usage_error_naming_the_variable(tmp_path):
    """A real pytest run of the suite plugin, as a stranger's shell would start it."""
    import subprocess

    root = _slow_setup_repo(tmp_path / "repo")
    env = {
        **os.environ,
        DUET_SYNC_ENV: "left:/no/such/dir",
        "PYTHONPATH": str(ROOT / "lib"),
        "RLPACE_TEST_MARKS": str(tmp_path / "marks"),
    }
    done = subprocess.run(
        [sys.executable, "-m", "pytest", str(root / "tests" / "benchmarks"), "-q", "-p",
         "no:cacheprovider"],
        env=env, capture_output=True, text=True, cwd=root, check=False,
    )  # fmt: skip
    said = done.stdout + done.stderr
    assert done.returncode == 4, said
    assert f"{DUET_SYNC_ENV}: expected SIDE:DIRECTORY" in said and "'left:/no/such/dir'" in said
    assert "Traceback" not in said


def test_a_line_written_in_two_pieces_is_read_whole(tmp_path):
    """The twin's log is read on from where the last read stopped: a line caught half
    written waits for its end instead of being taken for a case named by its half."""
    a = DuetSync(tmp_path, "a", timeout=10)
    log = (tmp_path / "b.log").open("a", encoding="utf-8")
    log.write("case\ttests/x.py::test_é[1]\nlisted\t\narrive\ttests/x.py::test_é")
    log.flush()

    def finish_the_line():
        time.sleep(0.3)
        log.write("[1]\n")
        log.close()

    thread = threading.Thread(target=finish_the_line)
    thread.start()
    met = a.arrive("tests/x.py::test_é[1]")
    thread.join()
    assert met.how == "together" and met.waited >= 0.25  # not before the line was whole
