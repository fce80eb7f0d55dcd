"""``rlpace-bench post``: create or update the pull-request comment of each report.

The token comes only from the ``GITHUB_TOKEN`` environment variable (a trailing
newline is dropped); the API root from ``--api-url``, else ``GITHUB_API_URL``, else
``https://api.github.com``. Only comments written by ``--bot-login`` (default: the
token's own identity) are ever edited. Every failure is one line on stderr and exit
status 2; the report files stay where they are.

This command posts markdown it is given: use it for reports you rendered yourself.
A workflow that posts what a pull request's run produced uses ``rlpace-bench
comment``, which re-renders from the validated comparison instead.

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
    add_api_arguments(parser)
    parser.add_argument(
        "--marker", default=None, help="text identifying the comment (default: the report's own)"
    )


def add_api_arguments(parser: argparse.ArgumentParser) -> None:
    """The options every command that talks to GitHub shares."""
    parser.add_argument(
        "--api-url",
        default=None,
        help="GitHub REST API root (default: $GITHUB_API_URL, else https://api.github.com)",
    )
    parser.add_argument(
        "--bot-login",
        default=None,
        help="the login whose comments may be edited (default: $RLPACE_BENCH_BOT_LOGIN, else "
        "the token's own identity; github-actions[bot] for the workflows' token)",
    )
    parser.add_argument(
        "--attempts", type=int, default=5, help="requests per call, retries included (default 5)"
    )
    parser.add_argument(
        "--backoff-s", type=float, default=2.0, help="first retry wait, doubled each time"
    )


def api_settings(args: argparse.Namespace) -> dict[str, object]:
    """API root, token, bot login and retry policy from the options and the environment.

    Raises:
        BenchInputError: no or a malformed token, a bad API root, ``--attempts < 1``.
    """
    from rlpace.bench.github import DEFAULT_API_URL, RetryPolicy, check_api_url, check_token

    raw = os.environ.get("GITHUB_TOKEN", "")
    if not raw.strip():
        raise BenchInputError(
            "GITHUB_TOKEN is not set: expected a token allowed to write pull-request "
            "comments in the environment, found none. Fix: export GITHUB_TOKEN "
            "(in Actions: env: GITHUB_TOKEN: ${{ github.token }})"
        )
    return {
        "token": check_token(raw),
        "api_url": check_api_url(
            args.api_url or os.environ.get("GITHUB_API_URL") or DEFAULT_API_URL
        ),
        "bot_login": args.bot_login or os.environ.get("RLPACE_BENCH_BOT_LOGIN") or None,
        "retry": RetryPolicy(attempts=args.attempts, backoff_s=args.backoff_s),
    }


def main(args: argparse.Namespace) -> int:
    """Post every report; 0 when all were posted, 2 when any failed."""
    settings = api_settings(args)
    return post_reports(
        repo=args.repo,
        pr=args.pr,
        reports=[Path(r) for r in args.report],
        marker=args.marker,
        **settings,
    )


def post_reports(
    *,
    repo: str,
    pr: int,
    reports: list[Path],
    token: str,
    api_url: str,
    retry: object,
    bot_login: str | None = None,
    marker: str | None = None,
) -> int:
    """Post each report file as a comment; return the exit status (0 ok, 2 failed).

    Example:
        >>> post_reports(repo="o/r", pr=1, reports=[], token="t",
        ...              api_url="https://api.github.com", retry=None)  # doctest: +SKIP
        0
    """
    from rlpace.bench.github import GitHubApi, GitHubError, post_comment

    bodies = []
    for path in reports:
        if not path.is_file():
            raise BenchInputError(
                f"--report {path}: expected a rendered report file, found nothing there. "
                "Fix: run `rlpace-bench pr` first or pass the right path"
            )
        try:
            bodies.append((path, path.read_text(encoding="utf-8")))
        except UnicodeDecodeError as exc:
            raise BenchInputError(
                f"--report {path}: expected UTF-8 markdown, found a byte that is not UTF-8 "
                f"at offset {exc.start}. Fix: post a report rlpace-bench rendered"
            ) from None
    status = 0
    with GitHubApi(api_url, token, retry=retry) as api:
        for path, body in bodies:
            try:
                posted = post_comment(
                    repo=repo, pr=pr, body=body, token=token, marker=marker,
                    bot_login=bot_login, api=api,
                )  # fmt: skip
            except GitHubError as exc:
                print(
                    f"rlpace-bench post: {path}: not posted ({api.scrub(str(exc))}); the "
                    f"report stays at {path}",
                    file=sys.stderr,
                )
                status = 2
                continue
            print(f"{path}: {posted.action} comment {posted.comment_id} {posted.url}".rstrip())
    return status
