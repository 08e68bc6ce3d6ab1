"""The simulator's Gemini quotas (`/_sim/quotas`) seen through the real google-genai client
and hookledger's Gemini gateway: a create beyond the concurrent-batch quota is
`GeminiRateLimited` with its delay and quota id, and requests over the inline limit go as
an uploaded file."""

from __future__ import annotations

from typing import Any

import pytest
import requests
from google.genai import errors

import shared.gemini.client as gemini_client
from local.simulator.gemini import BATCH_QUOTA_ID
from shared.gemini import GeminiGateway, GeminiRateLimited, GeminiRejected, make_client
from tests.integration.test_simulator import create_batch

MODEL = "models/gemini-2.5-flash"


@pytest.fixture
def gateway(simulator: Any) -> GeminiGateway:
    return GeminiGateway(make_client("sim-key", simulator.url, timeout_s=10, attempts=3))


def reviews(count: int, size: int) -> list[tuple[str, str]]:
    return [(f"docs/{i:03}.md", f"# file {i}\n" + "x" * size) for i in range(count)]


def uploads(simulator: Any) -> int:
    """How many Files API upload requests the simulator has seen."""
    return sum(1 for r in simulator.control.requests_log() if r["path"].startswith("/upload/"))


def test_the_sdk_sees_gemini_s_429_beyond_the_quota_and_a_slot_again_once_one_ends(
    simulator: Any,
) -> None:
    client = simulator.genai()
    simulator.control.set_quotas(gemini_batches_in_flight=1)
    first = create_batch(client, "a.md")

    with pytest.raises(errors.ClientError) as caught:
        create_batch(client, "b.md")

    assert caught.value.code == 429 and caught.value.status == "RESOURCE_EXHAUSTED"
    simulator.control.complete(first.name, "succeeded", webhook="drop")
    assert create_batch(client, "c.md").name
    state = simulator.control.quotas()
    assert state["in_flight"] == {"gemini_batches": 1}
    assert state["refused"]["gemini_batches_in_flight"] == 1


def test_the_gateway_maps_the_quota_429_to_rate_limited_with_its_delay_and_quota_id(
    simulator: Any, gateway: GeminiGateway
) -> None:
    simulator.control.set_quotas(gemini_batches_in_flight=2, gemini_batch_retry_delay_s=7)
    for n in range(2):
        gateway.create_batch(MODEL, reviews(1, 10), f"hookledger:quota-{n}")

    with pytest.raises(GeminiRateLimited) as caught:
        gateway.create_batch(MODEL, reviews(1, 10), "hookledger:quota-2")

    limited = caught.value
    assert limited.retry_after_s == 7.0 and limited.defer_s == 7.0
    assert limited.quota_ids == (BATCH_QUOTA_ID,)
    assert "hookledger:quota-2" in str(limited)  # the message names the batch
    # One attempt: the SDK never retries a 429 itself (shared/gemini/client.py).
    assert simulator.control.quotas()["refused"]["gemini_batches_in_flight"] == 1
    assert len(simulator.control.batches()) == 2


def test_requests_over_the_inline_limit_go_as_a_file_and_inline_they_are_refused(
    simulator: Any, gateway: GeminiGateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Gemini's limit lowered to 100 KB, and the gateway's threshold under it (as 20 MB is
    # under 20 MiB; its estimate counts a 64 KB envelope): 3 requests of 40 KB cannot go
    # inline, one of 1 KB can.
    simulator.control.set_quotas(gemini_inline_request_bytes=100_000)
    monkeypatch.setattr(gemini_client, "MAX_INLINE_BYTES", 99_000)
    big = reviews(3, 40_000)

    name = gateway.create_batch(MODEL, big, "hookledger:big")

    [batch] = simulator.control.batches()
    assert batch["name"] == name and len(batch["requests"]) == 3
    assert uploads(simulator) >= 1, "the requests went as an uploaded file"
    before = uploads(simulator)
    assert gateway.create_batch(MODEL, reviews(1, 1_000), "hookledger:small")
    assert uploads(simulator) == before, "a small batch still goes inline"

    monkeypatch.setattr(gemini_client, "MAX_INLINE_BYTES", 20_000_000)  # never switches
    with pytest.raises(GeminiRejected) as caught:
        gateway.create_batch(MODEL, big, "hookledger:big-inline")

    assert "payload size exceeds the limit: 100000 bytes" in str(caught.value)
    assert "hookledger:big-inline" in str(caught.value)
    assert simulator.control.quotas()["refused"]["gemini_inline_request_bytes"] == 1
    assert len(simulator.control.batches()) == 2


def test_bad_quota_settings_raise_naming_the_key_and_change_nothing(simulator: Any) -> None:
    before = simulator.control.quotas()

    with pytest.raises(requests.HTTPError) as caught:
        simulator.control.set_quotas(gemini_batches_in_flight=-1)

    assert caught.value.response.status_code == 400
    assert "gemini_batches_in_flight" in caught.value.response.text
    assert simulator.control.quotas() == before
