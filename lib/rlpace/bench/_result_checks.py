"""Type checks for values read from result files written by other programs.

Every check names the file and field, what was expected and what arrived, so a
malformed file ends in one :class:`~rlpace.bench.errors.BenchInputError` line and
never in a traceback from deep inside the comparison.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from rlpace.bench.errors import BenchInputError

#: Largest round count believed: pytest-benchmark and asv never write more rounds than
#: fit in memory; a larger number is a corrupt or hand-edited file.
MAX_ROUNDS = 10**9


def show(value: Any, limit: int = 40) -> str:
    """``repr`` cut to ``limit`` characters (a 400-digit number must not fill the screen)."""
    try:
        text = repr(value)
    except (ValueError, RecursionError):  # an int too long for repr, a deep structure
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def number(
    value: Any, where: str, *, allow_nan: bool = False, minimum: float | None = None
) -> float:
    """A JSON number as a finite float (NaN only with ``allow_nan``), at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BenchInputError(f"{where}: expected a number, got {show(value)}")
    try:
        out = float(value)
    except OverflowError:
        raise BenchInputError(
            f"{where}: {show(value)} is too large to be a measurement; the file is corrupt"
        ) from None
    if math.isnan(out):
        if allow_nan:
            return out
        raise BenchInputError(f"{where}: expected a number, got NaN")
    if math.isinf(out):
        raise BenchInputError(f"{where}: expected a finite number, got {show(value)}")
    if minimum is not None and out < minimum:
        raise BenchInputError(
            f"{where}: expected a number >= {minimum:g}, got {show(value)}; a measured "
            "time, size or rate cannot be negative - the file is corrupt or hand-edited"
        )
    return out


def rounds(value: Any, where: str) -> int:
    """A round count: a whole number between 0 and :data:`MAX_ROUNDS`."""
    out = number(value, where, minimum=0)
    if out > MAX_ROUNDS or not out.is_integer():
        raise BenchInputError(
            f"{where}: expected a whole number of rounds (0 to {MAX_ROUNDS:.0e}), got {show(value)}"
        )
    return int(out)


def mapping(value: Any, where: str) -> dict[str, Any]:
    """An object (or null, read as empty)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise BenchInputError(f"{where}: expected an object, got {type(value).__name__}")
    return dict(value)


def optional_text(value: Any, where: str) -> str | None:
    """A string, or null; numbers are accepted as their text (a group named 1)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return show(value)
    raise BenchInputError(f"{where}: expected a string or null, got {type(value).__name__}")


def numbers(value: Any, where: str, *, minimum: float | None = None) -> list[float]:
    """A list of finite numbers."""
    if not isinstance(value, list):
        raise BenchInputError(f"{where}: expected a list of numbers, got {type(value).__name__}")
    return [number(x, f"{where}[{i}]", minimum=minimum) for i, x in enumerate(value)]
