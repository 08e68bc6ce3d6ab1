"""The simulator answers every GitHub REST endpoint hookledger calls as GitHub documents
it: each answer, through the real HTTP surface, against the pinned extract of GitHub's
OpenAPI description (tests/github_openapi.py, tools/github_openapi.py).

Every success is checked, and the documented errors that are cheap to provoke (404, 403,
401, 422, 409). Beyond what hookledger calls, the operations apps commonly call (issues,
labels, issue comments, reactions, pull requests and reviews, commit statuses, the
repository, writing a file) are checked the same way. Repository routes run twice: with an App installation token and with a
personal token (the two ways hookledger authenticates). A status GitHub does not
document for an endpoint (e.g. 404 for an unknown check run) is not checked here.
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import Any

import pytest
import requests

from shared.github.app import AppCredentials, app_jwt
from shared.github.transport import API_VERSION
from tests.github_openapi import documented_json, documented_schema

OWNER, REPO = "octo", "docs"
SHA = "6dcb09b5b57875f334f61aebed695e2e4193db5e"
FILES = {"README.md": b"# Docs\n", "articles/a.md": b"# A\n\nHello.\n", "articles/b/c.md": b"C\n"}
JSON = "application/vnd.github+json"
RAW = "application/vnd.github.raw+json"

CONTENTS = "/repos/{owner}/{repo}/contents/{path}"
TREE = "/repos/{owner}/{repo}/git/trees/{tree_sha}"
COMMIT_COMMENTS = "/repos/{owner}/{repo}/commits/{commit_sha}/comments"
COMMENT = "/repos/{owner}/{repo}/comments/{comment_id}"
CHECK_RUNS = "/repos/{owner}/{repo}/check-runs"
CHECK_RUN = "/repos/{owner}/{repo}/check-runs/{check_run_id}"
ANNOTATIONS = "/repos/{owner}/{repo}/check-runs/{check_run_id}/annotations"
REF_CHECK_RUNS = "/repos/{owner}/{repo}/commits/{ref}/check-runs"
ACCESS_TOKENS = "/app/installations/{installation_id}/access_tokens"


class GitHub:
    """Requests to the simulator as GitHub's REST API, with one Authorization."""

    def __init__(self, url: str, authorization: str | None) -> None:
        self.url = url
        self.session = requests.Session()
        self.session.headers.update({"Accept": JSON, "X-GitHub-Api-Version": API_VERSION})
        if authorization:
            self.session.headers["Authorization"] = authorization

    def call(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        return self.session.request(method, self.url + path, timeout=10, **kwargs)


def app_authorization(app: dict[str, Any]) -> str:
    credentials = AppCredentials.from_pem(app["client_id"], app["private_key"])
    return f"Bearer {app_jwt(credentials, datetime.now(UTC))}"


@pytest.fixture
def app(simulator) -> dict[str, Any]:
    """A registered App installed on `octo/docs` only, and the commit's files."""
    registered = simulator.control.register_github_app()
    installation = simulator.control.install_github_app(
        registered["id"], OWNER, repositories=[f"{OWNER}/{REPO}"]
    )
    for path, data in FILES.items():
        simulator.control.put_file(OWNER, REPO, path, SHA, data)
    return {**registered, "installation": installation["id"]}


def mint(simulator, app: dict[str, Any], installation: int, **body: Any) -> dict[str, Any]:
    """An installation token's answer, checked against GitHub's documents."""
    as_app = GitHub(simulator.url, app_authorization(app))
    answer = as_app.call("POST", f"/app/installations/{installation}/access_tokens", json=body)
    assert answer.status_code == 201, answer.text
    minted: dict[str, Any] = documented_json(answer, "POST", ACCESS_TOKENS)
    return minted


def as_installation(simulator, app: dict[str, Any], **body: Any) -> GitHub:
    token = mint(simulator, app, app["installation"], **body)["token"]
    return GitHub(simulator.url, f"Bearer {token}")


@pytest.fixture(params=["installation", "personal"])
def github(request, simulator, app) -> GitHub:
    """The API as the App's installation, or as a personal token."""
    if request.param == "personal":
        return GitHub(simulator.url, "Bearer ghp_personal")
    return as_installation(simulator, app)


def test_installation_tokens_and_their_refusals(simulator, app):
    everywhere = simulator.control.install_github_app(app["id"], "octo-org")["id"]
    selected = mint(simulator, app, app["installation"])
    assert [r["full_name"] for r in selected["repositories"]] == [f"{OWNER}/{REPO}"]
    assert "repositories" not in mint(simulator, app, everywhere)
    narrowed = mint(simulator, app, app["installation"], permissions={"contents": "read"})
    assert narrowed["permissions"] == {"contents": "read"}

    as_app = GitHub(simulator.url, app_authorization(app))
    refused = {
        404: as_app.call("POST", "/app/installations/999999/access_tokens"),
        422: as_app.call(
            "POST",
            f"/app/installations/{app['installation']}/access_tokens",
            json={"permissions": {"administration": "write"}},
        ),
        401: GitHub(simulator.url, "Bearer not-a-jwt").call(
            "POST", f"/app/installations/{app['installation']}/access_tokens"
        ),
    }
    simulator.control.change_installation(everywhere, suspended=True)
    refused[403] = as_app.call("POST", f"/app/installations/{everywhere}/access_tokens")
    for status, answer in refused.items():
        assert answer.status_code == status, answer.text
        documented_json(answer, "POST", ACCESS_TOKENS)


def test_contents_as_json_raw_and_missing(simulator, github):
    path = f"/repos/{OWNER}/{REPO}/contents/articles/a.md"

    as_json = github.call("GET", path, params={"ref": SHA})
    assert as_json.status_code == 200
    assert documented_json(as_json, "GET", CONTENTS)["type"] == "file"

    raw = github.call("GET", path, params={"ref": SHA}, headers={"Accept": RAW})
    assert raw.status_code == 200 and raw.content == FILES["articles/a.md"]
    documented_schema("GET", CONTENTS, raw.status_code)  # raw bytes: the status is documented

    missing = github.call("GET", f"/repos/{OWNER}/{REPO}/contents/nope.md", params={"ref": SHA})
    assert missing.status_code == 404
    documented_json(missing, "GET", CONTENTS)


def test_contents_refused_outside_the_installation(simulator, app):
    other = as_installation(simulator, app).call(
        "GET", f"/repos/{OWNER}/elsewhere/contents/README.md", params={"ref": SHA}
    )
    assert other.status_code == 403
    documented_json(other, "GET", CONTENTS)


@pytest.mark.parametrize("recursive", [True, False])
def test_git_trees(simulator, github, recursive):
    params = {"recursive": "1"} if recursive else {}
    tree = github.call("GET", f"/repos/{OWNER}/{REPO}/git/trees/{SHA}", params=params)
    assert tree.status_code == 200
    body = documented_json(tree, "GET", TREE)
    assert ("articles/a.md" in {e["path"] for e in body["tree"]}) is recursive

    missing = github.call("GET", f"/repos/{OWNER}/{REPO}/git/trees/{'0' * 40}", params=params)
    assert missing.status_code == 404
    documented_json(missing, "GET", TREE)


def test_commit_comments_created_listed_edited_and_deleted(simulator, github):
    comments = f"/repos/{OWNER}/{REPO}/commits/{SHA}/comments"
    created = [github.call("POST", comments, json={"body": f"note {n}"}) for n in (1, 2)]
    for answer in created:
        assert answer.status_code == 201
        documented_json(answer, "POST", COMMIT_COMMENTS)

    first_page = github.call("GET", comments, params={"per_page": 1})
    assert first_page.status_code == 200 and "next" in first_page.links
    assert len(documented_json(first_page, "GET", COMMIT_COMMENTS)) == 1
    everything = github.call("GET", comments)
    assert len(documented_json(everything, "GET", COMMIT_COMMENTS)) == 2

    one = f"/repos/{OWNER}/{REPO}/comments/{created[0].json()['id']}"
    edited = github.call("PATCH", one, json={"body": "edited"})
    assert edited.status_code == 200
    assert documented_json(edited, "PATCH", COMMENT)["body"] == "edited"

    deleted = github.call("DELETE", one)
    assert deleted.status_code == 204 and deleted.content == b""
    documented_json(deleted, "DELETE", COMMENT)

    for method in ("PATCH", "DELETE"):
        gone = github.call(method, one, json={"body": "again"})
        assert gone.status_code == 404
        documented_json(gone, method, COMMENT)

    unsupplied = github.call("POST", comments, json={})
    assert unsupplied.status_code == 422
    documented_json(unsupplied, "POST", COMMIT_COMMENTS)


def test_a_comment_refused_to_a_read_only_token(simulator, app):
    refused = as_installation(simulator, app, permissions={"contents": "read"}).call(
        "POST", f"/repos/{OWNER}/{REPO}/commits/{SHA}/comments", json={"body": "no"}
    )
    assert refused.status_code == 403
    documented_json(refused, "POST", COMMIT_COMMENTS)


def test_check_runs_created_updated_read_and_listed(simulator, github):
    annotation = {
        "path": "articles/a.md",
        "start_line": 1,
        "end_line": 1,
        "annotation_level": "warning",
        "message": "Heading too short",
        "title": "style",
    }
    created = github.call(
        "POST",
        f"/repos/{OWNER}/{REPO}/check-runs",
        json={
            "name": "hookledger review",
            "head_sha": SHA,
            "status": "in_progress",
            "external_id": "sub-1",
            "details_url": "https://example.com/review/1",
            "output": {"title": "Reviewing", "summary": "1 file", "annotations": [annotation]},
        },
    )
    assert created.status_code == 201, created.text
    run = documented_json(created, "POST", CHECK_RUNS)
    one = f"/repos/{OWNER}/{REPO}/check-runs/{run['id']}"

    queued = github.call(
        "POST", f"/repos/{OWNER}/{REPO}/check-runs", json={"name": "bare", "head_sha": SHA}
    )
    assert queued.status_code == 201
    documented_json(queued, "POST", CHECK_RUNS)

    updated = github.call(
        "PATCH",
        one,
        json={"conclusion": "neutral", "output": {"summary": "done", "text": "1 finding"}},
    )
    assert updated.status_code == 200
    assert documented_json(updated, "PATCH", CHECK_RUN)["status"] == "completed"

    got = github.call("GET", one)
    assert got.status_code == 200
    assert documented_json(got, "GET", CHECK_RUN)["conclusion"] == "neutral"

    annotations = github.call("GET", f"{one}/annotations", params={"per_page": 100})
    assert annotations.status_code == 200
    assert len(documented_json(annotations, "GET", ANNOTATIONS)) == 1

    listed = github.call(
        "GET",
        f"/repos/{OWNER}/{REPO}/commits/{SHA}/check-runs",
        params={"check_name": "hookledger review", "filter": "all"},
    )
    assert listed.status_code == 200
    assert documented_json(listed, "GET", REF_CHECK_RUNS)["total_count"] == 1


# --- what apps commonly call: issues, pull requests, statuses, the repository, file writes ---

REPOSITORY = "/repos/{owner}/{repo}"
ISSUES = "/repos/{owner}/{repo}/issues"
ISSUE = "/repos/{owner}/{repo}/issues/{issue_number}"
ISSUE_LABELS = "/repos/{owner}/{repo}/issues/{issue_number}/labels"
ISSUE_LABEL = "/repos/{owner}/{repo}/issues/{issue_number}/labels/{name}"
ISSUE_COMMENTS = "/repos/{owner}/{repo}/issues/{issue_number}/comments"
ISSUE_COMMENT = "/repos/{owner}/{repo}/issues/comments/{comment_id}"
ISSUE_REACTIONS = "/repos/{owner}/{repo}/issues/{issue_number}/reactions"
COMMENT_REACTIONS = "/repos/{owner}/{repo}/issues/comments/{comment_id}/reactions"
PULLS = "/repos/{owner}/{repo}/pulls"
PULL = "/repos/{owner}/{repo}/pulls/{pull_number}"
PULL_FILES = "/repos/{owner}/{repo}/pulls/{pull_number}/files"
REVIEWS = "/repos/{owner}/{repo}/pulls/{pull_number}/reviews"
REVIEW_COMMENTS = "/repos/{owner}/{repo}/pulls/{pull_number}/comments"
STATUSES = "/repos/{owner}/{repo}/statuses/{sha}"
REF_STATUSES = "/repos/{owner}/{repo}/commits/{ref}/statuses"
REF_STATUS = "/repos/{owner}/{repo}/commits/{ref}/status"
API = f"/repos/{OWNER}/{REPO}"
BASE_SHA = "0" * 39 + "1"


def answered(github: GitHub, status: int, method: str, template: str, path: str, **kw: Any):
    """`method path`'s JSON, once its status is `status` and GitHub documents the answer."""
    answer = github.call(method, API + path, **kw)
    assert answer.status_code == status, f"{method} {path}: {answer.status_code} {answer.text}"
    return documented_json(answer, method, template)


def test_issues_created_got_updated_and_listed(simulator, github):
    made = answered(
        github,
        201,
        "POST",
        ISSUES,
        "/issues",
        json={
            "title": "Broken link",
            "body": "In a.md",
            "labels": ["bug"],
            "assignees": ["octocat"],
        },
    )
    simulator.control.seed_issue(f"{OWNER}/{REPO}", title="Seeded", labels=["docs"])
    one = f"/issues/{made['number']}"
    assert answered(github, 200, "GET", ISSUE, one)["title"] == "Broken link"
    closed = answered(github, 200, "PATCH", ISSUE, one, json={"state": "closed", "labels": []})
    assert closed["state"] == "closed" and closed["closed_at"]
    listed = answered(github, 200, "GET", ISSUES, "/issues", params={"state": "all", "per_page": 1})
    assert len(listed) == 1
    answered(github, 404, "GET", ISSUE, "/issues/999")
    answered(github, 404, "PATCH", ISSUE, "/issues/999", json={"title": "x"})
    answered(github, 422, "POST", ISSUES, "/issues", json={"body": "no title"})
    answered(github, 422, "PATCH", ISSUE, one, json={"state": "resolved"})
    answered(github, 422, "GET", ISSUES, "/issues", params={"state": "resolved"})


def test_labels_added_listed_set_and_removed(simulator, github):
    number = simulator.control.seed_issue(f"{OWNER}/{REPO}")["number"]
    labels = f"/issues/{number}/labels"
    answered(github, 200, "POST", ISSUE_LABELS, labels, json={"labels": ["bug"]})
    added = answered(github, 200, "POST", ISSUE_LABELS, labels, json=["triage"])
    assert [label["name"] for label in added] == ["bug", "triage"]
    assert len(answered(github, 200, "GET", ISSUE_LABELS, labels)) == 2
    answered(github, 200, "PUT", ISSUE_LABELS, labels, json={"labels": ["docs", "bug"]})
    left = answered(github, 200, "DELETE", ISSUE_LABEL, f"{labels}/docs")
    assert [label["name"] for label in left] == ["bug"]
    answered(github, 404, "DELETE", ISSUE_LABEL, f"{labels}/docs")
    answered(github, 404, "POST", ISSUE_LABELS, "/issues/999/labels", json=["bug"])
    answered(github, 404, "GET", ISSUE_LABELS, "/issues/999/labels")
    answered(github, 422, "PUT", ISSUE_LABELS, labels, json={"labels": [7]})


def test_issue_comments_and_reactions(simulator, github):
    number = simulator.control.seed_issue(f"{OWNER}/{REPO}")["number"]
    comments = f"/issues/{number}/comments"
    made = answered(github, 201, "POST", ISSUE_COMMENTS, comments, json={"body": "Thanks"})
    assert len(answered(github, 200, "GET", ISSUE_COMMENTS, comments)) == 1
    one = f"/issues/comments/{made['id']}"
    assert answered(github, 200, "PATCH", ISSUE_COMMENT, one, json={"body": "Fixed"})["body"]
    answered(github, 422, "PATCH", ISSUE_COMMENT, one, json={})
    answered(github, 422, "POST", ISSUE_COMMENTS, comments, json={})
    answered(github, 404, "POST", ISSUE_COMMENTS, "/issues/999/comments", json={"body": "x"})
    answered(github, 404, "GET", ISSUE_COMMENTS, "/issues/999/comments")

    reactions = f"/issues/{number}/reactions"
    first = answered(github, 201, "POST", ISSUE_REACTIONS, reactions, json={"content": "+1"})
    again = answered(github, 200, "POST", ISSUE_REACTIONS, reactions, json={"content": "+1"})
    assert again["id"] == first["id"]
    answered(github, 422, "POST", ISSUE_REACTIONS, reactions, json={"content": "wow"})
    assert len(answered(github, 200, "GET", ISSUE_REACTIONS, reactions)) == 1
    answered(github, 404, "GET", ISSUE_REACTIONS, "/issues/999/reactions")
    on_comment = f"{one}/reactions"
    answered(github, 201, "POST", COMMENT_REACTIONS, on_comment, json={"content": "heart"})
    answered(github, 200, "POST", COMMENT_REACTIONS, on_comment, json={"content": "heart"})
    answered(github, 422, "POST", COMMENT_REACTIONS, on_comment, json={"content": 1})


def test_pull_requests_their_files_reviews_and_review_comments(simulator, github):
    seeded = simulator.control.seed_pull(
        f"{OWNER}/{REPO}",
        SHA,
        BASE_SHA,
        [
            "README.md",
            {
                "filename": "articles/a.md",
                "status": "added",
                "additions": 3,
                "patch": "@@ -0,0 +1,3 @@",
            },
        ],
        labels=["docs"],
    )
    pull = f"/pulls/{seeded['number']}"
    assert answered(github, 200, "GET", PULL, pull)["changed_files"] == 2
    assert len(answered(github, 200, "GET", PULLS, "/pulls")) == 1
    answered(github, 422, "GET", PULLS, "/pulls", params={"state": "merged"})
    answered(github, 404, "GET", PULL, "/pulls/999")
    assert len(answered(github, 200, "GET", PULL_FILES, f"{pull}/files")) == 2

    review = {
        "event": "COMMENT",
        "body": "Two notes",
        "comments": [{"path": "articles/a.md", "line": 1, "body": "Typo"}],
    }
    answered(github, 200, "POST", REVIEWS, f"{pull}/reviews", json=review)
    answered(github, 200, "POST", REVIEWS, f"{pull}/reviews", json={"event": "APPROVE"})
    answered(github, 422, "POST", REVIEWS, f"{pull}/reviews", json={"event": "COMMENT"})
    assert len(answered(github, 200, "GET", REVIEWS, f"{pull}/reviews")) == 2

    single = {"body": "Why?", "path": "README.md", "line": 1, "commit_id": SHA}
    made = answered(github, 201, "POST", REVIEW_COMMENTS, f"{pull}/comments", json=single)
    reply = {"body": "Because", "in_reply_to": made["id"]}
    answered(github, 201, "POST", REVIEW_COMMENTS, f"{pull}/comments", json=reply)
    answered(github, 422, "POST", REVIEW_COMMENTS, f"{pull}/comments", json={"body": "no path"})
    assert len(answered(github, 200, "GET", REVIEW_COMMENTS, f"{pull}/comments")) == 3


def test_commit_statuses_and_their_combination(simulator, github):
    for context, state in (("lint", "success"), ("tests", "pending"), ("tests", "failure")):
        body = {"state": state, "context": context, "target_url": "https://ci.example/1"}
        answered(github, 201, "POST", STATUSES, f"/statuses/{SHA}", json=body)
    assert len(answered(github, 200, "GET", REF_STATUSES, f"/commits/{SHA}/statuses")) == 3
    combined = answered(github, 200, "GET", REF_STATUS, f"/commits/{SHA}/status")
    assert (combined["state"], combined["total_count"]) == ("failure", 2)


def test_the_repository_and_a_file_written_then_read(simulator, github):
    repository = answered(github, 200, "GET", REPOSITORY, "")
    assert repository["full_name"] == f"{OWNER}/{REPO}"

    path = "/contents/notes/new.md"
    write = {"message": "Add notes", "content": "IyBOb3Rlcwo="}
    made = answered(github, 201, "PUT", CONTENTS, path, json=write)
    answered(github, 422, "PUT", CONTENTS, path, json=write)  # exists: a sha is required
    answered(github, 422, "PUT", CONTENTS, path, json={"content": "eA=="})
    update = {**write, "content": "IyBOb3RlcyAyCg==", "sha": made["content"]["sha"]}
    answered(github, 200, "PUT", CONTENTS, path, json=update)
    stale = github.call("PUT", API + path, json=update)
    assert stale.status_code == 409
    # GitHub documents 409 as oneOf two error shapes any error body fits both of: the
    # status is documented, and the body is its plain "Basic Error".
    documented_schema("PUT", CONTENTS, 409)
    assert set(stale.json()) <= {"message", "documentation_url", "status", "url"}
    got = answered(github, 200, "GET", CONTENTS, path)
    assert base64.b64decode(got["content"]) == b"# Notes 2\n"
