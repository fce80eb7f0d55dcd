"""The ``rlpace-bench`` program: discovery of subcommands and exit codes."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rlpace.bench.cli import build_parser, main


def test_version_flag_prints_version(capsys):
    try:
        main(["--version"])
    except SystemExit as exc:
        assert exc.code == 0
    assert "rlpace-bench 0.1.0" in capsys.readouterr().out


def test_no_command_is_a_usage_error(capsys):
    assert main([]) == 2
    assert "usage" in capsys.readouterr().err


def test_module_entry_point_runs():
    out = subprocess.run(
        [sys.executable, "-m", "rlpace.bench", "--help"], capture_output=True, text=True
    )
    assert out.returncode == 0
    assert "rlpace-bench" in out.stdout


def test_parser_is_named_like_the_console_script():
    assert build_parser().prog == "rlpace-bench"


def test_parsing_any_command_line_imports_no_heavy_library():
    # every rlpace-bench call parses first: with every subcommand's parser built,
    # nothing the work needs (pandas, scipy, jinja2, torch, rich) may be loaded yet
    code = (
        "import sys\n"
        "from rlpace.bench.cli import build_parser\n"
        "parser = build_parser()\n"
        "for argv in (['compare', '--head', 'h.json', '--style', 'seed'], ['show', 'r.json'],\n"
        "             ['peers', 'r.json'], ['pr', '--quick'], ['history']):\n"
        "    parser.parse_known_args(argv)\n"
        "heavy = ('pandas', 'scipy', 'numpy', 'jinja2', 'torch', 'rich', 'httpx')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_the_parsers_offer_the_names_the_work_accepts(capsys):
    from rlpace.bench import choices, render, result_tables

    assert tuple(result_tables.COMPARE_COLUMNS) == choices.COMPARE_COLUMN_NAMES
    assert tuple(result_tables.SHOW_COLUMNS) == choices.SHOW_COLUMN_NAMES
    assert tuple(result_tables._SORT_KEYS) == choices.COMPARE_SORT_KEYS
    assert render.STYLES is choices.STYLES
    with pytest.raises(SystemExit):
        main(["compare", "--help"])
    text = capsys.readouterr().out
    for name in (*choices.COMPARE_COLUMN_NAMES, *choices.COMPARE_SORT_KEYS, *choices.STYLES):
        assert name in text


# ---------------------------------------------------------------- compare and show

FIXTURES = Path(__file__).parent / "fixtures"
HEAD, BASE = str(FIXTURES / "pb5_head.json"), str(FIXTURES / "pb5_base.json")


def test_compare_both_styles_to_stdout(capsys):
    assert main(["compare", "--head", HEAD, "--base", BASE, "--style", "seed", "--title", "T"]) == 0
    seed = capsys.readouterr().out
    assert seed.startswith("## $\\color{#D29922}")
    assert "### Total Benchmarks: 13." in seed
    assert main(["compare", "--head", HEAD, "--base", BASE]) == 0
    assert capsys.readouterr().out.startswith("<!-- rlpace-bench-report -->")


def test_compare_writes_file_and_json(tmp_path, capsys):
    out, js = tmp_path / "sub" / "report.md", tmp_path / "cmp.json"
    code = main(["compare", "--head", HEAD, "--base", BASE, "-o", str(out), "--json", str(js)])
    assert code == 0
    assert capsys.readouterr().out == ""
    assert out.read_text().startswith("<!-- rlpace-bench-report -->")

    assert json.loads(js.read_text())["counts"]["worsened"] == 1


def test_fail_on_regression_exits_1_only_when_something_worsened(capsys):
    assert main(["compare", "--head", HEAD, "--base", BASE, "--fail-on-regression"]) == 1
    # head against itself: nothing worsened
    assert main(["compare", "--head", HEAD, "--base", HEAD, "--fail-on-regression"]) == 0
    # without a base nothing can worsen
    assert main(["compare", "--head", HEAD, "--fail-on-regression"]) == 0
    capsys.readouterr()


def test_bad_input_exits_2_with_a_message(tmp_path, capsys):
    broken = tmp_path / "broken.json"
    broken.write_text(FIXTURES.joinpath("pb5_base.json").read_text()[:500])
    assert main(["compare", "--head", str(broken), "--base", BASE]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rlpace-bench: error: ")
    assert "broken.json: not valid JSON" in err
    assert main(["compare", "--head", HEAD, "--base", str(tmp_path / "nope.json")]) == 2
    assert "nope.json: no such file" in capsys.readouterr().err
    assert main(["compare", "--head", HEAD, "--threshold", "-3"]) == 2
    assert "threshold" in capsys.readouterr().err


def test_paired_compare_needs_one_base_file_per_head_file(tmp_path, capsys):
    """``--paired`` judges run k of head against run k of base: unequal sides, or a
    single pair, cannot be duets, and the message says what to give instead."""
    args = ["compare", "--paired", "--head", HEAD, BASE, "--base", BASE]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "--paired: expected as many base files as head files, two or more" in err
    assert "got 2 head and 1 base" in err and "drop --paired" in err
    assert main(["compare", "--paired", "--head", HEAD, "--base", BASE]) == 2
    assert "got 1 head and 1 base" in capsys.readouterr().err
    # two pairs are judged pair by pair
    files = {}
    for side, src in (("head", HEAD), ("base", BASE)):
        for k in (0, 1):
            files[side, k] = tmp_path / f"{side}-{k}.json"
            files[side, k].write_text(Path(src).read_text())
    out = tmp_path / "paired.json"
    args = ["compare", "--paired", "--json", str(out), "-o", str(tmp_path / "r.md")]
    args += ["--head", str(files["head", 0]), str(files["head", 1])]
    assert main([*args, "--base", str(files["base", 0]), str(files["base", 1])]) == 0
    assert {row.get("method") for row in json.loads(out.read_text())["rows"]} >= {"paired"}
    capsys.readouterr()


def test_usage_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["compare", "--base", BASE])  # --head missing
    assert exc.value.code == 2
    with pytest.raises(SystemExit) as exc:
        main(["compare", "--head", HEAD, "--style", "fancy"])
    assert exc.value.code == 2
    capsys.readouterr()


def test_show_prints_every_benchmark(capsys):
    assert main(["show", HEAD]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"{HEAD}: pytest-benchmark 5.3.1, 12 benchmarks")
    assert out[1].split()[:3] == ["name", "group", "median"]  # the file has groups
    assert len(out) == 2 + 12
    assert (
        main(["show", str(FIXTURES / "asv/results/fixture-box/aaaaaaaa-existing-py_venv.json")])
        == 0
    )
    assert "failed" in capsys.readouterr().out
    assert main(["show", "nope.json"]) == 2


def test_console_script_compare_exit_code():
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "rlpace.bench",
            "compare",
            "--head",
            HEAD,
            "--base",
            BASE,
            "--fail-on-regression",
        ],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 1
    assert "<!-- rlpace-bench-report -->" in out.stdout


def test_compare_with_a_calibration_uses_its_noise_instead_of_the_assumed_one(tmp_path, capsys):
    from rlpace.bench.aa import write_calibration
    from rlpace.bench.calibration import BenchmarkNoise, Calibration

    # the only row that moves ~7% at the median is a torchrl twin: a negative control,
    # which the judge never flags when both sides pin the same packages, so this checks
    # the gate the calibration sets rather than a verdict
    name = "fixture_benchmarks.py::test_sum_range[torchrl-100]"
    bench = BenchmarkNoise(name, 2, (1.0, -1.0), 0, 1.0, 4.0, 7.0, 2.0)
    cal = Calibration("cpu", 2, 2, 8, 5.0, 0.05, 0.05, 0.0, 0.0, (bench,))
    path, _ = write_calibration(cal, tmp_path)
    js = tmp_path / "cmp.json"
    args = ["compare", "--head", HEAD, "--base", BASE, "--json", str(js)]
    assert main(args) == 0
    rows = {r["fullname"]: r for r in json.loads(js.read_text())["rows"]}
    assert rows[name]["assumed_noise_pct"] == 10.0 and rows[name]["noise_pct"] >= 10.0
    assert main([*args, "--calibration", str(path)]) == 0
    rows = {r["fullname"]: r for r in json.loads(js.read_text())["rows"]}
    assert rows[name]["assumed_noise_pct"] is None
    assert rows[name]["noise_pct"] < 7.0  # its calibrated noise, below its +7% change
    assert rows[name]["verdict"] == "unchanged"  # a control: reported, never flagged
    capsys.readouterr()


def test_compare_table_tools(tmp_path, capsys):
    assert (
        main(["compare", "--head", HEAD, "--base", BASE, "--format", "csv", "--sort", "change"])
        == 0
    )
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "name,verdict,change,interval,head,base"
    assert lines[1].startswith("test_slower_in_head,worsened,-82.")  # worst first
    assert main(["compare", "--head", HEAD, "--base", BASE, "--format", "json", "--only-changed",
                 "--columns", "name,verdict,unit"]) == 0  # fmt: skip
    rows = json.loads(capsys.readouterr().out)
    assert {r["verdict"] for r in rows} <= {"worsened", "improved", "new", "removed", "failed"}
    assert {r["unit"] for r in rows} == {"seconds"}
    assert (
        main(["compare", "--head", HEAD, "--base", BASE, "-k", "odd_names", "--format", "csv"]) == 0
    )
    assert len(capsys.readouterr().out.splitlines()) == 1 + 3
    assert main(["compare", "--head", HEAD, "--base", BASE, "--columns", "nope"]) == 2
    assert "unknown column 'nope'" in capsys.readouterr().err
    # several files per side are merged as runs: the one-run warning goes away
    heads, bases = [], []
    for i in range(2):
        for src, out in ((HEAD, heads), (BASE, bases)):
            copy = tmp_path / f"{i}_{Path(src).name}"
            copy.write_text(Path(src).read_text())
            out.append(str(copy))
    assert main(["compare", "--head", *heads, "--base", *bases]) == 0
    assert "judged on one run a side" not in capsys.readouterr().out
    glob = str(tmp_path / "*_pb5_head.json")
    assert main(["show", glob]) == 0
    assert "12 benchmarks, 2 runs merged" in capsys.readouterr().out


def test_show_table_tools_and_a_closed_pipe():
    out = subprocess.run(
        [sys.executable, "-m", "rlpace.bench", "show", HEAD, "--sort=-median", "--format", "csv"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert out.returncode == 0
    lines = out.stdout.splitlines()
    assert lines[0] == "name,group,median,mean,ops,rounds,status"
    assert lines[1].startswith("test_slower_in_head,")  # the slowest first
    # a reader that goes away (`| head -1`) ends the program quietly
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; from rlpace.bench.cli import main; "
         "sys.exit(main(['show', sys.argv[1]]))", HEAD],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    proc.stdout.close()  # nobody reads
    _, err = proc.communicate(timeout=60)
    assert b"Traceback" not in err and b"BrokenPipeError" not in err


def test_ctrl_c_ends_a_command_with_one_line_not_a_traceback(monkeypatch, capsys):
    from rlpace.bench.commands import show

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(show, "main", interrupted)
    assert main(["show", "whatever.json"]) == 130
    assert capsys.readouterr().err == "rlpace-bench: interrupted; nothing more was written\n"
