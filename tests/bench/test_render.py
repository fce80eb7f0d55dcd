"""Both report styles: golden files, the seed spec cell by cell, escaping, the size cap."""

import json
import math
import re

import pytest

from rlpace.bench.compare import compare_runs
from rlpace.bench.comparison import BenchmarkChange, Comparison, Verdict
from rlpace.bench.errors import BenchInputError
from rlpace.bench.render import (
    GITHUB_COMMENT_LIMIT,
    REPORT_MARKER,
    escape_markdown,
    render_report,
)
from rlpace.bench.render_seed import seed_change_cell
from rlpace.bench.results import load_results, results_from_records
from rlpace.bench.units import format_ops, format_time

NAN = float("nan")


def golden(fixtures_dir, name):
    return (fixtures_dir / "golden" / name).read_text(encoding="utf-8").rstrip("\n")


def cells(line):
    """The cells of a markdown table row (a ``\\|`` inside a cell does not split it)."""
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def handmade_comparison():
    def row(name, verdict, *, head_max=NAN, head_mean=NAN, base_ops=NAN, change=NAN):
        head_ops = 1 / head_mean if math.isfinite(head_mean) else NAN
        return BenchmarkChange(
            fullname=f"t.py::{name}",
            name=name,
            verdict=verdict,
            head_max=head_max,
            head_mean=head_mean,
            head_ops=head_ops,
            base_ops=base_ops,
            base_mean=1 / base_ops if math.isfinite(base_ops) else NAN,
            change_pct=change,
        )

    u = Verdict.UNCHANGED
    rows = (
        row(
            "big_gain", Verdict.IMPROVED, head_max=2.0, head_mean=1.5, base_ops=0.5, change=100 / 3
        ),
        row(
            "exactly_threshold",
            u,
            head_max=99.9999e-6,
            head_mean=50e-6,
            base_ops=20000 / 1.05,
            change=5.0,
        ),
        row("just_over", u, head_max=1e-4, head_mean=0.099, base_ops=1e6, change=5.01),
        row("small_loss", u, head_max=0.1, head_mean=0.05, base_ops=20.4, change=-1.96),
        row("tiny_up", u, head_max=1e-3, head_mean=1e-3, base_ops=1000.0, change=0.004),
        row("tiny_down", u, head_max=1e-3, head_mean=1e-3, base_ops=1000.0, change=-0.004),
        row("big_loss", Verdict.WORSENED, head_max=0.2, head_mean=0.1, base_ops=20.0, change=-50.0),
        row("fresh", Verdict.NEW, head_max=1e-3, head_mean=1e-3),
        row("dropped", Verdict.REMOVED, base_ops=1000.0),
    )
    return Comparison(rows=rows, threshold=5.0)


def test_seed_matches_the_hand_checked_golden_file(fixtures_dir):
    text = render_report(handmade_comparison(), style="seed", title="Hand-checked")
    expected = golden(fixtures_dir, "seed_handmade.md")
    got_lines, want_lines = text.splitlines(), expected.splitlines()
    assert len(got_lines) == len(want_lines)
    for got, want in zip(got_lines, want_lines):
        if want.startswith("| -"):  # the delimiter row: its width is only alignment
            assert all(set(c) == {"-"} for c in cells(got))
            assert len(cells(got)) == len(cells(want))
        elif want.startswith("|"):
            assert cells(got) == cells(want)
        else:
            assert got == want


@pytest.mark.parametrize(
    ("change", "cell"),
    [
        (12.345, r"$\textbf{\color{#35bf28}+12.35\\%}$"),
        (5.0, r"$\color{#35bf28}+5.00\\%$"),
        (-5.0, r"$\color{#d91a1a}-5.00\\%$"),
        (-5.001, r"$\textbf{\color{#d91a1a}-5.00\\%}$"),
        (0.009, r"$+0.01\\%$"),
        (0.01, r"$\color{#35bf28}+0.01\\%$"),
        (-0.0, r"$0.00\\%$"),
        (0.0, r"$0.00\\%$"),
        (-250.0, r"$\textbf{\color{#d91a1a}-250.00\\%}$"),
        (NAN, "-"),
    ],
)
def test_seed_change_cell(change, cell):
    assert seed_change_cell(change, 5.0) == cell


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (99.99994e-6, "99.9999 μs"),
        (1e-4, "0.1000 ms"),
        (0.0999, "99.9000 ms"),
        (0.1, "0.1000 s"),
        (12.0, "12.0000 s"),
        (3e-9, "0.0030 μs"),
    ],
)
def test_time_units(seconds, text):
    assert format_time(seconds) == text


@pytest.mark.parametrize(
    ("ops", "text"),
    [
        (999.99, "999.9900 Ops/s"),
        (1e3, "1.0000 KOps/s"),
        (999_999.0, "999.9990 KOps/s"),
        (1e6, "1.0000 MOps/s"),
    ],
)
def test_ops_units(ops, text):
    assert format_ops(ops) == text


def test_seed_fixture_golden_and_spec_recomputed_from_raw_json(fixtures_dir, pb_head, pb_base):
    comparison = compare_runs(load_results(pb_head), load_results(pb_base))
    text = render_report(comparison, style="seed", title="Fixture run")
    assert text == golden(fixtures_dir, "seed_pb5.md")
    # recompute the spec from the raw files, independently of the renderer
    head = {b["fullname"]: b for b in json.loads(pb_head.read_text())["benchmarks"]}
    base = {b["fullname"]: b for b in json.loads(pb_base.read_text())["benchmarks"]}
    changes = {
        head[k]["name"]: (head[k]["stats"]["ops"] - base[k]["stats"]["ops"])
        / base[k]["stats"]["ops"]
        * 100
        for k in head
        if k in base
    }
    improved = sum(c > 5 for c in changes.values())
    worsened = sum(c < -5 for c in changes.values())
    lines = text.splitlines()
    status = "Warning" if worsened else "OK"
    assert lines[0].startswith("## $\\color{#D29922}" if worsened else "## $\\color{#35bf28}")
    assert lines[0].endswith(f"\\normalsize {status}}}$ \t Fixture run")
    assert lines[1] == (
        f"### Total Benchmarks: {len(comparison.rows)}. Improved: $\\large\\color{{#35bf28}}{improved}$. "
        f"Worsened: $\\large\\color{{#d91a1a}}{worsened}$."
    )
    table = [cells(line) for line in lines if line.startswith("| ")]
    assert table[0] == ["Name", "Max", "Mean", "Ops", "Ops on Repo `HEAD`", "Change"]

    def shown(name):  # names render as written, through the one neutraliser
        from rlpace.bench.markdown_safe import neutralize

        return neutralize(name).replace("\\|", "|")  # as cells() reads it

    body = {row[0]: row for row in table[2:]}
    assert list(body) == [shown(b["name"]) for b in head.values()] + ["test_removed_in_head"]
    for name, change in changes.items():
        sign = "+" if change > 0 else ""
        number = f"{sign}{change:.2f}\\\\%"
        if abs(change) >= 0.01:
            number = f"\\color{{{'#35bf28' if change > 0 else '#d91a1a'}}}{number}"
        if abs(change) > 5:
            number = f"\\textbf{{{number}}}"
        assert body[shown(name)][5] == f"${number}$", name
    entry = head["fixture_benchmarks.py::test_slower_in_head"]["stats"]
    assert body["test_slower_in_head"][1] == format_time(entry["max"]).replace(" ", "")
    assert body["test_slower_in_head"][3] == format_ops(entry["ops"])
    assert body["test_added_in_head"][4:] == ["new", "new"]
    assert body["test_removed_in_head"][3:] == [
        "removed",
        body["test_removed_in_head"][4],
        "removed",
    ]


def test_seed_without_base_has_no_status_summary_or_change(fixtures_dir, pb_head):
    text = render_report(compare_runs(load_results(pb_head)), style="seed", title="Only head")
    assert text == golden(fixtures_dir, "seed_pb5_no_base.md")
    assert text.splitlines()[0] == "##  \t Only head"
    assert "Total Benchmarks" not in text and "Change" not in text
    assert "| Name" in text and "| Ops " in text


def test_seed_ok_status_when_nothing_worsened():
    rows = (
        BenchmarkChange(
            "a", "a", Verdict.UNCHANGED, head_mean=1.0, head_ops=1.0, base_ops=1.0, change_pct=0.0
        ),
    )
    line = render_report(Comparison(rows=rows), style="seed", title="T").splitlines()[0]
    assert line == "## $\\color{#35bf28}\\textsf{\\Large ✔\\kern{0.2cm}\\normalsize OK}$ \t T"
    assert "&#x" not in line


def test_rlpace_style_golden(fixtures_dir, pb_head, pb_base):
    comparison = compare_runs(load_results(pb_head), load_results(pb_base))
    text = render_report({"cpu": comparison}, title="Fixture run")
    assert text == golden(fixtures_dir, "rlpace_pb5.md")


def test_rlpace_style_reads_verdict_first_and_has_no_latex(pb_head, pb_base):
    comparison = compare_runs(load_results(pb_head), load_results(pb_base))
    text = render_report({"cpu": comparison, "gpu": comparison}, title="PR")
    lines = text.splitlines()
    assert lines[0] == REPORT_MARKER
    assert lines[1] == "## PR"
    assert lines[3].startswith("❌ **2 regressions and 2 removed**")  # one per set, summed
    assert "\\color" not in text and "$" not in text
    assert text.index("### CPU") < text.index("### GPU")
    cpu = text[text.index("### CPU") : text.index("### GPU")]
    assert cpu.index("#### Regressions") < cpu.index("#### Improvements") < cpu.index("<details>")
    regression = next(line for line in cpu.splitlines() if line.startswith("| test_slower_in_head"))
    change, interval, q, noise = cells(regression)[1:5]
    row = next(r for r in comparison.rows if r.name == "test_slower_in_head")
    assert (
        change == f"{row.median_change_pct:+.1f}% ({row.head_median / row.base_median:.2f}× slower)"
    )
    assert interval == f"[{row.ci_low_pct:+.1f}%, {row.ci_high_pct:+.1f}%]"
    assert q == "<0.001"
    assert noise.startswith("±")
    assert "| noise |" in cpu  # unchanged rows are labelled as noise


def test_rlpace_style_without_base_and_with_failures(asv_head, asv_base):
    no_base = render_report(compare_runs(load_results(asv_head)))
    assert "No base run to compare against" in no_base
    with_failures = render_report(compare_runs(load_results(asv_head), load_results(asv_base)))
    assert "#### Failed" in with_failures
    assert "time\\_raises" not in with_failures  # intraword underscores stay readable
    assert "- bench_work.TimeBroken.time_raises (failed in head)" in with_failures


def test_hostile_names_cannot_break_tables_or_ping(pb_head):
    names = [
        "a|b",
        "<img src=x>",
        "`code`",
        "@octocat",
        "[x](http://evil)",
        "*bold*",
        "line\nbreak",
    ]
    head = results_from_records(
        [{"fullname": n, "name": n, "data": [1.0, 1.1, 0.9]} for n in names]
    )
    text = render_report(compare_runs(head), title="@team <b>|")
    rows = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line]
    header = rows[0]
    for line in rows[1:]:
        assert len(re.split(r"(?<!\\)\|", line)) == len(re.split(r"(?<!\\)\|", header))
    assert re.search(r"@(?!\u200b)\w", text) is None
    assert "<img" not in text and "<b>" not in text
    assert "](http" not in text.replace("\\[x](http", "")
    assert escape_markdown("a\nb") == "a b"


def test_report_never_exceeds_the_comment_limit_and_keeps_regressions():
    n = 3000
    rows = [
        BenchmarkChange(
            f"bench_{i:05d}_" + "x" * 40,
            f"bench_{i:05d}_" + "x" * 40,
            Verdict.WORSENED if i < 5 else Verdict.UNCHANGED,
            head_mean=1e-3,
            head_median=1e-3,
            head_ops=1e3,
            base_mean=1e-3,
            base_median=1e-3,
            base_ops=1e3,
            change_pct=-10.0 if i < 5 else 0.0,
            median_change_pct=-10.0 if i < 5 else 0.0,
            ci_low_pct=-11.0,
            ci_high_pct=-9.0,
            q_value=0.001,
            noise_pct=1.0,
            method="mann-whitney",
        )
        for i in range(n)
    ]
    text = render_report({"cpu": Comparison(rows=tuple(rows))}, title="Huge")
    assert len(text) <= GITHUB_COMMENT_LIMIT
    assert text.startswith(REPORT_MARKER)
    assert "❌ **5 regressions**" in text
    for i in range(5):
        assert f"bench_{i:05d}_" in text.split("<details>")[0]
    assert "more rows not shown" in text
    assert text.rstrip().endswith("</details>")
    small = render_report({"cpu": Comparison(rows=tuple(rows))}, max_chars=5_000)
    assert len(small) <= 5_000
    assert "❌ **5 regressions**" in small


def test_bad_style_or_input():
    with pytest.raises(BenchInputError, match="style: expected one of rlpace, seed, got 'fancy'"):
        render_report(Comparison(rows=()), style="fancy")
    with pytest.raises(
        BenchInputError, match=r"expected Comparison values per set, got \{'cpu': 'str'\}"
    ):
        render_report({"cpu": "nope"})
    with pytest.raises(BenchInputError, match="expected a Comparison"):
        render_report([])


def test_rlpace_style_warns_when_head_and_base_ran_on_different_machines():
    base = results_from_records(
        [{"fullname": "a", "data": [1.0, 1.1, 0.9]}], machine_info={"node": "ci-1"}
    )
    head = results_from_records(
        [{"fullname": "a", "data": [1.0, 1.1, 0.9]}], machine_info={"node": "laptop"}
    )
    comparison = compare_runs(head, base)
    assert comparison.environment_differences == {"node": ("laptop", "ci-1")}
    text = render_report(comparison)
    assert "⚠️ Head and base ran in different environments (node: head laptop, base ci-1)" in text
    same = compare_runs(head, head)
    assert "different environments" not in render_report(same)


def test_seed_names_cannot_split_rows_inject_html_or_ping():
    names = ["a|b", "<img src=x>", "@octocat"]
    head = results_from_records(
        [{"fullname": n, "name": n, "data": [1.0, 1.1, 0.9]} for n in names]
    )
    text = render_report(compare_runs(head, head), style="seed")
    body = [cells(line) for line in text.splitlines() if line.startswith("| ")][2:]
    assert [row[0] for row in body] == ["a|b", "&lt;img src=x&gt;", "@\u200boctocat"]
    assert all(len(row) == 6 for row in body)


def test_flagged_rows_state_their_minimal_detectable_change():
    rows = (
        BenchmarkChange("t::slow", "slow", Verdict.WORSENED, median_change_pct=-30.0,
                        ci_low_pct=-32.0, ci_high_pct=-28.0, noise_pct=9.0, mdc_pct=12.34),
        BenchmarkChange("t::fast", "fast", Verdict.IMPROVED, median_change_pct=30.0,
                        ci_low_pct=28.0, ci_high_pct=32.0, noise_pct=2.0, mdc_pct=1.5),
    )  # fmt: skip
    text = render_report(Comparison(rows=rows), title="T")
    regressions = text.split("#### Regressions")[1].split("#### Improvements")[0]
    assert "| Detectable |" in regressions
    assert "| ±9.0% | ±12.3% |" in regressions  # noise, then detectable
    # never below the threshold: a smaller change is not flagged, however quiet
    improvements = text.split("#### Improvements")[1]
    assert "| ±2.0% | ±5.0% |" in improvements


def test_huge_detectable_changes_read_as_factors():
    from rlpace.bench.render import _detectable

    def row(mdc):
        return BenchmarkChange("t::a", "a", Verdict.UNCHANGED, mdc_pct=mdc)

    assert _detectable(row(7.34)) == "±7.3%"
    assert _detectable(row(2.0), threshold=5.0) == "±5.0%"  # never below the threshold
    assert _detectable(row(220.0)) == "×3.2"
    assert _detectable(row(1e6)) == "≥×1000"
    assert _detectable(row(float("nan"))) == "-"


def test_the_calibration_line_says_how_its_false_alarms_were_judged_and_warns_on_a_mismatch():
    from rlpace.bench.render_notes import calibration_text, calibration_warning

    note = {"source": "cpu.json", "pool": 32, "held_out_alarms": 0, "held_out_runs": 64,
            "false_alarm_bound": 0.05, "confirm": 2, "held_out_alarms_first": 6,
            "mismatch": {}, "run_confirm": 2}  # fmt: skip
    text = calibration_text(note)
    assert "0 of 64 with a confirmation of 2 runs a side" in text and "6 without it" in text
    assert calibration_warning(note) == ""
    # judged without a confirmation, its figure does not describe a run with one, and the
    # other way round; a machine mismatch and this one are both said
    off = calibration_warning({**note, "run_confirm": 0})
    assert "measured with a confirmation of 2 runs a side, this run used no confirmation" in off
    assert "`rlpace-bench aa --confirm 0`" in off
    old = {**note, "confirm": 0, "held_out_alarms_first": None}
    assert "with a confirmation" not in calibration_text(old)
    both = calibration_warning({**old, "mismatch": {"cpu_count": [2, 4]}})
    assert both.count("⚠️") == 2 and "this run used a confirmation of 2 runs a side" in both


def test_sets_whose_headings_collide_are_all_rendered_in_both_styles():
    base = results_from_records([{"fullname": "t::a", "data": [1.0, 1.01, 0.99] * 5}])
    head = results_from_records([{"fullname": "t::a", "data": [2.0, 2.02, 1.98] * 5}])
    same = compare_runs(head, base)
    sets = {"cpu": compare_runs(head), "CPU": same}
    rlpace = render_report(sets)
    assert "### cpu" in rlpace and "### CPU" in rlpace and "1 regression" in rlpace
    seed = render_report(sets, style="seed")
    assert "Benchmark results (cpu)" in seed and "Benchmark results (CPU)" in seed
    # without a collision the headings are the sets' titles, as before
    assert "### CPU" in render_report({"cpu": same, "gpu": same})
