"""The trusted comment job against poisoned artifacts, on a fake GitHub API on 127.0.0.1.

The job's own ``run:`` script is taken from ``bench-comment.yml`` and run as the
runner would; the other cases call the same subcommand in-process (faster).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from tests.bench.fixtures.bot.fake_github import BOT, FakeGitHub

from rlpace.bench.cli import main as cli_main
from rlpace.bench.compare import compare_runs
from rlpace.bench.comparison import COMPARISON_FORMAT_VERSION
from rlpace.bench.errors import BenchInputError
from rlpace.bench.markdown_safe import COMMENT_LIMIT
from rlpace.bench.render import REPORT_MARKER
from rlpace.bench.results import load_results, results_from_records

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).parent / "fixtures"
TOKEN = "ghs_comment_job_token_456"
REPO = "owner/name"
VICTIM_SHA, ATTACKER_SHA = "a" * 40, "b" * 40
PHISHING = "✅ No regressions — [claim your reward](https://evil.example) @everyone"


@pytest.fixture(scope="module")
def comparison_json():
    head = load_results(FIXTURES / "pb5_head.json")
    base = load_results(FIXTURES / "pb5_base.json")
    data = compare_runs(head, base).to_dict()
    data["pipeline"] = {"set": "cpu", "base_commit": "c" * 40, "base_ref": "origin/main"}
    return data


@pytest.fixture
def github():
    fake = FakeGitHub(per_page_cap=50).start()
    fake.add_pull(7, VICTIM_SHA, REPO, branch="victim")
    fake.add_pull(9, ATTACKER_SHA, "mallory/name", branch="evil")
    yield fake
    fake.stop()


def _event(tmp_path, head_sha=ATTACKER_SHA, head_repo="mallory/name", branch="evil", **run):
    path = tmp_path / "event.json"
    workflow_run = {
        "id": 42, "event": "pull_request", "head_sha": head_sha, "head_branch": branch,
        "head_repository": {"full_name": head_repo}, "repository": {"full_name": REPO},
        "pull_requests": [{"number": 7}],  # what a poisoned run might claim: never read
        **run,
    }  # fmt: skip
    path.write_text(json.dumps({"workflow_run": workflow_run}))
    return path


def _artifact(tmp_path, data, set_name="cpu", pr_number="9", raw=None):
    folder = tmp_path / "artifacts" / f"bench-report-{set_name}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{set_name}.json").write_bytes(raw if raw is not None else json.dumps(data).encode())
    (folder / f"{set_name}.md").write_text(f"{REPORT_MARKER}\n{PHISHING}\n")
    if pr_number is not None:
        (folder / "pr-number.txt").write_text(pr_number + "\n")
    return tmp_path / "artifacts"


def _run(github, tmp_path, monkeypatch, *extra, event=None):
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    argv = ["comment", "--artifacts", str(tmp_path / "artifacts"), "--repo", REPO]
    argv += ["--api-url", github.url, "--bot-login", BOT, "--backoff-s", "0"]
    if event is not None:
        argv += ["--event", str(event)]
    return cli_main([*argv, *extra])


def _posted(github):
    return [c for c in github.comments if "pr" in c]


# ------------------------------------------------------------------ the workflow's script


def _workflow_script():
    wf = yaml.safe_load((ROOT / ".github" / "workflows" / "bench-comment.yml").read_text())
    step = next(
        s for s in wf["jobs"]["post"]["steps"] if "rlpace.bench comment" in s.get("run", "")
    )
    return step["run"], step["env"]


def _run_workflow_script(github, tmp_path, event):
    script, step_env = _workflow_script()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "RUNNER_"))}
    env.update({k: v.replace("${{ github.token }}", TOKEN) for k, v in step_env.items()})
    env.update(
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        RUNNER_TEMP=str(tmp_path),
        GITHUB_EVENT_PATH=str(event),
        GITHUB_REPOSITORY=REPO,
        GITHUB_API_URL=github.url,
    )
    return subprocess.run(
        ["bash", "-e", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def test_workflow_script_posts_a_rerendered_report_to_the_runs_own_pr(
    github, tmp_path, comparison_json
):
    _artifact(tmp_path, comparison_json)
    out = _run_workflow_script(github, tmp_path, _event(tmp_path))
    assert out.returncode == 0, out.stderr
    assert "cpu: created comment 1001 on #9" in out.stdout
    [comment] = _posted(github)
    assert comment["pr"] == 9  # the PR of the run's head SHA and repository
    body = comment["body"]
    assert body.startswith(f"{REPORT_MARKER}\n<!-- rlpace-bench-set: cpu -->\n")
    assert "#\u200b9 at bbbbbbb vs main (ccccccc)" in body and len(body) <= COMMENT_LIMIT
    assert "claim your reward" not in body and "evil.example" not in body  # the .md is ignored
    assert all(auth == f"Bearer {TOKEN}" for _, _, auth in github.requests)
    assert TOKEN not in out.stdout + out.stderr


def test_workflow_script_refuses_an_artifact_naming_another_pr(github, tmp_path, comparison_json):
    _artifact(tmp_path, comparison_json, pr_number="7")
    out = _run_workflow_script(github, tmp_path, _event(tmp_path))
    assert out.returncode == 2
    assert "pr-number.txt names another pull request than #9" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr
    assert github.writes() == []


# ---------------------------------------------------------------------- poisoned artifacts


def _hostile_json(data, case):
    data = json.loads(json.dumps(data))
    if case == "a verdict that is markdown":
        data["rows"][0]["verdict"] = PHISHING
    elif case == "a name over the size cap":
        data["rows"][0]["name"] = "x" * 5000
    elif case == "too many rows":
        data["rows"] = data["rows"] * 160  # 2080 rows, under the byte cap
    elif case == "another set than its folder":
        data["pipeline"]["set"] = "gpu"
    elif case == "a string where a number belongs":
        data["rows"][0]["head_median"] = "1 ms"
    elif case == "another format version":
        data["version"] = 99
    elif case == "markdown where a count belongs":
        data["count_tier"] = {"timed_once": True, "counted_duets": PHISHING}
    return json.dumps(data).encode()


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("a verdict that is markdown", "rows[0].verdict does not match the comparison schema"),
        ("a name over the size cap", "rows[0].name does not match the comparison schema: expected at most 500 characters"),
        ("too many rows", "rows does not match the comparison schema: expected at most 2000 items"),
        ("another set than its folder", "says it is the 'gpu' set; refusing a mismatched artifact"),
        ("a string where a number belongs", "rows[0].head_median does not match"),
        ("another format version", f"version does not match the comparison schema: expected {COMPARISON_FORMAT_VERSION}"),
        ("markdown where a count belongs", "count_tier.counted_duets does not match the comparison schema: expected a value of type integer"),
        ("oversized JSON", "bytes, expected at most 4194304; refusing an oversized comparison"),
        ("NaN", "expected strict JSON (no NaN, no duplicate keys)"),
        ("duplicate keys", "duplicate key 'format'"),
        ("not UTF-8", "expected UTF-8 JSON"),
        ("deep nesting", "nesting too deep"),
    ],
)  # fmt: skip
def test_a_poisoned_artifact_posts_nothing_anywhere(
    github, tmp_path, monkeypatch, capsys, comparison_json, case, expected
):
    raw = {
        "oversized JSON": b" " * (4 * 1024 * 1024 + 1),
        "NaN": b'{"format": "rlpace-comparison", "threshold": NaN}',
        "duplicate keys": b'{"format": "rlpace-comparison", "format": "x"}',
        "not UTF-8": b'{"format": "\xff"}',
        "deep nesting": b"[" * 100_000 + b"]" * 100_000,
    }.get(case) or _hostile_json(comparison_json, case)
    _artifact(tmp_path, None, raw=raw)
    assert _run(github, tmp_path, monkeypatch, event=_event(tmp_path)) == 2
    err = capsys.readouterr().err
    assert expected in err, err
    assert len(err.strip().splitlines()) == 1
    assert github.requests == []  # refused before the API is even asked


def test_one_poisoned_set_refuses_the_whole_run(github, tmp_path, monkeypatch, comparison_json):
    _artifact(tmp_path, comparison_json)
    gpu = dict(comparison_json, pipeline={"set": "gpu"})
    gpu["rows"] = [dict(gpu["rows"][0], unit="u" * 41)]
    _artifact(tmp_path, gpu, set_name="gpu")
    assert _run(github, tmp_path, monkeypatch, event=_event(tmp_path)) == 2
    assert github.writes() == []


@pytest.mark.parametrize("entry", ["notes.txt", "bench-report-CPU", "bench-report-x/../../y"])
def test_anything_but_bench_report_folders_is_refused(
    github, tmp_path, monkeypatch, comparison_json, entry
):
    artifacts = _artifact(tmp_path, comparison_json)
    target = artifacts / entry.split("/")[0]
    target.mkdir(exist_ok=True) if "." not in entry else target.write_text("x")
    assert _run(github, tmp_path, monkeypatch, event=_event(tmp_path)) == 2
    assert github.writes() == []


def test_a_linked_json_is_refused(github, tmp_path, monkeypatch, comparison_json):
    real = tmp_path / "elsewhere.json"
    real.write_text(json.dumps(comparison_json))
    folder = _artifact(tmp_path, comparison_json) / "bench-report-cpu"
    (folder / "cpu.json").unlink()
    (folder / "cpu.json").symlink_to(real)
    assert _run(github, tmp_path, monkeypatch, event=_event(tmp_path)) == 2
    assert github.writes() == []


def test_a_run_of_a_foreign_fork_at_the_victims_sha_posts_nothing(
    github, tmp_path, monkeypatch, capsys, comparison_json
):
    # the attacker pushed the victim's head commit to their fork: the event's head SHA
    # matches PR #7, but its head repository does not
    _artifact(tmp_path, comparison_json, pr_number="7")
    event = _event(tmp_path, head_sha=VICTIM_SHA, head_repo="mallory/name", branch="victim")
    assert _run(github, tmp_path, monkeypatch, event=event) == 0
    assert "no open pull request of owner/name has head aaaaaaaaaaaa" in capsys.readouterr().out
    assert github.writes() == []


def test_a_run_from_another_repository_is_refused(github, tmp_path, monkeypatch, comparison_json):
    _artifact(tmp_path, comparison_json)
    event = _event(tmp_path, repository={"full_name": "other/repo"})
    assert _run(github, tmp_path, monkeypatch, event=event) == 2
    assert github.requests == []


def test_a_foreign_comment_with_the_marker_is_never_edited(
    github, tmp_path, monkeypatch, comparison_json
):
    forged = "<!-- rlpace-bench-report -->\n<!-- rlpace-bench-set: cpu -->\nforged"
    github.comments = [{"id": 5, "body": forged, "user": {"login": "mallory"}}]
    _artifact(tmp_path, comparison_json)
    assert _run(github, tmp_path, monkeypatch, event=_event(tmp_path)) == 0
    assert github.comments[0]["body"] == forged
    assert [c["pr"] for c in _posted(github)] == [9]
    assert _run(github, tmp_path, monkeypatch, event=_event(tmp_path)) == 0  # a rerun
    assert len(_posted(github)) == 1 and github.comments[0]["body"] == forged


def test_hostile_names_reach_the_comment_inert(github, tmp_path, monkeypatch):
    names = ["# Heading", "@octocat see #7", "![x](https://e.vil/a.png)", "\u202etxt.exe"]
    head = results_from_records(
        [{"fullname": n, "name": n, "data": [1.0, 1.1, 0.9]} for n in names]
    )
    data = compare_runs(head).to_dict()
    data["pipeline"] = {"set": "cpu"}
    _artifact(tmp_path, data)
    assert _run(github, tmp_path, monkeypatch, event=_event(tmp_path)) == 0
    body = _posted(github)[0]["body"]
    for shown in [
        "\\# Heading",
        "@\u200boctocat see #\u200b7",
        "!\\[x](https:\u200b//e.vil/a.png)",
    ]:
        assert f"| {shown} |" in body
    assert "\u202e" not in body and "| txt.exe |" in body


def test_a_skipped_set_is_rendered_from_its_reason(github, tmp_path, monkeypatch):
    data = {
        "format": "rlpace-pr-skipped", "version": 1, "pipeline": {"set": "gpu"},
        "skipped": "no CUDA device\n\n# [win](https://e.vil)",
    }  # fmt: skip
    _artifact(tmp_path, data, set_name="gpu")
    assert _run(github, tmp_path, monkeypatch, event=_event(tmp_path)) == 0
    body = _posted(github)[0]["body"]
    assert body.endswith("Skipped: no CUDA device # \\[win](https:\u200b//e.vil).")


def test_a_dispatched_run_posts_only_while_the_pr_still_has_the_reviewed_head(
    github, tmp_path, monkeypatch, capsys, comparison_json
):
    _artifact(tmp_path, comparison_json, pr_number=None)
    assert _run(github, tmp_path, monkeypatch, "--pr", "9", "--head-sha", ATTACKER_SHA) == 0
    assert [c["pr"] for c in _posted(github)] == [9]
    assert _run(github, tmp_path, monkeypatch, "--pr", "9", "--head-sha", "d" * 40) == 2
    assert "not posting a report of other code" in capsys.readouterr().err
    assert len(_posted(github)) == 1


def test_a_comparison_with_the_count_tier_survives_the_record_and_renders_inert():
    """``pr --counts`` adds count fields and a ``count_tier`` summary; the trusted job
    validates and re-renders them, and function names from the PR's code stay inert."""
    from rlpace.bench.comparison import BenchmarkChange, Comparison, Verdict
    from rlpace.bench.comparison_record import record_from_dict
    from rlpace.bench.render import render_report

    row = BenchmarkChange(
        "t.py::test_a", "test_a", Verdict.WORSENED, head_median=1.1, base_median=1.0,
        median_change_pct=-9.0, change_pct=-9.0, count_verdict="regression",
        count_change_pct=4.0, cycles_change_pct=3.5, count_gate_pct=1.0,
        count_note="count regression; time did not move enough to flag",
        count_causes={"total": 1234.0, "native": [["operator|`x` @evil", 10.0, 20.0]],
                      "python": [["[f](https://evil.example)", 1.0, 3.0]],
                      "priced": [["allocator", 372.0, 380.0], ["[l](https://evil.example)", 1, 2]]},
    )  # fmt: skip
    tier = {"unavailable": None, "warnings": [], "verdicts": {"regression": 1}, "counted": 1,
            "not_counted": 0, "wall_s": 12.0, "gates": None}  # fmt: skip
    data = json.loads(json.dumps(Comparison(rows=(row,), count_tier=tier).to_dict()))
    data["pipeline"] = {"set": "cpu"}
    record = record_from_dict(data, source="cpu.json")
    rebuilt = record.comparison
    assert rebuilt.count_tier == tier and rebuilt.rows[0].count_causes["total"] == 1234.0
    text = render_report(rebuilt)
    assert "Why did test_a regress?" in text
    assert "`operator\\|x @evil`" in text  # one code cell: no backtick, the pipe escaped
    assert "`[f](https://evil.example)`" in text  # inside a code span: not a link
    assert "allocator 372.0 → 380.0;" in text  # calls per call into a priced family
    assert "](https://evil.example)" not in text.replace("`[f](https://evil.example)`", "")
    data["rows"][0]["count_causes"] = {"total": 1, "native": [["x", "1", 2]], "python": []}
    with pytest.raises(BenchInputError, match="count_causes"):
        record_from_dict(data, source="cpu.json")


def test_a_variance_prior_of_infinite_degrees_of_freedom_survives_the_record():
    """A run whose variances spread no more than sampling explains fits a prior with
    infinite degrees of freedom; JSON writes it as null, and the comment job once
    refused every such artifact (caught by pr's own read-back)."""
    import math

    from rlpace.bench.comparison import Comparison
    from rlpace.bench.comparison_record import record_from_dict
    from rlpace.bench.stats import fit_variance_prior

    prior = fit_variance_prior([0.010, 0.0101, 0.0099, 0.010], [2, 2, 2, 2])
    assert prior[1] == math.inf  # what the real fit gives such a run
    data = json.loads(json.dumps(Comparison(rows=(), variance_prior=prior).to_dict()))
    assert data["variance_prior"][1] is None
    data["pipeline"] = {"set": "cpu"}
    again = record_from_dict(data, source="cpu.json").comparison.variance_prior
    assert again[0] == pytest.approx(prior[0]) and again[1] == math.inf
    data["variance_prior"] = [None, 3]
    with pytest.raises(BenchInputError, match="variance_prior"):
        record_from_dict(data, source="cpu.json")


def test_what_a_time_budget_cut_survives_the_record_and_the_comment_says_it():
    """``pr --time-budget`` records what it cut; the trusted job accepts exactly that
    shape, re-renders the sentence from it, and refuses a field it does not know."""
    from rlpace.bench.comparison import BenchmarkChange, Comparison, Verdict
    from rlpace.bench.comparison_record import record_from_dict
    from rlpace.bench.render import render_report

    row = BenchmarkChange(
        "t.py::test_a", "test_a", Verdict.UNCHANGED, head_median=1.0, base_median=1.0,
        median_change_pct=0.5, change_pct=0.5, method="paired", head_runs=4, base_runs=4,
    )  # fmt: skip
    cut = {"budget_min": 13.0, "planned_duets": 6, "ran_duets": 2, "short": 3}
    data = json.loads(json.dumps(Comparison(rows=(row,), paired=4, time_budget=cut).to_dict()))
    data["pipeline"] = {"set": "cpu"}
    rebuilt = record_from_dict(data, source="cpu.json").comparison
    assert rebuilt.time_budget == cut
    text = render_report(rebuilt)
    assert (
        "The time budget (13 min) stopped the extra duets after 2 of 6: 3 benchmarks got "
        "fewer pairs than planned" in text
    )
    assert "time budget" not in render_report(replace(rebuilt, time_budget=None))
    data["time_budget"]["note"] = "[x](https://evil.example)"
    with pytest.raises(BenchInputError, match="time_budget"):
        record_from_dict(data, source="cpu.json")
