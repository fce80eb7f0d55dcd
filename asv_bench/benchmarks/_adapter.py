"""Turn the suite's cases into asv benchmark classes without copying their bodies.

asv runs the benchmark code of the *current* working tree against rlpace as installed
at each commit, so this module relies only on the case contract that
``rlpace.bench.suite`` defines (``__rlpace_case__`` with ``name``, ``param_names``,
``in_set``, ``values`` and ``make``; a ``SkipCase`` exception), never on newer helpers.
A case module that cannot be imported at an older commit is left out with a message
on stderr instead of breaking discovery.

For each case, one class with asv's ``params`` / ``param_names``, a ``version`` hashed
from the case's source, a ``setup`` that
builds the callable (raising ``NotImplementedError``, asv's skip, for a
``SkipCase`` or a missing CUDA device), ``time_case`` that calls it (synchronizing
CUDA), ``teardown``, in the GPU set ``track_peak_cuda_memory`` and the work counts
``track_kernels`` / ``track_syncs`` / ``track_copies`` / ``track_ops`` /
``track_py_calls`` (the CPU set's noise-free series live in ``counts`` and ``work``),
and asv's ``timer`` (``time.process_time``) for a case declared with ``timer="cpu"``.

The suite directory is ``tests/benchmarks`` of this repository, or
``$RLPACE_SUITE_DIR`` when set.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

SUITE_DIR = Path(__file__).resolve().parents[2] / "tests" / "benchmarks"
MODULE_PREFIX = "rlpace_suite_cases"

# asv timing attributes shared by every generated class: small, because the CPU set
# runs at several commits; one intra-op thread comes from OMP_NUM_THREADS (asv.conf)
# and torch.set_num_threads(1) in setup. One process per benchmark (asv's default is
# two): each process pays the import of torch and the case's setup, which cost more
# than the timing itself; `asv run -a processes=2` restores asv's default.
TIMING = {
    "warmup_time": 0.05,
    "repeat": (5, 20, 1.0),
    "rounds": 1,
    "processes": 1,
    "sample_time": 0.01,
    "min_run_count": 5,
    "timeout": 120,
}

_loaded: dict[Path, Any] = {}


def suite_dir() -> Path:
    """The directory whose ``test_*.py`` modules declare the cases."""
    return Path(os.environ.get("RLPACE_SUITE_DIR", SUITE_DIR))


def _load(path: Path) -> Any:
    if path in _loaded:
        return _loaded[path]
    name = f"{MODULE_PREFIX}.{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # an older rlpace may lack what a newer case imports
        sys.modules.pop(name, None)
        print(f"asv: skipped case module {path.name}: {type(exc).__name__}: {exc}", file=sys.stderr)
        module = None
    _loaded[path] = module
    return module


def cases() -> list[Any]:
    """Every case declared in the suite's modules, in file then declaration order."""
    found = []
    for path in sorted(suite_dir().glob("test_*.py")):
        module = _load(path)
        if module is None:
            continue
        for value in vars(module).values():
            c = getattr(value, "__rlpace_case__", None)
            if c is not None and c not in found:
                found.append(c)
    return found


def per_commit_ids(kind: str, compute: Callable[[], list[str]]) -> list[str]:
    """``compute()``'s parameter list, computed once for each commit asv measures and
    kept in asv's environment directory.

    asv runs each parameter of a benchmark in a process of its own, and each process
    imports the benchmark's module to learn the parameters. Computing them loads every
    case module, and with them torch: 3.3 s to import, 4.6 s a process in asv's run. For
    the classes whose values all come from their ``setup_cache`` (``counts``, ``work``)
    that was all a tracked value cost, 135 parameters x 2 methods about 20 minutes a
    commit (25 s with the list kept). The list is
    kept under ``$ASV_ENV_DIR`` keyed by ``$ASV_COMMIT`` (the rlpace installed there)
    and a hash of this file, the caller's module and the suite's files. Outside asv,
    and under ``asv run --python=same`` (which sets neither variable), it is computed
    every time.

    Example:
        >>> per_commit_ids("demo", lambda: ["a", "b"])  # outside asv: computed
        ['a', 'b']
    """
    env_dir, commit = os.environ.get("ASV_ENV_DIR"), os.environ.get("ASV_COMMIT")
    if not env_dir or not commit:
        return compute()
    digest = hashlib.sha256()
    files = [Path(__file__), Path(inspect.getfile(compute)), *sorted(suite_dir().rglob("*.py"))]
    for path in files:
        digest.update(f"{path}\0".encode())
        try:
            digest.update(path.read_bytes())
        except OSError:
            digest.update(b"unreadable")
    cache = Path(env_dir) / "rlpace-asv-params" / f"{kind}-{commit}-{digest.hexdigest()[:16]}.json"
    try:
        kept = json.loads(cache.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        kept = None
    if isinstance(kept, list) and kept and all(isinstance(i, str) for i in kept):
        return kept
    ids = compute()
    try:  # written whole, then renamed: a parallel process reads all of it or none
        cache.parent.mkdir(parents=True, exist_ok=True)
        part = cache.with_suffix(f".{os.getpid()}.part")
        part.write_text(json.dumps(ids), encoding="utf-8")
        part.replace(cache)
    except OSError:
        pass  # a read-only environment: computed every time, as outside asv
    return ids


def case_version(c: Any) -> str:
    """asv's ``version`` of a case: a hash of its setup's source.

    Every generated class shares the same ``time_case`` source, from which asv would
    derive one version for all; hashing the case body instead makes asv drop old
    results of a case whose body changed.
    """
    try:
        source = inspect.getsource(c.setup)
    except (OSError, TypeError):
        source = f"{c.module}:{c.name}"
    return hashlib.sha256(source.encode()).hexdigest()[:16]


def _is_skip(exc: BaseException) -> bool:
    return type(exc).__name__ == "SkipCase"


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def make_class(c: Any, set_name: str) -> type:
    """Build the asv benchmark class of case ``c`` in ``set_name`` (``cpu`` or ``gpu``)."""
    names = list(c.param_names)
    on_cuda = set_name == "gpu"

    def setup(self, *args):
        import torch

        torch.set_num_threads(1)
        params = dict(zip(names, args, strict=True))
        if on_cuda and not _cuda_available():
            raise NotImplementedError("GPU set: no CUDA device is available on this machine")
        try:
            self._timed = c.make(**params)
        except Exception as exc:
            if _is_skip(exc):
                raise NotImplementedError(str(exc)) from exc
            raise
        if on_cuda:
            torch.cuda.synchronize()

    def time_case(self, *args):
        self._timed.fn()
        if on_cuda:
            import torch

            torch.cuda.synchronize()

    def teardown(self, *args):
        timed = getattr(self, "_timed", None)
        self._timed = None
        if timed is not None and timed.teardown is not None:
            timed.teardown()

    attrs: dict[str, Any] = {
        "__doc__": f"asv view of case {c.name} ({c.module}), {set_name} set.",
        "params": [list(v) for v in c.values(set_name)],
        "param_names": names,
        "setup": setup,
        "time_case": time_case,
        "teardown": teardown,
        "rlpace_case": c,
        "version": case_version(c),
        **TIMING,
    }
    # a case timed on CPU time (rlpace >= the `timer` field; older cases lack it) gets
    # asv's own per-class `timer`; on CUDA everything is wall time
    if getattr(c, "timer", "wall") == "cpu" and not on_cuda:
        import time

        attrs["timer"] = time.process_time
    if on_cuda:

        def track_peak_cuda_memory(self, *args):
            import torch

            torch.cuda.reset_peak_memory_stats()
            self._timed.fn()
            torch.cuda.synchronize()
            return int(torch.cuda.max_memory_allocated())

        track_peak_cuda_memory.unit = "bytes"
        attrs["track_peak_cuda_memory"] = track_peak_cuda_memory
        for metric, unit in WORK_METRICS.items():
            attrs[f"track_{metric}"] = _work_tracker(metric, unit)
    return type(c.name, (), attrs)


WORK_METRICS = {
    "kernels": "kernel launches",
    "syncs": "syncs",
    "copies": "copies",
    "ops": "aten ops",
    "py_calls": "Python calls",
}
"""The work counts tracked per call in the GPU set (rlpace.bench.work_counts)."""


def claimed_by_count_tier(c: Any, params: dict[str, Any]) -> bool:
    """Whether the count tier counts this parameter set of case ``c`` (its
    ``count_decision``; a commit from before per-parameter decisions: ``count``, else
    ``timer == "cpu"``)."""
    decide = getattr(c, "count_decision", None)
    if decide is not None:
        return decide(**params) is None
    declared = getattr(c, "count", None)
    return getattr(c, "timer", "wall") == "cpu" if declared is None else bool(declared)


def _skip(reason: str) -> Exception:
    """asv's skip from inside a benchmark body (``SkipNotImplemented``, asv >= 0.6)."""
    try:
        from asv_runner.benchmarks.mark import SkipNotImplemented
    except ImportError:  # pragma: no cover - older asv: recorded as failed, with the reason
        return NotImplementedError(reason)
    return SkipNotImplemented(reason)


def _work_tracker(metric: str, unit: str):
    """``track_<metric>``: the typical call's count of one work metric, a series
    without noise in asv's history. A commit whose rlpace cannot count skips it."""

    def track(self, *args):
        try:
            from rlpace.bench.work_counts.measure import measure_work_counts
            from rlpace.bench.work_counts.verdict import describe_counts
        except ImportError:
            raise _skip("rlpace at this commit has no work counts") from None
        value = describe_counts(measure_work_counts(self._timed.fn)).get(metric)
        if value is None:
            raise _skip(f"rlpace at this commit does not count {metric}")
        return value

    track.__name__ = f"track_{metric}"
    track.unit = unit
    return track


def expose(namespace: dict[str, Any], set_name: str) -> list[str]:
    """Put one class per case of ``set_name`` into ``namespace``; return their names.

    A class is named like its case; when two modules declare the same case name, the
    later one is qualified with its module, ``<module>__<case>``.
    """
    exposed = []
    for c in cases():
        if not c.in_set(set_name):
            continue
        name = c.name
        if name in namespace:
            name = f"{c.module.rsplit('.', 1)[-1]}__{c.name}"
        cls = make_class(c, set_name)
        cls.__name__ = cls.__qualname__ = name
        cls.__module__ = namespace["__name__"]
        namespace[name] = cls
        exposed.append(name)
    return exposed
