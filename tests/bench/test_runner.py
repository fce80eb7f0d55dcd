"""The runner and the suite plugin: set selection, skip reasons, stable settings, metadata.

A throwaway repository root gets the real ``tests/benchmarks/conftest.py`` and a small
case module whose timed callable records what it saw (threads, thread variables,
whether the garbage collector ran) into a probe file. ``rlpace-bench run`` then runs
it in a fresh pytest process, as it runs the real suite.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from rlpace.bench.cli import main
from rlpace.bench.errors import BenchInputError
from rlpace.bench.results import load_results
from rlpace.bench.runner import RunSettings, abba_schedule, pytest_args, run, stable_environ
from rlpace.bench.work_counts.measure import measure_work_counts

ROOT = Path(__file__).resolve().parents[2]

CASES = """
import gc
import json
import os

import torch

from rlpace.bench.suite import SkipCase, Timed, case

PROBE = os.environ["RLPACE_TEST_PROBE"]


@case(params={"impl": ["rlpace", "torchrl"], "n": [8]})
def test_probe(impl, n):
    seen = {"gc_enabled": set()}

    def fn():
        seen["gc_enabled"].add(gc.isenabled())
        return sum(range(n))

    def teardown():
        with open(PROBE, "w") as fh:
            json.dump({
                "threads": torch.get_num_threads(),
                "omp": os.environ.get("OMP_NUM_THREADS"),
                "mkl": os.environ.get("MKL_NUM_THREADS"),
                "gc_enabled_while_timing": sorted(seen["gc_enabled"]),
                "affinity": sorted(os.sched_getaffinity(0)),
                "side": os.environ.get("RLPACE_TEST_SIDE"),
            }, fh)

    return Timed(fn, teardown=teardown, items=n, unit="numbers", extra_info={"note": "probe"})


@case(params={"n": [4]}, gpu=True)
def test_on_device(n, device):
    x = torch.ones(n, device=device)
    return lambda: x + 1


@case(params={"n": [1]})
def test_sleepy(n):
    import time

    time.sleep(float(os.environ.get("RLPACE_TEST_SLEEP", "0")))
    return lambda: n


@case(params={"clock": ["cpu"]}, timer="cpu")
def test_nap(clock):
    import time

    return lambda: time.sleep(0.02)  # 20 ms of wall time, next to no CPU time


@case(params={"clock": ["cpu"]}, timer="cpu", count=lambda clock: "too slow under Valgrind")
def test_nap_declared(clock):
    return lambda: sorted(range(3))


@case(params={"clock": ["wall"]})
def test_nap_wall(clock):
    import time

    return lambda: time.sleep(0.02)


@case(params={"impl": ["rlpace", "torchrl"]})
def test_twin_missing(impl):
    if impl == "torchrl":
        raise SkipCase("torchrl twin needs an extension that is not built here")
    return lambda: None
"""


def _suite_repo(tmp_path, **modules):
    """A throwaway repository whose suite is the real plugin and ``modules`` (name → text)."""
    root = tmp_path / "repo"
    bench = root / "tests" / "benchmarks"
    bench.mkdir(parents=True)
    shutil.copy(ROOT / "tests" / "benchmarks" / "conftest.py", bench / "conftest.py")
    for name, text in modules.items():
        (bench / f"{name}.py").write_text(text)
    return root


@pytest.fixture
def suite_root(tmp_path, monkeypatch):
    root = _suite_repo(tmp_path, test_cases=CASES)
    probe = tmp_path / "probe.json"
    monkeypatch.setenv("RLPACE_TEST_PROBE", str(probe))
    monkeypatch.setenv("OMP_NUM_THREADS", "4")  # the runner must override it
    return root, probe


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the behaviour without CUDA")
def test_gpu_set_without_cuda_skips_with_a_reason_and_succeeds(suite_root, tmp_path, capfd):
    root, _ = suite_root
    outcome = run(set_name="gpu", output=tmp_path / "gpu.json", root=root)
    shown = capfd.readouterr().out
    assert outcome.ok and outcome.benchmarks == 0
    # only the gpu=True case is in the set, on cuda, skipped with the reason
    assert "1 skipped, 6 deselected" in shown
    assert "GPU set: no CUDA device is available on this machine" in shown
    doc = json.loads(outcome.output.read_text())
    assert doc["benchmarks"] == [] and doc["machine_info"]["rlpace"]["format_version"] == 1


def test_run_command_applies_stable_settings_and_records_the_environment(
    suite_root, tmp_path, capfd
):
    root, probe = suite_root
    out = tmp_path / "cpu.json"
    assert main(["run", "--root", str(root), "-o", str(out), "--max-time", "0.02"]) == 0
    shown = capfd.readouterr().out
    seen = json.loads(probe.read_text())
    assert seen["threads"] == 1  # torch.set_num_threads(1) in the benchmark process
    assert seen["omp"] == "1" and seen["mkl"] == "1"
    # timed calls ran with the collector off (pytest-benchmark makes one more, untimed
    # call for the return value, with it on)
    assert False in seen["gc_enabled_while_timing"]

    doc = json.loads(out.read_text())
    env = doc["machine_info"]["rlpace"]
    assert env["torch_num_threads"] == 1 and env["omp_num_threads"] == "1"
    assert env["torch"] == torch.__version__
    by_name = {b["name"]: b for b in doc["benchmarks"]}
    # the CPU set: every case, the gpu=True one on device=cpu; the skipped twin absent
    assert set(by_name) == {
        "test_probe[rlpace-8]",
        "test_probe[torchrl-8]",
        "test_on_device[4-cpu]",
        "test_twin_missing[rlpace]",
        "test_sleepy[1]",
        "test_nap[cpu]",
        "test_nap_wall[wall]",
        "test_nap_declared[cpu]",
    }
    assert "torchrl twin needs an extension that is not built here" in shown
    probe_rlpace = by_name["test_probe[rlpace-8]"]
    assert probe_rlpace["options"]["disable_gc"] is True
    assert probe_rlpace["options"]["min_rounds"] == RunSettings().min_rounds
    # a wall-clock case also counts what each call launches (none of it on CUDA here)
    work = probe_rlpace["extra_info"].pop("work_counts")
    assert work["calls"] == 8 and work["kernels"] == [0] * 8 and len(set(work["ops"])) == 1
    assert probe_rlpace["extra_info"] == {
        "note": "probe",
        "set": "cpu",
        "items_per_call": 8,
        "unit": "numbers",
        "timer": "wall",
        "pass": "timed",
    }
    assert len(probe_rlpace["stats"]["data"]) == probe_rlpace["stats"]["rounds"] >= 5
    assert len(load_results(out)) == 8
    # a CPU-clock case the count tier leaves out counts its work in four calls instead;
    # one it claims does not
    declared = by_name["test_nap_declared[cpu]"]["extra_info"]["work_counts"]
    assert declared["calls"] == 4 and declared["py_calls"] == [2] * 4  # the lambda, sorted
    assert "work_counts" not in by_name["test_nap[cpu]"]["extra_info"]
    # a timer="cpu" case is timed on this process's CPU time: a sleep costs nothing
    nap, nap_wall = by_name["test_nap[cpu]"], by_name["test_nap_wall[wall]"]
    assert nap["extra_info"]["timer"] == "cpu" and nap_wall["extra_info"]["timer"] == "wall"
    assert nap["stats"]["median"] < 0.005 < 0.019 < nap_wall["stats"]["median"]


def test_counting_a_wall_clock_case_never_touches_cuda(monkeypatch):
    """The CPU set's wall-clock cases are counted on the CPU alone, even where CUDA is
    available: initializing it in a process that then forks collector workers is
    not the plugin's call to make."""
    import importlib.util
    from types import SimpleNamespace

    spec = importlib.util.spec_from_file_location(
        "_suite_plugin_wall_clock", ROOT / "tests" / "benchmarks" / "conftest.py"
    )
    plugin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plugin)

    def no_cuda():
        raise AssertionError("the wall-clock counting touched CUDA")

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "synchronize", no_cuda)
    options = {
        "benchmark_warmup": False,
        "benchmark_warmup_iterations": 0,
        "benchmark_max_time": "0.01",
        "benchmark_min_rounds": 3,
        "benchmark_min_time": "0.000005",
    }
    config = SimpleNamespace(
        getoption=options.__getitem__,
        rlpace_wall_rounds=(0, 0.0),
        rlpace_duet_sync=None,
        rlpace_worker_counts=False,
    )
    bench = SimpleNamespace(disabled=False, extra_info={}, pedantic=lambda fn, **_: fn())
    x = torch.ones(4)
    plugin._time_sized(bench, lambda: x + 1, config, True, "test_x")
    work = bench.extra_info["work_counts"]
    assert "error" not in work and work["ops"][0] >= 1 and work["kernels"] == [0] * 8


def test_cuda_timing_synchronizes_each_call_and_records_peak_memory(monkeypatch):
    """The GPU path of the suite plugin, with torch.cuda's calls recorded instead of run:
    the timing, then the work counts of more calls; a profiler error is kept, not raised."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "_suite_plugin_under_test", ROOT / "tests" / "benchmarks" / "conftest.py"
    )
    plugin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plugin)
    events = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: events.append("sync"))
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda: events.append("reset"))
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda: 4096)

    class FakeBenchmark:
        disabled = False

        def __init__(self):
            self.extra_info = {}

        def __call__(self, fn):
            for _ in range(3):
                fn()

    bench = FakeBenchmark()
    plugin._time_on_cuda(bench, lambda: events.append("call"), True)
    # the timing, then the calls counted under the profiler (CPU activity alone here)
    assert events == ["sync", "reset"] + ["call", "sync"] * 3 + ["call"] * 8
    work = bench.extra_info.pop("work_counts")
    assert bench.extra_info == {"peak_cuda_memory_bytes": 4096}
    assert (work["calls"], work["kernels"], work["ops"]) == (8, [0] * 8, [0] * 8)

    calls = []

    def fails_after_timing():
        calls.append(1)
        if len(calls) > 3:  # the timing's three calls pass, the profiled ones fail
            raise RuntimeError("CUPTI_ERROR_NOT_INITIALIZED")

    bench = FakeBenchmark()
    plugin._time_on_cuda(bench, fails_after_timing, True)  # kept, not raised: the timing stands
    assert bench.extra_info["work_counts"] == {"error": "RuntimeError: CUPTI_ERROR_NOT_INITIALIZED"}

    bench = FakeBenchmark()  # RLPACE_BENCH_WORK_COUNTS=0, or a twin left out: the timing alone
    plugin._time_on_cuda(bench, lambda: None, False)
    assert "work_counts" not in bench.extra_info


def test_keyword_matching_nothing_is_an_input_error(suite_root, tmp_path):
    root, _ = suite_root
    with pytest.raises(BenchInputError, match="matched -k 'no_such_case'"):
        run(output=tmp_path / "x.json", keyword="no_such_case", root=root, quiet=True)


def test_an_empty_set_succeeds_with_an_empty_result_file(tmp_path):
    root = tmp_path / "repo"
    bench = root / "tests" / "benchmarks"
    bench.mkdir(parents=True)
    shutil.copy(ROOT / "tests" / "benchmarks" / "conftest.py", bench / "conftest.py")
    (bench / "test_cpu_only.py").write_text(
        "from rlpace.bench.suite import case\n\n\n"
        "@case(params={'n': [1]})\ndef test_cpu_only(n):\n    return lambda: n\n"
    )
    outcome = run(set_name="gpu", output=tmp_path / "gpu.json", root=root, quiet=True)
    assert outcome.ok and outcome.benchmarks == 0
    assert "1 deselected" in outcome.log
    assert json.loads(outcome.output.read_text())["benchmarks"] == []


QUEUED = """
import time

from rlpace.bench.suite import case


@case(params={"kind": ["queued"]})
def test_queued(kind):
    calls = iter(range(10**9))

    def one_batch():  # three results were ready ahead (0.1 ms each), then a 20 ms wait
        if next(calls) % 4 == 3:
            time.sleep(0.02)
        else:
            end = time.perf_counter() + 0.0001
            while time.perf_counter() < end:
                pass

    return one_batch
"""


def test_a_case_collecting_queued_work_is_timed_for_about_max_time(tmp_path):
    """An async collector's next batch is often ready (0.1 ms) and otherwise waited for.
    Sized from its fastest call, as pytest-benchmark sizes rounds, 0.1 s of timing
    became ~1,000 rounds (~5 s; a real collector ran 40-60 s); sized from a window's
    mean, each round loops over a wait and the ready results, and the case takes about
    ``max_time``."""
    root = _suite_repo(tmp_path, test_queued=QUEUED)
    settings = RunSettings(max_time=0.1, layout_pad=0)
    outcome = run(output=tmp_path / "q.json", root=root, quiet=True, settings=settings)
    assert outcome.ok, outcome.log
    stats = json.loads(outcome.output.read_text())["benchmarks"][0]["stats"]
    timed = stats["rounds"] * stats["iterations"] * stats["mean"]
    assert timed < 1.0, stats["rounds"]
    assert stats["rounds"] >= settings.min_rounds
    # every round holds a wait: a throughput (~5 ms a call), not 0.1 ms or 20 ms
    assert stats["iterations"] >= 4
    assert 0.003 < stats["min"] <= stats["max"] < 0.012


NAP = """
import time

from rlpace.bench.suite import case


@case(params={"ms": [10]})
def test_nap(ms):
    return lambda: time.sleep(ms / 1000)
"""


def test_a_wall_clock_case_takes_the_rounds_floor_the_runner_sets(tmp_path):
    """``RunSettings.wall_rounds`` reaches the suite plugin of the benchmark process
    (``$RLPACE_BENCH_WALL_ROUNDS``): a 10 ms call timed for 0.02 s gets min_rounds (5)
    rounds without it, the floor's 20 with it, and what fits in ``wall_time`` when
    that is shorter."""
    root = _suite_repo(tmp_path, test_nap=NAP)
    rounds = {}
    for floor in ((0, 1.0), (20, 1.0), (40, 0.15)):
        settings = RunSettings(
            max_time=0.02, layout_pad=0, wall_rounds=floor[0], wall_time=floor[1]
        )
        outcome = run(
            output=tmp_path / f"{floor[0]}.json", root=root, quiet=True, settings=settings
        )
        assert outcome.ok, outcome.log
        rounds[floor] = json.loads(outcome.output.read_text())["benchmarks"][0]["stats"]["rounds"]
    assert rounds[(0, 1.0)] == 5 and rounds[(20, 1.0)] == 20
    assert 10 <= rounds[(40, 0.15)] <= 15  # 0.15 s of ~10 ms rounds, not 40


PURE = """
import json
import os
import sys

from rlpace.bench.suite import Timed, case


@case(params={"n": [8]})
def test_pure(n):
    def teardown():
        with open(os.environ["RLPACE_TEST_PROBE"], "w") as fh:
            json.dump({"torch_loaded": "torch" in sys.modules}, fh)

    return Timed(lambda: sum(range(n)), teardown=teardown)
"""

LAZY = """
import json
import os


from rlpace.bench.suite import Timed, case


@case(params={"n": [8]})
def test_lazy(n):
    import torch  # first imported by the case's setup, after collection

    x = torch.ones(n)

    def teardown():
        with open(os.environ["RLPACE_TEST_PROBE"], "w") as fh:
            json.dump({"threads": torch.get_num_threads()}, fh)

    return Timed(lambda: x + 1, teardown=teardown)
"""


def test_a_pure_python_suite_never_loads_torch_and_a_lazy_one_gets_its_threads(
    tmp_path, monkeypatch
):
    """Importing torch costs over a second a process: the plugin never imports it for a
    suite that does not, and its record says torch ran nothing; a case that loads torch
    in its setup still gets ``--rlpace-threads`` before it is timed."""
    probe = tmp_path / "probe.json"
    monkeypatch.setenv("RLPACE_TEST_PROBE", str(probe))
    root = _suite_repo(tmp_path, test_pure=PURE)
    outcome = run(output=tmp_path / "pure.json", root=root, quiet=True,
                  settings=RunSettings(max_time=0.02))  # fmt: skip
    assert outcome.ok, outcome.log
    assert json.loads(probe.read_text()) == {"torch_loaded": False}
    doc = json.loads(outcome.output.read_text())
    env = doc["machine_info"]["rlpace"]
    assert env["torch_num_threads"] is None and env["cuda_device"] is None
    assert env["torch"] == torch.__version__  # the installed version, read without importing
    (result,) = doc["benchmarks"]
    counts = result["extra_info"]["work_counts"]  # the wall clock: its work counted
    assert counts["profiler"] == "none (no torch)" and counts["ops"] == [0] * counts["calls"]
    # the Python calls, counted as in a process with torch and its profiler on
    same = measure_work_counts(lambda: sum(range(8)), calls=counts["calls"], cuda=False)
    assert counts["py_calls"] == same["py_calls"] and same["profiler"].startswith("torch ")
    # a case that loads torch itself: the threads are set once it has (3: not torch's
    # default on this machine, which has no OMP_NUM_THREADS here)
    lazy = _suite_repo(tmp_path / "lazy", test_lazy=LAZY)
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", str(lazy / "tests" / "benchmarks"), "-q", "-p",
         "no:cacheprovider", "--rlpace-threads=3", "--benchmark-max-time=0.02"],
        env={**env, "PYTHONPATH": str(ROOT / "lib"), "RLPACE_BENCH_WORK_COUNTS": "0"},
        capture_output=True, text=True, cwd=lazy, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(probe.read_text()) == {"threads": 3}


def test_a_malformed_rounds_floor_is_a_usage_error_naming_the_variable(tmp_path, monkeypatch):
    root = _suite_repo(tmp_path, test_nap=NAP)
    env = {**os.environ, "RLPACE_BENCH_WALL_ROUNDS": "twenty", "PYTHONPATH": str(ROOT / "lib")}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", str(root / "tests" / "benchmarks"), "-q", "-p",
         "no:cacheprovider"],
        env=env, capture_output=True, text=True, cwd=root, check=False,
    )  # fmt: skip
    assert done.returncode == 4, done.stdout + done.stderr
    said = done.stdout + done.stderr
    assert "RLPACE_BENCH_WALL_ROUNDS: expected ROUNDS:SECONDS" in said and "'twenty'" in said
    assert "Traceback" not in said


@pytest.mark.parametrize(
    "argv, said",
    [
        (["--wall-rounds", "-2"], "wall_rounds: expected an integer >= 0, got -2"),
        (["--max-time", "0"], "max_time: expected a number > 0, got 0.0"),
    ],
)
def test_pr_and_aa_refuse_bad_timing_flags_before_running_anything(argv, said, capsys):
    for command in (["pr", "--base", "HEAD"], ["aa"]):
        assert main([*command, *argv]) == 2
        assert said in capsys.readouterr().err


def test_root_without_suite_is_an_input_error(tmp_path):
    with pytest.raises(BenchInputError, match="expected the benchmark suite"):
        run(output=tmp_path / "x.json", root=tmp_path)


def test_pytest_arguments_carry_every_stable_setting():
    settings = RunSettings(max_time=0.1, min_rounds=7, warmup_iterations=2, timeout=30)
    args = pytest_args(set_name="cpu", output=Path("o.json"), settings=settings, keyword="rb")
    for expected in (
        "--benchmark-only",
        "--rlpace-set=cpu",
        "--benchmark-json=o.json",
        "--benchmark-save-data",
        "--benchmark-disable-gc",
        "--benchmark-warmup=on",
        "--benchmark-warmup-iterations=2",
        "--benchmark-min-rounds=7",
        "--benchmark-max-time=0.1",
        "--timeout=30",
    ):
        assert expected in args
    assert args[args.index("-k") + 1] == "rb"
    with pytest.raises(BenchInputError, match="expected 'cpu' or 'gpu'"):
        pytest_args(set_name="tpu", output=Path("o.json"), settings=settings)


def test_environment_of_the_benchmark_process_pins_threads():
    env = stable_environ({"OMP_NUM_THREADS": "16", "HOME": "/h"}, RunSettings())
    assert env["OMP_NUM_THREADS"] == "1" and env["MKL_NUM_THREADS"] == "1"
    assert env["RLPACE_BENCH_THREADS"] == "1"  # the plugin's torch.set_num_threads
    assert env["HOME"] == "/h"


def test_each_benchmark_process_gets_a_random_layout_padding():
    import random

    from rlpace.bench.runner import LAYOUT_VARIABLE

    rng = random.Random(0)
    sizes = {len(stable_environ({}, RunSettings(), rng)[LAYOUT_VARIABLE]) for _ in range(20)}
    assert len(sizes) > 10 and max(sizes) <= RunSettings().layout_pad
    assert set(stable_environ({}, RunSettings(layout_pad=0))[LAYOUT_VARIABLE]) == set()


@pytest.mark.parametrize(
    "bad",
    [{"min_rounds": 0}, {"max_time": 0}, {"timeout": -1}, {"threads": 0}, {"layout_pad": -1}],
)
def test_settings_reject_values_that_cannot_time(bad):
    (name,) = bad
    with pytest.raises(ValueError, match=f"RunSettings.{name}: expected"):
        RunSettings(**bad)


def test_run_command_turns_bad_settings_into_a_usage_error(capsys):
    assert main(["run", "--min-rounds", "0", "-o", "x.json"]) == 2
    assert "RunSettings.min_rounds" in capsys.readouterr().err


def test_older_plugin_runs_and_a_timed_out_case_fails_without_losing_the_others(
    suite_root, tmp_path, monkeypatch, capfd
):
    """Base commits may predate the thread and metadata hooks: the runner passes nothing
    that plugin would reject, and the threads still come from the environment. A case
    past the per-case timeout fails the run; the cases that finished are still saved."""
    import subprocess

    root, probe = suite_root
    old = subprocess.run(
        ["git", "show", "6ca6090:tests/benchmarks/conftest.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if old.returncode != 0:
        pytest.skip("the first suite plugin's commit is not in this clone's history")
    (root / "tests" / "benchmarks" / "conftest.py").write_text(old.stdout)
    monkeypatch.setenv("RLPACE_TEST_SLEEP", "60")
    outcome = run(
        output=tmp_path / "base.json",
        keyword="probe or sleepy",
        root=root,
        settings=RunSettings(timeout=2),
    )
    assert outcome.returncode == 1 and outcome.benchmarks == 2  # the two probe results
    assert "Timeout (>2.0s)" in capfd.readouterr().out
    assert outcome.log == ""  # not quiet: the output went through
    seen = json.loads(probe.read_text())
    assert seen["omp"] == "1" and seen["threads"] == 1  # torch sizes its pool from OMP
    doc = json.loads(outcome.output.read_text())
    assert "rlpace" not in doc["machine_info"]  # the old plugin records no metadata
    assert {b["name"] for b in doc["benchmarks"]} == {
        "test_probe[rlpace-8]",
        "test_probe[torchrl-8]",
    }


def test_a_run_gets_its_environment_explicitly_and_can_be_pinned_to_a_cpu(
    suite_root, tmp_path, monkeypatch
):
    import os

    root, probe = suite_root
    monkeypatch.delenv("RLPACE_TEST_SIDE", raising=False)
    cpu = max(os.sched_getaffinity(0))
    outcome = run(
        output=tmp_path / "one.json",
        keyword="probe and rlpace",
        settings=RunSettings(max_time=0.01, min_rounds=1),
        root=root,
        quiet=True,
        environ={"RLPACE_TEST_SIDE": "head"},
        cpu=cpu,
    )
    assert outcome.ok and outcome.benchmarks == 1
    seen = json.loads(probe.read_text())
    assert seen["side"] == "head" and seen["affinity"] == [cpu]
    assert "RLPACE_TEST_SIDE" not in os.environ  # this process's environment is untouched


def test_every_interleaved_schedule_is_one_abba_order():
    assert abba_schedule(4) == [
        (0, "base"), (0, "head"), (1, "head"), (1, "base"),
        (2, "base"), (2, "head"), (3, "head"), (3, "base"),
    ]  # fmt: skip
    # the A/A pools: unequal counts, the shorter side stops, the order still alternates
    assert abba_schedule({"clean": 4, "slow": 2}, ("clean", "slow")) == [
        (0, "clean"), (0, "slow"), (1, "slow"), (1, "clean"), (2, "clean"), (3, "clean"),
    ]  # fmt: skip


def test_a_later_stage_of_duets_goes_on_alternating_the_cores(monkeypatch):
    """Which side gets the first core alternates duet by duet and, with
    ``duets_before`` (the duets the same cases ran before), across stages: one first duet and
    three more give each side each core twice, not three times and once."""
    from rlpace.bench import interleave
    from rlpace.bench.runner import RunOutcome

    monkeypatch.setattr(interleave.os, "sched_getaffinity", lambda pid: {4, 7}, raising=False)
    cores: dict[str, list[int]] = {"base": [], "head": []}

    def one(k, side, cpu=None, sync=None):
        cores[side].append(cpu)
        return RunOutcome(returncode=0, output=Path(f"{side}-{k}.json"), benchmarks=1)

    list(interleave._outcomes(one, 1, True))
    list(interleave._outcomes(one, 3, True, duets_before=1))
    assert cores == {"base": [4, 7, 4, 7], "head": [7, 4, 7, 4]}
    cores = {"base": [], "head": []}
    list(interleave._outcomes(one, 3, True))  # without it: the core of duet 0 again
    assert cores["base"] == [4, 7, 4]


STUCK = """
import time

from rlpace.bench.suite import case


@case()
def test_stuck():
    time.sleep(120)  # a run still going when its driver is killed
    return lambda: None
"""


def _stuck_duet(tmp_path, find_processes):
    """A driver in the middle of a duet whose two runs hang in their case; returns the
    driver and a function listing its suite runs still alive."""
    import os
    import subprocess
    import time

    root = tmp_path / "stuck-tree"
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    bench = root / "tests" / "benchmarks"
    bench.mkdir(parents=True)
    shutil.copy(ROOT / "tests" / "benchmarks" / "conftest.py", bench / "conftest.py")
    (bench / "test_stuck.py").write_text(STUCK)
    # SIGINT handled as under a terminal: a test run started in a script's background
    # inherits it ignored (POSIX), and Python keeps an ignored SIGINT ignored
    driver = subprocess.Popen(
        [sys.executable, "-c",
         "import signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
         "import sys; from pathlib import Path; "
         "from rlpace.bench.interleave import run_interleaved; "
         "from rlpace.bench.runner import RunSettings; "
         "tree = (Path(sys.argv[1]), Path(sys.executable)); "
         "run_interleaved(set_name='cpu', sides={'base': tree, 'head': tree}, "
         "runs_dir=Path(sys.argv[2]), repeats=1, settings=RunSettings(), duet=True)",
         str(root), str(tmp_path / "runs")],
        stderr=subprocess.PIPE,
        # a SIGKILLed driver cannot remove its runs' own TMPDIRs: keep them in this
        # test's directory, not the shared /tmp
        env={**os.environ, "TMPDIR": str(scratch)},
    )  # fmt: skip
    marker = str(tmp_path / "runs").encode()  # in each run's --benchmark-json

    def suite_runs() -> list[int]:
        return find_processes(b"-m\0pytest\0", marker)

    deadline = time.monotonic() + 60
    while len(suite_runs()) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    # two or more: a run that starts a helper process (fork, then exec) shows its
    # command line twice for a moment
    assert len(suite_runs()) >= 2, "the duet's two runs never started"
    return driver, marker


def _signal_and_wait(driver, signum) -> bytes:
    """Send ``signum`` to the driver alone and return its stderr; fail the test if it is
    still running 60 s later (killing it, so nothing is left behind)."""
    import os
    import subprocess

    os.kill(driver.pid, signum)
    try:
        return driver.communicate(timeout=60)[1]
    except subprocess.TimeoutExpired:
        driver.kill()
        driver.communicate()
        pytest.fail(f"the driver still ran 60 s after signal {signum}")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_killed_driver_leaves_no_suite_run_behind_even_mid_duet(
    tmp_path, find_processes, survivors
):
    """SIGKILL ``pr``'s process in the middle of a duet: both runs (started from threads)
    stop with it instead of loading the cores of whatever runs next."""
    import os
    import signal

    driver, marker = _stuck_duet(tmp_path, find_processes)
    os.kill(driver.pid, signal.SIGKILL)
    driver.communicate()
    left = survivors(b"-m\0pytest\0", marker, within=20)
    assert not left, "suite runs went on after their driver was killed"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="finds its runs in /proc")
def test_ctrl_c_to_the_driver_alone_mid_duet_stops_both_runs_at_once(
    tmp_path, find_processes, survivors
):
    """A SIGINT sent to the driver only (``kill -INT``, not a terminal's Ctrl-C to the
    whole group): the duet's runs, waited for in threads the signal does not reach, are
    interrupted too, and the driver leaves within seconds, not when their cases end
    (the stuck case sleeps 120 s; before, the driver waited for it)."""
    import signal
    import time

    driver, marker = _stuck_duet(tmp_path, find_processes)
    sent = time.monotonic()
    err = _signal_and_wait(driver, signal.SIGINT)
    waited = time.monotonic() - sent
    assert driver.returncode != 0 and b"KeyboardInterrupt" in err
    assert waited < 30, f"the driver waited {waited:.0f} s for its duet after Ctrl-C"
    left = survivors(b"-m\0pytest\0", marker, within=10)
    assert not left, "suite runs went on after their driver was interrupted"


LITTERING = """
import os
import tempfile
import time

from rlpace.bench.suite import case


@case()
def test_litter():
    # a case that leaves files in its temporary directory and is stopped before any
    # teardown (a memory-mapped buffer of a run that is cancelled, say)
    with open(os.path.join(tempfile.gettempdir(), "buffer.mmap"), "wb") as f:
        f.write(b"x" * 4096)
    time.sleep(120)
    return lambda: None
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="finds its runs in /proc")
def test_a_terminated_driver_stops_its_run_and_leaves_nothing_in_tmp(
    tmp_path, find_processes, survivors
):
    """SIGTERM to ``rlpace-bench run`` (a CI job cancelled): the driver stops its suite
    run as Ctrl-C would and exits 143, and the run's own ``TMPDIR`` (made in the
    driver's temporary directory) goes with it, files its stopped case left included.
    Before, the default SIGTERM killed the driver at once and the case's files stayed
    in the shared ``/tmp``."""
    import os
    import signal
    import subprocess
    import time

    root = tmp_path / "tree"
    bench = root / "tests" / "benchmarks"
    bench.mkdir(parents=True)
    shutil.copy(ROOT / "tests" / "benchmarks" / "conftest.py", bench / "conftest.py")
    (bench / "test_litter.py").write_text(LITTERING)
    shared = tmp_path / "shared-tmp"
    shared.mkdir()
    out = tmp_path / "out.json"
    driver = subprocess.Popen(
        [sys.executable, "-m", "rlpace.bench", "run", "--root", str(root), "-o", str(out)],
        env={**os.environ, "TMPDIR": str(shared)},
        stderr=subprocess.PIPE,
    )
    marker = str(out).encode()
    deadline = time.monotonic() + 90
    while not list(shared.rglob("buffer.mmap")) and time.monotonic() < deadline:
        time.sleep(0.2)
    litter = list(shared.rglob("buffer.mmap"))
    assert litter and litter[0].parent != shared, "the case's file was not in a TMPDIR of its run"
    err = _signal_and_wait(driver, signal.SIGTERM)
    assert driver.returncode == 143 and b"terminated; nothing more was written" in err
    assert not survivors(b"-m\0pytest\0", marker, within=10), "the suite run went on"
    assert list(shared.iterdir()) == [], "the run left files in the temporary directory"


def test_a_runs_own_tmpdir_keeps_torch_compiles_cache_where_torch_keeps_it():
    """A run's private ``TMPDIR`` would move Inductor's cache into it and throw it away
    with it (each run then compiled its compile cases afresh: 2-3 min more in an A/A
    ``make bench``); the run is pointed at the directory torch itself would use."""
    torch_cache = pytest.importorskip("torch._inductor.runtime.cache_dir_utils")
    from rlpace.bench.runner import _kept_caches

    assert _kept_caches({}) == {"TORCHINDUCTOR_CACHE_DIR": torch_cache.default_cache_dir()}
    assert _kept_caches({"TORCHINDUCTOR_CACHE_DIR": "/elsewhere"}) == {}
