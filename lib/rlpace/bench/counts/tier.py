"""The count tier inside ``rlpace-bench pr``: count both sides, then join to the timing.

:func:`run_count_tier` counts base and head side by side (one Valgrind process per
side, one per core), judges them (:func:`~rlpace.bench.counts.verdict.compare_counts`
against the A/A gates of ``reports/counts/gates.json`` when it exists) and explains
each count regression (:func:`~rlpace.bench.counts.why.explain_regression`).
:func:`apply_count_tier` joins that to the timing comparison, case by case:

- a count regression is a regression, whatever the clock said; when the time did not
  move, the note says so ("count regression; time did not move enough to flag");
- a count improvement is an improvement unless the clock flagged a regression;
- a case whose counts did not move keeps the timing verdict, with a note when the
  clock flagged it (the time moved outside the counted computation: system calls,
  I/O, memory, or the machine), except when ``pr`` timed it once a side for display
  (``timed_once``: one measurement a side, pooled over two duets with the cores
  swapped): then the clock's flag is shown, not judged, and the case is
  unchanged (one duet of a single-process case swung untouched buffer cases by
  13-39 % in a real-change run; their counts, within 0.5 %, are the verdict);
- a case the tier could not count keeps the timing verdict, and the reason is shown.

A count change is counted again, the changed cases without the others on both
sides, before it stands: what ran before a case in the counting process moves its
counts. The interpreter's caches and the heap move them a little, and a pull request
changes what runs before a case; work on a clock moves them by any amount (a buffer
that sweeps ``/dev/shm`` at most once a minute sweeps in whichever call the minute
runs out, and under Valgrind a minute is about a second of the case's own time). A
change the second counts do not repeat is dropped, with both figures in the note.
Every change is counted again when there are at most :data:`RECOUNT_ALL_UP_TO` of
them; beyond that (a change to a hot path moves many cases) only those smaller than
:data:`RECOUNT_BELOW`.

When Valgrind or gcc is missing, the tier says so in the comment and the run is
judged on timing alone.

Example:
    >>> tier = CountTier(unavailable="valgrind is not installed")
    >>> tier.summary()["unavailable"]
    'valgrind is not installed'
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlpace.bench.counts.gates import read_gates
from rlpace.bench.counts.records import CountRun, count_differences
from rlpace.bench.counts.session import CountJob, CountSettings, count_trees, profile_cases
from rlpace.bench.counts.toolchain import CountUnavailable
from rlpace.bench.counts.verdict import DEFAULT_FLOOR, DEFAULT_K, CountChange, compare_counts
from rlpace.bench.counts.why import RegressionCause, explain_regression
from rlpace.bench.errors import EnvironmentMismatchError

if TYPE_CHECKING:  # pragma: no cover
    from rlpace.bench.comparison import Comparison

__all__ = ["GATES_FILE", "CountTier", "apply_count_tier", "run_count_tier"]

GATES_FILE = Path("reports") / "counts" / "gates.json"
"""The checked-in A/A gates of the count tier, relative to the repository root."""

RECOUNT_BELOW = 0.03
"""Count changes (regressions and improvements) smaller than this (relative
instructions) are counted again alone. In a real pull request (finite checks in the
rollout loop and the inference server) an untouched LLM-env case moved +1.47 % against
a 1 % gate, its A/A counts within 0.05 %: the change had altered what ran before it in
the process. The history effects measured so far stayed under 2.5 % (a suite built to
fragment the heap), so a change of 3 % or more is counted again only when there are
few changes (:data:`RECOUNT_ALL_UP_TO`)."""

RECOUNT_ALL_UP_TO = 8
"""Up to this many count changes in a run, every one is counted again, whatever its
size. An A/A ``make bench`` counted ``rb_populate[rlpace-tensor-without_replacement]``
+8.0 %: each of its calls builds a buffer, and the buffer's once-a-minute sweep of
``/dev/shm`` fell in the measured call on one side only. A real change flags few cases
or many; the real changes tried so far flagged 1, 6 and 16. Beyond this many the run
is plainly not A/A, and counting them all again would add minutes."""


@dataclass(frozen=True)
class CountTier:
    """The count tier's outcome for one PR run.

    Example:
        >>> CountTier().changes
        ()
    """

    changes: tuple[CountChange, ...] = ()
    causes: Mapping[str, RegressionCause] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    unavailable: str | None = None
    """Why the tier could not run (then it holds no changes)."""
    wall_s: float = 0.0
    """Wall time of counting both sides (they run side by side)."""
    gates: str | None = None
    """The gate file used, or None (the default gate then applies)."""
    timed_once: bool = False
    """Whether the cases on the CPU clock were timed once a side, for display (``pr``
    with counts: one measurement a side, pooled over two duets with the cores swapped,
    :func:`rlpace.bench.results.pool_runs`; one duet until 2026-12-06)."""
    counted_duets: int = 0
    """Duets the counted pass pooled into that one measurement a side (0: not said)."""
    recounted: tuple[str, ...] = ()
    """The count changes counted again without the other cases (:func:`_recount`)."""

    def decides(self, row: Any) -> bool:
        """Whether this tier, not the clock, decides a timing row: a case counted on
        both sides whose time ``pr`` took once a side, for display (``timed_once``).

        Example:
            >>> from rlpace.bench.comparison import BenchmarkChange, Verdict
            >>> tier = CountTier(changes=(CountChange("a", "same", instructions_change=0.0),),
            ...                  timed_once=True)
            >>> once = BenchmarkChange("t::a", "a", Verdict.WORSENED, head_runs=1, base_runs=1)
            >>> tier.decides(once), tier.decides(replace(once, head_runs=4, base_runs=4))
            (True, False)
        """
        if not self.timed_once or min(row.head_runs, row.base_runs) > 1:
            return False
        return any(c.test_id == row.name and c.instructions_change is not None
                   for c in self.changes)  # fmt: skip

    def summary(self) -> dict[str, Any]:
        """The ``count_tier`` entry of the comparison: what the reader is told."""
        by = {}
        for c in self.changes:
            by[c.verdict] = by.get(c.verdict, 0) + 1
        return {
            "unavailable": self.unavailable,
            "warnings": list(self.warnings),
            "verdicts": by,
            "counted": sum(c.instructions_change is not None for c in self.changes),
            "not_counted": sum(c.verdict == "not-counted" for c in self.changes),
            "wall_s": round(self.wall_s, 1),
            "gates": self.gates,
            "timed_once": self.timed_once,
            "counted_duets": self.counted_duets,
            "recounted": list(self.recounted),
        }


def run_count_tier(
    *,
    head_tree: Path,
    base_tree: Path,
    head_python: Path,
    base_python: Path,
    out_dir: Path,
    environ: Mapping[str, Mapping[str, str]],
    settings: CountSettings | None = None,
    gates_file: Path | None = None,
    k: float = DEFAULT_K,
    floor: float = DEFAULT_FLOOR,
    on_case: Callable[[str, str, str], None] | None = None,
    gates_shown: str = "",
) -> CountTier:
    """Count base and head side by side and judge them; never raises for a missing tool.

    ``gates_file`` holds the A/A count gates (``gates_shown``: its name as the comment
    shows it; default the path).

    ``on_case(side, test_id, status)`` is called as each case of either side finishes
    (``side`` is ``base`` or ``head``).

    Example:
        >>> run_count_tier(head_tree=Path("."), base_tree=Path("base"),  # doctest: +SKIP
        ...                head_python=Path("python"), base_python=Path("python"),
        ...                out_dir=Path("build/counts"), environ={"base": {}, "head": {}})
        CountTier(...)
    """
    started = time.monotonic()
    # both trees through links of the same length: every path the counting processes
    # see (module files, sys.path) is then as long on both sides, and so are the
    # allocations they cause; a base worktree deeper than the head otherwise moved
    # untouched cases' counts by up to 2 %
    links = Path(out_dir) / "trees"
    jobs = [
        CountJob(
            _link(links / side, tree),
            Path(out_dir) / f"{side}.json",
            python,
            {k: v for k, v in environ.get(side, {}).items() if k != "PYTHONPATH"},
        )
        for side, tree, python in (
            ("base", base_tree, base_python),
            ("head", head_tree, head_python),
        )
    ]
    try:
        base, head = count_trees(jobs, settings=settings, on_case=on_case)
    except CountUnavailable as exc:
        return CountTier(unavailable=str(exc), wall_s=time.monotonic() - started)
    try:
        warnings = count_differences(head.meta, base.meta)
    except EnvironmentMismatchError as exc:
        return CountTier(unavailable=str(exc), wall_s=time.monotonic() - started)
    gates, used = {}, None
    if gates_file is not None and Path(gates_file).is_file():
        gates, meta, k, floor = read_gates(Path(gates_file))
        # gates widened with another CPU's (or host's) reading were read there too
        earlier = meta.get("widened_with") or {}
        meta |= {
            key: head.meta.get(key)
            for key in ("cpu", "host")
            if earlier.get(key) == head.meta.get(key)
        }
        try:
            warnings += [f"gates: {w}" for w in count_differences(head.meta, meta, gates=True)]
            used = gates_shown or str(gates_file)
        except EnvironmentMismatchError as exc:
            warnings.append(
                f"gates not used ({exc}); every case is judged on the default gate "
                "(measure this machine's with `rlpace-bench calibrate`)"
            )
            gates = {}
    changes = compare_counts(head, base, gates=gates, k=k, floor=floor)
    changes, recounted = _recount(
        changes,
        jobs,
        settings,
        on_case,
        lambda h, b: compare_counts(h, b, gates=gates, k=k, floor=floor),
    )
    flagged = [c.test_id for c in changes if c.flagged]
    if flagged:  # Python-level names for the flagged cases, from plain processes
        with ThreadPoolExecutor(max_workers=2) as pool:
            found = list(pool.map(lambda job: profile_cases(job, flagged, settings=settings), jobs))
        base, head = (
            _with_profiles(run, side) for run, side in zip((base, head), found, strict=True)
        )
    causes = _causes(changes, head, base, jobs[1].output.parent, jobs[0].output.parent)
    return CountTier(
        tuple(changes),
        causes,
        tuple(warnings),
        None,
        time.monotonic() - started,
        used,
        recounted=recounted,
    )


def _recount(
    changes: list[CountChange],
    jobs: list[CountJob],
    settings: CountSettings | None,
    on_case: Callable[[str, str, str], None] | None,
    judge: Callable[[CountRun, CountRun], list[CountChange]],
) -> tuple[list[CountChange], tuple[str, ...]]:
    """Count the changed cases again, without the other cases, on both sides, and drop
    the changes the second counts do not repeat: all of them when there are at most
    :data:`RECOUNT_ALL_UP_TO`, else those under :data:`RECOUNT_BELOW`. Returns the
    changes and the ids counted again."""
    changed = [
        c
        for c in changes
        if c.verdict in ("regression", "improvement") and c.instructions_change is not None
    ]
    if len(changed) > RECOUNT_ALL_UP_TO:
        changed = [c for c in changed if abs(c.instructions_change) < RECOUNT_BELOW]
    ids = tuple(c.test_id for c in changed)
    if not ids:
        return changes, ()
    alone = [replace(j, output=j.output.parent / "alone" / j.output.name) for j in jobs]
    lone = replace(settings or CountSettings(), select=(), ids=ids, keyword=None)
    try:
        base, head = count_trees(alone, settings=lone, on_case=on_case)
    except CountUnavailable:
        return changes, ()  # the first verdicts stand
    again = {c.test_id: c for c in judge(head, base)}
    kept = []
    for c in changes:
        second = again.get(c.test_id)
        if c.test_id in ids and second is not None and second.verdict != c.verdict:
            moved = (
                "not counted"
                if second.instructions_change is None
                else f"{second.instructions_change:+.2%}"
            )
            c = replace(
                c,
                verdict="same",
                reason=(
                    f"counted among the other cases {c.instructions_change:+.2%}, alone "
                    f"{moved} (gate {c.gate:.2%}): the process around it moved it (what ran "
                    "before it, the heap's layout, work on a clock), not the change"
                ),
            )
        kept.append(c)
    return kept, ids


def _link(path: Path, target: Path) -> Path:
    """``path``, a symbolic link to ``target`` (replaced when it exists)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink() or path.exists():
        path.unlink()
    path.symlink_to(Path(target).resolve(), target_is_directory=True)
    return path


def _with_profiles(run: CountRun, profiles: Mapping[str, Mapping[str, dict]]) -> CountRun:
    cases = tuple(
        replace(c, **profiles[c.test_id]) if c.test_id in profiles else c for c in run.cases
    )
    return replace(run, cases=cases)


def _causes(
    changes: list[CountChange], head: CountRun, base: CountRun, head_dir: Path, base_dir: Path
) -> dict[str, RegressionCause]:
    h, b = head.by_id(), base.by_id()
    return {
        c.test_id: explain_regression(
            h[c.test_id], b[c.test_id], head_dir=head_dir, base_dir=base_dir
        )
        for c in changes
        if c.flagged
    }


def _pct(value: float | None) -> float | None:
    return None if value is None else round(100 * value, 4)


def apply_count_tier(comparison: Comparison, tier: CountTier) -> Comparison:
    """Join the count tier's verdicts to the timing comparison's rows (see module doc).

    Example:
        >>> from rlpace.bench.comparison import BenchmarkChange, Comparison, Verdict
        >>> timing = Comparison(rows=(BenchmarkChange("t.py::a", "a", Verdict.UNCHANGED,
        ...                                           median_change_pct=-0.4),))
        >>> counts = CountTier(changes=(CountChange("a", "regression", instructions_change=0.03,
        ...                                         gate=0.005),))
        >>> row = apply_count_tier(timing, counts).rows[0]
        >>> row.verdict.value, row.count_change_pct, row.count_note
        ('worsened', 3.0, 'count regression; time did not move enough to flag (time +0.4%)')
    """
    from rlpace.bench.comparison import Verdict

    by_id = {c.test_id: c for c in tier.changes}
    rows = []
    for row in comparison.rows:
        change = by_id.get(row.name)
        if change is None:
            rows.append(row)
            continue
        verdict, note = row.verdict, change.reason or None
        # the clock's own verdict: the work counts may already have replaced `verdict`
        clock, decided = row.clock_verdict, False
        slower = -row.median_change_pct  # timing: positive = faster
        timed = f"time {slower:+.1f}%" if slower == slower else "time not measured"
        # a case timed once a side for display: its clock is shown, never read as a verdict
        shown = (
            f"its time, taken once a side for display, is shown, not judged ({timed})"
            if tier.decides(row)
            else None
        )
        if change.verdict == "regression":
            verdict, decided = Verdict.WORSENED, True
            note = _count_note("regression", clock, timed, shown)
        elif change.verdict == "improvement" and row.verdict is not Verdict.WORSENED:
            verdict, decided = Verdict.IMPROVED, True
            note = _count_note("improvement", clock, timed, shown)
        elif change.verdict == "improvement":
            note = (
                "count improvement, but the clock says slower: look outside the computation"
                if clock is Verdict.WORSENED
                else "count improvement, but more work launched (its work counts)"
            )
        elif change.verdict == "same" and clock is not row.verdict:
            note = "instructions did not move; its work counts decided"
        elif change.verdict == "same" and row.verdict in (Verdict.WORSENED, Verdict.IMPROVED):
            if tier.decides(row):
                verdict = Verdict.UNCHANGED
                note = (
                    f"instructions did not move; timed once a side for display, so the "
                    f"clock's {timed} is shown, not judged"
                )
            else:
                note = (
                    "instructions did not move: the time changed outside the counted "
                    "computation (system calls, I/O, memory) or with the machine"
                )
        cause = tier.causes.get(row.name)
        rows.append(
            replace(
                row,
                verdict=verdict,
                count_verdict=change.verdict,
                count_change_pct=_pct(change.instructions_change),
                cycles_change_pct=_pct(change.cycles_change),
                count_gate_pct=_pct(change.gate),
                count_detect_pct=_pct(change.detectable),
                count_note=note,
                time_verdict=clock.value if decided else row.time_verdict,
                count_causes=None
                if cause is None
                else {
                    "total": cause.total_delta,
                    "native": [[g.name, g.base, g.head] for g in cause.native],
                    "python": [[g.name, g.base, g.head] for g in cause.python],
                    "bytecode": [[g.name, g.base, g.head] for g in cause.bytecode],
                    "priced": [[g.name, g.base, g.head] for g in cause.priced],
                },
            )
        )
    calibration = comparison.calibration
    if calibration is not None and not any(_timed_alone(r, tier) for r in rows):
        # the calibration of runs one after another judged no row whose verdict stands:
        # the counts decide the counted cases and the duets the timed ones, so the
        # comment does not cite its false-alarm and detection figures as this run's
        calibration = None
    return replace(comparison, rows=tuple(rows), count_tier=tier.summary(), calibration=calibration)


def _count_note(kind: str, clock: Any, timed: str, shown: str | None) -> str:
    """What the comment says of a count ``kind`` (``regression`` or ``improvement``)
    beside the clock's own verdict ``clock``; ``shown``: the wording for a case timed
    once a side for display, whose clock is no verdict.

    Example:
        >>> from rlpace.bench.comparison import Verdict
        >>> _count_note("regression", Verdict.IMPROVED, "time -50.7%", None)
        'count regression, though the clock says faster (time -50.7%)'
        >>> _count_note("improvement", Verdict.IMPROVED, "time +9.0%", None)
        'count and time improvement'
    """
    from rlpace.bench.comparison import Verdict

    same, opposite, word = {
        "regression": (Verdict.WORSENED, Verdict.IMPROVED, "faster"),
        "improvement": (Verdict.IMPROVED, Verdict.WORSENED, "slower"),
    }[kind]
    if shown is not None:
        return f"count {kind}; {shown}"
    if clock is same:
        return f"count and time {kind}"
    if clock is opposite:
        return f"count {kind}, though the clock says {word} ({timed})"
    return f"count {kind}; time did not move enough to flag ({timed})"


def _timed_alone(row: Any, tier: CountTier) -> bool:
    """Whether a row's verdict stands on its time judged unpaired, as the calibration
    of runs one after another judges it: runs on both sides, not decided by the counts,
    not a negative control left unchanged."""
    from rlpace.bench.comparison import Verdict
    from rlpace.bench.controls import CONTROL_IMPL

    if row.method == "paired" or min(row.head_runs, row.base_runs) < 1 or tier.decides(row):
        return False
    return not (row.impl == CONTROL_IMPL and row.verdict is Verdict.UNCHANGED)
