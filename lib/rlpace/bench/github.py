"""Post a rendered report as one pull-request comment, updated in place on every run.

The comment is found by the report's hidden marker (an HTML comment such as
``<!-- rlpace-bench:cpu -->`` that :func:`rlpace.bench.render.render_report` puts in
every report) across *all* pages of the pull request's comments: when one carries the
marker it is edited, otherwise a new one is created. Rate limits (403/429 with
rate-limit headers) and 5xx answers are retried with backoff; anything else fails
with a :class:`GitHubError` that says what GitHub answered and what to do.

The token is passed in by the caller (the ``post`` command reads ``GITHUB_TOKEN``);
it only ever travels in the ``Authorization`` header, never in a message or a log.
httpx is imported lazily, so the rest of the harness does not need it.

Example:
    >>> report_marker("<!-- rlpace-bench:cpu -->\\n## Benchmarks")
    '<!-- rlpace-bench:cpu -->'
    >>> post_comment(  # doctest: +SKIP
    ...     repo="rlpace/rlpace", pr=12, body=open("reports/pr/cpu.md").read(),
    ...     token=os.environ["GITHUB_TOKEN"],
    ... )
    PostedComment(action='updated', comment_id=1234, url='https://github.com/...')
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rlpace.bench.errors import BenchInputError

if TYPE_CHECKING:  # pragma: no cover
    import httpx

__all__ = [
    "DEFAULT_API_URL",
    "MAX_COMMENT_CHARS",
    "CommentTooLongError",
    "GitHubError",
    "PostedComment",
    "RetryPolicy",
    "post_comment",
    "report_marker",
]

DEFAULT_API_URL = "https://api.github.com"
#: GitHub refuses issue comments longer than this many characters.
MAX_COMMENT_CHARS = 65536

_MARKER = re.compile(r"<!--\s*rlpace[-_]bench\b.*?-->", re.DOTALL)
_SET_MARKER = re.compile(r"<!--\s*rlpace-bench-set:.*?-->", re.DOTALL)
_REPO = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")


class GitHubError(RuntimeError):
    """GitHub did not accept the comment, even after the retries the policy allows.

    Example:
        >>> raise GitHubError("POST .../comments: 404 Not Found")
        Traceback (most recent call last):
        ...
        rlpace.bench.github.GitHubError: POST .../comments: 404 Not Found
    """


class CommentTooLongError(GitHubError):
    """GitHub answered 422: the comment body is longer than it accepts.

    Example:
        >>> raise CommentTooLongError("body has 70000 characters; GitHub takes 65536")
        Traceback (most recent call last):
        ...
        rlpace.bench.github.CommentTooLongError: body has 70000 characters; GitHub takes 65536
    """


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to retry rate-limited and 5xx answers.

    Attributes:
        attempts: requests per call in all, the first one included.
        backoff_s: wait before the first retry; doubles with every further one.
        max_wait_s: the longest single wait, also for a rate limit's reset time.

    Example:
        >>> [RetryPolicy(backoff_s=1.0).wait_s(i) for i in range(4)]
        [1.0, 2.0, 4.0, 8.0]
    """

    attempts: int = 5
    backoff_s: float = 2.0
    max_wait_s: float = 60.0

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError(f"RetryPolicy.attempts must be >= 1, got {self.attempts}")

    def wait_s(self, retry: int) -> float:
        """The backoff before retry number ``retry`` (0-based), capped at ``max_wait_s``."""
        return min(self.backoff_s * (2**retry), self.max_wait_s)


@dataclass(frozen=True)
class PostedComment:
    """What :func:`post_comment` did.

    Attributes:
        action: ``"created"`` or ``"updated"``.
        comment_id: GitHub's id of the comment.
        url: the comment's web address (``html_url``), empty when GitHub sent none.

    Example:
        >>> PostedComment("created", 7, "https://github.com/o/r/pull/1#issuecomment-7").action
        'created'
    """

    action: str
    comment_id: int
    url: str


def report_marker(body: str) -> str:
    """The hidden marker of a rendered report: what finds its comment again.

    The set marker the ``pr`` pipeline adds (``<!-- rlpace-bench-set: cpu -->``) wins,
    so each set keeps its own comment; otherwise the first ``<!-- rlpace-bench… -->``.

    Raises:
        BenchInputError: the body carries no marker, so its comment could never be
            found again to update.

    Example:
        >>> report_marker("text <!-- rlpace-bench set=gpu --> more")
        '<!-- rlpace-bench set=gpu -->'
        >>> report_marker("<!-- rlpace-bench-report -->\\n<!-- rlpace-bench-set: gpu -->")
        '<!-- rlpace-bench-set: gpu -->'
    """
    found = _SET_MARKER.search(body) or _MARKER.search(body)
    if found is None:
        raise BenchInputError(
            "the report has no hidden marker: expected an HTML comment starting with "
            "'<!-- rlpace-bench' (render_report writes one), found none. Fix: post a report "
            "written by `rlpace-bench pr` or `rlpace-bench compare`, or pass --marker"
        )
    return found.group(0)


def post_comment(
    *,
    repo: str,
    pr: int,
    body: str,
    token: str,
    api_url: str = DEFAULT_API_URL,
    marker: str | None = None,
    retry: RetryPolicy = RetryPolicy(),
    sleep: Callable[[float], None] = time.sleep,
    timeout_s: float = 30.0,
) -> PostedComment:
    """Create the report's comment on pull request ``pr``, or update it in place.

    Args:
        repo: ``OWNER/NAME``.
        pr: the pull request number.
        body: the rendered report; must contain ``marker``.
        token: a GitHub token allowed to write issue comments.
        api_url: the REST API root (a local fake server in tests).
        marker: the text that identifies this report's comment; by default the
            report's hidden marker (:func:`report_marker`).
        retry: retries for rate limits and 5xx answers.
        sleep: the wait function (tests pass a recorder).
        timeout_s: per-request timeout.

    Returns:
        Whether the comment was created or updated, its id and address.

    Raises:
        BenchInputError: ``repo``/``pr``/``token`` are malformed or the body lacks a marker.
        CommentTooLongError: GitHub rejected the body as too long (422).
        GitHubError: any other refusal, or retries ran out.

    Example:
        >>> post_comment(repo="o/r", pr=1, body="<!-- rlpace-bench:cpu -->", token="t",
        ...              api_url="http://127.0.0.1:9")  # doctest: +SKIP
        PostedComment(action='created', comment_id=1, url='...')
    """
    if not _REPO.match(repo):
        raise BenchInputError(f"--repo: expected OWNER/NAME, got {repo!r}")
    if pr < 1:
        raise BenchInputError(f"--pr: expected a pull request number >= 1, got {pr}")
    if not token:
        raise BenchInputError(
            "no GitHub token: expected it in the GITHUB_TOKEN environment variable, found it "
            "empty. Fix: export GITHUB_TOKEN (a token with 'pull-requests: write')"
        )
    marker = marker or report_marker(body)
    if marker not in body:
        raise BenchInputError(
            f"the report does not contain its marker {marker!r}; the comment could not be "
            "found again. Fix: pass the marker the report carries"
        )
    import httpx

    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/vnd.github+json",
        "X-GitHub-Api-Version": "2022-11-28",
        "User-Agent": "rlpace-bench",
    }
    with httpx.Client(base_url=api_url.rstrip("/"), headers=headers, timeout=timeout_s) as client:
        session = _Session(client, retry, sleep)
        existing = _find_comment(session, repo, pr, marker)
        if existing is None:
            answer = session.request(
                "POST", f"/repos/{repo}/issues/{pr}/comments", json={"body": body}
            )
            action = "created"
        else:
            answer = session.request(
                "PATCH", f"/repos/{repo}/issues/comments/{existing}", json={"body": body}
            )
            action = "updated"
    data = answer.json()
    return PostedComment(action, int(data["id"]), str(data.get("html_url", "")))


def _find_comment(session: _Session, repo: str, pr: int, marker: str) -> int | None:
    """The id of the first comment on ``pr`` containing ``marker``, following every page."""
    url: str | None = f"/repos/{repo}/issues/{pr}/comments"
    params: dict[str, Any] | None = {"per_page": 100}
    while url is not None:
        answer = session.request("GET", url, params=params)
        comments = answer.json()
        if not isinstance(comments, list):
            raise GitHubError(
                f"GET {url}: expected a JSON list of comments, got {type(comments).__name__}"
            )
        for comment in comments:
            if marker in (comment.get("body") or ""):
                return int(comment["id"])
        url = answer.links.get("next", {}).get("url")
        params = None  # the next link carries its own query
    return None


class _Session:
    """Sends requests, retrying rate limits and 5xx answers as the policy allows."""

    def __init__(
        self, client: httpx.Client, retry: RetryPolicy, sleep: Callable[[float], None]
    ) -> None:
        self.client = client
        self.retry = retry
        self.sleep = sleep

    def request(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        import httpx

        where = f"{method} {_path_of(url)}"
        for attempt in range(self.retry.attempts):
            last = attempt == self.retry.attempts - 1
            try:
                answer = self.client.request(method, url, **kwargs)
            except httpx.TransportError as exc:
                if last:
                    raise GitHubError(
                        f"{where}: no answer from GitHub after {self.retry.attempts} "
                        f"attempts ({type(exc).__name__}). Fix: check --api-url and the network"
                    ) from None
                self.sleep(self.retry.wait_s(attempt))
                continue
            if answer.is_success:
                return answer
            wait = self._retry_wait(answer, attempt)
            if wait is None or last:
                raise self._error(where, answer, retried=attempt)
            self.sleep(wait)
        raise AssertionError("unreachable")  # pragma: no cover

    def _retry_wait(self, answer: httpx.Response, attempt: int) -> float | None:
        """Seconds to wait before retrying ``answer``, or None when it is final."""
        status = answer.status_code
        if status >= 500:
            return self.retry.wait_s(attempt)
        if status not in (403, 429):
            return None
        retry_after = answer.headers.get("retry-after")
        if retry_after is not None:
            try:
                return min(max(float(retry_after), 0.0), self.retry.max_wait_s)
            except ValueError:
                return self.retry.wait_s(attempt)
        if answer.headers.get("x-ratelimit-remaining") == "0":
            reset = answer.headers.get("x-ratelimit-reset")
            try:
                until_reset = float(reset) - time.time() if reset else 0.0
            except ValueError:
                until_reset = 0.0
            return min(max(until_reset, self.retry.wait_s(attempt)), self.retry.max_wait_s)
        if status == 429:
            return self.retry.wait_s(attempt)
        return None  # a 403 without rate-limit headers is a permission problem

    def _error(self, where: str, answer: httpx.Response, *, retried: int) -> GitHubError:
        message = _message_of(answer)
        status = answer.status_code
        after = f" (after {retried} retries)" if retried else ""
        if status == 422 and _is_too_long(message, answer):
            return CommentTooLongError(
                f"{where}: GitHub answered 422 Unprocessable Entity: {message}. The report is "
                f"longer than a comment may be (GitHub takes at most {MAX_COMMENT_CHARS} "
                "characters). Fix: render the short style or post fewer benchmarks per comment"
            )
        if status in (401, 403):
            hint = (
                "the token was refused or lacks permission; fix: give GITHUB_TOKEN "
                "'pull-requests: write' (or 'issues: write')"
                if answer.headers.get("x-ratelimit-remaining") != "0"
                else "the rate limit did not reset in time; fix: rerun later"
            )
            return GitHubError(f"{where}: GitHub answered {status}{after}: {message}; {hint}")
        if status == 404:
            return GitHubError(
                f"{where}: GitHub answered 404: {message}; fix: check --repo and --pr, and that "
                "the token can see the repository"
            )
        return GitHubError(f"{where}: GitHub answered {status}{after}: {message}")


def _path_of(url: str) -> str:
    """The path of ``url`` without host or query (never shows more than GitHub's route)."""
    return re.sub(r"^https?://[^/]+", "", url).split("?", 1)[0]


def _message_of(answer: httpx.Response) -> str:
    try:
        data = answer.json()
    except ValueError:
        return answer.reason_phrase or "no message"
    if isinstance(data, dict):
        text = str(data.get("message", answer.reason_phrase))
        errors = data.get("errors")
        if errors:
            text += f" {errors}"
        return text
    return answer.reason_phrase or "no message"


def _is_too_long(message: str, answer: httpx.Response) -> bool:
    lowered = message.lower()
    if "too long" in lowered or "maximum" in lowered:
        return True
    request = answer.request
    return request is not None and len(request.content) > MAX_COMMENT_CHARS
