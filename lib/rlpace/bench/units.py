"""Units of benchmark values: what a number measures, how it prints, which way is better.

A results table row carries ``value_unit``: ``"seconds"`` for timings (pytest-benchmark,
asv ``time_*``), ``"bytes"`` for memory (asv ``mem_*`` and ``peakmem_*``, or any
benchmark whose ``benchmarks.json`` entry says ``unit: bytes``), and for asv ``track_*``
benchmarks whatever their ``unit`` attribute says (asv's default is the word
``"unit"``: a bare count). Times print with a time prefix, bytes with binary prefixes,
counts as plain numbers with their unit.

Direction: lower is better for times, bytes and counts (asv's own convention: asv
compare calls every increase a regression); higher is better for rates, recognised by
the unit (``"ops/s"``, ``"items per second"``, ``"fps"``, ``"%hit"`` ...), see
:func:`higher_is_better_for`.

Example:
    >>> format_value(0.0674719, "seconds"), format_value(0.0674719, "seconds", space=False)
    ('67.4719 ms', '67.4719ms')
    >>> format_value(95035392, "bytes"), format_value(42, "unit"), format_value(3.5, "calls")
    ('90.63 MiB', '42', '3.5 calls')
    >>> higher_is_better_for("bytes"), higher_is_better_for("samples/s")
    (False, True)
"""

from __future__ import annotations

import math
import re
from typing import Any

__all__ = [
    "BYTES",
    "COUNT_UNITS",
    "SECONDS",
    "STEADY_COUNT_UNITS",
    "format_ops",
    "format_rate",
    "format_time",
    "format_value",
    "higher_is_better_for",
    "normalize_unit",
]

SECONDS = "seconds"
"""The unit of timings."""
BYTES = "bytes"
"""The unit of memory figures."""

COUNT_UNITS = frozenset(
    {
        "instructions",
        "aten ops",
        "kernel launches",
        "syncs",
        "copies",
        "Python calls",
        "worker Python calls",
    }
)
"""Units of values that count work instead of timing it: the count tier's
(``counts.Counts.track_instructions``, Callgrind) and the work counts'
(``work.Work.track_*``, the GPU set's ``track_kernels`` ...). Two processes of the same
commit count the same instructions to within 1 % (asv's own runs of two pairs of
commits with the same code, 120 cases: 0.002 / 0.03 / 0.75 % at the median / p90 / max,
the list-storage samplers the most) and the same aten ops exactly (but for one torchrl
twin's multi-process collector, 0.35 and 0.61 % in asv's runs of three commits), so a
change of a few percent is the code's, where a timing on a shared host needs 10 %. The count
tier's estimated cycles (unit ``cycles``) are not among them: a model of the cache that
follows the memory layout, they moved up to 2.3 % between those runs (p90 0.7 %)."""

STEADY_COUNT_UNITS = COUNT_UNITS - {"Python calls", "worker Python calls"}
"""The :data:`COUNT_UNITS` that one process a side can judge: the same code counts them
the same to within the count gate's 1 % floor in every process. Python calls are
left out: a collector's calling thread polls while it waits, so its calls follow the
clock by 1-3 % from process to process, and the workers' steady calls total the
functions that happened to be steady in that process (a threaded row's moved 1.96 %
with the code unchanged); only a spread read from two or more processes a side can
gate them."""

_SECONDS_ALIASES = {"s", "sec", "secs", "second", "seconds", "time"}
_BYTES_ALIASES = {"b", "byte", "bytes", "memory", "peakmemory"}
# A unit that is a rate or a score: more is better.
_HIGHER = re.compile(
    r"(/\s*s(ec(ond)?)?\b|per\s+s(ec(ond)?)?\b|\bops\b|\bfps\b|throughput|speed-?up|"
    r"\bhits?\b|\baccuracy\b|\bscore\b|\breward\b)",
    re.IGNORECASE,
)


def normalize_unit(unit: Any, *, default: str = SECONDS) -> str:
    """The canonical spelling of a unit: ``"seconds"``, ``"bytes"`` or the text itself.

    Example:
        >>> normalize_unit("s"), normalize_unit("Bytes"), normalize_unit(None), normalize_unit("calls")
        ('seconds', 'bytes', 'seconds', 'calls')
    """
    if not isinstance(unit, str) or not unit.strip():
        return default
    text = unit.strip()
    if text.lower() in _SECONDS_ALIASES:
        return SECONDS
    if text.lower() in _BYTES_ALIASES:
        return BYTES
    return text


def higher_is_better_for(unit: str) -> bool:
    """Whether a larger value is an improvement for a value in ``unit``.

    Times, bytes and plain counts: lower is better. Rates and scores (a unit per
    second, ops, fps, a hit rate, a reward): higher is better.

    Example:
        >>> higher_is_better_for("seconds"), higher_is_better_for("unit"), higher_is_better_for("ops/s")
        (False, False, True)
    """
    if unit in (SECONDS, BYTES):
        return False
    return bool(_HIGHER.search(unit))


def format_time(seconds: float, *, space: bool = True) -> str:
    """A time with four decimals in ``μs`` (< 100 µs), ``ms`` (< 100 ms) or ``s``.

    ``space=False`` writes the unit right after the number, as the seed bot did.

    Example:
        >>> format_time(5.2e-5), format_time(0.0123), format_time(1.5)
        ('52.0000 μs', '12.3000 ms', '1.5000 s')
        >>> format_time(0.0123, space=False), format_time(float("nan"))
        ('12.3000ms', '-')
    """
    if not isinstance(seconds, int | float) or not math.isfinite(seconds):
        return "-"
    gap = " " if space else ""
    if abs(seconds) < 1e-4:
        return f"{seconds * 1e6:.4f}{gap}μs"
    if abs(seconds) < 0.1:
        return f"{seconds * 1e3:.4f}{gap}ms"
    return f"{seconds:.4f}{gap}s"


def format_ops(ops: float) -> str:
    """Operations per second with four decimals in ``Ops/s``, ``KOps/s`` or ``MOps/s``.

    Example:
        >>> format_ops(12.5), format_ops(1234.5), format_ops(2.5e6)
        ('12.5000 Ops/s', '1.2345 KOps/s', '2.5000 MOps/s')
    """
    if not isinstance(ops, int | float) or not math.isfinite(ops):
        return "-"
    if ops >= 1e6:
        return f"{ops / 1e6:.4f} MOps/s"
    if ops >= 1e3:
        return f"{ops / 1e3:.4f} KOps/s"
    return f"{ops:.4f} Ops/s"


def _format_bytes(value: float) -> str:
    size = abs(value)
    for scale, prefix in ((2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if size >= scale:
            return f"{value / scale:.2f} {prefix}"
    return f"{value:.0f} B" if float(value).is_integer() else f"{value:.2f} B"


def _format_count(value: float, unit: str) -> str:
    number = f"{value:.0f}" if float(value).is_integer() and abs(value) < 1e15 else f"{value:.6g}"
    return number if unit in ("", "unit") else f"{number} {unit}"


def format_value(value: float, unit: str = SECONDS, *, space: bool = True) -> str:
    """One value in its own unit: a time, a size in bytes, or a count with its unit.

    Example:
        >>> format_value(1.5, "seconds"), format_value(2048, "bytes"), format_value(7, "unit")
        ('1.5000 s', '2.00 KiB', '7')
        >>> format_value(float("nan"), "bytes")
        '-'
    """
    if not isinstance(value, int | float) or not math.isfinite(value):
        return "-"
    if unit == SECONDS:
        return format_time(value, space=space)
    if unit == BYTES:
        return _format_bytes(value)
    return _format_count(value, unit)


def format_rate(ops: float, unit: str = SECONDS) -> str:
    """Calls per second for timings (:func:`format_ops`); ``-`` for any other unit,
    where "per second" means nothing.

    Example:
        >>> format_rate(12.5, "seconds"), format_rate(12.5, "bytes")
        ('12.5000 Ops/s', '-')
    """
    return format_ops(ops) if unit == SECONDS else "-"
