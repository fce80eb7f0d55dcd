"""One judge: ``compare``, ``pr`` and ``aa`` turn the same runs into the same verdicts."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from rlpace.bench.calibration import BenchmarkNoise, Calibration, read_calibration
from rlpace.bench.cli import main as cli_main
from rlpace.bench.compare import compare_runs
from rlpace.bench.comparison import Verdict
from rlpace.bench.errors import BenchInputError
from rlpace.bench.gates import NoiseModel
from rlpace.bench.judge import Judge
from rlpace.bench.pipeline import PipelineConfig, pr_judge
from rlpace.bench.results import load_results, merge_runs

ROOT = Path(__file__).resolve().parents[2]
FLAGS = {Verdict.IMPROVED, Verdict.WORSENED}


def _run_file(path: Path, rng: np.random.Generator, factors: dict[str, float]) -> Path:
    """One run as pytest-benchmark writes it: raw rounds around each case's centre."""
    benchmarks = []
    for name, factor in factors.items():
        impl = "torchrl" if "torchrl" in name else "rlpace"
        data = (1e-3 * factor * rng.lognormal(0, 0.01, 40)).tolist()
        benchmarks.append(
            {
                "fullname": f"t.py::{name}",
                "name": name,
                "params": {"impl": impl},
                "stats": {"data": data},
            }
        )
    doc = {
        "machine_info": {},
        "commit_info": {},
        "benchmarks": benchmarks,
        "datetime": "2026-12-01T00:00:00",
        "version": "5.1.0",
    }
    path.write_text(json.dumps(doc))
    return path


@pytest.fixture
def runs(tmp_path: Path) -> dict[str, list[Path]]:
    """Two runs a side. The head side met more load: every case, the torchrl controls
    too, runs ~12% slower, and one rlpace case really got 20% slower on top."""
    rng = np.random.default_rng(3)
    cases = [f"case[torchrl-{i}]" for i in range(6)] + [f"case[rlpace-{i}]" for i in range(4)]
    files: dict[str, list[Path]] = {"base": [], "head": []}
    for k in range(2):
        base = {c: 1.0 + 0.02 * (k - 0.5) for c in cases}
        head = {c: 1.12 + 0.02 * (k - 0.5) for c in cases}
        head["case[rlpace-0]"] *= 1.2
        files["base"].append(_run_file(tmp_path / f"base-{k}.json", rng, base))
        files["head"].append(_run_file(tmp_path / f"head-{k}.json", rng, head))
    return files


def _calibration(tmp_path: Path) -> Path:
    def noise(name: str, gate: float) -> BenchmarkNoise:
        return BenchmarkNoise(
            f"t.py::{name}", 8, (0.0,), 0, gate / 4, gate, gate * 1.3, gate / 4,
            run_spread_pct=gate / 4, runs=12,
        )  # fmt: skip

    names = [f"case[torchrl-{i}]" for i in range(6)] + [f"case[rlpace-{i}]" for i in range(4)]
    cal = Calibration(
        "cpu", 8, 2, 16, 5.0, 0.05, 0.05, 0.0, 0.0, tuple(noise(n, 3.0) for n in names)
    )
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(cal.to_dict()))
    return path


def test_compare_and_pr_give_the_same_verdicts_from_the_same_runs(runs, tmp_path):
    cal = _calibration(tmp_path)
    out = tmp_path / "compare.json"
    code = cli_main(
        ["compare", "--head", *map(str, runs["head"]), "--base", *map(str, runs["base"])]
        + ["--calibration", str(cal), "--json", str(out), "-o", str(tmp_path / "c.md")]
    )
    assert code == 0
    compared = json.loads(out.read_text())
    head = merge_runs([load_results(p) for p in runs["head"]])
    base = merge_runs([load_results(p) for p in runs["base"]])
    as_pr = pr_judge(PipelineConfig(), cal, shown=str(cal)).judge(head, base)
    assert [(r["fullname"], r["verdict"]) for r in compared["rows"]] == [
        (r.fullname, r.verdict.value) for r in as_pr.rows
    ]
    assert [r["noise_pct"] for r in compared["rows"]] == pytest.approx(
        [r.noise_pct for r in as_pr.rows]
    )
    assert compared["noise_floor"] == as_pr.noise_floor.to_dict()
    assert compared["calibration"]["source"] == str(cal)
    # the verdicts are the judge's: the drifted controls raise the floor (the 12% load
    # shift flags nothing), the case that really got slower on top is flagged, and the
    # controls themselves (same pinned code both sides) are never flagged
    verdicts = {r["name"]: r["verdict"] for r in compared["rows"]}
    assert verdicts["case[rlpace-0]"] == "worsened"
    assert {v for n, v in verdicts.items() if n != "case[rlpace-0]"} == {"unchanged"}
    # what `compare` did before it had a judge: every case worsened by the load shift
    bare = compare_runs(head, base)
    assert sum(r.verdict is Verdict.WORSENED for r in bare.rows) == 10


def test_compare_without_a_calibration_is_pr_without_one(runs, tmp_path):
    out = tmp_path / "c.json"
    head, base = runs["head"][:1], runs["base"][:1]
    cli_main(["compare", "--head", str(head[0]), "--base", str(base[0]), "--json", str(out)])
    judged = pr_judge(PipelineConfig(), None).judge(load_results(head[0]), load_results(base[0]))
    rows = json.loads(out.read_text())["rows"]
    assert [r["verdict"] for r in rows] == [r.verdict.value for r in judged.rows]
    assert json.loads(out.read_text())["calibration"] is None


def test_the_confirmation_keeps_only_flags_fresh_runs_repeat(runs):
    head = merge_runs([load_results(p) for p in runs["head"]])
    base = merge_runs([load_results(p) for p in runs["base"]])
    judge = Judge()
    first = judge.judge(head, base)
    assert judge.flagged(first) == ["t.py::case[rlpace-0]"]
    # the same runs again confirm it; base against base does not
    assert judge.confirm(first, head, base).rows[6].confirmed is True
    cleared = judge.confirm(first, base, base)
    assert cleared.rows[6].verdict is Verdict.UNCHANGED and cleared.rows[6].confirmed is False
    assert cleared.confirm_repeats == 2
    # a flag left out of the confirmation (pr leaves out what its counts judge) stays
    kept = judge.confirm(first, base, base, names=[])
    assert kept.rows[6].verdict is Verdict.WORSENED and kept.rows[6].confirmed is None


def test_a_flag_its_work_counts_decided_survives_a_confirmation_of_other_flags():
    """A real change (a gradient-norm log in the SAC trainer) moved one case's work
    counts and another case's time: the confirmation re-ran the timed flag alone, and
    cleared the work-count flag "for want of a result". Exact counts are not put to
    fresh runs; their flag stands whatever the confirmation of the others finds."""
    from rlpace.bench.comparison import BenchmarkChange, Comparison
    from rlpace.bench.results import results_from_records

    rows = (
        BenchmarkChange("t::counted", "counted", Verdict.WORSENED, work_verdict="regression",
                        median_change_pct=-1.8),
        BenchmarkChange("t::timed", "timed", Verdict.WORSENED, work_verdict="same",
                        median_change_pct=-2.5, method="paired"),
        BenchmarkChange("t::calm", "calm", Verdict.UNCHANGED),
    )  # fmt: skip
    first = Comparison(rows=rows)
    judge = Judge()
    assert judge.to_confirm(first) == ["t::timed"]
    fresh = results_from_records([{"fullname": "t::timed", "data": [1.0, 1.01, 0.99] * 5}])
    for names in (None, ["t::timed"]):
        out = {r.fullname: r for r in judge.confirm(first, fresh, fresh, names=names).rows}
        assert out["t::counted"].verdict is Verdict.WORSENED  # kept, not "no result"
        assert out["t::counted"] == rows[0]  # untouched: no "not confirmed" note
        assert out["t::timed"].verdict is Verdict.UNCHANGED and out["t::timed"].confirmed is False


def test_a_noise_model_scales_its_gates_to_the_runs_a_side_judged():
    model = NoiseModel(gates={"a": 0.1}, repeats=2, run_spreads={"a": (4.0, 3), "b": (1.0, 2)})
    assert model.gate_fractions(2) == {"a": 0.1}
    assert model.gate_fractions(8)["a"] < model.gate_fractions(4)["a"] < 0.1
    assert model.gate_fractions(1)["a"] > 0.1
    assert list(model.priors()) == ["a"]  # two pool runs give no prior
    wide = model.confirmation_gates(repeats=2, family_size=10)["a"]
    assert wide > model.confirmation_gates(repeats=2, family_size=1)["a"]


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"alpha": 0.0}, "Judge.alpha: expected a false discovery rate in (0, 1), got 0.0"),
        ({"threshold": -1}, "Judge.threshold: expected a percentage >= 0, got -1"),
        ({"confirm_runs": -2}, "Judge.confirm_runs: expected runs per side >= 0"),
    ],
)
def test_a_judge_refuses_bad_settings_naming_the_fix(settings, message):
    with pytest.raises(BenchInputError, match="fix: e.g.") as info:
        Judge(**settings)
    assert message in str(info.value)


def test_the_checked_in_calibration_still_loads_round_trips_and_judges():
    path = ROOT / "reports" / "calibration" / "cpu.json"
    cal = read_calibration(path)
    on_disk = json.loads(path.read_text())
    assert cal.to_dict() == on_disk  # one serialiser, both ways
    assert Calibration.from_dict(cal.to_dict()) == cal
    judge = Judge.from_calibration(cal, source="reports/calibration/cpu.json")
    assert judge.noise is not None and len(judge.noise.gates) == len(cal.benchmarks)
    assert judge.noise.gate_fractions() == cal.noise_fractions()


def test_a_version_1_calibration_reads_without_run_spreads(tmp_path):
    b = BenchmarkNoise("a", 2, (1.0, -1.0), 0, 1.0, 4.0, 7.0, 2.0, run_spread_pct=1.0, runs=8)
    data = Calibration("cpu", 2, 2, 8, 5.0, 0.05, 0.05, 0.0, 0.0, (b,)).to_dict()
    data["version"] = 1
    for row in data["benchmarks"]:
        del row["run_spread_pct"], row["runs"]
    old = Calibration.from_dict(data)
    assert math.isnan(old.benchmarks[0].run_spread_pct) and old.noise_model().priors() == {}
    assert old.noise_fractions() == {"a": 0.039211}  # its gates are used as they are
    data["version"] = 7
    with pytest.raises(BenchInputError, match="rerun `rlpace-bench aa` to recalibrate"):
        Calibration.from_dict(data)
    del data["benchmarks"][0]["gate_pct"]
    data["version"] = 2
    with pytest.raises(BenchInputError, match="expected a complete calibration"):
        Calibration.from_dict(data)


def test_flags_of_the_judge_are_the_flagged_verdicts(runs):
    head = merge_runs([load_results(p) for p in runs["head"]])
    judged = Judge().judge(head, head)
    assert not any(r.verdict in FLAGS for r in judged.rows) and Judge().flagged(judged) == []
