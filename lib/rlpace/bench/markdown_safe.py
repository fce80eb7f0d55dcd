"""Text from benchmarks made inert in a GitHub comment, and the comment's size cap.

Everything a pull request controls (benchmark names, notes, units, the calibration's
file name) reaches the comment through :func:`neutralize`, the one function both
report styles use for every table cell and list item. It returns one line that
GitHub renders as the literal text and that can do nothing else:

- **no block structure**: control characters, CR/LF, tabs and Unicode line breaks
  become a space, runs of white space collapse and the ends are trimmed (no code
  block by indentation, no new row, no new paragraph); a leading ``#``, ``-``, ``+``,
  ``=`` or ``1.``/``1)`` is escaped (no heading, list or setext line in a list item);
- **no inline markup**: ``\\``, `````, ``*``, ``[``, ``|``, ``~``, ``$`` (LaTeX) and
  ``_`` at word edges are backslash-escaped, so there is no link, image, emphasis,
  code span, math or cell break; ``<``, ``>`` and ``&`` become entities (no HTML,
  no ``<url>`` autolink, no hidden marker);
- **no GitHub references**: GitHub links mentions, issue references and bare URLs
  *after* the markdown is rendered, where backslashes no longer count, so a
  zero-width space (U+200B) is put inside each: ``@\u200buser``, ``#\u200b123``,
  ``GH\u200b-45``, ``owner/repo#\u200b9``, ``https:\u200b//…``, ``www\u200b.…``;
- **no hidden text**: invisible format characters (bidi overrides such as U+202E,
  zero-width characters, the BOM, soft hyphens) are removed.

What a reader sees on GitHub is the original text, less the invisible characters.

:func:`cap` keeps any comment within :data:`COMMENT_LIMIT` (65,536 characters,
GitHub's limit for an issue comment) as a last resort after the styles' own
shrinking (:func:`largest_fitting` finds how many rows still fit), with a note
saying it was cut.

Example:
    >>> print(neutralize("# see #12 @octocat [x](https://e.vil)"))
    \\# see #\u200b12 @\u200boctocat \\[x](https:\u200b//e.vil)
    >>> len(cap("x" * 70_000))
    65536
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from typing import Any

__all__ = ["COMMENT_LIMIT", "CUT_NOTE", "cap", "code_span", "largest_fitting", "neutralize"]

#: GitHub refuses issue and pull-request comments longer than this many characters.
COMMENT_LIMIT = 65_536
#: The line :func:`cap` ends a cut comment with.
CUT_NOTE = "\n\n_(report cut at GitHub's comment size limit)_"

_ZWSP = "\u200b"
# Markdown punctuation that opens inline markup anywhere, or splits a table cell.
# Underscores only matter at word edges (GFM ignores intraword ``_``), so
# ``test_sum_range`` stays readable in plain-text notifications.
_INLINE = re.compile(r"([\\`*\[|~$])|(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])")
# What opens a block when it starts a list item's text.
_BLOCK_START = re.compile(r"^(?:([#+=-])|(\d{1,9})([.)]))")
# GitHub's post-render autolinks, each broken by a zero-width space.
_REFERENCES = (
    (re.compile(r"@"), "@" + _ZWSP),  # @user, @org/team, e-mail addresses
    (re.compile(r"#(?=\w)"), "#" + _ZWSP),  # #123, owner/repo#9
    (re.compile(r"\b(GH)(?=-\d)", re.IGNORECASE), r"\1" + _ZWSP),  # GH-45
    (re.compile(r"://"), ":" + _ZWSP + "//"),  # https://…, ftp://…
    (re.compile(r"\b(www)(?=\.)", re.IGNORECASE), r"\1" + _ZWSP),  # www.…
)


def _plain_line(text: Any) -> str:
    """``text`` as one trimmed line of visible characters: format characters dropped,
    control characters and line breaks turned into spaces, white space collapsed."""
    out = []
    for ch in str(text):
        category = unicodedata.category(ch)
        if category == "Cf":  # bidi controls, zero-width characters, BOM, soft hyphen
            continue
        out.append(" " if category in ("Cc", "Zl", "Zp") else ch)
    return " ".join("".join(out).split())


def neutralize(text: Any) -> str:
    """``text`` as one line of inert markdown: rendered by GitHub as the text itself.

    Safe in a table cell, a list item, a heading or a paragraph: it cannot start a
    block, open inline markup, inject HTML, split a table row, mention anyone, link
    an issue or a URL, or hide text with bidi controls. See the module docstring
    for the exact rules.

    Example:
        >>> print(neutralize("test_a[b|c]<x>@user `t` *_z_*"))
        test_a\\[b\\|c]&lt;x&gt;@\u200buser \\`t\\` \\*\\_z\\_\\*
        >>> print(neutralize("1. ![img](u) $x$ GH-45 www.x.io a\\r\\nb \u202egnp.exe"))
        1\\. !\\[img](u) \\$x\\$ GH\u200b-45 www\u200b.x.io a b gnp.exe
        >>> neutralize("    # not code")
        '\\\\# not code'
    """
    s = _plain_line(text)
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    s = _INLINE.sub(lambda m: "\\" + m.group(0), s)
    s = _BLOCK_START.sub(
        lambda m: "\\" + m.group(1) if m.group(1) else m.group(2) + "\\" + m.group(3), s
    )
    for pattern, replacement in _REFERENCES:
        s = pattern.sub(replacement, s)
    return s


def code_span(text: Any) -> str:
    """``text`` as an inline code span: one line, no backticks, nothing invisible.

    Inside a code span markdown is off and GitHub links nothing, so only what could
    end the span (a backtick, a blank line) or hide text has to go.

    Example:
        >>> print(code_span("reports/`cal`\\n\\n# x.json"))
        `reports/cal # x.json`
    """
    return "`" + _plain_line(str(text).replace("`", "")) + "`"


def cap(text: str, limit: int = COMMENT_LIMIT) -> str:
    """``text`` unchanged when it has at most ``limit`` characters, else cut with a note.

    The last resort of both report styles after their own shrinking (fewer rows),
    so that no rendered comment is ever longer than GitHub accepts.

    Example:
        >>> cap("short")
        'short'
        >>> cut = cap("y" * 100, limit=60)
        >>> len(cut), cut.endswith("size limit)_")
        (60, True)
    """
    if len(text) <= limit:
        return text
    return text[: max(0, limit - len(CUT_NOTE))] + CUT_NOTE[: max(limit, 0)]


def largest_fitting(high: int, fits: Callable[[int], bool]) -> int:
    """The largest ``n`` in ``[0, high]`` with ``fits(n)`` (binary search; 0 if none): how
    many rows of a table a comment can show and stay within its limit.

    ``fits`` must be monotone: true up to some ``n``, false beyond.

    Example:
        >>> largest_fitting(100, lambda n: n * n <= 50)
        7
    """
    low = 0
    while low < high:
        mid = (low + high + 1) // 2
        if fits(mid):
            low = mid
        else:
            high = mid - 1
    return low
