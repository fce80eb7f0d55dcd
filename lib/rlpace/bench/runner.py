"""Run one benchmark set under pytest-benchmark with stable settings.

The settings that make timings comparable are applied here, by the runner, never by
the cases: one intra-op thread (``torch.set_num_threads(1)`` in the benchmark process,
done by the suite plugin when ``RLPACE_BENCH_THREADS`` is set, and ``OMP_NUM_THREADS``
/ ``MKL_NUM_THREADS`` = 1 in its environment), warm-up iterations, the garbage
collector off while timing, raw samples kept in the JSON file, and a per-case
timeout. The suite plugin (``tests/benchmarks/conftest.py``) stores the environment
metadata (:mod:`rlpace.bench.environment`) in the file's ``machine_info``.

Example:
    >>> settings = RunSettings(max_time=0.05, min_rounds=5)
    >>> args = pytest_args(set_name="cpu", output=Path("out.json"), settings=settings)
    >>> "--benchmark-disable-gc" in args and "--benchmark-save-data" in args
    True
    >>> env = stable_environ({"OMP_NUM_THREADS": "8"}, settings)
    >>> env["OMP_NUM_THREADS"], env["RLPACE_BENCH_THREADS"]
    ('1', '1')

The thread count travels as environment variables rather than a plugin option so that
a base commit whose suite plugin predates the option still runs.
"""

from __future__ import annotations

import argparse
import contextlib
import getpass
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from rlpace.bench.environment import MACHINE_INFO_KEY, collect_environment
from rlpace.bench.errors import BenchInputError
from rlpace.bench.suite import WALL_ROUNDS_ENV

__all__ = [
    "RunOutcome",
    "RunSettings",
    "abba_schedule",
    "add_timing_arguments",
    "pytest_args",
    "run",
    "run_settings",
    "stable_environ",
    "stop_runs",
    "suite_present",
]

THREADS_VARIABLE = "RLPACE_BENCH_THREADS"
"""Read by the suite plugin: ``torch.set_num_threads`` of the benchmark process."""

TIMER_VARIABLE = "RLPACE_BENCH_TIMER"
"""Read by the suite plugin: ``cpu`` or ``wall`` times only the cases on that clock and
skips the others (``pr`` times the CPU-clock cases, which the count tier judges, in a
pass of their own)."""

LAYOUT_VARIABLE = "RLPACE_BENCH_LAYOUT_PAD"
"""Random padding in each benchmark process's environment (see ``RunSettings.layout_pad``)."""

SUITE_DIR = Path("tests") / "benchmarks"
"""Where the suite lives, relative to a repository root."""


@dataclass(frozen=True)
class RunSettings:
    """How long and how carefully each case is timed.

    The defaults let the whole CPU set, base and head, run a few times within about
    fifteen minutes on two cores: a case costs its setup, three warm-up calls and
    about ``max_time`` seconds of rounds.

    Example:
        >>> RunSettings().min_rounds >= 5
        True
        >>> RunSettings(min_rounds=0)
        Traceback (most recent call last):
        ...
        ValueError: RunSettings.min_rounds: expected an integer >= 1, got 0; pass a valid min_rounds
    """

    max_time: float = 0.25
    """Seconds of timed rounds per case (pytest-benchmark's ``--benchmark-max-time``);
    exceeded only when ``min_rounds`` rounds take longer."""
    min_rounds: int = 5
    """Rounds taken even when they exceed ``max_time``."""
    min_time: float = 0.000_05
    """Seconds one round lasts at least; fast callables are looped to reach it."""
    warmup_iterations: int = 3
    """Untimed calls before timing starts (caches, allocator, lazy initialisation)."""
    timeout: float = 120.0
    """Seconds after which one case (setup and timing) is stopped and fails."""
    threads: int = 1
    """Intra-op threads: ``torch.set_num_threads`` and ``OMP_NUM_THREADS``/``MKL_NUM_THREADS``."""
    layout_pad: int = 4096
    """Most bytes of random padding put in each benchmark process's environment
    (:data:`LAYOUT_VARIABLE`), 0 for none. The size of the environment moves the
    initial stack, and with it the alignment of everything on it; a fixed difference
    between base and head (another path, another argv) can then bias every timing of
    one side by a few percent (Mytkowicz et al., "Producing wrong data without doing
    anything obviously wrong!", ASPLOS 2009). A random size per process turns that
    bias into process-to-process noise, which the comparator measures and allows for."""
    wall_rounds: int = 20
    """Rounds a wall-clock case takes at least, as many of them as fit in
    :attr:`wall_time` when fewer do (0: ``max_time`` alone sizes the rounds). It
    applies to the wall-clock cases on the CPU (a case on CUDA keeps pytest-benchmark's
    sizing). Those cases (worker processes, threads, waits) vary from round to round by
    8-10 %; five rounds of 50-100 ms left a run's median about 5 % uncertain, most of
    their process-to-process spread, so a duet's pairs spread 5-8 % where 18 rounds
    spread about 3 % (A/A duets, 2026-12-05). It applies to cases whose rounds
    ``max_time`` sizes under ``wall_rounds``; the others already have more. The
    CPU-clock cases declared out of the count tier, judged on their time as well, get
    the same floor (a SAC batch of ~108 ms had five rounds)."""
    wall_time: float = 1.0
    """Most seconds of rounds that :attr:`wall_rounds` may make a wall-clock case take."""

    def __post_init__(self) -> None:
        checks = {
            "max_time": (self.max_time > 0, "a number > 0"),
            "min_rounds": (self.min_rounds >= 1, "an integer >= 1"),
            "min_time": (self.min_time >= 0, "a number >= 0"),
            "warmup_iterations": (self.warmup_iterations >= 0, "an integer >= 0"),
            "timeout": (self.timeout > 0, "a number > 0"),
            "threads": (self.threads >= 1, "an integer >= 1"),
            "layout_pad": (self.layout_pad >= 0, "an integer >= 0"),
            "wall_rounds": (self.wall_rounds >= 0, "an integer >= 0"),
            "wall_time": (self.wall_time > 0, "a number > 0"),
        }
        for name, (ok, expected) in checks.items():
            if not ok:
                raise ValueError(
                    f"RunSettings.{name}: expected {expected}, got {getattr(self, name)!r}; "
                    f"pass a valid {name}"
                )


def add_timing_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare ``--max-time`` and ``--wall-rounds`` (both None unless given), the timing
    options of the commands that run the suite for a comparison (``pr``, ``aa``); turn
    them into settings with :func:`run_settings`.

    Example:
        >>> parser = argparse.ArgumentParser()
        >>> add_timing_arguments(parser)
        >>> args = parser.parse_args(["--wall-rounds", "0"])
        >>> run_settings(args.max_time, args.wall_rounds).wall_rounds
        0
    """
    defaults = RunSettings()
    parser.add_argument(
        "--max-time",
        type=float,
        default=None,
        help=f"seconds of timed rounds per case (default {defaults.max_time:g})",
    )
    parser.add_argument(
        "--wall-rounds",
        type=int,
        default=None,
        help=f"rounds a wall-clock case takes at least, as many as fit in "
        f"{defaults.wall_time:g} s (0: max-time alone sizes them; default "
        f"{defaults.wall_rounds})",
    )


def run_settings(max_time: float | None = None, wall_rounds: int | None = None) -> RunSettings:
    """The default :class:`RunSettings` with a command's ``--max-time`` and
    ``--wall-rounds`` (None: the default); :class:`RunSettings`' own checks turned into
    a :class:`BenchInputError`, as ``rlpace-bench run`` turns them.

    Example:
        >>> run_settings(wall_rounds=0).wall_rounds, run_settings().max_time
        (0, 0.25)
        >>> run_settings(wall_rounds=-1)
        Traceback (most recent call last):
        ...
        rlpace.bench.errors.BenchInputError: RunSettings.wall_rounds: expected an integer >= 0, got -1; pass a valid wall_rounds
    """
    given = {"max_time": max_time, "wall_rounds": wall_rounds}
    try:
        return replace(RunSettings(), **{k: v for k, v in given.items() if v is not None})
    except ValueError as exc:
        raise BenchInputError(str(exc)) from None


@dataclass(frozen=True)
class RunOutcome:
    """What one :func:`run` produced.

    Example:
        >>> RunOutcome(returncode=0, output=Path("cpu.json"), benchmarks=0).ok
        True
    """

    returncode: int
    """pytest's exit status (0: every case passed or skipped)."""
    output: Path
    """The pytest-benchmark JSON file (written even when every case skipped; absent
    only when the run failed before timing anything)."""
    benchmarks: int
    """How many timed results the file holds."""
    log: str = ""
    """The end of pytest's output when the run was ``quiet`` (to explain a failure)."""

    @property
    def ok(self) -> bool:
        """Whether the run succeeded (no case failed or errored)."""
        return self.returncode == 0


def stable_environ(
    base: Mapping[str, str], settings: RunSettings, rng: random.Random | None = None
) -> dict[str, str]:
    """The benchmark process's environment: ``base`` with the thread variables pinned
    (``OMP_NUM_THREADS``, ``MKL_NUM_THREADS`` and the plugin's ``RLPACE_BENCH_THREADS``),
    the wall-clock cases' rounds floor (:data:`rlpace.bench.suite.WALL_ROUNDS_ENV`) and a random
    amount of layout padding (``RunSettings.layout_pad``).

    Example:
        >>> env = stable_environ({"PATH": "/bin"}, RunSettings(threads=2), random.Random(0))
        >>> env["OMP_NUM_THREADS"], env["MKL_NUM_THREADS"], env["PATH"]
        ('2', '2', '/bin')
        >>> 0 <= len(env[LAYOUT_VARIABLE]) <= RunSettings().layout_pad
        True
        >>> env[WALL_ROUNDS_ENV]
        '20:1'
    """
    env = dict(base)
    env[WALL_ROUNDS_ENV] = f"{settings.wall_rounds}:{settings.wall_time:g}"
    env[LAYOUT_VARIABLE] = "x" * (rng or random.SystemRandom()).randint(0, settings.layout_pad)
    env["OMP_NUM_THREADS"] = str(settings.threads)
    env["MKL_NUM_THREADS"] = str(settings.threads)
    env[THREADS_VARIABLE] = str(settings.threads)
    env.setdefault("PYTHONHASHSEED", "0")
    return env


def pytest_args(
    *,
    set_name: str,
    output: Path,
    settings: RunSettings,
    keyword: str | None = None,
    paths: Sequence[str] = (str(SUITE_DIR),),
) -> list[str]:
    """The pytest command-line arguments for one set (after ``python -m pytest``).

    Example:
        >>> args = pytest_args(set_name="gpu", output=Path("g.json"), settings=RunSettings(),
        ...                    keyword="rb and not torchrl")
        >>> args[args.index("-k") + 1], "--rlpace-set=gpu" in args
        ('rb and not torchrl', True)
    """
    if set_name not in ("cpu", "gpu"):
        raise BenchInputError(
            f"unknown benchmark set {set_name!r}; expected 'cpu' or 'gpu' (--set cpu|gpu)"
        )
    args = [
        *paths,
        "--benchmark-only",
        f"--rlpace-set={set_name}",
        f"--benchmark-json={output}",
        "--benchmark-save-data",
        "--benchmark-disable-gc",
        "--benchmark-warmup=on",
        f"--benchmark-warmup-iterations={settings.warmup_iterations}",
        f"--benchmark-min-rounds={settings.min_rounds}",
        f"--benchmark-max-time={settings.max_time}",
        f"--benchmark-min-time={settings.min_time}",
        "--benchmark-timer=time.perf_counter",
        f"--timeout={settings.timeout:g}",
        "-p",
        "no:cacheprovider",
        # hydra-core's pytest plugin (fixtures for testing Hydra apps, none of the
        # suite's) imports Hydra, a third of a second per run
        "-p",
        "no:hydra_pytest",
        "-q",
        "-rs",
    ]
    if keyword:
        args += ["-k", keyword]
    return args


_LAUNCHER = """
import ctypes, os, signal, sys
parent, cpu, command = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
if sys.platform.startswith("linux"):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG: stop when the driver dies
    if os.getppid() != parent:  # it died before that took hold
        sys.exit(143)
if cpu != "-":
    os.sched_setaffinity(0, {int(cpu)})
os.execvp(command[0], command)
"""
"""A launcher for every suite run: it asks the kernel to SIGTERM it when the process
that started it dies (``PR_SET_PDEATHSIG``, kept across ``exec``; Linux), pins itself to
one CPU when given one (children inherit the affinity), and becomes the pytest
command. A killed ``pr`` then leaves no run behind to load the cores of the next one.
No ``preexec_fn``, which is unsafe when a duet starts runs from threads."""


_LIVE: set[subprocess.Popen] = set()
"""The suite runs this process has going (a duet's two come from two threads)."""
_LIVE_LOCK = threading.Lock()


def stop_runs(grace: float = 5.0) -> int:
    """Interrupt every suite run this process has going; return how many there were.

    Each run gets a SIGINT, as a terminal's Ctrl-C would give it (pytest stops its case
    and its workers), and is killed if it has not ended within ``grace`` seconds. A
    duet's runs are waited for in threads that a Ctrl-C of the driver alone does not
    reach: the driver calls this before it leaves, so it does not wait for them.

    Example:
        >>> stop_runs()  # nothing running
        0
    """
    with _LIVE_LOCK:
        procs = [p for p in _LIVE if p.poll() is None]
    _interrupt(procs, grace)
    return len(procs)


def _interrupt(procs: Sequence[subprocess.Popen], grace: float = 5.0) -> None:
    """SIGINT each process, then kill what has not ended within ``grace`` seconds."""
    for proc in procs:
        with contextlib.suppress(ProcessLookupError):  # ended in between
            proc.send_signal(signal.SIGINT)
    deadline = time.monotonic() + grace
    for proc in procs:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def suite_present(tree: Path | str) -> bool:
    """Whether ``tree`` holds a benchmark suite (:data:`SUITE_DIR`).

    Example:
        >>> suite_present(Path("/nonexistent"))
        False
    """
    return (Path(tree) / SUITE_DIR).is_dir()


def abba_schedule(
    repeats: int | Mapping[str, int], sides: tuple[str, str] = ("base", "head")
) -> list[tuple[int, str]]:
    """The order fresh processes run in: ``(k, side)`` pairs, the first side first in
    even rounds and the second first in odd ones (ABBA...), so drift of the machine
    hits both sides alike. ``repeats`` is the runs per side, or per side a count of
    its own (a side with fewer runs simply stops).

    Every interleaved schedule of the harness is this one: ``pr``'s base/head runs,
    its confirmations, and ``aa``'s clean/slowed pools.

    Example:
        >>> abba_schedule(2)
        [(0, 'base'), (0, 'head'), (1, 'head'), (1, 'base')]
        >>> abba_schedule({"clean": 3, "slow": 1}, ("clean", "slow"))
        [(0, 'clean'), (0, 'slow'), (1, 'clean'), (2, 'clean')]
    """
    counts = repeats if isinstance(repeats, Mapping) else dict.fromkeys(sides, repeats)
    order: list[tuple[int, str]] = []
    for k in range(max(counts.get(side, 0) for side in sides)):
        for side in sides if k % 2 == 0 else sides[::-1]:
            if k < counts.get(side, 0):
                order.append((k, side))
    return order


def _write_empty_result(output: Path, root: Path) -> None:
    """Every case skipped (e.g. the GPU set without CUDA): write a file with no results."""
    from importlib.metadata import version

    payload = {
        "machine_info": {MACHINE_INFO_KEY: collect_environment(repo=root)},
        "commit_info": {},
        "benchmarks": [],
        "datetime": datetime.now(UTC).isoformat(),
        "version": version("pytest-benchmark"),
    }
    output.write_text(json.dumps(payload, indent=2))


def _kept_caches(env: Mapping[str, str]) -> dict[str, str]:
    """Where a run keeps the caches that live in the temporary directory by default, so
    a run's own ``TMPDIR`` does not throw them away: torch.compile's (Inductor's) cache,
    ``<temporary directory>/torchinductor_<user>`` as torch names it, unless ``env``
    names one (without it each run compiled the compile cases afresh, minutes a run).

    Example:
        >>> _kept_caches({"TORCHINDUCTOR_CACHE_DIR": "/cache"})
        {}
        >>> list(_kept_caches({}))
        ['TORCHINDUCTOR_CACHE_DIR']
    """
    if "TORCHINDUCTOR_CACHE_DIR" in env:
        return {}
    try:
        user = getpass.getuser()
    except (KeyError, ModuleNotFoundError, OSError):
        user = f"uid_{os.getuid()}" if hasattr(os, "getuid") else "unknown_user"
    folder = "torchinductor_" + re.sub(r'[\\/:*?"<>|]', "_", user)
    return {
        "TORCHINDUCTOR_CACHE_DIR": os.path.join(env.get("TMPDIR") or tempfile.gettempdir(), folder)
    }


def run(
    *,
    set_name: str = "cpu",
    output: Path | str,
    keyword: str | None = None,
    settings: RunSettings = RunSettings(),  # noqa: B008 - frozen, so sharing it is safe
    root: Path | str = ".",
    python: str = sys.executable,
    quiet: bool = False,
    select: Sequence[str] = (),
    environ: Mapping[str, str] | None = None,
    cpu: int | None = None,
) -> RunOutcome:
    """Run one benchmark set in a fresh pytest process and save its results.

    Args:
        set_name: ``"cpu"`` (every case) or ``"gpu"`` (cases with ``gpu=True``, on
            CUDA; every case skips with a reason, and the run succeeds, without CUDA).
        output: the pytest-benchmark JSON file to write (raw samples included).
        keyword: a pytest ``-k`` expression selecting cases.
        settings: rounds, warm-up, timeout and threads.
        root: the repository root holding ``tests/benchmarks`` (a base worktree, say).
        python: the interpreter that runs pytest.
        quiet: capture pytest's output instead of letting it through.
        select: pytest node ids (the ``fullname`` of result rows) to run instead of the
            whole suite, e.g. the benchmarks a confirmation re-runs.
        environ: extra environment variables of this run's process only (a side's
            ``PYTHONPATH``, an injected slow-down), on top of this process's
            environment; ``os.environ`` itself is never changed.
        cpu: pin the run's process, and every process it starts, to this CPU (a duet
            runs base and head at the same time, one per core); None: not pinned.

    The run's process gets a ``TMPDIR`` of its own, made in this process's temporary
    directory (the same file system its cases used before) and removed when the run
    ends, however it ends: a case that is stopped before its teardown (a timed-out
    case, an interrupted or terminated driver) leaves no run directory or memory-mapped
    buffer file behind. Only a driver killed with SIGKILL can leave that one directory.

    Returns:
        The exit status, the output file and how many results it holds.

    Raises:
        BenchInputError: when ``root`` has no benchmark suite, or ``-k`` selected nothing.

    Example:
        >>> outcome = run(set_name="cpu", output="cpu.json", keyword="torch_add")  # doctest: +SKIP
        >>> outcome.ok, outcome.benchmarks  # doctest: +SKIP
        (True, 1)
    """
    root = Path(root).resolve()
    if not (root / SUITE_DIR).is_dir():
        raise BenchInputError(
            f"expected the benchmark suite at {root / SUITE_DIR}, found no such directory; "
            "run from the repository root or pass its path"
        )
    output = Path(output).resolve()
    output.parent.mkdir(parents=True, exist_ok=True)
    if output.exists():
        output.unlink()
    args = pytest_args(
        set_name=set_name,
        output=output,
        settings=settings,
        keyword=keyword,
        paths=tuple(select) or (str(SUITE_DIR),),
    )
    command = [python, "-c", _LAUNCHER, str(os.getpid()), "-" if cpu is None else str(cpu)]
    command += [python, "-m", "pytest", *args]
    pipe = subprocess.PIPE if quiet else None
    scratch = tempfile.mkdtemp(prefix="rlpace-bench-run-", dir=(environ or {}).get("TMPDIR"))
    own = {"TMPDIR": scratch, **_kept_caches({**os.environ, **(environ or {})})}
    try:
        with subprocess.Popen(
            command,
            cwd=root,
            env=stable_environ({**os.environ, **(environ or {}), **own}, settings),
            stdout=pipe,
            stderr=pipe,
            text=True,
        ) as proc:
            with _LIVE_LOCK:
                _LIVE.add(proc)
            try:
                stdout, stderr = proc.communicate()
            except BaseException:  # Ctrl-C in the thread that waits: the run ends too
                _interrupt([proc])
                raise
            finally:
                with _LIVE_LOCK:
                    _LIVE.discard(proc)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    tail = (stdout or "")[-4000:] + (stderr or "")[-4000:] if quiet else ""
    returncode = proc.returncode
    if returncode == 5:  # pytest: no tests collected
        if keyword:
            raise BenchInputError(
                f"no benchmark case in set {set_name!r} matched -k {keyword!r}; expected at "
                "least one; check the expression with `pytest tests/benchmarks --collect-only -k`"
            )
        print(f"rlpace-bench run: the {set_name} set has no cases here", file=sys.stderr)
        returncode = 0  # an empty set (a GPU set before any gpu=True case) is not a failure
    if not output.exists():
        if returncode != 0:  # failed before any result: nothing to save
            return RunOutcome(returncode=returncode, output=output, benchmarks=0, log=tail)
        _write_empty_result(output, root)
    benchmarks = len(json.loads(output.read_text()).get("benchmarks", []))
    return RunOutcome(returncode=returncode, output=output, benchmarks=benchmarks, log=tail)
