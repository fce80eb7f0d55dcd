"""What a comparison could have seen: the comment's sentence, from the rows' own figures."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest

from rlpace.bench.comparison import BenchmarkChange, Comparison, Verdict
from rlpace.bench.comparison_record import record_from_dict
from rlpace.bench.counts.records import CaseCount, CountRun
from rlpace.bench.counts.tier import CountTier, apply_count_tier
from rlpace.bench.counts.verdict import compare_counts, gate_from_aa
from rlpace.bench.errors import BenchInputError
from rlpace.bench.render import render_report
from rlpace.bench.render_notes import sensitivity_text
from rlpace.bench.sensitivity import detectable_pct, sensitivity


def _row(name, mdc=math.nan, change=0.0, **kw):
    return BenchmarkChange(f"t.py::{name}", name, Verdict.UNCHANGED, median_change_pct=change,
                           mdc_pct=mdc, **kw)  # fmt: skip


def _counted():
    """Three counted cases (one with an A/A spread of 0.5 %), timed once a side."""
    aa = [
        CountRun({}, (CaseCount("a", "counted", instructions=1e6), CaseCount("b", "counted", instructions=v)))
        for v in (1e6, 1.005e6)
    ]  # fmt: skip
    gates = gate_from_aa(aa)
    base = CountRun({}, (CaseCount("a", "counted", instructions=1e6),
                         CaseCount("b", "counted", instructions=1e6),
                         CaseCount("c", "counted", instructions=1e6)))  # fmt: skip
    head = CountRun({}, (CaseCount("a", "counted", instructions=1.04e6),
                         CaseCount("b", "counted", instructions=1e6),
                         CaseCount("c", "counted", instructions=1e6)))  # fmt: skip
    timing = Comparison(
        rows=(_row("a", mdc=35.0, change=-3.0), _row("b", mdc=40.0), _row("c", mdc=25.0),
              _row("w", mdc=7.5, change=1.0), _row("x", mdc=60.0, change=-4.0),
              _row("twin", mdc=4.0, impl="torchrl"),
              BenchmarkChange("t.py::new", "new", Verdict.NEW))
    )  # fmt: skip
    tier = CountTier(changes=tuple(compare_counts(head, base, gates=gates)), timed_once=True)
    return apply_count_tier(timing, tier)


def test_counted_cases_are_judged_by_their_gate_and_spread_not_their_one_timing():
    comparison = _counted()
    rows = {r.name: r for r in comparison.rows}
    # a: no A/A reading, the 1 % default gate; b: 4 x 0.5 % = 2 % gate, plus its spread
    assert rows["a"].count_detect_pct == pytest.approx(1.0)
    assert rows["b"].count_gate_pct == pytest.approx(2.0)
    assert rows["b"].count_detect_pct == pytest.approx(2.5)
    s = sensitivity(comparison)
    assert (s.judged, s.by_counts, s.controls) == (5, 3, 1)
    assert dict(s.counts) == pytest.approx({"a": 1.0, "b": 2.5, "c": 1.0})
    assert {name: pct for name, pct, _ in s.timing} == {"w": 7.5, "x": 60.0}
    assert [s.catches(p) for p in (2.0, 5.0, 10.0)] == [2, 3, 4]
    assert s.catches_counted(10.0) == 3


def test_a_duet_row_catches_what_clears_its_own_threshold():
    """A row judged pair by pair meets the 2 % duet threshold: with a detectable change
    of 3.5 % it catches a 5 % slow-down, which the same figure on a row of runs one
    after another (5 % threshold) does not; an old record without the duet threshold
    reads as one threshold for all."""
    duet = _row("duet", mdc=3.5, method="paired")
    apart = _row("apart", mdc=3.5, method="mann-whitney")
    comparison = Comparison(rows=(duet, apart), threshold=5.0, paired_threshold=2.0)
    s = sensitivity(comparison)
    assert sorted(s.timing) == [("apart", 5.0, 5.0), ("duet", 3.5, 2.0)]
    assert [s.catches(p) for p in (2.0, 3.5, 5.0, 5.1)] == [0, 1, 1, 2]
    data = comparison.to_dict()
    data["pipeline"] = {"set": "cpu"}
    assert record_from_dict(data).comparison.paired_threshold == 2.0
    del data["paired_threshold"]
    old = record_from_dict(data).comparison
    assert old.paired_threshold is None and sensitivity(old).catches(5.0) == 0
    data["paired_threshold"] = -2.0
    with pytest.raises(BenchInputError, match="paired_threshold"):
        record_from_dict(data)
    text = render_report(comparison)
    assert "±5.0% (±2.0% for those judged pair by pair)" not in text  # no duets ran
    text = render_report(replace(comparison, paired=4))
    assert "flagged only beyond ±5.0% (±2.0% for those judged pair by pair)" in text


def test_a_timed_row_never_catches_a_change_at_or_below_the_threshold():
    row = _row("quiet", mdc=1.5)
    assert detectable_pct(row, 5.0) == (5.0, "timing")
    s = sensitivity(Comparison(rows=(row,), threshold=5.0))
    assert s.catches(5.0) == 0 and s.catches(5.1) == 1
    assert detectable_pct(_row("one-round"), 5.0) == (math.inf, "timing")


def test_a_record_without_the_detectable_count_falls_back_to_the_gate():
    row = _row("old", mdc=30.0, count_verdict="same", count_gate_pct=1.0)
    assert detectable_pct(row, 5.0) == (1.0, "counts")
    # not counted on both sides: the clock judges it
    row = _row("waits", mdc=30.0, count_verdict="not-counted", count_gate_pct=None)
    assert detectable_pct(row, 5.0) == (30.0, "timing")


def test_the_comment_says_what_the_run_could_see_and_the_bot_says_the_same_from_json():
    comparison = _counted()
    text = render_report(comparison)
    line = sensitivity_text(comparison)
    assert line == (
        "What this run could see: of 5 benchmarks judged (1 torchrl control aside), 2 would "
        "catch a 2% slow-down, 3 a 5% one and 4 a 10% one; 3 of them on their instruction "
        "counts. The 2 timed ones need 33.8% at the median, x 60.0%."
    )
    assert f"_{line}_" in text
    # the comment job re-renders from the JSON record: the same sentence
    data = json.loads(json.dumps(comparison.to_dict()))
    data["pipeline"] = {"set": "cpu"}
    again = record_from_dict(data).comparison
    assert sensitivity_text(again) == line


def test_rows_that_could_tell_nothing_are_said_so_and_names_are_escaped():
    rows = (_row("[link](https://e.vil)", mdc=250.0), _row("b", mdc=8.0), _row("c", mdc=40.0))
    line = sensitivity_text(Comparison(rows=rows))
    assert line.endswith("need 40.0% at the median, \\[link](https:\u200b//e.vil) ×3.5, c 40.0%.")
    plain = sensitivity_text(Comparison(rows=rows), markdown=False)  # pr's terminal summary
    assert plain.endswith("need 40.0% at the median, [link](https://e.vil) ×3.5, c 40.0%.")
    one_round = Comparison(rows=(_row("a"), _row("b"), _row("c", mdc=8.0)))
    assert sensitivity_text(one_round).endswith(
        "Most of the 3 timed ones have no detectable change to show (too few rounds or runs, "
        "or summary statistics only)."
    )


def test_a_record_whose_detectable_count_is_not_a_number_is_refused():
    data = json.loads(json.dumps(_counted().to_dict()))
    data["pipeline"] = {"set": "cpu"}
    data["rows"][0]["count_detect_pct"] = "1 %; see https://e.vil"
    with pytest.raises(BenchInputError, match=r"count_detect_pct.*expected.*Fix:"):
        record_from_dict(data, source="cpu.json")


def test_nothing_compared_says_nothing():
    only_new = Comparison(rows=(BenchmarkChange("t.py::n", "n", Verdict.NEW),), has_base=False)
    assert sensitivity_text(only_new) == ""
    assert "What this run could see" not in render_report(only_new)
