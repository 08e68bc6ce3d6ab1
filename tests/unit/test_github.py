"""What a push changed, what gets reviewed, and how Contents API answers map to errors."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
import requests

from shared.github import (
    ContentsClient,
    GitHubRejected,
    GitHubUnavailable,
    parse_push,
    reviewable,
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
    """Answers GETs from a list of (status, headers, body); the wire is swapped, not the code."""

    def __init__(self, answers):
        super().__init__()
        self.answers, self.calls = list(answers), []

    def get(self, url, **kwargs):  # type: ignore[override]
        self.calls.append((url, kwargs))
        status, headers, body = self.answers.pop(0)
        response = requests.Response()
        response.status_code, response._content = status, json.dumps(body).encode()
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
