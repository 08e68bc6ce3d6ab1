"""GitHub's REST API version 2026-03-10, against the simulator process (docs/github-app.md,
"REST API version").

Every request hookledger and its shipped apps send (the App's token mint, file reads, the
GraphQL read of a push, commit comments, check runs, the App's webhook deliveries, and the
apps' calls by operation) names the version the clients were given, and each REST one is
a request GitHub documents for 2026-03-10: the operation it is, its query parameters and
its JSON body, against the refreshed extract (tests/github_openapi.py). The simulator
answers as the version asked for: 400 in GitHub's words for one GitHub does not support
(a bad token still 401 first), 2022-11-28 without the header, and for 2026-03-10 without
the fields that version removed.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl

import pytest
import requests

from shared.github import API_VERSION, CommentsClient, ContentsClient
from shared.github.app import AppAuth, AppCredentials, app_jwt
from shared.github.checks import Annotation, CheckRunState, ChecksClient
from shared.github.hook_deliveries import HookDeliveriesClient
from shared.github.rest import GitHubApi
from tests.github_openapi import (
    assert_request_documented,
    documented_json,
    extract,
    request_template,
)
from tools.github_openapi import APPS

OWNER, NAME = "octo", "docs"
REPO = f"{OWNER}/{NAME}"
SHA = "6dcb09b5b57875f334f61aebed695e2e4193db5e"
BASE = "0" * 39 + "1"
FILES = {"README.md": b"# Docs\n", "articles/a.md": b"# A\n\nHello.\n"}
JSON = "application/vnd.github+json"
OLD = "2022-11-28"


def exercise(simulator: Any, api_version: str | None) -> None:
    """Every kind of GitHub call hookledger and the shipped apps make, once, as an App
    installation, with clients built for `api_version` (None: the code's own)."""
    app = simulator.control.register_github_app()
    installation = simulator.control.install_github_app(app["id"], OWNER)["id"]
    for path, data in FILES.items():
        simulator.control.put_file(OWNER, NAME, path, SHA, data)
    number = simulator.control.seed_issue(REPO, title="An issue")["number"]
    credentials = AppCredentials.from_pem(app["client_id"], app["private_key"])
    url, options = simulator.url, {"timeout_s": 10, "api_version": api_version}
    auth = AppAuth(credentials, url, timeout_s=10, api_version=api_version)
    by = {"installation_id": installation}

    contents = ContentsClient(url, auth=auth, **options)
    contents.fetch(REPO, "README.md", SHA, **by)
    fetched = contents.fetch_many(REPO, list(FILES), SHA, **by)
    assert sorted(fetched.texts) == sorted(FILES), fetched

    comments = CommentsClient(url, auth=auth, **options)
    marker = "<!-- hookledger review -->"
    comments.publish_once(REPO, SHA, marker, "Reviewing.", **by)
    published = comments.publish_once(REPO, SHA, marker, "Reviewed: no findings.", **by)
    extra = comments.publish_once(REPO, SHA, "<!-- other -->", "To delete.", **by)
    assert comments.delete_comment(REPO, extra.comment_id, **by), published

    checks = ChecksClient(url, auth=auth, **options)
    running = CheckRunState(
        name="hookledger review",
        external_id="sub-1",
        status="in_progress",
        title="Reviewing 2 files",
        summary="The review is running.",
        details_url="http://127.0.0.1:8099/operations/batches/abc",
    )
    checks.publish(REPO, SHA, running, **by)
    findings = tuple(
        Annotation("articles/a.md", n, n, "warning", f"finding {n}", f"F{n}") for n in (1, 2)
    )
    done = CheckRunState(
        name="hookledger review",
        external_id="sub-1",
        status="completed",
        conclusion="neutral",
        title="2 findings",
        summary="| File | Findings |",
        text="details",
        annotations=findings,
        completed_at=datetime(2026, 3, 10, 12, 0, tzinfo=UTC),
        mark="hookledger operation batches/abc",
    )
    run = checks.publish(REPO, SHA, done, **by)
    checks.publish(REPO, SHA, done, **by)  # found, its annotations listed, none sent again
    checks.get(REPO, run.check_run_id, **by)  # the console's read

    api = GitHubApi(url, auth=auth, **options).bound(
        installation_id=installation,
        params={"owner": OWNER, "repo": NAME, "issue_number": number},
    )
    api.call("git/get-tree", tree_sha=SHA, recursive="1")  # apps/articles
    api.call("issues/add-labels", json={"labels": ["bug"]})  # apps/labeller
    api.call("issues/list-comments", per_page=100)  # apps/summaries
    api.call("issues/create-comment", json={"body": "A summary.\n\n<!-- summary k -->"})

    ping = {"zen": "Keep it logically awesome."}
    sent = simulator.control.send_github_webhook("ping", ping, url=simulator.receiver.url)
    deliveries = HookDeliveriesClient(url, credentials, **options)
    listed = deliveries.page()
    assert [d.id for d in listed.deliveries] == [sent["id"]], listed
    deliveries.get(sent["id"])
    deliveries.redeliver(sent["id"])


def test_every_request_names_2026_03_10_and_is_one_github_documents_for_it(simulator):
    exercise(simulator, None)

    sent = simulator.control.github_requests()
    seen = set()
    for request in sent:
        what = f"{request['method']} {request['path']}?{request['query']}"
        assert request["api_version"] == API_VERSION, what
        if request["path"] == "/graphql":
            continue  # GraphQL, not the REST description
        template = request_template(request["method"], request["path"])
        query = dict(parse_qsl(request["query"], keep_blank_values=True))
        assert_request_documented(request["method"], template, query, request["body"])
        seen.add(f"{request['method']} {template}")
    called = {key for key, e in extract()["endpoints"].items() if e["called_by"] != APPS}
    assert called <= seen, f"not exercised: {sorted(called - seen)}"


def test_a_pinned_version_is_what_every_request_names(simulator):
    exercise(simulator, OLD)

    sent = simulator.control.github_requests()
    assert sent
    assert {request["api_version"] for request in sent} == {OLD}


def call(simulator: Any, method: str, path: str, version: str | None, **kwargs: Any):
    headers = {"Authorization": "Bearer ghp_personal", "Accept": JSON}
    if version is not None:
        headers["X-GitHub-Api-Version"] = version
    headers.update(kwargs.pop("headers", {}))
    return requests.request(method, simulator.url + path, headers=headers, timeout=10, **kwargs)


@pytest.mark.parametrize("asked", ["2021-01-01", "v3", "2026-03-11"])
def test_a_version_github_does_not_support_is_refused_in_its_words(simulator, asked):
    refused = call(simulator, "GET", f"/repos/{REPO}", asked)

    assert refused.status_code == 400
    assert refused.json()["message"] == (
        f'The version you specified in the "X-GitHub-API-Version" request header, "{asked}", '
        "is not a supported version. The following versions are currently supported: "
        '"2026-03-10" (most recent), "2022-11-28".'
    )
    assert "X-GitHub-Api-Version-Selected" not in refused.headers


def test_a_bad_token_is_refused_before_the_version_and_graphql_never_reads_it(simulator):
    bad = call(
        simulator,
        "GET",
        f"/repos/{REPO}",
        "1999-01-01",
        headers={"Authorization": "Bearer ghs_nope"},
    )
    assert bad.status_code == 401

    query = {"query": "{ viewer { login } }"}
    graphql = call(simulator, "POST", "/graphql", "1999-01-01", json=query)
    assert graphql.status_code != 400


@pytest.mark.parametrize(
    ("name", "version", "selected"),
    [
        ("no header: GitHub's default", None, OLD),
        ("2022-11-28 asked for", OLD, OLD),
        ("2026-03-10 asked for", "2026-03-10", "2026-03-10"),
    ],
)
def test_answers_are_shaped_as_the_version_asked_for(simulator, name, version, selected):
    simulator.control.seed_pull(REPO, SHA, BASE, ["a.md"], assignees=["mona"])
    old = selected == OLD

    issue = call(simulator, "GET", f"/repos/{REPO}/issues/1", version)
    pull = call(simulator, "GET", f"/repos/{REPO}/pulls/1", version)
    pulls = call(simulator, "GET", f"/repos/{REPO}/pulls", version)
    repository = call(simulator, "GET", f"/repos/{REPO}", version)
    made = call(
        simulator, "POST", f"/repos/{REPO}/issues", version, json={"title": "T", "assignee": "mona"}
    )

    for answer in (issue, pull, pulls, repository, made):
        assert answer.headers["X-GitHub-Api-Version-Selected"] == selected, name
    assert ("assignee" in issue.json()) is old, name
    assert ("merged_at" in issue.json()["pull_request"]) is old, name  # not merged: null
    assert ("merge_commit_sha" in pull.json()) is old, name
    assert ("assignee" in pulls.json()[0]) is old, name
    assert ("has_downloads" in pull.json()["head"]["repo"]) is old, name
    assert ("has_downloads" in repository.json()) is old, name
    assert [a["login"] for a in made.json()["assignees"]] == (["mona"] if old else []), name
    assert [a["login"] for a in issue.json()["assignees"]] == ["mona"], name
    if not old:  # the extract is 2026-03-10's
        documented_json(issue, "GET", "/repos/{owner}/{repo}/issues/{issue_number}")
        documented_json(pull, "GET", "/repos/{owner}/{repo}/pulls/{pull_number}")
        documented_json(repository, "GET", "/repos/{owner}/{repo}")
        documented_json(made, "POST", "/repos/{owner}/{repo}/issues")


def test_the_installation_tokens_repositories_are_shaped_too(simulator):
    app = simulator.control.register_github_app()
    installation = simulator.control.install_github_app(app["id"], OWNER, repositories=[REPO])
    credentials = AppCredentials.from_pem(app["client_id"], app["private_key"])
    jwt = app_jwt(credentials, datetime.now(UTC))
    path = f"/app/installations/{installation['id']}/access_tokens"

    for version, old in ((OLD, True), (API_VERSION, False)):
        minted = call(simulator, "POST", path, version, headers={"Authorization": f"Bearer {jwt}"})
        assert minted.status_code == 201, minted.text
        assert ("has_downloads" in minted.json()["repositories"][0]) is old, version
