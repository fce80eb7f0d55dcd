"""The comment bot against a fake GitHub REST server on 127.0.0.1."""

from __future__ import annotations

import pytest
from tests.bench.fixtures.bot.fake_github import BOT, FakeGitHub

from rlpace.bench.cli import main as cli_main
from rlpace.bench.errors import BenchInputError
from rlpace.bench.github import (
    CommentTooLongError,
    GitHubApi,
    GitHubError,
    RetryPolicy,
    post_comment,
    report_marker,
)

TOKEN = "ghs_secret_token_value_123"
REPO = "owner/name"
MARKER = "<!-- rlpace-bench:cpu -->"


@pytest.fixture
def github():
    fake = FakeGitHub().start()
    yield fake
    fake.stop()


@pytest.fixture
def elsewhere():
    """A second server: another port on the same host, that must never see the token."""
    fake = FakeGitHub().start()
    yield fake
    fake.stop()


def _post(github, body, **kw):
    waits = []
    kw.setdefault("retry", RetryPolicy(attempts=4, backoff_s=0.5))
    kw.setdefault("bot_login", BOT)
    posted = post_comment(
        repo=REPO, pr=7, body=body, token=TOKEN, api_url=github.url, sleep=waits.append, **kw
    )
    return posted, waits


def _others(n):
    return [
        {"id": i, "body": f"unrelated comment {i}", "user": {"login": "someone"}}
        for i in range(1, n + 1)
    ]


def test_creates_a_comment_when_none_carries_the_marker(github):
    github.comments = _others(3)
    posted, waits = _post(github, f"{MARKER}\nreport v1")
    assert posted.action == "created" and posted.comment_id == 1001
    assert github.comments[-1]["body"] == f"{MARKER}\nreport v1"
    assert len(github.comments) == 4 and waits == []
    assert all(auth == f"Bearer {TOKEN}" for _, _, auth in github.requests)


def test_updates_in_place_the_comment_found_on_a_later_page(github):
    github.comments = [
        *_others(5),
        {"id": 77, "body": f"{MARKER}\nold", "user": {"login": BOT}},
        *_others(2),
    ]
    posted, _ = _post(github, f"{MARKER}\nnew")
    assert posted.action == "updated" and posted.comment_id == 77
    assert [c["body"] for c in github.comments if c["id"] == 77] == [f"{MARKER}\nnew"]
    assert len(github.comments) == 8  # nothing created
    gets = [path for method, path, _ in github.requests if method == "GET"]
    assert len(gets) == 3  # pages of 2: the marker sits on page 3


def test_other_sets_markers_do_not_match(github):
    github.comments = [
        {"id": 5, "body": "<!-- rlpace-bench:gpu -->\ngpu report", "user": {"login": BOT}}
    ]
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
        + ["--backoff-s", "0.01", "--bot-login", BOT, *extra]
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


def test_cli_failure_keeps_the_report_and_exits_2(github, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    report = tmp_path / "cpu.md"
    report.write_text(f"{MARKER}\nbody")
    github.fail_next(422, {"message": "Validation Failed: body is too long (maximum is 65536)"})
    assert _cli(github, report) == 2
    err = capsys.readouterr().err
    assert "not posted" in err and "the report stays at" in err and TOKEN not in err
    assert len(err.strip().splitlines()) == 1
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


# ---------------------------------------------------------------- hostile servers and input


def test_a_foreign_comment_with_the_marker_is_never_edited(github):
    forged = {"id": 50, "body": f"{MARKER}\nforged by the PR author", "user": {"login": "mallory"}}
    github.comments = [forged]
    posted, _ = _post(github, f"{MARKER}\nreal report")
    assert posted.action == "created" and posted.comment_id != 50
    assert github.comments[0]["body"] == f"{MARKER}\nforged by the PR author"
    assert not any(method == "PATCH" for method, _, _ in github.requests)


def test_the_author_is_the_tokens_own_identity_when_no_login_is_given(github):
    github.login = "rlpace-bot"
    github.comments = [
        {"id": 60, "body": f"{MARKER}\nold", "user": {"login": BOT}},
        {"id": 61, "body": f"{MARKER}\nold", "user": {"login": "rlpace-bot"}},
    ]
    posted, _ = _post(github, f"{MARKER}\nnew", bot_login=None)
    assert (posted.action, posted.comment_id) == ("updated", 61)
    assert github.requests[0][:2] == ("GET", "/user")


def test_a_token_that_cannot_read_its_identity_asks_for_the_bot_login(github):
    github.login = None  # an Actions token: GET /user is 403
    with pytest.raises(GitHubError, match="403.*pass --bot-login .github-actions.bot.") as err:
        _post(github, f"{MARKER}\nx", bot_login=None)
    assert "\n" not in str(err.value) and github.writes() == []


@pytest.mark.parametrize(
    "where",
    ["another port", "another scheme", "another host name", "a protocol-relative link"],
)
def test_a_next_link_elsewhere_never_receives_the_token(github, elsewhere, where):
    port = github.url.rsplit(":", 1)[1]
    target = {
        "another port": f"{elsewhere.url}/repos/{REPO}/issues/7/comments?page=2",
        "another scheme": f"https://127.0.0.1:{port}/repos/{REPO}/issues/7/comments?page=2",
        "another host name": f"http://localhost:{port}/repos/{REPO}/issues/7/comments?page=2",
        "a protocol-relative link": f"//127.0.0.1:{elsewhere.url.rsplit(':', 1)[1]}/x",
    }[where]
    github.next_link = lambda host, path, page: target if page == 1 else None
    with pytest.raises(GitHubError, match="refusing a link to .*the token only goes to"):
        _post(github, f"{MARKER}\nx")
    assert elsewhere.requests == []
    assert github.writes() == []  # and nothing was posted on a half-read listing


def test_an_api_root_with_a_path_keeps_links_under_it():
    api = GitHubApi("https://ghe.example.com/api/v3", TOKEN)
    assert api.url_for("https://ghe.example.com/api/v3/repos/o/r?page=2").endswith("page=2")
    with pytest.raises(GitHubError, match="refusing a link"):
        api.url_for("https://ghe.example.com/other/repos")
    with pytest.raises(GitHubError, match="refusing a link"):
        api.url_for("https://user:pw@ghe.example.com/api/v3/repos")
    api.close()


def test_a_next_link_back_to_the_same_page_ends_with_a_clean_error(github):
    github.comments = _others(2)
    github.next_link = lambda host, path, page: f"{host}{path}?per_page=2&page=1"
    with pytest.raises(GitHubError, match="points back to a page already read"):
        _post(github, f"{MARKER}\nx")
    assert len(github.requests) <= 3 and github.writes() == []


def test_pagination_is_bounded(github):
    github.next_link = lambda host, path, page: f"{host}{path}?per_page=2&page={page + 1}"
    with pytest.raises(GitHubError, match="more than 4 pages"):
        _post(github, f"{MARKER}\nx", max_pages=4)
    assert len(github.requests) == 4 and github.writes() == []


def test_a_redirect_is_not_followed_with_the_token(github, elsewhere):
    github.fail_next(302, {"message": "moved"}, {"Location": f"{elsewhere.url}/x"})
    with pytest.raises(GitHubError, match="302 .a redirect.; redirects are not followed"):
        _post(github, f"{MARKER}\nx")
    assert elsewhere.requests == []


def test_a_2xx_that_is_not_json_is_a_clean_error(github):
    github.raw_body = b"<html>captive portal</html>"
    with pytest.raises(GitHubError, match="200 with a body that is not JSON .text/html."):
        _post(github, f"{MARKER}\nx")


def test_malformed_answers_are_refused(github):
    github.raw_body = b'{"comments": []}'  # a dict where a list of comments belongs
    with pytest.raises(GitHubError, match="expected a JSON list, got dict"):
        _post(github, f"{MARKER}\nx")


def test_a_body_over_the_limit_is_refused_before_any_request(github):
    with pytest.raises(CommentTooLongError, match="70010 characters; GitHub takes at most 65536"):
        _post(github, f"{MARKER}\n" + "x" * (70010 - len(MARKER) - 1))
    assert github.requests == []


@pytest.mark.parametrize(
    "url", ["http://api.github.com", "ftp://127.0.0.1", "https://u:p@ghe.example.com", "nonsense"]
)
def test_api_roots_the_token_must_not_go_to_are_refused(url):
    with pytest.raises(BenchInputError, match="API root"):
        GitHubApi(url, TOKEN)


def test_cli_honours_github_api_url(github, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN + "\n")  # a trailing newline is dropped
    monkeypatch.setenv("GITHUB_API_URL", github.url)
    report = tmp_path / "cpu.md"
    report.write_text(f"{MARKER}\nbody")
    code = cli_main(
        ["post", "--repo", REPO, "--pr", "7", "--report", str(report), "--bot-login", BOT]
    )
    assert code == 0, capsys.readouterr().err
    assert github.requests and all(auth == f"Bearer {TOKEN}" for _, _, auth in github.requests)


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("non-ASCII token", "GITHUB_TOKEN holds a character no GitHub token has"),
        ("token with a space", "GITHUB_TOKEN holds a character no GitHub token has"),
        ("--attempts 0", "--attempts: expected at least 1 request per call, got 0"),
        ("non-UTF-8 report", "expected UTF-8 markdown, found a byte that is not UTF-8 at offset 5"),
        ("no marker", "the report has no hidden marker"),
        ("bad API root", "API root 'http://example.com': expected an https:// address"),
    ],
)
def test_cli_errors_are_one_line_exit_2_and_never_show_the_token(
    github, tmp_path, monkeypatch, capsys, case, expected
):
    token = {"non-ASCII token": "ghs_s\u00e9cret", "token with a space": "ghs_a b"}.get(case, TOKEN)
    monkeypatch.setenv("GITHUB_TOKEN", token)
    report = tmp_path / "cpu.md"
    report.write_bytes(
        b"<!-- \xff -->" if case == "non-UTF-8 report"
        else b"no marker" if case == "no marker"
        else MARKER.encode()
    )  # fmt: skip
    extra = {"--attempts 0": ["--attempts", "0"]}.get(case, [])
    api = "http://example.com" if case == "bad API root" else github.url
    argv = ["post", "--repo", REPO, "--pr", "7", "--report", str(report), "--api-url", api]
    assert cli_main([*argv, "--bot-login", BOT, *extra]) == 2
    out = capsys.readouterr()
    assert expected in out.err
    assert len(out.err.strip().splitlines()) == 1 and out.out == ""
    assert token not in out.err and "s\u00e9cret" not in out.err
    assert github.writes() == []


def test_retry_policy_rejects_nonsense():
    with pytest.raises(BenchInputError, match="--attempts: expected at least 1"):
        RetryPolicy(attempts=0)
