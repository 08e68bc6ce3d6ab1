"""The simulator's webhook mode: `data.id` as a full name, a bare id or each in turn; the
documented per-event fields; and a mode that never sends cancel events."""

from __future__ import annotations

import json
from typing import Any

import pytest
import requests

from tests.integration.test_simulator import create_batch
from tests.waiting import wait_until


def set_mode(simulator: Any, **mode: Any) -> requests.Response:
    return requests.post(f"{simulator.url}/_sim/webhook-mode", json=mode, timeout=5)


def test_bare_and_mixed_ids_and_the_failed_events_error_fields(simulator: Any) -> None:
    assert set_mode(simulator, data_id="mixed").json() == {
        "data_id": "mixed",
        "cancel_events": True,
    }
    client = simulator.genai()
    first, second = create_batch(client), create_batch(client)

    simulator.control.complete(first.name, "failed", error={"code": 3, "message": "bad input"})
    (received,) = simulator.receiver.wait_for(1)
    simulator.control.complete(second.name, "succeeded")
    received = simulator.receiver.wait_for(2)

    bodies = [json.loads(r.body) for r in received]
    assert [b["data"]["id"] for b in bodies] == [first.name, second.name.removeprefix("batches/")]
    failed = bodies[0]["data"]
    assert (failed["error_code"], failed["error_message"]) == (3, "bad input")
    assert "error_code" not in bodies[1]["data"]


def test_with_cancel_events_off_a_cancel_sends_nothing(simulator: Any) -> None:
    set_mode(simulator, cancel_events=False)
    client = simulator.genai()
    batch = create_batch(client)

    client.batches.cancel(name=batch.name)
    # Cancel is asynchronous, as in Gemini: wait for it to take effect.
    wait_until(
        lambda: client.batches.get(name=batch.name).state.value == "JOB_STATE_CANCELLED",
        10,
        "the cancel to take effect",
        every=0.05,
    )
    # A later event still goes out, and is the first the receiver sees.
    other = create_batch(client)
    simulator.control.complete(other.name, "succeeded")
    (received,) = simulator.receiver.wait_for(1)
    assert json.loads(received.body)["type"] == "batch.succeeded"
    assert simulator.control.deliveries(batch.name) == []


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"data_id": "short"}, "data_id"),
        ({"cancel_events": "no"}, "cancel_events"),
        ({"x": 1}, "x"),
    ],
)
def test_a_bad_webhook_mode_is_a_400_naming_the_field(simulator: Any, body, field) -> None:
    answer = set_mode(simulator, **body)
    assert answer.status_code == 400 and field in answer.text
    assert requests.get(f"{simulator.url}/_sim/webhook-mode", timeout=5).json() == {
        "data_id": "mixed",
        "cancel_events": True,
    }
