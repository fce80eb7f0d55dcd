"""Values that count work (asv ``track_*`` instructions, aten ops ...) judged on the
count gate by ``compare`` and the judge, not on a timing's assumed noise."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from rlpace.bench.cli import main
from rlpace.bench.comparison import Verdict
from rlpace.bench.comparison_record import record_from_dict
from rlpace.bench.counted_rows import count_verdict, counted
from rlpace.bench.history import detect_step_changes, load_asv_series, step_threshold
from rlpace.bench.judge import Judge
from rlpace.bench.render import render_report
from rlpace.bench.result_tables import load_side
from rlpace.bench.results import results_from_records
from rlpace.bench.thresholds import COUNTED_THRESHOLD
from rlpace.bench.units import COUNT_UNITS

ASV_COUNTS = Path(__file__).parent / "fixtures" / "asv-counts"
CHECK, PARENT = "06791008", "df384f76"  # the bounds check in RandomSampler.sample, its parent


def _side(value: float, unit: str = "instructions", runs: list[float] | None = None):
    return results_from_records(
        [{"fullname": "case", "median": value, "mean": value, "min": value, "max": value,
          "rounds": 1, "value_unit": unit, "run_medians": runs}]
    )  # fmt: skip


def _commit(short: str) -> list[Path]:
    return sorted((ASV_COUNTS / "vm").glob(f"{short}-*.json"))


def test_the_count_threshold_is_the_count_tiers_gate_floor():
    from rlpace.bench.counts.verdict import DEFAULT_FLOOR

    assert COUNTED_THRESHOLD == DEFAULT_FLOOR * 100


def test_compare_of_asv_count_files_flags_the_steps_the_history_names():
    """The check's commit against its parent: ``compare`` flags the three instruction
    counts the history steps at that commit (+14.1, +3.5 and +1.2 %), the last two
    below the 5 % threshold and the ±10 % assumed noise that judged them before; the
    estimated cycles, a cache model, keep the timings' rules and flag only their 14 %."""
    comparison = Judge().judge(load_side(_commit(CHECK)), load_side(_commit(PARENT)))
    worse = {r.fullname for r in comparison.rows if r.verdict is Verdict.WORSENED}
    instructions = {n.split("'")[1] for n in worse if ".track_instructions(" in n}
    cycles = {n.split("'")[1] for n in worse if ".track_estimated_cycles(" in n}
    assert instructions == {
        "test_rb_sample[rlpace-tensor-random-cpu]",
        "test_rb_sample[rlpace-list-random-cpu]",
        "test_rb_extend_sample[rlpace-list-random-cpu]",
    }
    assert cycles == {"test_rb_sample[rlpace-tensor-random-cpu]"}
    stepped = {
        c.benchmark.split("'")[1]
        for s in load_asv_series(ASV_COUNTS)
        if ".track_instructions(" in s.benchmark
        for c in detect_step_changes(s, threshold=step_threshold(s))
    }
    assert stepped == instructions  # the history and the comparison agree
    rows = {r.fullname: r for r in comparison.rows}
    small = rows[
        "counts.Counts.track_instructions('test_rb_extend_sample[rlpace-list-random-cpu]')"
    ]
    assert small.method == "counted" and small.noise_pct == 1.0
    assert -1.3 < small.median_change_pct < -1.1
    assert comparison.count_threshold == 1.0
    text = render_report(comparison)
    assert "6 would catch a 2% slow-down" in text  # the instruction rows, at their gate
    assert "6 of them on their instruction counts" in text
    assert "the 6 measured ones" in text  # the cycles are not timings either
    # as a timing it would be noise: the same files with the counts' gate at 5 %
    loose = Judge(count_threshold=5.0).judge(load_side(_commit(CHECK)), load_side(_commit(PARENT)))
    assert {r.fullname for r in loose.rows if r.verdict is Verdict.WORSENED} < worse


@pytest.mark.parametrize("pair", [("37c62468", "df384f76"), ("06791008", "efb7b153")])
def test_two_commits_that_change_no_code_flag_nothing(pair):
    """The docs-only commits of the same asv run: their counts moved up to 0.75 %
    (instructions) between processes, inside the 1 % gate."""
    base, head = pair
    comparison = Judge().judge(load_side(_commit(head)), load_side(_commit(base)))
    assert not [r for r in comparison.rows if r.verdict in (Verdict.WORSENED, Verdict.IMPROVED)]
    assert sum(r.method == "counted" for r in comparison.rows) == 6


def test_a_steady_count_is_judged_on_the_gate_with_one_run_a_side():
    for head, verdict in ((101.5, Verdict.WORSENED), (100.9, Verdict.UNCHANGED),
                          (98.0, Verdict.IMPROVED)):  # fmt: skip
        row = Judge().judge(_side(head), _side(100.0)).rows[0]
        assert (row.method, row.verdict, row.noise_pct) == ("counted", verdict, 1.0)
    row = Judge().judge(_side(101.5, "aten ops"), _side(100.0, "aten ops")).rows[0]
    assert row.verdict is Verdict.WORSENED and "count gate ±1.0%" in row.note


def test_python_calls_follow_the_clock_so_one_run_a_side_keeps_the_timing_rules():
    """A collector's calling thread polls while it waits: its Python calls moved 1-3 %
    between processes, so one value a side cannot be gated at 1 %."""
    row = Judge().judge(_side(103.0, "Python calls"), _side(100.0, "Python calls")).rows[0]
    assert row.method != "counted" and row.verdict is Verdict.UNCHANGED
    # with runs a side, their own spread sets the gate: 4 × 0.99 %
    head = _side(101.5, "Python calls", [101.0, 101.5, 102.0])
    base = _side(100.0, "Python calls", [100.0, 100.5])
    row = Judge().judge(head, base).rows[0]
    assert row.method == "counted" and row.noise_pct == pytest.approx(3.96, abs=0.01)
    assert row.verdict is Verdict.UNCHANGED and "4 × its runs' spread of 0.99%" in row.note
    far = Judge().judge(_side(110.0, "Python calls", [110.0, 110.5]), base).rows[0]
    assert far.verdict is Verdict.WORSENED


def test_a_clock_following_count_of_zero_on_one_side_is_not_a_failure():
    """asv's work series over real commits: a sleep-bound threaded row's workers had 8
    steady calls in one process and none in the next, code unchanged. One run a side
    of such a count cannot be judged; it is neither a failure nor new work."""
    unit = "worker Python calls"
    for head, base in ((0.0, 8.0), (8.0, 0.0)):
        row = Judge().judge(_side(head, unit), _side(base, unit)).rows[0]
        assert row.verdict is Verdict.UNCHANGED and "may follow the clock" in row.note
    timing = Judge().judge(_side(0.0, "seconds"), _side(1.0, "seconds")).rows[0]
    assert timing.verdict is Verdict.FAILED  # a time of zero is still a broken timer


def test_a_count_of_zero_on_one_side_is_new_or_gone_work():
    # a side whose runs counted 0 and more cannot be judged, whatever the other says
    assert count_verdict([0.0, 5.0], [5.0, 5.0], floor_pct=1.0)["verdict"] == "unchanged"
    assert count_verdict([5.0], [0.0], floor_pct=1.0)["verdict"] == "worsened"
    assert count_verdict([0.0], [5.0], floor_pct=1.0)["verdict"] == "improved"
    assert count_verdict([0.0], [0.0], floor_pct=1.0)["verdict"] == "unchanged"
    row = Judge().judge(_side(3.0, "syncs"), _side(0.0, "syncs")).rows[0]
    assert row.verdict is Verdict.WORSENED and "counted 0 in base and 3 in head" in row.note


def test_what_is_not_a_clean_count_keeps_the_timing_rules():
    """Cycles (a cache model), a unit that differs between the sides, a negative
    value: none is judged on the count gate."""
    assert "cycles" not in COUNT_UNITS and not counted("cycles", 1, 1)
    for head, base in ((_side(103.0, "cycles"), _side(100.0, "cycles")),
                       (_side(103.0, "instructions"), _side(100.0, "unit")),
                       (_side(-3.0), _side(100.0))):  # fmt: skip
        row = Judge().judge(head, base).rows[0]
        assert row.method != "counted"


def test_the_count_threshold_is_the_judges_and_the_commands(tmp_path, capsys):
    """``compare --count-threshold`` sets the judge's; a bad one is refused in one line;
    the record keeps it and the method, and the comment names it."""
    args = ["compare", "--head", *map(str, _commit(CHECK)), "--base", *map(str, _commit(PARENT))]
    js = tmp_path / "c.json"
    assert (
        main([*args, "--json", str(js), "--count-threshold", "2", "-o", str(tmp_path / "r.md")])
        == 0
    )
    data = json.loads(js.read_text())
    assert data["count_threshold"] == 2.0
    worse = [r for r in data["rows"] if r["verdict"] == "worsened" and r["method"] == "counted"]
    assert len(worse) == 2  # the +1.2 % step is inside a 2 % gate
    data["pipeline"] = {"set": "cpu"}
    record = record_from_dict(data, source="c.json")
    assert record.comparison.count_threshold == 2.0
    text = render_report(record.comparison)
    assert "(±2.0% for counts of work)" in text and "does not follow the machine's load" in text
    assert main([*args, "--count-threshold", "-1"]) == 2
    assert "count_threshold: expected a percentage >= 0, got -1.0" in capsys.readouterr().err
    with pytest.raises(Exception, match="count_threshold"):
        Judge(count_threshold=math.nan)


def test_counted_rows_lend_no_variance_to_the_timings_prior():
    """Merged runs: the timed rows' fitted prior is the same with or without count rows
    beside them, whose tiny spread would otherwise make every timing look calm."""

    def table(rows):
        return results_from_records(
            [{"fullname": n, "data": runs * 3, "value_unit": u, "run_medians": runs}
             for n, u, runs in rows]
        )  # fmt: skip

    timed = [(f"t{i}", "seconds", [1.0, 1.0 + 0.03 * (i + 1)]) for i in range(3)]
    timed_head = [(n, u, [x * 1.04 for x in r]) for n, u, r in timed]
    counts = [(f"c{i}", "instructions", [1e6, 1e6 + 10]) for i in range(5)]
    alone = Judge().judge(table(timed_head), table(timed))
    beside = Judge().judge(table(timed_head + counts), table(timed + counts))
    assert alone.variance_prior is not None
    assert alone.variance_prior == beside.variance_prior
    assert [r.verdict for r in alone.rows] == [r.verdict for r in beside.rows[:3]]
    assert {r.method for r in beside.rows[3:]} == {"counted"}
