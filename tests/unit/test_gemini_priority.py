"""`GeminiGateway.create_batch(priority=)`: Gemini's `batch.priority` sent through the real
google-genai client (a recording transport stands in for Gemini), a priority Gemini refuses
dropped rather than failing the create, a bad one refused before anything is sent."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import pytest

from shared.gemini import GeminiGateway, GeminiRejected
from shared.logs import JsonFormatter
from tests.unit.test_gemini_raw_contract import recording_transport

UNKNOWN_FIELD = (
    "Invalid JSON payload received. Unknown name \"priority\" at 'batch': Cannot find field."
)
REQUESTS = [("docs/a.md", "review this")]


class Sent:
    """The create bodies the transport saw, in order."""

    def __init__(self, recorded: list[tuple[str, dict[str, Any]]]) -> None:
        self._recorded = recorded

    def priorities(self) -> list[str | None]:
        return [body["batch"].get("priority") for _url, body in self._recorded]


def gateway(
    answer: Callable[[dict[str, Any]], tuple[int, dict[str, Any]]],
) -> tuple[GeminiGateway, Sent]:
    client, recorded = recording_transport(answer)
    return GeminiGateway(client), Sent(recorded)


def pending(_body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    return 200, {"name": "batches/b1", "metadata": {"state": "BATCH_STATE_PENDING"}}


def refusing_the_field(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    if "priority" in body["batch"]:
        error = {"code": 400, "message": UNKNOWN_FIELD, "status": "INVALID_ARGUMENT"}
        return 400, {"error": error}
    return pending(body)


def test_a_prioritised_create_sends_it_once() -> None:
    gemini, sent = gateway(pending)

    assert gemini.create_batch("models/m", REQUESTS, "hookledger:x:1", priority=100) == "batches/b1"
    assert sent.priorities() == ["100"]


def test_a_priority_gemini_does_not_know_is_dropped_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    gemini, sent = gateway(refusing_the_field)
    caplog.set_level(logging.WARNING, logger="hookledger")

    name = gemini.create_batch("models/m", REQUESTS, "hookledger:x:1", priority=100)

    assert name == "batches/b1"
    assert sent.priorities() == ["100", None]
    [warned] = [r for r in caplog.records if "priority" in r.getMessage()]
    assert warned.levelno == logging.WARNING
    assert json.loads(JsonFormatter().format(warned))["priority"] == 100


def test_any_other_refusal_of_a_prioritised_create_is_raised_as_it_was() -> None:
    def refusing_a_request(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        message = "* BatchGenerateContentRequest.batch.input_config.requests.requests[0]: bad"
        return 400, {"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}

    gemini, sent = gateway(refusing_a_request)

    with pytest.raises(GeminiRejected) as caught:
        gemini.create_batch("models/m", REQUESTS, "hookledger:x:1", priority=100)
    assert caught.value.request_indices == (0,)
    assert sent.priorities() == ["100"]  # not sent again


def test_a_background_create_is_never_sent_twice() -> None:
    gemini, sent = gateway(refusing_the_field)

    assert gemini.create_batch("models/m", REQUESTS, "hookledger:x:1") == "batches/b1"
    assert sent.priorities() == [None]


@pytest.mark.parametrize("bad", [True, 0.5, "9", 2**63], ids=["bool", "float", "text", "int64+1"])
def test_a_bad_priority_is_refused_before_anything_is_sent(bad: Any) -> None:
    gemini, sent = gateway(pending)

    with pytest.raises(ValueError, match="whole number"):
        gemini.create_batch("models/m", REQUESTS, "hookledger:x:1", priority=bad)
    assert sent.priorities() == []
