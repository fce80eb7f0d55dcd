"""Benchmark history from asv results: step changes across commits, and trend plots.

asv stores one result file per commit and environment. :func:`load_asv_series`
turns them into one :class:`Series` per benchmark, parameter combination, machine and
environment, ordered by commit (git's order when the repository is given, else the
commit date). :func:`detect_step_changes` fits a piecewise-constant signal with asv's
own step detection (``asv.step_detect.detect_steps``), merges neighbouring levels that
differ by less than a threshold, and reports each remaining level change as a
:class:`StepChange` naming the *first* commit at the new level. The threshold depends
on what a series measures (:func:`step_threshold`): a timing or a memory figure must
move ``threshold`` (10 %); a count of work (the count tier's instructions, the work
counts' ops and calls) must move ``count_threshold`` (1 %).
:func:`plot_series` draws one PNG per flagged benchmark (commit dates on the axis,
units from asv's ``benchmarks.json``, staggered labels) and :func:`write_index` an
``index.md`` that links each one.

asv and matplotlib are imported where they are used.

Example:
    >>> s = Series("cpu.add.time_case(10)", "box", "py3.11", ("a1", "b2", "c3", "d4"),
    ...            (1, 2, 3, 4), (1.0e-3, 1.02e-3, 2.0e-3, 2.05e-3))
    >>> [(c.first_commit, c.kind) for c in detect_step_changes(s)]
    [('c3', 'regression')]
"""

from __future__ import annotations

import itertools
import math
import re
import subprocess
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from rlpace.bench.counts.verdict import DEFAULT_FLOOR
from rlpace.bench.errors import BenchInputError
from rlpace.bench.units import COUNT_UNITS

__all__ = [
    "COUNT_THRESHOLD",
    "STEP_COUNT_UNITS",
    "HistoryReport",
    "Series",
    "StepChange",
    "detect_step_changes",
    "asv_paths",
    "git_commit_order",
    "history",
    "load_asv_series",
    "plot_series",
    "step_threshold",
    "write_index",
]

STEP_COUNT_UNITS = COUNT_UNITS - {"worker Python calls"}
"""The units whose series must step ``count_threshold`` (1 %): every count of work but
the workers' steady calls. Their total is the calls of the functions that happened to
be steady in that process; in asv's own run of three commits (2026-12-07) the threaded
collectors' totals moved by 0.24 and 1.96 % between commits with the same code, so
they keep the timings' threshold. A sleep-bound row, with fewer functions steady than
the pull request's guard asks, has no such series (``asv_bench/benchmarks/work.py``)."""

COUNT_THRESHOLD = DEFAULT_FLOOR
"""The smallest relative step reported in a series of :data:`STEP_COUNT_UNITS` (0.01): the
count tier's gate floor, the least change a pull request's counts are flagged for."""


@dataclass(frozen=True)
class Series:
    """One benchmark's results over commits, oldest first.

    Example:
        >>> s = Series("b", "m", "e", ("c1",), (0,), (1.5,))
        >>> s.label
        'b [m/e]'
    """

    benchmark: str
    """asv benchmark name with its parameters, e.g. ``cpu.test_rb.time_case('rlpace', 64)``."""
    machine: str
    """asv machine name."""
    env: str
    """asv environment name."""
    commits: tuple[str, ...]
    """Full commit hashes, oldest first."""
    dates: tuple[int, ...]
    """Commit dates (ms since the epoch), as asv stores them."""
    values: tuple[float, ...]
    """The result at each commit (seconds for ``time_*``); NaN where it failed or skipped."""
    unit: str = "seconds"
    """What the values measure (:mod:`rlpace.bench.units`), from asv's ``benchmarks.json``."""

    def __post_init__(self) -> None:
        if not len(self.commits) == len(self.dates) == len(self.values):
            raise ValueError(
                f"Series {self.benchmark!r}: expected equal lengths of commits, dates and "
                f"values, got {len(self.commits)}, {len(self.dates)}, {len(self.values)}"
            )

    @property
    def label(self) -> str:
        """The benchmark with its machine and environment."""
        return f"{self.benchmark} [{self.machine}/{self.env}]"


@dataclass(frozen=True)
class StepChange:
    """A lasting change of level in a series, starting at ``first_commit``.

    Example:
        >>> StepChange("b", "m", "e", "c3", "c2", 2, 1.0, 1.5).ratio
        1.5
    """

    benchmark: str
    """The benchmark (with parameters), as in :attr:`Series.benchmark`."""
    machine: str
    """asv machine name."""
    env: str
    """asv environment name."""
    first_commit: str
    """The first commit measured at the new level."""
    previous_commit: str
    """The last commit measured at the old level."""
    position: int
    """Index of ``first_commit`` in the series."""
    before: float
    """Mean of the old level."""
    after: float
    """Mean of the new level."""
    threshold: float = 0.1
    """The smallest relative step the series could report (:func:`step_threshold`)."""

    @property
    def ratio(self) -> float:
        """``after / before``: above 1 is slower for timings."""
        return self.after / self.before if self.before else math.inf

    @property
    def change(self) -> str:
        """The relative change as text, e.g. ``"+3.05 %"``.

        Example:
            >>> StepChange("b", "m", "e", "c3", "c2", 2, 1.0e6, 1.0305e6).change
            '+3.05 %'
        """
        return f"{(self.ratio - 1) * 100:+.2f} %" if math.isfinite(self.ratio) else "+inf %"

    @property
    def kind(self) -> str:
        """``"regression"`` when the value rose (slower), else ``"improvement"``."""
        return "regression" if self.after > self.before else "improvement"


@dataclass(frozen=True)
class HistoryReport:
    """What :func:`history` found and wrote.

    Example:
        >>> HistoryReport(series=(), changes=(), plots=()).flagged
        []
    """

    series: tuple[Series, ...]
    """Every series read."""
    changes: tuple[StepChange, ...]
    """Every step change, by benchmark then position."""
    plots: tuple[Path, ...]
    """One PNG per flagged series."""
    index: Path | None = None
    """``index.md`` linking each flagged series to its plot (None: nothing written)."""

    @property
    def flagged(self) -> list[str]:
        """Labels of the series with at least one step change, in order."""
        seen: list[str] = []
        for c in self.changes:
            label = f"{c.benchmark} [{c.machine}/{c.env}]"
            if label not in seen:
                seen.append(label)
        return seen


def asv_paths(config: Path | str) -> tuple[Path, Path]:
    """The results directory and repository named by an ``asv.conf.json``, resolved.

    asv reads paths relative to the configuration file's directory; so does this.

    Example:
        >>> asv_paths("missing/asv.conf.json")
        Traceback (most recent call last):
        ...
        rlpace.bench.errors.BenchInputError: expected an asv configuration at missing/asv.conf.json, found none; pass --asv-config PATH or --results DIR
    """
    config = Path(config)
    if not config.is_file():
        raise BenchInputError(
            f"expected an asv configuration at {config}, found none; "
            "pass --asv-config PATH or --results DIR"
        )
    from asv.util import load_json

    conf = load_json(str(config), js_comments=True)
    base = config.resolve().parent
    results = base / conf.get("results_dir", "results")
    repo = base / conf.get("repo", ".")
    return results.resolve(), repo.resolve()


def git_commit_order(repo: Path | str) -> list[str]:
    """Every commit reachable from any ref of ``repo``, oldest first (topological).

    Example:
        >>> git_commit_order("/nonexistent")
        []
    """
    try:
        out = subprocess.run(
            ["git", "rev-list", "--topo-order", "--reverse", "--all"],
            cwd=repo,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return []
    return out.stdout.split() if out.returncode == 0 else []


def _result_paths(results_dir: Path) -> list[tuple[Path, str]]:
    """asv's layout, ``<results>/<machine>/<commit>-<env>.json``: each result file with
    its machine, named by the folder's ``machine.json`` or, without a readable one (a
    folder copied alone), by the folder."""
    import json

    found = []
    for folder in sorted(p for p in results_dir.iterdir() if p.is_dir()):
        machine = folder.name
        try:
            named = json.loads((folder / "machine.json").read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError, RecursionError):
            named = None
        if isinstance(named, dict) and isinstance(named.get("machine"), str):
            machine = named["machine"]
        for path in sorted(folder.glob("*.json")):
            if path.name not in ("machine.json", "benchmarks.json") and path.is_file():
                found.append((path, machine))
    return found


def load_asv_series(
    results_dir: Path | str,
    *,
    commit_order: Sequence[str] = (),
    progress: Callable[[int, int], None] | None = None,
) -> list[Series]:
    """Read an asv results directory into one series per benchmark and parameters.

    Args:
        results_dir: asv's ``results_dir`` (one folder per machine).
        commit_order: commits oldest first (e.g. :func:`git_commit_order`); commits
            missing from it come after, by date.
        progress: called with (files read, files in all) after each result file.

    Raises:
        BenchInputError: when the directory does not exist or holds no asv results.

    Example:
        >>> load_asv_series("/nonexistent/results")
        Traceback (most recent call last):
        ...
        rlpace.bench.errors.BenchInputError: expected an asv results directory at /nonexistent/results, found none; run `make asv` (or `asv run`) first, or pass --results DIR
    """
    import pandas as pd

    from rlpace.bench.results import load_results

    results_dir = Path(results_dir)
    if not results_dir.is_dir():
        raise BenchInputError(
            f"expected an asv results directory at {results_dir}, found none; run `make asv` "
            "(or `asv run`) first, or pass --results DIR"
        )
    rank = {commit: i for i, commit in enumerate(commit_order)}
    points: dict[tuple[str, str, str], dict[str, tuple[int, float]]] = {}
    unit_of: dict[str, str] = {}
    paths = _result_paths(results_dir)
    n_files = 0
    for path, machine in paths:
        # the comparator's reader: asv's api versions 1 and 2, and a malformed file is
        # named with what was expected (asv's own reader refuses version 1 files)
        table = load_results(path)
        filename = path.name
        n_files += 1
        if progress is not None:
            progress(n_files, len(paths))
        commit = table.attrs.get("commit_info", {}).get("id") or filename.split("-")[0]
        when = table.attrs.get("datetime")
        date = int(pd.Timestamp(when).value // 1_000_000) if when else 0
        env = table.attrs.get("machine_info", {}).get("env_name") or Path(filename).stem
        for row in table.itertuples(index=False):
            value = row.median if row.status == "ok" else math.nan
            unit_of[row.fullname] = row.value_unit
            per_commit = points.setdefault((row.fullname, machine, env), {})
            per_commit[commit] = (date, float(value) if pd.notna(value) else math.nan)
    if n_files == 0:
        raise BenchInputError(
            f"expected asv result files under {results_dir}, found none; run `make asv` first"
        )
    series = []
    for (name, machine, env), per_commit in sorted(points.items()):
        ordered = sorted(
            per_commit.items(),
            key=lambda kv: (rank.get(kv[0], len(rank)), kv[1][0], kv[0]),
        )
        series.append(
            Series(
                benchmark=name,
                machine=machine,
                env=env,
                commits=tuple(c for c, _ in ordered),
                dates=tuple(d for _, (d, _) in ordered),
                values=tuple(v for _, (_, v) in ordered),
                unit=unit_of.get(name, "seconds"),
            )
        )
    return series


def step_threshold(
    series: Series, *, threshold: float = 0.1, count_threshold: float = COUNT_THRESHOLD
) -> float:
    """The smallest relative step :func:`history` reports in ``series``: ``threshold``
    for a timing or a memory figure, ``count_threshold`` for a count of work
    (:data:`STEP_COUNT_UNITS`). A count that follows the clock (the calling thread's Python
    calls of a collector, 1-3 % from process to process) is left to asv's step
    detection, whose penalty grows with the series' own scatter: it kept such a series
    (``collector_with_rb[rlpace-single]``'s six processes) one level.

    Example:
        >>> timed = Series("cpu.x.time_case", "m", "e", ("a",), (1,), (1.0,))
        >>> counted = Series("counts.Counts.track_instructions", "m", "e", ("a", "b"),
        ...                  (1, 2), (1e6, 1.03e6), unit="instructions")
        >>> step_threshold(timed), step_threshold(counted)
        (0.1, 0.01)
    """
    return count_threshold if series.unit in STEP_COUNT_UNITS else threshold


def detect_step_changes(series: Series, *, threshold: float = 0.1) -> list[StepChange]:
    """Find lasting level changes in a series with asv's step detection.

    asv's fit may split a flat but noisy series into many short levels; neighbouring
    levels whose means differ by less than ``threshold`` (relative) are merged
    before reporting.

    Args:
        series: the results over commits, oldest first.
        threshold: smallest relative change reported (0.1 = 10 %).

    Returns:
        One :class:`StepChange` per remaining level boundary, oldest first.

    Example:
        >>> flat = Series("b", "m", "e", ("a", "b", "c", "d"), (1, 2, 3, 4),
        ...               (1.0, 1.03, 0.98, 1.01))
        >>> detect_step_changes(flat)
        []
    """
    if not threshold > 0:  # NaN too
        raise ValueError(f"threshold: expected a relative change > 0, got {threshold!r}")
    from asv.step_detect import detect_steps

    y = [None if math.isnan(v) else v for v in series.values]
    if sum(v is not None for v in y) < 2:
        return []
    levels: list[list[float]] = []  # [left, right, weighted sum, weight]
    for left, right, mean, _min, _err in detect_steps(y):
        weight = sum(1 for v in y[left:right] if v is not None)
        if levels:
            prev = levels[-1]
            prev_mean = prev[2] / prev[3]
            if abs(mean - prev_mean) < threshold * min(abs(mean), abs(prev_mean)):
                levels[-1] = [prev[0], right, prev[2] + mean * weight, prev[3] + weight]
                continue
        levels.append([left, right, mean * weight, weight])
    changes = []
    for prev, cur in itertools.pairwise(levels):
        first = int(cur[0])
        last_before = max(i for i in range(int(prev[0]), int(prev[1])) if y[i] is not None)
        changes.append(
            StepChange(
                benchmark=series.benchmark,
                machine=series.machine,
                env=series.env,
                first_commit=series.commits[first],
                previous_commit=series.commits[last_before],
                position=first,
                before=prev[2] / prev[3],
                after=cur[2] / cur[3],
                threshold=threshold,
            )
        )
    return changes


def _file_name(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", label).strip("_")[:180] + ".png"


def plot_series(series: Series, changes: Sequence[StepChange], out_dir: Path | str) -> Path:
    """Write a PNG trend plot of ``series`` with its step changes marked; return its path.

    Example:
        >>> import tempfile
        >>> s = Series("b", "m", "e", ("aaaaaaaa1", "bbbbbbbb2"), (1, 2), (1.0, 2.0))
        >>> with tempfile.TemporaryDirectory() as d:
        ...     plot_series(s, detect_step_changes(s), d).name
        'b_m_e.png'
    """
    import matplotlib

    matplotlib.use("Agg", force=False)
    import textwrap

    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / _file_name(series.label)
    by_date = all(d > 0 for d in series.dates) and len(set(series.dates)) == len(series.dates)
    if by_date:  # commit dates on the axis: readable for any number of commits
        xs = [mdates.date2num(_datetime(d)) for d in series.dates]
    else:
        xs = list(range(len(series.values)))
    scale, label = _axis_unit(series)
    ys = [v / scale for v in series.values]
    fig, ax = plt.subplots(figsize=(10, 4.5))
    try:
        ax.plot(xs, ys, marker="o", markersize=3, linewidth=1, color="tab:blue")
        for i, change in enumerate(changes):
            colour = "tab:red" if change.kind == "regression" else "tab:green"
            at = xs[change.position]
            before = xs[max(change.position - 1, 0)]
            ax.axvline((at + before) / 2, color=colour, linestyle="--", linewidth=1)
            ax.annotate(
                f"{change.kind} ×{change.ratio:.2f}\nfrom {change.first_commit[:8]}",
                xy=(at, change.after / scale),
                xytext=(6, 28 - 22 * (i % 3)),  # staggered: neighbours do not overlap
                textcoords="offset points",
                fontsize=8,
                color=colour,
                arrowprops={"arrowstyle": "-", "color": colour, "linewidth": 0.6},
            )
        if by_date:
            locator = mdates.AutoDateLocator(maxticks=10)
            ax.xaxis.set_major_locator(locator)
            ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
            ax.set_xlabel("commit date")
        else:  # at most ~12 commit labels, evenly spread
            step = max(1, math.ceil(len(xs) / 12))
            ticks = xs[::step]
            ax.set_xticks(ticks, [series.commits[i][:8] for i in ticks], rotation=30, fontsize=7)
            ax.set_xlabel("commit (oldest first)")
        ax.set_ylabel(label)
        if series.unit not in COUNT_UNITS:
            ax.set_ylim(bottom=0)  # a count's 1 % step would be a flat line from zero
        ax.grid(True, alpha=0.3)
        ax.set_title("\n".join(textwrap.wrap(series.label, 90)), fontsize=9)
        fig.tight_layout()
        fig.savefig(path, dpi=100)
    finally:
        plt.close(fig)
    return path


def _datetime(ms: int):
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def _axis_unit(series: Series) -> tuple[float, str]:
    """A scale and axis label in the series' unit (ms/µs for small times, MiB for bytes)."""
    finite = [abs(v) for v in series.values if math.isfinite(v)]
    top = max(finite) if finite else 1.0
    if series.unit == "seconds":
        for scale, name in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
            if top >= scale or scale == 1e-6:
                return scale, f"time ({name})"
    if series.unit == "bytes":
        for scale, name in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB"), (1, "bytes")):
            if top >= scale or scale == 1:
                return scale, f"memory ({name})"
    return 1.0, "count" if series.unit in ("", "unit") else series.unit


def write_index(report: HistoryReport, out_dir: Path | str) -> Path:
    """Write ``index.md``: every flagged series with its step changes, linking its plot.

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as d:
        ...     path = write_index(HistoryReport(series=(), changes=(), plots=()), d)
        ...     print(path.read_text().splitlines()[2])
        No step change beyond the threshold in 0 series.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    lines = ["# Benchmark history", ""]
    if not report.changes:
        lines.append(f"No step change beyond the threshold in {len(report.series)} series.")
    else:
        lines.append(
            f"{len(report.changes)} step change(s) in {len(report.flagged)} of "
            f"{len(report.series)} series, oldest first per series:"
        )
        lines.append("")
        plots = {p.name: p for p in report.plots}
        for label in report.flagged:
            name = _file_name(label)
            link = f"[{label}]({name})" if name in plots else label
            lines.append(f"- {link}")
            for c in report.changes:
                if f"{c.benchmark} [{c.machine}/{c.env}]" == label:
                    lines.append(
                        f"  - {c.kind} ×{c.ratio:.3f} ({c.change}; threshold "
                        f"{c.threshold * 100:g} %) from `{c.first_commit[:8]}` "
                        f"(after `{c.previous_commit[:8]}`)"
                    )
    path = out_dir / "index.md"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def history(
    *,
    results_dir: Path | str,
    out_dir: Path | str = "reports/history",
    threshold: float = 0.1,
    count_threshold: float = COUNT_THRESHOLD,
    commit_order: Iterable[str] = (),
    progress: Callable[[int, int], None] | None = None,
) -> HistoryReport:
    """Read asv results, flag step changes, plot every flagged series and write an
    ``index.md`` linking them; ``progress`` is called per result file read. A timing
    must move ``threshold``, a count of work ``count_threshold`` or more
    (:func:`step_threshold`).

    Example:
        >>> history(results_dir="/nonexistent")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        rlpace.bench.errors.BenchInputError: expected an asv results directory at ...
    """
    all_series = load_asv_series(results_dir, commit_order=list(commit_order), progress=progress)
    changes: list[StepChange] = []
    plots: list[Path] = []
    for s in all_series:
        found = detect_step_changes(
            s, threshold=step_threshold(s, threshold=threshold, count_threshold=count_threshold)
        )
        if found:
            changes.extend(found)
            plots.append(plot_series(s, found, out_dir))
    report = HistoryReport(series=tuple(all_series), changes=tuple(changes), plots=tuple(plots))
    return replace(report, index=write_index(report, out_dir))
