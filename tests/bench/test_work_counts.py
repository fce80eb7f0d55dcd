"""Work counts: what a case on the clock launches per call, judged base against head.

The CUDA half (kernel launches, syncs, copies) needs a GPU and is measured in the
reports; here: the aten-op half on the CPU with real code, the event classification,
the checks on what a result file holds, the verdict rules, and the join through the
one judge that ``compare`` and ``pr`` share.
"""

from __future__ import annotations

import cProfile
import functools
import gc
import json
import queue
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from rlpace.bench.cli import main as cli_main
from rlpace.bench.comparison import Verdict
from rlpace.bench.comparison_record import record_from_dict
from rlpace.bench.errors import BenchInputError
from rlpace.bench.judge import Judge
from rlpace.bench.results import load_results, merge_runs
from rlpace.bench.work_counts.measure import (
    count_events,
    count_names,
    measure_work_counts,
    nested_events,
)
from rlpace.bench.work_counts.verdict import compare_work_counts, work_counts_of


def _work(calls: int = 4, **counts: list[int] | int) -> dict:
    out: dict = {"calls": calls}
    for metric in ("kernels", "syncs", "copies", "ops"):
        value = counts.get(metric, 0)
        out[metric] = list(value) if isinstance(value, list) else [value] * calls
    return out


# --- measuring: real code on the CPU ------------------------------------------------


def _filled_buffer():
    """A replay buffer holding 256 transitions, on the CPU."""
    from tensordict import TensorDict

    from rlpace.data import ReplayBuffer, TensorStorage

    rb = ReplayBuffer(TensorStorage(256))
    rb.extend(TensorDict({"obs": torch.randn(256, 4), "r": torch.randn(256)}, [256]))
    return rb


def _counted_twice_and_changed(plain, changed):
    """``plain`` counted twice and ``changed`` once, four calls each, both warmed up."""
    for fn in (plain, changed):
        fn()
    return (
        measure_work_counts(plain, calls=4, cuda=False),
        measure_work_counts(plain, calls=4, cuda=False),
        measure_work_counts(changed, calls=4, cuda=False),
    )


def test_counts_of_the_same_code_repeat_and_a_real_change_moves_them():
    """A replay buffer's sample counted twice gives the same aten ops per call; the same
    sample followed by a defensive copy of the batch counts more."""
    rb = _filled_buffer()

    def plain():
        return rb.sample(32)

    def with_copy():
        return rb.sample(32).clone()

    first, again, changed = _counted_twice_and_changed(plain, with_copy)
    assert first["ops"] == again["ops"] and len(set(first["ops"])) == 1
    assert first["kernels"] == first["syncs"] == first["copies"] == [0] * 4
    assert min(changed["ops"]) > max(first["ops"])
    regression = compare_work_counts("rb", changed, first)
    assert regression.verdict == "regression"
    # what launched more: the copy's own operator leads the list
    assert regression.names[0][:2] == ("aten::clone", 0.0) and regression.names[0][2] >= 1
    assert compare_work_counts("rb", again, first).verdict == "same"


def test_raw_events_nest_and_count_as_torchs_event_list_does():
    """The profile read from its raw events (the fast path) counts every operator and
    event name per call exactly as ``prof.events()``, torch's own event tree, does: on a
    SAC-like update whose operators redispatch to themselves (an only child of the same
    name, which torch merges into its parent) and a replay buffer's sample."""
    from torch.profiler import ProfilerActivity, profile, record_function

    net = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 2))
    opt = torch.optim.Adam(net.parameters())
    rb = _filled_buffer()

    def update():
        loss = net(torch.randn(16, 8)).pow(2).mean() + rb.sample(8)["obs"].mean()
        opt.zero_grad()
        loss.backward()
        opt.step()

    update()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for i in range(3):
            with record_function(f"rlpace::measured_call#{i}"):
                update()
    fast = nested_events(prof.profiler.kineto_results.events())
    torchs = prof.events()
    assert count_events(fast, 3) == count_events(torchs, 3)
    assert count_names(fast, 3, limit=10_000) == count_names(torchs, 3, limit=10_000)
    assert count_events(fast, 3)["ops"][0] > 50
    # the merge matters: without it the raw events count more operators than torch lists
    raw_ops = sum(1 for e in prof.profiler.kineto_results.events() if e.name().startswith("aten::"))
    assert len(fast) == len(torchs) and raw_ops > sum(e.name.startswith("aten::") for e in fast)


def test_a_profile_without_the_raw_events_falls_back_to_torchs_event_list():
    """Another torch may lack the raw event list, or an accessor of its events: the
    counts then come from ``prof.events()``, not from an AttributeError."""
    from rlpace.bench.work_counts.measure import _profiled_events

    region = SimpleNamespace(name="rlpace::measured_call#0", cpu_parent=None)
    listed = [region, SimpleNamespace(name="aten::add", cpu_parent=region)]
    no_raw = SimpleNamespace(profiler=SimpleNamespace(), events=lambda: listed)
    old_event = SimpleNamespace(name=lambda: "aten::add")  # no is_hidden_event, no times
    old_raw = SimpleNamespace(
        profiler=SimpleNamespace(kineto_results=SimpleNamespace(events=lambda: [old_event])),
        events=lambda: listed,
    )
    for prof in (no_raw, old_raw):
        assert count_events(_profiled_events(prof), 1)["ops"] == [1]


def test_python_calls_see_a_check_that_dispatches_no_operator():
    """A key check in pure Python (what ``ReplayBuffer.sample`` would do to validate a
    batch) adds no aten op, so only ``py_calls`` moves; counted twice, the plain call
    counts the same, and the comment names the functions that ran more."""
    rb = _filled_buffer()
    expected = ("obs", "r")

    def sample():
        return rb.sample(32)

    def sample_checked():
        batch = rb.sample(32)
        missing = sorted(set(expected) - set(batch.keys()))
        if missing:
            raise KeyError(f"a batch without {missing}")
        return batch

    first, again, checked = _counted_twice_and_changed(sample, sample_checked)
    assert first["py_calls"] == again["py_calls"] and len(set(first["py_calls"])) == 1
    assert checked["ops"] == first["ops"]  # no operator: the profiler alone is blind
    assert min(checked["py_calls"]) > max(first["py_calls"])
    change = compare_work_counts("rb", checked, first)
    assert (change.verdict, change.moved) == ("regression", ("py_calls",))
    moved = {name: (base, head) for name, base, head in change.names}
    assert moved["<built-in method builtins.sorted>"] == (0.0, 1.0)
    assert compare_work_counts("rb", again, first).verdict == "same"


def test_the_function_whose_own_calls_grew_is_named_first():
    """The same function in base and head, head with a key check added to its body: it
    is called as often as before but makes more calls itself, so "what ran more" names
    it first, ahead of the library functions the check calls."""
    rb = _filled_buffer()
    body = "def next_batch(rb):\n    batch = rb.sample(32)\n{check}    return batch\n"
    check = "    missing = sorted({'obs', 'r'} - set(batch.keys()))\n    assert not missing\n"
    counted = []
    for version in ("", check):
        scope: dict = {}
        exec(compile(body.format(check=version), "/c/lib/rlpace/data/_batches.py", "exec"), scope)
        fn = functools.partial(scope["next_batch"], rb)
        fn()
        counted.append(measure_work_counts(fn, calls=4, cuda=False))
    base, head = counted
    change = compare_work_counts("rb", head, base)
    assert change.moved == ("py_calls",)
    name, before, after = change.names[0]
    assert name == "calls made by rlpace/data/_batches.py:next_batch" and after > before
    # a table not in its form (a file another tool wrote) names no function, keeps the rest
    for bad in ({"x.py:f": [1]}, {"x.py:f": ["1", 2]}, {"x.py:f": [True, 2]}, ["x.py:f"]):
        odd = compare_work_counts("rb", {**head, "calls_made": bad}, base)
        assert odd.moved == ("py_calls",) and not odd.names[0][0].startswith("calls made by")


def test_an_edited_function_that_makes_few_calls_is_named_among_busier_libraries():
    """A collector's start-up runs many library functions that each make more calls
    than the edited one: the code under test's own functions are kept beyond the 64
    busiest, so the edited one is still named (it was not, when only the busiest were
    kept)."""
    from rlpace.bench.work_counts.measure import MADE_KEPT, NAMES_KEPT

    library: dict = {}
    for i in range(NAMES_KEPT + 6):  # installed code: each makes 6 calls a call
        source = f"def helper{i}(xs):\n" + "".join("    len(xs)\n" for _ in range(6))
        scope: dict = {}
        exec(compile(source, f"/venv/lib/python3.11/site-packages/lib{i}/m.py", "exec"), scope)
        library[i] = scope[f"helper{i}"]
    scope = {}
    driver = "def drive(helpers, xs):\n    for h in helpers:\n        h(xs)\n"
    exec(compile(driver, "/venv/lib/python3.11/site-packages/drv/d.py", "exec"), scope)
    drive = scope["drive"]
    body = "def next(drive, helpers, xs):\n    drive(helpers, xs)\n{check}"
    counted = []
    for check in ("", "    for _ in range(10):\n        sorted(xs)\n"):  # 2 % more calls
        scope = {}
        exec(compile(body.format(check=check), "/c/lib/rlpace/_multi.py", "exec"), scope)
        fn = functools.partial(scope["next"], drive, list(library.values()), [1, 2])
        fn()
        counted.append(measure_work_counts(fn, calls=4, cuda=False))
    base, head = counted
    # base: 1 call made by the edited function, fewer than each of the 64 busiest
    assert len(base["calls_made"]) == NAMES_KEPT + 1 <= MADE_KEPT
    assert base["calls_made"]["rlpace/_multi.py:next"] == [1.0, 1.0]
    change = compare_work_counts("collector", head, base)
    assert change.moved == ("py_calls",)
    assert change.names[0] == ("calls made by rlpace/_multi.py:next", 1.0, 11.0)


def test_python_calls_are_named_alike_wherever_the_tree_is_checked_out():
    """Base and head run from different directories, and an edit moves line numbers:
    a function's name carries neither."""
    from rlpace.bench.work_counts.python import python_calls

    source = "def check(keys):\n    return sorted(keys)\n"
    labels = []
    for root, pad in (("/tmp/base/lib", ""), ("/home/ci/head/lib", "\n\n")):
        scope: dict = {}
        exec(compile(pad + source, f"{root}/rlpace/data/_checks.py", "exec"), scope)
        counter = cProfile.Profile()
        counter.enable()
        scope["check"](["b", "a"])
        counter.disable()
        labels.append(python_calls(counter))
    assert (
        labels[0]
        == labels[1]
        == (
            2,
            {"rlpace/data/_checks.py:check": 1, "<built-in method builtins.sorted>": 1},
        )
    )


def test_calls_inside_a_wait_follow_the_clock_and_are_not_counted():
    """A queue read that finds its item waiting and one that waits for a slow producer
    make different calls inside ``queue``/``threading``; counted, they are the same
    call."""
    from rlpace.bench.work_counts.python import python_calls

    def read(delay: float) -> tuple[int, int]:
        box: queue.Queue = queue.Queue()
        producer = threading.Timer(delay, box.put, args=(1,))
        producer.start()
        if delay == 0:
            producer.join()
        counter = cProfile.Profile()
        counter.enable()
        box.get(timeout=10)
        counter.disable()
        producer.join()
        raw = sum(entry.callcount for entry in counter.getstats())
        return raw, python_calls(counter)[0]

    ready, waited = read(0.0), read(0.2)
    assert waited[0] > ready[0]  # the wait's own calls
    assert waited[1] == ready[1] == 1  # the call to Queue.get, nothing inside it


def test_counting_leaves_the_collector_off_and_another_profiler_alone():
    """The garbage collector is off while calls are counted and on again after; a
    profiler already holding Python's hook keeps it, and the counts leave out
    ``py_calls`` (judged then on the other metrics)."""
    seen = []

    def fn():
        seen.append(gc.isenabled())

    assert gc.isenabled()
    counts = measure_work_counts(fn, calls=2, cuda=False)
    assert (
        seen == [False, False] and gc.isenabled() and counts["py_calls"] == [3, 3]
    )  # fn, isenabled, append

    def hook(frame, event, arg):
        return None

    sys.setprofile(hook)
    try:
        counts = measure_work_counts(fn, calls=2, cuda=False)
        assert sys.getprofile() is hook
    finally:
        sys.setprofile(None)
    assert "py_calls" not in counts and counts["ops"] == [0, 0]
    with_python = {**counts, "py_calls": [5, 5]}
    assert compare_work_counts("t", with_python, counts).verdict == "same"


@pytest.mark.parametrize("bad", [[1, 2], "many", [1, -1, 1, 1], [1.5] * 4])
def test_python_calls_not_in_their_form_are_refused(bad):
    counts, why = work_counts_of({"work_counts": {**_work(4), "py_calls": bad}})
    assert counts is None and why.startswith("expected {'calls': n, 'kernels': [n counts]")


def test_measure_refuses_a_bad_number_of_calls():
    with pytest.raises(ValueError, match=r"calls: expected an integer in \[1, 64\], got 0"):
        measure_work_counts(lambda: None, calls=0, cuda=False)


def test_events_are_counted_per_region_and_by_kind():
    """Runtime calls count as kernels, syncs or copies; a plain cudaMemcpy as a copy and
    a sync; events outside a measured region (the harness's own sync) are not counted."""
    regions = [
        SimpleNamespace(name=f"rlpace::measured_call#{i}", cpu_parent=None) for i in range(2)
    ]

    def ev(name, parent):
        return SimpleNamespace(name=name, cpu_parent=parent)

    add = ev("aten::add", regions[0])
    item = ev("aten::item", regions[1])
    events = [
        *regions,
        add,
        ev("cudaLaunchKernel", add),
        ev("cudaLaunchKernelExC", add),
        item,
        ev("aten::_local_scalar_dense", item),
        ev("cudaMemcpyAsync", item),
        ev("cudaStreamSynchronize", item),
        ev("cudaMemcpy", regions[1]),
        ev("cudaMemsetAsync", regions[1]),
        ev("cudaDeviceSynchronize", None),  # between calls: the harness's
        ev("cudaLaunchKernel", ev("aten::mul", None)),  # outside every region
        ev("cudaGetDevice", regions[0]),  # counts toward nothing
    ]
    assert count_events(events, 2) == {
        "kernels": [2, 0],
        "syncs": [0, 2],
        "copies": [0, 3],
        "ops": [1, 2],
    }


# --- what a result file holds ---------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ({"calls": 2, "kernels": [1]}, "expected {'calls': n"),
        ({"calls": 2, "kernels": [1, -1], "syncs": [0, 0], "copies": [0, 0], "ops": [1, 1]}, "got"),
        ({"calls": True, "kernels": [1]}, "expected"),
        ({"calls": 1, "kernels": ["1"], "syncs": [0], "copies": [0], "ops": [0]}, "expected"),
        ("many", "got 'many'"),
        (
            {"error": "RuntimeError: CUPTI unavailable"},
            "could not be measured: RuntimeError: CUPTI",
        ),
    ],
)
def test_counts_not_in_the_expected_form_are_refused_with_the_reason(raw, reason):
    counts, why = work_counts_of({"work_counts": raw})
    assert counts is None and reason in why


@pytest.mark.parametrize(
    "names",
    [
        {"aten::add": -1},
        {"aten::add": True},
        {"": 1},
        {"x" * 201: 1},
        ["aten::add"],
        {f"aten::op{i}": 1 for i in range(257)},
    ],
)
def test_names_not_in_the_expected_form_are_dropped_and_the_counts_kept(names):
    base = {**_work(kernels=1), "names": {"cudaLaunchKernel": 1}}
    head = {**_work(kernels=2), "names": names}
    change = compare_work_counts("t", head, base)
    assert (change.verdict, change.names) == ("regression", ())


def test_a_file_without_counts_is_not_measured():
    assert work_counts_of({"set": "gpu"}) == (None, "not measured")
    assert work_counts_of(None) == (None, "not measured")


# --- the verdict rules ----------------------------------------------------------------


def test_the_typical_call_decides_and_occasional_work_does_not():
    """As measured on an H200: a buffer's extend-and-sample call does occasional work (a
    wrap-around) in one call of eight, at any position; a real change (+3 aten ops to
    every call) moves the typical call and is caught, the occasional call is not."""
    a1 = _work(8, ops=[94, 94, 94, 94, 94, 94, 143, 94])
    a2 = _work(8, ops=[94] * 8)
    changed = _work(8, ops=[97, 146, 97, 97, 97, 97, 97, 97])
    assert compare_work_counts("t", a2, a1).verdict == "same"
    assert compare_work_counts("t", a1, a2).verdict == "same"
    moved = compare_work_counts("t", changed, a1)
    assert (moved.verdict, moved.summary()) == ("regression", "ops 94 → 97 per call")


def test_python_calls_that_follow_the_clock_do_not_move_but_a_real_change_does():
    """Measured before the waits' own calls were left out, on the threaded batched
    collector with a 2 ms env: a call made 2 143 Python calls, or 2 118 when its batch
    was ready without one round of waiting, and a busier machine can make the short
    path the typical one. Measured in an A/A `make bench`: a SAC trainer's start-up
    made 285 964 calls in one process, 285 812 in another; a torchrl collector that
    polls in its own code made 18 326 to 19 681, with no typical call. None of these
    moves; aten ops keep their exact rule; a check that adds calls to a batch does."""
    quiet = _work(8, ops=230) | {"py_calls": [2143] * 8}
    busy = _work(8, ops=[229] * 6 + [230] * 2) | {"py_calls": [2118] * 6 + [2143] * 2}
    change = compare_work_counts("t", busy, quiet)
    assert (change.verdict, change.moved) == ("improvement", ("ops",))
    assert compare_work_counts("t", busy | {"ops": [230] * 8}, quiet).verdict == "same"
    start = _work(4, ops=29840)
    later = compare_work_counts(
        "t", start | {"py_calls": [285812] * 4}, start | {"py_calls": [285964] * 3 + [285839]}
    )
    assert later.verdict == "same"  # 0.05 %: within the tolerance
    polling = _work(4) | {"py_calls": [18010, 18326, 18400, 18700]}
    assert (
        compare_work_counts(
            "t", polling, _work(4) | {"py_calls": [19500, 19681, 19900, 20100]}
        ).verdict
        == "same"
    )
    checked = quiet | {"py_calls": [2170] * 8}  # a check adds 27 calls a batch (+1.3 %)
    assert compare_work_counts("t", checked, quiet).moved == ("py_calls",)
    assert compare_work_counts("t", checked, busy | {"ops": [230] * 8}).verdict == "regression"
    small = quiet | {"py_calls": [2146] * 8}  # three calls (+0.14 %): under the tolerance
    assert compare_work_counts("t", small, quiet).verdict == "same"


def test_python_calls_without_a_typical_call_move_only_when_both_sides_are_settled():
    """Measured on 2026-12-05 in two processes at once: rlpace's process-backed batched
    collector makes 4 306-4 367 calls a call with no typical call, its middle half
    within 0.1 % (settled); torchrl's makes 17 598-19 627, polling in its own code
    (unsettled). A/A: neither moves; a check adding 5 % of calls to rlpace's does, one
    shifting torchrl's by as much does not (the clock judges it), and so does not a
    side of 4 calls, whose middle half says little."""
    from rlpace.bench.work_counts.verdict import SETTLED_CALLS

    rlpace = [4311, 4310, 4315, 4310, 4313, 4309, 4306, 4310]
    again = [4367, 4308, 4310, 4312, 4312, 4315, 4310, 4308]
    torchrl = [18914, 18401, 19308, 19187, 18404, 17912, 19627, 19047]
    torchrl_again = [17598, 18177, 18661, 18865, 18691, 17960, 17765, 19321]
    w = _work(8, ops=848)
    assert (
        compare_work_counts("t", w | {"py_calls": again}, w | {"py_calls": rlpace}).verdict
        == "same"
    )
    polled = compare_work_counts("t", w | {"py_calls": torchrl_again}, w | {"py_calls": torchrl})
    assert polled.verdict == "same"  # medians 3 % apart, but 4.0-4.1 % wide: unsettled
    checked = [n + 215 for n in again]  # 5 % more calls: a key check on every batch
    change = compare_work_counts("t", w | {"py_calls": checked}, w | {"py_calls": rlpace})
    assert (change.verdict, change.moved) == ("regression", ("py_calls",))
    shifted = [int(n * 1.05) for n in torchrl_again]
    assert (
        compare_work_counts("t", w | {"py_calls": shifted}, w | {"py_calls": torchrl}).verdict
        == "same"
    )
    few = _work(SETTLED_CALLS // 2, ops=848)
    four = compare_work_counts("t", few | {"py_calls": checked[:4]}, few | {"py_calls": rlpace[:4]})
    assert four.verdict == "same"


def test_without_a_typical_call_every_head_call_must_be_beyond_every_base_call():
    """Work that varies with the sampled data from call to call does not flag; a shift
    of the whole range does."""
    base = _work(4, ops=[45, 51, 45, 51])
    assert compare_work_counts("t", _work(4, ops=[51, 45, 45, 51]), base).verdict == "same"
    assert compare_work_counts("t", _work(4, ops=[47, 53, 47, 53]), base).verdict == "same"
    assert compare_work_counts("t", _work(4, ops=[52, 58, 52, 58]), base).verdict == "regression"


def test_regression_improvement_and_mixed():
    base = _work(kernels=10, syncs=1, ops=30)
    more = compare_work_counts("t", _work(kernels=10, syncs=2, ops=30), base)
    assert (more.verdict, more.moved, more.summary()) == (
        "regression",
        ("syncs",),
        "syncs 1 → 2 per call",
    )
    less = compare_work_counts("t", _work(kernels=8, syncs=1, ops=26), base)
    assert (less.verdict, less.moved) == ("improvement", ("kernels", "ops"))
    both = compare_work_counts("t", _work(kernels=8, syncs=2, ops=30), base)
    assert both.verdict == "mixed" and not both.flagged


def test_unmeasured_sides_say_why():
    base = _work(kernels=3)
    assert compare_work_counts("t", None, base).reason == "head: not measured"
    bad = compare_work_counts("t", {"error": "boom"}, None)
    assert bad.verdict == "unmeasured"
    assert bad.reason == "head: could not be measured: boom; base: not measured"


# --- the judge: compare and pr ----------------------------------------------------------


def _gpu_file(path: Path, rng, works: dict[str, dict | None], slower: float = 1.0) -> Path:
    benchmarks = []
    for name, work in works.items():
        extra = {"set": "gpu", "timer": "wall"}
        if work is not None:
            extra["work_counts"] = work
        data = (1e-4 * slower * rng.lognormal(0, 0.2, 60)).tolist()
        benchmarks.append(
            {
                "fullname": f"test_rb.py::{name}",
                "name": name,
                "params": {"impl": "rlpace"},
                "extra_info": extra,
                "stats": {"data": data},
            }
        )
    doc = {"machine_info": {}, "commit_info": {}, "benchmarks": benchmarks,
           "datetime": "2026-12-04T00:00:00", "version": "5.1.0"}  # fmt: skip
    path.write_text(json.dumps(doc))
    return path


@pytest.fixture
def gpu_runs(tmp_path):
    """Two GPU runs a side with noisy clocks (log sd 20 %, as on a shared GPU VM). Head
    adds a sync to one case and a copy to a hostile-named one; a third is unchanged, a
    fourth was never counted (an older file)."""
    rng = np.random.default_rng(7)
    base_work = {
        "test_rb_sample[rlpace-tensor-random-cuda]": _work(kernels=6, syncs=0, copies=1, ops=40),
        "test_rb_sample[rlpace-tensor-slice-cuda]": _work(kernels=20, syncs=2, copies=2, ops=90),
        "test_x[a|b *c*]": _work(kernels=4, copies=0, ops=12),
        "test_old[cuda]": None,
    }
    base_work["test_rb_sample[rlpace-tensor-random-cuda]"]["names"] = {
        "aten::index": 1,
        "cudaLaunchKernel": 6,
    }
    head_work = dict(base_work)
    head_work["test_rb_sample[rlpace-tensor-random-cuda]"] = {
        **_work(kernels=8, syncs=1, copies=2, ops=44),
        "names": {
            "aten::index": 1,
            "aten::isfinite": 2,
            "cudaLaunchKernel": 8,
            "cudaStreamSynchronize": 1,
            "`x` | @user [l](https://e.vil)": 1,
        },
    }
    head_work["test_x[a|b *c*]"] = _work(kernels=4, copies=1, ops=13)
    files = {"base": [], "head": []}
    for k in range(2):
        files["base"].append(_gpu_file(tmp_path / f"b{k}.json", rng, base_work))
        files["head"].append(_gpu_file(tmp_path / f"h{k}.json", rng, head_work))
    return files


def test_a_launched_sync_flags_the_case_the_clock_cannot_see(gpu_runs):
    head = merge_runs([load_results(p) for p in gpu_runs["head"]])
    base = merge_runs([load_results(p) for p in gpu_runs["base"]])
    judge = Judge(threshold=5.0, confirm_runs=2)
    first = judge.judge(head, base)
    rows = {r.name: r for r in first.rows}
    sync = rows["test_rb_sample[rlpace-tensor-random-cuda]"]
    assert sync.verdict is Verdict.WORSENED and sync.work_verdict == "regression"
    assert sync.work_note.startswith(
        "work-count regression (kernels 6 → 8, syncs 0 → 1, copies 1 → 2"
    )
    assert rows["test_rb_sample[rlpace-tensor-slice-cuda]"].work_verdict == "same"
    assert rows["test_x[a|b *c*]"].verdict is Verdict.WORSENED
    assert rows["test_old[cuda]"].work_verdict is None
    # exact counts need no fresh runs: the confirmation leaves these flags as they are
    confirmed = judge.confirm(first, head, base)
    kept = {r.name: r for r in confirmed.rows}
    assert kept["test_rb_sample[rlpace-tensor-random-cuda]"].verdict is Verdict.WORSENED
    assert kept["test_rb_sample[rlpace-tensor-random-cuda]"].confirmed is None


def test_compare_writes_the_work_section_and_a_record_that_reads_back(gpu_runs, tmp_path):
    out, record = tmp_path / "c.md", tmp_path / "c.json"
    args = ["compare", "--head", *map(str, gpu_runs["head"]), "--base", *map(str, gpu_runs["base"])]
    assert cli_main([*args, "-o", str(out), "--json", str(record), "--fail-on-regression"]) == 1
    text = out.read_text()
    assert "#### Work per call (torch profiler, cProfile)" in text
    assert (
        "| test_rb_sample\\[rlpace-tensor-random-cuda] | **6 → 8** | **0 → 1** | **1 → 2** | **40 → 44** |"
        in text
    )
    assert (
        "| test_x\\[a\\|b \\*c\\*] | 4 | 0 | **0 → 1** | **12 → 13** |" in text
    )  # escaped, the table intact
    assert "3 cases on the clock judged" in text
    assert (
        "3 of the timed ones also count the kernels, syncs, copies, aten ops and Python calls"
        in text
    )
    why = text[text.index("<details><summary>What ran more or less in test_rb_sample") :]
    assert why.index("`aten::isfinite` | 0 | 2 |") < why.index("`cudaStreamSynchronize` | 0 | 1 |")
    assert "| `cudaLaunchKernel` | 6 | 8 |" in why and "aten::index" not in why
    # a hostile name stays one inert code cell: no link, no mention, the table intact
    assert "| `x \\| @user [l](https://e.vil)` | 0 | 1 |" in why
    data = json.loads(record.read_text())
    data["pipeline"] = {"set": "gpu"}  # as pr's record of the set carries it
    again = record_from_dict(data, source="gpu.json").comparison
    row = next(r for r in again.rows if r.name.startswith("test_rb_sample[rlpace-tensor-random"))
    assert (row.work_verdict, row.work_base["syncs"], row.work_head["syncs"]) == (
        "regression",
        0,
        1,
    )
    assert row.work_moved == ("kernels", "syncs", "copies", "ops")
    bad = next(r for r in data["rows"] if r["name"] == row.name)
    bad["work_head"] = {"syncs": "1; see https://e.vil"}
    with pytest.raises(BenchInputError, match=r"work_head.*expected.*Fix:"):
        record_from_dict(data, source="gpu.json")


def test_the_sensitivity_line_claims_only_rows_whose_thread_launches_something():
    """A wall-clock case whose calling thread only waits for its workers counts zeros:
    it is not said to catch a change of its work."""
    from rlpace.bench.comparison import BenchmarkChange, Comparison
    from rlpace.bench.sensitivity import sensitivity

    zeros = {"kernels": 0, "syncs": 0, "copies": 0, "ops": 0}
    rows = (
        BenchmarkChange("t::a", "a", Verdict.UNCHANGED, median_change_pct=1.0, mdc_pct=9.0,
                        work_verdict="same", work_base={**zeros, "ops": 84}, work_head={**zeros, "ops": 84}),
        BenchmarkChange("t::b", "b", Verdict.UNCHANGED, median_change_pct=1.0, mdc_pct=9.0,
                        work_verdict="same", work_base=zeros, work_head=zeros),
        BenchmarkChange("t::c", "c", Verdict.UNCHANGED, median_change_pct=1.0, mdc_pct=9.0,
                        work_verdict="unmeasured"),
    )  # fmt: skip
    assert sensitivity(Comparison(rows=rows)).work_counted == 1
    # a thread that hands each batch to another thread makes a few Python calls and no
    # operator: claimed, and said to hand its work off
    handoff = {**zeros, "py_calls": 4}
    rows += (
        BenchmarkChange("t::d", "d", Verdict.UNCHANGED, median_change_pct=1.0, mdc_pct=9.0,
                        work_verdict="same", work_base=handoff, work_head=handoff),
    )  # fmt: skip
    seen = sensitivity(Comparison(rows=rows))
    assert (seen.work_counted, seen.work_handoff) == (2, 1)
    from rlpace.bench.render_notes import sensitivity_text

    assert sensitivity_text(Comparison(rows=rows)).endswith(
        "whatever its size in time; in 1 of them that thread dispatches no operator: it "
        "hands the work to other threads or processes, whose work is left to the clock."
    )
