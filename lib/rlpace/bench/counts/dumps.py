"""Read Callgrind dump files: per-dump totals, estimated cycles, per-function costs.

A dump written by ``CALLGRIND_DUMP_STATS_AT(name)`` starts with a header naming its
trigger (``desc: Trigger: Client Request: <name>``), the recorded events
(``events: Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw`` with ``--cache-sim=yes``) and a
``summary:`` line; it ends with a ``totals:`` line, the sum of the cost lines it holds.
The two agree within 0.1 % in relative changes, but the summary is kept apart from
the cost lines and wraps below zero now and then (a replay-buffer sample, a GPT-2
generation, a trainer loop on its own thread: its ``Ir`` read as ~1.8e19), so
:func:`read_dump` takes the totals and falls back to the summary only when a dump has
none. It reads the header and the file's last few kilobytes, so a folder of dumps is
read in milliseconds; :func:`inclusive_costs` asks ``callgrind_annotate
--inclusive=yes`` for the per-function view that "why did it regress?" needs (made of
the same cost lines).

Estimated cycles follow the open formula of iai-callgrind and pythonspeed.com
(Itamar Turner-Trauring): ``L1 hits + 5 * LL hits + 35 * RAM accesses``, where
an access is an instruction fetch or a data read or write.

Example:
    >>> events = {"Ir": 1000, "Dr": 300, "Dw": 100, "I1mr": 10, "D1mr": 20, "D1mw": 5,
    ...           "ILmr": 1, "DLmr": 4, "DLmw": 0}
    >>> estimated_cycles(events)
    1690.0
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Dump", "estimated_cycles", "inclusive_costs", "read_dump", "read_dumps"]

TRIGGER_PREFIX = "desc: Trigger: Client Request: "
WARM_TRIGGER = "rlpace-warm-up"
"""The trigger of the dump that ends a case's cache-warming call: a throwaway, deleted
by the counting process and never read as a case (``CALLGRIND_ZERO_STATS`` after an
instrumented call left part of that call's costs in the next dump's cost lines; a dump
resets them all)."""
_HEADER_LINES = 64
_TAIL_BYTES = 4096
_ANNOTATE_ROW = re.compile(r"^\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+(\S.*?)(?:\s+\[[^\]]*\])?\s*$")


@dataclass(frozen=True)
class Dump:
    """The header of one dump file: what triggered it and its event totals.

    Example:
        >>> Dump(Path("cg.1.1"), "test_x[8]", {"Ir": 10.0}).instructions
        10.0
    """

    path: Path
    trigger: str
    """The name passed to ``CALLGRIND_DUMP_STATS_AT`` (the case's test id)."""
    events: dict[str, float]
    """Event name -> total since the counters were zeroed (``Ir``, ``D1mr``, ...)."""
    wrapped: tuple[str, ...] = ()
    """Events whose counter wrapped below zero (read as 0): a cache-miss counter after
    ``ZERO_STATS`` now and then; a wrapped ``Ir`` means the dump cannot be trusted."""

    @property
    def instructions(self) -> float:
        """Instructions executed (``Ir``)."""
        return float(self.events["Ir"])

    @property
    def cycles(self) -> float | None:
        """Estimated cycles, or None when the dump has no cache simulation."""
        return estimated_cycles(self.events)


def estimated_cycles(events: Mapping[str, float]) -> float | None:
    """``L1 hits + 5 * LL hits + 35 * RAM accesses`` from Callgrind's cache events.

    Returns None when the events lack the cache simulation (``--cache-sim=no``).

    Example:
        >>> estimated_cycles({"Ir": 10})
    """
    need = ("Ir", "Dr", "Dw", "I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw")
    if any(k not in events for k in need):
        return None
    accesses = events["Ir"] + events["Dr"] + events["Dw"]
    l1_miss = events["I1mr"] + events["D1mr"] + events["D1mw"]
    ram = events["ILmr"] + events["DLmr"] + events["DLmw"]
    return float((accesses - l1_miss) + 5 * (l1_miss - ram) + 35 * ram)


def _signed(value: int) -> float:
    """Callgrind writes its 64-bit counters unsigned; after ``ZERO_STATS`` in the middle
    of a run, a cache-miss counter can dip below zero and wrap to ~1.8e19. Read it as
    the signed value and clamp at zero.

    Example:
        >>> _signed(2**64 - 3), _signed(42)
        (0.0, 42.0)
    """
    if value >= 2**63:
        value -= 2**64
    return float(max(value, 0))


def read_dump(path: Path) -> Dump | None:
    """The header of one dump; None for a dump not triggered by a client request
    (the one Callgrind writes at exit).

    Example:
        >>> read_dump(Path("missing.out")) is None
        True
    """
    trigger = None
    names: list[str] = []
    summary: list[int] | None = None
    try:
        with Path(path).open("rb") as fh:
            for _, raw_line in zip(range(_HEADER_LINES), fh, strict=False):
                line = raw_line.decode("utf-8", errors="replace")
                if line.startswith(TRIGGER_PREFIX):
                    trigger = line[len(TRIGGER_PREFIX) :].rstrip("\n")
                elif line.startswith("events:"):
                    names = line.split()[1:]
                elif line.startswith("summary:"):
                    summary = [int(v) for v in line.split()[1:]]
                    break
            if trigger is None or not names or summary is None:
                return None
            fh.seek(0, 2)
            fh.seek(max(0, fh.tell() - _TAIL_BYTES))
            tail = fh.read().decode("utf-8", errors="replace").splitlines()
    except (OSError, ValueError):
        return None
    totals = next((t for t in reversed(tail) if t.startswith("totals:")), None)
    raw = [int(v) for v in totals.split()[1:]] if totals is not None else summary
    values = [_signed(v) for v in raw]
    wrapped = tuple(n for n, v in zip(names, raw, strict=False) if v >= 2**63)
    return Dump(Path(path), trigger, dict(zip(names, values, strict=False)), wrapped)


def read_dumps(folder: Path) -> dict[str, Dump]:
    """Every client-request dump under ``folder``, by trigger (the last dump wins; a
    :data:`WARM_TRIGGER` dump left behind is not a case).

    Example:
        >>> read_dumps(Path("no-such-folder"))
        {}
    """
    found: dict[str, Dump] = {}
    paths = sorted(Path(folder).glob("cg.*"), key=lambda p: p.stat().st_mtime_ns)
    for path in paths:
        dump = read_dump(path)
        if dump is not None and dump.trigger != WARM_TRIGGER:
            found[dump.trigger] = dump
    return found


def inclusive_costs(path: Path, *, limit: int = 400) -> dict[str, float]:
    """Inclusive instructions per function of one dump, ``file:function`` -> Ir.

    Runs ``callgrind_annotate --inclusive=yes`` (shipped with Valgrind) and keeps the
    ``limit`` costliest functions; an empty dict when the tool is missing.

    Example:
        >>> inclusive_costs(Path("missing.out"))
        {}
    """
    tool = shutil.which("callgrind_annotate")
    if tool is None or not Path(path).is_file():
        return {}
    done = subprocess.run(
        [tool, "--inclusive=yes", "--show=Ir", "--threshold=100", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    costs: dict[str, float] = {}
    in_table = False
    for line in done.stdout.splitlines():
        if line.rstrip().endswith("file:function"):
            in_table = True
            continue
        if not in_table:
            continue
        match = _ANNOTATE_ROW.match(line)
        if match is None:
            continue
        name = match.group(2)
        costs[name] = costs.get(name, 0.0) + float(match.group(1).replace(",", ""))
        if len(costs) >= limit:
            break
    return costs
