"""The simulator answers every GitHub REST endpoint hookledger calls as GitHub documents
it: each answer, through the real HTTP surface, against the pinned extract of GitHub's
OpenAPI description (tests/github_openapi.py, tools/github_openapi.py).

Every success is checked, and the documented errors that are cheap to provoke (404, 403,
401, 422). Repository routes run twice: with an App installation token and with a
personal token (the two ways hookledger authenticates). A status GitHub does not
document for an endpoint (e.g. 404 for an unknown check run) is not checked here.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
import requests

from shared.github.app import API_VERSION, AppCredentials, app_jwt
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
