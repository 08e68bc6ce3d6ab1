"""The simulator's batch life cycle in process, on a fake clock: PENDING, RUNNING, terminal."""

from __future__ import annotations

from typing import Any

from local.simulator.app import create_app
from local.simulator.engine import Settings, Simulator
from shared.clock import FakeClock

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
