"""Environment metadata, and the refusal to compare runs from different environments."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pandas as pd
import pytest
import torch

from rlpace.bench.environment import (
    COMPARED_KEYS,
    check_compatible,
    collect_environment,
    environment_of,
    require_compatible,
    require_compatible_runs,
)
from rlpace.bench.errors import BenchInputError, EnvironmentMismatchError

ROOT = Path(__file__).resolve().parents[2]


def test_collect_records_versions_cpu_threads_and_commit(monkeypatch):
    import tensordict
    import torchrl

    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    env = collect_environment(repo=ROOT)
    assert env["torch"] == torch.__version__
    assert env["tensordict"] == tensordict.__version__
    assert env["torchrl"] == torchrl.__version__
    assert env["rlpace"] == "0.1.0"
    assert env["torch_num_threads"] == torch.get_num_threads()
    assert env["omp_num_threads"] == "3" and env["mkl_num_threads"] is None
    assert env["cpu"] and env["cpu_count"] >= 1
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert env["git_commit"] == head
    assert isinstance(env["git_dirty"], bool)


def test_collect_outside_git_leaves_commit_empty(tmp_path):
    env = collect_environment(repo=tmp_path)
    assert env["git_commit"] is None and env["git_dirty"] is None


def test_same_environment_is_compatible_even_across_commits():
    head = collect_environment(repo=None)
    base = {**head, "git_commit": "0" * 40, "rlpace": "0.0.9", "platform": "other kernel"}
    assert check_compatible(head, base) == []
    assert require_compatible(head, base) == []


@pytest.mark.parametrize(
    ("key", "value"),
    [("torch", "2.12.0"), ("torchrl", "0.13.0"), ("omp_num_threads", None), ("cpu", "Other")],
)
def test_each_timing_relevant_difference_is_listed(key, value):
    head = collect_environment(repo=None)
    head["omp_num_threads"] = "1"
    base = {**head, key: value}
    (difference,) = check_compatible(head, base)
    assert difference == f"{key}: head {head[key]!r}, base {value!r}"


def test_compared_keys_cover_versions_cpu_and_threads():
    for key in ("torch", "tensordict", "torchrl", "python", "cpu", "torch_num_threads"):
        assert key in COMPARED_KEYS
    assert "git_commit" not in COMPARED_KEYS and "rlpace" not in COMPARED_KEYS


def test_mismatch_is_refused_with_the_override_named():
    with pytest.raises(EnvironmentMismatchError) as info:
        require_compatible({"torch": "2.13.0"}, {"torch": "2.12.0"})
    message = str(info.value)
    assert "torch: head '2.13.0', base '2.12.0'" in message
    assert "--allow-env-mismatch" in message
    assert isinstance(info.value, BenchInputError)  # the CLI exits 2


def test_mismatch_is_returned_when_explicitly_allowed():
    diffs = require_compatible({"torch": "2.13.0"}, {"torch": "2.12.0"}, allow_mismatch=True)
    assert diffs == ["torch: head '2.13.0', base '2.12.0'"]


def test_environment_of_reads_nested_metadata_and_rejects_missing_or_newer():
    assert environment_of({"rlpace": {"format_version": 1, "cpu": "x"}})["cpu"] == "x"
    with pytest.raises(BenchInputError, match="rlpace-bench run"):
        environment_of({"node": "box"}, source="old.json")
    with pytest.raises(BenchInputError, match="upgrade rlpace"):
        environment_of({"rlpace": {"format_version": 99}})


def _table(meta, source):
    df = pd.DataFrame()
    df.attrs["machine_info"] = {"node": "box", "rlpace": meta}
    df.attrs["source"] = source
    return df


def test_runs_are_checked_through_their_results_tables(pb_head):
    from rlpace.bench.results import load_results

    meta = collect_environment(repo=None)
    same = require_compatible_runs(_table(meta, "h.json"), _table(dict(meta), "b.json"))
    assert same == []
    other = {**meta, "torch_num_threads": 8}
    with pytest.raises(EnvironmentMismatchError, match="torch_num_threads"):
        require_compatible_runs(_table(meta, "h.json"), _table(other, "b.json"))
    # a file written without the suite plugin has no metadata: say how to get it
    with pytest.raises(BenchInputError, match="pb5_head.json"):
        require_compatible_runs(load_results(pb_head), _table(meta, "b.json"))


def _result_file(write_json, name, meta):
    doc = {
        "version": "5.3.1",
        "datetime": "2026-01-01T00:00:00",
        "machine_info": {"node": "box", "rlpace": meta},
        "commit_info": {"id": name},
        "benchmarks": [
            {
                "name": "test_x",
                "fullname": "t.py::test_x",
                "params": None,
                "extra_info": {},
                "stats": {"data": [1.0, 1.01, 0.99, 1.0, 1.02]},
            }
        ],
    }
    return write_json(doc, name=f"{name}.json")


def test_compare_command_refuses_different_environments_unless_allowed(write_json, capsys):
    from rlpace.bench.cli import main

    meta = collect_environment(repo=None)
    head = _result_file(write_json, "head", meta)
    base = _result_file(write_json, "base", {**meta, "torchrl": "0.13.0"})
    assert main(["compare", "--head", str(head), "--base", str(base)]) == 2
    err = capsys.readouterr().err
    assert "different environments (torchrl: head" in err and "--allow-env-mismatch" in err

    assert main(["compare", "--head", str(head), "--base", str(base), "--allow-env-mismatch"]) == 0
    captured = capsys.readouterr()
    assert "warning: environments differ: torchrl: head" in captured.err
    assert "test_x" in captured.out

    same = _result_file(write_json, "same", dict(meta))
    assert main(["compare", "--head", str(head), "--base", str(same)]) == 0
    assert "warning" not in capsys.readouterr().err


def test_files_without_metadata_are_compared_as_before(pb_head, pb_base, capsys):
    from rlpace.bench.cli import main

    assert main(["compare", "--head", str(pb_head), "--base", str(pb_base)]) == 0
    assert "environments differ" not in capsys.readouterr().err
