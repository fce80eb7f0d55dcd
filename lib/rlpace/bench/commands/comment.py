"""``rlpace-bench comment``: the trusted comment job, which trusts nothing it downloads.

Run by ``bench-comment.yml`` (a ``workflow_run`` of ``bench-pr``) and by
``bench-gpu.yml``'s post job, with a token that can write pull-request comments, on
artifacts that the pull request's own code produced. So:

1. The pull request comes from the event, not the artifact: ``workflow_run.head_sha``
   and ``workflow_run.head_repository`` of ``$GITHUB_EVENT_PATH``, looked up through
   the API (a fork's pull request is matched by its head SHA and repository); with
   ``--pr``/``--head-sha`` (a maintainer's dispatch) the pull request must still have
   that head. No match: nothing is posted.
2. Every artifact must be a ``bench-report-<set>`` folder whose ``<set>.json`` is a
   plain file of at most 4 MiB that validates against the comparison schema
   (:mod:`rlpace.bench.comparison_record`) and names the same set; a
   ``pr-number.txt``, if there, must name the pull request found. One artifact that
   fails: nothing is posted at all.
3. The comment is rendered here, by this (default-branch) code, from the validated
   comparison; the markdown files in the artifact are never read.
4. Only the bot's own comment is edited (``--bot-login``), see :mod:`rlpace.bench.github`.

Exit status: 0 posted (or nothing to post), 2 refused or failed, one line each.

Example:
    >>> from rlpace.bench.cli import build_parser
    >>> args = build_parser().parse_args(["comment", "--artifacts", "/tmp/a"])
    >>> args.artifacts, args.pr
    ('/tmp/a', None)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from rlpace.bench.commands.post import add_api_arguments, api_settings
from rlpace.bench.errors import BenchInputError

NAME = "comment"
HELP = (
    "Post the PR comments of a bench-pr run from its artifacts' validated comparison "
    "JSON (the trusted workflow_run job)."
)

_ARTIFACT = re.compile(r"^bench-report-([a-z][a-z0-9_-]{0,31})$")
_SHA = re.compile(r"^[0-9a-f]{40}$")
_MAX_ARTIFACTS = 8


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the ``comment`` options."""
    parser.add_argument(
        "--artifacts",
        required=True,
        help="folder holding the downloaded bench-report-<set> artifacts (one folder each)",
    )
    parser.add_argument(
        "--event",
        default=None,
        help="the workflow_run event JSON (default: $GITHUB_EVENT_PATH)",
    )
    parser.add_argument(
        "--repo",
        default=None,
        help="OWNER/NAME of the base repository (default: $GITHUB_REPOSITORY)",
    )
    parser.add_argument(
        "--pr", type=int, default=None, help="with --head-sha: a maintainer-dispatched run's PR"
    )
    parser.add_argument(
        "--head-sha", default=None, help="with --pr: the head commit the dispatched run measured"
    )
    add_api_arguments(parser)


def main(args: argparse.Namespace) -> int:
    """Find the pull request, validate every artifact, re-render and post."""
    from rlpace.bench.github import GitHubApi, GitHubError

    repo = args.repo or os.environ.get("GITHUB_REPOSITORY", "")
    if (args.pr is None) != (args.head_sha is None):
        raise BenchInputError(
            "--pr and --head-sha: expected both (a dispatched run) or neither (a "
            "workflow_run event), got one. Fix: pass both or drop both"
        )
    facts = _dispatch_facts(args) if args.pr is not None else _event_facts(args.event, repo)
    records = _read_artifacts(Path(args.artifacts))
    if not records:
        print(
            f"rlpace-bench comment: no bench-report-* artifact in {args.artifacts}: nothing to post"
        )
        return 0
    settings = api_settings(args)
    with GitHubApi(settings["api_url"], settings["token"], retry=settings["retry"]) as api:
        try:
            pr = _pull_request(api, repo, facts)
            if pr is None:
                print(
                    f"rlpace-bench comment: no open pull request of {repo} has head "
                    f"{facts['head_sha'][:12]} from {facts['head_repo']} (pushed since, or "
                    "closed): nothing posted"
                )
                return 0
            bodies = _render(records, pr)
            status = 0
            for set_name, body in bodies:
                posted = _post(api, repo, pr.number, body, settings["bot_login"])
                print(
                    f"{set_name}: {posted.action} comment {posted.comment_id} on "
                    f"#{pr.number} {posted.url}".rstrip()
                )
        except GitHubError as exc:
            print(f"rlpace-bench comment: error: {api.scrub(str(exc))}", file=sys.stderr)
            status = 2
    return status


# ------------------------------------------------------------------------ the facts


def _event_facts(event_path: str | None, repo: str) -> dict[str, str]:
    """The run's head commit, repository and branch from the workflow_run event."""
    path = event_path or os.environ.get("GITHUB_EVENT_PATH", "")
    if not path:
        raise BenchInputError(
            "no event: expected --event or $GITHUB_EVENT_PATH (a workflow_run event), found "
            "neither. Fix: run in the workflow_run job, or pass --pr and --head-sha"
        )
    try:
        event = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise BenchInputError(
            f"event {path}: expected the workflow_run event JSON, could not read it"
        ) from None
    run = event.get("workflow_run") if isinstance(event, dict) else None
    if not isinstance(run, dict):
        raise BenchInputError(f"event {path}: expected a workflow_run event, found another kind")
    if run.get("event") != "pull_request":
        raise BenchInputError(
            f"event {path}: expected a run triggered by pull_request, got "
            f"{str(run.get('event'))[:40]!r}; only pull-request runs get a comment"
        )
    head_sha = run.get("head_sha")
    head_repo = (run.get("head_repository") or {}).get("full_name")
    run_repo = (run.get("repository") or {}).get("full_name")
    branch = run.get("head_branch") or ""
    if not isinstance(head_sha, str) or not _SHA.match(head_sha):
        raise BenchInputError(f"event {path}: expected workflow_run.head_sha of 40 hex digits")
    if not isinstance(head_repo, str) or not isinstance(branch, str):
        raise BenchInputError(f"event {path}: expected workflow_run.head_repository.full_name")
    if run_repo != repo:
        raise BenchInputError(
            f"event {path}: the run belongs to {str(run_repo)[:100]!r}, this job to "
            f"{repo[:100]!r}; refusing to comment across repositories"
        )
    return {"head_sha": head_sha, "head_repo": head_repo, "head_branch": branch}


def _dispatch_facts(args: argparse.Namespace) -> dict[str, Any]:
    if args.pr < 1 or not _SHA.match(args.head_sha or ""):
        raise BenchInputError(
            f"--pr {args.pr} --head-sha {str(args.head_sha)[:50]!r}: expected a pull request "
            "number >= 1 and the 40-hex-digit commit the run measured"
        )
    return {"pr": args.pr, "head_sha": args.head_sha, "head_repo": "", "head_branch": ""}


def _pull_request(api: Any, repo: str, facts: dict[str, Any]) -> Any:
    from rlpace.bench.github import GitHubError, find_pull_request, get_pull_request

    if "pr" not in facts:
        return find_pull_request(
            api, repo, head_sha=facts["head_sha"], head_repo=facts["head_repo"],
            head_branch=facts["head_branch"],
        )  # fmt: skip
    pr = get_pull_request(api, repo, facts["pr"])
    if pr.state != "open" or pr.head_sha != facts["head_sha"]:
        raise GitHubError(
            f"pull request #{pr.number} is {pr.state} with head {pr.head_sha[:12]}, the run "
            f"measured {facts['head_sha'][:12]}; not posting a report of other code"
        )
    facts["head_repo"] = pr.head_repo
    return pr


# --------------------------------------------------------------------- the artifacts


def _read_artifacts(folder: Path) -> list[tuple[str, Any, str]]:
    """``(set, record, pr-number text)`` per artifact, each one validated; any bad one
    refuses them all."""
    from rlpace.bench.comparison_record import load_record

    if not folder.is_dir():
        return []
    entries = sorted(folder.iterdir())
    if len(entries) > _MAX_ARTIFACTS:
        raise BenchInputError(
            f"{folder}: {len(entries)} entries, expected at most {_MAX_ARTIFACTS} "
            "bench-report-<set> artifacts; refusing them all"
        )
    out = []
    for entry in entries:
        match = _ARTIFACT.match(entry.name)
        if match is None or entry.is_symlink() or not entry.is_dir():
            raise BenchInputError(
                f"{folder}: expected only bench-report-<set> folders, found "
                f"{entry.name[:60]!r}; refusing every artifact of this run"
            )
        set_name = match.group(1)
        record = load_record(entry / f"{set_name}.json")
        if record.set_name != set_name:
            raise BenchInputError(
                f"{entry.name}: its {set_name}.json says it is the {record.set_name!r} set; "
                "refusing a mismatched artifact (and every other of this run)"
            )
        out.append((set_name, record, _pr_number_text(entry)))
    return out


def _pr_number_text(entry: Path) -> str:
    path = entry / "pr-number.txt"
    if not path.exists():
        return ""
    if path.is_symlink() or not path.is_file() or path.stat().st_size > 32:
        raise BenchInputError(f"{path}: expected a small plain file holding a PR number")
    return path.read_bytes().decode("ascii", "replace").strip()


def _render(records: list[tuple[str, Any, str]], pr: Any) -> list[tuple[str, str]]:
    """One comment body per set, rendered from the validated records."""
    from rlpace.bench.github import GitHubError
    from rlpace.bench.markdown_safe import COMMENT_LIMIT, neutralize
    from rlpace.bench.pr_reports import set_marker
    from rlpace.bench.render import REPORT_MARKER, SET_TITLES, render_report

    bodies = []
    for set_name, record, pr_text in records:
        if pr_text and pr_text != str(pr.number):
            raise GitHubError(
                f"bench-report-{set_name}: its pr-number.txt names another pull request than "
                f"#{pr.number}, the one the run's head commit belongs to; refusing every "
                "artifact of this run"
            )
        marker = set_marker(set_name)
        base = f" ({record.base_commit[:7]})" if record.base_commit else ""
        title = (
            f"Benchmarks ({SET_TITLES.get(set_name, set_name.upper())} set): "
            f"#{pr.number} at {pr.head_sha[:7]} vs {pr.base_ref}{base}"
        )
        if record.comparison is None:
            body = (
                f"{REPORT_MARKER}\n{marker}\n## {neutralize(title)}\n\n"
                f"Skipped: {neutralize(record.skipped)}."
            )
        else:
            try:
                text = render_report(
                    {set_name: record.comparison},
                    title=title,
                    max_chars=COMMENT_LIMIT - len(marker) - 1,
                )
            except Exception as exc:  # schema-valid yet unrenderable: refuse, one line
                raise BenchInputError(
                    f"bench-report-{set_name}: its comparison could not be rendered "
                    f"({type(exc).__name__}); refusing every artifact of this run"
                ) from None
            first, _, rest = text.partition("\n")
            body = f"{first}\n{marker}\n{rest}"
        bodies.append((set_name, body))
    return bodies


def _post(api: Any, repo: str, number: int, body: str, bot_login: Any) -> Any:
    from rlpace.bench.github import post_comment

    return post_comment(
        repo=repo, pr=number, body=body, token="", bot_login=bot_login, api=api
    )  # fmt: skip
