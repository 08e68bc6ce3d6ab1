"""What a push changed, what gets reviewed, how GitHub's answers map to errors, and which
names are refused before anything reaches the wire."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
import requests

from apps.review.comments import review_marker
from apps.review.pipeline import reviewable
from shared.github import (
    CommentsClient,
    ContentsClient,
    GitHubRejected,
    GitHubUnavailable,
    check_path,
    check_repo,
    check_sha,
    parse_push,
    repository_allowed,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "github"
TAG_DELETIONS = [
    "push-payload.json",
    "push-1.payload.json",
    "push-with-installation.payload.json",
    "push-with-organization.payload.json",
]


@pytest.mark.parametrize("name", TAG_DELETIONS)
def test_githubs_tag_deletion_examples_are_deletions_with_nothing_changed(name):
    push = parse_push(json.loads((FIXTURES / name).read_text()))
    assert push.deleted and push.changed == (), name


@pytest.mark.parametrize(
    "name", ["push-with-new-branch.payload.json", "push-with-no-username-committer.payload.json"]
)
def test_githubs_branch_examples_add_readme_on_the_default_branch(name):
    push = parse_push(json.loads((FIXTURES / name).read_text()))
    assert (push.to_default_branch, push.changed, push.deleted) == (True, ("README.md",), False)
    assert reviewable(push.changed, "") == ["README.md"]


def test_a_file_added_then_removed_in_one_push_is_not_changed():
    push = parse_push(
        {
            "ref": "refs/heads/main",
            "after": "s",
            "repository": {"full_name": "o/r", "default_branch": "main"},
            "commits": [{"added": ["a.md", "b.md"]}, {"removed": ["a.md"]}],
        }
    )
    assert push.changed == ("b.md",)


@pytest.mark.parametrize(
    ("name", "payload"),
    [
        ("no repository", {"ref": "refs/heads/main", "after": "s"}),
        ("no ref", {"after": "s", "repository": {"full_name": "o/r", "default_branch": "main"}}),
        ("no default branch", {"ref": "r", "after": "s", "repository": {"full_name": "o/r"}}),
        (
            "commits not objects",
            {
                "ref": "r",
                "after": "s",
                "commits": ["x"],
                "repository": {"full_name": "o/r", "default_branch": "main"},
            },
        ),
    ],
)
def test_a_malformed_push_is_a_value_error(name, payload):
    with pytest.raises(ValueError):
        parse_push(payload)


def test_reviewable_keeps_markdown_under_the_path_only():
    paths = ("docs/a.md", "docs/b.MARKDOWN", "docsx/c.md", "docs/d.txt", "e.md")
    assert reviewable(paths, "docs/") == ["docs/a.md", "docs/b.MARKDOWN"]
    assert reviewable(paths, "") == ["docs/a.md", "docs/b.MARKDOWN", "docsx/c.md", "e.md"]


class ScriptedSession(requests.Session):
    """Answers requests from a list of (status, headers, body); the wire is swapped, not the code."""

    def __init__(self, answers=()):
        super().__init__()
        self.answers, self.calls = list(answers), []

    def request(self, method, url, **kwargs):  # type: ignore[override]
        self.calls.append((url, kwargs))
        if not self.answers:
            raise AssertionError(f"unexpected {method} {url}")
        status, headers, body = self.answers.pop(0)
        response = requests.Response()
        response.status_code = status
        if isinstance(body, bytes):  # the raw media type: the file's own bytes
            response._content = body
            response.headers["Content-Type"] = "application/vnd.github.raw"
        else:
            response._content = json.dumps(body).encode()
            response.headers["Content-Type"] = "application/json; charset=utf-8"
        response.headers.update(headers)
        return response


def client(answers) -> tuple[ContentsClient, ScriptedSession]:
    session = ScriptedSession(answers)
    return ContentsClient(
        "http://github.local", session=session, attempts=2, sleep=lambda s: None
    ), session


FILE = {"type": "file", "encoding": "base64", "content": base64.b64encode(b"# Hi\n").decode()}


def test_a_rate_limited_403_is_retried_then_transient():
    limited = (403, {"x-ratelimit-remaining": "0"}, {"message": "API rate limit exceeded"})
    contents, session = client([limited, limited])
    with pytest.raises(GitHubUnavailable, match=r"o/r:docs/a\.md"):
        contents.fetch("o/r", "docs/a.md", "abc")
    assert len(session.calls) == 2


def test_a_file_is_asked_for_raw_and_its_bytes_come_back_whatever_its_size():
    big = b"# Big\n" + b"x" * (2 * 1024 * 1024)  # over the JSON form's 1 MB
    contents, session = client([(200, {}, big)])
    assert contents.fetch("o/r", "docs/big.md", "abc") == big
    assert session.calls[0][1]["headers"]["Accept"] == "application/vnd.github.raw+json"


def test_a_secondary_rate_limit_then_success_returns_the_file():
    contents, _ = client([(403, {"retry-after": "1"}, {}), (200, {}, FILE)])
    assert contents.fetch("o/r", "docs/a.md", "abc") == b"# Hi\n"


@pytest.mark.parametrize(
    ("name", "answer"),
    [
        ("plain 403", (403, {}, {"message": "Resource not accessible"})),
        ("404", (404, {}, {"message": "Not Found"})),
        ("a directory", (200, {}, [{"type": "file"}])),
        (
            "a file too large for the API",
            (200, {}, {"type": "file", "encoding": "none", "content": ""}),
        ),
    ],
)
def test_permanent_answers_are_rejected_naming_the_file(name, answer):
    contents, session = client([answer])
    with pytest.raises(GitHubRejected, match=r"docs/a\.md"):
        contents.fetch("o/r", "docs/a.md", "abc")
    assert len(session.calls) == 1, name
    assert session.calls[0][1]["timeout"] > 0


# --- names refused before any URL is built ---------------------------------------------

BAD_REPOS = [
    ("no slash", "octo"),
    ("two slashes", "octo/a/b"),
    ("empty owner", "/repo"),
    ("empty name", "octo/"),
    ("owner starts with '-'", "-octo/repo"),
    ("owner too long", "o" * 40 + "/repo"),
    ("owner with '.'", "oc.to/repo"),
    ("owner with '_'", "oc_to/repo"),
    ("name '.'", "octo/."),
    ("name '..'", "octo/.."),
    ("name too long", "octo/" + "n" * 101),
    ("name with a space", "octo/my repo"),
    ("name with '?'", "octo/repo?x=1"),
    ("name with '%'", "octo/re%2Fpo"),
    ("not a string", None),
]
BAD_PATHS = [
    ("empty", ""),
    ("leading slash", "/docs/a.md"),
    ("dot-dot segment", "docs/../secrets.md"),
    ("dot-dot alone", ".."),
    ("dot segment", "./a.md"),
    ("empty segment", "a//b"),
    ("trailing slash", "docs/"),
    ("NUL", "docs/a\0.md"),
    ("not a string", None),
    ("a name over 255 bytes", "docs/" + "n" * 253 + ".md"),
    ("a name over 255 bytes in UTF-8", "docs/" + "é" * 128 + ".md"),
    ("a path over 4096 bytes", "/".join(["d" * 200] * 21) + "/a.md"),
    ("a lone surrogate", "docs/\ud800.md"),
]


@pytest.mark.parametrize(("name", "repo"), BAD_REPOS)
def test_a_malformed_repo_is_rejected_before_the_wire(name, repo):
    contents, session = client([])
    with pytest.raises(GitHubRejected, match="repository"):
        contents.fetch(repo, "docs/a.md", "abc")
    assert session.calls == [], name


@pytest.mark.parametrize(("name", "path"), BAD_PATHS)
def test_a_malformed_path_is_rejected_before_the_wire(name, path):
    contents, session = client([])
    with pytest.raises(GitHubRejected, match="path"):
        contents.fetch("octo/repo", path, "abc")
    assert session.calls == [], name


@pytest.mark.parametrize(
    "repo", ["octo/repo", "o/r", "Octo-Cat9/my.repo_name-2", "a" * 39 + "/" + "b" * 100]
)
def test_githubs_valid_repo_names_pass(repo):
    assert "/".join(check_repo(repo)) == repo


@pytest.mark.parametrize(
    "path",
    [
        "a.md",
        "docs/a b.md",
        "docs/.hidden/x.md",
        "a..b/c...md",
        "docs/" + "n" * 252 + ".md",  # a 255-byte name: the limit itself
        "/".join(["section"] * 120) + "/a.md",  # long, but every name is short
    ],
)
def test_plain_relative_paths_pass(path):
    assert check_path(path) == path


@pytest.mark.parametrize(
    ("name", "repo", "patterns", "allowed"),
    [
        ("no allowlist allows all", "octo/docs", (), True),
        ("an owner glob", "octo/docs", ("octo/*",), True),
        ("case-insensitive, as GitHub", "Octo/Docs", ("octo/docs",), True),
        ("another owner", "evil/docs", ("octo/*",), False),
        ("a prefix is not a match", "octo/docs-old", ("octo/docs",), False),
        ("any of several", "b/x", ("a/*", "b/x"), True),
    ],
)
def test_repository_allowed_matches_globs(name, repo, patterns, allowed):
    assert repository_allowed(repo, patterns) is allowed, name


def test_the_path_is_quoted_and_the_ref_goes_in_the_query():
    contents, session = client([(200, {}, FILE)])
    contents.fetch("octo/repo", "docs/a b#c?.md", "abc")
    url, kwargs = session.calls[0]
    assert url == "http://github.local/repos/octo/repo/contents/docs/a%20b%23c%3F.md"
    assert kwargs["params"] == {"ref": "abc"}


@pytest.mark.parametrize("sha", ["", "abc", "../x", "g" * 40, "a" * 65, "abcd/comments"])
def test_a_malformed_sha_is_rejected_before_the_wire(sha):
    session = ScriptedSession()
    comments = CommentsClient("http://github.local", session=session)
    with pytest.raises(GitHubRejected, match="commit"):
        comments.publish_once("octo/repo", sha, review_marker("batches/x"), "text")
    with pytest.raises(GitHubRejected):
        check_sha(sha)
    assert session.calls == []


def test_a_marker_cannot_break_out_of_its_html_comment():
    assert review_marker("batches/abc") == "<!-- hookledger:review:batches/abc -->"
    for name in ["", "batches/a-->", "x\ny", "a>b"]:
        with pytest.raises(GitHubRejected):
            review_marker(name)


# --- commit comments: the wire swapped for a script -----------------------------------

SHA = "6dcb09b5b57875f334f61aebed695e2e4193db5e"
MARKER = "<!-- hookledger:review:batches/abc -->"


def comments_client(answers, **kwargs) -> tuple[CommentsClient, ScriptedSession]:
    session = ScriptedSession(answers)
    return CommentsClient(
        "http://github.local", "s3cret-token", session=session, sleep=lambda s: None, **kwargs
    ), session


def test_a_lost_post_answer_is_transient_and_not_retried_here():
    comments, session = comments_client([(200, {}, []), (502, {}, {"message": "Bad Gateway"})])
    with pytest.raises(GitHubUnavailable, match=f"octo/repo@{SHA}") as caught:
        comments.publish_once("octo/repo", SHA, MARKER, "review")
    assert [kwargs.get("json") for _, kwargs in session.calls] == [
        None,
        {"body": f"review\n\n{MARKER}"},
    ]
    assert "s3cret-token" not in str(caught.value)


def test_a_rejected_post_is_permanent():
    comments, _ = comments_client([(200, {}, []), (422, {}, {"message": "No commit found"})])
    with pytest.raises(GitHubRejected, match=f"octo/repo@{SHA}: GitHub answered 422"):
        comments.publish_once("octo/repo", SHA, MARKER, f"review {MARKER}")


def test_a_pagination_link_to_another_host_is_not_followed():
    foreign = {"link": '<https://elsewhere.example/page2>; rel="next"'}
    comments, session = comments_client([(200, foreign, [{"id": 1, "body": "x"}])])
    with pytest.raises(GitHubRejected, match=r"pagination link leaves github\.local"):
        comments.find_comment("octo/repo", SHA, MARKER)
    assert len(session.calls) == 1


def test_pages_are_bounded():
    again = {"link": '<http://github.local/repos/octo/repo/commits/x/comments?page=2>; rel="next"'}
    comments, session = comments_client([(200, again, [])] * 3, max_pages=3)
    with pytest.raises(GitHubRejected, match="more than 3 pages"):
        comments.find_comment("octo/repo", SHA, MARKER)
    assert len(session.calls) == 3


def test_an_over_long_body_is_refused_before_the_wire():
    comments, session = comments_client([])
    with pytest.raises(GitHubRejected, match="over the limit"):
        comments.publish_once("octo/repo", SHA, MARKER, "x" * 70_000)
    assert session.calls == []
