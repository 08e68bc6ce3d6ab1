"""The Gemini + GitHub simulator, driven by the real google-genai client and plain HTTP."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import pytest
import requests
from google.genai import errors, types
from standardwebhooks import Webhook

from local.processes import free_port
from local.simulator.client import SimulatorClient, start_simulator
from tests.waiting import wait_until

MODEL = "gemini-2.5-flash"


def batch_name(data_id: str) -> str:
    """A webhook's `data.id` as a full name: the simulator sends full and bare ids in turn."""
    return data_id if "/" in data_id else f"batches/{data_id}"


def inline(path: str, text: str) -> dict[str, Any]:
    return {"contents": [{"parts": [{"text": text}], "role": "user"}], "metadata": {"path": path}}


def create_batch(client: Any, *paths: str, display_name: str = "review-test", **config: Any) -> Any:
    src = [inline(path, f"# {path}\nSome text of {path}.") for path in paths or ("a.md", "b.md")]
    return client.batches.create(
        model=MODEL, src=src, config={"display_name": display_name, **config}
    )


def raw_get(simulator: Any, name: str) -> requests.Response:
    return requests.get(f"{simulator.url}/v1beta/{name}", timeout=10)


# --- batches through the real SDK ----------------------------------------------------


def test_batch_is_created_pending_then_succeeds_with_one_row_per_request(simulator: Any) -> None:
    client = simulator.genai()
    batch = create_batch(client, "docs/a.md", "docs/b.md", display_name="hookledger:abc")

    assert batch.name.startswith("batches/")
    assert batch.state == types.JobState.JOB_STATE_PENDING
    fetched = client.batches.get(name=batch.name)
    assert fetched.state == types.JobState.JOB_STATE_PENDING
    assert fetched.display_name == "hookledger:abc"
    assert fetched.dest is None

    simulator.control.complete(batch.name, "succeeded")

    done = client.batches.get(name=batch.name)
    assert done.state == types.JobState.JOB_STATE_SUCCEEDED
    assert done.display_name == "hookledger:abc"
    rows = done.dest.inlined_responses
    assert [row.metadata for row in rows] == [{"path": "docs/a.md"}, {"path": "docs/b.md"}]
    for row, path in zip(rows, ("docs/a.md", "docs/b.md"), strict=True):
        assert row.error is None
        assert path in row.response.text
    assert raw_get(simulator, batch.name).json()["done"] is True


def test_review_text_is_deterministic(simulator: Any) -> None:
    client = simulator.genai()
    first, second = create_batch(client, "x.md"), create_batch(client, "x.md")
    for batch in (first, second):
        simulator.control.complete(batch.name, "succeeded", webhook="drop")
    texts = [
        client.batches.get(name=b.name).dest.inlined_responses[0].response.text
        for b in (first, second)
    ]
    assert texts[0] == texts[1]


def test_list_iterates_every_page_newest_first(simulator: Any) -> None:
    client = simulator.genai()
    names = [create_batch(client, f"{i}.md").name for i in range(5)]

    listed = [b.name for b in client.batches.list(config={"page_size": 2})]

    assert listed == list(reversed(names))
    first_page = requests.get(f"{simulator.url}/v1beta/batches?pageSize=2", timeout=10).json()
    assert len(first_page["operations"]) == 2
    assert first_page["nextPageToken"]


def test_cancel_is_asynchronous_ends_cancelled_and_refuses_a_second_time(
    simulator: Any,
) -> None:
    # Gemini's cancel answers before the batch ends: the old simulator cancelled at once.
    client = simulator.genai()
    batch = create_batch(client)

    client.batches.cancel(name=batch.name)

    received = simulator.receiver.wait_for(1)
    assert json.loads(received[0].body)["type"] == "batch.cancelled"
    assert client.batches.get(name=batch.name).state == types.JobState.JOB_STATE_CANCELLED
    with pytest.raises(errors.ClientError) as caught:
        client.batches.cancel(name=batch.name)
    assert caught.value.code == 400


def test_delete_removes_the_batch(simulator: Any) -> None:
    client = simulator.genai()
    batch = create_batch(client)

    client.batches.delete(name=batch.name)

    with pytest.raises(errors.ClientError) as caught:
        client.batches.get(name=batch.name)
    assert caught.value.code == 404


def test_unknown_batch_is_404_in_the_gemini_error_shape(simulator: Any) -> None:
    response = raw_get(simulator, "batches/doesnotexist")

    assert response.status_code == 404
    assert response.json() == {
        "error": {
            "code": 404,
            "message": "Batch batches/doesnotexist not found.",
            "status": "NOT_FOUND",
        }
    }
    client = simulator.genai()  # kept in a variable: a dropped Client closes its transport
    with pytest.raises(errors.ClientError):
        client.batches.get(name="batches/doesnotexist")


def test_failed_batch_carries_its_error_in_the_raw_json(simulator: Any) -> None:
    client = simulator.genai()
    batch = create_batch(client)

    simulator.control.complete(batch.name, "failed", error={"code": 3, "message": "bad input"})

    assert client.batches.get(name=batch.name).state == types.JobState.JOB_STATE_FAILED
    body = raw_get(simulator, batch.name).json()
    assert body["done"] is True
    assert body["error"] == {"code": 3, "message": "bad input"}
    assert body["metadata"]["state"] == "BATCH_STATE_FAILED"


def test_succeeded_batch_can_have_failed_rows(simulator: Any) -> None:
    client = simulator.genai()
    batch = create_batch(client, "ok.md", "bad.md")

    simulator.control.complete(
        batch.name, "succeeded", rows=[{"index": 1, "error": {"code": 13, "message": "row boom"}}]
    )

    rows = client.batches.get(name=batch.name).dest.inlined_responses
    assert rows[0].error is None and "ok.md" in rows[0].response.text
    assert rows[1].response is None
    assert (rows[1].error.code, rows[1].error.message) == (13, "row boom")
    assert rows[1].metadata == {"path": "bad.md"}


def test_a_partially_succeeded_batch_reads_as_the_sdks_partial_state(simulator: Any) -> None:
    from shared.gemini import GeminiGateway

    client = simulator.genai()
    batch = create_batch(client, "ok.md", "lost.md")

    simulator.control.complete(batch.name, "partially_succeeded", webhook="drop")

    status = GeminiGateway(client).fetch(batch.name)
    assert (status.terminal_status, status.partial) == ("succeeded", True)
    assert [row.error is None for row in status.rows] == [True, False]


def test_completing_again_with_another_state_is_a_conflict(simulator: Any) -> None:
    batch = create_batch(simulator.genai())
    simulator.control.complete(batch.name, "succeeded", webhook="drop")

    with pytest.raises(requests.HTTPError) as caught:
        simulator.control.complete(batch.name, "failed")

    assert caught.value.response.status_code == 409


# --- completion webhooks -----------------------------------------------------------------


def test_completion_webhook_is_signed_per_standard_webhooks(simulator: Any) -> None:
    batch = create_batch(simulator.genai())

    simulator.control.complete(batch.name, "succeeded")

    (received,) = simulator.receiver.wait_for(1)
    assert received.path == "/gemini"
    payload = Webhook(simulator.webhook_secret).verify(received.body, received.headers)
    assert payload["type"] == "batch.succeeded"
    assert payload["version"] == "v1"
    assert payload["data"]["id"] == batch.name
    assert payload["timestamp"].endswith("Z")
    assert received.headers["webhook-signature"].startswith("v1,")
    with pytest.raises(Exception, match="signature"):
        Webhook("whsec_" + base64.b64encode(b"another-secret").decode()).verify(
            received.body, received.headers
        )


@pytest.mark.parametrize("state", ["failed", "expired"])
def test_webhook_type_follows_the_terminal_state(simulator: Any, state: str) -> None:
    batch = create_batch(simulator.genai())

    simulator.control.complete(batch.name, state)

    (received,) = simulator.receiver.wait_for(1)
    assert json.loads(received.body)["type"] == f"batch.{state}"


def test_drop_sends_nothing(simulator: Any) -> None:
    client = simulator.genai()
    dropped, sent = create_batch(client), create_batch(client)

    simulator.control.complete(dropped.name, "succeeded", webhook="drop")
    simulator.control.complete(sent.name, "succeeded", webhook="send")

    simulator.receiver.wait_for(1)
    ids = [json.loads(r.body)["data"]["id"] for r in simulator.receiver.snapshot()]
    assert ids == [sent.name]
    assert simulator.control.deliveries(dropped.name) == []
    assert client.batches.get(name=dropped.name).state == types.JobState.JOB_STATE_SUCCEEDED


def test_duplicate_sends_two_identical_deliveries(simulator: Any) -> None:
    batch = create_batch(simulator.genai())

    simulator.control.complete(batch.name, "succeeded", webhook="duplicate")

    first, second = simulator.receiver.wait_for(2)
    assert first.body == second.body
    for header in ("webhook-id", "webhook-timestamp", "webhook-signature"):
        assert first.headers[header] == second.headers[header]
    Webhook(simulator.webhook_secret).verify(second.body, second.headers)


def test_failed_delivery_is_retried_and_every_attempt_recorded(simulator: Any) -> None:
    simulator.receiver.respond_with([500, 503])
    batch = create_batch(simulator.genai())

    simulator.control.complete(batch.name, "succeeded")

    received = simulator.receiver.wait_for(3)
    assert len({r.headers["webhook-id"] for r in received}) == 1
    attempts = wait_until(
        lambda: (found := simulator.control.deliveries(batch.name)) and found[-1]["ok"] and found,
        what="a successful attempt",
    )
    assert [(a["attempt"], a["status"], a["ok"]) for a in attempts] == [
        (1, 500, False),
        (2, 503, False),
        (3, 200, True),
    ]


def test_dynamic_webhook_uris_replace_the_static_target(simulator: Any) -> None:
    uri = simulator.receiver.url.replace("/gemini", "/dynamic")
    config = {"webhook_config": {"uris": [uri], "user_metadata": {"job": "42"}}}
    batch = create_batch(simulator.genai(), **config)

    simulator.control.complete(batch.name, "succeeded")

    (received,) = simulator.receiver.wait_for(1)
    assert received.path == "/dynamic"
    payload = Webhook(simulator.webhook_secret).verify(received.body, received.headers)
    assert payload["data"] == {"id": batch.name, "user_metadata": {"job": "42"}}


# --- fault injection ----------------------------------------------------------------------


@pytest.mark.slow
def test_faults_fail_about_the_configured_share_of_gets_with_503(simulator: Any) -> None:
    client = simulator.genai()
    batch = create_batch(client)
    simulator.control.set_faults(0.3, status=503, seed=7)

    failures = 0
    for _ in range(100):
        try:
            client.batches.get(name=batch.name)
        except errors.APIError as exc:
            assert isinstance(exc, errors.ServerError)
            assert exc.code == 503
            failures += 1

    assert 15 <= failures <= 45
    simulator.control.set_faults(0.0)
    # A batch turns RUNNING some seconds after creation: either is "not done yet".
    assert client.batches.get(name=batch.name).state in (
        types.JobState.JOB_STATE_PENDING,
        types.JobState.JOB_STATE_RUNNING,
    )


def test_faults_are_deterministic_for_a_seed(simulator: Any) -> None:
    batch = create_batch(simulator.genai())

    def pattern() -> list[int]:
        simulator.control.set_faults(0.5, status=500, seed=11)
        return [raw_get(simulator, batch.name).status_code for _ in range(20)]

    first = pattern()
    assert first == pattern()
    assert set(first) == {200, 500}


# --- the webhooks API ---------------------------------------------------------------------


def test_webhooks_api_create_list_get_rotate_delete(simulator: Any) -> None:
    client = simulator.genai()
    uri = simulator.receiver.url.replace("/gemini", "/registered")

    created = client.webhooks.create(
        name="ledger", subscribed_events=["batch.succeeded", "batch.failed"], uri=uri
    )

    assert created.id and created.state == "enabled"
    old_secret = created.new_signing_secret
    assert old_secret.startswith("whsec_")
    assert [w.id for w in client.webhooks.list().webhooks] == [created.id]
    fetched = client.webhooks.get(created.id)
    assert fetched.new_signing_secret is None
    assert fetched.signing_secrets[0].truncated_secret == old_secret[-4:]

    new_secret = client.webhooks.rotate_signing_secret(created.id).secret
    assert new_secret.startswith("whsec_") and new_secret != old_secret

    batch = create_batch(client)
    simulator.control.complete(batch.name, "succeeded")
    received = simulator.receiver.wait_for(2)
    registered = next(r for r in received if r.path == "/registered")
    # During a rotation both secrets sign, so either one verifies.
    for secret in (old_secret, new_secret):
        assert Webhook(secret).verify(registered.body, registered.headers)["data"]["id"] == (
            batch.name
        )

    client.webhooks.delete(created.id)
    assert not client.webhooks.list().webhooks
    # The webhooks API raises the NextGen client's own error tree; it carries `status_code`.
    with pytest.raises(Exception, match="not found") as caught:
        client.webhooks.get(created.id)
    assert caught.value.status_code == 404


def test_registered_webhook_gets_only_subscribed_events(simulator: Any) -> None:
    client = simulator.genai()
    uri = simulator.receiver.url.replace("/gemini", "/failures-only")
    client.webhooks.create(subscribed_events=["batch.failed"], uri=uri)
    ok, bad = create_batch(client), create_batch(client)

    simulator.control.complete(ok.name, "succeeded")
    simulator.control.complete(bad.name, "failed")

    received = simulator.receiver.wait_for(3)
    to_registered = [
        batch_name(json.loads(r.body)["data"]["id"]) for r in received if r.path == "/failures-only"
    ]
    assert to_registered == [bad.name]


def test_webhook_is_disabled_after_repeated_failed_deliveries(simulator: Any) -> None:
    client = simulator.genai()
    dead = f"http://127.0.0.1:{free_port()}/nobody"
    webhook = client.webhooks.create(subscribed_events=["batch.succeeded"], uri=dead)

    for _ in range(3):
        batch = create_batch(client)
        simulator.control.complete(batch.name, "succeeded")
        wait_until(
            lambda name=batch.name: (
                len([a for a in simulator.control.deliveries(name) if a["target"] == dead]) == 4
            ),
            what="four attempts at the dead webhook",
        )

    state = wait_until(
        lambda: (s := client.webhooks.get(webhook.id).state) != "enabled" and s,
        what="the webhook to be disabled",
    )
    assert state == "disabled_due_to_failed_deliveries"


def test_webhooks_api_rejects_an_unknown_event(simulator: Any) -> None:
    response = requests.post(
        f"{simulator.url}/v1beta/webhooks",
        json={"uri": "http://127.0.0.1:1/x", "subscribed_events": ["batch.exploded"]},
        timeout=10,
    )
    assert response.status_code == 400
    assert "batch.exploded" in response.json()["error"]["message"]


# --- other long-running operations --------------------------------------------------------


def test_video_operation_is_polled_through_operations_get(simulator: Any) -> None:
    client = simulator.genai()
    name = "models/veo-2.0-generate-001/operations/op123"
    simulator.control.create_operation(name)
    operation = types.GenerateVideosOperation(name=name)

    assert not client.operations.get(operation).done

    video = {"generateVideoResponse": {"generatedSamples": [{"video": {"uri": "files/v1"}}]}}
    simulator.control.complete(name, "succeeded", response=video)

    done = client.operations.get(operation)
    assert done.done is True
    assert done.response.generated_videos[0].video.uri == "files/v1"
    (received,) = simulator.receiver.wait_for(1)
    assert json.loads(received.body)["type"] == "video.generated"


@pytest.mark.parametrize(
    ("status", "waits"),
    [
        ("requires_action", "tool result"),
        ("requires_continuation", "continuation"),
        ("idle", "new turn"),
    ],
)
def test_a_waiting_interaction_reads_as_waiting_through_the_sdk(
    simulator: Any, status: str, waits: str
) -> None:
    from shared.gemini import GeminiGateway

    client = simulator.genai()
    name = f"interactions/int-{status}"
    simulator.control.create_operation(name)

    simulator.control.set_interaction_status(name, status, webhook="drop")

    read = GeminiGateway(client).fetch(name)
    assert read.terminal_status is None and waits in (read.waits_for or ""), status


def test_an_incomplete_interaction_reads_its_output_through_the_sdk(simulator: Any) -> None:
    from shared.gemini import GeminiGateway

    client = simulator.genai()
    name = "interactions/int-incomplete"
    simulator.control.create_operation(name)

    simulator.control.set_interaction_status(name, "incomplete", output_text="partial answer")

    read = GeminiGateway(client).fetch(name)
    assert (read.terminal_status, read.incomplete) == ("succeeded", True)
    assert [(row.key, row.text) for row in read.rows] == [(name, "partial answer")]
    (received,) = simulator.receiver.wait_for(1)
    assert json.loads(received.body)["type"] == "interaction.completed"


def test_file_search_operation_reports_its_error(simulator: Any) -> None:
    name = "fileSearchStores/store1/operations/imp1"
    simulator.control.create_operation(name)

    simulator.control.complete(name, "failed", error={"code": 9, "message": "not ready"})

    body = raw_get(simulator, name).json()
    assert body == {"name": name, "done": True, "error": {"code": 9, "message": "not ready"}}


# --- GitHub Contents API -------------------------------------------------------------------


def test_github_contents_round_trip(simulator: Any) -> None:
    data = ("# Title\n\n" + "Ünïcode line that is long enough to wrap. " * 5 + "\n").encode()
    sha = "a" * 40
    blob = simulator.control.put_file("octo", "docs", "guide/intro.md", sha, data)

    response = requests.get(
        f"{simulator.url}/repos/octo/docs/contents/guide/intro.md", params={"ref": sha}, timeout=10
    )

    assert response.status_code == 200
    body = response.json()
    assert (body["type"], body["encoding"], body["path"], body["name"]) == (
        "file",
        "base64",
        "guide/intro.md",
        "intro.md",
    )
    assert body["size"] == len(data)
    assert base64.b64decode(body["content"]) == data
    lines = body["content"].split("\n")
    assert lines[-1] == "" and all(len(line) == 60 for line in lines[:-2])
    expected_blob = hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()
    assert body["sha"] == blob == expected_blob


def test_github_blob_sha_matches_git(simulator: Any) -> None:
    # `printf 'hello world\n' | git hash-object --stdin`
    blob = simulator.control.put_file("o", "r", "h.md", "main", b"hello world\n")
    assert blob == "3b18e512dba79e4c8300dd08aeb37f8e728b8dad"


def test_github_missing_file_or_ref_is_404(simulator: Any) -> None:
    simulator.control.put_file("o", "r", "a.md", "sha1", b"x")

    for path, ref in (("b.md", "sha1"), ("a.md", "sha2")):
        response = requests.get(
            f"{simulator.url}/repos/o/r/contents/{path}", params={"ref": ref}, timeout=10
        )
        assert response.status_code == 404
        assert response.json()["message"] == "Not Found"


def test_github_fault_answers_502_for_the_next_n_gets(simulator: Any) -> None:
    simulator.control.put_file("o", "r", "a.md", "s", b"x")
    simulator.control.github_fault("a.md", status=502, count=2)

    statuses = [
        requests.get(
            f"{simulator.url}/repos/o/r/contents/a.md", params={"ref": "s"}, timeout=10
        ).status_code
        for _ in range(3)
    ]

    assert statuses == [502, 502, 200]


def test_github_latency_holds_every_contents_get_until_set_back(simulator: Any) -> None:
    simulator.control.put_file("o", "r", "a.md", "s", b"x")
    url = f"{simulator.url}/repos/o/r/contents/a.md"
    simulator.control.github_latency(3000)

    with pytest.raises(requests.ReadTimeout):
        requests.get(url, params={"ref": "s"}, timeout=0.5)
    simulator.control.github_latency(0)

    assert requests.get(url, params={"ref": "s"}, timeout=10).status_code == 200
    for bad in (-1, 60_001, "1s"):
        answer = requests.post(
            f"{simulator.url}/_sim/github/latency", json={"latency_ms": bad}, timeout=10
        )
        assert answer.status_code == 400 and "latency_ms" in answer.text, bad


# --- GitHub commit comments ----------------------------------------------------------------

COMMIT = "6dcb09b5b57875f334f61aebed695e2e4193db5e"


def comments_url(simulator: Any, sha: str = COMMIT) -> str:
    return f"{simulator.url}/repos/octo/docs/commits/{sha}/comments"


def test_a_posted_comment_has_githubs_shape_and_is_listed(simulator: Any) -> None:
    created = requests.post(comments_url(simulator), json={"body": "Nice."}, timeout=10)

    assert created.status_code == 201
    comment = created.json()
    assert created.headers["Location"] == comment["url"]
    assert comment["url"] == f"{simulator.url}/repos/octo/docs/comments/{comment['id']}"
    assert comment["html_url"] == (
        f"https://github.com/octo/docs/commit/{COMMIT}#commitcomment-{comment['id']}"
    )
    assert (comment["body"], comment["commit_id"], comment["path"]) == ("Nice.", COMMIT, None)
    assert comment["user"]["login"] and comment["created_at"].endswith("Z")
    assert comment["created_at"] == comment["updated_at"]
    listed = requests.get(comments_url(simulator), timeout=10)
    assert listed.json() == [comment] and "Link" not in listed.headers
    assert requests.get(comments_url(simulator, "a" * 40), timeout=10).json() == []


def test_comment_pages_carry_link_headers(simulator: Any) -> None:
    ids = [
        requests.post(comments_url(simulator), json={"body": f"c{i}"}, timeout=10).json()["id"]
        for i in range(5)
    ]

    first = requests.get(comments_url(simulator), params={"per_page": 2}, timeout=10)
    middle = requests.get(first.links["next"]["url"], timeout=10)
    last = requests.get(first.links["last"]["url"], timeout=10)

    assert [c["id"] for c in first.json()] == ids[:2]
    assert [c["id"] for c in middle.json()] == ids[2:4]
    assert [c["id"] for c in last.json()] == ids[4:]
    assert set(first.links) == {"next", "last"}
    assert set(middle.links) == {"prev", "first", "next", "last"}
    assert set(last.links) == {"prev", "first"}


@pytest.mark.parametrize(
    ("name", "sha", "body"),
    [
        ("no body", COMMIT, {}),
        ("empty body", COMMIT, {"body": ""}),
        ("not a sha", "main", {"body": "x"}),
    ],
)
def test_a_bad_comment_post_is_422_and_stores_nothing(
    simulator: Any, name: str, sha: str, body: Any
) -> None:
    response = requests.post(comments_url(simulator, sha), json=body, timeout=10)

    assert response.status_code == 422, name
    assert response.json()["message"], name
    assert simulator.control.github_comments()["comments"] == [], name


def test_comment_post_fault_after_create_stores_then_answers_the_error(simulator: Any) -> None:
    simulator.control.set_comment_post_fault(2, 502, after_create=True)

    statuses = [
        requests.post(comments_url(simulator), json={"body": f"c{i}"}, timeout=10).status_code
        for i in range(3)
    ]

    assert statuses == [502, 502, 201]
    summary = simulator.control.github_comments()
    assert [c["body"] for c in summary["comments"]] == ["c0", "c1", "c2"]
    assert summary["commits"] == [
        {"repo": "octo/docs", "sha": COMMIT, "posts": 3, "comments": 3, "deletes": 0}
    ]


def test_comment_post_fault_before_create_stores_nothing(simulator: Any) -> None:
    simulator.control.set_comment_post_fault(1, 503)

    failed = requests.post(comments_url(simulator), json={"body": "lost"}, timeout=10)

    assert failed.status_code == 503
    summary = simulator.control.github_comments()
    assert summary["commits"] == [
        {"repo": "octo/docs", "sha": COMMIT, "posts": 1, "comments": 0, "deletes": 0}
    ]


def test_a_comment_fault_alone_leaves_the_gemini_faults_in_place(simulator: Any) -> None:
    batch = create_batch(simulator.genai())
    simulator.control.set_faults(1.0, status=500)

    simulator.control.set_comment_post_fault(1)

    assert raw_get(simulator, batch.name).status_code == 500


def test_the_request_log_names_every_api_request_but_no_control_call(simulator: Any) -> None:
    simulator.control.put_file("o", "r", "a.md", "s", b"x")
    requests.get(f"{simulator.url}/repos/o/r/contents/a.md", params={"ref": "s"}, timeout=10)
    batch = create_batch(simulator.genai())

    log = simulator.control.requests_log()

    assert log[0] == {"method": "GET", "path": "/repos/o/r/contents/a.md", "query": "ref=s"}
    assert log[1]["method"] == "POST" and log[1]["path"].endswith(":batchGenerateContent")
    assert len(log) == 2
    raw_get(simulator, batch.name)
    assert simulator.control.requests_log()[-1]["path"] == f"/v1beta/{batch.name}"
    simulator.control.reset()
    assert simulator.control.requests_log() == []


# --- bad input to the control API ----------------------------------------------------------


BAD_CONTROL_CALLS = [
    ("not json", "POST", "/_sim/operations/batches/{id}:complete", b"{nope", 400),
    ("unknown state", "POST", "/_sim/operations/batches/{id}:complete", {"state": "done"}, 400),
    (
        "unknown webhook mode",
        "POST",
        "/_sim/operations/batches/{id}:complete",
        {"state": "succeeded", "webhook": "maybe"},
        400,
    ),
    (
        "row index out of range",
        "POST",
        "/_sim/operations/batches/{id}:complete",
        {"state": "succeeded", "rows": [{"index": 9, "error": {"code": 1, "message": "x"}}]},
        400,
    ),
    (
        "error without a code",
        "POST",
        "/_sim/operations/batches/{id}:complete",
        {"state": "failed", "error": {"message": "x"}},
        400,
    ),
    ("unknown batch", "POST", "/_sim/operations/batches/nope:complete", {"state": "failed"}, 404),
    ("rate above one", "POST", "/_sim/faults", {"get_error_rate": 2}, 400),
    ("status not an error", "POST", "/_sim/faults", {"get_error_rate": 0.1, "status": 200}, 400),
    ("body is a list", "POST", "/_sim/faults", [1, 2], 400),
    ("fault without a path", "POST", "/_sim/github/faults", {"status": 502}, 400),
    ("comment fault not an object", "POST", "/_sim/faults", {"github_comment_post": 1}, 400),
    (
        "comment fault status 200",
        "POST",
        "/_sim/faults",
        {"github_comment_post": {"fail": 1, "status": 200}},
        400,
    ),
    (
        "comment fault after_create not a bool",
        "POST",
        "/_sim/faults",
        {"github_comment_post": {"fail": 1, "after_create": "yes"}},
        400,
    ),
    ("operation name", "POST", "/_sim/operations", {"name": "batches/x"}, 400),
]


@pytest.mark.parametrize(
    ("name", "method", "path", "body", "status"),
    BAD_CONTROL_CALLS,
    ids=[case[0] for case in BAD_CONTROL_CALLS],
)
def test_bad_control_input_is_a_clear_json_error(
    simulator: Any, name: str, method: str, path: str, body: Any, status: int
) -> None:
    batch = create_batch(simulator.genai())
    url = simulator.url + path.format(id=batch.name.removeprefix("batches/"))
    kwargs = {"data": body} if isinstance(body, bytes) else {"json": body}

    response = requests.request(method, url, timeout=10, **kwargs)

    assert response.status_code == status, name
    error = response.json()["error"]
    assert error["code"] == status and error["message"], name
    assert raw_get(simulator, batch.name).json()["metadata"]["state"] == "BATCH_STATE_PENDING"


# --- the process itself --------------------------------------------------------------------


@pytest.mark.slow
def test_auto_complete_and_clean_exit_on_sigterm() -> None:
    port = free_port()
    service = start_simulator(port, extra_args=["--auto-complete-s", "0.2"])
    try:
        from google import genai

        url = f"http://127.0.0.1:{port}"
        options = types.HttpOptions(base_url=url, api_version="v1beta", timeout=10_000)
        client = genai.Client(api_key="sim", http_options=options)
        batch = create_batch(client)
        wait_until(
            lambda: client.batches.get(name=batch.name).state == types.JobState.JOB_STATE_SUCCEEDED,
            what="the batch to complete on its own",
        )
        assert SimulatorClient(url).deliveries() == []  # no webhook URL configured
    finally:
        service.stop()
    assert service.process.returncode == 0
    assert "simulator stopped" in service.output()
