"""The names ``rlpace-bench``'s options accept, in one import-light place.

The command-line parsers list these in their help and choices, so every
``rlpace-bench`` call, ``--help`` included, reads them without importing pandas,
scipy or jinja2; the modules that do the work (:mod:`rlpace.bench.render`,
:mod:`rlpace.bench.result_tables`) key their tables by the same names, and a test
holds the two in step.

Example:
    >>> STYLES
    ('rlpace', 'seed')
    >>> "verdict" in COMPARE_COLUMN_NAMES and "status" in SHOW_COLUMN_NAMES
    True
"""

from __future__ import annotations

__all__ = [
    "COMPARE_COLUMN_NAMES",
    "COMPARE_SORT_KEYS",
    "SHOW_COLUMN_NAMES",
    "STYLES",
]

STYLES = ("rlpace", "seed")
"""The report styles (``--style``): ``rlpace`` (the default) and ``seed``, the
comment of the pytest-benchmark bot RL projects used before."""

COMPARE_COLUMN_NAMES = (
    "name",
    "fullname",
    "group",
    "verdict",
    "change",
    "interval",
    "noise",
    "head",
    "base",
    "head_mean",
    "base_mean",
    "ops",
    "unit",
    "note",
)
"""The columns of a comparison table (``compare --columns``)."""

COMPARE_SORT_KEYS = ("name", "fullname", "group", "verdict", "change", "ratio", "head", "base")
"""The row orders of a comparison (``compare --sort``; a leading ``-`` reverses)."""

SHOW_COLUMN_NAMES = (
    "name",
    "fullname",
    "group",
    "median",
    "mean",
    "min",
    "max",
    "ops",
    "rounds",
    "unit",
    "status",
)
"""The columns of a results table (``show --columns``)."""
