"""The simulator's check runs, spoken to over HTTP as GitHub's API: what it refuses (422 with
GitHub's bodies), how it lists, and the "Re-run" webhook the ingress verifies."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import requests

from local.loopback import QuietHandler
from shared import handlers
from shared.config import LOCAL_ENVELOPE_KEY, LOCAL_GITHUB_SECRET
from shared.handlers import Done
from shared.handoff.envelope import EnvelopeSealer
from tests.integration.test_ingress import Harness, ingress_harness

REPO = "octo-org/handbook"
SHA = "6dcb09b5b57875f334f61aebed695e2e4193db5e"
OUTPUT = {"title": "Reviewing", "summary": "Running."}


def note(line: int, **changes: Any) -> dict[str, Any]:
    return {
        "path": "docs/a.md",
        "start_line": line,
        "end_line": line,
        "annotation_level": "warning",
        "message": f"finding {line}",
        **changes,
    }


def create(simulator: Any, **body: Any) -> requests.Response:
    fields = {"name": "hookledger review", "head_sha": SHA, "output": OUTPUT, **body}
    return requests.post(f"{simulator.url}/repos/{REPO}/check-runs", json=fields, timeout=10)


def update(simulator: Any, run_id: int, **body: Any) -> requests.Response:
    url = f"{simulator.url}/repos/{REPO}/check-runs/{run_id}"
    return requests.patch(url, json=body, timeout=10)


def get(simulator: Any, path: str, **params: Any) -> requests.Response:
    return requests.get(f"{simulator.url}/repos/{REPO}{path}", params=params, timeout=10)


REFUSED = [
    ("no name", {"name": None}, 'Invalid request.\n\n"name" wasn\'t supplied.'),
    ("no head_sha", {"head_sha": None}, 'Invalid request.\n\n"head_sha" wasn\'t supplied.'),
    ("a head_sha that is no commit", {"head_sha": "main"}, "No commit found for SHA: main"),
    ("an unknown status", {"status": "waiting"}, "For 'properties/status', 'waiting'"),
    ("stale is GitHub's", {"conclusion": "stale"}, "For 'properties/conclusion', 'stale'"),
    ("completed, no conclusion", {"status": "completed"}, '"conclusion" wasn\'t supplied.'),
    (
        "completed_at, no conclusion",
        {"completed_at": "2026-11-30T12:00:00Z"},
        '"conclusion" wasn\'t supplied.',
    ),
    ("an output without a title", {"output": {"summary": "s"}}, '"title" wasn\'t supplied.'),
    (
        "a summary over 65535",
        {"output": {"title": "t", "summary": "s" * 65536}},
        "only 65535 are allowed",
    ),
    (
        "51 annotations in one request",
        {"output": {**OUTPUT, "annotations": [note(n) for n in range(1, 52)]}},
        "Invalid request.\n\nNo more than 50 items are allowed; 51 were supplied.",
    ),
]


@pytest.mark.parametrize(("name", "body", "message"), REFUSED, ids=[c[0] for c in REFUSED])
def test_a_create_github_refuses_is_a_422_and_stores_nothing(
    simulator: Any, name: str, body: dict[str, Any], message: str
) -> None:
    answer = create(simulator, **body)

    assert answer.status_code == 422, name
    assert message in answer.json()["message"], name
    assert answer.json()["documentation_url"].startswith("https://docs.github.com/rest/checks")
    assert simulator.control.check_runs() == [], name


BAD_ANNOTATIONS = [
    ("an unknown level", note(1, annotation_level="error")),
    ("no message", note(1, message="")),
    ("no path", note(1, path=None)),
    ("line 0", note(0)),
    ("a 256-character title", note(1, title="t" * 256)),
    ("columns across lines", note(1, end_line=2, start_column=1, end_column=3)),
    ("raw_details not a string", note(1, raw_details=["details"])),
    ("raw_details over 64 KB", note(1, raw_details="é" * 40_000)),
]


@pytest.mark.parametrize(("name", "bad"), BAD_ANNOTATIONS, ids=[c[0] for c in BAD_ANNOTATIONS])
def test_a_bad_annotation_is_githubs_validation_failed(
    simulator: Any, name: str, bad: dict[str, Any]
) -> None:
    run_id = create(simulator).json()["id"]

    answer = update(simulator, run_id, output={"summary": "s", "annotations": [note(2), bad]})

    assert answer.status_code == 422, name
    assert answer.json()["message"] == "Validation Failed"
    assert answer.json()["errors"] == [
        {"resource": "CheckRun", "code": "invalid", "field": "annotations"}
    ]
    [run] = simulator.control.check_runs()
    assert run["annotations"] == [], name  # nothing of a refused request is kept


def test_51_annotations_in_an_update_are_refused_and_50_appended(simulator: Any) -> None:
    run_id = create(simulator, output={**OUTPUT, "annotations": [note(1)]}).json()["id"]

    too_many = update(simulator, run_id, output={"summary": "s", "annotations": [note(2)] * 51})
    fifty = update(simulator, run_id, output={"summary": "s", "annotations": [note(3)] * 50})

    assert too_many.status_code == 422
    assert "No more than 50 items are allowed; 51 were supplied." in too_many.json()["message"]
    assert (fifty.status_code, fifty.json()["output"]["annotations_count"]) == (200, 51)
    listed = get(simulator, f"/check-runs/{run_id}/annotations", per_page=100).json()
    assert [a["start_line"] for a in listed] == [1] + [3] * 50
    assert listed[0]["blob_href"].endswith(f"/blob/{SHA}/docs/a.md")


def test_annotations_are_listed_in_githubs_shape_with_their_raw_details_by_pages(
    simulator: Any,
) -> None:
    run_id = create(simulator).json()["id"]
    for batch in range(3):  # 150 annotations, each naming its request in raw_details
        marked = [note(50 * batch + n, raw_details=f"request {batch}") for n in range(1, 51)]
        update(simulator, run_id, output={"summary": "s", "annotations": marked})

    default = get(simulator, f"/check-runs/{run_id}/annotations")
    first = get(simulator, f"/check-runs/{run_id}/annotations", per_page=100)
    rest = requests.get(first.links["next"]["url"], timeout=10)

    assert len(default.json()) == 30  # GitHub's default page
    assert 'rel="last"' in first.headers["Link"] and "next" not in rest.links
    listed = first.json() + rest.json()
    assert [a["start_line"] for a in listed] == list(range(1, 151))  # in the order appended
    assert [a["raw_details"] for a in listed[49:51]] == ["request 0", "request 1"]
    assert set(listed[0]) == {
        "path",
        "start_line",
        "end_line",
        "start_column",
        "end_column",
        "annotation_level",
        "title",
        "message",
        "raw_details",
        "blob_href",
    }
    assert get(simulator, "/check-runs/999/annotations").status_code == 404


def test_a_conclusion_completes_the_run_and_in_progress_reopens_it(simulator: Any) -> None:
    run_id = create(simulator, status="in_progress").json()["id"]

    done = update(simulator, run_id, conclusion="failure").json()
    reopened = update(simulator, run_id, status="in_progress").json()

    assert (done["status"], done["conclusion"]) == ("completed", "failure")
    assert done["completed_at"] is not None
    assert (reopened["status"], reopened["conclusion"], reopened["completed_at"]) == (
        "in_progress",
        None,
        None,
    )


def test_check_run_answers_carry_githubs_rate_limit_headers(simulator: Any) -> None:
    answer = create(simulator)

    assert answer.status_code == 201
    assert {"x-ratelimit-limit", "x-ratelimit-remaining"} <= {k.lower() for k in answer.headers}


def test_an_unknown_run_is_404(simulator: Any) -> None:
    assert update(simulator, 999, conclusion="success").status_code == 404
    assert get(simulator, "/check-runs/999").status_code == 404


def test_runs_are_listed_per_commit_by_name_latest_or_all(simulator: Any) -> None:
    first = create(simulator, external_id="a").json()["id"]
    second = create(simulator, external_id="b").json()["id"]
    create(simulator, name="other check")
    create(simulator, head_sha="1" * 40)

    latest = get(simulator, f"/commits/{SHA}/check-runs", check_name="hookledger review").json()
    every = get(
        simulator, f"/commits/{SHA}/check-runs", check_name="hookledger review", filter="all"
    ).json()

    assert (latest["total_count"], [r["id"] for r in latest["check_runs"]]) == (1, [second])
    assert (every["total_count"], [r["id"] for r in every["check_runs"]]) == (2, [first, second])
    run = every["check_runs"][0]
    assert run["app"]["slug"] == "hookledger" and run["check_suite"]["id"]
    assert run["output"]["annotations_url"].endswith(f"/check-runs/{first}/annotations")


def test_pages_keep_the_query(simulator: Any) -> None:
    for n in range(3):
        create(simulator, external_id=str(n))

    page = get(
        simulator,
        f"/commits/{SHA}/check-runs",
        check_name="hookledger review",
        filter="all",
        per_page=2,
    )

    assert page.json()["total_count"] == 3 and len(page.json()["check_runs"]) == 2
    following = page.links["next"]["url"]
    assert "check_name=hookledger+review" in following and "filter=all" in following
    rest = requests.get(following, timeout=10).json()
    assert [r["external_id"] for r in rest["check_runs"]] == ["2"]


def test_the_inspection_call_filters_by_repo_and_commit(simulator: Any) -> None:
    create(simulator)
    requests.post(
        f"{simulator.url}/repos/octo-org/other/check-runs",
        json={"name": "x", "head_sha": SHA},
        timeout=10,
    )

    assert [r["repo"] for r in simulator.control.check_runs()] == [REPO, "octo-org/other"]
    assert [r["repo"] for r in simulator.control.check_runs(repo=REPO, sha=SHA)] == [REPO]
    assert simulator.control.check_runs(sha="0" * 40) == []


# --- "Re-run": the App's check_run webhook, verified by the real ingress -------------------


@contextmanager
def bridged_ingress(
    cloudtasks_emulator: Any, monkeypatch: Any, serve: Any, secrets: str
) -> Iterator[tuple[str, Harness]]:
    """The real ingress (GITHUB_WEBHOOK_SECRETS=`secrets`, a paused queue) behind a loopback
    URL the simulator can POST to, with a handler for github/check_run so that a verified
    delivery becomes a task; (its URL, its harness)."""
    env = {"GITHUB_WEBHOOK_SECRETS": secrets}
    with contextmanager(ingress_harness)(cloudtasks_emulator, monkeypatch, env) as harness:

        class Bridge(QuietHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                answer = harness.client.post(self.path, data=body, headers=dict(self.headers))
                self.send_response(answer.status_code)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(answer.data)))
                self.end_headers()
                self.wfile.write(answer.data)

        saved = handlers.snapshot()
        if handlers.lookup("github", "check_run") is None:
            handlers.handler("github", "check_run")(lambda event, ctx: Done("rerun"))
        try:
            yield serve(Bridge).url + "/github", harness
        finally:
            handlers.restore(saved)


def test_rerequest_sends_a_signed_check_run_rerequested_the_ingress_accepts(
    simulator: Any, cloudtasks_emulator: Any, monkeypatch: Any, serve: Any
) -> None:
    run_id = create(simulator, external_id="sub-1", conclusion="success").json()["id"]

    with bridged_ingress(cloudtasks_emulator, monkeypatch, serve, LOCAL_GITHUB_SECRET) as (
        url,
        harness,
    ):
        delivery = simulator.control.rerequest_check_run(
            run_id, url=url, installation_id=77, head_branch="main", sender="someone"
        )
        [task] = harness.tasks()

    assert (delivery["status"], delivery["ok"], delivery["event"]) == (202, True, "check_run")
    answer = json.loads(delivery["answer"])
    assert (answer["status"], answer["event"]) == ("accepted", "check_run")
    assert answer["delivery_id"] == delivery["delivery_id"]
    envelope = EnvelopeSealer([LOCAL_ENVELOPE_KEY]).open(task.http_request.body)
    assert (envelope.source, envelope.event) == ("github", "check_run")
    payload = json.loads(envelope.body)
    assert payload["action"] == "rerequested"
    check_run = payload["check_run"]
    assert (check_run["id"], check_run["head_sha"], check_run["external_id"]) == (
        run_id,
        SHA,
        "sub-1",
    )
    assert check_run["name"] == "hookledger review"
    assert check_run["check_suite"]["head_branch"] == "main"
    assert check_run["check_suite"]["head_sha"] == SHA
    assert payload["installation"]["id"] == 77
    assert payload["repository"]["full_name"] == REPO
    assert payload["sender"]["login"] == "someone"


def test_a_rerequest_signed_with_another_secret_is_refused_by_the_ingress(
    simulator: Any, cloudtasks_emulator: Any, monkeypatch: Any, serve: Any
) -> None:
    run_id = create(simulator).json()["id"]
    other = "not-the-simulators-secret-0123"

    with bridged_ingress(cloudtasks_emulator, monkeypatch, serve, other) as (url, harness):
        delivery = simulator.control.rerequest_check_run(run_id, url=url)
        tasks = harness.tasks()

    assert (delivery["status"], delivery["ok"]) == (401, False)
    assert tasks == []


def test_rerequest_of_an_unknown_run_or_without_a_url_is_refused(simulator: Any) -> None:
    with pytest.raises(requests.HTTPError, match="404"):
        simulator.control.rerequest_check_run(999, url="http://127.0.0.1:9/github")
    run_id = create(simulator).json()["id"]
    with pytest.raises(requests.HTTPError, match="github-webhook-url"):
        simulator.control.rerequest_check_run(run_id)
