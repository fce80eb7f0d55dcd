"""``timeit``: named wall-clock timers, usable as context manager or decorator.

Every use adds one sample to a process-wide table keyed by name (count, total, mean,
max). The table is guarded by a lock, so threads may time concurrently. The hot path
is two ``perf_counter_ns`` calls and one locked update, well under 2 µs per use.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass
from time import perf_counter_ns
from typing import Any, TypeVar

__all__ = ["TimingStats", "timeit"]

F = TypeVar("F", bound=Callable[..., Any])

_LOCK = threading.Lock()
# name -> [count, total_ns, max_ns]; lists so the hot path mutates in place.
_TABLE: dict[str, list[int]] = {}


@dataclass(frozen=True)
class TimingStats:
    """Aggregated timings of one name.

    Attributes:
        name: the timer's name.
        count: how many timed uses.
        total_s: total seconds over all uses.
        max_s: the longest single use, in seconds.

    Example:
        >>> s = TimingStats("collect", count=4, total_s=2.0, max_s=0.9)
        >>> s.mean_s
        0.5
    """

    name: str
    count: int
    total_s: float
    max_s: float

    @property
    def mean_s(self) -> float:
        """Mean seconds per use (0.0 before the first use)."""
        return self.total_s / self.count if self.count else 0.0


class timeit:  # noqa: N801 - reads like the function it mostly is: ``with timeit("x"):``
    """Time a block or a function under ``name``, aggregated process-wide.

    Args:
        name: the timer's name; uses with the same name aggregate together.

    Example:
        >>> timeit.reset()
        >>> with timeit("doc/block"):
        ...     total = sum(range(1000))
        >>> @timeit("doc/fn")
        ... def double(x):
        ...     return 2 * x
        >>> double(3), double(4)
        (6, 8)
        >>> timeit.stats()["doc/fn"].count
        2
        >>> sorted(timeit.scalars())[:2]
        ['time/doc/block/count', 'time/doc/block/max_s']
        >>> print(timeit.table().splitlines()[0].split())
        ['name', 'count', 'total_s', 'mean_s', 'max_s']
    """

    __slots__ = ("_entry", "_start", "name")

    def __init__(self, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(
                f"timeit expects a non-empty str name, got {name!r}; "
                "pass a name such as timeit('collect')"
            )
        self.name = name
        entry = _TABLE.get(name)  # a dict read is atomic; lock only to create
        if entry is None:
            with _LOCK:
                entry = _TABLE.setdefault(name, [0, 0, 0])
        self._entry = entry
        self._start = 0

    def __enter__(self) -> timeit:
        self._start = perf_counter_ns()
        return self

    def __exit__(self, *exc: object) -> None:
        elapsed = perf_counter_ns() - self._start
        entry = self._entry
        with _LOCK:
            entry[0] += 1
            entry[1] += elapsed
            if elapsed > entry[2]:
                entry[2] = elapsed

    def __call__(self, fn: F) -> F:
        entry = self._entry

        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = perf_counter_ns()
            try:
                return fn(*args, **kwargs)
            finally:
                elapsed = perf_counter_ns() - start
                with _LOCK:
                    entry[0] += 1
                    entry[1] += elapsed
                    if elapsed > entry[2]:
                        entry[2] = elapsed

        return timed  # type: ignore[return-value]

    @staticmethod
    def stats() -> dict[str, TimingStats]:
        """A snapshot of every name's aggregate, sorted by name.

        Example:
            >>> timeit.reset()
            >>> with timeit("doc/s"):
            ...     pass
            >>> timeit.stats()["doc/s"].count
            1
        """
        with _LOCK:
            rows = {k: tuple(v) for k, v in _TABLE.items() if v[0]}
        return {
            name: TimingStats(name, count=c, total_s=t / 1e9, max_s=m / 1e9)
            for name, (c, t, m) in sorted(rows.items())
        }

    @staticmethod
    def scalars(prefix: str = "time/") -> dict[str, float]:
        """The table flattened for a logger: ``{prefix}{name}/{count,total_s,mean_s,max_s}``.

        Example:
            >>> timeit.reset()
            >>> with timeit("doc/x"):
            ...     pass
            >>> timeit.scalars()["time/doc/x/count"]
            1.0
        """
        out: dict[str, float] = {}
        for name, s in timeit.stats().items():
            out[f"{prefix}{name}/count"] = float(s.count)
            out[f"{prefix}{name}/total_s"] = s.total_s
            out[f"{prefix}{name}/mean_s"] = s.mean_s
            out[f"{prefix}{name}/max_s"] = s.max_s
        return out

    @staticmethod
    def table() -> str:
        """The aggregates as a fixed-width text table, one row per name.

        Example:
            >>> timeit.reset()
            >>> timeit.table()
            'name  count  total_s  mean_s  max_s'
        """
        stats = timeit.stats()
        width = max([4, *(len(n) for n in stats)])
        lines = [f"{'name':<{width}}  count  total_s  mean_s  max_s"]
        for name, s in stats.items():
            lines.append(
                f"{name:<{width}}  {s.count:5d}  {s.total_s:7.3f}  {s.mean_s:6.4f}  {s.max_s:.4f}"
            )
        return "\n".join(lines)

    @staticmethod
    def reset(name: str | None = None) -> None:
        """Zero one name's aggregate, or every name's when ``name`` is None.

        Example:
            >>> with timeit("doc/r"):
            ...     pass
            >>> timeit.reset("doc/r")
            >>> "doc/r" in timeit.stats()
            False
        """
        with _LOCK:
            entries = _TABLE.values() if name is None else [_TABLE.get(name, [0, 0, 0])]
            for entry in entries:
                entry[0] = entry[1] = entry[2] = 0
