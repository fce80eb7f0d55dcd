"""Calls whose cost follows the process's history, priced at a fixed cost each.

Some of what a counted call executes depends less on the code under test than on
everything the process did before it:

- **the allocator**: what a ``malloc`` or a pymalloc free costs follows which of
  glibc's bins hold chunks of what size and whether a pymalloc pool has just emptied;
- **CPython's type-attribute cache**: ``_PyType_Lookup`` hits a 4 096-entry cache
  indexed by the type's version tag and the *address* of the name looked up, so
  which lookups collide (and walk the MRO's dicts) follows the heap's layout and how
  many types were tagged before.

Two processes of one commit, side by side, differed by up to 0.57 % in a
replay-buffer case, all of it in ``_int_malloc``, ``unlink_chunk``, ``_PyObject_Free``,
``find_name_in_mro`` and the dict lookups under it. How *often* the code allocates or
looks an attribute up does not depend on that history. :func:`priced_calls` reads a
Callgrind dump's call graph for the calls from other code into each
:data:`FAMILIES` member and their inclusive cost; :func:`priced_events` swaps that
cost for the family's fixed price per call.

Example:
    >>> cost = {"allocator": CallCost(2, {"Ir": 400.0}), "type_lookup": CallCost(0, {})}
    >>> priced_events({"Ir": 1000.0}, cost)
    {'Ir': 720.0}
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["FAMILIES", "PRICING", "CallCost", "Family", "priced_calls", "priced_events"]


@dataclass(frozen=True)
class Family:
    """Functions whose calls are priced at a fixed cost each.

    Example:
        >>> Family("x", 10.0, files=("/a.c",)).holds("f", "/src/a.c")
        True
    """

    name: str
    price: float
    """Instructions charged per call from other code."""
    files: tuple[str, ...] = ()
    """Every function of a source file ending so belongs to the family."""
    functions: frozenset[str] = frozenset()
    """And these functions, wherever they are."""

    def holds(self, function: str, file: str) -> bool:
        """Whether ``function`` (defined in ``file``) belongs to the family."""
        return file.endswith(self.files) if self.files else function in self.functions


FAMILIES = (
    Family("allocator", 60.0, files=("/Objects/obmalloc.c", "/malloc/malloc.c")),
    Family("type_lookup", 33.0, functions=frozenset({"_PyType_Lookup"})),
)
"""The priced families. ``allocator``: CPython's pymalloc and glibc's ``malloc`` (its
entry points, bins and caches), 60 instructions a call, about what one costs when its
size class has a free block (55-75 in the replay-buffer cases). ``type_lookup``:
``_PyType_Lookup``, 33 instructions, exactly what a cache hit costs on CPython 3.11
(a replay-buffer sample whose 200 lookups all hit: 6 600)."""

PRICING = "allocator-60+type_lookup-33-v1"
"""How the count files' instructions price :data:`FAMILIES` (their ``call_pricing``)."""

_NAME_REF = re.compile(r"\((\d+)\)(?: (.*))?")
_STUB = re.compile(r"^(0x[0-9a-fA-F]+|.*@plt)$")  # a PLT stub: Callgrind names it by address


@dataclass(frozen=True)
class CallCost:
    """Calls into one family in one dump, and their inclusive cost.

    Example:
        >>> CallCost(calls=3, events={"Ir": 210.0}).events["Ir"]
        210.0
    """

    calls: int
    """Calls from other code (a family's functions calling each other, or another
    family's, are part of the call that entered it)."""
    events: dict[str, float]
    """Their inclusive cost, by event (``Ir``, ``D1mr``, ...)."""


class _Graph:
    """Accumulates one dump's calls into the families while it is read line by line."""

    def __init__(self, families: tuple[Family, ...]) -> None:
        self.families = families
        self.names: list[str] = []
        self.kinds: dict[str, str] = {}  # function id -> family name, "stub" or "other"
        self.entered = {f.name: [0, Counter()] for f in families}
        self.through_stub: dict[tuple[str, str], list] = {}  # (stub, family)
        self.from_inside: dict[str, list] = {}  # stub -> calls from inside any family

    def kind(self, function: str, file: str) -> str:
        for family in self.families:
            if family.holds(function, file):
                return family.name
        return "stub" if _STUB.match(function) else "other"

    def call(self, caller: tuple[str, str], callee: tuple[str, str], n: int, line: str) -> None:
        (src, src_kind), (dst, dst_kind) = caller, callee
        inside = src_kind not in ("other", "stub")
        if dst_kind in self.entered and src_kind == "other":
            _add(self.entered[dst_kind], n, line)
        elif dst_kind in self.entered and src_kind == "stub":
            # a stub is shared by every caller of its object: some inside a family
            # (PyMem_RawMalloc -> malloc@plt -> malloc), some not
            _add(self.through_stub.setdefault((src, dst_kind), [0, Counter()]), n, line)
        elif dst_kind == "stub" and inside:
            _add(self.from_inside.setdefault(dst, [0, Counter()]), n, line)

    def costs(self) -> dict[str, CallCost]:
        for (stub, family), (n, cost) in self.through_stub.items():
            inner_n, inner = self.from_inside.get(stub, (0, Counter()))
            acc = self.entered[family]
            acc[0] += max(0, n - inner_n)
            for i in cost:
                acc[1][i] += max(0, cost[i] - inner[i])
        return {
            name: CallCost(n, {e: float(cost[i]) for i, e in enumerate(self.names)})
            for name, (n, cost) in self.entered.items()
        }


def _add(acc: list, calls: int, line: str) -> None:
    acc[0] += calls
    for i, v in enumerate(line.split()[1:]):
        acc[1][i] += int(v)


def _ref(value: str, table: dict[str, str]) -> tuple[str, str]:
    """(id, name) of a possibly compressed ``(id) name`` reference."""
    match = _NAME_REF.match(value)
    if match is None:  # an uncompressed name
        return value, value
    key, name = match.groups()
    if name is not None:
        table[key] = name
    return key, table.get(key, "")


def priced_calls(path: Path, families: tuple[Family, ...] = FAMILIES) -> dict[str, CallCost] | None:
    """The calls from other code into each family in one Callgrind dump, and their
    inclusive cost; None when the dump cannot be read.

    Reads the whole dump (a few hundred kilobytes a case, tens of milliseconds).

    Example:
        >>> priced_calls(Path("missing.out")) is None
        True
    """
    graph = _Graph(families)
    files: dict[str, str] = {}
    functions: dict[str, str] = {}
    current_file = ""
    callee_file: str | None = None
    caller = callee = ("", "other")
    pending: tuple[tuple[str, str], tuple[str, str], int] | None = None
    try:
        with Path(path).open(encoding="utf-8", errors="replace") as fh:
            for line in fh:
                head = line[:1]
                if head.isdigit() or head in "+-*":
                    if pending is not None:  # the line after calls=: that call's cost
                        graph.call(pending[0], pending[1], pending[2], line)
                        pending = None
                elif line.startswith("events:"):
                    graph.names = line.split()[1:]
                elif line.startswith("fl="):
                    current_file = _ref(line[3:].strip(), files)[1]
                elif line.startswith(("fi=", "fe=")):
                    _ref(line[3:].strip(), files)
                elif line.startswith(("cfi=", "cfl=")):
                    callee_file = _ref(line[4:].strip(), files)[1]
                elif line.startswith("fn="):
                    key, name = _ref(line[3:].strip(), functions)
                    caller = (key, graph.kind(name, current_file))
                    graph.kinds[key] = caller[1]
                    callee_file = None
                elif line.startswith("cfn="):
                    key, name = _ref(line[4:].strip(), functions)
                    if callee_file is not None or key not in graph.kinds:
                        graph.kinds[key] = graph.kind(name, callee_file or current_file)
                    callee = (key, graph.kinds[key])
                    callee_file = None
                elif line.startswith("calls="):
                    pending = (caller, callee, int(line[6:].split()[0]))
    except (OSError, ValueError):
        return None
    return graph.costs()


def priced_events(
    events: Mapping[str, float],
    costs: Mapping[str, CallCost],
    families: tuple[Family, ...] = FAMILIES,
) -> dict[str, float]:
    """``events`` with each call into a family costing its price in instructions and
    nothing else.

    The families' cost then follows how often the code allocates and looks attributes
    up, not the state of the heap it met: a change that adds an allocation still
    costs the price and whatever its caller does to make it.

    Example:
        >>> priced_events({"Ir": 1000.0, "Dr": 300.0},
        ...               {"allocator": CallCost(2, {"Ir": 400.0, "Dr": 90.0})})
        {'Ir': 720.0, 'Dr': 210.0}
    """
    out = dict(events)
    for family in families:
        cost = costs.get(family.name)
        if cost is None:
            continue
        for k in out:
            out[k] = max(0.0, out[k] - cost.events.get(k, 0.0))
        if "Ir" in out:
            out["Ir"] += family.price * cost.calls
    return out
