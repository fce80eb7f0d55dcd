"""The process that runs inside Valgrind: import the suite once, count every case.

Started as a *script* (``python _child.py SPEC.json``), never imported as
``rlpace.bench.counts._child``: the tree under measurement (a base checkout) may be an
older rlpace without this package, so this file needs only the standard library and
the case contract of ``rlpace.bench.suite`` (``__rlpace_case__`` with ``name``,
``grid``, ``test_id``, ``make``; a ``SkipCase`` exception; optional ``count``).

Protocol, one JSON object per line appended to the progress file:

- ``{"event": "plan", "ids": [...], "claimed": [...]}`` once, after the case modules
  are imported (with ``"plan_only": true`` in the spec the process stops there: run
  without Valgrind, it tells the parent whether any case needs counting at all);
- ``{"event": "start", "id": ...}`` before a case's setup;
- ``{"event": "done", "id": ..., "status": ..., "reason": ..., ...}`` after it;
- ``{"event": "fatal", "reason": ...}`` when nothing more can run.

With ``"profile": [ids]`` in the spec the process runs without Valgrind and, for
those cases only, reports the Python call counts of one profiled call and the bytecode
each Python function ran in the next (``"status": "profiled"``, ``"python_calls":
{...}``, ``"python_bytecodes": {...}``): the names behind a count regression, at
native speed rather than under Valgrind.

Per counted case: its setup and exactly ``warmup + 1`` plain calls run with
instrumentation off (they decide whether the case computes or waits; never more or
fewer, so the state the measured call starts from does not depend on load); then the
global random generators are seeded and, with the garbage collector off,
instrumentation on, one call warms the simulated caches and is dumped apart
(``CALLGRIND_DUMP_STATS_AT(rlpace-warm-up)``, that dump deleted; a call of a second or
more runs plain instead, before instrumentation starts and ``CALLGRIND_ZERO_STATS``:
under any load the measured call is the same call of the case), ``calls`` measured
calls (the case's ``Timed.count_calls`` when it sets one),
``CALLGRIND_DUMP_STATS_AT(<id>)`` and instrumentation off; the ``done`` event says how
many calls the dump holds. The parent reads the dump whose
trigger names the case.
"""

from __future__ import annotations

import ctypes
import fnmatch
import gc
import importlib.util
import json
import multiprocessing
import os
import re
import resource
import statistics
import sys
import time
import traceback
from pathlib import Path

MODULE_PREFIX = "rlpace_count_cases"


def _emit(progress: Path, **record: object) -> None:
    with progress.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(record) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def _run_delay() -> int:
    """ns this thread has spent queued for a CPU (0 where unknown)."""
    try:
        return int(Path("/proc/thread-self/schedstat").read_text().split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def _voluntary_switches() -> int:
    """Times any thread of this process gave up its CPU to wait (sleep, I/O, a lock)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw


def _busy_share(fn) -> tuple[float | None, float]:
    """(share of one call's wall time spent computing, its CPU time in seconds).

    A call during which no thread of the process gave up its CPU of its own accord (no
    voluntary context switch: no sleep, no wait for I/O, a lock, a pipe or another
    process) computed all along, however long the machine kept it queued: its share is
    1. That reading is a count, not a time, so load cannot change it. Only a call that
    did wait is read from its clocks: time the thread spent queued for a CPU is taken
    off the wall time, and a reading where that queued time is more than half the call
    is too uncertain to tell (None). The clocks alone misread short calls under load:
    the queued time is booked when the thread gets its CPU back, so a wait that
    straddles the start or end of a call of a few milliseconds lands on the wrong side
    of it (calls of 10-20 ms with four processes a core read 42-52 % busy while
    computing all along).
    """
    s0 = _voluntary_switches()
    w0, c0, q0 = time.perf_counter(), time.process_time(), _run_delay()
    fn()
    w1, c1, q1 = time.perf_counter(), time.process_time(), _run_delay()
    s1 = _voluntary_switches()
    raw, cpu = w1 - w0, c1 - c0
    if s1 == s0 or raw <= 1e-4:
        return 1.0, cpu
    queued = (q1 - q0) / 1e9
    if queued > 0.5 * raw:
        return None, cpu
    return min(1.0, cpu / (raw - queued)), cpu


def _matches(test_id: str, patterns: list[str]) -> bool:
    """Any pattern names ``test_id``: ``rlpace.bench.suite.id_matches``'s rule, written
    again because this script imports nothing from rlpace (a base tree may predate it)."""
    if not patterns:
        return True
    for pattern in patterns:
        if any(ch in pattern for ch in "*?"):
            if fnmatch.fnmatchcase(test_id, pattern.replace("[", "[[]")):
                return True
        elif pattern in test_id:
            return True
    return False


_KEYWORD_TOKEN = re.compile(r"\s*(\(|\)|[^\s()]+)")


def _keyword_matches(test_id: str, expression: str | None) -> bool:
    """pytest's ``-k`` on a test id: words match as case-insensitive substrings, joined
    with ``and``, ``or``, ``not`` and parentheses."""
    if not expression:
        return True
    parts = []
    for token in _KEYWORD_TOKEN.findall(expression):
        if token in ("(", ")", "and", "or", "not"):
            parts.append(token)
        else:
            parts.append(str(token.lower() in test_id.lower()))
    return bool(eval(" ".join(parts), {"__builtins__": {}}, {}))  # noqa: S307 - only True/False/and/or/not/()


def _load_cases(suite_dir: Path) -> list:
    found = []
    sys.path.insert(0, str(suite_dir))
    for path in sorted(suite_dir.glob("test_*.py")):
        name = f"{MODULE_PREFIX}.{path.stem}"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        for value in vars(module).values():
            c = getattr(value, "__rlpace_case__", None)
            if c is not None and c not in found:
                found.append(c)
    return found


def _function_key(filename: str, func: str, roots: list[str]) -> str:
    """``relative/path.py:function``, the path made relative to the first root it is in;
    a builtin's object address (``... of type object at 0x7f...``) dropped, since it
    differs between base's process and head's."""
    for root in roots:
        if filename.startswith(root):
            filename = filename[len(root) :].lstrip("/")
            break
    return f"{filename}:{_ADDRESS.sub('', func)}"


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def _top(values: dict[str, int], limit: int) -> dict[str, int]:
    return dict(sorted(values.items(), key=lambda kv: -kv[1])[:limit])


def _python_calls(fn, roots: list[str], limit: int) -> dict[str, int]:
    """Python-level call counts of one call, keyed ``relative/path.py:function``."""
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    profiler.runcall(fn)
    calls: dict[str, int] = {}
    for (filename, _line, func), row in pstats.Stats(profiler).stats.items():
        key = _function_key(filename, func, roots)
        calls[key] = calls.get(key, 0) + int(row[1])
    return _top(calls, limit)


def _python_bytecodes(fn, roots: list[str], limit: int) -> dict[str, int]:
    """Bytecode instructions each Python function executed itself in one call (its own
    frames, not its callees'), keyed like :func:`_python_calls`.

    A change inside a function that adds no call (a check, a conversion) shows here as
    the function that ran more bytecode; in the native dumps it is only the interpreter
    loop. Counted with an opcode trace, which slows the call 20-50 times: it runs in the
    plain profiling process, for the flagged cases only.
    """
    counts: dict = {}

    def per_frame(frame, event, arg):
        frame.f_trace_opcodes = True
        frame.f_trace_lines = False
        code = frame.f_code

        def per_opcode(frame, event, arg):
            if event == "opcode":
                counts[code] = counts.get(code, 0) + 1
            return per_opcode

        return per_opcode

    sys.settrace(per_frame)
    try:
        fn()
    finally:
        sys.settrace(None)
    keyed: dict[str, int] = {}
    for code, n in counts.items():
        key = _function_key(code.co_filename, code.co_name, roots)
        keyed[key] = keyed.get(key, 0) + n
    return _top(keyed, limit)


def _unclaimed(c, params: dict) -> str | None:
    """Why the count tier does not claim a case by its declaration, or None."""
    decide = getattr(c, "count_decision", None)
    if decide is not None:
        return decide(**params)
    # an older rlpace (a base commit) without count_decision: its flag, else its timer
    declared = getattr(c, "count", None)
    if declared is None:
        declared = getattr(c, "timer", "wall") == "cpu"
    if params.get("device", "cpu") != "cpu":
        return "runs on an accelerator"
    if not declared:
        return "declared: timed on the wall clock or count=False (workers, threads or waits)"
    return None


def _count_one(c, params: dict, test_id: str, spec: dict, shim, skip_case) -> dict:
    unclaimed = _unclaimed(c, params)
    if unclaimed is not None:
        return {"status": "not-counted", "reason": unclaimed}
    try:
        timed = c.make(**params)
    except skip_case as exc:
        return {"status": "skipped", "reason": str(exc)}
    fn = timed.fn
    try:
        # exactly warmup + 1 plain calls, whatever they read: the state a case reaches
        # the measured call in (an episode's step, an epoch's position, the allocator)
        # must not depend on the machine's load, or base and head count different work
        # (stopping early when the readings looked clear moved trainer_startup[ppo] by
        # 7 % and rb_sample by up to 5 % against counts that stopped later). The verdict
        # is the median clear reading (the first call also pays Valgrind's translation
        # of new code, which reads as computing); none clear (a machine so loaded that
        # every call mostly queued): trust the case's declaration
        readings, cpu_seconds = [], 0.0
        for _ in range(max(1, int(spec["warmup"])) + 1):
            reading, cpu_seconds = _busy_share(fn)
            if reading is not None:
                readings.append(reading)
        share = statistics.median(readings) if readings else 1.0
        if multiprocessing.active_children():
            return {"status": "not-counted", "reason": "workers: the case runs worker processes"}
        if share < float(spec["busy_share"]):
            return {
                "status": "not-counted",
                "reason": f"waits: the call computes {share:.0%} of its wall time",
                "busy_share": share,
            }
        # a case whose one call is too small for its count to settle asks for more
        # (an older rlpace's Timed, in a base checkout, has no count_calls)
        calls = int(getattr(timed, "count_calls", None) or spec["calls"])
        # one more call before the measured ones, in every count: where it runs follows
        # the clock, never whether, so the measured call is the same call of the case
        # under any load. A short call warms the simulated caches under instrumentation
        # and its counts are dumped apart and thrown away: CALLGRIND_ZERO_STATS after an
        # instrumented call leaves part of that call's costs in the next dump's cost
        # lines (2.3 % of a sum over a range), and when a loaded machine made
        # collector_single[rlpace-cartpole]'s call last past a second, the call ran
        # plain and counted 1.7 % fewer instructions. A long call's cold misses are a
        # negligible share of it and its instrumented call costs minutes: it runs plain.
        # Long by the last plain call's CPU time, which a loaded machine barely moves
        # (its wall time it multiplies): waiting decides nothing
        warm_caches = cpu_seconds < float(spec.get("warm_cache_below_s", 1.0))
        gc.collect()
        _reseed()  # the same random draws in every count of this case, base and head alike
        gc.disable()
        try:
            if warm_caches:
                shim.rlpace_start_instrumentation()
                fn()
                shim.rlpace_dump_stats_at(spec["warm_trigger"].encode())
            else:
                fn()
                shim.rlpace_start_instrumentation()
                shim.rlpace_zero_stats()
            for _ in range(calls):
                fn()
            shim.rlpace_dump_stats_at(test_id.encode())
            shim.rlpace_stop_instrumentation()
        finally:
            gc.enable()
        if warm_caches:  # after instrumentation stopped: these reads are not counted
            _drop_warm_dump(Path(spec["dumps"]), spec["warm_header"])
        return {
            "status": "counted",
            "reason": "",
            "busy_share": share,
            "calls": calls,
            # how this count warmed its caches, and the reading that chose it: base and
            # head that chose differently did not measure the same thing
            "warmed": "instrumented" if warm_caches else "plain",
            "plain_cpu_s": cpu_seconds,
        }
    finally:
        if timed.teardown is not None:
            timed.teardown()


def _drop_warm_dump(folder: Path, header_line: str) -> None:
    """Delete the warm-up's dump: of this process's two newest dumps (Callgrind numbers
    them ``cg.<pid>.<n>``), the one whose header holds ``header_line``, the warm-up's
    trigger line as the parent spells it."""
    numbered = []
    for path in folder.glob(f"cg.{os.getpid()}.*"):
        suffix = path.name.rsplit(".", 1)[-1]
        if suffix.isdigit():
            numbered.append((int(suffix), path))
    for _, path in sorted(numbered)[-2:]:
        try:
            with path.open("rb") as fh:
                if header_line in fh.read(4096).decode("utf-8", errors="replace"):
                    path.unlink()
        except OSError:
            pass  # the parent's reader skips a warm-up dump left behind


def _reseed(seed: int = 0) -> None:
    """Seed the global generators the case may draw from (Python's, torch's, numpy's),
    so a sampler draws the same indices in every count of a case."""
    import random

    random.seed(seed)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.manual_seed(seed)
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed(seed)


def _profile_one(c, params: dict, spec: dict, skip_case) -> dict:
    """A plain (un-instrumented) process's Python call counts of one call of a case:
    Python-level names for "why did it regress?", at native speed."""
    try:
        timed = c.make(**params)
    except skip_case as exc:
        return {"status": "skipped", "reason": str(exc)}
    try:
        timed.fn()  # lazy initialisation is not part of a steady call
        limit = int(spec.get("python_calls") or 200)
        calls = _python_calls(timed.fn, spec["roots"], limit)
        bytecodes = _python_bytecodes(timed.fn, spec["roots"], limit)
        return {
            "status": "profiled",
            "reason": "",
            "python_calls": calls,
            "python_bytecodes": bytecodes,
        }
    finally:
        if timed.teardown is not None:
            timed.teardown()


def main(spec_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text(encoding="utf-8"))
    progress = Path(spec["progress"])
    parent = os.getppid()  # the driver; if it dies (even SIGKILLed) this process stops
    plain = bool(spec.get("plan_only")) or spec.get("profile") is not None
    plan_only = bool(spec.get("plan_only"))
    try:
        shim = None if plain else ctypes.CDLL(spec["shim"])
        if shim is not None:
            shim.rlpace_dump_stats_at.argtypes = [ctypes.c_char_p]
        if shim is not None and not shim.rlpace_running_on_valgrind():
            _emit(progress, event="fatal", reason="the counting process is not under Valgrind")
            return 3
        from rlpace.bench.suite import SkipCase

        cases = _load_cases(Path(spec["suite_dir"]))
        if "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(1)
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which names the case
        tail = traceback.format_exc(limit=3).strip().splitlines()[-1]
        _emit(progress, event="fatal", reason=f"{type(exc).__name__}: {exc} ({tail})")
        return 3
    done = set(spec.get("skip", []))
    exact = set(spec.get("ids", []))
    plan = []
    for c in cases:
        for params in c.grid("cpu"):
            test_id = c.test_id(**params)
            if exact and test_id not in exact:
                continue
            if _matches(test_id, spec.get("select", [])) and _keyword_matches(
                test_id, spec.get("keyword")
            ):
                plan.append((c, params, test_id))
    unclaimed = {t: _unclaimed(c, p) for c, p, t in plan}
    _emit(
        progress,
        event="plan",
        ids=[t for _, _, t in plan],
        claimed=[t for t, why in unclaimed.items() if why is None],
        unclaimed={t: why for t, why in unclaimed.items() if why is not None},
    )
    if plan_only:  # a plain process asked which cases Valgrind would have to run
        return 0
    profile = spec.get("profile")
    for c, params, test_id in plan:
        if test_id in done or (profile is not None and test_id not in profile):
            continue
        if os.getppid() != parent:  # orphaned: nobody reads the counts any more
            return 4
        _emit(progress, event="start", id=test_id)
        try:
            if profile is not None:
                result = _profile_one(c, params, spec, SkipCase)
            else:
                result = _count_one(c, params, test_id, spec, shim, SkipCase)
        except Exception as exc:  # noqa: BLE001 - one failing case must not end the run
            result = {"status": "failed", "reason": f"{type(exc).__name__}: {exc}"}
        _emit(progress, event="done", id=test_id, **result)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
