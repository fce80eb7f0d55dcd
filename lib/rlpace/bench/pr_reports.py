"""What ``pr`` writes for a set: the comment in two styles, and the comparison as data.

For each set, ``<out_dir>/<set>.md`` (rlpace style), ``<set>.seed.md`` (seed style) and
``<set>.json`` (the comparison's record, with how its runs ran under ``pipeline``: the
order of its runs and duets, the extra duets' stages, the confirmation). Each file is
written whole or not at all, and the record is read back as the trusted comment job
(``rlpace-bench comment``) will read it, so a record its schema refuses
fails ``pr`` instead of that job. Markdown comes from :mod:`rlpace.bench.render` only.

Example:
    >>> set_marker("cpu")
    '<!-- rlpace-bench-set: cpu -->'
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from rlpace.bench._atomic import write_whole
from rlpace.bench.base_revision import BaseCheckout
from rlpace.bench.errors import BenchInputError
from rlpace.bench.interleave import SideRuns, duet_order, run_order

if TYPE_CHECKING:  # pragma: no cover
    from rlpace.bench.comparison import BenchmarkChange, Comparison

__all__ = [
    "REPORT_STYLES",
    "SetOutcome",
    "clear_reports",
    "set_marker",
    "write_reports",
    "write_skipped",
]


@dataclass(frozen=True)
class SetOutcome:
    """What the pipeline produced for one set.

    Example:
        >>> SetOutcome("gpu", None, skipped="no CUDA device on this machine").flagged
        ()
    """

    set_name: str
    comparison: Comparison | None
    """The comparison, or None when the set was skipped."""
    skipped: str | None = None
    """Why the set was skipped, or None."""
    reports: tuple[Path, ...] = ()
    """The files written: ``<set>.md``, ``<set>.seed.md``, ``<set>.json``."""
    runs: SideRuns | None = None
    confirm_runs: SideRuns | None = None
    """The confirmation's runs (None when nothing was flagged or ``confirm`` is 0)."""
    stage_seconds: Mapping[str, float] = field(default_factory=dict)
    """The seconds each stage that ran took, in the order they ran
    (:data:`rlpace.bench.pipeline.STAGES`)."""

    @property
    def flagged(self) -> tuple[BenchmarkChange, ...]:
        """Benchmarks whose verdict is a regression."""
        if self.comparison is None:
            return ()
        from rlpace.bench.comparison import Verdict

        return self.comparison.by_verdict(Verdict.WORSENED)


REPORT_STYLES = {"rlpace": "{set}.md", "seed": "{set}.seed.md"}
"""Rendered report styles and their file names under ``out_dir``."""


def _report_paths(out_dir: Path, set_name: str) -> list[Path]:
    """What ``pr`` writes for one set: its rendered reports and its ``<set>.json``."""
    names = [pattern.format(set=set_name) for pattern in REPORT_STYLES.values()]
    return [out_dir / name for name in (*names, f"{set_name}.json")]


def clear_reports(out_dir: Path, set_name: str) -> None:
    """Remove a set's reports from an earlier run before this run's set starts: a run
    that fails or is interrupted must not leave the last run's verdict to be read as
    this one's.

    Example:
        >>> clear_reports(Path("no-such-dir"), "cpu")
    """
    for path in _report_paths(out_dir, set_name):
        path.unlink(missing_ok=True)


def set_marker(set_name: str) -> str:
    """The hidden line that keeps one PR comment per set (the bot finds it again).

    Example:
        >>> set_marker("gpu")
        '<!-- rlpace-bench-set: gpu -->'
    """
    return f"<!-- rlpace-bench-set: {set_name} -->"


def _title(set_name: str, base: BaseCheckout) -> str:
    """The report's heading."""
    return f"Benchmarks ({set_name.upper()} set): working tree vs {base.ref} ({base.short})"


def write_reports(
    out_dir: Path,
    set_name: str,
    comparison: Comparison,
    runs: SideRuns,
    base: BaseCheckout,
    noise_file: Path | None,
    environment_differences: list[str],
    confirm_runs: SideRuns | None = None,
    clock_runs: SideRuns | None = None,
    *,
    paired: bool = False,
    extension: Sequence[tuple[SideRuns, tuple[str, ...]]] = (),
    stage_seconds: Mapping[str, float] | None = None,
) -> SetOutcome:
    """Write one set's ``<set>.md`` (rlpace style), ``<set>.seed.md`` (seed style) and
    ``<set>.json`` (the comparison as data, with how its runs ran under ``pipeline``)
    into ``out_dir``, each whole or not at all, and read the record back as the comment
    job will.

    Args:
        out_dir: where the reports go.
        set_name: ``cpu`` or ``gpu``.
        comparison: the judged comparison.
        runs: the first runs (or duets) of both sides.
        base: the base revision's checkout.
        noise_file: the A/A calibration the judge used, or None.
        environment_differences: how the sides' environments differ (a full base env).
        confirm_runs: the confirmation's runs, or None.
        clock_runs: the counted pass's duet (count tier on), or None.
        paired: whether the timed runs were duets, judged pair by pair.
        extension: the extra duets' stages, each with its cases.
        stage_seconds: the seconds each stage of the run took, in the order they ran
            (:data:`rlpace.bench.pipeline.STAGES`).

    Raises:
        BenchInputError: the record written is one the comment job's schema refuses (a
            bug; the file is kept to report it).

    Example:
        >>> write_reports(Path("reports/pr"), "cpu", comparison, runs, base, None, [])
        ... # doctest: +SKIP
        SetOutcome(set_name='cpu', ...)
    """
    from rlpace.bench.render import GITHUB_COMMENT_LIMIT, render_report

    written = []
    marker = set_marker(set_name)
    for style, pattern in REPORT_STYLES.items():
        path = out_dir / pattern.format(set=set_name)
        text = render_report(
            {set_name: comparison},
            style=style,
            title=_title(set_name, base),
            max_chars=GITHUB_COMMENT_LIMIT - len(marker) - 1,
        )
        first, _, rest = text.partition("\n")
        if not first.startswith("<!--"):  # a style without the report marker
            first, rest = "", text
        write_whole(path, "\n".join(x for x in (first, marker, rest) if x) + "\n")
        written.append(path)
    data = comparison.to_dict()
    data["pipeline"] = _pipeline_meta(set_name, runs, base)
    data["pipeline"]["noise_file"] = (
        str(noise_file) if noise_file and noise_file.is_file() else None
    )
    data["pipeline"]["environment_differences"] = list(environment_differences)
    # the timed pass's runs (and a confirmation) as duets, judged pair by pair
    data["pipeline"]["paired"] = paired
    if paired:
        data["pipeline"]["order"] = duet_order(runs)
    data["pipeline"]["confirmation"] = (
        None
        if confirm_runs is None
        else {
            "repeats": confirm_runs.repeats,
            "benchmarks": [r.fullname for r in comparison.rows if r.confirmed is not None],
            "order": duet_order(confirm_runs) if paired else run_order(confirm_runs),
        }
    )
    # the duets after the first ones, stage by stage (appended to each case's pairs)
    data["pipeline"]["extension"] = [
        {"repeats": r.repeats, "benchmarks": list(names), "order": duet_order(r)}
        for r, names in extension
    ]
    # the counted pass: its duets of the counted cases (cores swapped, pooled), on the CPU clock
    data["pipeline"]["cpu_clock"] = (
        None
        if clock_runs is None
        else {"repeats": clock_runs.repeats, "duet": True, "order": duet_order(clock_runs)}
    )
    seconds = dict(stage_seconds or {})
    data["pipeline"]["stage_seconds"] = seconds
    json_path = out_dir / f"{set_name}.json"
    write_whole(json_path, json.dumps(data, indent=2) + "\n")
    written.append(json_path)
    _check_record(json_path)
    return SetOutcome(set_name, comparison, None, tuple(written), runs, confirm_runs, seconds)


def _check_record(path: Path) -> None:
    """Read ``path`` back as the trusted comment job will, so that a record its schema
    refuses fails this run, loudly, instead of that job (which would post nothing)."""
    from rlpace.bench.comparison_record import load_record

    try:
        load_record(path)
    except BenchInputError as e:
        raise BenchInputError(
            f"{path.name}: pr wrote a comparison that the comment job's schema refuses, so "
            f"no comment could be posted from it ({e}). This is a bug in rlpace-bench: "
            f"please report it with the file, which is kept at {path}"
        ) from None


def write_skipped(out_dir: Path, set_name: str, runs: SideRuns, base: BaseCheckout) -> SetOutcome:
    """Write the reports of a set that could not run here (``runs.skipped`` says why):
    a short note in both styles, and a ``rlpace-pr-skipped`` record.

    Example:
        >>> write_skipped(Path("reports/pr"), "gpu", SideRuns("gpu", (), (), "no CUDA"),
        ...               base)  # doctest: +SKIP
        SetOutcome(set_name='gpu', comparison=None, skipped='no CUDA', ...)
    """
    md = out_dir / f"{set_name}.md"
    from rlpace.bench.render import REPORT_MARKER

    text = (
        f"{REPORT_MARKER}\n{set_marker(set_name)}\n## {_title(set_name, base)}\n\n"
        f"Skipped: {runs.skipped}.\n"
    )
    write_whole(md, text)
    seed = out_dir / f"{set_name}.seed.md"
    write_whole(seed, text)
    data = {
        "format": "rlpace-pr-skipped",
        "version": 1,
        "skipped": runs.skipped,
        "pipeline": _pipeline_meta(set_name, runs, base),
    }
    json_path = out_dir / f"{set_name}.json"
    write_whole(json_path, json.dumps(data, indent=2) + "\n")
    return SetOutcome(set_name, None, runs.skipped, (md, seed, json_path), runs)


def _pipeline_meta(set_name: str, runs: SideRuns, base: BaseCheckout) -> dict[str, object]:
    return {
        "set": set_name,
        "base_ref": base.ref,
        "base_commit": base.sha,
        "base_env": base.env_mode,
        "repeats": runs.repeats,
        "order": run_order(runs),
    }
