"""The ``rlpace-bench`` program: discovery of subcommands and exit codes."""

import subprocess
import sys

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
