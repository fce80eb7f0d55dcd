"""The asv adapter: every case of the suite as an asv class, skips as NotImplementedError."""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from tests.bench.fixtures.forked_case import FORKED_CASE

ROOT = Path(__file__).resolve().parents[2]
ASV_DIR = ROOT / "asv_bench"

CASES = """
from rlpace.bench.suite import SkipCase, Timed, case

CALLS = []
TEARDOWNS = []


@case(params={"impl": ["rlpace", "torchrl"], "n": [2, 3]})
def test_counted(impl, n):
    if impl == "torchrl" and n == 3:
        raise SkipCase("no torchrl twin for n=3")
    return Timed(lambda: CALLS.append((impl, n)), teardown=lambda: TEARDOWNS.append((impl, n)))


@case(params={"n": [4]}, gpu=True, timer="cpu")
def test_device(n, device):
    return lambda: CALLS.append((n, device))


@case(params={"n": [1, 2, 3]}, count=lambda n: n == 1 or "workers")
def test_workers(n):
    if n == 3:
        raise SkipCase("no workers at n=3")
    return Timed(lambda: [sorted(range(k)) for k in range(n)], teardown=lambda: TEARDOWNS.append(n))
"""

CASES += FORKED_CASE  # a case whose call a forked worker serves

BROKEN = "import rlpace.no_such_module_at_this_commit\n"


def _purge():
    for name in list(sys.modules):
        if name == "benchmarks" or name.startswith(("benchmarks.", "rlpace_suite_cases")):
            del sys.modules[name]


@pytest.fixture
def adapter(tmp_path, monkeypatch, capsys):
    """Import asv_bench/benchmarks against a throwaway suite directory."""
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "test_cases.py").write_text(CASES)
    (suite / "test_broken.py").write_text(BROKEN)
    monkeypatch.setenv("RLPACE_SUITE_DIR", str(suite))
    monkeypatch.syspath_prepend(str(ASV_DIR))
    _purge()
    threads = torch.get_num_threads()
    cpu, gpu = importlib.import_module("benchmarks.cpu"), importlib.import_module("benchmarks.gpu")
    yield cpu, gpu, capsys.readouterr().err
    _purge()
    torch.set_num_threads(threads)  # setup pins one thread; give the session its own back


def test_every_case_becomes_a_class_with_asv_params(adapter):
    cpu, gpu, err = adapter
    cls = cpu.test_counted
    assert cls.param_names == ["impl", "n"]
    assert cls.params == [["rlpace", "torchrl"], [2, 3]]
    assert cpu.test_device.param_names == ["n", "device"]
    assert cpu.test_device.params == [[4], ["cpu"]]
    # the GPU set holds only gpu=True cases, on cuda
    assert not hasattr(gpu, "test_counted")
    assert gpu.test_device.params == [[4], ["cuda"]]
    assert hasattr(gpu.test_device, "track_peak_cuda_memory")
    units = {
        m: getattr(gpu.test_device, f"track_{m}").unit
        for m in ("kernels", "syncs", "copies", "ops", "py_calls")
    }
    assert units == {
        "kernels": "kernel launches",
        "syncs": "syncs",
        "copies": "copies",
        "ops": "aten ops",
        "py_calls": "Python calls",
    }
    # asv's version follows each case's own body, not the shared generated method
    assert cls.version != cpu.test_device.version
    assert cpu.test_device.version == gpu.test_device.version
    # a module that cannot import (an older commit's rlpace) is left out, loudly
    assert "skipped case module test_broken.py: ModuleNotFoundError" in err


def test_setup_time_teardown_call_the_case_body(adapter):
    cpu, _, _ = adapter
    cases_module = sys.modules["rlpace_suite_cases.test_cases"]
    bench = cpu.test_counted()
    bench.setup("rlpace", 2)
    bench.time_case("rlpace", 2)
    bench.time_case("rlpace", 2)
    bench.teardown("rlpace", 2)
    assert cases_module.CALLS == [("rlpace", 2), ("rlpace", 2)]
    assert cases_module.TEARDOWNS == [("rlpace", 2)]
    assert torch.get_num_threads() == 1  # setup applies the stable thread setting


def test_skip_case_becomes_asv_skip(adapter):
    cpu, _, _ = adapter
    with pytest.raises(NotImplementedError, match="no torchrl twin for n=3"):
        cpu.test_counted().setup("torchrl", 3)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the behaviour without CUDA")
def test_gpu_class_skips_without_cuda(adapter):
    _, gpu, _ = adapter
    with pytest.raises(NotImplementedError, match="no CUDA device"):
        gpu.test_device().setup(4, "cuda")


def test_gpu_work_trackers_count_the_call_and_skip_where_rlpace_cannot(adapter, monkeypatch):
    """The GPU set's track_<metric> series: the typical call's count (here on the CPU,
    so aten ops only), and asv's skip at a commit whose rlpace has no work counts."""
    from types import SimpleNamespace

    _, gpu, _ = adapter
    bench = gpu.test_device()
    x = torch.ones(8)
    bench._timed = SimpleNamespace(fn=lambda: (x + 1) * 2)
    one = bench.track_ops(4, "cuda")
    bench._timed = SimpleNamespace(fn=lambda: ((x + 1) * 2).sum())
    assert bench.track_ops(4, "cuda") > one > 0
    assert bench.track_kernels(4, "cuda") == 0
    calls = bench.track_py_calls(4, "cuda")  # the lambda, then the lambda and a method
    bench._timed = SimpleNamespace(fn=lambda: ((x + 1) * 2).sum().item())
    assert bench.track_py_calls(4, "cuda") == calls + 1
    for module in ("", ".measure", ".verdict"):  # an older rlpace: no work counts
        monkeypatch.setitem(sys.modules, f"rlpace.bench.work_counts{module}", None)
    with pytest.raises(NotImplementedError, match="no work counts"):
        bench.track_syncs(4, "cuda")


def test_work_tracks_the_wall_clock_cases_from_one_pass(adapter, monkeypatch):
    """``Work`` counts every wall-clock parameter set of the CPU set once, in
    ``setup_cache``, and tears each down; a counted parameter set is not there, a case
    that cannot be built is skipped with its reason."""
    work = importlib.import_module("benchmarks.work")
    cases_module = sys.modules["rlpace_suite_cases.test_cases"]
    ids = work.Work.params[0]
    assert "test_workers[2]" in ids and "test_workers[1]" not in ids  # counted under Callgrind
    assert not any(i.startswith("test_device") for i in ids)
    bench = work.Work()
    data = bench.setup_cache()
    assert 2 in cases_module.TEARDOWNS
    # the forked worker calls two functions steadily, fewer than the 8 the pull
    # request's guard asks: its total is not a series (on a sleep-bound threaded row
    # asv's own runs flipped it between 0 and 8 with the code unchanged)
    with pytest.raises(NotImplementedError, match="2 of its workers' functions were steady"):
        bench.track_worker_calls(data, "test_forked[1]")
    monkeypatch.setattr(work, "_anchors_min", lambda: 2)
    data = bench.setup_cache()
    bench.setup(data, "test_workers[2]")
    # the lambda, its comprehension, sorted twice (calling a type, range, is no call)
    assert bench.track_py_calls(data, "test_workers[2]") == 4
    assert bench.track_ops(data, "test_workers[2]") == 0
    with pytest.raises(NotImplementedError, match="SkipCase: no workers at n=3"):
        bench.setup(data, "test_workers[3]")
    # a case whose forked worker was counted: sorted and its key 8 times, every call
    assert bench.track_worker_calls(data, "test_forked[1]") == 9
    # a metric a case lacks is asv's skip from a body (NaN), not a failure: a bare
    # NotImplementedError outside setup is recorded as null, a benchmark lost
    from asv_runner.benchmarks.mark import SkipNotImplemented

    with pytest.raises(SkipNotImplemented, match="no worker processes or threads of this case"):
        bench.track_worker_calls(data, "test_workers[2]")
    with pytest.raises(NotImplementedError, match="no work counts"):
        bench.setup({"unavailable": "this commit's rlpace has no work counts"}, "test_workers[2]")


@pytest.fixture(scope="module")
def discovered() -> dict[str, tuple[list[str], str]]:
    """asv's own discovery, in a fresh process, on the repository's real cases: each
    benchmark's parameter names and unit."""
    code = (
        "import json, sys\n"
        "from asv_runner.discovery import disc_benchmarks\n"
        "sys.path.insert(0, '.')\n"
        "print(json.dumps({b.name: [b.param_names, getattr(b, 'unit', 'seconds')]\n"
        "                  for b in disc_benchmarks('benchmarks')}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ASV_DIR, capture_output=True, text=True, check=True
    )
    return {k: tuple(v) for k, v in json.loads(out.stdout.strip().splitlines()[-1]).items()}


def test_asv_discovers_the_real_suite_in_both_sets(discovered):
    from rlpace.bench.suite import Case

    cases: dict[str, Case] = {}
    for path in sorted((ROOT / "tests" / "benchmarks").glob("test_*.py")):
        spec = importlib.util.spec_from_file_location(f"_adapter_check_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        for value in vars(module).values():
            c = getattr(value, "__rlpace_case__", None)
            if c is not None:
                cases[c.name] = c
    assert cases, "the suite declares no case"
    for name, c in cases.items():
        assert discovered[f"cpu.{name}.time_case"][0] == list(c.param_names)
        assert (f"gpu.{name}.time_case" in discovered) == c.gpu


def test_asv_publish_holds_every_count_of_work_to_the_count_threshold(discovered):
    """asv.conf.json's regressions_thresholds, matched as asv matches them, give every
    series that counts work 1 % and leave every timing and memory series at asv's 5 %."""
    from asv.config import Config

    from rlpace.bench.history import COUNT_THRESHOLD, STEP_COUNT_UNITS

    thresholds = Config.load(str(ASV_DIR / "asv.conf.json")).regressions_thresholds
    counted = {name for name, (_, unit) in discovered.items() if unit in STEP_COUNT_UNITS}
    assert {n.split(".")[0] for n in counted} == {"counts", "work", "gpu"}
    assert "counts.Counts.track_estimated_cycles" not in counted  # a model: 2 % A/A
    assert "work.Work.track_worker_calls" not in counted  # which functions are steady: chance
    for name, (_, unit) in discovered.items():
        entry = f"{name}('x')"  # asv matches the name with its parameters
        matched = [float(t) for regex, t in thresholds.items() if re.match(regex, entry)]
        if name in counted:
            assert matched and max(matched) == COUNT_THRESHOLD, (name, unit, matched)
        else:
            assert matched == [], (name, unit, matched)


def test_cpu_timed_cases_get_asvs_process_time_timer_except_on_cuda(adapter):
    import time

    cpu, gpu, _ = adapter
    assert cpu.test_device.timer is time.process_time
    assert not hasattr(gpu.test_device, "timer")  # wall clock on CUDA
    assert not hasattr(cpu.test_counted, "timer")  # the default stays asv's wall clock


def test_counted_classes_learn_their_parameters_once_a_commit(tmp_path):
    """asv starts a process for every parameter of a tracked value; those of ``counts``
    and ``work`` read the list kept for the commit instead of loading the case modules
    (and torch with them), until the suite or the commit changes."""
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "test_cases.py").write_text(CASES)
    env_dir = tmp_path / "env"
    code = (
        "import json, sys\n"
        "sys.path.insert(0, '.')\n"
        "import benchmarks.counts as c, benchmarks.work as w\n"
        "print(json.dumps([c.Counts.params[0], w.Work.params[0],\n"
        "                  'rlpace_suite_cases.test_cases' in sys.modules]))\n"
    )

    def discover(commit: str = "a" * 40) -> tuple[list[str], list[str], bool]:
        env = {
            **os.environ,
            "RLPACE_SUITE_DIR": str(suite),
            "ASV_ENV_DIR": str(env_dir),
            "ASV_COMMIT": commit,
        }
        out = subprocess.run(
            [sys.executable, "-c", code],
            cwd=ASV_DIR,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        return tuple(json.loads(out.stdout.strip().splitlines()[-1]))

    counted, clocked, loaded = discover()
    assert loaded and "test_workers[1]" in counted and "test_workers[2]" in clocked
    assert discover() == (counted, clocked, False)  # kept: the cases were not loaded
    assert discover("b" * 40)[2] is True  # another commit: loaded again
    kept = sorted((env_dir / "rlpace-asv-params").glob("counts-*.json"))
    kept[0].write_text("{not json")  # a torn or foreign file is computed again
    assert discover() == (counted, clocked, True)
    (suite / "test_cases.py").write_text(CASES.replace('params={"n": [4]}', 'params={"n": [6]}'))
    changed, _, loaded = discover()
    assert loaded and "test_device[6-cpu]" in changed and "test_device[4-cpu]" not in changed
    assert not any(p.suffix == ".part" for p in (env_dir / "rlpace-asv-params").iterdir())
