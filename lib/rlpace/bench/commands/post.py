"""``rlpace-bench post``: create or update the pull-request comment of each report.

The token comes only from the ``GITHUB_TOKEN`` environment variable. When posting
fails for good the report files stay where they are and the exit status is 1.

Example:
    >>> from rlpace.bench.cli import build_parser
    >>> args = build_parser().parse_args(
    ...     ["post", "--repo", "o/r", "--pr", "3", "--report", "reports/pr/cpu.md"]
    ... )
    >>> args.repo, args.pr, args.report
    ('o/r', 3, ['reports/pr/cpu.md'])
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from rlpace.bench.errors import BenchInputError

NAME = "post"
HELP = "Create or update, in place, one pull-request comment per report (token: GITHUB_TOKEN)."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the ``post`` options."""
    parser.add_argument("--repo", required=True, help="OWNER/NAME of the repository")
    parser.add_argument("--pr", required=True, type=int, help="pull request number")
    parser.add_argument(
        "--report",
        required=True,
        action="append",
        help="rendered report (markdown); repeat for one comment per set",
    )
    parser.add_argument(
        "--api-url", default=None, help="GitHub REST API root (default: https://api.github.com)"
    )
    parser.add_argument(
        "--marker", default=None, help="text identifying the comment (default: the report's own)"
    )
    parser.add_argument(
        "--attempts", type=int, default=5, help="requests per call, retries included (default 5)"
    )
    parser.add_argument(
        "--backoff-s", type=float, default=2.0, help="first retry wait, doubled each time"
    )


def main(args: argparse.Namespace) -> int:
    """Post every report; 0 when all were posted, 1 when any failed."""
    return post_reports(
        repo=args.repo,
        pr=args.pr,
        reports=[Path(r) for r in args.report],
        api_url=args.api_url,
        marker=args.marker,
        attempts=args.attempts,
        backoff_s=args.backoff_s,
    )


def post_reports(
    *,
    repo: str,
    pr: int,
    reports: list[Path],
    api_url: str | None = None,
    marker: str | None = None,
    attempts: int = 5,
    backoff_s: float = 2.0,
) -> int:
    """Post each report file as a comment; return the exit status (0 ok, 1 failed).

    Example:
        >>> post_reports(repo="o/r", pr=1, reports=[])  # doctest: +SKIP
        0
    """
    from rlpace.bench.github import DEFAULT_API_URL, GitHubError, RetryPolicy, post_comment

    token = os.environ.get("GITHUB_TOKEN", "")
    if not token:
        raise BenchInputError(
            "GITHUB_TOKEN is not set: expected a token allowed to write pull-request "
            "comments in the environment, found none. Fix: export GITHUB_TOKEN "
            "(in Actions: env: GITHUB_TOKEN: ${{ secrets.GITHUB_TOKEN }})"
        )
    bodies = []
    for path in reports:
        if not path.is_file():
            raise BenchInputError(
                f"--report {path}: expected a rendered report file, found nothing there. "
                "Fix: run `rlpace-bench pr` first or pass the right path"
            )
        bodies.append((path, path.read_text(encoding="utf-8")))
    retry = RetryPolicy(attempts=attempts, backoff_s=backoff_s)
    status = 0
    for path, body in bodies:
        try:
            posted = post_comment(
                repo=repo,
                pr=pr,
                body=body,
                token=token,
                api_url=api_url or DEFAULT_API_URL,
                marker=marker,
                retry=retry,
            )
        except GitHubError as exc:
            print(f"rlpace-bench post: {path}: not posted: {exc}", file=sys.stderr)
            print(f"rlpace-bench post: the report stays at {path}", file=sys.stderr)
            status = 1
            continue
        print(f"{path}: {posted.action} comment {posted.comment_id} {posted.url}".rstrip())
    return status
