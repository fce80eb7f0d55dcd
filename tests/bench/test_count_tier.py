"""The count tier on a tiny throwaway suite, counted for real under Callgrind.

The suite is pure Python (no torch under Valgrind: a test must stay fast). Base and
head trees differ in one case only: head's ``test_loop`` also runs a small real
check over a twentieth of its data. Three counting processes in all (base twice,
head once), about 10-20 s on two cores.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

import rlpace.bench.counts
from rlpace.bench.cli import main as cli_main
from rlpace.bench.comparison import BenchmarkChange, Comparison, Verdict
from rlpace.bench.counts.dumps import WARM_TRIGGER, inclusive_costs, read_dump, read_dumps
from rlpace.bench.counts.gates import read_gates
from rlpace.bench.counts.pricing import FAMILIES, PRICING, priced_calls, priced_events
from rlpace.bench.counts.records import (
    CaseCount,
    CountRun,
    count_differences,
    read_counts,
    write_counts,
)
from rlpace.bench.counts.session import (
    KERNEL_ENV,
    KERNELS,
    WARM_UP,
    CountJob,
    CountSettings,
    count_tree,
    count_trees,
    profile_cases,
)
from rlpace.bench.counts.tier import CountTier, apply_count_tier, run_count_tier
from rlpace.bench.counts.toolchain import (
    ALLOCATOR_ENV,
    GLIBC_TUNABLES,
    CountUnavailable,
    find_allocator,
    find_toolchain,
)
from rlpace.bench.counts.verdict import CountChange, compare_counts, gate_from_aa
from rlpace.bench.counts.why import explain_regression
from rlpace.bench.errors import BenchInputError, EnvironmentMismatchError

needs_valgrind = pytest.mark.skipif(
    shutil.which("valgrind") is None or shutil.which("gcc") is None,
    reason="valgrind or gcc is not installed: the count tier cannot run here",
)

LOOP_CASE = """

@case(params={{"n": [3000]}}, timer="cpu")
def test_loop(n):
    data = list(range(n))

    def work():
        total = 0
        for x in data:
            total += x * x
        {extra}
        return total

    return work
"""
"""A case whose call ``{extra}`` adds to (the head's real change)."""

SUITE = (
    """
import time

from rlpace.bench.suite import Timed, case


def _check(data):
    for x in data:
        if x < 0:
            raise ValueError(x)

"""
    + LOOP_CASE
    + """

@case(params={{"n": [500]}}, timer="cpu")
def test_dict(n):
    keys = [f"k{{i}}" for i in range(n)]
    return lambda: sorted({{k: len(k) for k in keys}}.items())


def _only_small(n):
    return n < 100 or "declared out for this size"


@case(params={{"n": [10, 1000]}}, timer="cpu", count=_only_small)
def test_sizes(n):
    return lambda: sum(range(n))


@case(params={{"n": [10]}}, timer="cpu")
def test_tiny(n):
    return Timed(lambda: sum(range(n)), count_calls=50)


@case(params={{"ms": [30]}}, timer="cpu", count=True)
def test_sleep(ms):
    return lambda: time.sleep(ms / 1000)


@case(params={{"ms": [1]}})
def test_wall(ms):
    return lambda: time.sleep(ms / 1000)
"""
)


def _tree(root: Path, extra: str) -> Path:
    suite = root / "tests" / "benchmarks"
    suite.mkdir(parents=True)
    (suite / "test_tiny.py").write_text(textwrap.dedent(SUITE.format(extra=extra)), "utf-8")
    return root


@pytest.fixture(scope="module")
def counted(tmp_path_factory):
    """Count base twice (A/A) and head once, side by side."""
    top = tmp_path_factory.mktemp("count-tier")
    base = _tree(top / "base", "")
    head = _tree(top / "head", "_check(data[: len(data) // 20])")
    settings = CountSettings()
    jobs = [
        CountJob(base, top / "out" / "base.json"),
        CountJob(base, top / "out" / "base2.json"),
        CountJob(head, top / "out" / "head.json"),
    ]
    runs = count_trees(jobs, settings=settings)
    return dict(zip(("base", "base2", "head"), runs, strict=True)) | {"dir": top / "out"}


@needs_valgrind
def test_same_code_gives_the_same_counts(counted):
    a, b = counted["base"], counted["base2"]
    assert [c.test_id for c in a.cases] == [c.test_id for c in b.cases]
    gates = gate_from_aa([a, b])
    assert set(gates) == {"test_loop[3000]", "test_dict[500]", "test_sizes[10]", "test_tiny[10]"}
    for gate in gates.values():
        assert gate.spread < 0.005  # the stated tolerance: A/A within 0.5 %
    assert all(
        c.verdict == "same" for c in compare_counts(b, a) if c.instructions_change is not None
    )
    assert a.by_id()["test_loop[3000]"].instructions > 10_000


@needs_valgrind
def test_a_few_percent_of_real_work_is_flagged_and_nothing_else(counted):
    changes = {c.test_id: c for c in compare_counts(counted["head"], counted["base"])}
    flagged = [i for i, c in changes.items() if c.flagged]
    assert flagged == ["test_loop[3000]"]
    assert 0.01 < changes["test_loop[3000]"].instructions_change < 0.15
    assert changes["test_dict[500]"].verdict == "same"


@needs_valgrind
def test_why_names_the_function_that_grew(counted):
    head, base = counted["head"].by_id(), counted["base"].by_id()
    # no Python profile under Valgrind: a plain process profiles the flagged case
    assert head["test_loop[3000]"].python_calls is None
    top = counted["dir"].parent
    found = {
        side: profile_cases(
            CountJob(top / side, counted["dir"] / f"{side}.json"), ["test_loop[3000]"]
        )["test_loop[3000]"]
        for side in ("base", "head")
    }
    cause = explain_regression(
        replace(head["test_loop[3000]"], **found["head"]),
        replace(base["test_loop[3000]"], **found["base"]),
        head_dir=counted["dir"],
        base_dir=counted["dir"],
    )
    assert cause.total_delta > 0
    assert cause.python and cause.python[0].name.endswith("test_tiny.py:_check")
    # the bytecode each function ran itself: the new function's, and the few more
    # instructions of the line that calls it, inside the case's own function
    grown = {g.name.rpartition(":")[2]: g for g in cause.bytecode}
    assert cause.bytecode[0].name.endswith("test_tiny.py:_check")
    assert grown["_check"].base == 0 and grown["_check"].head > 3000 // 20
    assert 0 < grown["work"].delta < 30 and grown["work"].base > 3000
    assert cause.native  # inclusive costs from the two dumps
    dump = read_dump(counted["dir"] / head["test_loop[3000]"].dump)
    assert dump.trigger == "test_loop[3000]"
    assert inclusive_costs(dump.path)


@needs_valgrind
def test_a_tiny_call_is_counted_over_the_calls_its_case_asks_for(counted):
    """``Timed(count_calls=50)``: one dump of 50 calls, the counts per call; a case
    without it gets the run's one call."""
    cases = counted["base"].by_id()
    tiny, one = cases["test_tiny[10]"], cases["test_sizes[10]"]
    assert (tiny.calls, one.calls) == (50, 1)
    assert read_dump(counted["dir"] / tiny.dump).instructions == pytest.approx(
        50 * tiny.events["Ir"]
    )
    # the same work a call, but one counted call also carries the fixed cost of being
    # measured (~5 k instructions of the loop and the client requests), which 50 share
    assert 0 < tiny.instructions < one.instructions < tiny.instructions + 10_000


def test_counts_of_a_case_over_other_calls_in_base_are_not_compared():
    """The first PR that gives a case ``count_calls`` compares a mean of 100 calls with
    base's one call: not the same measure, so that case is left to timing once."""
    base = CountRun({"calls": 1}, (CaseCount("t", "counted", instructions=17_000.0),))
    head = CountRun({"calls": 1}, (CaseCount("t", "counted", instructions=11_300.0, calls=100),))
    (change,) = compare_counts(head, base)
    assert change.verdict == "not-counted" and not change.flagged
    assert change.reason.startswith("counted 100 call(s) at a time in head, 1 in base")
    same = CountRun({"calls": 1}, (CaseCount("t", "counted", instructions=11_310.0, calls=100),))
    assert compare_counts(head, same)[0].verdict == "same"


def test_counts_warmed_apart_are_judged_on_instructions_but_not_on_cycles(tmp_path, capsys):
    """A call near the counting's CPU-time line can warm the simulated caches with an
    instrumented call on one side and run plain on the other: the same instructions,
    but the plain side's measured call meets cold caches."""
    base = CaseCount("t", "counted", instructions=1e6, cycles=2.0e6, warmed="instrumented",
                     plain_cpu_s=0.98)  # fmt: skip
    head = CaseCount("t", "counted", instructions=1.03e6, cycles=2.2e6, warmed="plain",
                     plain_cpu_s=1.01)  # fmt: skip
    (change,) = compare_counts(CountRun({}, (head,)), CountRun({}, (base,)))
    assert change.verdict == "regression" and change.instructions_change == pytest.approx(0.03)
    assert change.cycles_change is None and not change.cycles_moved
    assert change.reason == (
        "cycles not compared: the cache-warming call ran plain in head (its plain call "
        "1.01 s CPU), instrumented in base (its plain call 0.98 s CPU)"
    )
    # warmed alike, or one side from a file that does not say: compared as before
    for other in (replace(head, warmed="instrumented"), replace(head, warmed=None)):
        (same,) = compare_counts(CountRun({}, (other,)), CountRun({}, (base,)))
        assert same.cycles_change == pytest.approx(0.1) and same.reason == ""
    # the record keeps both fields through its serialiser
    again = CountRun.from_dict(CountRun({}, (head,)).to_dict()).cases[0]
    assert (again.warmed, again.plain_cpu_s) == ("plain", 1.01)
    # `count compare` prints why the cycles are missing
    files = [
        write_counts(CountRun({}, (c,)), tmp_path / f"{n}.json")
        for n, c in (("h", head), ("b", base))
    ]
    assert cli_main(["count", "compare", "--head", str(files[0]), "--base", str(files[1])]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("regression   t  instructions +3.00% (gate ±1.00%)  (cycles not")
    assert line.endswith(f"({change.reason})") and "cycles +" not in line
    # a count file that says something else is refused with what was expected
    for bad in ({"warmed": "banana"}, {"plain_cpu_s": "fast"}, {"plain_cpu_s": -1.0}):
        doc = CountRun({}, (head,)).to_dict()
        doc["cases"][0].update(bad)
        with pytest.raises(BenchInputError, match=r"a case entry is malformed .*expected .*fix:"):
            CountRun.from_dict(doc)
    # the line is a setting of the counting, given to the counting process
    with pytest.raises(ValueError, match=r"warm_cache_below_s: expected CPU seconds >= 0"):
        CountSettings(warm_cache_below_s=float("nan"))


@needs_valgrind
def test_a_case_decides_per_parameter_set_whether_it_is_counted(counted):
    cases = counted["base"].by_id()
    assert cases["test_sizes[10]"].status == "counted"
    assert cases["test_sizes[1000]"].status == "not-counted"
    assert cases["test_sizes[1000]"].reason == "declared: declared out for this size"


@needs_valgrind
def test_a_case_that_sleeps_is_not_claimed(counted):
    cases = counted["base"].by_id()
    assert cases["test_sleep[30]"].status == "not-counted"
    assert cases["test_sleep[30]"].reason.startswith("waits")
    assert cases["test_sleep[30]"].instructions is None
    assert cases["test_wall[1]"].status == "not-counted"
    assert "declared" in cases["test_wall[1]"].reason


# the guard in a process of its own, as the counting process runs it: 60 calls of a few
# milliseconds of pure Python, then 5 calls that sleep
_GUARD_PROBE = """
import importlib.util, json, sys, time
spec = importlib.util.spec_from_file_location("count_child", sys.argv[1])
child = importlib.util.module_from_spec(spec)
spec.loader.exec_module(child)

def compute():
    total = 0
    for i in range(20_000):
        total += i * i

busy = [child._busy_share(compute)[0] for _ in range(60)]
slept = [child._busy_share(lambda: time.sleep(0.03))[0] for _ in range(5)]
print(json.dumps({"busy": busy, "slept": slept}))
"""


def test_the_wait_guard_reads_computing_calls_as_busy_on_an_overloaded_machine():
    """Four processes a core kept the short computing calls queued for most of their
    wall time; the clocks alone read such calls 42-97 % busy (a queued wait booked on
    the wrong side of a call), the switch count reads them 100 %, and a call that
    sleeps still reads as waiting."""
    child = Path(rlpace.bench.counts.__file__).with_name("_child.py")
    hogs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"])
        for _ in range(4 * (os.cpu_count() or 1))
    ]
    try:
        probe = subprocess.run(
            [sys.executable, "-c", _GUARD_PROBE, str(child)],
            capture_output=True, text=True, timeout=240, check=True,
        )  # fmt: skip
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    readings = json.loads(probe.stdout)
    assert readings["busy"] == [1.0] * 60
    assert all(r is None or r < 0.25 for r in readings["slept"]), readings["slept"]
    assert any(r is not None for r in readings["slept"]), readings["slept"]


def test_why_names_a_builtin_alike_in_base_and_head_whatever_its_address():
    """A real change's "Why did it regress?" listed `<built-in method __new__ of type
    object at 0x7f8ed025ea00>` at 0 calls in base and 514 in head: the type's address
    differs between the two processes, so one function read as two."""
    path = Path(rlpace.bench.counts.__file__).with_name("_child.py")
    spec = importlib.util.spec_from_file_location("count_child_names", path)
    child = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(child)
    names = [
        child._function_key("~", f"<built-in method __new__ of type object at {a}>", [])
        for a in ("0x7f8ed025ea00", "0x7fdb0385EA00")
    ]
    assert names == ["~:<built-in method __new__ of type object>"] * 2
    assert child._function_key("/t/lib/rlpace/a.py", "f", ["/t/lib"]) == "rlpace/a.py:f"


@needs_valgrind
def test_count_files_record_the_toolchain_and_refuse_another(counted, tmp_path, capsys):
    meta = counted["head"].meta
    assert meta["valgrind"].startswith("valgrind-") and meta["python"] and meta["arch"]
    other = CountRun({**counted["base"].meta, "valgrind": "valgrind-3.22.0"}, counted["base"].cases)
    foreign = write_counts(other, tmp_path / "foreign.json")
    head_file = counted["dir"] / "head.json"
    rc = cli_main(["count", "compare", "--head", str(head_file), "--base", str(foreign)])
    assert rc == 2
    assert "valgrind: head" in capsys.readouterr().err
    rc = cli_main(
        ["count", "compare", "--head", str(head_file), "--base", str(foreign), "--allow-mismatch"]
    )
    out = capsys.readouterr()
    assert rc == 0 and "compared anyway" in out.err and "regression" in out.out


@needs_valgrind
def test_aa_widened_with_an_earlier_reading_keeps_the_wider_spread(counted, tmp_path):
    """``count aa --widen``: the gates of another day's (or host's) A/A runs stay where
    they were wider, unless the case is now counted over other calls."""
    runs = [str(counted["dir"] / f"{s}.json") for s in ("base", "base2")]
    fresh = tmp_path / "fresh.json"
    assert cli_main(["count", "aa", *runs, "-o", str(fresh)]) == 0
    gates, _, _, _ = read_gates(fresh)
    assert gates["test_tiny[10]"].calls == 50 and gates["test_loop[3000]"].calls == 1
    doc = json.loads(fresh.read_text())
    doc["meta"]["cpu"] = "another host"
    doc["gates"]["test_loop[3000]"]["spread"] = 0.004  # wider there
    doc["gates"]["test_tiny[10]"] = {"spread": 0.02, "cycles_spread": 0.02, "runs": 4}
    doc["gates"]["test_gone[1]"] = {"spread": 0.003, "cycles_spread": 0.0, "runs": 4}
    earlier = tmp_path / "gates.json"
    earlier.write_text(json.dumps(doc))
    assert cli_main(["count", "aa", *runs, "-o", str(earlier), "--widen", str(earlier)]) == 0
    widened, meta, _, _ = read_gates(earlier)
    assert widened["test_loop[3000]"].spread == 0.004 and widened["test_loop[3000]"].runs == 4
    # read over one call there, 50 here: only this reading describes it
    assert widened["test_tiny[10]"] == gates["test_tiny[10]"]
    assert widened["test_gone[1]"].spread == 0.003
    assert meta["widened_with"]["cpu"] == "another host"


def test_another_interpreter_is_refused_and_a_cpu_model_warned():
    with pytest.raises(EnvironmentMismatchError, match="python: head '3.12.1', base '3.11.7'"):
        count_differences({"python": "3.12.1"}, {"python": "3.11.7"})
    assert count_differences({"cpu": "A"}, {"cpu": "B"}) == [
        "cpu: head 'A', base 'B' (may move some counts)"
    ]


def test_another_allocator_is_refused_like_another_valgrind():
    with pytest.raises(EnvironmentMismatchError, match="allocator: head 'jemalloc 0a1b'"):
        count_differences({"allocator": "jemalloc 0a1b"}, {"allocator": "glibc 2.36 (tuned 1a)"})


def test_counts_without_call_pricing_are_refused_but_gates_read_so_only_warned():
    """Counts that charge the allocator and the type cache what they really did are
    another measure, so they are not compared with priced ones; gates read that way
    are only wider than needed."""
    priced, raw = {"call_pricing": PRICING}, {}
    with pytest.raises(
        EnvironmentMismatchError, match=re.escape(f"call_pricing: head '{PRICING}', base None")
    ):
        count_differences(priced, raw)
    assert count_differences(priced, raw, gates=True) == [
        f"call_pricing: head '{PRICING}', gates None (those gates may be wider than needed)"
    ]


def test_a_bad_allocator_choice_is_refused_with_the_fix(monkeypatch, tmp_path):
    monkeypatch.setenv(ALLOCATOR_ENV, str(tmp_path / "missing.so"))
    with pytest.raises(CountUnavailable, match="missing.so: expected a malloc library.*no such"):
        find_allocator()
    not_a_library = tmp_path / "notes.txt"
    not_a_library.write_text("hello", "utf-8")
    monkeypatch.setenv(ALLOCATOR_ENV, str(not_a_library))
    with pytest.raises(CountUnavailable, match=f"cannot be .*fix: .*or unset {ALLOCATOR_ENV}"):
        find_allocator()
    monkeypatch.setenv(ALLOCATOR_ENV, "/opt/a b:c/libjemalloc.so")
    with pytest.raises(CountUnavailable, match="colon or a space.*fix: link the library"):
        find_allocator()
    monkeypatch.chdir(tmp_path)  # a relative path is made absolute for the counting process
    maps = Path("/proc/self/maps").read_text("utf-8").splitlines()
    libc = next(line.split()[-1] for line in maps if "/libc.so" in line or "/libc-" in line)
    (tmp_path / "lib").mkdir()
    shutil.copy(libc, tmp_path / "lib" / "malloc.so")  # preloading libc changes nothing
    monkeypatch.setenv(ALLOCATOR_ENV, "lib/malloc.so")
    assert find_allocator().library == str(tmp_path / "lib" / "malloc.so")
    monkeypatch.setenv(ALLOCATOR_ENV, "glibc")
    glibc = find_allocator()
    assert glibc.library is None and glibc.environ()["GLIBC_TUNABLES"] == GLIBC_TUNABLES


ENV_PROBE = """
import json
import os

from rlpace.bench.suite import case


@case(timer="cpu")
def test_env():
    keys = ("PYTHONMALLOC", "LD_PRELOAD", "GLIBC_TUNABLES", "PYTHONHASHSEED",
            "MKL_ENABLE_INSTRUCTIONS", "ONEDNN_MAX_CPU_ISA")
    with open(os.environ["PROBE_OUT"], "w") as fh:
        json.dump({k: os.environ.get(k) for k in keys}, fh)
    return lambda: sum(range(100))
"""


def _probe_allocator(tmp_path: Path) -> tuple[dict, CountRun]:
    suite = tmp_path / "tree" / "tests" / "benchmarks"
    suite.mkdir(parents=True)
    (suite / "test_env.py").write_text(ENV_PROBE, "utf-8")
    seen = tmp_path / "env.json"
    run = count_tree(tmp_path / "tree", tmp_path / "out.json", environ={"PROBE_OUT": str(seen)})
    assert run.by_id()["test_env"].counted
    return json.loads(seen.read_text("utf-8")), run


@needs_valgrind
def test_the_counting_process_runs_on_the_chosen_allocator(monkeypatch, tmp_path):
    monkeypatch.setenv(ALLOCATOR_ENV, "glibc")
    env, run = _probe_allocator(tmp_path)
    assert env["PYTHONMALLOC"] == "pymalloc" and env["PYTHONHASHSEED"] == "0"
    assert env["GLIBC_TUNABLES"] == GLIBC_TUNABLES
    assert run.meta["allocator"].startswith("glibc") and "(tuned " in run.meta["allocator"]


@needs_valgrind
def test_the_counting_process_runs_the_sse_matrix_kernels_and_records_them(tmp_path):
    """Valgrind emulates AVX2's fused multiply-adds lane by lane; the counting process
    asks MKL and oneDNN for their SSE4.2 kernels, and a count file says so."""
    env, run = _probe_allocator(tmp_path)
    assert (
        {k: env[k] for k in KERNEL_ENV}
        == KERNEL_ENV
        == {
            "MKL_ENABLE_INSTRUCTIONS": "SSE4_2",
            "ONEDNN_MAX_CPU_ISA": "SSE41",
        }
    )
    assert run.meta["kernels"] == KERNELS


def test_counts_on_other_matrix_kernels_are_refused_with_the_fix():
    with pytest.raises(EnvironmentMismatchError, match=r"kernels: head '.*', base None.*fix:"):
        count_differences({"kernels": KERNELS}, {})
    with pytest.raises(EnvironmentMismatchError, match="kernels"):
        count_differences({"kernels": KERNELS}, {}, gates=True)


def test_counts_that_kept_part_of_the_warm_up_are_refused_and_their_gates_warned():
    with pytest.raises(EnvironmentMismatchError, match=r"warm_up: head '.*', base None.*fix:"):
        count_differences({"warm_up": WARM_UP}, {})
    (warned,) = count_differences({"warm_up": WARM_UP}, {}, gates=True)
    assert warned.startswith("warm_up: head") and "wider than needed" in warned


@needs_valgrind
def test_a_preloaded_allocator_reaches_the_counting_process(monkeypatch, tmp_path):
    monkeypatch.delenv(ALLOCATOR_ENV, raising=False)
    assert find_allocator().name == "glibc"  # the default
    # any library the interpreter can preload shows the mechanism: the count tier's shim
    monkeypatch.setenv(ALLOCATOR_ENV, str(find_toolchain().shim))
    found = find_allocator()
    env, run = _probe_allocator(tmp_path)
    # Valgrind adds its own preloads beside ours
    assert env["PYTHONMALLOC"] == "pymalloc"
    assert found.library in env["LD_PRELOAD"].split(":")
    assert env["GLIBC_TUNABLES"] is None and run.meta["allocator"] == found.identity


def _recount_with(monkeypatch, tmp_path, changes, again):
    """Run ``tier._recount`` over ``changes`` with the second counts judged as
    ``again`` (test id -> change); returns what it kept, the ids it counted again and
    the settings the second counting got."""
    from rlpace.bench.counts import tier as tier_module

    seen = {}

    def count_again(jobs, *, settings, on_case=None):
        seen["select"], seen["keyword"] = settings.select, settings.keyword
        seen["ids"] = settings.ids
        seen["outputs"] = [job.output for job in jobs]
        return [CountRun({}, ()), CountRun({}, ())]

    def judge(head, base):
        return [again[i] for i in seen["ids"] if i in again]

    monkeypatch.setattr(tier_module, "count_trees", count_again)
    jobs = [
        CountJob(tmp_path, tmp_path / "o" / "base.json"),
        CountJob(tmp_path, tmp_path / "o" / "head.json"),
    ]
    kept, recounted = tier_module._recount(
        changes, jobs, CountSettings(keyword="not torchrl"), None, judge
    )
    return {c.test_id: c for c in kept}, recounted, seen


def test_a_count_change_not_repeated_without_the_other_cases_is_dropped(monkeypatch, tmp_path):
    """A few count changes, of any size, are counted again, those cases without the
    others on both sides; one the second counts do not repeat is dropped with both
    figures (an A/A run counted a buffer case +8.0 % when its once-a-minute sweep fell
    in the measured call on one side), the others stand."""
    changes = [
        CountChange("a", "regression", instructions_change=0.015, gate=0.01),
        CountChange("b", "regression", instructions_change=0.02, gate=0.01),
        CountChange("c", "regression", instructions_change=0.08, gate=0.01),
        CountChange("d", "same", instructions_change=0.001, gate=0.01),
        CountChange("e", "improvement", instructions_change=-0.017, gate=0.01),
        CountChange("f", "regression", instructions_change=0.12, gate=0.01),
    ]
    again = {
        "a": CountChange("a", "same", instructions_change=0.001, gate=0.01),
        "b": CountChange("b", "regression", instructions_change=0.021, gate=0.01),
        "c": CountChange("c", "same", instructions_change=0.0004, gate=0.01),
        "e": CountChange("e", "same", instructions_change=0.0, gate=0.01),
        "f": CountChange("f", "regression", instructions_change=0.119, gate=0.01),
    }
    verdicts, recounted, seen = _recount_with(monkeypatch, tmp_path, changes, again)
    assert recounted == ("a", "b", "c", "e", "f") and seen["ids"] == recounted
    assert seen["select"] == () and seen["keyword"] is None
    assert [o.parent.name for o in seen["outputs"]] == ["alone", "alone"]
    assert verdicts["a"].verdict == "same"
    assert "other cases +1.50%, alone +0.10% (gate 1.00%)" in verdicts["a"].reason
    assert verdicts["c"].verdict == "same"
    assert "other cases +8.00%, alone +0.04% (gate 1.00%)" in verdicts["c"].reason
    assert "work on a clock" in verdicts["c"].reason
    assert [verdicts[t].verdict for t in "bdf"] == ["regression", "same", "regression"]
    assert verdicts["e"].verdict == "same" and "other cases -1.70%, alone +0.00%" in (
        verdicts["e"].reason
    )


def test_among_many_count_changes_only_the_small_ones_are_counted_again(monkeypatch, tmp_path):
    """Beyond RECOUNT_ALL_UP_TO changes (a change to a hot path) only those under
    RECOUNT_BELOW are counted again: the large ones stand as counted."""
    from rlpace.bench.counts import tier as tier_module

    large = [
        CountChange(f"big{i}", "regression", instructions_change=0.05 + i / 100, gate=0.01)
        for i in range(tier_module.RECOUNT_ALL_UP_TO)
    ]
    changes = [
        *large,
        CountChange("s", "regression", instructions_change=0.015, gate=0.01),
        CountChange("t", "improvement", instructions_change=-0.018, gate=0.01),
    ]
    again = {
        "s": CountChange("s", "same", instructions_change=0.001, gate=0.01),
        "t": CountChange("t", "improvement", instructions_change=-0.018, gate=0.01),
    }
    verdicts, recounted, _ = _recount_with(monkeypatch, tmp_path, changes, again)
    assert recounted == ("s", "t")
    assert verdicts["s"].verdict == "same" and verdicts["t"].verdict == "improvement"
    assert all(verdicts[c.test_id] == c for c in large)


def test_when_counting_again_fails_the_first_verdicts_stand(monkeypatch, tmp_path):
    from rlpace.bench.counts import tier as tier_module

    changes = [CountChange("a", "regression", instructions_change=0.015, gate=0.01)]

    def unavailable(jobs, *, settings, on_case=None):
        raise CountUnavailable("valgrind vanished")

    monkeypatch.setattr(tier_module, "count_trees", unavailable)
    jobs = [CountJob(tmp_path, tmp_path / "base.json"), CountJob(tmp_path, tmp_path / "h.json")]
    kept, recounted = tier_module._recount(changes, jobs, None, None, lambda h, b: [])
    assert kept == changes and recounted == ()


LEFT_BEHIND = (
    """
import os

from rlpace.bench.suite import case

_left = {{}}


@case(timer="cpu")
def test_a_first():
    if os.environ.get("RLPACE_TEST_LEAVE"):
        _left["extra"] = list(range(2000))  # state a later case pays for
    return lambda: sum(range(1000))


@case(timer="cpu")
def test_b_then():
    data = list(range(3000))
    return lambda: sum(x * x for x in data) + sum(_left.get("extra", ()))

"""
    + LOOP_CASE
)


@needs_valgrind
def test_a_change_left_by_an_earlier_case_is_dropped_and_a_real_one_kept(tmp_path):
    """The count tier end to end, on both kinds of count change a pull request can
    show. ``test_b_then`` pays for state an earlier case left behind on the head side
    only (as a buffer pays for the once-a-minute sweep its process's clock owes): its
    code is the same on both sides, and counted without the other cases it does not
    move, so it is dropped. ``test_loop``'s head adds real work, which repeats."""
    trees = {}
    for side, extra in (
        ("base", ""),
        ("head", "total += sum([x * 2 for x in data[: len(data) // 5]])"),
    ):
        suite = tmp_path / side / "tests" / "benchmarks"
        suite.mkdir(parents=True)
        (suite / "test_left.py").write_text(LEFT_BEHIND.format(extra=extra), "utf-8")
        trees[side] = tmp_path / side
    tier = run_count_tier(
        head_tree=trees["head"],
        base_tree=trees["base"],
        head_python=Path(sys.executable),
        base_python=Path(sys.executable),
        out_dir=tmp_path / "out",
        environ={"base": {}, "head": {"RLPACE_TEST_LEAVE": "1"}},
        settings=CountSettings(python_calls=0),
    )
    assert tier.unavailable is None
    changes = {c.test_id: c for c in tier.changes}
    assert set(tier.recounted) == {"test_b_then", "test_loop[3000]"}
    assert changes["test_b_then"].verdict == "same"
    first = float(re.search(r"other cases ([+-][\d.]+)%", changes["test_b_then"].reason)[1])
    assert first > 5  # it was flagged, well beyond any gate, before it was counted again
    assert changes["test_loop[3000]"].verdict == "regression"
    assert 0.03 < changes["test_loop[3000]"].instructions_change < 0.3
    assert changes["test_a_first"].verdict == "same"
    assert [c for c in tier.changes if c.flagged] == [changes["test_loop[3000]"]]


def test_missing_valgrind_falls_back_to_timing_with_a_plain_message(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(CountUnavailable, match="valgrind is not installed.*falls back to timing"):
        find_toolchain()
    tier = run_count_tier(
        head_tree=tmp_path,
        base_tree=tmp_path,
        head_python=Path("python"),
        base_python=Path("python"),
        out_dir=tmp_path,
        environ={},
    )
    assert tier.unavailable.startswith("valgrind is not installed")
    timing = Comparison(rows=(BenchmarkChange("t.py::a", "a", Verdict.UNCHANGED),))
    joined = apply_count_tier(timing, tier)
    assert joined.rows == timing.rows and joined.count_tier["unavailable"] == tier.unavailable
    _tree(tmp_path / "repo", "")
    assert cli_main(["count", "run", "--root", str(tmp_path / "repo")]) == 3
    assert "falls back to timing" in capsys.readouterr().err


def test_a_count_regression_whose_time_did_not_move_is_labelled():
    timing = Comparison(
        rows=(
            BenchmarkChange("t.py::a", "a", Verdict.UNCHANGED, median_change_pct=-0.3),
            BenchmarkChange("t.py::b", "b", Verdict.WORSENED, median_change_pct=-12.0),
            BenchmarkChange("t.py::c", "c", Verdict.UNCHANGED),
        )
    )
    base = CountRun(
        {},
        (
            CaseCount("a", "counted", instructions=1e6, cycles=2e6),
            CaseCount("b", "counted", instructions=1e6, cycles=2e6),
            CaseCount("c", "not-counted", reason="waits: 3%"),
        ),
    )
    head = CountRun(
        {},
        (
            CaseCount("a", "counted", instructions=1.03e6, cycles=2.1e6),
            CaseCount("b", "counted", instructions=1e6, cycles=2e6),
            CaseCount("c", "not-counted", reason="waits: 3%"),
        ),
    )
    tier = CountTier(changes=tuple(compare_counts(head, base)))
    rows = {r.name: r for r in apply_count_tier(timing, tier).rows}
    assert rows["a"].verdict is Verdict.WORSENED
    assert rows["a"].count_note == "count regression; time did not move enough to flag (time +0.3%)"
    assert rows["a"].count_change_pct == pytest.approx(3.0)
    assert rows["b"].verdict is Verdict.WORSENED and "did not move" in rows["b"].count_note
    assert rows["c"].count_verdict == "not-counted" and "waits" in rows["c"].count_note
    data = apply_count_tier(timing, tier).to_dict()
    assert data["rows"][0]["count_verdict"] == "regression"
    assert data["count_tier"]["verdicts"] == {"regression": 1, "same": 1, "not-counted": 1}


def test_a_clock_flag_of_a_case_timed_once_for_display_is_shown_not_judged():
    """pr times the counted CPU-clock cases once a side: one duet swung untouched buffer
    cases by 13-39 %. Their counts decide; a counted case timed in every duet (a
    wall-clock one) keeps its clock's flag, with the note."""
    timing = Comparison(
        rows=(
            BenchmarkChange("t.py::once", "once", Verdict.WORSENED, median_change_pct=-23.6,
                            head_runs=1, base_runs=1),
            BenchmarkChange("t.py::duets", "duets", Verdict.WORSENED, median_change_pct=-20.0,
                            head_runs=4, base_runs=4),
        )
    )  # fmt: skip
    same = CountRun({}, tuple(CaseCount(n, "counted", instructions=1e6) for n in ("once", "duets")))
    changes = tuple(compare_counts(same, same))
    rows = {r.name: r for r in apply_count_tier(timing, CountTier(changes, timed_once=True)).rows}
    assert rows["once"].verdict is Verdict.UNCHANGED
    assert rows["once"].count_note == (
        "instructions did not move; timed once a side for display, so the clock's "
        "time +23.6% is shown, not judged"
    )
    assert rows["duets"].verdict is Verdict.WORSENED
    assert rows["duets"].count_note.startswith("instructions did not move: the time changed")
    # without the pass that timed them once, the clock's flag stands as before
    plain = {r.name: r for r in apply_count_tier(timing, CountTier(changes)).rows}
    assert plain["once"].verdict is Verdict.WORSENED
    # a count regression of a case timed once: its time is not read as a verdict either
    # (a real change's comment said "time did not move enough to flag (time -42.6%)")
    faster = replace(timing, rows=(replace(timing.rows[0], verdict=Verdict.IMPROVED,
                                           median_change_pct=42.6),))  # fmt: skip
    more = CountRun({}, (CaseCount("once", "counted", instructions=1.03e6),))
    moved = tuple(compare_counts(more, same))
    (row,) = apply_count_tier(faster, CountTier(moved, timed_once=True)).rows
    assert row.verdict is Verdict.WORSENED and row.time_verdict == "improved"
    assert row.count_note == (
        "count regression; its time, taken once a side for display, is shown, not judged "
        "(time -42.6%)"
    )


def test_a_case_with_both_counts_reads_the_clocks_own_verdict_not_the_work_counts():
    """A real change (a finite-action check in Rollout, 2026-12-07) flagged
    collector_startup[single] by its work counts and its instructions while its time
    read 1.5x faster; the comment said "count and time regression", because the count
    tier read the verdict the work counts had already set as the clock's."""
    from rlpace.bench.comparison_record import record_from_dict
    from rlpace.bench.render import COUNTS_MARK, render_report
    from rlpace.bench.results import results_from_records
    from rlpace.bench.work_counts.join import apply_work_counts

    def work(ops):
        return {"work_counts": {"calls": 4, "kernels": [0] * 4, "syncs": [0] * 4,
                                "copies": [0] * 4, "ops": [ops] * 4}}  # fmt: skip

    names = ("faster", "slower", "steady", "work-only")
    base = results_from_records(
        [{"fullname": f"t.py::{n}", "data": [1.0], "extra_info": work(100)} for n in names]
    )
    head = results_from_records(
        [{"fullname": f"t.py::{n}", "data": [1.0],
          "extra_info": work(100 if n == "steady" else 112)} for n in names]
    )  # fmt: skip
    clock = {"faster": (Verdict.IMPROVED, 50.7), "slower": (Verdict.WORSENED, -9.0),
             "steady": (Verdict.UNCHANGED, 0.4), "work-only": (Verdict.UNCHANGED, -0.2)}  # fmt: skip
    timing = Comparison(
        rows=tuple(
            BenchmarkChange(f"t.py::{n}", n, v, median_change_pct=pct)
            for n, (v, pct) in clock.items()
        )
    )
    worked = apply_work_counts(timing, head, base)
    by_work = {r.name: r for r in worked.rows}
    assert by_work["faster"].verdict is Verdict.WORSENED  # the work counts decided
    assert by_work["faster"].clock_verdict is Verdict.IMPROVED
    assert by_work["steady"].time_verdict is None  # nothing replaced: verdict is the clock's

    def counted(n, instructions):
        return CaseCount(n, "counted", instructions=instructions, cycles=2e6)

    base_counts = CountRun({}, tuple(counted(n, 1e6) for n in names))
    head_counts = CountRun(
        {}, tuple(counted(n, 1e6 if n == "work-only" else 1.04e6) for n in names)
    )
    tier = CountTier(changes=tuple(compare_counts(head_counts, base_counts)))
    joined = apply_count_tier(worked, tier)
    rows = {r.name: r for r in joined.rows}
    assert rows["faster"].verdict is Verdict.WORSENED
    assert rows["faster"].count_note == (
        "count regression, though the clock says faster (time -50.7%)"
    )
    assert rows["faster"].counts_decided and rows["faster"].time_verdict == "improved"
    assert rows["slower"].count_note == "count and time regression"
    assert not rows["slower"].counts_decided
    assert rows["steady"].count_note == (
        "count regression; time did not move enough to flag (time -0.4%)"
    )
    assert rows["steady"].time_verdict == "unchanged" and rows["steady"].counts_decided
    assert rows["work-only"].verdict is Verdict.WORSENED
    assert rows["work-only"].count_note == "instructions did not move; its work counts decided"
    # the record keeps what the clock said, and reads it back
    data = json.loads(json.dumps(joined.to_dict()))
    data["pipeline"] = {"set": "cpu"}
    again = record_from_dict(data, source="cpu.json").comparison
    assert {r.name: r.time_verdict for r in again.rows} == {
        "faster": "improved",
        "slower": "worsened",
        "steady": "unchanged",
        "work-only": "unchanged",
    }
    data["rows"][0]["time_verdict"] = "faster"  # the trusted job refuses what it cannot mean
    with pytest.raises(BenchInputError, match=r"time_verdict"):
        record_from_dict(data, source="cpu.json")
    # the comment marks the time of the rows the counts flagged, and says why
    text = render_report({"cpu": joined}, title="PR")
    assert f"+50.7% (1.51× faster) {COUNTS_MARK}" in text
    assert f"-9.0% (1.10× slower) {COUNTS_MARK}" not in text and "-9.0% (1.10× slower) |" in text
    assert f"_{COUNTS_MARK} Flagged by its instruction or work counts" in text


def test_the_calibration_of_runs_one_after_another_is_cited_only_where_it_judged_a_row():
    """With the count tier on, the counts decide the counted cases (timed once a side)
    and the duets the timed ones: the sequential calibration judged nothing that
    stands, so the comment must not cite its false-alarm and detection figures as the
    run's. A row still judged on its time unpaired (a base whose cases were not split
    into passes) keeps the citation."""
    from rlpace.bench.controls import NoiseFloor
    from rlpace.bench.render import render_report

    note = {"source": "reports/calibration/cpu.json", "pool": 32}
    once = BenchmarkChange("t.py::once", "once", Verdict.UNCHANGED, head_runs=1, base_runs=1)
    paired = BenchmarkChange(
        "t.py::waits", "waits", Verdict.UNCHANGED, head_runs=4, base_runs=4, method="paired"
    )
    twin = BenchmarkChange(
        "t.py::once[torchrl]", "once[torchrl]", Verdict.UNCHANGED, impl="torchrl",
        head_runs=1, base_runs=1,
    )  # fmt: skip
    same = CountRun({}, (CaseCount("once", "counted", instructions=1e6),))
    tier = CountTier(tuple(compare_counts(same, same)), timed_once=True)
    timing = Comparison(rows=(once, paired, twin), paired=4, calibration=note)
    joined = apply_count_tier(timing, tier)
    assert joined.calibration is None
    text = render_report({"cpu": joined}, title="PR")
    assert "Calibrated noise" not in text
    # the shift floor gates the rows judged pair by pair, whose pairs replace the
    # calibration: the summary line says so
    floored = replace(joined, noise_floor=NoiseFloor(controls=8, location_pct=0.5, spread_pct=2.0))
    assert "for benchmarks judged pair by pair or with calibrated noise;" in render_report(
        {"cpu": floored}, title="PR"
    )
    unpaired = replace(floored, paired=0)
    assert "for benchmarks with calibrated noise;" in render_report({"cpu": unpaired}, title="PR")
    # a declared-out case of an old base, timed once a side and judged unpaired
    alone = BenchmarkChange("t.py::sac", "sac", Verdict.UNCHANGED, head_runs=1, base_runs=1)
    kept = apply_count_tier(replace(timing, rows=(*timing.rows, alone)), tier)
    assert kept.calibration == note
    assert "Calibrated noise: `reports/calibration/cpu.json` (32 A/A runs)" in render_report(
        {"cpu": kept}, title="PR"
    )


def test_a_malformed_count_file_is_refused_with_the_fix(tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"format": "rlpace-counts", "version": 0}), "utf-8")
    with pytest.raises(ValueError, match="expected count format version 1, got 0; fix"):
        read_counts(path)


HANGS = """
import time

from rlpace.bench.suite import case


@case(timer="cpu")
def test_hangs():
    time.sleep(120)  # the setup never returns in time
    return lambda: None


@case(timer="cpu")
def test_after():
    data = list(range(200))
    return lambda: sum(data)


@case()
def test_workers():
    return lambda: None
"""


@needs_valgrind
def test_a_case_that_times_out_is_reported_and_the_rest_still_counted(tmp_path):
    suite = tmp_path / "tree" / "tests" / "benchmarks"
    suite.mkdir(parents=True)
    (suite / "test_hangs.py").write_text(HANGS, "utf-8")
    settings = CountSettings(case_timeout=4, python_calls=0)
    run = count_tree(tmp_path / "tree", tmp_path / "out.json", settings=settings)
    cases = run.by_id()
    assert [c.test_id for c in run.cases] == ["test_hangs", "test_after", "test_workers"]
    assert cases["test_hangs"].status == "timed-out" and "4 s" in cases["test_hangs"].reason
    assert cases["test_after"].counted
    assert cases["test_workers"].status == "not-counted"
    assert read_counts(tmp_path / "out.json").by_id()["test_hangs"].status == "timed-out"


@needs_valgrind
def test_exact_ids_choose_that_case_and_not_a_longer_one(tmp_path):
    """The recount asks for exact ids: ``test_add`` must not bring ``test_add_inplace``
    (a substring and a glob would)."""
    suite = tmp_path / "tree" / "tests" / "benchmarks"
    suite.mkdir(parents=True)
    (suite / "test_ids.py").write_text(
        "from rlpace.bench.suite import case\n\n\n"
        "@case()\ndef test_add():\n    return lambda: None\n\n\n"
        "@case()\ndef test_add_inplace():\n    return lambda: None\n",
        "utf-8",
    )
    exact = CountSettings(ids=("test_add",))
    run = count_tree(tmp_path / "tree", tmp_path / "out.json", settings=exact)
    assert [c.test_id for c in run.cases] == ["test_add"]
    both = CountSettings(select=("test_add",))
    run = count_tree(tmp_path / "tree", tmp_path / "out2.json", settings=both)
    assert [c.test_id for c in run.cases] == ["test_add", "test_add_inplace"]


def _count_probe(
    tmp_path: Path, source: str, environ: dict[str, str] | None = None
) -> tuple[CountRun, str]:
    """Count a one-file suite under ``tmp_path`` (extra ``environ`` for the counting
    process) whose case may write what it saw to ``$SEEN``; the run and that text."""
    suite = tmp_path / "tree" / "tests" / "benchmarks"
    suite.mkdir(parents=True)
    (suite / "test_probe.py").write_text(source, "utf-8")
    seen = tmp_path / "seen.txt"
    run = count_tree(
        tmp_path / "tree", tmp_path / "head.json", environ={"SEEN": str(seen), **(environ or {})},
        settings=CountSettings(python_calls=0),
    )  # fmt: skip
    return run, seen.read_text() if seen.is_file() else ""


@needs_valgrind
def test_the_counting_process_gets_an_empty_temporary_folder_of_its_own(tmp_path):
    """What a case finds in the temporary folder must not depend on the machine's
    ``/tmp`` (a memmap buffer's janitor scans it): each side gets ``<stem>.tmp``."""
    (tmp_path / "head.tmp").mkdir()
    (tmp_path / "head.tmp" / "left-over").touch()  # emptied first
    run, seen = _count_probe(
        tmp_path,
        "import os, tempfile\nfrom pathlib import Path\n"
        "from rlpace.bench.suite import case\n\n\n"
        '@case(timer="cpu")\ndef test_tmp():\n'
        '    Path(os.environ["SEEN"]).write_text(tempfile.gettempdir() + "|" + '
        "str(sorted(os.listdir(tempfile.gettempdir()))))\n"
        "    return lambda: sum(range(100))\n",
    )
    assert run.by_id()["test_tmp"].counted
    folder, _, entries = seen.partition("|")
    assert folder == str(tmp_path / "head.tmp")
    assert "left-over" not in entries  # only Valgrind's own vgdb pipes, if any
    assert all(name.startswith("vgdb-") for name in ast.literal_eval(entries))


@needs_valgrind
def test_a_suite_with_nothing_to_count_starts_no_valgrind(tmp_path):
    suite = tmp_path / "tree" / "tests" / "benchmarks"
    suite.mkdir(parents=True)
    (suite / "test_wall.py").write_text(
        HANGS.split('@case(timer="cpu")')[0]
        + ("\n@case()\ndef test_wall():\n    return lambda: None\n"),
        "utf-8",
    )
    run = count_tree(tmp_path / "tree", tmp_path / "out.json")
    assert [(c.test_id, c.status) for c in run.cases] == [("test_wall", "not-counted")]
    assert not list((tmp_path / "out.dumps").glob("cg.*"))


@needs_valgrind
def test_asv_tracks_the_counts_of_the_claimed_cases(tmp_path, monkeypatch):
    import importlib
    import sys

    tree = _tree(tmp_path / "tree", "")
    monkeypatch.setenv("RLPACE_SUITE_DIR", str(tree / "tests" / "benchmarks"))
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "asv_bench"))
    for name in [n for n in sys.modules if n == "benchmarks" or n.startswith("benchmarks.")]:
        monkeypatch.delitem(sys.modules, name)
    counts = importlib.import_module("benchmarks.counts").Counts
    # per parameter set: test_sizes[1000] is declared out
    assert counts.params == [
        ["test_loop[3000]", "test_dict[500]", "test_sizes[10]", "test_tiny[10]", "test_sleep[30]"]
    ]
    bench = counts()
    data = bench.setup_cache()
    bench.setup(data, "test_loop[3000]")
    assert bench.track_instructions(data, "test_loop[3000]") > 10_000
    assert bench.track_estimated_cycles(data, "test_loop[3000]") > 10_000
    with pytest.raises(NotImplementedError, match="waits"):
        bench.setup(data, "test_sleep[30]")


def test_the_comment_shows_count_and_time_side_by_side_and_why():
    from rlpace.bench.counts.why import Growth, RegressionCause
    from rlpace.bench.render import render_report

    timing = Comparison(
        rows=(
            BenchmarkChange("t.py::a", "a", Verdict.UNCHANGED, median_change_pct=-0.3),
            BenchmarkChange("t.py::w", "w", Verdict.UNCHANGED, median_change_pct=1.0),
        )
    )
    base = CountRun(
        {},
        (
            CaseCount("a", "counted", instructions=1e6, cycles=2e6),
            CaseCount("w", "not-counted", reason="waits: 3%"),
        ),
    )
    head = CountRun(
        {},
        (
            CaseCount("a", "counted", instructions=1.03e6, cycles=2.1e6),
            CaseCount("w", "not-counted", reason="waits: 3%"),
        ),
    )
    cause = RegressionCause(
        "a",
        3e4,
        (Growth("ceval.c:_PyEval_EvalFrameDefault", 9e5, 9.3e5),),
        (Growth("rlpace/data/_buffer.py:_check", 0, 64),),
        (Growth("rlpace/trainers/_timing.py:__exit__", 12_000, 15_000),),
    )
    tier = CountTier(changes=tuple(compare_counts(head, base)), causes={"a": cause}, wall_s=90)
    text = render_report({"cpu": apply_count_tier(timing, tier)}, title="PR")
    assert "#### Counts (instructions under Callgrind)" in text
    row = next(line for line in text.splitlines() if line.startswith("| a | +3.00%"))
    assert "+5.00%" in row and "+0.3%" in row and "time did not move enough to flag" in row
    assert "<details><summary>Why did a regress? (+30,000 instructions per call)" in text
    assert "| `rlpace/data/_buffer.py:_check` | 0 | 64 |" in text
    assert "Python functions that ran more bytecode themselves" in text
    assert "| `rlpace/trainers/_timing.py:__exit__` | 12,000 | 15,000 | +3,000 |" in text
    assert "- w: waits: 3%" in text
    # a small regression the lone recount did not repeat: listed with both figures
    dropped = CountChange(
        "a", "same", 1e6, 1.0015e6, 0.0015, gate=0.01,
        reason="counted among the other cases +1.47%, alone +0.21% (gate 1.00%): the process "
        "around it moved it (what ran before it, the heap's layout, work on a clock), not the change",
    )  # fmt: skip
    recounted = CountTier(changes=(dropped,), wall_s=90, recounted=("a",))
    text = render_report({"cpu": apply_count_tier(timing, recounted)}, title="PR")
    assert "_1 count change counted again, without the other cases on both sides" in text
    assert "1 not repeated, dropped._" in text
    assert "- a: counted among the other cases +1.47%, alone +0.21% (gate 1.00%)" in text
    off = apply_count_tier(timing, CountTier(unavailable="valgrind is not installed"))
    assert "_Count tier off: valgrind is not installed._" in render_report({"cpu": off})
    assert "Counts (instructions" not in render_report({"cpu": timing})


ORPHAN = """
import time

from rlpace.bench.suite import case


@case(timer="cpu")
def test_first():
    time.sleep(4)  # setup: not counted, long enough to kill the driver meanwhile
    return lambda: sum(range(100))


@case(timer="cpu")
def test_second():
    time.sleep(60)  # an orphan that went on would still be here when the test looks
    return lambda: sum(range(100))
"""


def _counting_driver(tmp_path, find_processes, code, processes=1, **popen):
    """A process running ``code`` (``sys.argv[1]``: a tree with the ORPHAN suite), once
    its ``processes`` Valgrind processes are counting a case."""
    import subprocess
    import sys
    import time

    suite = tmp_path / "tree" / "tests" / "benchmarks"
    suite.mkdir(parents=True)
    (suite / "test_orphan.py").write_text(ORPHAN, "utf-8")
    # SIGINT handled as under a terminal: a test run started in a script's background
    # inherits it ignored (POSIX), and Python keeps an ignored SIGINT ignored
    imports = (
        "import signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "import sys; from pathlib import Path; from rlpace.bench.counts.session import *; "
    )
    driver = subprocess.Popen(
        [sys.executable, "-c", imports + code, str(suite.parents[1])], **popen
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (
        len(find_processes(b"valgrind", str(tmp_path).encode())) >= processes
        and any(b'"start"' in p.read_bytes() for p in tmp_path.glob("*.dumps/*progress*"))
    ):
        time.sleep(0.2)
    assert find_processes(b"valgrind", str(tmp_path).encode()), "the counting never started"
    return driver


@needs_valgrind
def test_a_killed_driver_leaves_no_valgrind_process_behind(tmp_path, find_processes, survivors):
    """SIGKILL the process that drives the counting: its Valgrind child (in a session
    of its own) must stop at the next case, not count on for an hour."""
    import os
    import signal

    code = (
        "t = Path(sys.argv[1]); "
        "count_tree(t, t.parent / 'out.json', settings=CountSettings(python_calls=0))"
    )
    driver = _counting_driver(tmp_path, find_processes, code)
    os.kill(driver.pid, signal.SIGKILL)
    driver.wait()
    left = survivors(b"valgrind", str(tmp_path).encode(), within=30)
    assert not left, "Valgrind kept counting after its driver was killed"


@needs_valgrind
def test_ctrl_c_ends_side_by_side_counting_at_once(tmp_path, find_processes, survivors):
    """Ctrl-C while ``count_trees`` (what ``pr`` runs) waits on base and head: both
    Valgrind processes are killed then and there, not when their cases are done (a
    minute here, five in the CPU set), and no count file is written."""
    import os
    import signal
    import subprocess

    code = (
        "t = Path(sys.argv[1]); count_trees([CountJob(t, t.parent / 'base.json'), "
        "CountJob(t, t.parent / 'head.json')], settings=CountSettings(python_calls=0))"
    )
    driver = _counting_driver(tmp_path, find_processes, code, 2, stderr=subprocess.PIPE)
    os.kill(driver.pid, signal.SIGINT)
    try:
        _, err = driver.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        driver.kill()
        pytest.fail("the driver went on counting after Ctrl-C")
    assert driver.returncode != 0 and b"KeyboardInterrupt" in err
    assert not survivors(b"valgrind", str(tmp_path).encode(), within=5)
    assert not list(tmp_path.glob("*.json"))


_DUMP_HEADER = (
    "desc: Trigger: Client Request: {id}\nevents: Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw\n"
    "summary: {ir} 10 10 1 1 1 {ilmr} 1 1\n"
)
"""The header of a dump as Callgrind writes it, with its trigger, Ir and ILmr to fill."""


def test_a_dump_whose_instruction_counter_wrapped_is_not_a_count(tmp_path):
    """A dump without a ``totals:`` line falls back to its summary; an ``Ir`` that wrapped
    below zero there is never a count of 0, and a wrapped miss counter reads 0."""
    from rlpace.bench.counts.session import _case

    dumps = tmp_path / "run.dumps"
    dumps.mkdir()
    header = _DUMP_HEADER
    (dumps / "cg.1.1").write_text(header.format(id="t_thread", ir=2**64 - 5, ilmr=1))
    (dumps / "cg.1.2").write_text(header.format(id="t_plain", ir=1000, ilmr=2**64 - 2))
    found = read_dumps(dumps)
    assert found["t_thread"].wrapped[0] == "Ir" and found["t_plain"].wrapped == ("ILmr",)
    settings = CountSettings()
    thread = _case("t_thread", {"status": "counted"}, found, settings, tmp_path / "run.json")
    assert thread.status == "not-counted" and "wrapped below zero" in thread.reason
    plain = _case("t_plain", {"status": "counted"}, found, settings, tmp_path / "run.json")
    assert plain.status == "counted" and plain.instructions == 1000.0  # a miss counter clamps
    # the totals at the end of a dump, the sum of its cost lines, win over its summary
    (dumps / "cg.1.3").write_text(
        header.format(id="t_totals", ir=2**64 - 5, ilmr=1)
        + "fn=(1) f\n0 10\n" * 3
        + "totals: 4321 10 10 1 1 1 1 1 1\n"
    )
    totals = read_dumps(dumps)["t_totals"]
    assert totals.instructions == 4321.0 and totals.wrapped == ()


def test_a_warm_up_dump_left_behind_is_never_read_as_a_case(tmp_path):
    """The counting process deletes each warm-up's throwaway dump; one it could not
    delete (or a case named like it) is skipped, and the case's own dump is read."""
    dumps = tmp_path / "run.dumps"
    dumps.mkdir()
    (dumps / "cg.1.1").write_text(_DUMP_HEADER.format(id=WARM_TRIGGER, ir=999, ilmr=1))
    (dumps / "cg.1.2").write_text(_DUMP_HEADER.format(id="test_x", ir=1000, ilmr=1))
    (dumps / "cg.1.3").write_text(_DUMP_HEADER.format(id=WARM_TRIGGER, ir=998, ilmr=1))
    found = read_dumps(dumps)
    assert set(found) == {"test_x"} and found["test_x"].instructions == 1000.0


PRICED_DUMP = """events: Ir Dr
fl=(1) /src/app.c
fn=(1) work
0 1000 100
cfl=(2) /build/Python-3.11.7/Objects/obmalloc.c
cfn=(2) PyObject_Malloc
calls=10 0
0 900 90
cfl=(3) ???
cfn=(3) 0x0000000004936730
calls=4 0
0 500 50
cfl=(4) ./malloc/./malloc/malloc.c
cfn=(4) free
calls=3 0
0 200 20
cfl=(7) /build/Python-3.11.7/Objects/typeobject.c
cfn=(7) _PyType_Lookup
calls=5 0
0 400 80
fl=(2)
fn=(2)
0 400 40
cfl=(3)
cfn=(3)
calls=2 0
0 500 50
fl=(3)
fn=(3)
0 12 0
cfl=(4)
cfn=(5) malloc
calls=6 0
0 988 100
fl=(4)
fn=(5)
0 988 100
cfl=(3)
cfn=(6) 0x0000000000401020
calls=1 0
0 7 1
fl=(3)
fn=(6)
0 7 1
fl=(7)
fn=(7)
0 250 50
cfl=(8) /build/Python-3.11.7/Objects/typeobject.c
cfn=(8) find_name_in_mro
calls=2 0
0 150 30
"""


def test_a_priced_call_costs_the_same_whatever_it_did_inside(tmp_path):
    """Calls into pymalloc, glibc's ``malloc`` or ``_PyType_Lookup`` from other code cost
    a fixed price; one allocator function calling another (``PyObject_Malloc`` ->
    ``malloc@plt`` -> ``malloc``) is part of the call that entered it, and a stub
    called both from inside and from outside is charged only for its calls from
    outside. A lookup that missed the cache (``find_name_in_mro``) costs a hit's price."""
    path = tmp_path / "cg.1.1"
    path.write_text(PRICED_DUMP)
    costs = priced_calls(path)
    alloc, lookup = costs["allocator"], costs["type_lookup"]
    # work -> PyObject_Malloc (10 calls, 900), work -> free (3, 200), and of the stub's
    # 6 calls into malloc (988), the 2 from PyObject_Malloc (500) are already inside
    assert alloc.calls == 10 + 3 + (6 - 2)
    assert alloc.events == {"Ir": 900 + 200 + (988 - 500), "Dr": 90 + 20 + (100 - 50)}
    assert (lookup.calls, lookup.events) == (5, {"Ir": 400.0, "Dr": 80.0})
    prices = {f.name: f.price for f in FAMILIES}
    priced = priced_events({"Ir": 5000.0, "Dr": 500.0}, costs)
    assert priced == {
        "Ir": 5000 - 1588 - 400 + 17 * prices["allocator"] + 5 * prices["type_lookup"],
        "Dr": 500 - 160 - 80,
    }


def test_a_dump_without_priced_calls_keeps_its_count(tmp_path):
    path = tmp_path / "cg.1.1"
    path.write_text("events: Ir\nfl=(1) a.c\nfn=(1) f\n0 10\ncfn=(2) g\ncalls=1 0\n0 5\n")
    costs = priced_calls(path)
    assert {k: (c.calls, c.events) for k, c in costs.items()} == {
        "allocator": (0, {"Ir": 0.0}),
        "type_lookup": (0, {"Ir": 0.0}),
    }
    assert priced_events({"Ir": 15.0}, costs) == {"Ir": 15.0}
    assert priced_calls(tmp_path / "missing") is None


def test_a_dump_whose_call_graph_is_corrupt_is_reported_not_counted(tmp_path):
    """A dump whose header reads but whose call lines do not (a truncated or foreign
    file) gives the case no count rather than a wrong one, and says why."""
    from rlpace.bench.counts.session import _case

    dumps = tmp_path / "run.dumps"
    dumps.mkdir()
    (dumps / "cg.1.1").write_text(
        "desc: Trigger: Client Request: t\nevents: Ir\nsummary: 100\n"
        "fn=(1) f\n0 100\ncfn=(2) malloc\ncalls=two 0\n0 5\ntotals: 100\n"
    )
    case = _case(
        "t", {"status": "counted"}, read_dumps(dumps), CountSettings(), tmp_path / "run.json"
    )
    assert case.status == "crashed" and case.reason == "counted, but its dump could not be read"
    assert not case.counted


@needs_valgrind
def test_two_heap_histories_give_one_count(tmp_path):
    """What an allocation costs follows what earlier frees left: the same calls after a
    process freed 3 000 blocks of many sizes ran more instructions than after none, all
    of it in glibc's ``_int_malloc`` and pymalloc's pool bookkeeping (0.8 % with large
    blocks only). Priced per call, the counts are equal."""
    source = (
        "import os\nfrom rlpace.bench.suite import Timed, case\n\nKEEP = []\n\n\n"
        '@case(timer="cpu")\ndef test_alloc():\n'
        '    holes = int(os.environ["HOLES"])\n'
        "    blocks = [bytes(37 * (i % 450)) for i in range(2 * holes)]\n"
        "    KEEP.extend(blocks[::2])  # the others are freed: holes in the allocators\n"
        "    del blocks\n\n"
        "    def call():\n"
        "        for size in range(1200, 16000, 300):\n"
        "            bytearray(size)\n"
        "        return [bytes(n) for n in range(0, 500, 8)]  # pymalloc's size classes\n\n"
        "    return Timed(call, count_calls=3)\n"
    )
    cases = []
    for holes in (0, 3000):
        run, _ = _count_probe(tmp_path / f"h{holes}", source, {"HOLES": str(holes)})
        cases.append(run.by_id()["test_alloc"])
        assert run.meta["call_pricing"] == PRICING
    quiet, holed = cases
    assert quiet.counted and holed.counted
    assert holed.events["Ir"] > quiet.events["Ir"] * 1.002  # what the allocator really did
    assert holed.priced_calls == quiet.priced_calls
    assert quiet.priced_calls["allocator"] >= 49 + 63
    assert holed.instructions == quiet.instructions
    assert quiet.calls == 3


CYCLES_SAME = 1e-4
"""Estimated cycles of one probe counted twice with the same warm-up: 5e-6 apart here."""
COLD_CACHES = 2.5e-4
"""What a measured call meeting cold simulated caches adds to that probe: 5.2e-4 here."""


@needs_valgrind
def test_the_measured_call_is_the_same_call_however_slow_the_machine(tmp_path):
    """A loaded machine slows the plain calls. The call that warms the simulated caches
    always runs: a short one under instrumentation, its costs dumped apart and thrown
    away; one whose last plain call took a second of CPU time plain. Zeroed instead, a
    warm-up left part of itself in the measured dump (here +2.3 %), and when wall time
    decided, ``collector_single[rlpace-cartpole]``, whose call lasts about a second under
    Valgrind, counted 1.7 % apart in 2 of 18 A/A processes. Here each call does more
    work than the one before; one run's last plain call waits 1.2 s (as a loaded
    machine makes it wait), another's computes for 1.2 s of CPU time."""
    source = (
        "import os, time\nfrom rlpace.bench.suite import Timed, case\n\n\n"
        '@case(timer="cpu")\ndef test_grows():\n'
        "    made = [0]\n\n"
        "    def call():\n"
        "        made[0] += 1\n"
        "        if made[0] == 3 and os.environ['SLOW'] == 'wait':\n"
        "            time.sleep(1.2)  # the last plain call, as a loaded machine makes it\n"
        "        if made[0] == 3 and os.environ['SLOW'] == 'compute':\n"
        "            end = time.process_time() + 1.2\n"
        "            while time.process_time() < end:\n"
        "                pass\n"
        "        return sum(range(20_000 * made[0]))  # each call does more than the last\n\n"
        "    return call\n"
    )
    cases = {}
    for slow in ("no", "wait", "compute"):
        run, _ = _count_probe(tmp_path / slow, source, {"SLOW": slow})
        cases[slow] = run.by_id()["test_grows"]
    quick, waited, computed = cases["no"], cases["wait"], cases["compute"]
    assert all(c.counted for c in cases.values()), [c.reason for c in cases.values()]
    left = [read_dump(p) for p in (tmp_path / "no" / "head.dumps").glob("cg.*")]
    assert "test_grows" in {d.trigger for d in left if d} and WARM_TRIGGER not in {
        d.trigger for d in left if d
    }  # the warm-up's dump was deleted
    # the fourth call would count a fifth less than the fifth
    for other in (waited, computed):
        assert abs(other.instructions / quick.instructions - 1) < 0.001
    # waiting decided nothing: the same protocol, the same warm caches, to the cycle
    # within the spread of a count; computing for a second ran the warm-up plain, and
    # the measured call met cold caches
    assert abs(waited.cycles / quick.cycles - 1) < CYCLES_SAME
    assert computed.cycles / quick.cycles - 1 > COLD_CACHES
    # each count says how it warmed, and the CPU-time reading that chose it
    assert (quick.warmed, waited.warmed, computed.warmed) == ("instrumented",) * 2 + ("plain",)
    assert computed.plain_cpu_s >= 1.0 > waited.plain_cpu_s
    # judged against each other: the instructions are, the cycles are not compared
    (change,) = compare_counts(CountRun({}, (computed,)), CountRun({}, (quick,)))
    assert change.verdict == "same" and change.cycles_change is None
    assert change.reason.startswith("cycles not compared: the cache-warming call ran plain in head")


def test_aa_widened_with_a_missing_or_foreign_file_says_so_and_writes_nothing(tmp_path, capsys):
    runs = []
    for name, ir in (("a.json", 1000.0), ("b.json", 1001.0)):
        run = CountRun({"commit": "c" * 40}, (CaseCount("t", "counted", instructions=ir),))
        runs.append(str(write_counts(run, tmp_path / name)))
    out = tmp_path / "gates.json"
    assert (
        cli_main(["count", "aa", *runs, "-o", str(out), "--widen", str(tmp_path / "no.json")]) == 2
    )
    err = capsys.readouterr().err
    assert "expected a count gate file, found none" in err and "fix:" in err
    (tmp_path / "foreign.json").write_text('{"format": "rlpace-counts"}')
    assert (
        cli_main(["count", "aa", *runs, "-o", str(out), "--widen", str(tmp_path / "foreign.json")])
        == 2
    )
    assert "expected format 'rlpace-count-gates'" in capsys.readouterr().err
    assert not out.exists()


def test_aa_fresh_cases_drop_the_reading_their_old_code_left(tmp_path, capsys):
    """``count aa --widen G --fresh ID``: a case whose code changed what a call does
    (seeded an env, reset a total) keeps only the new reading; the others stay widened."""
    runs = []
    for name, ir in (("a.json", 1000.0), ("b.json", 1001.0)):
        cases = (
            CaseCount("test_c[x-1]", "counted", instructions=ir),
            CaseCount("test_d", "counted", instructions=ir),
        )
        runs.append(str(write_counts(CountRun({"commit": "c" * 40}, cases), tmp_path / name)))
    earlier = tmp_path / "gates.json"
    assert cli_main(["count", "aa", *runs, "-o", str(earlier)]) == 0
    doc = json.loads(earlier.read_text())
    for test_id in ("test_c[x-1]", "test_d"):
        doc["gates"][test_id]["spread"] = 0.006  # the old code wobbled
    earlier.write_text(json.dumps(doc))
    out = tmp_path / "new.json"
    args = ["count", "aa", *runs, "-o", str(out), "--widen", str(earlier)]
    assert cli_main([*args, "--fresh", "test_c[x-1]"]) == 0
    gates, meta, _, _ = read_gates(out)
    assert gates["test_c[x-1]"].spread == 0.001 and gates["test_c[x-1]"].runs == 2
    assert gates["test_d"].spread == 0.006 and gates["test_d"].runs == 4
    assert meta["fresh"] == ["test_c[x-1]"]
    again = tmp_path / "again.json"  # widened once more: the chain keeps which were fresh
    assert cli_main(["count", "aa", *runs, "-o", str(again), "--widen", str(out)]) == 0
    assert read_gates(again)[1]["widened_with"]["fresh"] == ["test_c[x-1]"]
    assert cli_main([*args, "--fresh", "test_*"]) == 0  # a glob; brackets match themselves
    assert {g.spread for g in read_gates(out)[0].values()} == {0.001}
    out.unlink()
    capsys.readouterr()
    assert cli_main(["count", "aa", *runs, "-o", str(out), "--fresh", "test_d"]) == 2
    assert "no earlier gate file was given; fix: add --widen" in capsys.readouterr().err
    assert cli_main([*args, "--fresh", "test_c[x-2]"]) == 2  # a typo: no such case
    err = capsys.readouterr().err
    assert "--fresh test_c[x-2]: expected test-id globs or substrings" in err and "fix:" in err
    assert not out.exists()


# a native name read from a real count regression's Callgrind dump (PyTorch's dispatcher
# wrapping Tensor.clone): 578 characters, past the comparison record's 300
DISPATCHER_CLONE = (
    "???:c10::impl::wrap_kernel_functor_unboxed_<c10::impl::detail::WrapFunctionIntoFunctor_"
    "<c10::CompileTimeFunctionPointer<at::Tensor (c10::DispatchKeySet, at::Tensor const&, "
    "std::optional<c10::MemoryFormat>), &torch::autograd::VariableType::(anonymous namespace)"
    "::clone>, at::Tensor, c10::guts::typelist::typelist<c10::DispatchKeySet, at::Tensor "
    "const&, std::optional<c10::MemoryFormat> > >, at::Tensor (c10::DispatchKeySet, "
    "at::Tensor const&, std::optional<c10::MemoryFormat>)>::call(c10::OperatorKernel*, "
    "c10::DispatchKeySet, at::Tensor const&, std::optional<c10::MemoryFormat>)"
)


def test_why_shows_a_dispatcher_symbol_short_enough_for_the_record(monkeypatch, tmp_path):
    """A count regression inside PyTorch names C++ symbols of 500+ characters; ``pr``
    once wrote them into its comparison, which the comment job's schema refused (no
    comment at all). The cause shows them with template arguments elided."""
    from rlpace.bench.comparison import BenchmarkChange, Comparison, Verdict
    from rlpace.bench.comparison_record import record_from_dict
    from rlpace.bench.counts import why

    assert len(DISPATCHER_CLONE) > 300
    costs = {
        "h.out": {DISPATCHER_CLONE: 6976.0, "call.c:PyObject_Vectorcall": 341990.0},
        "b.out": {"call.c:PyObject_Vectorcall": 334412.0},
    }
    monkeypatch.setattr(why, "inclusive_costs", lambda path: costs[Path(path).name])
    head = CaseCount("t", "counted", instructions=445_000.0, dump="h.out")
    base = CaseCount("t", "counted", instructions=435_000.0, dump="b.out")
    cause = why.explain_regression(head, base, head_dir=tmp_path, base_dir=tmp_path)
    names = [g.name for g in cause.native]
    assert names[0] == "call.c:PyObject_Vectorcall"
    assert names[1] == (
        "???:c10::impl::wrap_kernel_functor_unboxed_<…>::call(c10::OperatorKernel*, "
        "c10::DispatchKeySet, at::Tensor const&, std::optional<…>)"
    )
    assert len(names[1]) <= why.NAME_LIMIT
    row = BenchmarkChange(
        "t.py::t", "t", Verdict.WORSENED, head_median=1.1, base_median=1.0,
        median_change_pct=-9.0, change_pct=-9.0, count_verdict="regression",
        count_change_pct=2.3, cycles_change_pct=2.4, count_gate_pct=1.0,
        count_causes={"total": cause.total_delta,
                      "native": [[g.name, g.base, g.head] for g in cause.native],
                      "python": []},
    )  # fmt: skip
    data = json.loads(json.dumps(Comparison(rows=(row,)).to_dict()))
    data["pipeline"] = {"set": "cpu"}
    rebuilt = record_from_dict(data, source="cpu.json").comparison
    assert rebuilt.rows[0].count_causes["native"][1][0] == names[1]


def test_count_aa_killed_while_writing_leaves_the_gates_it_widens_whole(tmp_path, monkeypatch):
    """``count aa --widen G -o G`` replaces the file it reads: a write that dies half-way
    (a kill, a full disk) must leave the old gates, not half a JSON file."""
    from rlpace.bench.counts.gates import write_gates

    runs = [
        CountRun({"commit": "c" * 40}, (CaseCount("t", "counted", instructions=ir),))
        for ir in (1000.0, 1001.0)
    ]
    gates = tmp_path / "gates.json"
    write_gates(runs, gates)
    before = gates.read_text()

    def dies(self, text, *args, **kwargs):
        Path.write_bytes(self, text.encode()[: len(text) // 2])  # half of it, then the kill
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_text", dies)
    with pytest.raises(OSError):
        write_gates(runs, gates, widen=gates)
    monkeypatch.undo()
    assert gates.read_text() == before
    assert read_gates(gates)[0]["t"].spread == 0.001


@needs_valgrind
def test_a_tokenizer_batch_is_counted_on_one_thread(tmp_path):
    """Hugging Face ``tokenizers`` encodes a batch on a rayon pool whose idle workers
    spin as long as the scheduler lets them, so a loaded machine moved the LLM cases'
    counts by up to 0.95 %. The counting process encodes on its own thread."""
    pytest.importorskip("tokenizers")
    run, seen = _count_probe(
        tmp_path,
        "import os\nfrom pathlib import Path\n"
        "from tokenizers import Tokenizer, models, pre_tokenizers\n"
        "from rlpace.bench.suite import Timed, case\n\n\n"
        '@case(timer="cpu")\ndef test_tok():\n'
        '    vocab = {w: i for i, w in enumerate(["[UNK]", "a", "b", "c"])}\n'
        '    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))\n'
        "    tok.pre_tokenizer = pre_tokenizers.Whitespace()\n"
        '    texts = ["a b c " * 50] * 256\n\n'
        "    def teardown():\n"
        '        Path(os.environ["SEEN"]).write_text(str(len(os.listdir("/proc/self/task"))))\n\n'
        "    return Timed(lambda: tok.encode_batch(texts), teardown=teardown)\n",
    )
    assert run.by_id()["test_tok"].counted
    assert seen == "1"


def test_aa_gates_take_cycles_only_from_runs_that_warmed_their_caches_alike(tmp_path, capsys):
    """A case on the counting's CPU-time line warmed plain in one A/A run: its measured
    call met cold caches there. Its instructions are the same measure in every run, its
    cycles are not, so its cycles gate comes from the runs that warmed alike."""

    def run(cycles, warmed):
        cases = (
            CaseCount("edge", "counted", instructions=1e6, cycles=cycles, warmed=warmed),
            CaseCount("calm", "counted", instructions=2e6, cycles=3.0e6, warmed="instrumented"),
        )
        return CountRun({"commit": "abc"}, cases)

    runs = [run(2.000e6, "instrumented"), run(2.070e6, "plain"), run(2.002e6, "instrumented")]
    gates = gate_from_aa(runs)
    assert gates["edge"].cycles_spread == pytest.approx(0.001)  # not the cold run's 3.5 %
    assert gates["edge"].spread == 0.0 and gates["calm"].cycles_spread == 0.0
    # two runs that warmed apart leave no cycles reading (the floor then gates them)
    assert gate_from_aa(runs[:2])["edge"].cycles_spread == 0.0
    # an older file that does not say how it warmed goes with either
    older = CountRun({"commit": "abc"}, tuple(replace(c, warmed=None) for c in runs[1].cases))
    assert gate_from_aa([runs[0], older])["edge"].cycles_spread == pytest.approx(0.035)
    # `count aa` says which cases warmed apart
    files = [write_counts(r, tmp_path / f"aa{i}.json") for i, r in enumerate(runs)]
    out = tmp_path / "gates.json"
    assert cli_main(["count", "aa", *map(str, files), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "note: 1 case(s) warmed their caches differently from run to run (edge)" in err
    assert read_gates(out)[0]["edge"].cycles_spread == pytest.approx(0.001)
