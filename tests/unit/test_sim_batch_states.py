"""The simulator's batch life cycle in process, on a fake clock: PENDING, RUNNING, terminal."""

from __future__ import annotations

from typing import Any

from local.fakes import FakeClock
from local.simulator.app import create_app
from local.simulator.engine import Settings, Simulator

BODY = {
    "batch": {
        "displayName": "states",
        "inputConfig": {
            "requests": {
                "requests": [
                    {
                        "request": {"contents": [{"parts": [{"text": "hi"}]}]},
                        "metadata": {"key": "k"},
                    }
                ]
            }
        },
    }
}


def make(clock: FakeClock) -> Any:
    sim = Simulator(Settings(running_after_s=30.0), clock=clock)
    return sim, create_app(sim).test_client()


def state(client: Any, name: str) -> str:
    return str(client.get(f"/v1beta/{name}").get_json()["metadata"]["state"])


def test_a_batch_is_pending_then_running_then_terminal() -> None:
    clock = FakeClock()
    sim, client = make(clock)
    created = client.post("/v1beta/models/m:batchGenerateContent", json=BODY).get_json()
    name = created["name"]

    assert created["metadata"]["state"] == "BATCH_STATE_PENDING"
    clock.advance(29)
    assert state(client, name) == "BATCH_STATE_PENDING"
    clock.advance(1)
    assert state(client, name) == "BATCH_STATE_RUNNING"
    sim.complete_batch(name.removeprefix("batches/"), "succeeded", webhook="drop")
    assert state(client, name) == "BATCH_STATE_SUCCEEDED"


def test_a_create_body_over_20_mib_is_refused_before_it_is_read() -> None:
    _sim, client = make(FakeClock())
    oversized = b" " * (20 * 1024 * 1024 + 1)

    answer = client.post(
        "/v1beta/models/m:batchGenerateContent", data=oversized, content_type="application/json"
    )

    assert answer.status_code == 400
    assert answer.get_json()["error"]["status"] == "INVALID_ARGUMENT"
    assert "20971520 bytes" in answer.get_json()["error"]["message"]


def created_batch(client: Any) -> str:
    return str(client.post("/v1beta/models/m:batchGenerateContent", json=BODY).get_json()["name"])


def test_a_deleted_batch_answers_404() -> None:
    _sim, client = make(FakeClock())
    name = created_batch(client)

    assert client.delete(f"/v1beta/{name}").status_code == 200
    answer = client.get(f"/v1beta/{name}")

    assert answer.status_code == 404
    assert answer.get_json()["error"]["status"] == "NOT_FOUND"


def test_a_partially_succeeded_batch_reports_its_state_and_a_failed_row() -> None:
    _sim, client = make(FakeClock())
    name = created_batch(client)

    done = client.post(
        f"/_sim/operations/{name}:complete",
        json={"state": "partially_succeeded", "webhook": "drop"},
    )
    body = client.get(f"/v1beta/{name}").get_json()

    assert done.status_code == 200
    assert body["done"] is True
    assert body["metadata"]["state"] == "BATCH_STATE_PARTIALLY_SUCCEEDED"
    rows = body["metadata"]["output"]["inlinedResponses"]["inlinedResponses"]
    assert [("error" in row) for row in rows] == [True]
    assert body["metadata"]["batchStats"]["failedRequestCount"] == "1"


def interaction(client: Any, name: str) -> dict[str, Any]:
    return dict(client.get(f"/v1beta/{name}").get_json())


def test_an_interaction_waits_in_each_waiting_status_then_ends_incomplete_with_output() -> None:
    _sim, client = make(FakeClock())
    name = "interactions/i-wait"
    client.post("/_sim/operations", json={"name": name})

    for status in ("requires_action", "requires_continuation", "idle"):
        answer = client.post(
            f"/_sim/operations/{name}:status", json={"status": status, "webhook": "drop"}
        )
        assert answer.status_code == 200, status
        assert interaction(client, name)["status"] == status
    client.post(
        f"/_sim/operations/{name}:status",
        json={"status": "incomplete", "output_text": "half an answer", "webhook": "drop"},
    )

    body = interaction(client, name)
    assert body["status"] == "incomplete"
    assert body["steps"] == [
        {"type": "model_output", "content": [{"type": "text", "text": "half an answer"}]}
    ]
    refused = client.post(f"/_sim/operations/{name}:status", json={"status": "idle"})
    assert refused.status_code == 409  # an ended interaction stays ended


def test_an_unknown_interaction_status_is_refused_naming_the_choices() -> None:
    _sim, client = make(FakeClock())
    client.post("/_sim/operations", json={"name": "interactions/i-x"})

    answer = client.post("/_sim/operations/interactions/i-x:status", json={"status": "paused"})

    assert answer.status_code == 400
    assert "requires_continuation" in answer.get_json()["error"]["message"]
