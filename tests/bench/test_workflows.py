"""The GitHub workflows: valid against GitHub's schema, and safe with untrusted PR code."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

WORKFLOWS = Path(__file__).resolve().parents[2] / ".github" / "workflows"
FILES = sorted(WORKFLOWS.glob("*.yml"))


def _load(name: str) -> dict:
    data = yaml.safe_load((WORKFLOWS / name).read_text())
    data["on"] = data.pop(True, data.get("on"))  # YAML 1.1 reads a bare `on` as True
    return data


def _steps_text(job: dict) -> str:
    return "\n".join(str(step) for step in job.get("steps", []))


def _check_jsonschema() -> str:
    found = shutil.which("check-jsonschema") or str(
        Path(sys.executable).parent / "check-jsonschema"
    )
    if not Path(found).exists():
        pytest.skip("check-jsonschema is not installed (pip install check-jsonschema)")
    return found


def test_the_four_workflows_exist():
    assert [f.name for f in FILES] == [
        "bench-calibrate.yml", "bench-comment.yml", "bench-nightly.yml", "bench-pr.yml",
    ]  # fmt: skip


def test_workflows_match_githubs_schema():
    out = subprocess.run(
        [_check_jsonschema(), "--builtin-schema", "vendor.github-workflows", *map(str, FILES)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_schema_check_catches_a_broken_workflow(tmp_path):
    bad = tmp_path / "bad.yml"
    bad.write_text("name: bad\non: pull_request\njobs:\n  x:\n    steps: []\n")  # no runs-on
    out = subprocess.run(
        [_check_jsonschema(), "--builtin-schema", "vendor.github-workflows", str(bad)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode != 0


def test_pr_workflow_runs_untrusted_code_without_write_access():
    wf = _load("bench-pr.yml")
    assert set(wf["on"]) == {"pull_request"}
    assert wf["permissions"] == {"contents": "read"}
    text = (WORKFLOWS / "bench-pr.yml").read_text()
    assert "${{ secrets." not in text and "GITHUB_TOKEN" not in text
    for job in wf["jobs"].values():
        assert "write" not in str(job.get("permissions", {}))
        assert "persist-credentials': False" in _steps_text(job)
        assert "upload-artifact" in _steps_text(job)


def test_pr_workflow_runs_cpu_on_standard_and_gpu_on_gpu_runner():
    jobs = _load("bench-pr.yml")["jobs"]
    assert jobs["cpu"]["runs-on"] == "ubuntu-latest"
    assert "SETS=cpu" in _steps_text(jobs["cpu"])
    assert "gpu" in jobs["gpu"]["runs-on"]
    assert "SETS=gpu" in _steps_text(jobs["gpu"])


def test_comment_workflow_only_reads_artifacts_and_never_runs_pr_code():
    wf = _load("bench-comment.yml")
    assert set(wf["on"]) == {"workflow_run"}
    assert wf["on"]["workflow_run"]["workflows"] == ["bench-pr"]
    assert wf["permissions"]["pull-requests"] == "write"
    assert wf["permissions"]["contents"] == "read"
    text = (WORKFLOWS / "bench-comment.yml").read_text()
    assert "head_sha" not in text and "head_branch" not in text and "pull_request.head" not in text
    steps = _steps_text(wf["jobs"]["post"])
    assert "default_branch" in steps
    assert "download-artifact" in steps and "rlpace.bench post" in steps


def test_nightly_runs_asv_new_and_publishes():
    wf = _load("bench-nightly.yml")
    assert "schedule" in wf["on"]
    steps = _steps_text(wf["jobs"]["asv"])
    assert "asv run NEW" in steps and "asv publish" in steps
    assert "deploy-pages" in _steps_text(wf["jobs"]["publish"])


def test_calibration_runs_by_hand_on_the_commenting_runners_and_only_uploads():
    wf = _load("bench-calibrate.yml")
    assert set(wf["on"]) == {"workflow_dispatch"}
    assert wf["permissions"] == {"contents": "read"}
    text = (WORKFLOWS / "bench-calibrate.yml").read_text()
    assert "${{ secrets." not in text and "GITHUB_TOKEN" not in text
    jobs = wf["jobs"]
    # the same runners as bench-pr.yml, so the calibration describes the machine that
    # judges the pull requests
    pr = _load("bench-pr.yml")["jobs"]
    assert jobs["cpu"]["runs-on"] == pr["cpu"]["runs-on"]
    assert jobs["gpu"]["runs-on"] == pr["gpu"]["runs-on"]
    for name, job in jobs.items():
        steps = _steps_text(job)
        assert f"rlpace-bench aa --set {name} --repeats 2" in steps
        assert "--inject" in steps and "test_=0.1,*[torchrl*=0" in steps
        assert "upload-artifact" in steps and "reports/aa/" in steps
        assert "persist-credentials': False" in steps


def test_standard_runners_install_the_cpu_build_of_the_pinned_torch():
    # torch==2.13.0 from PyPI alone is the multi-GB CUDA build; the standard-runner jobs
    # that install ci/requirements.txt must see PyTorch's CPU index
    cpu_index = "https://download.pytorch.org/whl/cpu"
    pr = _load("bench-pr.yml")
    nightly = _load("bench-nightly.yml")
    assert pr["jobs"]["cpu"]["env"]["PIP_EXTRA_INDEX_URL"] == cpu_index
    assert nightly["jobs"]["asv"]["env"]["PIP_EXTRA_INDEX_URL"] == cpu_index
    assert _load("bench-calibrate.yml")["jobs"]["cpu"]["env"]["PIP_EXTRA_INDEX_URL"] == cpu_index
    assert "PIP_EXTRA_INDEX_URL" not in (pr["jobs"]["gpu"].get("env") or {})  # CUDA there
