"""The simulated GitHub holds together per repository: what one call writes, the next
lists; a seeded issue and a REST one are the same object in one number sequence; a route
not simulated answers 501 naming it; a test's stub answers first until a reset; the
request log keeps what each GitHub request sent."""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import Any

import requests

from shared.github.app import AppCredentials, app_jwt

REPO = "octo/docs"
API = f"/repos/{REPO}"
SHA = "6dcb09b5b57875f334f61aebed695e2e4193db5e"


def call(simulator: Any, method: str, path: str, **kwargs: Any) -> requests.Response:
    headers = {"Authorization": "Bearer ghp_personal", "Accept": "application/vnd.github+json"}
    return requests.request(method, simulator.url + path, headers=headers, timeout=10, **kwargs)


def test_a_label_added_is_listed_and_created_in_the_repository(simulator):
    number = simulator.control.seed_issue(REPO, labels=["bug"])["number"]

    call(simulator, "POST", f"{API}/issues/{number}/labels", json={"labels": ["needs review"]})

    listed = call(simulator, "GET", f"{API}/issues/{number}/labels").json()
    assert [(lb["name"], lb["color"]) for lb in listed] == [
        ("bug", "ededed"),
        ("needs review", "ededed"),
    ]
    filtered = call(simulator, "GET", f"{API}/issues", params={"labels": "needs review"}).json()
    assert [i["number"] for i in filtered] == [number]


def test_seeded_and_created_issues_share_one_sequence_with_pull_requests(simulator):
    first = simulator.control.seed_issue(REPO, title="Seeded")
    pull = simulator.control.seed_pull(REPO, SHA, "1" * 40, ["a.md"])
    made = call(simulator, "POST", f"{API}/issues", json={"title": "Made"}).json()

    assert [first["number"], pull["number"], made["number"]] == [1, 2, 3]
    assert made["id"] > first["id"]
    assert call(simulator, "GET", f"{API}/issues/1").json() == first
    assert (
        call(simulator, "GET", f"{API}/issues/2")
        .json()["pull_request"]["url"]
        .endswith(f"{API}/pulls/2")
    )
    assert call(simulator, "GET", f"{API}/pulls/1").status_code == 404  # an issue, not a pull
    assert [i["number"] for i in call(simulator, "GET", f"{API}/issues").json()] == [3, 2, 1]
    other = simulator.control.seed_issue("octo/other")
    assert other["number"] == 1  # a sequence per repository


def test_an_issue_updated_keeps_its_number_and_reports_the_change(simulator):
    number = simulator.control.seed_issue(REPO, title="Old", labels=["a", "b"])["number"]

    changed = call(
        simulator,
        "PATCH",
        f"{API}/issues/{number}",
        json={"title": "New", "state": "closed", "labels": ["c"], "assignees": ["mona"]},
    ).json()

    got = call(simulator, "GET", f"{API}/issues/{number}").json()
    assert got == changed
    assert (got["title"], got["state"], got["state_reason"]) == ("New", "closed", "completed")
    assert [lb["name"] for lb in got["labels"]] == ["c"]
    assert got["assignee"]["login"] == "mona"
    assert call(simulator, "GET", f"{API}/issues").json() == []  # open ones only, by default
    assert len(call(simulator, "GET", f"{API}/issues", params={"state": "closed"}).json()) == 1
    assert call(simulator, "GET", API).json()["open_issues_count"] == 0


def test_comments_are_listed_in_order_and_pages_link_on(simulator):
    number = simulator.control.seed_issue(REPO)["number"]
    simulator.control.seed_issue_comment(REPO, number, "first", user="mona")
    call(simulator, "POST", f"{API}/issues/{number}/comments", json={"body": "second"})

    page = call(simulator, "GET", f"{API}/issues/{number}/comments", params={"per_page": 1})
    everything = call(simulator, "GET", f"{API}/issues/{number}/comments").json()

    assert [c["body"] for c in everything] == ["first", "second"]
    assert [c["user"]["login"] for c in everything] == ["mona", "hookledger-bot"]
    assert "next" in page.links and len(page.json()) == 1
    assert call(simulator, "GET", f"{API}/issues/{number}").json()["comments"] == 2


def test_a_reaction_repeated_is_the_same_one(simulator):
    number = simulator.control.seed_issue(REPO)["number"]
    path = f"{API}/issues/{number}/reactions"

    first = call(simulator, "POST", path, json={"content": "rocket"})
    again = call(simulator, "POST", path, json={"content": "rocket"})

    assert (first.status_code, again.status_code) == (201, 200)
    assert first.json()["id"] == again.json()["id"]
    assert call(simulator, "GET", f"{API}/issues/{number}").json()["reactions"]["rocket"] == 1


def test_a_file_put_is_served_by_the_contents_and_trees_routes(simulator):
    written = call(
        simulator,
        "PUT",
        f"{API}/contents/docs/new.md",
        json={"message": "Add", "content": base64.b64encode(b"# New\n").decode()},
    ).json()

    by_default = call(simulator, "GET", f"{API}/contents/docs/new.md").json()
    at_commit = call(
        simulator,
        "GET",
        f"{API}/contents/docs/new.md",
        params={"ref": written["commit"]["sha"]},
    )
    tree = call(simulator, "GET", f"{API}/git/trees/main", params={"recursive": "1"}).json()

    assert base64.b64decode(by_default["content"]) == b"# New\n"
    assert by_default["sha"] == written["content"]["sha"]
    assert at_commit.status_code == 200
    assert "docs/new.md" in {entry["path"] for entry in tree["tree"]}


def test_a_route_not_simulated_answers_501_naming_the_operation(simulator):
    number = simulator.control.seed_issue(REPO)["number"]

    locked = call(simulator, "PUT", f"{API}/issues/{number}/lock")
    unknown = call(simulator, "GET", "/orgs/octo/nothing-of-github")

    assert locked.status_code == 501
    assert "issues/lock" in locked.json()["message"]
    assert "PUT /repos/{owner}/{repo}/issues/{issue_number}/lock" in locked.json()["message"]
    assert unknown.status_code == 501
    assert "GET /orgs/octo/nothing-of-github" in unknown.json()["message"]
    assert call(simulator, "GET", f"{API}/issues/999").status_code == 404  # a simulated route


def test_a_stub_answers_first_for_its_times_and_a_reset_clears_it(simulator):
    number = simulator.control.seed_issue(REPO)["number"]
    simulator.control.stub_github(
        "GET", "/repos/{owner}/{repo}/issues/{n}", status=503, body={"message": "down"}, times=1
    )
    simulator.control.stub_github(
        "PUT", f"{API}/issues/{number}/lock", status=204, headers={"X-Stubbed": "yes"}
    )

    stubbed = call(simulator, "GET", f"{API}/issues/{number}")
    after = call(simulator, "GET", f"{API}/issues/{number}")
    lock = call(simulator, "PUT", f"{API}/issues/{number}/lock")

    assert (stubbed.status_code, stubbed.json()) == (503, {"message": "down"})
    assert after.status_code == 200
    assert (lock.status_code, lock.headers["X-Stubbed"], lock.content) == (204, "yes", b"")
    assert [s["used"] for s in simulator.control.github_stubs()] == [1, 1]
    simulator.control.reset()
    assert simulator.control.github_stubs() == []
    assert call(simulator, "PUT", f"{API}/issues/{number}/lock").status_code == 501


def test_github_errors_still_fail_a_request_before_a_stub(simulator):
    simulator.control.stub_github("GET", API, body={"stubbed": True})
    simulator.control.github_errors(status=502, count=1)

    assert call(simulator, "GET", API).status_code == 502
    assert call(simulator, "GET", API).json() == {"stubbed": True}


def installation_token(simulator: Any) -> tuple[int, str]:
    """(installation id, a token of it) of an App installed on `octo`."""
    app = simulator.control.register_github_app()
    installation = simulator.control.install_github_app(app["id"], "octo")["id"]
    credentials = AppCredentials.from_pem(app["client_id"], app["private_key"])
    minted = requests.post(
        f"{simulator.url}/app/installations/{installation}/access_tokens",
        headers={"Authorization": f"Bearer {app_jwt(credentials, datetime.now(UTC))}"},
        timeout=10,
    )
    return installation, minted.json()["token"]


def test_the_request_log_keeps_bodies_and_credentials(simulator):
    installation, token = installation_token(simulator)
    number = simulator.control.seed_issue(REPO)["number"]
    call(simulator, "POST", f"{API}/issues/{number}/labels", json=["bug"])
    requests.post(
        f"{simulator.url}{API}/issues/{number}/comments",
        data=b"not json",
        headers={"Authorization": f"token {token}"},
        timeout=10,
    )

    posts = simulator.control.github_requests(method="POST", path_prefix=f"{API}/issues/")
    minting = simulator.control.github_requests(path_prefix="/app/")

    assert [(r["path"], r["body"], r["auth"], r["installation_id"]) for r in posts] == [
        (f"{API}/issues/{number}/labels", ["bug"], "token", None),
        (f"{API}/issues/{number}/comments", None, "installation", installation),
    ]
    assert [r["auth"] for r in minting] == ["app"]
    assert simulator.control.requests_log()[-2] == {  # the general log keeps its shape
        "method": "POST",
        "path": f"{API}/issues/{number}/labels",
        "query": "",
    }
