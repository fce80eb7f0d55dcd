"""The GitHub workflows: valid against GitHub's schema, and safe with untrusted PR code."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / ".github" / "workflows"
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


def test_the_five_workflows_exist():
    assert [f.name for f in FILES] == [
        "bench-calibrate.yml", "bench-comment.yml", "bench-gpu.yml", "bench-nightly.yml",
        "bench-pr.yml",
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


def test_pull_requests_never_reach_the_gpu_runner():
    jobs = _load("bench-pr.yml")["jobs"]
    assert list(jobs) == ["cpu"] and jobs["cpu"]["runs-on"] == "ubuntu-latest"
    assert "SETS=cpu" in _steps_text(jobs["cpu"])
    for wf in FILES:
        data = _load(wf.name)
        gpu_jobs = [j for j in data["jobs"].values() if "self-hosted" in str(j["runs-on"])]
        if gpu_jobs:  # only a maintainer's dispatch, on an ephemeral runner
            assert set(data["on"]) == {"workflow_dispatch"}, wf.name
            assert all("ephemeral" in j["runs-on"] for j in gpu_jobs), wf.name


def test_gpu_runs_only_the_reviewed_head_commit():
    wf = _load("bench-gpu.yml")
    assert set(wf["on"]["workflow_dispatch"]["inputs"]) == {"pr", "sha"}
    gate, gpu, post = wf["jobs"]["gate"], wf["jobs"]["gpu"], wf["jobs"]["post"]
    assert gate["permissions"] == {"pull-requests": "read"}
    script = gate["steps"][0]["run"]
    assert "gh api" in script and '"$head" != "$SHA"' in script and "exit 2" in script
    assert gpu["needs"] == "gate" and gpu["permissions"] == {"contents": "read"}
    checkout = gpu["steps"][0]
    assert checkout["with"]["ref"] == "refs/pull/${{ inputs.pr }}/head"
    assert '[[ "$head" == "$SHA" ]]' in gpu["steps"][1]["run"]
    assert "SETS=gpu" in _steps_text(gpu)
    assert "rlpace.bench comment" in _steps_text(post) and '--head-sha "$SHA"' in _steps_text(post)


def test_comment_workflow_only_reads_artifacts_and_never_runs_pr_code():
    wf = _load("bench-comment.yml")
    assert set(wf["on"]) == {"workflow_run"}
    assert wf["on"]["workflow_run"]["workflows"] == ["bench-pr"]
    assert wf["permissions"] == {}
    job = wf["jobs"]["post"]
    assert job["permissions"] == {"actions": "read", "contents": "read", "pull-requests": "write"}
    text = (WORKFLOWS / "bench-comment.yml").read_text()
    assert "head_sha" not in text and "head_branch" not in text and "pull_request.head" not in text
    steps = _steps_text(job)
    assert "'ref'" not in steps  # the default branch, never the PR's
    assert "download-artifact" in steps and "rlpace.bench comment" in steps
    assert "rlpace.bench post" not in steps  # no markdown from the artifact is posted


def test_nightly_runs_asv_new_and_publishes():
    wf = _load("bench-nightly.yml")
    assert "schedule" in wf["on"]
    steps = _steps_text(wf["jobs"]["asv"])
    assert "asv run NEW" in steps and "asv publish" in steps
    assert "deploy-pages" in _steps_text(wf["jobs"]["publish"])
    # the step changes of the night's history, whose failure never holds back the site
    (history,) = [
        s for s in wf["jobs"]["asv"]["steps"] if "rlpace-bench history" in s.get("run", "")
    ]
    assert history["continue-on-error"] is True
    names = [s.get("name") or s.get("uses", "") for s in wf["jobs"]["asv"]["steps"]]
    assert names.index("rlpace-bench history") > max(
        i for i, n in enumerate(names) if "upload-pages-artifact" in n
    )


def test_calibration_runs_by_hand_on_the_commenting_runners_and_only_uploads():
    wf = _load("bench-calibrate.yml")
    assert set(wf["on"]) == {"workflow_dispatch"}
    assert wf["permissions"] == {"contents": "read"}
    text = (WORKFLOWS / "bench-calibrate.yml").read_text()
    assert "${{ secrets." not in text and "GITHUB_TOKEN" not in text
    jobs = wf["jobs"]
    # the same runners as bench-pr.yml, so the calibration describes the machine that
    # judges the pull requests
    assert jobs["cpu"]["runs-on"] == _load("bench-pr.yml")["jobs"]["cpu"]["runs-on"]
    assert jobs["gpu"]["runs-on"] == _load("bench-gpu.yml")["jobs"]["gpu"]["runs-on"]
    # on the CPU runner also what pr judges with: the count gates and the duet pool, from
    # A/A pr runs (`rlpace-bench calibrate`)
    assert "rlpace-bench calibrate --runs" in _steps_text(jobs["cpu"])
    assert "calibrate" not in _steps_text(jobs["gpu"])
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
    gpu = _load("bench-gpu.yml")["jobs"]["gpu"]
    assert "PIP_EXTRA_INDEX_URL" not in (gpu.get("env") or {})  # CUDA there


def test_standard_runners_that_count_install_valgrind_first():
    # the runner image has gcc but no Valgrind: without it pr falls back to timing every
    # case, asv skips the count series and calibrate measures nothing
    for workflow, job, runs in (
        ("bench-pr.yml", "cpu", "make bench"),
        ("bench-nightly.yml", "asv", "asv run NEW"),
        ("bench-calibrate.yml", "cpu", "rlpace-bench calibrate"),
    ):
        steps = [str(step) for step in _load(workflow)["jobs"][job]["steps"]]
        installs = [i for i, s in enumerate(steps) if "apt-get install" in s and "valgrind" in s]
        measures = [i for i, s in enumerate(steps) if runs in s]
        assert installs and measures and installs[0] < measures[0], (workflow, job)


# ------------------------------------------------------------------------ hardening

_PINNED = re.compile(r"^\s*(?:- )?uses: ([\w.-]+/[\w./-]+)@([0-9a-f]{40}) # v\d+\.\d+\.\d+$")


def _privileged_jobs():
    for wf in FILES:
        for name, job in _load(wf.name)["jobs"].items():
            if "write" in str(job.get("permissions", {})):
                yield wf.name, name, job


def test_every_action_is_pinned_by_full_commit_sha_with_its_tag():
    for wf in FILES:
        for line in wf.read_text().splitlines():
            if "uses:" in line:
                assert _PINNED.match(line), f"{wf.name}: {line.strip()}"


def test_no_run_script_expands_an_expression():
    # ${{ }} inside run: is pasted into the script before it runs (template injection);
    # values reach scripts through env: only
    for wf in FILES:
        for job in _load(wf.name)["jobs"].values():
            for step in job.get("steps", []):
                assert "${{" not in step.get("run", ""), f"{wf.name}: {step.get('name')}"


def test_privileged_jobs_run_only_default_branch_code_with_hashed_installs():
    found = list(_privileged_jobs())
    assert {(wf, name) for wf, name, _ in found} == {
        ("bench-comment.yml", "post"), ("bench-gpu.yml", "post"), ("bench-nightly.yml", "publish"),
    }  # fmt: skip
    for wf, name, job in found:
        for step in job["steps"]:
            uses = step.get("uses", "")
            if uses.startswith("actions/checkout@"):
                assert "ref" not in step.get("with", {}), (wf, name)  # the default branch
                assert step["with"]["persist-credentials"] is False
            if uses.startswith("actions/download-artifact@"):
                assert step["with"]["path"].startswith("${{ runner.temp }}/"), (wf, name)
            run = step.get("run", "")
            if "pip install" in run:
                assert "--require-hashes" in run and "ci/requirements-comment.txt" in run
            assert "make " not in run and "rlpace.bench post" not in run


def test_the_comment_requirements_pin_every_wheel_by_hash():
    text = (ROOT / "ci" / "requirements-comment.txt").read_text()
    entries = re.findall(
        r"^([A-Za-z0-9_.-]+)==(\S+) \\\n\s+--hash=sha256:([0-9a-f]{64})$", text, re.M
    )
    names = {name for name, _, _ in entries}
    assert {"httpx", "jinja2", "rich", "numpy", "pandas", "scipy", "jsonschema"} <= names
    assert "torch" not in names
    requirement_lines = [ln for ln in text.splitlines() if ln and not ln.startswith(("#", " "))]
    assert len(requirement_lines) == len(entries)  # no line without its hash


def _zizmor() -> str:
    found = Path(sys.executable).parent / "zizmor"
    if not found.exists():
        pytest.skip("zizmor is not installed (make venv installs it from ci/requirements.txt)")
    return str(found)


def test_the_workflow_linter_passes_and_catches_an_unpinned_action(tmp_path):
    cmd = [_zizmor(), "--offline", "--no-progress", "--strict-collection"]
    ok = subprocess.run([*cmd, str(WORKFLOWS)], capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    bad = tmp_path / "bad.yml"
    bad.write_text(
        "name: bad\non: pull_request\npermissions: {}\njobs:\n  x:\n    runs-on: ubuntu-latest\n"
        "    steps:\n      - uses: actions/checkout@v4\n        with:\n"
        "          persist-credentials: false\n"
    )
    caught = subprocess.run([*cmd, str(bad)], capture_output=True, text=True, timeout=120)
    assert caught.returncode != 0 and "unpinned-uses" in caught.stdout + caught.stderr
