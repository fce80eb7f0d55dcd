""" "Why did it regress?": the functions whose cost grew most between base and head.

Three readings per count regression:

- **native functions**, inclusive instructions from the two Callgrind dumps
  (``callgrind_annotate --inclusive=yes``): CPython's and PyTorch's C/C++ functions,
  e.g. ``at::native::copy_`` or ``PyObject_RichCompare``;
- **Python functions called more often**, call counts from one profiled call per side
  (exact, since the code is the same each time), e.g. ``rlpace/data/storage.py:_check_index``;
- **Python functions that ran more bytecode themselves**, from one opcode-traced call
  per side: a check or a conversion added inside a function, which adds no call and
  shows in the native dumps only as the interpreter loop, e.g.
  ``rlpace/trainers/_timing.py:__exit__``;
- **priced calls**, calls into the allocator and CPython's type cache per call, whose
  count the fixed price turns into instructions (see :mod:`rlpace.bench.counts.pricing`):
  a change that allocates more shows here, e.g. ``allocator 372 -> 380``.

Each reading lists the largest increases, with the share of the case's total change
they explain (inclusive costs nest, so shares of nested functions overlap).

Example:
    >>> grown = top_growth({"f": 100.0, "g": 50.0}, {"f": 180.0, "g": 50.0, "h": 5.0}, limit=2)
    >>> [(g.name, g.base, g.head) for g in grown]
    [('f', 100.0, 180.0), ('h', 0.0, 5.0)]
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from rlpace.bench.counts.dumps import inclusive_costs
from rlpace.bench.counts.records import CaseCount

__all__ = [
    "NAME_LIMIT",
    "Growth",
    "RegressionCause",
    "explain_regression",
    "readable_name",
    "top_growth",
]


@dataclass(frozen=True)
class Growth:
    """One function's cost in base and head.

    Example:
        >>> Growth("f", 10.0, 15.0).delta
        5.0
    """

    name: str
    base: float
    head: float

    @property
    def delta(self) -> float:
        """``head - base``."""
        return self.head - self.base


@dataclass(frozen=True)
class RegressionCause:
    """The functions behind one count regression.

    Example:
        >>> RegressionCause("t", 100.0, (Growth("f", 1.0, 101.0),), ()).native[0].delta
        100.0
    """

    test_id: str
    total_delta: float
    """Instructions per call, head minus base."""
    native: tuple[Growth, ...]
    """Native functions by growth of inclusive instructions."""
    python: tuple[Growth, ...]
    """Python functions by growth of their call count."""
    bytecode: tuple[Growth, ...] = ()
    """Python functions by growth of the bytecode they ran themselves."""
    priced: tuple[Growth, ...] = ()
    """Priced families (``allocator``, ``type_lookup``) whose calls per call changed,
    either way: what their fixed prices add to or take from ``total_delta``."""


def top_growth(
    base: Mapping[str, float], head: Mapping[str, float], *, limit: int = 8
) -> list[Growth]:
    """The ``limit`` names whose value grew most from ``base`` to ``head``.

    Example:
        >>> top_growth({"a": 1.0}, {"a": 1.0})
        []
    """
    names = set(base) | set(head)
    grown = [Growth(n, float(base.get(n, 0.0)), float(head.get(n, 0.0))) for n in names]
    grown = [g for g in grown if g.delta > 0]
    grown.sort(key=lambda g: (-g.delta, g.name))
    return grown[:limit]


NAME_LIMIT = 160
"""The longest function name a cause shows. C++ symbols from PyTorch's dispatcher run
to 600 characters (``c10::impl::wrap_kernel_functor_unboxed_<...>``), which neither
a comment's table nor the comparison record (300 at most) can hold."""


def _elide(name: str, pair: str) -> str:
    """``name`` with what lies inside each outermost ``pair`` (``"<>"``, ``"()"``) shown
    as ``…``; unchanged when they do not balance (``operator<<``)."""
    opening, closing = pair
    out, depth = [], 0
    for ch in name:
        if ch == opening:
            if depth == 0:
                out.append(opening + "…")
            depth += 1
        elif ch == closing and depth:
            depth -= 1
            if depth == 0:
                out.append(closing)
        elif depth == 0:
            out.append(ch)
    return "".join(out) if depth == 0 else name


def readable_name(name: str, limit: int = NAME_LIMIT) -> str:
    """``name`` within ``limit`` characters: template arguments elided first, then
    parameter lists, then the tail cut.

    Example:
        >>> readable_name("at::f<c10::A<int>, B>(at::Tensor const&, long)", limit=40)
        'at::f<…>(at::Tensor const&, long)'
        >>> readable_name("at::f<c10::A<int>, B>(at::Tensor const&, long)", limit=12)
        'at::f<…>(…)'
        >>> readable_name("x" * 20, limit=8)
        'xxxxxxx…'
    """
    if len(name) <= limit:
        return name
    for pair in ("<>", "()"):
        name = _elide(name, pair)
        if len(name) <= limit:
            return name
    return name[: limit - 1] + "…"


def _shorten(name: str) -> str:
    """``/long/path/Objects/object.c:PyObject_Str`` -> ``object.c:PyObject_Str``."""
    path, sep, func = name.rpartition(":")
    return f"{Path(path).name}{sep}{func}" if sep and "/" in path else name


def explain_regression(
    head: CaseCount,
    base: CaseCount,
    *,
    head_dir: Path,
    base_dir: Path,
    limit: int = 8,
) -> RegressionCause:
    """Compare one case's two dumps (and Python call counts) and list what grew.

    ``head_dir`` and ``base_dir`` are the folders of the two count files (dump paths
    are relative to them). Missing dumps give an empty native list.

    Example:
        >>> h = CaseCount("t", "counted", instructions=110.0, python_calls={"m.py:f": 3},
        ...               priced_calls={"allocator": 12.0, "type_lookup": 5.0})
        >>> b = CaseCount("t", "counted", instructions=100.0, python_calls={"m.py:f": 1},
        ...               priced_calls={"allocator": 10.0, "type_lookup": 5.0})
        >>> cause = explain_regression(h, b, head_dir=Path("."), base_dir=Path("."))
        >>> cause.total_delta, [(g.name, g.delta) for g in cause.python]
        (10.0, [('m.py:f', 2.0)])
        >>> [(g.name, g.base, g.head) for g in cause.priced]
        [('allocator', 10.0, 12.0)]
    """
    native: list[Growth] = []
    if head.dump and base.dump:
        # a dump holds all the measured calls; the counts are per call
        h_costs = {
            _shorten(k): v / (head.calls or 1)
            for k, v in inclusive_costs(head_dir / head.dump).items()
        }
        b_costs = {
            _shorten(k): v / (base.calls or 1)
            for k, v in inclusive_costs(base_dir / base.dump).items()
        }
        native = top_growth(b_costs, h_costs, limit=limit)
    python = top_growth(base.python_calls or {}, head.python_calls or {}, limit=limit)
    bytecode = top_growth(base.python_bytecodes or {}, head.python_bytecodes or {}, limit=limit)
    b_priced, h_priced = base.priced_calls or {}, head.priced_calls or {}
    priced = tuple(
        Growth(name, float(b_priced.get(name, 0.0)), float(h_priced.get(name, 0.0)))
        for name in sorted(set(b_priced) & set(h_priced))
        if b_priced[name] != h_priced[name]
    )
    return RegressionCause(
        head.test_id,
        float((head.instructions or 0.0) - (base.instructions or 0.0)),
        tuple(replace(g, name=readable_name(g.name)) for g in native),
        tuple(replace(g, name=readable_name(g.name)) for g in python),
        tuple(replace(g, name=readable_name(g.name)) for g in bytecode),
        priced,
    )
