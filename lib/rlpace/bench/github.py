"""Post a rendered report as one pull-request comment, updated in place on every run.

The comment is found by the report's hidden marker (an HTML comment such as
``<!-- rlpace-bench-set: cpu -->`` that the ``pr`` pipeline puts in every report)
among the comments **the bot itself wrote**: the author must be the token's own
identity (``GET /user``) or the configured bot login (``github-actions[bot]`` for the
workflows' token). A comment someone else wrote is never edited, marker or not; when
none of the bot's own carries the marker a new comment is created.

What the client holds to, since the token can write to other people's pull requests:

- the token goes only to the configured API root: scheme, host and port are pinned
  (``GITHUB_API_URL`` on GitHub Enterprise), a pagination link elsewhere is refused,
  redirects are never followed;
- pagination is bounded (``max_pages``) and a link back to a page already read ends
  it with an error;
- every answer is checked (JSON, the shape the call expects) before it is used;
- rate limits (403/429 with rate-limit headers) and 5xx answers are retried with
  backoff; anything else fails with a :class:`GitHubError` of one line;
- the token only ever travels in the ``Authorization`` header; it is never part of
  a message, and messages are scrubbed of it all the same.

httpx is imported lazily, so the rest of the harness does not need it.

Example:
    >>> report_marker("<!-- rlpace-bench:cpu -->\\n## Benchmarks")
    '<!-- rlpace-bench:cpu -->'
    >>> check_api_url("https://ghe.example.com/api/v3/")
    'https://ghe.example.com/api/v3'
    >>> post_comment(  # doctest: +SKIP
    ...     repo="rlpace/rlpace", pr=12, body=open("reports/pr/cpu.md").read(),
    ...     token=os.environ["GITHUB_TOKEN"], bot_login="github-actions[bot]",
    ... )
    PostedComment(action='updated', comment_id=1234, url='https://github.com/...')
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from rlpace.bench.errors import BenchInputError
from rlpace.bench.markdown_safe import COMMENT_LIMIT

if TYPE_CHECKING:  # pragma: no cover
    import httpx

__all__ = [
    "DEFAULT_API_URL",
    "MAX_COMMENT_CHARS",
    "CommentTooLongError",
    "GitHubApi",
    "GitHubError",
    "PostedComment",
    "PullRequest",
    "RetryPolicy",
    "check_api_url",
    "check_token",
    "find_pull_request",
    "get_pull_request",
    "post_comment",
    "report_marker",
]

DEFAULT_API_URL = "https://api.github.com"
#: GitHub refuses issue comments longer than this many characters.
MAX_COMMENT_CHARS = COMMENT_LIMIT

_MARKER = re.compile(r"<!--\s*rlpace[-_]bench\b.*?-->", re.DOTALL)
_SET_MARKER = re.compile(r"<!--\s*rlpace-bench-set:.*?-->", re.DOTALL)
_REPO = re.compile(r"^[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}$")
_SHA = re.compile(r"^[0-9a-f]{40}$")
_LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")


class GitHubError(RuntimeError):
    """GitHub did not do what was asked, or answered something the bot cannot trust.

    Example:
        >>> raise GitHubError("POST .../comments: 404 Not Found")
        Traceback (most recent call last):
        ...
        rlpace.bench.github.GitHubError: POST .../comments: 404 Not Found
    """


class CommentTooLongError(GitHubError):
    """The comment body is longer than GitHub accepts (refused before sending, or 422).

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
            raise BenchInputError(
                f"--attempts: expected at least 1 request per call, got {self.attempts}. "
                "Fix: pass --attempts 1 for no retries"
            )
        if not (self.backoff_s >= 0 and self.max_wait_s >= 0):
            raise BenchInputError(
                f"--backoff-s: expected a wait >= 0 seconds, got {self.backoff_s}"
            )

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


@dataclass(frozen=True)
class PullRequest:
    """The facts of one pull request the comment job acts on, as GitHub states them.

    Example:
        >>> PullRequest(3, "open", "a" * 40, "fork/rlpace", "main").number
        3
    """

    number: int
    state: str
    head_sha: str
    head_repo: str
    base_ref: str


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


def check_api_url(api_url: str) -> str:
    """The API root without a trailing slash, once it is one the token may go to.

    ``https://`` only, except ``http://`` to this machine (the tests' fake server);
    no user, query or fragment.

    Raises:
        BenchInputError: anything else.

    Example:
        >>> check_api_url("http://127.0.0.1:8080")
        'http://127.0.0.1:8080'
        >>> check_api_url("http://api.github.com")
        Traceback (most recent call last):
        ...
        rlpace.bench.errors.BenchInputError: API root 'http://api.github.com': expected an https:// address (http:// only to 127.0.0.1 or localhost). Fix: pass --api-url or GITHUB_API_URL as https://HOST[/api/v3]
    """
    parts = urlsplit(api_url)
    plain_ok = parts.scheme == "http" and parts.hostname in _LOCAL_HOSTS
    if not (parts.scheme == "https" or plain_ok) or not parts.hostname:
        raise BenchInputError(
            f"API root {api_url[:100]!r}: expected an https:// address (http:// only to "
            "127.0.0.1 or localhost). Fix: pass --api-url or GITHUB_API_URL as "
            "https://HOST[/api/v3]"
        )
    if parts.username or parts.password or parts.query or parts.fragment:
        raise BenchInputError(
            f"API root {parts.scheme}://{parts.hostname}: expected no user, query or "
            "fragment in it. Fix: pass the bare API root"
        )
    return api_url.rstrip("/")


def check_token(token: str) -> str:
    """The token without surrounding white space, once it looks like a token.

    A trailing newline (``echo`` into a file, a pasted secret) is dropped; a token
    with any other white space, a control character or a non-ASCII character is
    refused without showing it.

    Raises:
        BenchInputError: empty, or a character no token has.

    Example:
        >>> check_token("ghs_abc\\n")
        'ghs_abc'
        >>> check_token("ghs_äbc")
        Traceback (most recent call last):
        ...
        rlpace.bench.errors.BenchInputError: GITHUB_TOKEN holds a character no GitHub token has (non-ASCII, white space or a control character; not shown). Fix: copy the token again, without quotes or spaces
    """
    token = (token or "").strip()
    if not token:
        raise BenchInputError(
            "no GitHub token: expected it in the GITHUB_TOKEN environment variable, found it "
            "empty. Fix: export GITHUB_TOKEN (a token with 'pull-requests: write')"
        )
    if not token.isascii() or not token.isprintable() or any(c.isspace() for c in token):
        raise BenchInputError(
            "GITHUB_TOKEN holds a character no GitHub token has (non-ASCII, white space or "
            "a control character; not shown). Fix: copy the token again, without quotes "
            "or spaces"
        )
    return token


class GitHubApi:
    """A REST client pinned to one API root, holding the token for it alone.

    Args:
        api_url: the REST API root (``https://api.github.com``, a GitHub Enterprise
            ``https://HOST/api/v3``, or a fake server on 127.0.0.1 in tests).
        token: a GitHub token; see :func:`check_token`.
        retry: retries for rate limits and 5xx answers.
        sleep: the wait function (tests pass a recorder).
        timeout_s: per-request timeout.
        max_pages: the most pages one listing may take.

    Example:
        >>> with GitHubApi("http://127.0.0.1:9", "t") as api:  # doctest: +SKIP
        ...     api.login()
        'github-actions[bot]'
    """

    def __init__(
        self,
        api_url: str,
        token: str,
        *,
        retry: RetryPolicy = RetryPolicy(),
        sleep: Callable[[float], None] = time.sleep,
        timeout_s: float = 30.0,
        max_pages: int = 50,
    ) -> None:
        import httpx

        self.api_url = check_api_url(api_url)
        self._token = check_token(token)
        root = urlsplit(self.api_url)
        self._origin = (root.scheme, root.hostname, root.port or _default_port(root.scheme))
        self._prefix = root.path.rstrip("/")
        self.retry = retry
        self.sleep = sleep
        self.max_pages = max_pages
        self._client = httpx.Client(
            headers={
                "Authorization": f"Bearer {self._token}",
                "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": "2022-11-28",
                "User-Agent": "rlpace-bench",
            },
            timeout=timeout_s,
            follow_redirects=False,
            trust_env=False,
        )

    def __enter__(self) -> GitHubApi:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection pool.

        Example:
            >>> GitHubApi("http://127.0.0.1:9", "t").close()
        """
        self._client.close()

    # ------------------------------------------------------------------- requests

    def url_for(self, path_or_url: str) -> str:
        """An absolute URL under the API root, or a refusal when it points elsewhere.

        Raises:
            GitHubError: another scheme, host or port, or a path outside the root.

        Example:
            >>> api = GitHubApi("https://ghe.example.com/api/v3", "t")
            >>> api.url_for("/repos/o/r")
            'https://ghe.example.com/api/v3/repos/o/r'
            >>> api.url_for("https://evil.example.com/repos/o/r")
            Traceback (most recent call last):
            ...
            rlpace.bench.github.GitHubError: refusing a link to https://evil.example.com:443: the token only goes to https://ghe.example.com:443/api/v3. Fix: check --api-url / GITHUB_API_URL
        """
        if path_or_url.startswith("/") and not path_or_url.startswith("//"):
            return self.api_url + path_or_url
        parts = urlsplit(path_or_url)
        origin = (parts.scheme, parts.hostname, _port_of(parts))
        inside = parts.path == self._prefix or parts.path.startswith(self._prefix + "/")
        if origin != self._origin or not inside or parts.username or parts.password:
            shown = f"{parts.scheme}://{parts.hostname}:{origin[2]}"[:120]
            root = f"{self._origin[0]}://{self._origin[1]}:{self._origin[2]}{self._prefix}"
            raise GitHubError(
                f"refusing a link to {shown}: the token only goes to {root}. "
                "Fix: check --api-url / GITHUB_API_URL"
            )
        return path_or_url

    def request(self, method: str, path_or_url: str, **kwargs: Any) -> httpx.Response:
        """Send one request (retrying as the policy allows) and return a 2xx answer.

        Raises:
            GitHubError: a refusal, a redirect, no answer, or retries ran out.

        Example:
            >>> GitHubApi("http://127.0.0.1:9", "t").request("GET", "/x")  # doctest: +SKIP
        """
        import httpx

        url = self.url_for(path_or_url)
        where = f"{method} {_path_of(url)}"
        for attempt in range(self.retry.attempts):
            last = attempt == self.retry.attempts - 1
            try:
                answer = self._client.request(method, url, **kwargs)
            except httpx.HTTPError as exc:
                if last:
                    raise GitHubError(
                        f"{where}: no answer from {self._origin[1]} after "
                        f"{self.retry.attempts} attempts ({type(exc).__name__}). "
                        "Fix: check --api-url / GITHUB_API_URL and the network"
                    ) from None
                self.sleep(self.retry.wait_s(attempt))
                continue
            if answer.is_success:
                return answer
            if answer.is_redirect:
                raise GitHubError(
                    f"{where}: GitHub answered {answer.status_code} (a redirect); redirects "
                    "are not followed with the token. Fix: point --api-url / "
                    "GITHUB_API_URL at the final API root"
                )
            wait = self._retry_wait(answer, attempt)
            if wait is None or last:
                raise self._error(where, answer, retried=attempt)
            self.sleep(wait)
        raise AssertionError("unreachable")  # pragma: no cover

    def json(self, method: str, path_or_url: str, expect: type, **kwargs: Any) -> Any:
        """The JSON body of a 2xx answer, checked to be an ``expect`` (dict or list).

        Raises:
            GitHubError: the body is not JSON, or not of the expected kind.

        Example:
            >>> GitHubApi("http://127.0.0.1:9", "t").json("GET", "/user", dict)  # doctest: +SKIP
            {'login': 'octocat', ...}
        """
        return _json_of(self.request(method, path_or_url, **kwargs), method, expect)

    def pages(self, path: str, params: dict[str, Any] | None = None) -> Iterator[Any]:
        """Every item of a paginated listing, following ``rel="next"`` links.

        At most ``max_pages`` pages; a link to a page already read is an error (a
        server that loops), as is a link outside the API root.

        Raises:
            GitHubError: a loop, too many pages, a foreign link or a malformed answer.

        Example:
            >>> list(GitHubApi("http://127.0.0.1:9", "t").pages("/x"))  # doctest: +SKIP
        """
        url: str | None = path
        seen: set[str] = set()
        for _ in range(self.max_pages):
            assert url is not None
            absolute = self.url_for(url)
            key = f"{absolute}?{sorted((params or {}).items())}"
            if key in seen:
                raise GitHubError(
                    f"GET {_path_of(absolute)}: the next-page link points back to a page "
                    "already read; stopping instead of looping. Fix: report it to the "
                    "server's admin, or rerun"
                )
            seen.add(key)
            answer = self.request("GET", absolute, params=params)
            items = _json_of(answer, "GET", list)
            yield from items
            url = answer.links.get("next", {}).get("url")
            params = None  # the next link carries its own query
            if not url:
                return
        raise GitHubError(
            f"GET {_path_of(path)}: more than {self.max_pages} pages; stopping. Fix: raise "
            "max_pages if the listing is really that long"
        )

    def login(self) -> str:
        """The login the token belongs to (``GET /user``).

        Raises:
            GitHubError: GitHub would not say (an Actions token cannot read ``/user``:
                pass the bot's login instead).

        Example:
            >>> GitHubApi("http://127.0.0.1:9", "t").login()  # doctest: +SKIP
            'octocat'
        """
        try:
            data = self.json("GET", "/user", dict)
        except GitHubError as exc:
            raise GitHubError(
                f"{exc}; could not learn whose token this is, so no comment can be told "
                "for the bot's own. Fix: pass --bot-login (github-actions[bot] for the "
                "workflows' GITHUB_TOKEN)"
            ) from None
        login = data.get("login")
        if not isinstance(login, str) or not login:
            raise GitHubError("GET /user: expected a 'login' string in the answer, found none")
        return login

    # ------------------------------------------------------------------- errors

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
        message = self.scrub(_message_of(answer))
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

    def scrub(self, text: str) -> str:
        """``text`` with the token replaced by ``***`` (defence in depth for messages).

        Example:
            >>> GitHubApi("http://127.0.0.1:9", "ghs_x1").scrub("echo ghs_x1")
            'echo ***'
        """
        return text.replace(self._token, "***")


def find_pull_request(
    api: GitHubApi, repo: str, *, head_sha: str, head_repo: str, head_branch: str = ""
) -> PullRequest | None:
    """The open pull request of ``repo`` whose head is commit ``head_sha`` of ``head_repo``.

    Looked up through the API, never taken from an artifact: the open pull requests
    from ``head_repo``'s ``head_branch`` (all open ones when no branch is known),
    kept only when GitHub says their head is exactly ``head_sha`` in ``head_repo`` (a
    fork's pull request is matched this way too).

    Returns:
        The pull request, or None when no open one has that head (pushed since, closed).

    Raises:
        GitHubError: several do (ambiguous: nothing is posted), or a malformed answer.

    Example:
        >>> find_pull_request(api, "o/r", head_sha="a" * 40, head_repo="fork/r")  # doctest: +SKIP
        PullRequest(number=7, state='open', head_sha='aaa…', head_repo='fork/r', base_ref='main')
    """
    if not _REPO.match(repo) or not _REPO.match(head_repo):
        raise BenchInputError(
            f"expected OWNER/NAME repositories, got {repo[:100]!r} and {head_repo[:100]!r}"
        )
    if not _SHA.match(head_sha):
        raise BenchInputError(f"head SHA: expected 40 hex digits, got {head_sha[:50]!r}")
    params: dict[str, Any] = {"state": "open", "per_page": 100}
    if head_branch:
        params["head"] = f"{head_repo.split('/')[0]}:{head_branch}"
    found = [
        pr
        for pr in (_pull_request(item) for item in api.pages(f"/repos/{repo}/pulls", params))
        if pr.head_sha == head_sha and pr.head_repo.lower() == head_repo.lower()
    ]
    if len(found) > 1:
        numbers = ", ".join(f"#{pr.number}" for pr in found[:5])
        raise GitHubError(
            f"{len(found)} open pull requests ({numbers}) have head {head_sha[:12]} of "
            f"{head_repo}; not posting to any, since the run cannot say which it was for"
        )
    return found[0] if found else None


def get_pull_request(api: GitHubApi, repo: str, number: int) -> PullRequest:
    """Pull request ``number`` of ``repo`` as GitHub states it now (checked fields).

    Raises:
        GitHubError: GitHub refused, or answered something that is not a pull request.

    Example:
        >>> get_pull_request(api, "o/r", 7).head_sha  # doctest: +SKIP
        'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa'
    """
    return _pull_request(api.json("GET", f"/repos/{repo}/pulls/{int(number)}", dict))


def post_comment(
    *,
    repo: str,
    pr: int,
    body: str,
    token: str,
    api_url: str = DEFAULT_API_URL,
    marker: str | None = None,
    bot_login: str | None = None,
    retry: RetryPolicy = RetryPolicy(),
    sleep: Callable[[float], None] = time.sleep,
    timeout_s: float = 30.0,
    max_pages: int = 50,
    api: GitHubApi | None = None,
) -> PostedComment:
    """Create the report's comment on pull request ``pr``, or update the bot's own.

    Args:
        repo: ``OWNER/NAME``.
        pr: the pull request number.
        body: the rendered report; must contain ``marker``, at most 65,536 characters.
        token: a GitHub token allowed to write issue comments.
        api_url: the REST API root (``GITHUB_API_URL``; a fake server in tests).
        marker: the text that identifies this report's comment; by default the
            report's hidden marker (:func:`report_marker`).
        bot_login: the login whose comments may be edited; by default the token's own
            (``GET /user``, which the workflows' token cannot read: pass
            ``github-actions[bot]`` there).
        retry: retries for rate limits and 5xx answers.
        sleep: the wait function (tests pass a recorder).
        timeout_s: per-request timeout.
        max_pages: the most pages of comments to read.
        api: an open client to reuse (then ``token``, ``api_url`` and the rest are its).

    Returns:
        Whether the comment was created or updated, its id and address.

    Raises:
        BenchInputError: ``repo``/``pr``/``token``/``api_url`` are malformed or the
            body lacks a marker.
        CommentTooLongError: the body is longer than GitHub takes.
        GitHubError: any refusal, a malformed answer, or retries ran out.

    Example:
        >>> post_comment(repo="o/r", pr=1, body="<!-- rlpace-bench:cpu -->", token="t",
        ...              api_url="http://127.0.0.1:9", bot_login="me")  # doctest: +SKIP
        PostedComment(action='created', comment_id=1, url='...')
    """
    if not _REPO.match(repo):
        raise BenchInputError(f"--repo: expected OWNER/NAME, got {repo[:100]!r}")
    if pr < 1:
        raise BenchInputError(f"--pr: expected a pull request number >= 1, got {pr}")
    marker = marker or report_marker(body)
    if marker not in body:
        raise BenchInputError(
            f"the report does not contain its marker {marker[:100]!r}; the comment could not "
            "be found again. Fix: pass the marker the report carries"
        )
    if len(body) > MAX_COMMENT_CHARS:
        raise CommentTooLongError(
            f"the report has {len(body)} characters; GitHub takes at most {MAX_COMMENT_CHARS}. "
            "Fix: render it with rlpace-bench (its styles keep within the limit)"
        )
    if api is None:
        with GitHubApi(
            api_url, token, retry=retry, sleep=sleep, timeout_s=timeout_s, max_pages=max_pages
        ) as own:
            return post_comment(
                repo=repo, pr=pr, body=body, token=token, marker=marker,
                bot_login=bot_login, api=own,
            )  # fmt: skip
    author = bot_login or api.login()
    existing = None
    for comment in api.pages(f"/repos/{repo}/issues/{pr}/comments", {"per_page": 100}):
        if not isinstance(comment, dict):
            raise GitHubError("GET .../comments: expected a list of comment objects")
        user = comment.get("user") if isinstance(comment.get("user"), dict) else {}
        text = comment.get("body") or ""
        if user.get("login") == author and isinstance(text, str) and marker in text:
            existing = _id_of(comment, "GET .../comments")
            break
    if existing is None:
        path, method, action = f"/repos/{repo}/issues/{pr}/comments", "POST", "created"
    else:
        path, method, action = f"/repos/{repo}/issues/comments/{existing}", "PATCH", "updated"
    data = api.json(method, path, dict, json={"body": body})
    url = data.get("html_url")
    return PostedComment(action, _id_of(data, method), url if isinstance(url, str) else "")


# ----------------------------------------------------------------------------- helpers


def _default_port(scheme: str) -> int:
    return 443 if scheme == "https" else 80


def _port_of(parts: Any) -> int | None:
    try:
        return parts.port or _default_port(parts.scheme)
    except ValueError:  # a port that is not a number
        return None


def _json_of(answer: httpx.Response, method: str, expect: type) -> Any:
    where = f"{method} {_path_of(str(answer.request.url))}"
    try:
        data = answer.json()
    except ValueError:
        kind = answer.headers.get("content-type", "no content type").split(";")[0][:60]
        raise GitHubError(
            f"{where}: GitHub answered {answer.status_code} with a body that is not JSON "
            f"({kind}); not trusting it. Fix: check --api-url / GITHUB_API_URL"
        ) from None
    if not isinstance(data, expect):
        raise GitHubError(
            f"{where}: expected a JSON {expect.__name__}, got {type(data).__name__}; "
            "not trusting it"
        )
    return data


def _id_of(data: dict[str, Any], where: str) -> int:
    value = data.get("id")
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise GitHubError(f"{where}: expected a positive integer 'id' in the answer")
    return value


def _pull_request(item: Any) -> PullRequest:
    try:
        number, state = item["number"], item["state"]
        head, base = item["head"], item["base"]
        head_repo = (head.get("repo") or {}).get("full_name") or ""
        pr = PullRequest(number, state, head["sha"], head_repo, base["ref"])
    except (KeyError, TypeError, AttributeError):
        raise GitHubError(
            "GET .../pulls: expected pull request objects with number, state, head.sha, "
            "head.repo.full_name and base.ref"
        ) from None
    if (
        isinstance(number, bool)
        or not isinstance(number, int)
        or number < 1
        or not all(isinstance(v, str) for v in (state, pr.head_sha, head_repo, pr.base_ref))
    ):
        raise GitHubError("GET .../pulls: a pull request object with malformed fields")
    return pr


def _path_of(url: str) -> str:
    """The path of ``url`` without host or query (never shows more than GitHub's route)."""
    return re.sub(r"^[a-z]+://[^/]+", "", url).split("?", 1)[0][:200]


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
    else:
        text = answer.reason_phrase or "no message"
    return " ".join(text.split())[:300]  # one line, bounded


def _is_too_long(message: str, answer: httpx.Response) -> bool:
    lowered = message.lower()
    if "too long" in lowered or "maximum" in lowered:
        return True
    request = answer.request
    return request is not None and len(request.content) > MAX_COMMENT_CHARS
