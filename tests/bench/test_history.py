"""History of asv results: series per benchmark, step changes, trend plots, the command."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from rlpace.bench.cli import main
from rlpace.bench.errors import BenchInputError
from rlpace.bench.history import (
    Series,
    asv_paths,
    detect_step_changes,
    history,
    load_asv_series,
    plot_series,
    step_threshold,
)
from rlpace.bench.units import COUNT_UNITS

LOOP = "bench_work.TimeWork.time_loop"
SUM = "bench_work.TimeSum.time_sum"


def _commit(i: int) -> str:
    return f"{i:x}" * 40


@pytest.fixture
def asv_results(tmp_path, asv_base) -> tuple[Path, list[str]]:
    """Five commits of asv results, built from a real asv file: time_loop triples at the
    fourth commit; time_sum stays flat (one combination always skipped)."""
    template = json.loads(asv_base.read_text())
    machine = tmp_path / "results" / "fixture-box"
    machine.mkdir(parents=True)
    (machine / "machine.json").write_text(json.dumps({"machine": "fixture-box", "version": 1}))
    commits = []
    # written newest first, to check that the series is ordered by commit, not file order
    for i, scale in reversed(list(enumerate([1.0, 1.02, 0.98, 3.0, 3.05]))):
        doc = json.loads(json.dumps(template))
        doc["commit_hash"] = _commit(i + 1)
        doc["date"] = 1_764_403_200_000 + i * 86_400_000
        loop = doc["results"][LOOP]
        loop[0] = [6e-05 * scale]
        loop[11] = None  # drop raw samples; the history reads the result value
        (machine / f"{_commit(i + 1)[:8]}-existing-py_venv.json").write_text(json.dumps(doc))
        commits.insert(0, _commit(i + 1))
    return tmp_path / "results", commits


def test_series_per_benchmark_and_parameters_in_commit_order(asv_results):
    results, commits = asv_results
    series = {s.benchmark: s for s in load_asv_series(results)}
    assert set(series) == {
        LOOP,
        f"{SUM}('rlpace', 100)",
        f"{SUM}('rlpace', 1000)",
        f"{SUM}('torchrl', 100)",
        f"{SUM}('torchrl', 1000)",
        "bench_work.TimeBroken.time_raises",
    }
    loop = series[LOOP]
    assert loop.commits == tuple(commits)  # by date when no git order is given
    assert loop.machine == "fixture-box" and loop.env == "existing-py_venv"
    assert loop.values[3] == pytest.approx(3 * 6e-05)
    assert all(math.isnan(v) for v in series[f"{SUM}('torchrl', 1000)"].values)
    # an explicit commit order wins over dates
    reordered = list(reversed(commits))
    (loop_r,) = [s for s in load_asv_series(results, commit_order=reordered) if s.benchmark == LOOP]
    assert loop_r.commits == tuple(reordered)


def test_step_names_the_first_commit_at_the_new_level(asv_results):
    results, commits = asv_results
    (loop,) = [s for s in load_asv_series(results) if s.benchmark == LOOP]
    (change,) = detect_step_changes(loop)
    assert change.first_commit == commits[3] and change.previous_commit == commits[2]
    assert change.kind == "regression" and change.ratio == pytest.approx(3.0, rel=0.05)


def test_flat_noisy_and_missing_series_have_no_step():
    flat = Series(
        "b", "m", "e", tuple("abcdef"), tuple(range(6)), (1, 1.04, 0.97, 1.02, 0.99, 1.03)
    )
    assert detect_step_changes(flat) == []
    one = Series("b", "m", "e", ("a", "b"), (0, 1), (1.0, math.nan))
    assert detect_step_changes(one) == []


def test_improvement_after_a_gap_is_named_by_its_first_measured_commit():
    s = Series("b", "m", "e", tuple("abcdef"), tuple(range(6)), (2, 2.02, math.nan, 1, 1.01, 0.99))
    (change,) = detect_step_changes(s)
    assert change.kind == "improvement" and change.first_commit == "d"
    assert change.previous_commit == "b"


def test_threshold_filters_small_steps():
    s = Series("b", "m", "e", tuple("abcdef"), tuple(range(6)), (1, 1, 1, 1.3, 1.3, 1.3))
    assert len(detect_step_changes(s, threshold=0.1)) == 1
    assert detect_step_changes(s, threshold=0.5) == []
    for bad in (0, -0.1, math.nan):
        with pytest.raises(ValueError, match="threshold"):
            detect_step_changes(s, threshold=bad)


def test_history_plots_only_flagged_benchmarks(asv_results, tmp_path):
    results, commits = asv_results
    report = history(results_dir=results, out_dir=tmp_path / "plots")
    assert [c.benchmark for c in report.changes] == [LOOP]
    assert report.flagged == [f"{LOOP} [fixture-box/existing-py_venv]"]
    (plot,) = report.plots
    assert plot.parent == tmp_path / "plots" and plot.suffix == ".png"
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in (tmp_path / "plots").iterdir()) == sorted([plot.name, "index.md"])
    index = report.index.read_text()
    assert f"[{LOOP} [fixture-box/existing-py_venv]]({plot.name})" in index
    assert "regression ×" in index


def test_history_reports_progress_and_units(asv_results, tmp_path):
    results, _ = asv_results
    seen = []
    series = load_asv_series(results, progress=lambda done, total: seen.append((done, total)))
    assert seen and seen[-1][0] == seen[-1][1] == len(seen)
    assert {s.unit for s in series} == {"seconds"}


def test_plots_put_units_and_dates_on_the_axes(tmp_path):
    import matplotlib.image

    day = 86_400_000
    many = Series(
        "cpu.mem.peakmem_case",
        "m",
        "e",
        tuple(f"{i:040x}" for i in range(400)),
        tuple(1_700_000_000_000 + i * day for i in range(400)),
        tuple(2e8 if i < 200 else 3e8 for i in range(400)),
        unit="bytes",
    )
    path = plot_series(many, detect_step_changes(many), tmp_path)
    assert matplotlib.image.imread(path).shape[1] == 1000  # 10 in at 100 dpi
    from rlpace.bench.history import _axis_unit

    assert _axis_unit(many) == (2**20, "memory (MiB)")  # not "value"
    small = Series("t.time_x", "m", "e", ("a", "b"), (0, 0), (2e-5, 3e-5))
    assert _axis_unit(small) == (1e-6, "time (µs)")


def test_plot_file_names_are_safe(tmp_path):
    s = Series("cpu.x.time_case('a/b', 1)", "m", "e", ("c1", "c2"), (0, 1), (1.0, 2.0))
    path = plot_series(s, detect_step_changes(s), tmp_path)
    assert path.parent == tmp_path and "/" not in path.name and path.is_file()


def test_missing_results_are_an_input_error(tmp_path):
    with pytest.raises(BenchInputError, match="run `make asv`"):
        load_asv_series(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(BenchInputError, match="found none"):
        load_asv_series(tmp_path / "empty")


def test_asv_paths_resolve_against_the_config_directory():
    root = Path(__file__).resolve().parents[2]
    results, repo = asv_paths(root / "asv_bench" / "asv.conf.json")
    assert results == root / "reports" / "asv" / "results"
    assert repo == root


def test_history_command_prints_steps_and_writes_plots(asv_results, tmp_path, capsys):
    results, commits = asv_results
    out_dir = tmp_path / "hist"
    code = main(
        ["history", "--results", str(results), "--out-dir", str(out_dir), "--repo", str(tmp_path)]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert f"first commit {commits[3]}" in printed
    assert "regression" in printed and "x  3.0" in printed
    assert len(list(out_dir.glob("*.png"))) == 1
    assert main(["history", "--results", str(results), "--threshold", "0"]) == 2


def _counted(values, unit="instructions"):
    n = len(values)
    commits, dates = tuple("abcdefgh"[:n]), tuple(range(n))
    return Series("counts.Counts.track_instructions('x')", "m", "e", commits, dates, values, unit)


def test_a_count_of_work_reports_a_step_a_timing_of_the_same_size_would_not():
    # a 3 % step in a series that does not move otherwise: the count tier's change
    steps = (1.0e6, 1.000_05e6, 1.03e6, 1.030_02e6)
    counted = _counted(steps)
    timed = replace(counted, benchmark="cpu.x.time_case", unit="seconds")
    assert step_threshold(counted) == pytest.approx(0.01)
    assert step_threshold(timed) == 0.1
    (change,) = detect_step_changes(counted, threshold=step_threshold(counted))
    assert change.first_commit == "c" and change.kind == "regression"
    assert change.change == "+3.00 %" and change.threshold == pytest.approx(0.01)
    assert detect_step_changes(timed, threshold=step_threshold(timed)) == []
    # under the count threshold: not reported either
    small = _counted((1.0e6, 1.0e6, 1.005e6, 1.005e6))
    assert detect_step_changes(small, threshold=step_threshold(small)) == []


@pytest.mark.parametrize("unit", sorted(COUNT_UNITS))
def test_every_unit_of_work_counts_gets_the_count_threshold(unit):
    expected = 0.1 if unit == "worker Python calls" else 0.01  # which are steady: chance
    assert step_threshold(_counted((10.0, 10.0, 10.0), unit=unit)) == pytest.approx(expected)
    assert step_threshold(_counted((10.0, 10.0, 10.0), unit="calls per second")) == 0.1
    # the count tier's estimated cycles follow the memory layout (2 % between runs)
    assert step_threshold(_counted((10.0, 10.0, 10.0), unit="cycles")) == 0.1


def test_a_count_that_follows_the_clock_is_not_split_by_its_scatter():
    # the calling thread's Python calls of a collector, 1-3 % from process to process
    # (collector_with_rb[rlpace-single]): asv's penalty keeps it one level
    wobbly = _counted((19_388, 19_952, 19_500, 19_800, 19_420, 19_900), unit="Python calls")
    assert detect_step_changes(wobbly, threshold=step_threshold(wobbly)) == []
    # a real step beyond the scatter is reported
    stepped = _counted((19_388, 19_952, 19_500, 24_800, 24_420, 24_900), unit="Python calls")
    (change,) = detect_step_changes(stepped, threshold=step_threshold(stepped))
    assert change.first_commit == "d" and change.kind == "regression"


def test_history_command_refuses_a_count_threshold_that_is_not_positive(asv_results, capsys):
    results, _ = asv_results
    for bad in ("0", "-0.01", "nan"):
        assert main(["history", "--results", str(results), "--count-threshold", bad]) == 2
        err = capsys.readouterr().err
        assert "--count-threshold: expected a relative change > 0 (0.01 = 1 %)" in err


def test_history_reads_asv_api1_results_other_projects_wrote(tmp_path):
    """asv's own reader refuses api-1 files ("stored in an old file format"); the
    history reads them as the comparator does, a grid that failed whole included."""
    foreign = Path(__file__).parent / "fixtures" / "foreign"
    series = {s.benchmark: s for s in load_asv_series(foreign / "empymod-bench")}
    fs = series["model.Analytical.time_analytical('fs')"]
    assert fs.env == "conda-py3.6-numpy1.17" and fs.machine == "dtr-latitude"
    assert [c[:8] for c in fs.commits] == ["1093def9", "0e8bf222", "0cfeeb1c", "15706557"]
    assert math.isnan(fs.values[0]) and math.isnan(fs.values[1])
    assert fs.values[2:] == pytest.approx((0.004497451499143305, 0.004494095332726525))
    assert len(series) == 3 and {s.unit for s in series.values()} == {"seconds"}
    report = history(results_dir=foreign / "empymod-bench", out_dir=tmp_path / "h")
    assert report.changes == ()  # failed, then flat: no step
    example = load_asv_series(foreign / "asv-example")
    assert {s.unit for s in example} >= {"bytes", "seconds"}


def test_a_count_plot_zooms_to_its_values_so_a_small_step_shows(tmp_path):
    import matplotlib.image
    import numpy as np

    values = (1.0e7, 1.0e7, 1.0e7, 1.03e7, 1.03e7, 1.03e7)

    def line_drop(unit: str) -> float:
        s = replace(_counted(values), unit=unit)
        image = matplotlib.image.imread(plot_series(s, [], tmp_path / unit))[..., :3]
        blue = np.all(np.abs(image - np.array([31, 119, 180]) / 255) < 0.08, axis=-1)
        rows, cols = np.nonzero(blue)
        third = (cols.max() - cols.min()) / 3
        before = rows[cols < cols.min() + third].mean()
        after = rows[cols > cols.max() - third].mean()
        return (before - after) / image.shape[0]  # rows count down: a rise is positive

    assert line_drop("instructions") > 0.3  # the 3 % step spans most of the axis
    assert 0 < line_drop("seconds") < 0.05  # a timing keeps zero on its axis


def test_counted_series_asv_wrote_step_only_where_the_code_changed(tmp_path):
    """Four commits counted by asv (``fixtures/asv-counts``): a docs line, a bounds
    check in ``RandomSampler.sample``, another docs line. The history names the check's
    commit for the sampling cases it touches and no other step; at the timings' 10 %
    it would have missed every instruction step under 10 %."""
    results = Path(__file__).parent / "fixtures" / "asv-counts"
    order = ["37c62468", "df384f76", "06791008", "efb7b153"]
    for s in load_asv_series(results):
        assert [c[:8] for c in s.commits] == order  # by commit date
    report = history(results_dir=results, out_dir=tmp_path / "h")
    assert {c.first_commit[:8] for c in report.changes} == {"06791008"}

    def stepped(changes, metric):
        return {c.benchmark.split("'")[1] for c in changes if f".{metric}(" in c.benchmark}

    assert stepped(report.changes, "track_instructions") == {
        "test_rb_sample[rlpace-tensor-random-cpu]",  # +14.1 %
        "test_rb_sample[rlpace-list-random-cpu]",  # +3.5 %
        "test_rb_extend_sample[rlpace-list-random-cpu]",  # +1.2 %
    }
    # the estimated cycles: the +14 % step beyond the timings' 10 %, not the 2 % a
    # cache model moves between runs of the same code
    assert stepped(report.changes, "track_estimated_cycles") == {
        "test_rb_sample[rlpace-tensor-random-cpu]"
    }
    (extend,) = [c for c in report.changes if "extend_sample[rlpace-list-random" in c.benchmark]
    assert extend.ratio == pytest.approx(1.0117, abs=0.001) and extend.threshold == 0.01
    old_way = history(results_dir=results, out_dir=tmp_path / "old", count_threshold=0.1)
    assert stepped(old_way.changes, "track_instructions") == {
        "test_rb_sample[rlpace-tensor-random-cpu]"
    }
