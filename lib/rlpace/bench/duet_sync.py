"""The two runs of a duet start timing each case together.

A duet runs base and head at the same time, one per core, so that load which comes
and goes hits both alike and their ratio keeps little of it. That holds only while
both time the *same* case: two runs that started together still drift apart (one
side's setup, warm-up or work count takes longer), and a case timed next to another
neighbour (a shared-buffer writer beside a collector's start-up, say) meets other
cache and memory traffic than its twin. So each side of a duet waits, just before it
warms up and times a case (on the wall clock or the CPU clock), until the other side
is ready to time it too.

The rendezvous is a directory both runs share (:data:`DUET_SYNC_ENV` names it and
this run's side, ``a`` or ``b``). Each side appends to its own log: ``case <id>`` for
each case it collected, then ``listed``; ``arrive <id>`` when it is ready to time case
``<id>``, ``leave <id>`` when that case's test is over (timed, skipped or failed),
``end`` when its session ends. A side ready to time ``<id>`` goes on as soon as the
other side's log shows one of:

- ``arrive <id>``: the other side is ready too, both time it now;
- ``leave <id>``: the other side is already past it (it skipped or failed it);
- ``end``: the other side has finished;
- a list without ``<id>``: the other side has no such case (a case the PR adds or
  removes);
- ``arrive <other id>`` for a case this side has listed but not reached: the two
  runs order their cases differently, and waiting would deadlock; each goes on
  alone, and they meet again at the next case both reach.

A side that has waited ``timeout`` seconds stops waiting for the rest of its run (the
other side died or hangs), and so does one whose twin has not written a line after
``absent_timeout`` seconds (a suite plugin from before the rendezvous, which the
runner should not have paired with it: :func:`plugin_meets`); how long each case
waited is kept in its result.

Example:
    >>> import tempfile
    >>> from concurrent.futures import ThreadPoolExecutor
    >>> with tempfile.TemporaryDirectory() as d, ThreadPoolExecutor(2) as pool:
    ...     a, b = DuetSync(Path(d), "a"), DuetSync(Path(d), "b")   # two runs, here threads
    ...     met = list(pool.map(lambda side: side.arrive("case-1").how, (a, b)))
    >>> met
    ['together', 'together']
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

__all__ = ["DUET_SYNC_ENV", "SIDES", "DuetSync", "Rendezvous", "plugin_meets", "sync_value"]

DUET_SYNC_ENV = "RLPACE_BENCH_DUET_SYNC"
"""``SIDE:DIRECTORY`` (``a`` or ``b``, then the shared directory) for each run of a
duet; unset: the run times its cases without waiting for anyone."""

SIDES = ("a", "b")

DEFAULT_TIMEOUT = 120.0
"""Seconds a side waits at one case before it stops waiting for the rest of its run:
more than the longest wall-clock case with its work count (~20 s), less than the
fraction of a PR check a dead twin may cost."""


ABSENT_TIMEOUT = 60.0
"""Seconds a side waits for a twin that has written nothing at all (not even the
cases it collected, which a run writes seconds after it starts)."""

PLUGIN_MARK = "from rlpace.bench.duet_sync import"
"""How a suite plugin that takes part in the rendezvous imports it (a docstring that
only names the module does not count)."""


def plugin_meets(plugin: Path | str) -> bool:
    """Whether the suite plugin file ``plugin`` (a tree's ``tests/benchmarks/conftest.py``)
    takes part in the rendezvous: a base checked out from before it never writes a
    log, and its twin would wait for it at each duet's first case.

    Example:
        >>> plugin_meets("/nonexistent/conftest.py")
        False
    """
    try:
        return PLUGIN_MARK in Path(plugin).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False


def sync_value(side: str, directory: Path | str) -> str:
    """The :data:`DUET_SYNC_ENV` value for one side of a duet.

    Example:
        >>> sync_value("a", "/tmp/duet-3")
        'a:/tmp/duet-3'
    """
    if side not in SIDES:
        raise ValueError(f"duet side: expected one of {SIDES}, got {side!r}")
    return f"{side}:{directory}"


@dataclass(frozen=True)
class Rendezvous:
    """How one case's rendezvous went.

    Example:
        >>> Rendezvous("together", 0.012).waited
        0.012
    """

    how: str
    """``together``, ``other past``, ``other ended``, ``other lacks it``, ``orders
    differ``, ``timed out``, ``other absent`` (the twin never wrote a line) or ``off``
    (this side stopped waiting after either)."""
    waited: float
    """Seconds this side waited."""


@dataclass
class DuetSync:
    """One side of a duet's rendezvous (see the module's docstring for the protocol).

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as d:
        ...     a, b = DuetSync(Path(d), "a"), DuetSync(Path(d), "b")
        ...     b.leave("x")                     # b skipped x
        ...     how = a.arrive("x").how
        >>> how
        'other past'
    """

    directory: Path
    side: str
    timeout: float = DEFAULT_TIMEOUT
    absent_timeout: float = ABSENT_TIMEOUT
    poll: float = 0.0005
    _log: TextIO | None = field(default=None, init=False, repr=False)
    _mine: set[str] = field(default_factory=set, init=False, repr=False)
    _theirs: TextIO | None = field(default=None, init=False, repr=False)
    _pending: str = field(default="", init=False, repr=False)
    _arrived: set[str] = field(default_factory=set, init=False, repr=False)
    _left: set[str] = field(default_factory=set, init=False, repr=False)
    _last: tuple[str, str] | None = field(default=None, init=False, repr=False)
    _cases: set[str] = field(default_factory=set, init=False, repr=False)
    _listed: bool = field(default=False, init=False, repr=False)
    _my_cases: set[str] | None = field(default=None, init=False, repr=False)
    _ended: bool = field(default=False, init=False, repr=False)
    _off: bool = field(default=False, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.side not in SIDES:
            raise ValueError(f"duet side: expected one of {SIDES}, got {self.side!r}")
        self.directory = Path(self.directory)
        if not self.directory.is_dir():
            raise ValueError(
                f"duet rendezvous: expected an existing directory, got {str(self.directory)!r}"
            )

    @classmethod
    def from_env(cls, value: str | None) -> DuetSync | None:
        """The rendezvous :data:`DUET_SYNC_ENV` asks for; None when unset or empty.

        Raises:
            ValueError: a malformed value, naming the variable and the expected form.

        Example:
            >>> DuetSync.from_env(None) is None
            True
            >>> DuetSync.from_env("c:/nowhere")
            Traceback (most recent call last):
            ...
            ValueError: RLPACE_BENCH_DUET_SYNC: expected SIDE:DIRECTORY (side a or b, an existing directory), got 'c:/nowhere'; unset it (a run outside a duet needs none)
        """
        if not value:
            return None
        side, _, directory = value.partition(":")
        try:
            if not directory:
                raise ValueError("no directory")
            return cls(Path(directory), side)
        except ValueError:
            raise ValueError(
                f"{DUET_SYNC_ENV}: expected SIDE:DIRECTORY (side a or b, an existing "
                f"directory), got {value!r}; unset it (a run outside a duet needs none)"
            ) from None

    @property
    def other(self) -> str:
        """The twin's side.

        Example:
            >>> import tempfile
            >>> with tempfile.TemporaryDirectory() as d:
            ...     DuetSync(Path(d), "a").other
            'b'
        """
        return SIDES[1 - SIDES.index(self.side)]

    def listed(self, case_ids: Iterable[str]) -> None:
        """Say which cases this side will run (all it collected, in any order), so the
        other side never waits for a case this one lacks.

        Example:
            >>> import tempfile
            >>> with tempfile.TemporaryDirectory() as d:
            ...     DuetSync(Path(d), "b").listed(["x"])
            ...     how = DuetSync(Path(d), "a").arrive("only-in-a").how
            >>> how
            'other lacks it'
        """
        mine = [_one_line(c) for c in case_ids]
        self._my_cases = set(mine)
        for case_id in mine:
            self._write("case", case_id)
        self._write("listed", "")

    def arrive(self, case_id: str) -> Rendezvous:
        """Say this side is ready to time ``case_id``, and wait for the other side.

        Example:
            >>> import tempfile
            >>> with tempfile.TemporaryDirectory() as d:
            ...     DuetSync(Path(d), "b").end()
            ...     how = DuetSync(Path(d), "a").arrive("x").how
            >>> how
            'other ended'
        """
        case_id = _one_line(case_id)
        self._write("arrive", case_id)
        if self._off:
            return Rendezvous("off", 0.0)
        start = time.monotonic()
        while True:
            how = self._ready(case_id)
            waited = time.monotonic() - start
            if how is not None:
                return Rendezvous(how, waited)
            if waited >= self.timeout:
                self._off = True
                return Rendezvous("timed out", waited)
            if self._last is None and waited >= self.absent_timeout:
                self._off = True  # the twin never wrote a line: it does not take part
                return Rendezvous("other absent", waited)
            time.sleep(self.poll)

    def leave(self, case_id: str) -> None:
        """Say this side is done with ``case_id`` (timed, skipped or failed).

        Example:
            >>> import tempfile
            >>> with tempfile.TemporaryDirectory() as d:
            ...     DuetSync(Path(d), "b").leave("x")
            ...     (Path(d) / "b.log").read_text()
            'leave\\tx\\n'
        """
        self._write("leave", _one_line(case_id))

    def end(self) -> None:
        """Say this side's session is over; the other side waits for it no more.

        Example:
            >>> import tempfile
            >>> with tempfile.TemporaryDirectory() as d:
            ...     DuetSync(Path(d), "b").end()
            ...     DuetSync(Path(d), "a").arrive("any").how
            'other ended'
        """
        self._write("end", "")
        for log in (self._log, self._theirs):
            if log is not None:
                log.close()
        self._log = self._theirs = None

    def _write(self, event: str, case_id: str) -> None:
        if event in ("arrive", "leave"):
            self._mine.add(case_id)
        if self._log is None:
            self._log = (self.directory / f"{self.side}.log").open(
                "a", buffering=1, encoding="utf-8"
            )
        self._log.write(f"{event}\t{case_id}\n")

    def _ready(self, case_id: str) -> str | None:
        self._catch_up()
        if case_id in self._left:
            return "other past"
        if case_id in self._arrived:
            return "together"
        if self._ended:
            return "other ended"
        if self._listed and case_id not in self._cases:
            return "other lacks it"
        if self._last is not None and self._last[0] == "arrive":
            waits_at = self._last[1]
            # the other side waits at a case this side has yet to reach (and will)
            mine_later = self._my_cases is None or waits_at in self._my_cases
            if waits_at not in self._mine and mine_later:
                return "orders differ"
        return None

    def _catch_up(self) -> None:
        if self._theirs is None:  # opened once, then read on from where it stopped
            try:
                self._theirs = (self.directory / f"{self.other}.log").open(encoding="utf-8")
            except FileNotFoundError:  # the other side has not started yet
                return
        chunk = self._theirs.read()
        if not chunk:
            return
        lines = (self._pending + chunk).split("\n")
        self._pending = lines.pop()  # a line still being written
        for line in lines:
            event, _, case_id = line.partition("\t")
            if event == "arrive":
                self._arrived.add(case_id)
            elif event == "leave":
                self._left.add(case_id)
            elif event == "end":
                self._ended = True
            elif event == "case":
                self._cases.add(case_id)
            elif event == "listed":
                self._listed = True
            self._last = (event, case_id)


def _one_line(case_id: str) -> str:
    return case_id.replace("\n", " ").replace("\t", " ")
