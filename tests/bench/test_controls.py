"""The negative-control noise floor, on synthetic result tables with known truth."""

import json
import math

import numpy as np

from rlpace.bench.compare import compare_runs
from rlpace.bench.comparison import Verdict
from rlpace.bench.controls import (
    NoiseFloor,
    control_changes,
    noise_floor_from_controls,
    noise_with_floor,
)
from rlpace.bench.render import render_report
from rlpace.bench.results import results_from_records

FLAGGED = {Verdict.IMPROVED, Verdict.WORSENED}


def table(rng, factors, *, n=60, spread=0.01):
    """One merged run: ``factors`` maps fullname → (impl, time factor)."""
    return results_from_records(
        [
            {
                "fullname": name,
                "params": {"impl": impl},
                "data": list(1e-3 * (1 + i / 50) * factor * rng.lognormal(0, spread, n)),
            }
            for i, (name, (impl, factor)) in enumerate(factors.items())
        ]
    )


def suite(controls=8, rlpace=8, *, drift=1.0, slowed=None, slow=1.0):
    """``drift`` multiplies every base time (the base side runs slower by that factor);
    ``slowed`` names one rlpace row whose head time is multiplied by ``slow``."""
    names = [f"t::case[torchrl-{i}]" for i in range(controls)]
    names += [f"t::case[rlpace-{i}]" for i in range(rlpace)]
    base = {n: (n.split("[")[1].split("-")[0], drift) for n in names}
    head = {n: (impl, slow if n == slowed else 1.0) for n, (impl, _) in base.items()}
    return head, base


def judged(head_f, base_f, seed=0):
    rng = np.random.default_rng(seed)
    head, base = table(rng, head_f), table(rng, base_f)
    floor = noise_floor_from_controls(head, base)
    noise = noise_with_floor(None, head["fullname"], floor)
    # "without": the comparator alone, judging on rounds (no assumed single-run noise)
    alone = compare_runs(head, base, single_run_noise=0)
    return floor, compare_runs(head, base, noise=noise), alone


def test_common_mode_drift_on_every_row_is_not_flagged():
    head_f, base_f = suite(drift=1.065)  # base 6.5% slower everywhere: beyond the threshold
    for seed in range(3):
        floor, with_floor, without = judged(head_f, base_f, seed)
        assert floor.active and floor.controls == 8
        assert 5.5 < floor.location_pct < 7.5
        assert floor.floor_pct > floor.location_pct
        assert not [r for r in with_floor.rows if r.verdict in FLAGGED]
        # the comparator alone calls the drift an improvement: the floor is what stops it
        assert [r for r in without.rows if r.verdict in FLAGGED]


def test_three_percent_drift_is_not_flagged_and_controls_stay_in_the_report():
    floor, comparison, _ = judged(*suite(drift=1.03))
    assert floor.active
    assert not [r for r in comparison.rows if r.verdict in FLAGGED]
    assert sum(r.impl == "torchrl" for r in comparison.rows) == 8


def test_a_real_slowdown_on_one_rlpace_row_is_still_flagged_under_drift():
    slowed = "t::case[rlpace-3]"
    floor, comparison, _ = judged(*suite(drift=1.03, slowed=slowed, slow=1.3))
    flagged = {r.fullname: r.verdict for r in comparison.rows if r.verdict in FLAGGED}
    assert flagged == {slowed: Verdict.WORSENED}
    row = next(r for r in comparison.rows if r.fullname == slowed)
    assert row.noise_pct >= floor.floor_pct - 1e-9


def test_too_few_controls_give_no_floor_and_leave_noise_alone():
    head_f, base_f = suite(controls=4, drift=1.03)
    floor, _, _ = judged(head_f, base_f)
    assert floor.controls == 4 and not floor.active and math.isnan(floor.floor_pct)
    assert noise_with_floor({"a": 0.02}, ["a", "b"], floor) == {"a": 0.02}


def test_floor_is_the_larger_of_it_and_the_calibrated_noise():
    floor = NoiseFloor(controls=6, location_pct=-1.0, spread_pct=0.5, z=3.0)
    assert math.isclose(floor.floor_pct, 2.5)
    noise = noise_with_floor({"a": 0.10, "b": 0.01}, ["a", "b", "c"], floor)
    assert noise["a"] == 0.10
    # calibrated "b" is held to the common-mode shift beyond doubt, uncalibrated "c" to
    # the full floor: the spread of other benchmarks is all the run knows about it
    shift = (1.0 + 3.0 * 1.2533 * 0.5 / math.sqrt(6)) / 100
    assert math.isclose(noise["b"], shift) and math.isclose(noise["c"], 0.025)
    assert noise_with_floor({"b": 0.05}, ["b"], floor) == {"b": 0.05}


def test_one_control_that_really_moved_does_not_blow_the_floor_up():
    rng = np.random.default_rng(3)
    head_f, base_f = suite(controls=9, drift=1.0)
    head_f["t::case[torchrl-0]"] = ("torchrl", 1.5)
    floor = noise_floor_from_controls(table(rng, head_f), table(rng, base_f))
    assert floor.active and floor.floor_pct < 5


def test_control_changes_skip_failed_and_one_sided_rows():
    head = results_from_records(
        [
            {"fullname": "c1", "params": {"impl": "torchrl"}, "data": [1.0] * 5},
            {"fullname": "c2", "params": {"impl": "torchrl"}, "data": [1.0] * 5},
            {"fullname": "r", "params": {"impl": "rlpace"}, "data": [1.0] * 5},
        ]
    )
    base = results_from_records(
        [
            {"fullname": "c1", "params": {"impl": "torchrl"}, "data": [1.1] * 5},
            {"fullname": "r", "params": {"impl": "rlpace"}, "data": [2.0] * 5},
        ]
    )
    assert list(control_changes(head, base)) == ["c1"]


def test_floor_travels_in_the_json_and_the_rlpace_summary_line():
    from dataclasses import replace

    floor, comparison, _ = judged(*suite(drift=1.03))
    comparison = replace(comparison, noise_floor=floor)
    data = json.loads(json.dumps(comparison.to_dict()))
    assert data["noise_floor"]["controls"] == 8 and data["noise_floor"]["active"] is True
    assert math.isclose(data["noise_floor"]["floor_pct"], floor.floor_pct)
    text = render_report({"cpu": comparison}, style="rlpace", title="t")
    assert f"noise floor of ±{floor.floor_pct:.1f}%" in text
    assert "8 torchrl controls" in text
    assert "noise floor" not in render_report({"cpu": comparison}, style="seed", title="t")


def test_a_control_is_never_flagged_when_both_sides_pin_the_same_packages():
    from rlpace.bench.judge import Judge

    rng = np.random.default_rng(5)
    names = {f"t::case[torchrl-{i}]": ("torchrl", 1.0) for i in range(6)}
    names |= {f"t::case[rlpace-{i}]": ("rlpace", 1.0) for i in range(3)}
    base = table(rng, names)
    # one twin's head run is 40% slower: pinned code cannot have changed, so it is noise
    head = table(rng, {**names, "t::case[torchrl-0]": ("torchrl", 1.4)})
    as_pr = {r.fullname: r for r in Judge().judge(head, base).rows}
    twin = as_pr["t::case[torchrl-0]"]
    assert twin.verdict is Verdict.UNCHANGED and "negative control" in twin.note
    assert twin.median_change_pct < -25  # its figures are still there
    # with other pins on the base side the controls may really have changed: judged
    other_pins = {r.fullname: r for r in Judge(same_packages=False).judge(head, base).rows}
    assert other_pins["t::case[torchrl-0]"].verdict is Verdict.WORSENED
    assert compare_runs(head, base, fixed_impl="torchrl").rows[0].verdict is Verdict.UNCHANGED
    assert compare_runs(head, base).rows[0].verdict is Verdict.WORSENED
