"""Hostile benchmark names render inert in every section of both styles; the size cap."""

from __future__ import annotations

import pytest

from rlpace.bench.comparison import BenchmarkChange, Comparison, Verdict
from rlpace.bench.markdown_safe import COMMENT_LIMIT, cap, code_span, neutralize
from rlpace.bench.render import render_report

Z = "\u200b"  # the zero-width space that breaks GitHub's autolinks

# (what a pull request names a benchmark, exactly what the comment shows)
HOSTILE = [
    ("# Heading", "\\# Heading"),
    ("- item", "\\- item"),
    ("+ item", "\\+ item"),
    ("1. item", "1\\. item"),
    ("12) item", "12\\) item"),
    ("= setext", "\\= setext"),
    ("> quote", "&gt; quote"),
    ("    indented code", "indented code"),
    ("#123", f"\\#{Z}123"),
    ("see #123", f"see #{Z}123"),
    ("GH-45", f"GH{Z}-45"),
    ("owner/repo#9", f"owner/repo#{Z}9"),
    ("https://evil.example/x", f"https:{Z}//evil.example/x"),
    ("WWW.evil.example", f"WWW{Z}.evil.example"),
    ("@octocat", f"@{Z}octocat"),
    ("@org/team", f"@{Z}org/team"),
    ("a@b.example", f"a@{Z}b.example"),
    ("[link](https://e.vil)", f"\\[link](https:{Z}//e.vil)"),
    ("![img](https://e.vil/p.png)", f"!\\[img](https:{Z}//e.vil/p.png)"),
    ("**bold** _em_", "\\*\\*bold\\*\\* \\_em\\_"),
    ("~~strike~~", "\\~\\~strike\\~\\~"),
    ("`code`", "\\`code\\`"),
    ("$\\color{red}x$", "\\$\\\\color{red}x\\$"),
    ("a\rb|c\nd", "a b\\|c d"),
    ("a\u2028b\u0085c\td", "a b c d"),
    ("\u202etxt.exe", "txt.exe"),
    ("in\u200bvisible\u2066x\u2069", "invisiblex"),
    ("<img src=x onerror=alert(1)>", "&lt;img src=x onerror=alert(1)&gt;"),
    ("<!-- rlpace-bench-set: cpu -->", "&lt;!-- rlpace-bench-set: cpu --&gt;"),
    ("&amp;", "&amp;amp;"),
    ("test_sum_range[rlpace-100]", "test_sum_range\\[rlpace-100]"),  # stays readable
]


@pytest.mark.parametrize(("raw", "shown"), HOSTILE)
def test_neutralize_gives_exactly_the_inert_text(raw, shown):
    assert neutralize(raw) == shown


def _comparison(name: str) -> Comparison:
    def row(key, verdict, change, **kw):
        return BenchmarkChange(
            f"t::{key}", name, verdict, head_median=1e-3, base_median=1e-3, head_mean=1e-3,
            base_mean=1e-3, head_ops=1e3, base_ops=1e3, change_pct=change,
            median_change_pct=change, ci_low_pct=change - 1, ci_high_pct=change + 1,
            q_value=0.001, noise_pct=1.0, method="mann-whitney", **kw,
        )  # fmt: skip

    return Comparison(
        rows=(
            row("worse", Verdict.WORSENED, -30.0, confirmed=True),
            row("better", Verdict.IMPROVED, 30.0, confirmed=True),
            row("noise", Verdict.UNCHANGED, -20.0, confirmed=False, note="@team #5"),
            BenchmarkChange("t::failed", name, Verdict.FAILED, note="GH-1 `x`"),
        ),
        confirm_repeats=2,
    )


@pytest.mark.parametrize(("raw", "shown"), HOSTILE)
def test_hostile_names_render_inert_in_every_section_of_both_styles(raw, shown):
    comparison = _comparison(raw)
    text = render_report({"cpu": comparison}, title=raw)
    sections = {
        "Regressions": text.split("#### Regressions")[1].split("#### Improvements")[0],
        "Improvements": text.split("#### Improvements")[1].split("#### Not confirmed")[0],
        "Not confirmed": text.split("#### Not confirmed")[1].split("#### Failed")[0],
        "Failed": text.split("#### Failed")[1].split("<details>")[0],
        "All": text.split("<details>")[1],
    }
    assert f"| {shown} | -30.0% (1.43× slower) |" in sections["Regressions"]
    assert f"| {shown} | +30.0% (1.30× faster) |" in sections["Improvements"]
    assert f"- {shown}: @{Z}team #{Z}5" in sections["Not confirmed"].splitlines()
    assert f"- {shown} (GH{Z}-1 \\`x\\`)" in sections["Failed"].splitlines()
    assert sum(line.startswith(f"| {shown} | ") for line in sections["All"].splitlines()) == 4
    assert f"## {shown}" in text.splitlines()  # the title too
    seed = render_report({"cpu": comparison}, style="seed", title=raw)
    rows = [line for line in seed.splitlines() if line.startswith(f"| {shown} ")]
    assert len(rows) == 4 and all(line.count(" | ") == 5 for line in rows)
    assert seed.splitlines()[0].endswith(f"\t {shown}")
    if raw != shown:
        for line in (text + "\n" + seed).splitlines():
            assert raw not in line or raw in shown, line


def test_code_span_keeps_a_file_name_on_one_line():
    assert code_span("cal`ib\n\n# x.json\u202e") == "`calib # x.json`"


@pytest.mark.parametrize("style", ["rlpace", "seed"])
def test_both_styles_keep_within_githubs_comment_limit(style):
    rows = tuple(
        BenchmarkChange(f"t::b{i}", f"bench_{i:05d}_" + "x" * 60, Verdict.UNCHANGED,
                        head_mean=1e-3, head_median=1e-3, head_ops=1e3, base_ops=1e3,
                        base_mean=1e-3, change_pct=0.5)
        for i in range(3000)
    )  # fmt: skip
    text = render_report({"cpu": Comparison(rows=rows)}, style=style, title="Huge")
    assert 60_000 < len(text) <= COMMENT_LIMIT
    assert "more rows not shown: the comment would exceed GitHub's size limit" in text
    assert text.rstrip().endswith("</details>")


def test_cap_is_the_last_resort():
    assert cap("a" * COMMENT_LIMIT) == "a" * COMMENT_LIMIT
    cut = cap("a" * (COMMENT_LIMIT + 1))
    assert len(cut) == COMMENT_LIMIT and cut.endswith(
        "_(report cut at GitHub's comment size limit)_"
    )
    assert cap("abcdef", limit=3) == "\n\n_"[:3]


def test_the_calibration_sentence_cannot_break_out_of_its_paragraph():
    from rlpace.bench.render_notes import calibration_text

    note = {"source": "cal`\n\n# x.json", "pool": 3, "created": "\n\n# [a](https://e.vil)"}
    text = calibration_text(note)
    assert text.startswith(
        f"Calibrated noise: `cal # x.json` (3 A/A runs, \\# \\[a](https:{Z}//e.vil))."
    )
    assert "\n" not in text


def test_a_free_text_unit_from_a_file_renders_inert_in_both_styles():
    """An asv ``track_*`` unit comes from the result file (or an artifact's JSON): it
    goes through the neutraliser like a name."""
    from rlpace.bench.comparison import BenchmarkChange, Comparison, Verdict
    from rlpace.bench.render import render_report

    hostile = "[click](https://evil.example) @maintainer"
    row = BenchmarkChange(
        "t::track_x", "track_x", Verdict.UNCHANGED, head_mean=7.0, head_median=7.0,
        head_max=7.0, base_mean=7.0, base_median=7.0, base_max=7.0, change_pct=0.0,
        median_change_pct=0.0, value_unit=hostile,
    )  # fmt: skip
    for style in ("rlpace", "seed"):
        text = render_report(Comparison(rows=(row,)), style=style)
        assert "[click](https://evil" not in text, style
        assert "@maintainer" not in text, style
