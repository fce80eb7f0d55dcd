"""The comment bot against a fake GitHub REST server on 127.0.0.1."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest

from rlpace.bench.cli import main as cli_main
from rlpace.bench.errors import BenchInputError
from rlpace.bench.github import (
    CommentTooLongError,
    GitHubError,
    RetryPolicy,
    post_comment,
    report_marker,
)

TOKEN = "ghs_secret_token_value_123"
REPO = "owner/name"
MARKER = "<!-- rlpace-bench:cpu -->"


class FakeGitHub:
    """Issue comments of one pull request, paginated, with scripted failures first."""

    def __init__(self, comments=(), per_page_cap=2):
        self.comments = [dict(c) for c in comments]
        self.next_id = 1000
        self.per_page_cap = per_page_cap
        self.failures = []  # (method or None, status, headers, json body)
        self.requests = []  # (method, path, authorization)
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, status, payload, headers=None):
                raw = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(raw)

            def _handle(self, method):
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                fake.requests.append((method, self.path, self.headers.get("Authorization")))
                if fake.failures and fake.failures[0][0] in (None, method):
                    _, status, headers, payload = fake.failures.pop(0)
                    return self._send(status, payload, headers)
                url = urlparse(self.path)
                parts = url.path.strip("/").split("/")
                # /repos/o/n/issues/{pr}/comments  or  /repos/o/n/issues/comments/{id}
                if method == "GET" and parts[-1] == "comments":
                    query = parse_qs(url.query)
                    per_page = min(int(query.get("per_page", ["30"])[0]), fake.per_page_cap)
                    page = int(query.get("page", ["1"])[0])
                    chunk = fake.comments[(page - 1) * per_page : page * per_page]
                    headers = {}
                    if page * per_page < len(fake.comments):
                        host = f"http://{self.headers['Host']}"
                        nxt = f"{host}{url.path}?per_page={per_page}&page={page + 1}"
                        headers["Link"] = f'<{nxt}>; rel="next"'
                    return self._send(200, chunk, headers)
                if method == "POST" and parts[-1] == "comments":
                    fake.next_id += 1
                    comment = {"id": fake.next_id, "body": body["body"]}
                    comment["html_url"] = f"https://github.test/c/{fake.next_id}"
                    fake.comments.append(comment)
                    return self._send(201, comment)
                if method == "PATCH" and parts[-2] == "comments":
                    for comment in fake.comments:
                        if comment["id"] == int(parts[-1]):
                            comment["body"] = body["body"]
                            return self._send(200, comment)
                    return self._send(404, {"message": "Not Found"})
                return self._send(404, {"message": "Not Found"})

            def do_GET(self):
                self._handle("GET")

            def do_POST(self):
                self._handle("POST")

            def do_PATCH(self):
                self._handle("PATCH")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    def fail_next(self, status, payload=None, headers=None, method=None):
        self.failures.append((method, status, headers or {}, payload or {"message": "boom"}))


@pytest.fixture
def github():
    fake = FakeGitHub()
    fake.thread.start()
    yield fake
    fake.server.shutdown()
    fake.server.server_close()
    fake.thread.join(timeout=5)


def _post(github, body, **kw):
    waits = []
    kw.setdefault("retry", RetryPolicy(attempts=4, backoff_s=0.5))
    posted = post_comment(
        repo=REPO, pr=7, body=body, token=TOKEN, api_url=github.url, sleep=waits.append, **kw
    )
    return posted, waits


def _others(n):
    return [{"id": i, "body": f"unrelated comment {i}"} for i in range(1, n + 1)]


def test_creates_a_comment_when_none_carries_the_marker(github):
    github.comments = _others(3)
    posted, waits = _post(github, f"{MARKER}\nreport v1")
    assert posted.action == "created" and posted.comment_id == 1001
    assert github.comments[-1]["body"] == f"{MARKER}\nreport v1"
    assert len(github.comments) == 4 and waits == []
    assert all(auth == f"Bearer {TOKEN}" for _, _, auth in github.requests)


def test_updates_in_place_the_comment_found_on_a_later_page(github):
    github.comments = [*_others(5), {"id": 77, "body": f"{MARKER}\nold"}, *_others(2)]
    posted, _ = _post(github, f"{MARKER}\nnew")
    assert posted.action == "updated" and posted.comment_id == 77
    assert [c["body"] for c in github.comments if c["id"] == 77] == [f"{MARKER}\nnew"]
    assert len(github.comments) == 8  # nothing created
    gets = [path for method, path, _ in github.requests if method == "GET"]
    assert len(gets) == 3  # pages of 2: the marker sits on page 3


def test_other_sets_markers_do_not_match(github):
    github.comments = [{"id": 5, "body": "<!-- rlpace-bench:gpu -->\ngpu report"}]
    posted, _ = _post(github, f"{MARKER}\ncpu report")
    assert posted.action == "created"
    assert github.comments[0]["body"].endswith("gpu report")


def test_second_post_updates_what_the_first_created(github):
    first, _ = _post(github, f"{MARKER}\nrun 1")
    second, _ = _post(github, f"{MARKER}\nrun 2")
    assert (first.action, second.action) == ("created", "updated")
    assert first.comment_id == second.comment_id
    assert [c["body"] for c in github.comments] == [f"{MARKER}\nrun 2"]


def test_server_errors_are_retried_with_growing_backoff(github):
    github.fail_next(502, method="GET")
    github.fail_next(503, method="GET")
    posted, waits = _post(github, f"{MARKER}\nx")
    assert posted.action == "created"
    assert waits == [0.5, 1.0]


def test_rate_limit_waits_for_retry_after(github):
    github.fail_next(403, {"message": "secondary rate limit"}, {"Retry-After": "3"}, "POST")
    github.fail_next(429, {"message": "slow down"}, {"x-ratelimit-remaining": "0"}, "POST")
    posted, waits = _post(github, f"{MARKER}\nx")
    assert posted.action == "created"
    assert waits[0] == 3.0 and waits[1] >= 1.0


def test_forbidden_without_rate_limit_headers_fails_at_once(github):
    github.fail_next(403, {"message": "Resource not accessible by integration"})
    with pytest.raises(GitHubError, match="403.*Resource not accessible.*pull-requests: write"):
        _post(github, f"{MARKER}\nx")
    assert len(github.requests) == 1 and github.comments == []


def test_retries_run_out_on_persistent_5xx(github):
    for _ in range(4):
        github.fail_next(500)
    with pytest.raises(GitHubError, match="500 .after 3 retries"):
        _post(github, f"{MARKER}\nx")


def test_body_too_long_is_a_clear_error(github):
    github.fail_next(
        422,
        {"message": "Validation Failed", "errors": [{"message": "body is too long"}]},
        method="POST",
    )
    with pytest.raises(CommentTooLongError, match="65536 characters.*short style"):
        _post(github, f"{MARKER}\n" + "x" * 10)


def test_report_without_marker_is_refused_before_any_request(github):
    with pytest.raises(BenchInputError, match="no hidden marker"):
        _post(github, "## a report without marker")
    assert github.requests == []
    assert report_marker("a\n<!-- rlpace-bench set=gpu -->") == "<!-- rlpace-bench set=gpu -->"


def _cli(github, report, *extra):
    return cli_main(
        ["post", "--repo", REPO, "--pr", "7", "--report", str(report), "--api-url", github.url]
        + ["--backoff-s", "0.01", *extra]
    )


def test_cli_posts_and_never_prints_the_token(github, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    report = tmp_path / "cpu.md"
    report.write_text(f"{MARKER}\n| bench | change |\n")
    github.fail_next(503)
    assert _cli(github, report) == 0
    assert _cli(github, report) == 0
    out = capsys.readouterr()
    assert "created comment 1001" in out.out and "updated comment 1001" in out.out
    assert TOKEN not in out.out + out.err
    assert len(github.comments) == 1


def test_cli_failure_keeps_the_report_and_exits_1(github, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    report = tmp_path / "cpu.md"
    report.write_text(f"{MARKER}\nbody")
    github.fail_next(422, {"message": "Validation Failed: body is too long (maximum is 65536)"})
    assert _cli(github, report) == 1
    err = capsys.readouterr().err
    assert "not posted" in err and "the report stays at" in err and TOKEN not in err
    assert report.read_text() == f"{MARKER}\nbody"


def test_cli_without_token_is_a_usage_error(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    report = tmp_path / "cpu.md"
    report.write_text(MARKER)
    code = cli_main(["post", "--repo", REPO, "--pr", "7", "--report", str(report)])
    assert code == 2 and "GITHUB_TOKEN is not set" in capsys.readouterr().err


def test_set_marker_keeps_one_comment_per_set(github):
    generic = "<!-- rlpace-bench-report -->"
    cpu = f"{generic}\n<!-- rlpace-bench-set: cpu -->\ncpu table"
    gpu = f"{generic}\n<!-- rlpace-bench-set: gpu -->\ngpu table"
    assert _post(github, cpu)[0].action == "created"
    assert _post(github, gpu)[0].action == "created"
    assert _post(github, gpu.replace("table", "table v2"))[0].action == "updated"
    assert [c["body"].splitlines()[-1] for c in github.comments] == ["cpu table", "gpu table v2"]
