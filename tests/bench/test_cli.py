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
