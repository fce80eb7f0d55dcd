"""Count files: what one count run measured, versioned, and checked before comparing.

A count file is JSON ``{"format": "rlpace-counts", "version": 1, "meta": {...},
"cases": [...]}``. ``meta`` records what moves counts: the Valgrind version, the
interpreter, the machine architecture and the cache geometry (refused when they
differ), and what only might (CPU model, host, library versions: warned about).
Every case of the selection is in ``cases`` with a status, so a case that could not
be counted is reported as such, never dropped.

Example:
    >>> run = CountRun(meta={"valgrind": "valgrind-3.19.0"},
    ...                cases=(CaseCount("test_x[8]", "counted", instructions=1e6, cycles=1.2e6),))
    >>> CountRun.from_dict(run.to_dict()).cases[0].instructions
    1000000.0
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rlpace.bench._atomic import write_whole
from rlpace.bench.errors import BenchInputError, EnvironmentMismatchError

__all__ = [
    "COUNT_FORMAT",
    "COUNT_FORMAT_VERSION",
    "STATUSES",
    "WARMED",
    "CaseCount",
    "CountRun",
    "count_differences",
    "read_counts",
    "write_counts",
]

COUNT_FORMAT = "rlpace-counts"
COUNT_FORMAT_VERSION = 1
"""Bumped when a field changes meaning; older files are refused with the fix."""

STATUSES = {
    "counted": "instructions and estimated cycles per call",
    "not-counted": "the case waits, runs workers or is declared count=False: timing only",
    "skipped": "the case's setup raised SkipCase",
    "failed": "the case raised under Valgrind",
    "timed-out": "the case ran past the per-case limit under Valgrind",
    "crashed": "the Valgrind process died during the case",
}
"""Every status a case can have in a count file."""

WARMED = (None, "instrumented", "plain")
"""How a count's cache-warming call can have run (:attr:`CaseCount.warmed`; None: not
recorded)."""

REFUSED_KEYS = (
    "valgrind",
    "python",
    "python_implementation",
    "arch",
    "cache",
    "calls",
    "allocator",
    "call_pricing",
    "kernels",
    "warm_up",
)
"""Meta keys that must match: a difference changes every count (``kernels``: the
matrix kernels the counting process chose, those of every case with a GEMM;
``warm_up``: how the warm-up call was kept out of the count)."""
WARNED_KEYS = ("cpu", "host", "torch", "numpy", "tensordict", "torchrl")
"""Meta keys worth a warning: a difference can move some counts."""
GATE_WARNED_KEYS = ("call_pricing", "warm_up")
"""Refused between two count files but only warned about against a gate file: counts
that charge the allocator and the type cache what they really did (no
``call_pricing``), or that kept part of the warm-up call (no ``warm_up``), spread
wider, so gates read that way are wider than needed, never narrower."""


@dataclass(frozen=True)
class CaseCount:
    """One case of a count run.

    Example:
        >>> CaseCount("test_sleep[1]", "not-counted", reason="waits").counted
        False
    """

    test_id: str
    status: str
    """One of :data:`STATUSES`."""
    reason: str = ""
    """Why a case was not counted (empty when counted)."""
    instructions: float | None = None
    """Instructions per measured call: Callgrind's ``Ir`` with each call into the
    allocator or CPython's type cache priced at a fixed cost (``meta["call_pricing"]``,
    see :mod:`rlpace.bench.counts.pricing`); what the verdict judges."""
    cycles: float | None = None
    """Estimated cycles per call: L1 hits + 5 LL hits + 35 RAM accesses, those calls
    priced the same way."""
    events: dict[str, float] | None = None
    """All Callgrind events per call, as counted (nothing priced)."""
    priced_calls: dict[str, float] | None = None
    """Calls into each priced family (``allocator``, ``type_lookup``) per measured call."""
    priced_instructions: dict[str, float] | None = None
    """Instructions those calls really ran per measured call, which ``instructions``
    replaces with the families' prices."""
    dump: str | None = None
    """The dump file, relative to the count file's folder (for "why did it regress?")."""
    python_calls: dict[str, int] | None = None
    """Python calls per function in one (profiled, uncounted) call, ``path:function``."""
    python_bytecodes: dict[str, int] | None = None
    """Bytecode instructions each Python function ran itself in one (traced, uncounted)
    call, ``path:function``."""
    busy_share: float | None = None
    """Share of a plain call's wall time spent computing (the wait guard's reading)."""
    calls: int | None = None
    """Measured calls the counts are the mean of, and the dump the sum of (None: a
    file from before cases could ask for more than the run's ``calls``)."""
    warmed: str | None = None
    """How the call before the measured ones ran: ``"instrumented"`` (it warmed the
    simulated caches, its counts dumped apart) or ``"plain"`` (a long call, whose cold
    misses are a negligible share). None: a file from before this was recorded."""
    plain_cpu_s: float | None = None
    """CPU seconds of the last plain call under Valgrind, the reading that chose
    :attr:`warmed` (below the counting's ``warm_cache_below_s``: instrumented)."""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(
                f"case {self.test_id!r}: status {self.status!r}; expected one of {sorted(STATUSES)}"
            )
        if self.warmed not in WARMED:
            raise ValueError(
                f"case {self.test_id!r}: warmed {self.warmed!r}; expected one of "
                f"{sorted(w for w in WARMED if w)} or none"
            )
        s = self.plain_cpu_s
        if s is not None and (isinstance(s, bool) or not isinstance(s, int | float) or not s >= 0):
            raise ValueError(
                f"case {self.test_id!r}: plain_cpu_s {s!r}; expected CPU seconds >= 0 or none"
            )

    @property
    def counted(self) -> bool:
        """Whether the case has counts."""
        return self.status == "counted" and self.instructions is not None


@dataclass(frozen=True)
class CountRun:
    """All cases of one count run and where they were counted.

    Example:
        >>> CountRun(meta={}, cases=()).by_id()
        {}
    """

    meta: dict[str, Any]
    cases: tuple[CaseCount, ...] = field(default_factory=tuple)

    def by_id(self) -> dict[str, CaseCount]:
        """Cases by test id."""
        return {c.test_id: c for c in self.cases}

    def to_dict(self) -> dict[str, Any]:
        """The versioned JSON document."""
        return {
            "format": COUNT_FORMAT,
            "version": COUNT_FORMAT_VERSION,
            "meta": dict(self.meta),
            "cases": [{k: v for k, v in asdict(c).items() if v is not None} for c in self.cases],
        }

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any], *, source: str = "count file") -> CountRun:
        """Read :meth:`to_dict`'s document; a foreign or older one raises with the fix."""
        if not isinstance(doc, Mapping) or doc.get("format") != COUNT_FORMAT:
            got = doc.get("format") if isinstance(doc, Mapping) else type(doc).__name__
            raise BenchInputError(
                f"{source}: expected a count file (format {COUNT_FORMAT!r}), got {got!r}; "
                "fix: pass a file written by `rlpace-bench count run`"
            )
        if doc.get("version") != COUNT_FORMAT_VERSION:
            raise BenchInputError(
                f"{source}: expected count format version {COUNT_FORMAT_VERSION}, got "
                f"{doc.get('version')!r}; fix: count the revision again with this rlpace"
            )
        try:
            cases = tuple(CaseCount(**c) for c in doc.get("cases", []))
        except (TypeError, ValueError) as exc:
            raise BenchInputError(
                f"{source}: a case entry is malformed ({exc}); fix: count the revision again"
            ) from None
        return cls(meta=dict(doc.get("meta", {})), cases=cases)


def write_counts(run: CountRun, path: Path) -> Path:
    """Write ``run`` to ``path`` atomically (a partial file is never left behind).

    Example:
        >>> import tempfile
        >>> p = Path(tempfile.mkdtemp()) / "counts.json"
        >>> write_counts(CountRun(meta={}), p).name
        'counts.json'
        >>> import shutil; shutil.rmtree(p.parent)
    """
    return write_whole(path, json.dumps(run.to_dict(), indent=1) + "\n")


def read_counts(path: Path) -> CountRun:
    """Read a count file; a missing, unreadable or foreign file raises with the fix.

    Example:
        >>> read_counts(Path("missing.json"))
        Traceback (most recent call last):
        ...
        rlpace.bench.errors.BenchInputError: missing.json: expected a count file, found none; fix: run `rlpace-bench count run -o missing.json` first
    """
    path = Path(path)
    if not path.is_file():
        raise BenchInputError(
            f"{path}: expected a count file, found none; "
            f"fix: run `rlpace-bench count run -o {path}` first"
        )
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BenchInputError(
            f"{path}: expected JSON, could not read it ({exc}); fix: count again"
        ) from None
    return CountRun.from_dict(doc, source=str(path))


def count_differences(
    head: Mapping[str, Any],
    base: Mapping[str, Any],
    *,
    allow_mismatch: bool = False,
    gates: bool = False,
) -> list[str]:
    """Warnings about two count runs' metadata; raise when counts cannot be compared.

    Differences in :data:`REFUSED_KEYS` raise
    :class:`~rlpace.bench.errors.EnvironmentMismatchError` unless ``allow_mismatch``;
    differences in :data:`WARNED_KEYS` are returned as sentences. With ``gates``
    (``base`` is a gate file's meta), :data:`GATE_WARNED_KEYS` are only warned about.

    Example:
        >>> count_differences({"valgrind": "3.19", "cpu": "A"}, {"valgrind": "3.19", "cpu": "B"})
        ["cpu: head 'A', base 'B' (may move some counts)"]
        >>> count_differences({"valgrind": "3.22"}, {"valgrind": "3.19"})
        Traceback (most recent call last):
        ...
        rlpace.bench.errors.EnvironmentMismatchError: count files from different environments: valgrind: head '3.22', base '3.19'; expected the same Valgrind, interpreter, architecture, cache settings, allocator, call pricing, matrix kernels and warm-up on both sides; fix: count both revisions on one machine, toolchain and rlpace-bench version, or pass --allow-mismatch to compare anyway
    """
    lenient = GATE_WARNED_KEYS if gates else ()
    refused = [
        f"{k}: head {head.get(k)!r}, base {base.get(k)!r}"
        for k in REFUSED_KEYS
        if head.get(k) != base.get(k) and k not in lenient
    ]
    warned = [
        f"{k}: head {head.get(k)!r}, base {base.get(k)!r} (may move some counts)"
        for k in WARNED_KEYS
        if head.get(k) != base.get(k)
    ] + [
        f"{k}: head {head.get(k)!r}, gates {base.get(k)!r} (those gates may be wider than needed)"
        for k in lenient
        if head.get(k) != base.get(k)
    ]
    if refused and not allow_mismatch:
        raise EnvironmentMismatchError(
            "count files from different environments: "
            + "; ".join(refused)
            + "; expected the same Valgrind, interpreter, architecture, cache settings, "
            "allocator, call pricing, matrix kernels and warm-up on both sides; fix: count both revisions on one machine, toolchain and rlpace-bench version, or pass "
            "--allow-mismatch to compare anyway"
        )
    return [f"{r} (compared anyway)" for r in refused] + warned
