"""``rlpace-bench aa`` on a tiny suite: figures computed from real runs."""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from rlpace.bench.aa import CalibrationConfig
from rlpace.bench.calibration import Calibration, read_calibration
from rlpace.bench.cli import main as cli_main
from rlpace.bench.compare import compare_runs
from rlpace.bench.errors import BenchInputError
from rlpace.bench.gates import detectable_change, noise_gate
from rlpace.bench.render_calibration import format_calibration
from rlpace.bench.results import load_results, merge_runs

SUITE_PLUGIN = Path(__file__).resolve().parents[1] / "benchmarks" / "conftest.py"
CASES = """from rlpace.bench.suite import Timed, case

DATA = list(range(2000))


@case()
def test_alpha():
    return Timed(lambda: sum(DATA), items=len(DATA), unit="numbers")


@case()
def test_beta():
    return Timed(lambda: sum(DATA), items=len(DATA), unit="numbers")
"""


@pytest.fixture
def tiny_suite(tmp_path: Path) -> Path:
    repo = tmp_path / "tiny"
    suite = repo / "tests" / "benchmarks"
    suite.mkdir(parents=True)
    (repo / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\naddopts = "--import-mode=importlib"\n'
    )
    (suite / "conftest.py").write_text(SUITE_PLUGIN.read_text())
    (suite / "test_tiny.py").write_text(CASES)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    return repo


def test_noise_gate_is_bonferroni_wide_and_never_below_what_was_seen():
    gate, spread, mdc = noise_gate([0.5, -0.5, 0.4, -0.4, 3.0], n_benchmarks=20)
    assert gate >= 3.0  # the largest A/A change seen
    assert math.isclose(spread, statistics.stdev([0.5, -0.5, 0.4, -0.4, 3.0]))
    assert mdc > max(gate, 5.0)
    wide, _, _ = noise_gate([1.0, -1.0, 0.5, -0.5], n_benchmarks=100)
    narrow, _, _ = noise_gate([1.0, -1.0, 0.5, -0.5], n_benchmarks=1)
    assert wide > narrow
    assert all(math.isnan(x) for x in noise_gate([1.0], n_benchmarks=1))
    # a spread known from the pool needs no A/A change of its own (a held-out gate whose
    # every comparison shares runs with the judged one)
    alone, spread, _ = noise_gate([], n_benchmarks=20, spread_pct=2.0, spread_df=19)
    assert (
        spread == 2.0
        and alone == noise_gate([0.1], n_benchmarks=20, spread_pct=2.0, spread_df=19)[0]
    )


def test_config_rejects_a_pool_smaller_than_one_comparison():
    # a comparison and its confirmation (two runs a side by default) each need their own
    with pytest.raises(
        BenchInputError, match=r"--pool: expected at least 2 x \(repeats \+ confirm\) = 10"
    ):
        CalibrationConfig(repeats=3, pool=4)
    with pytest.raises(
        BenchInputError, match="= 6 runs.*got 4. Fix: a larger --pool or --confirm 0"
    ):
        CalibrationConfig(repeats=3, pool=4, confirm=0)
    with pytest.raises(BenchInputError, match="--confirm: expected the confirmation's runs"):
        CalibrationConfig(confirm=-1)
    with pytest.raises(BenchInputError, match="PATTERN=FRACTION"):
        CalibrationConfig(inject="test_x")


def test_aa_on_a_tiny_suite(tiny_suite, monkeypatch, capsys):
    monkeypatch.chdir(tiny_suite)
    args = ["aa", "--runs", "3", "--repeats", "1", "--pool", "3", "--max-time", "0.05"]
    args += ["--confirm", "0"]
    # a tenfold slow-down: the calls spin on their own clock, so the slow runs are ten
    # times their own clean calls, but clean and slow runs meet different load, and on a
    # busy host A/A runs of this suite were 47-50 % apart (a doubling then read as +9 %)
    args += ["--inject", "test_beta=9.0"]
    assert cli_main(args) == 0
    printed = capsys.readouterr().out
    assert "A/A calibration, cpu set: 3 comparisons of 1 runs per side (pool of 3 runs)" in printed

    cal = read_calibration(tiny_suite / "reports" / "aa" / "cpu.json")
    assert isinstance(cal, Calibration) and (cal.runs, cal.repeats, cal.pool) == (3, 1, 3)
    # the machine and the start of the pool's first run, from its result file
    # the pool's place, relative to the repository (the record is checked in)
    assert cal.runs_dir == "build/rlpace-bench/aa/cpu"
    first = json.loads((tiny_suite / cal.runs_dir / "clean-0.json").read_text())
    assert cal.created == first["datetime"] and cal.environment["torch"].startswith("2.")
    assert 0.0 <= cal.false_alarm_rate <= 1.0
    runs_dir = tiny_suite / cal.runs_dir
    assert sorted(p.name for p in runs_dir.glob("*.json")) == [
        "clean-0.json", "clean-1.json", "clean-2.json",
        "slow-0.json", "slow-1.json", "slow-2.json",
    ]  # fmt: skip
    # the first two clean runs count each case's work, the others only time
    counted = {
        p.name
        for p in runs_dir.glob("*.json")
        if all("work_counts" in b["extra_info"] for b in json.loads(p.read_text())["benchmarks"])
    }
    assert counted == {"clean-0.json", "clean-1.json"}
    by_name = {b.fullname.rsplit("::", 1)[-1]: b for b in cal.benchmarks}
    assert set(by_name) == {"test_alpha", "test_beta"}

    # the figures are the comparator's verdicts on the real pool files
    (a, b), *_ = cal.draws
    side_a = merge_runs([load_results(runs_dir / f"clean-{i}.json") for i in a])
    side_b = merge_runs([load_results(runs_dir / f"clean-{i}.json") for i in b])
    redone = {r.name: r.median_change_pct for r in compare_runs(side_b, side_a).rows}
    for name, bench in by_name.items():
        assert bench.comparisons == 3 and len(bench.changes_pct) == 3, md_table(cal)
        assert math.isclose(bench.changes_pct[0], redone[name], abs_tol=1e-3)
        assert bench.gate_pct >= max(abs(c) for c in bench.changes_pct) - 1e-3  # stored rounded
        assert bench.mdc_pct > bench.gate_pct
        assert 0 < bench.noise_fraction <= 1

    # the injected tenfold slowdown of test_beta is seen; test_alpha was not slowed
    assert by_name["test_beta"].injected == 9.0 and by_name["test_alpha"].injected == 0.0
    assert by_name["test_beta"].detected_raw == 1.0, md_table(cal)
    slowed = json.loads((runs_dir / "slow-0.json").read_text())["benchmarks"]
    assert {b["name"]: b["extra_info"].get("injected_slowdown") for b in slowed} == {
        "test_alpha": None,
        "test_beta": 9.0,
    }
    md = (tiny_suite / "reports" / "aa" / "cpu.md").read_text()
    assert md == format_calibration(cal) and "`test_beta`" in md
    assert 0.0 <= cal.bare_threshold_rate <= 1.0 and 0.0 <= cal.bare_threshold_share <= 1.0

    # the figures can be recomputed from the same files without running anything again
    before = {p: p.stat().st_mtime_ns for p in runs_dir.glob("*.json")}
    assert cli_main([*args, "--reuse-runs"]) == 0
    again = read_calibration(tiny_suite / "reports" / "aa" / "cpu.json")
    assert [b.changes_pct for b in again.benchmarks] == [b.changes_pct for b in cal.benchmarks]
    assert {p: p.stat().st_mtime_ns for p in runs_dir.glob("*.json")} == before


def md_table(cal):
    """The calibration's own table, shown when an assertion about it fails."""
    return "\n" + format_calibration(cal)


def test_reading_a_foreign_file_says_what_to_do(tmp_path):
    path = tmp_path / "x.json"
    path.write_text(json.dumps({"format": "rlpace-comparison", "version": 1}))
    with pytest.raises(BenchInputError, match="expected format 'rlpace-bench-calibration'"):
        read_calibration(path)
    path.write_text(json.dumps({"format": "rlpace-bench-calibration", "version": 99}))
    with pytest.raises(BenchInputError, match="rerun `rlpace-bench aa`"):
        read_calibration(path)


def synthetic_pool(rng, n_runs, *, slowdown=0.0, names=None):
    """Result tables of ``n_runs`` runs: per benchmark a process-level and a round-level
    noise, as the suite has them (quiet single-process cases, jumpy multi-process ones,
    torchrl twins as controls); ``slowdown`` slows every rlpace row."""
    import numpy as np

    from rlpace.bench.results import results_from_records

    names = names or {
        **{f"test_quiet{i}[rlpace]": 0.005 for i in range(8)},
        **{f"test_jumpy{i}[rlpace]": 0.20 for i in range(3)},
        **{f"test_twin{i}[torchrl]": 0.01 for i in range(6)},
    }
    frames = []
    for _ in range(n_runs):
        records = []
        for name, process_sd in names.items():
            impl = name.split("[")[1].rstrip("]")
            center = 1e-3 * np.exp(rng.normal(0, process_sd))
            if impl == "rlpace":
                center *= 1 + slowdown
            data = center * np.exp(rng.normal(0, 0.02, 40))
            records.append({"fullname": name, "params": {"impl": impl}, "data": data.tolist()})
        frames.append(results_from_records(records))
    return frames


def test_analyse_pool_calibrates_from_run_spreads_and_holds_out_each_comparisons_runs():
    import numpy as np

    from rlpace.bench.aa import analyse_pool, run_spreads

    rng = np.random.default_rng(0)
    clean = synthetic_pool(rng, 12)
    slow = synthetic_pool(rng, 4, slowdown=0.10)
    inject = "test_=0.1,*[torchrl*=0"
    # the single-stage judging (the confirmation stage has a test of its own below)
    config = CalibrationConfig(runs=12, repeats=2, pool=12, inject=inject, slow_pool=4, confirm=0)
    cal = analyse_pool(config, clean, slow)
    by_name = {b.fullname: b for b in cal.benchmarks}
    assert (cal.pool, cal.slow_pool, len(cal.draws)) == (12, 4, 12)
    spreads = run_spreads(clean)
    for name, bench in by_name.items():
        # the stored run spread is the pool's, and the A/A spread at 2 runs a side follows it
        assert bench.runs == 12 and math.isclose(bench.run_spread_pct, spreads[name][0])
        assert math.isclose(bench.spread_pct, bench.run_spread_pct, rel_tol=1e-9)  # √(2/2) = 1
    jumpy = [b for n, b in by_name.items() if n.startswith("test_jumpy")]
    quiet = [b for n, b in by_name.items() if n.startswith("test_quiet")]
    assert min(b.run_spread_pct for b in jumpy) > 5 * max(b.run_spread_pct for b in quiet)
    assert all(b.gate_pct > 20 for b in jumpy) and all(b.gate_pct < 5 for b in quiet)
    # quiet benchmarks never cry wolf; with two runs a side (two degrees of freedom)
    # the comparator alone lets a jumpy one through now and then, the calibration never
    assert all(b.flagged == 0 for b in quiet), md_table(cal)
    assert cal.false_alarm_rate_calibrated == 0.0, md_table(cal)
    # the 10% slow-down of rlpace's rows is caught on the quiet benchmarks (they also
    # clear the process-level gate, whose prior the jumpy ones widen a little)
    assert all(b.injected == 0.1 and b.detected >= 0.8 for b in quiet), md_table(cal)
    assert sum(b.detected for b in quiet) / len(quiet) >= 0.9, md_table(cal)
    assert all(b.injected == 0.0 for n, b in by_name.items() if "torchrl" in n)
    # the slow-down the slowed runs really show: 10% on the quiet ones, ~0 on the twins
    assert all(8 < b.achieved_pct < 12 for b in quiet), [b.achieved_pct for b in quiet]
    twins = [b for n, b in by_name.items() if "torchrl" in n]
    assert all(abs(b.achieved_pct) < 3 for b in twins)
    assert "| injected | achieved | detected |" in md_table(cal)
    assert read_calibration_from(cal).benchmarks == cal.benchmarks  # survives the file

    # the detection summary: every held-out calibration promised to catch the 10% on
    # the quiet benchmarks (their MDC at 90% power is far below it), on no jumpy one
    power = cal.detection_power()
    assert {name for name, *_ in power.rows} == {b.fullname for b in quiet}, md_table(cal)
    for name, mdc, achieved, hits, trials in power.rows:
        bench = by_name[name]
        assert bench.mdc_pct < mdc <= 100 * math.log1p(achieved / 100), md_table(cal)
        assert achieved == bench.achieved_pct and trials == bench.promised == 12
        assert hits == bench.promised_detected == round(bench.detected * 12)
    assert all(b.promised == 0 for b in jumpy) and power.trials == 12 * len(quiet)
    assert power.rate >= 0.9, md_table(cal)
    assert "detection where the calibration promised 90% power" in md_table(cal)
    assert "| MDC (90% power) | achieved | promised in | detected |" in md_table(cal)
    # a stricter family alpha widens every gate
    strict = analyse_pool(replace(config, family_alpha=0.01), clean, slow)
    assert all(
        s.gate_pct >= b.gate_pct for s, b in zip(strict.benchmarks, cal.benchmarks, strict=True)
    )
    assert sum(s.gate_pct for s in strict.benchmarks) > sum(b.gate_pct for b in cal.benchmarks)


def test_false_alarm_bound_and_an_empty_detection_summary():
    from rlpace.bench.calibration import BenchmarkNoise

    noisy = BenchmarkNoise("a", 20, (1.0,), 0, 8.0, 30.0, 40.0, 30.0, injected=0.1,
                           detected=0.2, achieved_pct=10.0)  # fmt: skip
    cal = Calibration(
        "cpu", 20, 2, 40, 5.0, 0.05, 0.05, 0.1, 0.0, (noisy,), inject="test_=0.1", slow_pool=4
    )
    # no alarm in 20 held-out comparisons still allows 13.9% at 95% confidence
    assert cal.held_out_alarms == 0 and math.isclose(cal.false_alarm_bound(), 1 - 0.05 ** (1 / 20))
    assert cal.detection_power().rows == () and math.isnan(cal.detection_power().rate)
    assert "no benchmark qualifies" in format_calibration(cal)
    assert "(0 of 20; 95% upper bound 14%)" in format_calibration(cal)
    unmeasured = replace(cal, false_alarm_rate_calibrated=math.nan)
    assert math.isnan(unmeasured.false_alarm_bound()) and "upper bound" not in format_calibration(
        unmeasured
    )
    with pytest.raises(BenchInputError, match="--family-alpha: expected a probability"):
        CalibrationConfig(family_alpha=5)


def test_a_file_without_per_comparison_promises_falls_back_to_the_final_calibration():
    from rlpace.bench.calibration import BenchmarkNoise

    # written before promises were recorded: a quiet benchmark (MDC at 90% power 6.3,
    # below the 9.5 log-% of a 10% slow-down) and a noisy one
    quiet = BenchmarkNoise("q", 16, (1.0,), 0, 1.0, 4.0, 6.0, 2.0, injected=0.1,
                           detected=0.875, achieved_pct=10.0)  # fmt: skip
    noisy = BenchmarkNoise("n", 16, (1.0,), 0, 8.0, 30.0, 40.0, 30.0, injected=0.1,
                           detected=0.25, achieved_pct=10.0)  # fmt: skip
    draws = tuple(((0, 1), (2, 3)) for _ in range(16))
    cal = Calibration(
        "cpu", 16, 2, 16, 5.0, 0.05, 0.05, 0.0, 0.0, (quiet, noisy), inject="test_=0.1",
        draws=draws, slow_pool=4,
    )  # fmt: skip
    power = cal.detection_power()
    assert [(name, hits, trials) for name, _, _, hits, trials in power.rows] == [("q", 14, 16)]


def read_calibration_from(cal):
    import tempfile
    from pathlib import Path

    from rlpace.bench.aa import write_calibration
    from rlpace.bench.calibration import read_calibration

    with tempfile.TemporaryDirectory() as d:
        json_path, _ = write_calibration(cal, Path(d))
        return read_calibration(json_path)


def test_noise_fractions_scale_with_the_runs_a_side():
    from rlpace.bench.calibration import BenchmarkNoise

    bench = BenchmarkNoise("a", 4, (1.0,), 0, 2.0, 8.0, 12.0, 2.0, run_spread_pct=2.0, runs=8)
    cal = Calibration("cpu", 4, 2, 8, 5.0, 0.05, 0.05, 0.0, 0.0, (bench,))
    # an 8% log gate is a 7.7% slow-down (and a 8.3% speed-up); four times the runs
    # halve the log gate
    assert cal.noise_fractions() == {"a": 0.076884} == cal.noise_fractions(repeats=2)
    assert cal.noise_fractions(repeats=8) == {"a": round(-math.expm1(-0.04), 6)}
    with pytest.raises(BenchInputError, match="repeats: expected an integer >= 1"):
        cal.noise_fractions(repeats=0)
    with pytest.raises(
        BenchInputError, match="--slow-pool: expected at least repeats [+] confirm = 4"
    ):
        CalibrationConfig(repeats=2, inject="test_=0.1", slow_pool=3)


def test_a_held_out_gate_does_not_see_the_judged_runs_through_other_comparisons():
    import numpy as np

    from rlpace.bench.aa import analyse_pool
    from rlpace.bench.results import results_from_records

    # one benchmark, quiet between processes except run 0, which is 40% slower: every
    # comparison holding run 0 should be flagged by a calibration that has not seen it
    rng = np.random.default_rng(3)
    pool = []
    for run in range(12):
        center = 1e-3 * np.exp(rng.normal(0, 0.005)) * (1.4 if run == 0 else 1.0)
        data = center * np.exp(rng.normal(0, 0.01, 40))
        pool.append(results_from_records([{"fullname": "a", "data": data.tolist()}]))
    config = CalibrationConfig(runs=12, repeats=1, pool=12, confirm=0)
    cal = analyse_pool(config, pool)
    with_outlier = [i for i, (a, b) in enumerate(cal.draws) if 0 in a or 0 in b]
    assert 1 <= len(with_outlier) < 12
    # other comparisons holding run 0 show the same change; a held-out gate that saw
    # them ("never below the largest change seen") would be as wide as the change
    assert cal.false_alarm_rate_calibrated == len(with_outlier) / 12, md_table(cal)
    # the final calibration has seen run 0 and is wide enough for it, in log units: a
    # 40% slower run is a 28.6% drop of throughput and a 33.6 log change
    assert cal.benchmarks[0].gate_pct >= 100 * math.log(1.4) - 1
    assert min(cal.benchmarks[0].changes_pct) < -25  # stored as % of throughput
    redone = analyse_pool(config, pool)
    assert redone.false_alarm_rate_calibrated == cal.false_alarm_rate_calibrated


def test_held_out_comparisons_share_no_runs_with_the_gate_they_are_judged_by():
    from rlpace.bench.aa._analysis import PoolDraws

    pairs = (((0, 1), (2, 3)), ((4, 5), (6, 7)), ((1, 8), (9, 4)), ((10, 11), (12, 13)))
    draws = PoolDraws(pairs, tuple(((), ()) for _ in pairs))
    assert draws.sharing(0) == {0, 2} and draws.sharing(1) == {1, 2}
    assert draws.sharing(2) == {0, 1, 2} and draws.sharing(3) == {3}
    # a confirmation's runs count as the comparison's own: whoever used them shares
    confirmed = PoolDraws(pairs, (((12,), (13,)), *(((), ()),) * 3))
    assert confirmed.sharing(0) == {0, 2, 3}


def test_detectable_change_clears_gate_and_threshold_and_refuses_a_bad_power():
    # the gate binds above the threshold, the threshold below it
    assert math.isclose(detectable_change(8.0, 2.0, power=0.5), 8.0)
    assert math.isclose(detectable_change(3.0, 2.0, threshold=5.0, power=0.5), 5.0)
    assert detectable_change(8.0, 2.0, power=0.9) > detectable_change(8.0, 2.0, power=0.8)
    with pytest.raises(BenchInputError, match=r"power: expected a probability in \(0, 1\)"):
        detectable_change(8.0, 2.0, power=90)


def test_a_confirmation_stage_is_part_of_the_detectable_change():
    from scipy.stats import norm

    one = detectable_change(8.0, 2.0, power=0.9)
    both = detectable_change(8.0, 2.0, power=0.9, confirm=(6.0, 2.0))
    # both stages must pass: more than the first alone, and exactly the power asked
    assert both > one
    passed = norm.cdf((both - 8.0) / 2.0) * norm.cdf((both - 6.0) / 2.0)
    assert math.isclose(passed, 0.9, abs_tol=1e-6)
    # a confirmation that cannot miss (no spread, a gate below the first) changes nothing
    assert math.isclose(detectable_change(8.0, 2.0, power=0.9, confirm=(1.0, 0.0)), one)
    # the threshold binds the confirmation too
    assert detectable_change(1.0, 0.0, threshold=5.0, power=0.9, confirm=(1.0, 0.0)) == 5.0
    assert math.isnan(detectable_change(8.0, 2.0, power=0.9, confirm=(math.nan, 2.0)))


def test_a_rare_slow_process_is_not_flagged_and_a_real_slowdown_still_is():
    import numpy as np

    from rlpace.bench.aa import analyse_pool

    # one process of the pool runs 60% slow on one benchmark (a burst of load, a
    # multi-process case's slow start); the rest is quiet. A two-run side holding it moves
    # far beyond any gate fitted to runs without it.
    rng = np.random.default_rng(7)
    names = {
        **{f"test_quiet{i}[rlpace]": 0.005 for i in range(6)},
        **{f"test_twin{i}[torchrl]": 0.01 for i in range(6)},
    }
    slow_runs = {5}

    def pool(n, slowdown=0.0, rare=()):
        frames = synthetic_pool(rng, n, slowdown=slowdown, names=names)
        for i, frame in enumerate(frames):
            if i in rare:
                row = frame.index[frame["fullname"] == "test_quiet0[rlpace]"][0]
                data = [x * 1.6 for x in frame.at[row, "data"]]
                frame.at[row, "data"] = data
                frame.at[row, "median"] = float(np.median(data))
                frame.at[row, "mean"] = float(np.mean(data))
                frame.at[row, "run_medians"] = [float(np.median(data))]
                frame.at[row, "ops"] = 1 / float(np.mean(data))
        return frames

    clean = pool(32, rare=slow_runs)
    slow = pool(8, slowdown=0.10)
    config = CalibrationConfig(
        runs=32, repeats=2, pool=32, inject="test_=0.1,*[torchrl*=0", slow_pool=8, confirm=2
    )
    cal = analyse_pool(config, clean, slow)
    assert cal.confirm == 2 and len(cal.confirm_draws) == 32
    for (a, b), (ca, cb) in zip(cal.draws, cal.confirm_draws, strict=True):
        # a confirmation runs other processes than the comparison it confirms
        assert len(ca) == len(cb) == 2 and not ({*a, *b} & {*ca, *cb}) and not set(ca) & set(cb)
    # not even before confirmation: with two runs a side, a shift of one run large
    # enough to flag also makes its side's variance disown the calibrated prior
    # (rlpace.bench.stats.prior_conflict), and its own 2 df leave a wide gate; without
    # that rule every comparison holding the slow process flagged it
    with_slow = sum(1 for a, b in cal.draws if slow_runs & {*a, *b})
    assert with_slow >= 1 and cal.false_alarm_rate_first == 0.0, md_table(cal)
    # the slow process does not come back in the confirmation, so nothing stands
    assert cal.false_alarm_rate_calibrated == 0.0, md_table(cal)
    assert "before confirmation" in md_table(cal)
    # a real 10% slow-down repeats: the promise of 90% power still holds
    power = cal.detection_power()
    assert power.trials >= 32 * 4 and power.rate >= 0.9, md_table(cal)
    back = read_calibration_from(cal)
    assert (back.confirm, back.confirm_draws) == (2, cal.confirm_draws)
    assert math.isclose(back.false_alarm_rate_first, cal.false_alarm_rate_first)
    # without a confirmation, what stands is what the first comparisons flagged
    single = analyse_pool(replace(config, confirm=0), clean, slow)
    assert math.isnan(single.false_alarm_rate_first)
    assert math.isclose(single.false_alarm_rate_calibrated, cal.false_alarm_rate_first)


def test_a_name_that_moved_to_the_aa_package_says_where_it_went():
    import rlpace.bench.calibration as calibration

    with pytest.raises(
        ImportError,
        match=r"moved to rlpace\.bench\.aa.*Fix: from rlpace\.bench\.aa import run_calibration",
    ):
        from rlpace.bench.calibration import run_calibration  # noqa: F401
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        calibration.no_such_name  # noqa: B018
    assert not hasattr(calibration, "no_such_name")
    # the message names the new place without loading it (that would be the old cycle)
    code = (
        "import sys\n"
        "try:\n    from rlpace.bench.calibration import analyse_pool\n"
        "except ImportError:\n    pass\n"
        "print('rlpace.bench.aa' in sys.modules, 'rlpace.bench.judge' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
