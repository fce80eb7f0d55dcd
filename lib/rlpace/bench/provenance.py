"""What a comparison compared, and the warnings a reader needs before the numbers.

:func:`describe_run` turns a comparison's ``head``/``base`` metadata into one line
(commit, subject, files, machine); :func:`comparison_warnings` checks a comparison for
the mistakes that make every verdict wrong at once:

- ``no-common``: head and base share no benchmark (wrong files, renamed suite);
- ``lost``: benchmarks of base that head did not measure (removed or failed): a
  pull request that breaks benchmark collection;
- ``swap``: head's commit is older than base's (were ``--head`` and ``--base``
  swapped?);
- ``common-mode``: most benchmarks moved the same way beyond the threshold, which a
  change of the machine (runner type, load, frequency scaling) does and code rarely
  does;
- ``single-run``: benchmarks judged on one run a side, with an assumed process noise.

These are decisions, so they live here and not in the templates, which only print them.

Example:
    >>> from rlpace.bench.comparison import BenchmarkChange, Comparison, Verdict
    >>> c = Comparison(rows=(BenchmarkChange("a", "a", Verdict.REMOVED, base_mean=1.0),
    ...                      BenchmarkChange("b", "b", Verdict.NEW)))
    >>> [w.kind for w in comparison_warnings(c)]
    ['no-common', 'lost']
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

import pandas as pd

from rlpace.bench.comparison import Comparison, Verdict

__all__ = [
    "COMMON_MODE_MIN_BENCHMARKS",
    "COMMON_MODE_SHARE",
    "ComparisonWarning",
    "comparison_warnings",
    "describe_run",
]

#: Fewest compared benchmarks for the common-mode check (fewer say nothing about "most").
COMMON_MODE_MIN_BENCHMARKS = 8
#: Share of compared benchmarks moving the same way beyond the threshold that warns.
COMMON_MODE_SHARE = 0.7


@dataclass(frozen=True)
class ComparisonWarning:
    """One warning about a whole comparison.

    Example:
        >>> ComparisonWarning("swap", "head is older than base").kind
        'swap'
    """

    kind: str
    """``"no-common"``, ``"lost"``, ``"swap"``, ``"common-mode"`` or ``"single-run"``."""
    text: str
    """The sentence for the reader (plain text; the renderer escapes it)."""


def _short(commit: Any) -> str | None:
    """A git sha's first 7 digits; anything else (pytest-benchmark writes
    ``unversioned`` outside a git checkout) as it is, at most 40 characters."""
    if not isinstance(commit, str) or not commit:
        return None
    is_sha = len(commit) >= 7 and all(c in "0123456789abcdef" for c in commit.lower())
    return commit[:7] if is_sha else commit[:40]


def describe_run(meta: Mapping[str, Any]) -> str:
    """One line naming a run: short commit and subject, files, machine (empty when the
    run records none of them).

    Example:
        >>> describe_run({"commit": "0123456789abcdef", "subject": "Speed up x",
        ...               "source": "out/head.json", "machine": "ci-1"})
        '0123456 (Speed up x) · head.json · ci-1'
        >>> describe_run({"commit": "unversioned", "source": "h1.json"})
        'unversioned · h1.json'
        >>> describe_run({})
        ''
    """
    if not any(meta.get(k) for k in ("commit", "subject", "source", "sources", "machine")):
        return ""
    commit = _short(meta.get("commit"))
    parts = []
    head = commit or "unknown commit"
    if meta.get("subject"):
        head += f" ({str(meta['subject'])[:72]})"
    parts.append(head)
    sources = [s for s in (meta.get("sources") or []) if s] or (
        [meta["source"]] if meta.get("source") else []
    )
    sources = [PurePath(str(s)).name for s in sources]  # no runner paths in a comment
    if len(sources) > 3:
        parts.append(f"{sources[0]} and {len(sources) - 1} more files")
    elif sources:
        parts.append(", ".join(str(s) for s in sources))
    if meta.get("machine"):
        parts.append(str(meta["machine"]))
    return " · ".join(parts)


def _time(value: Any) -> pd.Timestamp | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        stamp = pd.Timestamp(value)
    except (ValueError, TypeError, OverflowError):
        return None
    if stamp is pd.NaT:
        return None
    return stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp


def comparison_warnings(comparison: Comparison) -> list[ComparisonWarning]:
    """The warnings about ``comparison`` as a whole, most serious first.

    Example:
        >>> from rlpace.bench.comparison import BenchmarkChange, Comparison, Verdict
        >>> rows = tuple(BenchmarkChange(f"b{i}", f"b{i}", Verdict.IMPROVED,
        ...              median_change_pct=-12.0) for i in range(10))
        >>> print(comparison_warnings(Comparison(rows=rows))[0].text)
        10 of 10 benchmarks moved the same way (median -12.0%): a shift this broad usually comes from the machine (another runner type, load, frequency scaling), not from the code.
    """
    if not comparison.has_base:
        return []
    out: list[ComparisonWarning] = []
    for path in comparison.calibration_changes:
        out.append(
            ComparisonWarning(
                "calibration-changed",
                f"This pull request changes {path}: it was judged with the base's copy "
                "(none if the base has none), since a pull request cannot set its own "
                "gates. The new file applies once merged.",
            )
        )
    rows = comparison.rows
    judged = (Verdict.IMPROVED, Verdict.WORSENED, Verdict.UNCHANGED)
    if rows and not any(
        r.verdict in judged or (r.verdict is Verdict.FAILED and r.has_base) for r in rows
    ):
        out.append(
            ComparisonWarning(
                "no-common",
                "Head and base have no benchmark in common: nothing was compared. Check "
                "that both files come from the same suite.",
            )
        )
    lost = comparison.lost
    if lost:
        names = ", ".join(r.name for r in lost[:5]) + (
            f" and {len(lost) - 5} more" if len(lost) > 5 else ""
        )
        out.append(
            ComparisonWarning(
                "lost",
                f"Head lost {len(lost)} benchmark{'s' if len(lost) != 1 else ''} that base "
                f"measured (removed or failed): {names}.",
            )
        )
    head_time = _time(comparison.head.get("commit_time"))
    base_time = _time(comparison.base.get("commit_time"))
    if head_time is not None and base_time is not None and head_time < base_time:
        out.append(
            ComparisonWarning(
                "swap",
                f"Head's commit ({head_time:%Y-%m-%d %H:%M}) is older than base's "
                f"({base_time:%Y-%m-%d %H:%M}): were head and base swapped? A swap turns "
                "every regression into an improvement.",
            )
        )
    changes = [r.median_change_pct for r in comparison.compared]
    if len(changes) >= COMMON_MODE_MIN_BENCHMARKS:
        for sign in (1, -1):
            moved = [c for c in changes if sign * c > comparison.threshold]
            if len(moved) >= COMMON_MODE_SHARE * len(changes):
                median = float(pd.Series(moved).median())
                out.append(
                    ComparisonWarning(
                        "common-mode",
                        f"{len(moved)} of {len(changes)} benchmarks moved the same way "
                        f"(median {median:+.1f}%): a shift this broad usually comes from "
                        "the machine (another runner type, load, frequency scaling), not "
                        "from the code.",
                    )
                )
    assumed = [r for r in rows if math.isfinite(r.assumed_noise_pct)]
    if assumed:
        pct = max(r.assumed_noise_pct for r in assumed)
        out.append(
            ComparisonWarning(
                "single-run",
                f"{len(assumed)} benchmark{'s were' if len(assumed) != 1 else ' was'} "
                f"judged on one run a side: process-to-process noise cannot be measured "
                f"from one run, so a change must also exceed an assumed ±{pct:.0f}% to be "
                "flagged. Merge several runs per side (repeat the files) or give a "
                "calibration to measure it.",
            )
        )
    return out
