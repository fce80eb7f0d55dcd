"""Output paths that cannot take a command's files are said before the work, in one line.

``pr``, ``calibrate``, ``aa --duets`` and ``count run`` write their files after minutes
(an hour for ``calibrate``) of runs: a ``--out-dir`` that is a file, or lies under one,
must fail at once with expected / got / fix, run nothing and write nothing. Any other
command that meets such a path says which path and why, never a traceback.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.bench.fixtures.git_repo import git

from rlpace.bench._atomic import writable_dir
from rlpace.bench.cli import main as cli_main
from rlpace.bench.counts.records import CaseCount, CountRun, write_counts
from rlpace.bench.errors import BenchInputError


@pytest.fixture
def repo(tmp_path: Path, monkeypatch) -> Path:
    """A clean checkout with a (never run) benchmark suite, and a file beside it."""
    root = tmp_path / "proj"
    suite = root / "tests" / "benchmarks"
    suite.mkdir(parents=True)
    (suite / "test_none.py").write_text("def test_nothing():\n    pass\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "one commit")
    (tmp_path / "a-file").write_text("not a folder\n")
    monkeypatch.chdir(root)
    return root


def _written(root: Path) -> list[str]:
    """What the repository holds besides the commit (git's view, ignored files too)."""
    out = git(root, "status", "--porcelain", "--ignored", "--untracked-files=all")
    return out.splitlines()


@pytest.mark.parametrize(
    "argv",
    [
        ["pr", "--base", "HEAD"],
        ["calibrate"],
        ["aa", "--duets", "4"],
    ],
    ids=["pr", "calibrate", "aa-duets"],
)
@pytest.mark.parametrize("under", [False, True], ids=["a-file", "under-a-file"])
def test_an_out_dir_that_is_a_file_fails_before_anything_runs(repo, capsys, argv, under):
    target = repo.parent / "a-file"
    out_dir = target / "reports" if under else target
    assert cli_main([*argv, "--out-dir", str(out_dir)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    where = f" at {target}" if under else ""
    assert (
        f"--out-dir {out_dir}: expected a directory rlpace-bench can write to, got a "
        f"file{where}. Fix: give --out-dir a directory you can write to" in err
    )
    # no base worktree, no runs directory, no report: nothing was started
    assert _written(repo) == []
    assert target.read_text() == "not a folder\n"


@pytest.mark.parametrize("command", [["count", "run"], ["run"]], ids=["count-run", "run"])
def test_a_result_file_under_a_file_is_refused_before_the_suite_runs(repo, capsys, command):
    output = repo.parent / "a-file" / "head.json"
    assert cli_main([*command, "--output", str(output)]) == 2
    err = capsys.readouterr().err
    assert f"--output's folder {output.parent}: expected a directory" in err
    assert "Fix: give --output a file in a folder you can write to" in err
    assert _written(repo) == []


def test_pr_checks_its_cache_dir_before_the_base_checkout(repo, capsys):
    cache = repo.parent / "a-file" / "cache"
    assert cli_main(["pr", "--base", "HEAD", "--cache-dir", str(cache)]) == 2
    err = capsys.readouterr().err
    assert f"--cache-dir {cache}: expected a directory rlpace-bench can write to" in err
    assert _written(repo) == []


def test_a_path_met_later_is_named_in_one_line(tmp_path, capsys):
    # `count compare --json` writes at once, so its folder is not checked first: the
    # CLI's net names the path the OS refused
    case = CaseCount("t", "counted", instructions=1.0e6, cycles=2.0e6)
    files = [write_counts(CountRun({}, (case,)), tmp_path / f"{n}.json") for n in "hb"]
    (tmp_path / "a-file").write_text("x")
    json_out = tmp_path / "a-file" / "changes.json"
    argv = ["count", "compare", "--head", str(files[0]), "--base", str(files[1])]
    assert cli_main([*argv, "--json", str(json_out)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert err.startswith(
        f"rlpace-bench: error: {tmp_path / 'a-file'}: expected a path this command can read "
        "or write, got the system's refusal (File exists). Fix: choose another path"
    )


def test_a_folder_to_be_made_in_a_writable_one_passes_and_nothing_is_made(tmp_path):
    wanted = tmp_path / "new" / "deeper"
    assert writable_dir(wanted, "--out-dir") == wanted
    assert not (tmp_path / "new").exists()
    with pytest.raises(BenchInputError, match="got a file. Fix: give -o the way"):
        writable_dir(Path(__file__), "-o", "give -o the way")
