"""What every collector shares around its own ``next`` and ``shutdown``.

Iteration up to ``total_frames``, ``with`` blocks and garbage collection all end
in ``shutdown``; a collector class inherits them from :class:`CollectorLifecycle`
and writes only how it collects a batch and how it stops.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, Self


class CollectorLifecycle:
    """Iterate batches until ``total_frames``; shut down on ``with`` exit and on ``del``.

    Subclasses set ``total_frames`` (``-1``: endless) and ``frames`` (frames yielded
    so far) and implement ``next()`` and an idempotent ``shutdown()``.

    Example:
        >>> class Countdown(CollectorLifecycle):
        ...     total_frames, frames, stopped = 3, 0, False
        ...     def next(self):
        ...         self.frames += 1
        ...         return self.frames
        ...     def shutdown(self):
        ...         self.stopped = True
        >>> with Countdown() as c:
        ...     print(list(c))
        [1, 2, 3]
        >>> c.stopped
        True
    """

    total_frames: int
    frames: int

    def next(self) -> Any:
        raise NotImplementedError

    def shutdown(self) -> None:
        raise NotImplementedError

    def __iter__(self) -> Iterator[Any]:
        while self.total_frames == -1 or self.frames < self.total_frames:
            yield self.next()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # never raise from __del__
            self.shutdown()
