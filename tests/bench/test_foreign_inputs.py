"""Files the harness did not write: real result files of other projects (the corpus in
``fixtures/foreign``) and malformed variants of our own fixtures, generated here.

Every input must end in a report or in one ``BenchInputError`` line (the CLI's exit 2),
never in a traceback or a hang; a head that lost benchmarks never reads "No
regressions".
"""

from __future__ import annotations

import copy
import json
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rlpace.bench.cli import main
from rlpace.bench.compare import compare_runs
from rlpace.bench.comparison import Verdict
from rlpace.bench.errors import BenchInputError
from rlpace.bench.render import render_report
from rlpace.bench.results import load_results

FIXTURES = Path(__file__).parent / "fixtures"
FOREIGN = FIXTURES / "foreign"
PB_HEAD, PB_BASE = FIXTURES / "pb5_head.json", FIXTURES / "pb5_base.json"
PB_SUMMARY = FIXTURES / "pb5_base_summary.json"
ASV_DIR = FIXTURES / "asv" / "results"
ASV_FILE = ASV_DIR / "fixture-box" / "aaaaaaaa-existing-py_venv.json"

# Values no result file should hold where a number, list or object belongs.
BAD_VALUES: list[Any] = [
    None,
    "x",
    "",
    [],
    {},
    [1, "x"],
    {"a": 1},
    True,
    -1,
    0,
    1e30,
    10**400,
    math.inf,
    -math.inf,
    math.nan,
]


# Objects whose inner keys no reader interprets: vary them whole, not key by key.
_OPAQUE = {"machine_info", "commit_info", "options", "extra_info", "params", "requirements"}
#: Every bad value at every path (slow: minutes) when set; else a rotating subset.
FULL = os.environ.get("RLPACE_FULL_MALFORMED") == "1"
_PER_PATH = len(BAD_VALUES) if FULL else 5


def _paths(doc: Any, prefix: tuple = (), depth: int = 0) -> Iterator[tuple]:
    """Paths into ``doc``: every key of objects, the first item of lists."""
    if depth > 4 or (prefix and prefix[-1] in _OPAQUE):
        return
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield (*prefix, key)
            yield from _paths(value, (*prefix, key), depth + 1)
    elif isinstance(doc, list) and doc:
        yield (*prefix, 0)
        yield from _paths(doc[0], (*prefix, 0), depth + 1)


def _set(doc: Any, path: tuple, value: Any) -> Any:
    out = copy.deepcopy(doc)
    target = out
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return out


def _delete(doc: Any, path: tuple) -> Any:
    out = copy.deepcopy(doc)
    target = out
    for key in path[:-1]:
        target = target[key]
    del target[path[-1]]
    return out


def _trim_pb(doc: dict) -> dict:
    """One benchmark, ten rounds of raw data: the same shape, quicker to vary."""
    doc = copy.deepcopy(doc)
    doc["benchmarks"] = doc["benchmarks"][:1]
    for bench in doc["benchmarks"]:
        stats = bench.get("stats") or {}
        if isinstance(stats.get("data"), list):
            stats["data"] = stats["data"][:10]
            stats["rounds"] = 10
    return doc


def malformed_variants(doc: Any, under: tuple = ()) -> Iterator[tuple[str, Any]]:
    """(label, document) pairs: paths (below ``under``) set to bad values (all of them
    with ``RLPACE_FULL_MALFORMED=1``, else a subset rotating over the paths so that
    every value is used), each key deleted, plus whole-document oddities."""
    paths = [p for p in _paths(doc) if p[: len(under)] == under]
    for i, path in enumerate(paths):
        label = "/".join(map(str, path))
        for j in range(_PER_PATH):
            value = BAD_VALUES[(i * _PER_PATH + j) % len(BAD_VALUES)]
            yield f"{label}={value!r:.20}", _set(doc, path, value)
        if isinstance(path[-1], str):
            yield f"del {label}", _delete(doc, path)
    if not under:
        yield "top-level list", [doc]
        yield "empty object", {}


def _write(tmp_path: Path, name: str, doc: Any) -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc), encoding="utf-8")
    return path


def _load_compare_render(head: Path | Any, base: Path | Any, seed: bool = False) -> str | None:
    """The whole flow in-process (a side may be a loaded table); None when an input
    error was reported."""
    try:
        h = load_results(head) if isinstance(head, Path) else head
        b = load_results(base) if isinstance(base, Path) else base
        comparison = compare_runs(h, b)
    except BenchInputError as exc:
        message = str(exc)
        assert "\n" not in message and message, message
        return None
    text = render_report(comparison)
    if seed:
        render_report(comparison, style="seed")
    return text


# --------------------------------------------------------------------- the generator


@pytest.mark.parametrize(
    ("fixture", "under"),
    [(PB_SUMMARY, ()), (PB_BASE, ("benchmarks", 0, "stats"))],
    ids=["summary", "raw-data"],
)
def test_malformed_pytest_benchmark_variants_end_in_a_report_or_one_line(tmp_path, fixture, under):
    doc = _trim_pb(json.loads(fixture.read_text()))
    good = load_results(_write(tmp_path, "good.json", doc))
    outcomes = {"report": 0, "error": 0}
    for i, (label, variant) in enumerate(malformed_variants(doc, under)):
        bad = _write(tmp_path, f"v{i}.json", variant)
        for head, base in ((bad, good), (good, bad)):
            try:
                result = _load_compare_render(head, base, seed=i % 7 == 0)
            except Exception as exc:  # noqa: BLE001 - the point: name the variant
                pytest.fail(f"{label}: {type(exc).__name__}: {exc}")
            outcomes["report" if result is not None else "error"] += 1
    # both kinds happen: the generator is not trivially all-good or all-bad
    assert outcomes["report"] > 10 and outcomes["error"] > 30, outcomes


def test_malformed_asv_variants_end_in_a_report_or_one_line(tmp_path):
    doc = json.loads(ASV_FILE.read_text(), parse_constant=float)
    suite = json.loads((ASV_DIR / "benchmarks.json").read_text())
    good_dir = tmp_path / "good" / "results"
    good = load_results(_write(good_dir, "box/a.json", doc))
    _write(good_dir, "benchmarks.json", suite)
    count = 0
    first_result = next(iter(doc["results"]))
    variants = [
        v
        for v in malformed_variants(doc)
        if v[0].count("/") == 0 or v[0].startswith(f"results/{first_result}")
    ]
    first = next(iter(suite))
    variants += [
        (f"benchmarks.json {k}", ("suite", v))
        for k, v in [
            ("list", [1, 2]),
            ("int param_names", _set(suite, (first, "param_names"), 3)),
            ("str param_names", _set(suite, (first, "param_names"), [1])),
            ("unit list", _set(suite, (first, "unit"), [])),
            ("truncated", '{"a": '),
        ]
    ]
    for i, (label, variant) in enumerate(variants):
        results = tmp_path / f"v{i}" / "results"
        if isinstance(variant, tuple) and variant[0] == "suite":
            bad = _write(results, "box/a.json", doc)
            _write(results, "benchmarks.json", variant[1])
        else:
            bad = _write(results, "box/a.json", variant)
            _write(results, "benchmarks.json", suite)
        for head, base in ((bad, good), (good, bad)):
            try:
                _load_compare_render(head, base, seed=i % 7 == 0)
            except Exception as exc:  # noqa: BLE001
                pytest.fail(f"{label}: {type(exc).__name__}: {exc}")
            count += 1
    assert count > 100


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"version": "5.1.0", "benchmarks": [' + "[" * 100_000, "nested deeper"),
        ('{"version": "5.1.0", "benchmarks": [], "x": ' + "9" * 5000 + "}", "usable JSON"),
        (
            '{"version": "5.1.0", "benchmarks": [{"name": "a", "stats": {"mean": 1, "rounds": '
            + "9" * 400
            + "}}]}",
            "too large",
        ),
        (
            '{"version": "5.1.0", "benchmarks": [{"name": "a", "stats": {"mean": 1, "rounds": '
            "Infinity}}]}",
            "finite",
        ),
        (
            '{"version": "5.1.0", "benchmarks": [{"name": "a", "stats": {"mean": -1}}]}',
            "cannot be negative",
        ),
        (
            '{"version": "5.1.0", "benchmarks": [{"name": "a", "stats": {"mean": 1, "ops": 0}}]}',
            "'stats.ops' is 0",
        ),
        (
            '{"version": "5.1.0", "benchmarks": [{"name": 3, "stats": {"mean": 1}}]}',
            "expected a 'fullname'",
        ),
        (
            '{"version": "5.1.0", "benchmarks": [{"name": "a", "params": [1], "stats": '
            '{"mean": 1}}]}',
            "'params': expected an object",
        ),
        ('{"version": "5.1.0", "machine_info": 3, "benchmarks": []}', "'machine_info'"),
        (
            '{"version": "5.1.0", "benchmarks": [{"name": "a", "stats": {"data": [1, 2, 3, 4], '
            '"rounds": 38523, "mean": 2}}]}',
            "holds 4 values but 'stats.rounds' says 38523",
        ),
        (
            '{"version": 2, "commit_hash": "x", "date": 1e20, "result_columns": ["result"], '
            '"results": {}}',
            "'date'",
        ),
        (
            '{"version": 2, "commit_hash": "x", "result_columns": ["result", "params"], '
            '"results": {"t": ["1.0", [[1]]]}}',
            "'params' must be a list of lists of strings",
        ),
        (
            '{"version": 2, "commit_hash": "x", "result_columns": ["result", "samples"], '
            '"results": {"t": [[1.0], "abc"]}}',
            "'samples' must be a list",
        ),
    ],
    ids=lambda v: v[:30] if isinstance(v, str) else None,
)
def test_pathological_files_are_one_line_errors(tmp_path, capsys, text, expected):
    path = _write(tmp_path, "run.json", text)
    assert main(["compare", "--head", str(path), "--base", str(PB_BASE)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rlpace-bench: error: ") and err.count("\n") == 1, err
    assert expected in err, err


def test_a_fifo_is_refused_instead_of_blocking(tmp_path, capsys):
    fifo = tmp_path / "head.json"
    os.mkfifo(fifo)
    assert main(["compare", "--head", str(fifo), "--base", str(PB_BASE)]) == 2
    assert "not a regular file" in capsys.readouterr().err
    assert main(["show", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err


# ----------------------------------------------------------------- lost benchmarks


def test_a_head_that_lost_every_benchmark_never_reads_no_regressions(tmp_path, capsys):
    doc = json.loads(PB_HEAD.read_text())
    doc["benchmarks"] = []
    empty = _write(tmp_path, "empty.json", doc)
    assert main(["compare", "--head", str(empty), "--base", str(PB_BASE)]) == 0
    out = capsys.readouterr().out
    assert "No regressions" not in out
    assert "No benchmark in common" in out and "12 removed" in out
    assert (
        main(["compare", "--head", str(empty), "--base", str(PB_BASE), "--fail-on-regression"]) == 1
    )
    assert "head lost 12 benchmark(s)" in capsys.readouterr().err


def test_a_failed_head_benchmark_fails_the_check(tmp_path, capsys):
    doc = json.loads(PB_BASE.read_text())
    doc["benchmarks"][0]["stats"] = None  # pytest-benchmark's record of a failure
    broken = _write(tmp_path, "broken.json", doc)
    assert (
        main(["compare", "--head", str(broken), "--base", str(PB_BASE), "--fail-on-regression"])
        == 1
    )
    out = capsys.readouterr().out
    assert "1 failed" in out and "No regressions" not in out


def test_files_without_a_common_benchmark_warn(tmp_path):
    doc = json.loads(PB_BASE.read_text())
    for bench in doc["benchmarks"]:
        bench["fullname"] = "other::" + bench["fullname"]
    other = _write(tmp_path, "other.json", doc)
    text = render_report(compare_runs(load_results(other), load_results(PB_HEAD)))
    assert "No benchmark in common" in text and "No regressions" not in text


# ------------------------------------------------------------------ real corpus


def test_every_foreign_file_loads(tmp_path):
    files = sorted(p for p in FOREIGN.rglob("*.json") if p.name != "benchmarks.json")
    assert len(files) >= 4
    for path in files:
        df = load_results(path)
        assert len(df) >= 1
        assert set(df["status"]) <= {"ok", "failed", "skipped"}


def test_asv_api1_example_units_names_and_golden(fixtures_dir):
    cheetah = FOREIGN / "asv-example" / "cheetah"
    head = load_results(cheetah / "22b920c6-py2.7-Cython-numpy1.8.json")
    rows = head.set_index("fullname")
    assert rows.loc["time_units.mem_unit", "value_unit"] == "bytes"  # by its name
    assert rows.loc["time_other.time_parameterized(2)", "name"] == (
        "time_other.time_parameterized(2)"
    )  # whole asv names: module and class kept
    base = load_results(cheetah / "fcf8c079-py2.7-Cython-numpy1.8.json")
    text = render_report(compare_runs(head, base), title="asv example (api 1)")
    assert "| time_units.mem_unit | noise | +0.0% | - | - | 344 B | 344 B | - |" in text
    golden = FOREIGN / "golden" / "asv_example_api1.md"
    assert text == golden.read_text(encoding="utf-8").rstrip("\n")


def test_pytest_benchmark_2_pair_golden():
    head = load_results(FOREIGN / "pytest-benchmark-2.5_head.json")
    base = load_results(FOREIGN / "pytest-benchmark-2.5_base.json")
    comparison = compare_runs(head, base)
    (row,) = comparison.rows
    # summary statistics only, one run a side: noise assumed, and the row says so
    assert row.method == "intervals" and row.assumed_noise_pct == pytest.approx(10.0)
    assert row.verdict is Verdict.UNCHANGED
    text = render_report(comparison, title="pytest-benchmark 2.5 pair")
    assert "judged on one run a side" in text
    golden = FOREIGN / "golden" / "pytest_benchmark_25.md"
    assert text == golden.read_text(encoding="utf-8").rstrip("\n")


def test_swapped_files_are_called_out():
    doc_h = json.loads(PB_HEAD.read_text())
    doc_b = json.loads(PB_BASE.read_text())
    assert doc_h["commit_info"].get("time") is not None
    head, base = load_results(PB_HEAD), load_results(PB_BASE)
    head.attrs["commit_info"] = {**head.attrs["commit_info"], "time": "2024-01-01T00:00:00"}
    base.attrs["commit_info"] = {**base.attrs["commit_info"], "time": "2025-01-01T00:00:00"}
    text = render_report(compare_runs(head, base))
    assert "were head and base swapped?" in text
    assert doc_b  # both real files carry their commit's time


def test_a_shift_of_most_benchmarks_is_called_a_machine_change():
    import numpy as np

    from rlpace.bench.provenance import comparison_warnings
    from rlpace.bench.results import results_from_records

    rng = np.random.default_rng(3)
    names = [f"b{i}" for i in range(10)]

    def run(scale):
        return results_from_records(
            [{"fullname": n, "data": scale * (1 + 0.01 * rng.random(20))} for n in names]
        )

    shifted = comparison_warnings(compare_runs(run(1.25), run(1.0)))
    assert [w.kind for w in shifted] == ["common-mode", "single-run"]
    assert "10 of 10 benchmarks moved the same way" in shifted[0].text
    calm = comparison_warnings(compare_runs(run(1.0), run(1.0)))
    assert [w.kind for w in calm] == ["single-run"]


def test_asv_api1_grid_that_failed_whole_is_a_failed_row_per_combination():
    """asv's api 1 wrote one ``null`` for a parameterized benchmark whose every
    combination failed (empymod-bench's results, 1 059 such files); each combination
    is a failed row, not a malformed file."""
    machine = FOREIGN / "empymod-bench" / "dtr-latitude"
    failed = load_results(machine / "0e8bf222-conda-py3.6-numpy1.17.json")
    names = [f"model.Analytical.time_analytical('{s}')" for s in ("fs", "dhs", "dfs")]
    assert list(failed["fullname"]) == names
    assert set(failed["status"]) == {"failed"}
    measured = load_results(machine / "0cfeeb1c-conda-py3.6-numpy1.17.json")
    assert list(measured["fullname"]) == names and set(measured["status"]) == {"ok"}
    assert float(measured.set_index("fullname").loc[names[0], "median"]) == pytest.approx(
        0.004497451499143305
    )


def test_an_asv_skip_is_neither_a_failure_nor_a_change(tmp_path, capsys):
    """asv writes NaN for a benchmark that skipped itself (``NotImplementedError``) and
    null for one that failed; asv's compare marks only the failure. A skip on either
    side is ``skipped``, and does not fail ``--fail-on-regression``."""
    doc = json.loads(ASV_FILE.read_text())
    loop = "bench_work.TimeWork.time_loop"
    del doc["results"]["bench_work.TimeBroken.time_raises"]  # drop the real failure
    doc["results"][loop][11] = None  # no samples: the value alone
    base = _write(tmp_path, "base.json", doc)
    head_doc = json.loads(json.dumps(doc))
    head_doc["results"][loop][0] = [float("nan")]
    head = _write(tmp_path, "head.json", head_doc)
    rows = {r.fullname: r for r in compare_runs(load_results(head), load_results(base)).rows}
    assert rows[loop].verdict is Verdict.SKIPPED and rows[loop].note == "skipped in head"
    back = {r.fullname: r for r in compare_runs(load_results(base), load_results(head)).rows}
    assert back[loop].verdict is Verdict.SKIPPED
    assert back[loop].note == "skipped in base: nothing to compare against"
    code = main(["compare", "--head", str(head), "--base", str(base), "--fail-on-regression"])
    out = capsys.readouterr().out
    assert code == 0 and "skipped" in out and "failed in head" not in out
    main(["compare", "--head", str(head), "--base", str(base), "--only-changed", "--format", "csv"])
    assert loop not in capsys.readouterr().out  # a skip is no change
    assert main(["show", str(head), "-k", "time_loop", "--format", "csv"]) == 0
    assert capsys.readouterr().out.splitlines()[1].endswith(",skipped")  # not "failed"
    head_doc["results"][loop][0] = [None]  # the same benchmark failing instead
    failing = _write(tmp_path, "failing.json", head_doc)
    code = main(["compare", "--head", str(failing), "--base", str(base), "--fail-on-regression"])
    assert code == 1 and "failed in head" in capsys.readouterr().out
