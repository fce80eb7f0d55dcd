"""pytest side of the benchmark suite: turns :func:`rlpace.bench.suite.case` setups into tests.

Options:
    --rlpace-set {cpu,gpu}: which set to run (default ``cpu``). In the GPU set, cases
        without ``gpu=True`` are deselected, and every case skips with a reason when
        CUDA is missing.
"""

from __future__ import annotations

import pytest

from rlpace.bench.suite import SkipCase


def pytest_addoption(parser):
    group = parser.getgroup("rlpace")
    group.addoption(
        "--rlpace-set",
        choices=("cpu", "gpu"),
        default="cpu",
        help="benchmark set to run: cpu (every case) or gpu (cases with gpu=True, on CUDA)",
    )


def _case_of(obj):
    return getattr(obj, "__rlpace_case__", None)


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makeitem(collector, name, obj):
    """Case tests time through pytest-benchmark's fixture without naming it as an argument."""
    if _case_of(obj) is not None and not getattr(obj, "_rlpace_marked", False):
        obj.pytestmark = [*getattr(obj, "pytestmark", []), pytest.mark.usefixtures("benchmark")]
        obj._rlpace_marked = True


def pytest_generate_tests(metafunc):
    c = _case_of(metafunc.function)
    if c is None:
        return
    set_name = metafunc.config.getoption("--rlpace-set")
    if not c.in_set(set_name):
        return
    for pname, values in zip(c.param_names, c.values(set_name), strict=True):
        metafunc.parametrize(pname, values, ids=[str(v) for v in values])


def pytest_collection_modifyitems(config, items):
    set_name = config.getoption("--rlpace-set")
    keep, drop = [], []
    for item in items:
        c = _case_of(getattr(item, "obj", None))
        (drop if c is not None and not c.in_set(set_name) else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    c = _case_of(pyfuncitem.obj)
    if c is None:
        return None
    params = {name: pyfuncitem.funcargs[name] for name in c.param_names}
    if params.get("device") == "cuda":
        import torch

        if not torch.cuda.is_available():
            pytest.skip("GPU set: no CUDA device is available on this machine")
    try:
        timed = c.make(**params)
    except SkipCase as exc:
        pytest.skip(str(exc))
    benchmark = pyfuncitem.funcargs["benchmark"]
    benchmark.extra_info.update(timed.extra_info)
    if timed.items is not None:
        benchmark.extra_info["items_per_call"] = timed.items
        benchmark.extra_info["unit"] = timed.unit
    try:
        benchmark(timed.fn)
    finally:
        if timed.teardown is not None:
            timed.teardown()
    return True
