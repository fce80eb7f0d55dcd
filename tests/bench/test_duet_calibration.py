"""The duet calibration: per-benchmark pair spreads from A/A duets, the prior of pr's
paired tests (``rlpace-bench aa --duets``, ``compare --paired --duets``)."""

import json
import math
import shutil
from dataclasses import replace

import numpy as np
import pytest

from rlpace.bench.calibration import (
    DuetCalibration,
    PrRunDuets,
    duet_calibration_from_pr_runs,
    duet_calibration_from_runs,
    machine_environment,
    read_duet_calibration,
)
from rlpace.bench.cli import main
from rlpace.bench.comparison import Verdict
from rlpace.bench.comparison_record import record_from_dict
from rlpace.bench.environment import collect_environment
from rlpace.bench.errors import BenchInputError
from rlpace.bench.judge import Judge
from rlpace.bench.pipeline import PipelineConfig, pr_judge
from rlpace.bench.render import render_report
from rlpace.bench.results import load_results, merge_runs

FLAGGED = {Verdict.IMPROVED, Verdict.WORSENED}
META = collect_environment(repo=None)


def _write_duets(out, rng, spreads, pairs, *, shift=None, load=0.15, meta=META):
    """``pairs`` duets as ``head-<k>.json`` / ``base-<k>.json`` in ``out``: pair ``k``
    met a load both sides share (lognormal, ``load``); each run of benchmark ``n`` its
    own process noise, so that its pairs' log ratios spread ``spreads[n]`` %;
    ``shift[n]`` slows head's side. Benchmarks named ``torchrl-*`` are controls."""
    shift = shift or {}
    out.mkdir(parents=True, exist_ok=True)
    heads, bases = [], []
    for k in range(pairs):
        common = rng.lognormal(0, load)
        for side, files in (("base", bases), ("head", heads)):
            benchmarks = []
            for name, spread in spreads.items():
                own = spread / 100 / math.sqrt(2)
                center = 1e-3 * common * rng.lognormal(0, own)
                if side == "head":
                    center *= 1 + shift.get(name, 0.0)
                data = (center * rng.lognormal(0, 0.01, 20)).tolist()
                benchmarks.append(
                    {
                        "name": f"test_x[{name}]",
                        "fullname": f"t.py::test_x[{name}]",
                        "params": {"impl": name.split("-")[0]},
                        "extra_info": {},
                        "stats": {"data": data},
                    }
                )
            doc = {
                "version": "5.1.0",
                "datetime": "2026-12-02T06:00:00",
                "machine_info": {"node": "box", "rlpace": dict(meta)},
                "benchmarks": benchmarks,
            }
            path = out / f"{side}-{k}.json"
            path.write_text(json.dumps(doc), encoding="utf-8")
            files.append(path)
    return heads, bases


QUIET = {f"rlpace-q{i}": 2.0 for i in range(6)}
NOISY = {f"rlpace-n{i}": 16.0 for i in range(6)}
CONTROLS = {f"torchrl-c{i}": 4.0 for i in range(3)}


def _judged(heads, bases, **judge):
    head = merge_runs([load_results(p) for p in heads])
    base = merge_runs([load_results(p) for p in bases])
    return Judge(paired=True, **judge).judge(head, base)


def test_a_pool_measures_each_benchmarks_pair_spread_and_reads_back(tmp_path):
    rng = np.random.default_rng(1)
    heads, bases = _write_duets(tmp_path / "pool", rng, {**QUIET, **NOISY}, 16)
    cal = duet_calibration_from_runs(heads, bases, repeats=4)
    assert (
        cal.pairs == 16
        and cal.environment == machine_environment({"rlpace": META})
        and cal.created.startswith("2026-12-02")
    )
    quiet = [cal.spreads[f"t.py::test_x[{n}]"][0] for n in QUIET]
    noisy = [cal.spreads[f"t.py::test_x[{n}]"][0] for n in NOISY]
    assert all(1.0 < s < 3.5 for s in quiet) and all(9 < s < 26 for s in noisy)
    # the shared load cancelled: a single side's runs spread ~15 %, the pairs 2 %
    assert max(quiet) < 4
    path = tmp_path / "cpu-duets.json"
    path.write_text(json.dumps(cal.to_dict()))
    assert read_duet_calibration(path) == cal
    priors = cal.paired_priors()
    assert priors["t.py::test_x[rlpace-q0]"][1] == 15


def test_pool_priors_let_four_pairs_see_a_change_the_run_alone_cannot(tmp_path):
    """A 6 % slow-down of a quiet benchmark: its four pairs alone, with a prior fitted
    over quiet and noisy benchmarks alike, leave it a gate too wide; the spread of its
    pairs in 16 A/A duets lends it the degrees of freedom to flag it, and nothing else."""
    spreads = {**QUIET, **NOISY, **CONTROLS}
    rng = np.random.default_rng(4)
    pool = duet_calibration_from_runs(*_write_duets(tmp_path / "pool", rng, spreads, 16))
    heads, bases = _write_duets(tmp_path / "pr", rng, spreads, 4, shift={"rlpace-q0": 0.06})
    alone = {r.name: r for r in _judged(heads, bases).rows}
    lent = {r.name: r for r in _judged(heads, bases, paired_priors=pool.paired_priors()).rows}
    target = "test_x[rlpace-q0]"
    assert alone[target].verdict is Verdict.UNCHANGED
    assert lent[target].verdict is Verdict.WORSENED and lent[target].method == "paired"
    assert {n for n, r in lent.items() if r.verdict in FLAGGED} == {target}
    # the pool's priors, stretched by this run's spread over it (1.14x here: 15
    # benchmarks of 4 pairs read a day like the pool's a little wide), still narrow it
    assert lent[target].noise_pct < alone[target].noise_pct / 1.3


def test_with_pool_priors_aa_duets_flag_nothing_across_seeds(tmp_path):
    spreads = {**QUIET, **NOISY, **CONTROLS}
    rng = np.random.default_rng(9)
    pool = duet_calibration_from_runs(*_write_duets(tmp_path / "pool", rng, spreads, 16))
    for seed in range(12):
        rng = np.random.default_rng(100 + seed)
        heads, bases = _write_duets(tmp_path / f"aa{seed}", rng, spreads, 4)
        out = _judged(heads, bases, paired_priors=pool.paired_priors())
        assert not [r.name for r in out.rows if r.verdict in FLAGGED], seed


def test_aa_duets_from_writes_the_file_that_compare_and_pr_judge_alike(tmp_path, capsys):
    spreads = {**QUIET, **NOISY, **CONTROLS}
    rng = np.random.default_rng(5)
    _write_duets(tmp_path / "pool", rng, spreads, 16)
    out = tmp_path / "cal"
    assert main(["aa", "--duets-from", str(tmp_path / "pool"), "--out-dir", str(out)]) == 0
    said = capsys.readouterr().out
    cal = read_duet_calibration(out / "cpu-duets.json")
    assert cal.pairs == 16 and cal.family_size == 12 and cal.repeats == 4
    # held out: 200 random splits judged as pr runs them, the prior from the other pairs
    assert cal.held_out_runs == 200
    assert 0 <= cal.held_out_alarms <= cal.held_out_alarms_first <= 200 * 0.1
    assert "16 A/A duets, 15 benchmarks" in said and "200 random splits" in said
    # a PR run of four duets with a real 8 % change, judged by compare and by pr's judge
    heads, bases = _write_duets(tmp_path / "pr", rng, spreads, 4, shift={"rlpace-q1": 0.08})
    report = tmp_path / "compare.json"
    args = ["compare", "--paired", "--duets", str(out / "cpu-duets.json"), "--json", str(report)]
    args += ["-o", str(tmp_path / "r.md"), "--head", *map(str, heads), "--base", *map(str, bases)]
    assert main(args) == 0
    by_compare = {r["fullname"]: r["verdict"] for r in json.loads(report.read_text())["rows"]}
    judge = pr_judge(PipelineConfig(), None, duets_file=out / "cpu-duets.json")
    judge = replace(judge, paired=True)
    head = merge_runs([load_results(p) for p in heads])
    by_pr = {r.fullname: r.verdict.value for r in judge.judge(head, merge_runs(
        [load_results(p) for p in bases])).rows}  # fmt: skip
    assert by_compare == by_pr and by_pr["t.py::test_x[rlpace-q1]"] == "worsened"
    comment = (tmp_path / "r.md").read_text()
    assert "weighed with the spread of its pairs in 16 A/A duets" in comment
    assert "another machine" not in comment
    # the trusted comment job validates what pr wrote before it renders it again
    data = json.loads(report.read_text())
    data["pipeline"] = {"set": "cpu"}
    again = record_from_dict(data, source="cpu.json").comparison
    assert again.duet_calibration["held_out_alarms_first"] == cal.held_out_alarms_first
    assert "weighed with the spread of its pairs in 16 A/A duets" in render_report(again)


def test_a_pool_from_another_machine_is_named_in_the_comment(tmp_path):
    spreads = {**QUIET, **CONTROLS}
    rng = np.random.default_rng(6)
    pool = duet_calibration_from_runs(
        *_write_duets(tmp_path / "pool", rng, spreads, 8, meta={**META, "cpu_count": 64})
    )
    heads, bases = _write_duets(tmp_path / "pr", rng, spreads, 4)
    head = merge_runs([load_results(p) for p in heads])
    base = merge_runs([load_results(p) for p in bases])
    judge = Judge.from_calibration(None, duets=pool, duets_source="cpu-duets.json", paired=True)
    note = judge.judge(head, base).duet_calibration
    assert (
        note["mismatch"] == {"cpu_count": [64, META["cpu_count"]]}
        and note["source"] == "cpu-duets.json"
    )


def test_a_pool_timed_with_another_rounds_floor_is_named_and_an_older_one_is_not(tmp_path):
    """The pair spreads hold for runs of the pool's rounds floor (``--wall-rounds``):
    a pool of floored runs judging runs without the floor is named in the comment; a
    pool recorded before the floor existed (no ``wall_rounds``) is not compared on it."""
    spreads = {**QUIET, **CONTROLS}
    rng = np.random.default_rng(7)
    floored = duet_calibration_from_runs(
        *_write_duets(tmp_path / "pool", rng, spreads, 8, meta={**META, "wall_rounds": "20:1"})
    )
    assert floored.environment["wall_rounds"] == "20:1"
    heads, bases = _write_duets(
        tmp_path / "pr", rng, spreads, 4, meta={**META, "wall_rounds": "0:1"}
    )
    head = merge_runs([load_results(p) for p in heads])
    base = merge_runs([load_results(p) for p in bases])
    judge = Judge.from_calibration(None, duets=floored, duets_source="cpu-duets.json", paired=True)
    comparison = judge.judge(head, base)
    assert comparison.duet_calibration["mismatch"] == {"wall_rounds": ["20:1", "0:1"]}
    assert "wall_rounds" in render_report(comparison)
    older = DuetCalibration(
        "cpu", floored.pairs, floored.spreads, repeats=4, family_size=floored.family_size,
        environment={k: v for k, v in floored.environment.items() if k != "wall_rounds"},
    )  # fmt: skip
    judge = Judge.from_calibration(None, duets=older, duets_source="cpu-duets.json", paired=True)
    assert not judge.judge(head, base).duet_calibration.get("mismatch")


def test_bad_duet_calibrations_and_options_are_refused_with_a_fix(tmp_path, capsys):
    sequential = tmp_path / "cpu.json"
    sequential.write_text(json.dumps({"format": "rlpace-bench-calibration", "version": 2}))
    with pytest.raises(BenchInputError, match="expected a duet calibration .* Fix: rerun"):
        read_duet_calibration(sequential)
    broken = DuetCalibration("cpu", 8, {"a": (3.0, 8)}).to_dict()
    broken["benchmarks"]["a"]["pairs"] = "many"
    (tmp_path / "broken.json").write_text(json.dumps(broken))
    with pytest.raises(BenchInputError, match="broken field"):
        read_duet_calibration(tmp_path / "broken.json")
    (tmp_path / "text.json").write_text("not json")
    with pytest.raises(
        BenchInputError,
        match=r"expected a duet calibration from `rlpace-bench aa --duets` \(JSON\), got a "
        r"parse error: .* Fix: run `rlpace-bench aa --duets 16`, or drop --duets",
    ):
        read_duet_calibration(tmp_path / "text.json")
    # the CLI: exit 2 and the reason, never a traceback
    heads, bases = _write_duets(tmp_path / "pr", np.random.default_rng(1), QUIET, 2)
    args = ["compare", "--duets", str(sequential), "--head", str(heads[0]), "--base", str(bases[0])]
    assert main(args) == 2
    assert "--duets: expected duet runs judged pair by pair" in capsys.readouterr().err
    assert main(["aa", "--duets-from", str(tmp_path / "pr")]) == 2
    err = capsys.readouterr().err
    assert "expected three or more duets" in err and "found 2" in err
    assert main(["aa", "--duets", "2"]) == 2
    assert "expected three or more A/A duets" in capsys.readouterr().err


def test_aa_duets_from_pools_several_directories_as_pr_leaves_them(tmp_path, capsys):
    """``pr`` leaves its duets in one directory a stage: the first with every timed case
    and the twins, the extra ones with the cases that asked for more pairs. Pooled
    from several A/A runs, each row's spread comes from the duets that timed it, and
    the family is every row they timed but the controls."""
    rng = np.random.default_rng(11)
    dirs = []
    for run in range(3):  # three A/A pr runs
        first = tmp_path / f"run{run}" / "cpu"
        _write_duets(first, rng, {**QUIET, **NOISY, **CONTROLS}, 2)
        extra = tmp_path / f"run{run}" / "cpu-extend-1"
        _write_duets(extra, rng, NOISY, 2)  # the wide rows asked for more pairs
        dirs += [first, extra]
    out = tmp_path / "cal"
    args = ["aa", "--out-dir", str(out)] + [a for d in dirs for a in ("--duets-from", str(d))]
    assert main(args) == 0
    cal = read_duet_calibration(out / "cpu-duets.json")
    assert cal.pairs == 12 and cal.family_size == 12
    assert {n: k for n, (_, k) in cal.spreads.items()} == {
        **{f"t.py::test_x[{n}]": 6 for n in {**QUIET, **CONTROLS}},
        **{f"t.py::test_x[{n}]": 12 for n in NOISY},
    }
    assert cal.held_out_runs == 200
    assert "12 A/A duets" in capsys.readouterr().out
    # a directory without duets among several is named, not skipped
    (tmp_path / "empty").mkdir()
    assert main([*args, "--duets-from", str(tmp_path / "empty")]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'empty'}: expected duets as head-<k>.json" in err and "Fix:" in err
    # a directory named twice (here through another spelling) would double its duets
    again = str(dirs[0].parent / ".." / dirs[0].parent.name / "cpu")
    assert main([*args, "--duets-from", again]) == 2
    err = capsys.readouterr().err
    assert "expected each directory of duets once, got it twice" in err and "Fix:" in err
    # two directories of one duet each are still too few
    few = [
        _write_duets(tmp_path / f"few{k}", rng, QUIET, 1) and tmp_path / f"few{k}" for k in (0, 1)
    ]
    assert main(["aa", "--duets-from", str(few[0]), "--duets-from", str(few[1])]) == 2
    err = capsys.readouterr().err
    assert "2 directories: expected three or more duets" in err and "found 2" in err


def test_held_out_splits_never_show_the_judge_its_own_pairs(tmp_path):
    """Each split: 4 pairs judged, 4 others for the confirmation, the prior from the
    remaining 8 only; which side of a pair is head is drawn at random."""
    heads, bases = _write_duets(tmp_path / "pool", np.random.default_rng(2), QUIET, 16)
    pair_of = {p: k for k, p in enumerate(heads)} | {p: k for k, p in enumerate(bases)}
    seen = []

    def judge_split(split, prior):
        (h, b), (again_h, again_b) = split
        judged = {pair_of[p] for p in h} | {pair_of[p] for p in b}
        again = {pair_of[p] for p in again_h} | {pair_of[p] for p in again_b}
        assert len(judged) == len(again) == 4 and not judged & again
        assert prior.pairs == 8 and all(n == 8 for _, n in prior.spreads.values())
        assert all(pair_of[x] == pair_of[y] for x, y in zip(h, b))  # a pair stays a pair
        seen.append(sum(p in bases for p in h))  # pairs whose base side plays head
        return len(seen) % 10 == 0, len(seen) % 20 == 0

    cal = duet_calibration_from_runs(heads, bases, judge_split=judge_split, splits=40, seed=3)
    assert (cal.held_out_runs, cal.held_out_alarms_first, cal.held_out_alarms) == (40, 4, 2)
    assert 0 < sum(seen) < 40 * 4  # sides were swapped, not always and not never
    again = duet_calibration_from_runs(heads, bases, judge_split=judge_split, splits=40, seed=3)
    assert again == cal  # seeded
    small = duet_calibration_from_runs(heads[:10], bases[:10], judge_split=judge_split)
    assert small.held_out_runs == 0  # 10 pairs cannot give 4 + 4 + a prior of 3


def test_a_pool_of_copies_is_refused_and_a_zero_spread_lends_no_prior(tmp_path, capsys):
    """Copies of one run as "duets" are no A/A pool (every ratio exactly 1): refused
    with the fix. A spread of 0 would trust any change, so it lends no prior."""
    heads, bases = _write_duets(tmp_path / "pool", np.random.default_rng(3), QUIET, 3)
    for head, base in zip(heads, bases):
        base.write_bytes(head.read_bytes())
    assert main(["aa", "--duets-from", str(tmp_path / "pool")]) == 2
    err = capsys.readouterr().err
    assert "expected the two runs of a duet, got the same timings" in err and "Fix:" in err
    # three copies of one real duet: every pair alike
    for k in (1, 2):
        heads[k].write_bytes(heads[0].read_bytes())
        bases[k].write_bytes(bases[0].read_bytes())
    bases[0].write_text(bases[0].read_text().replace('"data": [', '"data": [0.5, ', 1))
    for k in (1, 2):
        bases[k].write_bytes(bases[0].read_bytes())
    assert main(["aa", "--duets-from", str(tmp_path / "pool")]) == 2
    assert "got the same ratios in every pair" in capsys.readouterr().err
    cal = DuetCalibration("cpu", 8, {"coarse": (0.0, 8), "fine": (2.0, 8)})
    assert list(cal.paired_priors()) == ["fine"]


def test_a_benchmark_whose_pairs_spread_far_beyond_its_pool_falls_back(tmp_path, monkeypatch):
    """A quiet benchmark of the pool (2 % pair spread) whose pairs spread 30 % today (a
    busy host, a process that lands on one of two speeds) is judged on its own pairs,
    not its pool prior: A/A runs never flag it. Kept on the calm prior (no conflict test), the same
    runs flag it in some seeds: a few wild pairs read as a certain change."""
    from rlpace.bench import stats as stats_module

    spreads = {**QUIET, **NOISY, **CONTROLS}
    rng = np.random.default_rng(9)
    pool = duet_calibration_from_runs(*_write_duets(tmp_path / "pool", rng, spreads, 16))
    today = {**spreads, "rlpace-q0": 30.0}
    target = "test_x[rlpace-q0]"
    runs = []
    for seed in range(16):
        rng = np.random.default_rng(300 + seed)
        runs.append(_write_duets(tmp_path / f"aa{seed}", rng, today, 4))
    flagged = [
        r.name
        for heads, bases in runs
        for r in _judged(heads, bases, paired_priors=pool.paired_priors()).rows
        if r.verdict in FLAGGED
    ]
    # (another benchmark may be flagged in one of the 16: the family's 5 % per run,
    # which pr's confirmation then takes out)
    assert target not in flagged
    with monkeypatch.context() as m:
        m.setattr(stats_module, "prior_conflict", lambda *a: False)
        calm = [
            r.name
            for heads, bases in runs
            for r in _judged(heads, bases, paired_priors=pool.paired_priors()).rows
            if r.verdict in FLAGGED
        ]
    assert target in calm


def test_on_a_busier_day_the_pool_priors_stretch_so_aa_runs_stay_quiet(tmp_path, monkeypatch):
    """A day whose pairs spread 4x the pool's: the pool's calm priors, lent as they are,
    give each benchmark's 4 tight-by-chance pairs a calm gate and flag most A/A runs;
    stretched by the day (fitted over the run's benchmarks) they flag almost none, and a
    25 % slow-down of a quiet benchmark (8 % pair spread today) is still flagged."""
    import rlpace.bench.compare as compare_module

    spreads = {**QUIET, **NOISY, **CONTROLS}
    pool = duet_calibration_from_runs(
        *_write_duets(tmp_path / "pool", np.random.default_rng(21), spreads, 16)
    )
    priors = pool.paired_priors()
    busy = {name: 4 * spread for name, spread in spreads.items()}
    runs = [
        _write_duets(tmp_path / f"aa{seed}", np.random.default_rng(500 + seed), busy, 4)
        for seed in range(24)
    ]

    def runs_flagging() -> int:
        return sum(
            any(r.verdict in FLAGGED for r in _judged(h, b, paired_priors=priors).rows)
            for h, b in runs
        )

    stretched = runs_flagging()
    with monkeypatch.context() as m:
        m.setattr(compare_module, "fit_prior_stretch", lambda *a: None)
        calm = runs_flagging()
    assert stretched <= 1 and calm >= 8, (stretched, calm)
    caught = 0
    for seed in range(12):
        heads, bases = _write_duets(
            tmp_path / f"slow{seed}", np.random.default_rng(900 + seed), busy, 4,
            shift={"rlpace-q2": 0.25},
        )  # fmt: skip
        run = _judged(heads, bases, paired_priors=priors)
        assert run.prior_stretch is not None and run.prior_stretch[0] > 4
        caught += any(r.verdict in FLAGGED for r in run.rows if r.name == "test_x[rlpace-q2]")
    assert caught >= 10


def test_a_confirmation_judges_its_few_rows_with_the_first_runs_stretch(tmp_path):
    """The confirmation re-runs one flagged benchmark: too few to fit a stretch of its
    own, so it borrows the first comparison's. Fresh pairs of a busy day with no change
    then seldom confirm the flag; judged by the pool's calm prior they would, often."""
    spreads = {**QUIET, **NOISY, **CONTROLS}
    pool = duet_calibration_from_runs(
        *_write_duets(tmp_path / "pool", np.random.default_rng(21), spreads, 16)
    )
    judge = Judge(paired=True, paired_priors=pool.paired_priors())
    busy = {name: 4 * spread for name, spread in spreads.items()}

    def merged(paths):
        return merge_runs([load_results(p) for p in paths])

    heads, bases = _write_duets(
        tmp_path / "first", np.random.default_rng(901), busy, 4, shift={"rlpace-q2": 0.3}
    )
    first = judge.judge(merged(heads), merged(bases))
    assert first.prior_stretch is not None and first.prior_stretch[0] > 4
    assert [r.name for r in first.rows if r.verdict in FLAGGED] == ["test_x[rlpace-q2]"]
    calm_first = replace(first, prior_stretch=None)
    confirmed = {"stretched": 0, "calm": 0}
    for seed in range(40):  # fresh A/A pairs: the flag was the day's noise
        again = _write_duets(tmp_path / f"aa{seed}", np.random.default_rng(700 + seed), busy, 4)
        for label, base_run in (("stretched", first), ("calm", calm_first)):
            out = judge.confirm(base_run, merged(again[0]), merged(again[1]))
            confirmed[label] += any(r.confirmed for r in out.rows)
    assert confirmed["stretched"] <= 2 and confirmed["calm"] >= 4, confirmed


def test_a_day_busier_than_the_pools_is_named_in_the_comment(tmp_path):
    """The same benchmarks on a day whose pairs spread 6× the pool's: the comment warns
    that only large changes could be told from noise; a day like the pool's does not."""
    spreads = {**QUIET, **NOISY, **CONTROLS}
    rng = np.random.default_rng(11)
    pool = duet_calibration_from_runs(*_write_duets(tmp_path / "pool", rng, spreads, 16))
    judge = {"paired_priors": pool.paired_priors()}
    calm = _judged(*_write_duets(tmp_path / "calm", rng, spreads, 4), **judge)
    busy_spreads = {name: 6 * spread for name, spread in spreads.items()}
    busy = _judged(*_write_duets(tmp_path / "busy", rng, busy_spreads, 4), **judge)
    assert calm.pair_spread["benchmarks"] == busy.pair_spread["benchmarks"] == 15
    assert calm.pair_spread["ratio"] < 1.5 and busy.pair_spread["ratio"] > 3
    # the pool's priors are widened by the day (6x, read from 15 benchmarks of 4 pairs),
    # not left calm: a calm prior lent to a busy day's tight pairs reads noise as change
    assert calm.pair_spread.get("stretch", 1.0) < 1.5 < 3 < busy.pair_spread["stretch"] < 9
    assert busy.prior_stretch[0] == pytest.approx(busy.pair_spread["stretch"] ** 2, rel=0.01)
    note = pool.note("cpu-duets.json")
    said = {day: render_report(replace(c, duet_calibration=note)) for day, c in
            (("calm", calm), ("busy", busy))}  # fmt: skip
    assert "Today's pairs spread" not in said["calm"]
    assert f"⚠️ Today's pairs spread {busy.pair_spread['ratio']:.1f}× as wide" in said["busy"]
    assert f"widened {busy.pair_spread['stretch']:.1f}× to match" in said["busy"]
    # what the trusted comment job reads back says the same
    data = json.loads(json.dumps(busy.to_dict())) | {"pipeline": {"set": "cpu"}}
    again = record_from_dict(data, source="cpu.json").comparison
    assert again.pair_spread == busy.pair_spread and again.prior_stretch == busy.prior_stretch


def test_the_comment_says_when_the_pools_check_used_another_threshold(tmp_path):
    """A pool whose held-out check ran at 5 % cited by a run whose duets met 2 %: the
    comment says so (its figures do not describe this run's rule), and the trusted
    comment job reads the threshold back; a pool checked at the run's own says nothing."""
    rng = np.random.default_rng(5)
    pool = duet_calibration_from_runs(
        *_write_duets(tmp_path / "pool", rng, QUIET, 8), threshold=5.0
    )
    run = _judged(
        *_write_duets(tmp_path / "run", rng, QUIET, 4), paired_priors=pool.paired_priors()
    )
    note = replace(pool, held_out_runs=200, held_out_alarms=0).note("cpu-duets.json")
    assert note["threshold"] == 5.0
    other = replace(run, paired_threshold=2.0, duet_calibration=note)
    said = render_report(other)
    assert "judged as this run is but at a 5% effect threshold (this run: 2%)" in said
    data = json.loads(json.dumps(other.to_dict())) | {"pipeline": {"set": "cpu"}}
    back = record_from_dict(data, source="cpu.json").comparison
    assert back.duet_calibration["threshold"] == 5.0 and render_report(back) == said
    same = replace(run, paired_threshold=5.0, duet_calibration=note)
    assert "judged as this run is, 200 held-out splits" in render_report(same)


def _write_pr_run(root, rng, *, shift=None, confirm_shift=None):
    """The duets an A/A ``pr`` run leaves in ``root/build/rlpace-bench/runs``: two first
    duets of every timed case and the twins, two extra duets of the wide rows, and,
    with ``confirm_shift``, four confirmation duets of ``rlpace-q0``."""
    runs = root / "build" / "rlpace-bench" / "runs"
    first = _write_duets(runs / "cpu", rng, {**QUIET, **NOISY, **CONTROLS}, 2, shift=shift)
    extra = _write_duets(runs / "cpu-extend-1", rng, NOISY, 2, shift=shift)
    if confirm_shift is not None:
        _write_duets(runs / "cpu-confirm", rng, {"rlpace-q0": 2.0}, 4, shift=confirm_shift)
    return first, extra


def test_aa_pr_runs_judges_each_run_with_a_prior_from_the_other_runs_only(tmp_path, capsys):
    """``aa --pr-runs``: the duets of several A/A ``pr`` runs pooled, and each run judged
    as ``pr`` judged it (its first and extra duets, then its confirmation) with a prior
    from the other runs' duets. A run that really slowed a case is caught by the
    check; its own confirmation clears it only when the confirmation does not repeat
    it, and a flag the run holds no confirmation of stays."""
    rng = np.random.default_rng(21)
    for k in range(4):
        _write_pr_run(tmp_path / f"aa{k}", rng)
    out = tmp_path / "cal"
    args = ["aa", "--out-dir", str(out)]
    args += [a for k in range(4) for a in ("--pr-runs", str(tmp_path / f"aa{k}"))]
    assert main(args) == 0
    said = capsys.readouterr().out
    cal = read_duet_calibration(out / "cpu-duets.json")
    assert (cal.pairs, cal.family_size, cal.held_out_by, cal.held_out_runs) == (16, 12, "run", 4)
    assert {n: k for n, (_, k) in cal.spreads.items()} == {
        **{f"t.py::test_x[{n}]": 8 for n in {**QUIET, **CONTROLS}},
        **{f"t.py::test_x[{n}]": 16 for n in NOISY},
    }
    assert cal.held_out_alarms == cal.held_out_alarms_first == 0
    assert "each of the 4 A/A pr runs judged as pr judged it" in said
    # a fifth "A/A" run that in truth slowed rlpace-q0 by 12 %: flagged by the others' prior
    slow = {"rlpace-q0": 0.12}
    _write_pr_run(tmp_path / "slow", rng, shift=slow)
    runs = [*args[3:], "--pr-runs", str(tmp_path / "slow")]
    assert main(["aa", "--out-dir", str(out), *runs]) == 0
    cal = read_duet_calibration(out / "cpu-duets.json")
    assert (cal.held_out_runs, cal.held_out_alarms_first, cal.held_out_alarms) == (5, 1, 1)
    # its confirmation repeats the change: still flagged; it does not: cleared
    confirm = tmp_path / "slow" / "build" / "rlpace-bench" / "runs" / "cpu-confirm"
    for shift, after in ((slow, 1), ({}, 0)):
        shutil.rmtree(confirm, ignore_errors=True)
        _write_duets(confirm, rng, {"rlpace-q0": 2.0}, 4, shift=shift)
        assert main(["aa", "--out-dir", str(out), *runs]) == 0
        cal = read_duet_calibration(out / "cpu-duets.json")
        assert (cal.held_out_alarms_first, cal.held_out_alarms) == (1, after), shift
    # the comment names what the check judged
    record = json.loads(json.dumps(
        Judge.from_calibration(None, duets=cal, duets_source="cpu-duets.json", paired=True)
        .judge(*[merge_runs([load_results(p) for p in side]) for side in _write_duets(
            tmp_path / "pr", rng, {**QUIET, **CONTROLS}, 4)]).to_dict()))  # fmt: skip
    record["pipeline"] = {"set": "cpu"}
    again = record_from_dict(record, source="cpu.json").comparison
    assert again.duet_calibration["held_out_by"] == "run"
    assert (
        "the 5 A/A `pr` runs they came from, each with a prior from the others' duets, "
        "flagged anything in 0 after the confirmation, 1 before" in render_report(again)
    )


def test_pr_runs_held_out_prior_never_holds_the_judged_runs_duets(tmp_path):
    rng = np.random.default_rng(22)
    runs = []
    for k, pairs in enumerate((2, 3, 4)):
        heads, bases = _write_duets(tmp_path / f"r{k}", rng, QUIET, pairs)
        runs.append(PrRunDuets(f"r{k}", tuple(heads), tuple(bases)))
    seen = {}

    def judge_run(run, prior):
        seen[run.source] = (prior.pairs, {n for _, n in prior.spreads.values()})
        return run.source == "r1", False

    cal = duet_calibration_from_pr_runs(runs, judge_run=judge_run)
    assert seen == {"r0": (7, {7}), "r1": (6, {6}), "r2": (5, {5})}
    assert (cal.pairs, cal.held_out_runs, cal.held_out_alarms_first, cal.held_out_alarms) == (
        9, 3, 1, 0,
    )  # fmt: skip
    assert duet_calibration_from_pr_runs(runs[2:]).held_out_runs == 0  # one run: no check
    assert DuetCalibration.from_dict(cal.to_dict()) == cal
    older = cal.to_dict()
    del older["held_out_by"]  # a file written before runs were judged: splits
    assert DuetCalibration.from_dict(older).held_out_by == "split"
    with pytest.raises(BenchInputError, match="held_out_by 'coin'"):
        DuetCalibration.from_dict({**older, "held_out_by": "coin"})


def test_aa_pr_runs_refuses_what_is_not_a_pr_run_with_a_fix(tmp_path, capsys):
    rng = np.random.default_rng(23)
    _write_pr_run(tmp_path / "aa0", rng)
    _write_pr_run(tmp_path / "aa1", rng)
    (tmp_path / "empty").mkdir()
    assert (
        main(["aa", "--pr-runs", str(tmp_path / "aa0"), "--pr-runs", str(tmp_path / "empty")]) == 2
    )
    err = capsys.readouterr().err
    assert "expected the runs directory of an A/A `pr` run" in err and "Fix:" in err
    # the same run twice, once through the checkout and once through its runs directory
    runs = tmp_path / "aa0" / "build" / "rlpace-bench" / "runs"
    assert main(["aa", "--pr-runs", str(tmp_path / "aa0"), "--pr-runs", str(runs)]) == 2
    assert "expected each A/A pr run once, got it twice" in capsys.readouterr().err
    args = ["aa", "--pr-runs", str(tmp_path / "aa0"), "--duets-from", str(runs / "cpu")]
    assert main(args) == 2
    assert "expected one source of duets, got --duets-from and --pr-runs" in (
        capsys.readouterr().err
    )
    # a run without duets (its count tier was off, so nothing ran as duets)
    (tmp_path / "solo" / "cpu").mkdir(parents=True)
    assert (
        main(["aa", "--pr-runs", str(tmp_path / "aa1"), "--pr-runs", str(tmp_path / "solo")]) == 2
    )
    assert "expected the duets of a `pr` run" in capsys.readouterr().err


def test_aa_pr_runs_refuses_a_run_that_compared_two_trees(tmp_path, capsys):
    """A `make bench` of a real change (or of uncommitted edits) is no A/A run: pooled,
    its change would widen the spreads and hide that change in later runs."""
    rng = np.random.default_rng(24)
    _write_pr_run(tmp_path / "aa0", rng)
    runs = tmp_path / "real" / "build" / "rlpace-bench" / "runs" / "cpu"
    _write_duets(runs, rng, QUIET, 2, meta={**META, "git_commit": "b" * 40})
    for head in runs.glob("head-*.json"):
        head.write_text(head.read_text().replace("b" * 40, "a" * 40))
    args = ["aa", "--pr-runs", str(tmp_path / "aa0"), "--pr-runs", str(tmp_path / "real")]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"got head {'a' * 40} against base {'b' * 40}" in err and "Fix:" in err
    for head in runs.glob("head-*.json"):  # the same commit, but edits not committed
        doc = json.loads(head.read_text())
        doc["machine_info"]["rlpace"].update(git_commit="b" * 40, git_dirty=True)
        head.write_text(json.dumps(doc))
    assert main(args) == 2
    assert "with uncommitted changes" in capsys.readouterr().err
