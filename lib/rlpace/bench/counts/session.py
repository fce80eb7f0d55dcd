"""Count a tree's cases in one Valgrind process (restarted only past a case that hangs).

``import torch`` under Valgrind costs about 30 s, so every case of a tree shares one
Callgrind process: the counting script ``_child.py`` imports the suite once and issues
client requests around each measured call, one dump per case. This module starts that
process with CodSpeed's settings (cache simulation with a 32 KiB 8-way I1/D1 and an
8 MiB 16-way LL, instrumentation off at start, ``setarch -R`` for a fixed address
layout where the kernel allows it, ``PYTHONHASHSEED=0``, one thread, pymalloc and a
tuned glibc ``malloc``: :func:`~rlpace.bench.counts.toolchain.find_allocator`), follows
its progress file, stops it when a case runs past
:attr:`CountSettings.case_timeout` (that case is ``timed-out``; a fresh process goes on
with the next), and joins the dumps to the cases. :func:`count_trees` counts several
trees side by side, one process each: counts do not depend on load, so base and head
take one core each.

Example:
    >>> CountSettings().calls
    1
    >>> count_tree(Path("."), Path("reports/counts/head.json"))  # doctest: +SKIP
    CountRun(meta={...}, cases=(...))
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from rlpace.bench.counts.dumps import TRIGGER_PREFIX, WARM_TRIGGER, estimated_cycles, read_dumps
from rlpace.bench.counts.pricing import PRICING, priced_calls, priced_events
from rlpace.bench.counts.records import CaseCount, CountRun, write_counts
from rlpace.bench.counts.toolchain import CountUnavailable, Toolchain, find_toolchain

__all__ = [
    "CACHE_GEOMETRY",
    "CountJob",
    "CountSettings",
    "CountStopped",
    "count_tree",
    "count_trees",
    "profile_cases",
]

CACHE_GEOMETRY = ("--I1=32768,8,64", "--D1=32768,8,64", "--LL=8388608,16,64")
"""The simulated caches (CodSpeed's): recorded in every count file."""

CHILD_SCRIPT = Path(__file__).with_name("_child.py")
SUITE_DIR = Path("tests") / "benchmarks"

DETERMINISTIC_ENV = {
    "PYTHONHASHSEED": "0",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "RLPACE_BENCH_THREADS": "1",
    "TOKENIZERS_PARALLELISM": "false",
}
"""Environment of the counting process: fixed hash seed, one thread (the allocator's
variables come from :attr:`Toolchain.allocator`). Hugging Face ``tokenizers`` encodes a
batch on a rayon thread pool unless told not to, and its idle workers spin for as long
as the scheduler lets them: under load, ``llm_env_reset_step[rlpace-from_text-128-*]``
counted up to 0.95 % more, 60 M instructions of it in rayon's ``wait_until_cold``."""

KERNEL_ENV = {"MKL_ENABLE_INSTRUCTIONS": "SSE4_2", "ONEDNN_MAX_CPU_ISA": "SSE41"}
"""The matrix kernels of the counting process: MKL's and oneDNN's SSE4.2 code paths.
Valgrind emulates AVX2's fused multiply-adds one lane at a time, so MKL's AVX2 GEMMs
ran about 1000 times slower than natively (a 256x256 linear layer on 256 rows:
0.49 s; one SAC gradient step: 14 s, against 0.2 s on the SSE4.2 kernels). Counted on
both sides alike; recorded in every count file as ``kernels``."""

KERNELS = " ".join(f"{name}={value}" for name, value in KERNEL_ENV.items())
""":data:`KERNEL_ENV` as count files record it (``meta["kernels"]``), made from it so
the two cannot disagree."""

WARM_UP = f"own dump ({WARM_TRIGGER})"
"""How a counted call's warm-up stays out of its count, as count files record it
(``meta["warm_up"]``): the warm-up call ends in a dump of its own, thrown away. Count
files without it come from a counting process that cleared the warm-up's costs with
``CALLGRIND_ZERO_STATS``, which left part of them in the measured dump (1-3 % of a
short case): they are refused beside these, and gates read that way only warned about."""


class CountStopped(RuntimeError):
    """The counting was stopped before it finished (``count_tree(stop=...)``, or Ctrl-C
    while :func:`count_trees` waits); its Valgrind process was killed, nothing written.

    Example:
        >>> raise CountStopped("the counting was stopped")
        Traceback (most recent call last):
        ...
        rlpace.bench.counts.session.CountStopped: the counting was stopped
    """


@dataclass(frozen=True)
class CountSettings:
    """How a tree is counted.

    Example:
        >>> CountSettings(calls=0)
        Traceback (most recent call last):
        ...
        ValueError: CountSettings.calls: expected an integer >= 1, got 0; pass 1 or more
    """

    calls: int = 1
    """Measured calls per case; the counts are per call (their mean)."""
    warmup: int = 2
    """Plain calls before the counted ones, plus one: exactly ``warmup + 1`` run, and
    the wait guard reads them all. Two, because the first call under Valgrind also pays
    the translation of code it runs for the first time, which reads as computing even
    in a call that sleeps."""
    busy_share: float = 0.25
    """A case whose plain call computes less than this share of its wall time (time
    queued for a CPU excluded) waits on something the counts cannot see: not counted.
    A sleeping or worker-driven call reads a few percent; a computing one close to 1,
    but 0.4-0.5 on a loaded machine when it hands work to helper threads, whose queued
    time this reading does not see."""
    warm_cache_below_s: float = 1.0
    """The extra call before the measured ones warms the simulated caches under
    instrumentation (its counts dumped apart, thrown away) when the last plain call took
    less CPU time than this under Valgrind; a longer call, whose cold misses are a
    negligible share of it and whose instrumented call costs many times its plain one,
    runs plain. Each case records which (:attr:`~rlpace.bench.counts.records.CaseCount.warmed`)."""
    case_timeout: float = 900.0
    """Seconds one case may take under Valgrind (setup included) before it is stopped."""
    python_calls: int = 200
    """Python functions whose call counts (and bytecode counts) :func:`profile_cases`
    keeps per case (a plain process profiles only the cases a comparison flags, never
    under Valgrind)."""
    select: tuple[str, ...] = ()
    """Test-id patterns (globs, or substrings) choosing cases; empty: all of them."""
    ids: tuple[str, ...] = ()
    """Exact test ids; when given, only these are counted (with ``select`` and
    ``keyword`` still applied). A pattern cannot say "this id and no longer one":
    ``test_add`` is a substring of ``test_add_inplace``."""
    keyword: str | None = None
    """A pytest ``-k`` expression over test ids (words as substrings; ``and``, ``or``,
    ``not``, parentheses), applied with ``select``."""

    def __post_init__(self) -> None:
        for name in ("calls", "warmup"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(
                    f"CountSettings.{name}: expected an integer >= 1, got {value!r}; pass 1 or more"
                )
        if not 0 <= self.busy_share <= 1:
            raise ValueError(
                f"CountSettings.busy_share: expected a share in [0, 1], got {self.busy_share!r}"
            )
        if not self.warm_cache_below_s >= 0:
            raise ValueError(
                "CountSettings.warm_cache_below_s: expected CPU seconds >= 0, got "
                f"{self.warm_cache_below_s!r}"
            )
        if self.case_timeout <= 0:
            raise ValueError(
                f"CountSettings.case_timeout: expected seconds > 0, got {self.case_timeout!r}"
            )


@dataclass(frozen=True)
class CountJob:
    """One tree to count, for :func:`count_trees`.

    Example:
        >>> CountJob(Path("."), Path("head.json")).python == Path(sys.executable)
        True
    """

    tree: Path
    output: Path
    python: Path = field(default_factory=lambda: Path(sys.executable))
    environ: Mapping[str, str] = field(default_factory=dict)
    """Extra environment variables (``PYTHONPATH`` defaults to ``<tree>/lib`` first)."""


def _probe_python(python: Path) -> dict[str, str]:
    code = (
        "import json, platform, importlib.metadata as m\n"
        "def v(d):\n"
        "    try: return m.version(d)\n"
        "    except Exception: return None\n"
        "print(json.dumps({'python': platform.python_version(),"
        " 'python_implementation': platform.python_implementation(),"
        " 'torch': v('torch'), 'numpy': v('numpy'), 'tensordict': v('tensordict'),"
        " 'torchrl': v('torchrl')}))"
    )
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise CountUnavailable(
            f"{python}: expected a Python interpreter, it failed ({done.stderr.strip()[-200:]})"
        )
    return json.loads(done.stdout)


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _commit(tree: Path) -> str | None:
    done = subprocess.run(
        ["git", "-C", str(tree), "rev-parse", "HEAD"], capture_output=True, text=True, check=False
    )
    return done.stdout.strip() or None if done.returncode == 0 else None


def _command(tools: Toolchain, python: Path, dumps: Path, spec: Path) -> list[str]:
    prefix = [tools.setarch, platform.machine(), "-R"] if tools.setarch else []
    return [
        *prefix,
        tools.valgrind,
        "-q",
        "--tool=callgrind",
        "--cache-sim=yes",
        *CACHE_GEOMETRY,
        "--instr-atstart=no",
        "--dump-line=no",
        f"--callgrind-out-file={dumps / 'cg.%p'}",
        str(python),
        str(CHILD_SCRIPT),
        str(spec),
    ]


class _Progress:
    """Reads the child's progress file incrementally."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0

    def new(self) -> list[dict]:
        if not self.path.is_file():
            return []
        with self.path.open(encoding="utf-8") as fh:
            fh.seek(self.offset)
            text = fh.read()
        complete = text[: text.rfind("\n") + 1]
        self.offset += len(complete.encode("utf-8"))
        return [json.loads(line) for line in complete.splitlines() if line.strip()]


def _run_child(
    command: list[str],
    env: Mapping[str, str],
    progress: _Progress,
    results: dict[str, dict],
    state: dict,
    settings: CountSettings,
    on_case: Callable[[str, str], None] | None,
    log: Path,
    stop: threading.Event | None = None,
) -> None:
    """Run one counting process until it ends; fill ``results`` and ``state``."""
    with log.open("ab") as err:
        proc = subprocess.Popen(  # noqa: S603 - our own command line
            command, env=dict(env), stdout=err, stderr=err, start_new_session=True
        )
        try:
            current = _watch_child(proc, progress, results, state, settings, on_case, stop)
        finally:  # an error, Ctrl-C or a stop must not leave Valgrind running
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        if current is not None:  # the process died inside a case
            results[current[0]] = {
                "status": "crashed",
                "reason": _crash_reason(log.read_text(errors="replace"), proc.returncode),
            }


def _watch_child(
    proc: subprocess.Popen,
    progress: _Progress,
    results: dict[str, dict],
    state: dict,
    settings: CountSettings,
    on_case: Callable[[str, str], None] | None,
    stop: threading.Event | None = None,
) -> tuple[str, float] | None:
    """Follow one counting process's events until it ends (or a case times out); the
    case it was inside when it ended, if any. Raises :class:`CountStopped` once
    ``stop`` is set."""
    current: tuple[str, float] | None = None
    while True:
        if stop is not None and stop.is_set():
            raise CountStopped("the counting was stopped")
        finished = proc.poll() is not None
        for event in progress.new():
            kind = event.pop("event")
            if kind == "plan":
                state["plan"] = event["ids"]
            elif kind == "fatal":
                state["fatal"] = event["reason"]
            elif kind == "start":
                current = (event["id"], time.monotonic())
            elif kind == "done":
                test_id = event.pop("id")
                results[test_id] = event
                current = None
                if on_case is not None:
                    on_case(test_id, event["status"])
        if finished:
            break
        if current is not None and time.monotonic() - current[1] > settings.case_timeout:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            results[current[0]] = {
                "status": "timed-out",
                "reason": f"ran past {settings.case_timeout:.0f} s under Valgrind",
            }
            current = None
            break
        time.sleep(0.2)
    return current


def _crash_reason(log: str, returncode: int | None) -> str:
    """What killed the counting process, from Valgrind's log.

    Example:
        >>> _crash_reason("==1== Process terminating with default action of signal 4 (SIGILL)", -4)
        'Valgrind cannot execute an instruction of this CPU (SIGILL), e.g. AVX-512 code that torch.compile built for this host; timing only'
    """
    lines = [line for line in log.strip().splitlines() if "Process terminating" in line]
    if lines and "SIGILL" in lines[-1]:
        return (
            "Valgrind cannot execute an instruction of this CPU (SIGILL), e.g. AVX-512 code "
            "that torch.compile built for this host; timing only"
        )
    if lines:
        return f"the Valgrind process died: {lines[-1].split('==', 2)[-1].strip()[:160]}"
    tail = (log.strip().splitlines() or [""])[-1]
    return f"the Valgrind process exited {returncode} ({tail[-160:]})"


def count_tree(
    tree: Path,
    output: Path,
    *,
    python: Path | None = None,
    settings: CountSettings | None = None,
    environ: Mapping[str, str] | None = None,
    toolchain: Toolchain | None = None,
    on_case: Callable[[str, str], None] | None = None,
    suite_dir: Path | None = None,
    stop: threading.Event | None = None,
) -> CountRun:
    """Count every selected case of ``tree``'s suite and write the count file ``output``.

    The dumps go to ``<output without .json>.dumps/`` beside it. ``suite_dir`` defaults
    to ``<tree>/tests/benchmarks``; ``PYTHONPATH`` starts with ``<tree>/lib`` unless
    ``environ`` sets it. Setting ``stop`` (from another thread) ends the counting
    within a fraction of a second: the Valgrind process is killed, nothing is written.

    Raises:
        CountUnavailable: Valgrind, its header or gcc is missing, or the suite could
            not even be imported under Valgrind (the reason says which).
        CountStopped: ``stop`` was set.

    Example:
        >>> count_tree(Path("."), Path("reports/counts/head.json"))  # doctest: +SKIP
    """
    settings = settings or CountSettings()
    tools = toolchain or find_toolchain()
    tree = Path(os.path.abspath(tree))  # not resolved: a link keeps its own path (see tier)
    python = Path(python or sys.executable)
    output = Path(output).resolve()
    dumps = output.with_suffix("").with_name(output.stem + ".dumps")
    dumps.mkdir(parents=True, exist_ok=True)
    for old in dumps.iterdir():
        old.unlink()
    # <stem>.tmp: the same length for base.json and head.json
    scratch = _scratch(output.with_suffix("").with_name(output.stem + ".tmp"))
    env = _child_env(tree, environ, tools.allocator.environ(), scratch)
    suite = Path(suite_dir).resolve() if suite_dir is not None else tree / SUITE_DIR
    started = time.monotonic()
    paths = _Paths(dumps / "spec.json", dumps / "progress.jsonl", dumps / "valgrind.log")
    results: dict[str, dict] = {}
    plain = _plain_plan(python, env, paths, _spec(tree, suite, settings, paths, (), ""))
    if plain.get("ids") is not None and not plain.get("claimed"):
        # nothing to count: no Valgrind process, no instrumented imports
        state: dict = {"plan": plain["ids"]}
        results = {i: {"status": "not-counted", "reason": r} for i, r in plain["unclaimed"].items()}
    else:
        state = {}
        while True:
            spec = _spec(tree, suite, settings, paths, tuple(results), str(tools.shim))
            paths.spec.write_text(json.dumps(spec), encoding="utf-8")
            paths.progress.unlink(missing_ok=True)  # a restart reports afresh
            before = len(results)
            _run_child(
                _command(tools, python, dumps, paths.spec),
                env,
                _Progress(paths.progress),
                results,
                state,
                settings,
                on_case,
                paths.log,
                stop,
            )
            if "fatal" in state and "plan" not in state:
                raise CountUnavailable(
                    f"{tree}: the suite could not be imported under Valgrind: {state['fatal']}"
                )
            if all(i in results for i in state.get("plan", [])) or len(results) == before:
                break
    reason = state.get("fatal", "the Valgrind process ended before this case")
    plan = state.get("plan") or []
    for test_id in plan:
        results.setdefault(test_id, {"status": "crashed", "reason": reason})
    found = read_dumps(dumps)
    run = CountRun(
        meta=_meta(tools, python, tree, settings, time.monotonic() - started),
        cases=tuple(_case(i, results[i], found, settings, output) for i in plan),
    )
    write_counts(run, output)
    return run


def _child_env(
    tree: Path,
    environ: Mapping[str, str] | None,
    allocator: Mapping[str, str] | None = None,
    scratch: Path | None = None,
) -> dict[str, str]:
    """The environment of a counting or profiling process of ``tree``: ``<tree>/lib``
    first on ``PYTHONPATH`` (unless ``environ`` sets it), then the deterministic
    settings, the allocator's variables and ``scratch`` as ``TMPDIR``, which nothing
    overrides."""
    rest = os.environ.get("PYTHONPATH", "")
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in (str(tree / "lib"), rest) if p),
        **(environ or {}),
        **DETERMINISTIC_ENV,
        **KERNEL_ENV,
        **(allocator or {}),
        **({"TMPDIR": str(scratch)} if scratch is not None else {}),
    }


def _scratch(folder: Path) -> Path:
    """``folder``, made empty: a counting or profiling process's ``TMPDIR``.

    The process's own: code under test that looks at the temporary folder does
    work that follows what else is there. rlpace's memory-mapped buffers sweep it for
    orphaned folders once a minute, and an A/A count of
    ``test_rb_populate[rlpace-memmap-slice]`` moved 3.3 % (its gate 1 %) with the
    number of entries in a shared ``/tmp`` and whether a minute had passed; in a
    folder of its own the sweep finds next to nothing.
    """
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


@dataclass(frozen=True)
class _Paths:
    spec: Path
    progress: Path
    log: Path


def _spec(
    tree: Path, suite: Path, settings: CountSettings, paths: _Paths, skip: tuple, shim: str
) -> dict:
    roots = [str(tree / "lib"), str(tree), *sorted(set(sys.path) - {""}, key=len)[::-1]]
    return {
        "suite_dir": str(suite),
        "shim": shim,
        "progress": str(paths.progress),
        "dumps": str(paths.spec.parent),
        "warm_trigger": WARM_TRIGGER,
        "warm_header": f"{TRIGGER_PREFIX}{WARM_TRIGGER}\n",
        "select": list(settings.select),
        "ids": list(settings.ids),
        "keyword": settings.keyword,
        "skip": list(skip),
        "warmup": settings.warmup,
        "calls": settings.calls,
        "busy_share": settings.busy_share,
        "warm_cache_below_s": settings.warm_cache_below_s,
        "python_calls": settings.python_calls,
        "roots": roots,
        "profile": None,
    }


def _plain_plan(python: Path, env: Mapping[str, str], paths: _Paths, spec: dict) -> dict:
    """The selection and which cases are claimed, from a plain (un-instrumented) import;
    empty when that failed (Valgrind's run then says why)."""
    paths.spec.write_text(json.dumps({**spec, "plan_only": True}), encoding="utf-8")
    with paths.log.open("ab") as err:
        subprocess.run(  # noqa: S603 - our own command line
            [str(python), str(CHILD_SCRIPT), str(paths.spec)],
            env=dict(env),
            stdout=err,
            stderr=err,
            check=False,
        )
    events = _Progress(paths.progress).new()
    paths.progress.unlink(missing_ok=True)
    plans = [e for e in events if e.get("event") == "plan"]
    return plans[0] if plans else {}


def _case(
    test_id: str, result: dict, dumps: dict, settings: CountSettings, output: Path
) -> CaseCount:
    fields = {
        k: result.get(k) for k in ("reason", "python_calls", "busy_share", "warmed", "plain_cpu_s")
    }
    fields["reason"] = fields["reason"] or ""
    status = result["status"]
    if status == "counted":
        dump = dumps.get(test_id)
        if dump is None:
            return CaseCount(test_id, "crashed", reason="counted, but Callgrind wrote no dump")
        if "Ir" in dump.wrapped or dump.instructions <= 0:
            # a count read as 0 could never move: no verdict rather than a false one
            return CaseCount(
                test_id,
                "not-counted",
                reason="Callgrind's instruction count of the measured call wrapped below "
                "zero or is 0; timing only",
                busy_share=fields["busy_share"],
            )
        costs = priced_calls(dump.path)
        if costs is None:
            return CaseCount(test_id, "crashed", reason="counted, but its dump could not be read")
        calls = int(result.get("calls") or settings.calls)  # the case may ask for more
        # the verdict's figures price the calls whose cost follows the process's history
        # (the allocator, the type cache; see counts.pricing); raw events stay beside
        priced = priced_events(dump.events, costs)
        cycles = estimated_cycles(priced)
        return CaseCount(
            test_id,
            status,
            instructions=priced["Ir"] / calls,
            cycles=None if cycles is None else cycles / calls,
            events={k: v / calls for k, v in dump.events.items()},
            dump=str(dump.path.relative_to(output.parent)),
            calls=calls,
            priced_calls={k: c.calls / calls for k, c in costs.items()},
            priced_instructions={k: c.events.get("Ir", 0.0) / calls for k, c in costs.items()},
            **fields,
        )
    return CaseCount(test_id, status, **fields)


def _meta(
    tools: Toolchain, python: Path, tree: Path, settings: CountSettings, wall_s: float
) -> dict:
    return {
        **_probe_python(python),
        "valgrind": tools.valgrind_version,
        "arch": platform.machine(),
        "cpu": _cpu_model(),
        "host": platform.node(),
        "cache": " ".join(CACHE_GEOMETRY),
        "calls": settings.calls,
        "call_pricing": PRICING,
        "kernels": KERNELS,
        "warm_up": WARM_UP,
        "aslr_off": tools.setarch is not None,
        "allocator": tools.allocator.identity,
        "commit": _commit(tree),
        "tree": str(tree),
        "wall_s": round(wall_s, 1),
        "settings": asdict(settings),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def count_trees(
    jobs: Sequence[CountJob],
    *,
    settings: CountSettings | None = None,
    on_case: Callable[[str, str, str], None] | None = None,
) -> list[CountRun]:
    """Count several trees at once, one Valgrind process each (base and head side by side).

    ``on_case(output_stem, test_id, status)`` is called as cases finish.

    Example:
        >>> count_trees([])
        []
    """
    if not jobs:
        return []
    tools = find_toolchain()
    stop = threading.Event()

    def one(job: CountJob) -> CountRun:
        report = None if on_case is None else (lambda i, s: on_case(job.output.stem, i, s))
        return count_tree(
            job.tree,
            job.output,
            python=job.python,
            settings=settings,
            environ=job.environ,
            toolchain=tools,
            on_case=report,
            stop=stop,
        )

    pool = ThreadPoolExecutor(max_workers=len(jobs))
    futures = [pool.submit(one, job) for job in jobs]
    try:
        return [f.result() for f in futures]
    except BaseException:
        # Ctrl-C, or one tree that failed: the other Valgrind processes end now, not
        # minutes later when their counting is done
        stop.set()
        raise
    finally:
        pool.shutdown(wait=True)


def profile_cases(
    job: CountJob,
    test_ids: Sequence[str],
    *,
    settings: CountSettings | None = None,
    suite_dir: Path | None = None,
) -> dict[str, dict[str, dict[str, int]]]:
    """Python profiles of each of ``test_ids`` in ``job.tree``, from a plain process
    (no Valgrind: seconds, not minutes): per case ``{"python_calls": {function:
    calls}, "python_bytecodes": {function: bytecode instructions it ran itself}}``,
    each of one call, the :class:`~rlpace.bench.counts.records.CaseCount` fields.

    Only cases that ran are in the result; one that failed or was skipped is left out
    (the comment then lists native functions only). The files go beside ``job.output``.

    Example:
        >>> found = profile_cases(CountJob(Path("."), Path("build/head.json")),
        ...                       ["test_rb_sample[rlpace-tensor]"])  # doctest: +SKIP
        >>> sorted(found["test_rb_sample[rlpace-tensor]"]["python_calls"])[:1]  # doctest: +SKIP
        ['rlpace/data/_buffer.py:sample']
    """
    if not test_ids:
        return {}
    settings = settings or CountSettings()
    tree = Path(os.path.abspath(job.tree))
    output = Path(job.output).resolve()
    work = output.with_suffix("").with_name(output.stem + ".profile")
    work.mkdir(parents=True, exist_ok=True)
    paths = _Paths(work / "spec.json", work / "progress.jsonl", work / "profile.log")
    paths.progress.unlink(missing_ok=True)
    env = _child_env(tree, job.environ, scratch=_scratch(work / "tmp"))
    suite = Path(suite_dir).resolve() if suite_dir is not None else tree / SUITE_DIR
    spec = {**_spec(tree, suite, settings, paths, (), ""), "profile": list(test_ids)}
    paths.spec.write_text(json.dumps(spec), encoding="utf-8")
    # on a timeout, what it profiled before is still in the progress file
    with paths.log.open("ab") as err, contextlib.suppress(subprocess.TimeoutExpired):
        subprocess.run(  # noqa: S603 - our own command line
            [str(job.python), str(CHILD_SCRIPT), str(paths.spec)],
            env=env,
            stdout=err,
            stderr=err,
            check=False,
            timeout=max(60.0, settings.case_timeout),
        )
    found = {}
    for event in _Progress(paths.progress).new():
        if event.get("event") == "done" and event.get("status") == "profiled":
            found[event["id"]] = {
                field: {k: int(v) for k, v in (event.get(field) or {}).items()}
                for field in ("python_calls", "python_bytecodes")
            }
    return found
