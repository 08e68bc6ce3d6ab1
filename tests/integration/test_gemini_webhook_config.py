"""Per-job webhooks (`webhook_config`): what hookledger's batches carry, and how the
simulator echoes it, as the Webhooks guide describes dynamic webhooks."""

from __future__ import annotations

import json
from typing import Any

from standardwebhooks import Webhook

from apps.review.kind import review_tag
from shared.gemini import HOOKLEDGER_ID, GeminiGateway, make_client

MODEL = "models/gemini-2.5-flash"


def gateway(simulator: Any, webhook_uris: tuple[str, ...] = ()) -> GeminiGateway:
    client = make_client("sim-key", simulator.url, timeout_s=10, attempts=1)
    return GeminiGateway(client, webhook_uris=webhook_uris)


def stored_config(simulator: Any, name: str) -> dict[str, Any]:
    [batch] = [b for b in simulator.control.batches() if b["name"] == name]
    return dict(batch["webhook_config"])


def events(simulator: Any, count: int) -> list[tuple[str, dict[str, Any]]]:
    """(path, verified body) of the first `count` events the receiver got."""
    verifier = Webhook(simulator.webhook_secret)
    return [
        (r.path, verifier.verify(r.body, r.headers))
        for r in simulator.receiver.wait_for(count)[:count]
    ]


def test_every_batch_carries_its_tag_as_user_metadata_and_no_uris_unless_configured(
    simulator: Any,
) -> None:
    tag = review_tag("o/r", "a" * 40)
    name = gateway(simulator).create_batch(MODEL, [("docs/a.md", "text")], display_name=tag)

    assert stored_config(simulator, name) == {"uris": [], "user_metadata": {HOOKLEDGER_ID: tag}}
    simulator.control.complete(name, "succeeded")
    [(path, body)] = events(simulator, 1)
    assert path == "/gemini"  # no per-job URI: the project's webhook gets it
    assert body["type"] == "batch.succeeded"
    assert body["data"]["user_metadata"] == {HOOKLEDGER_ID: tag}


def test_configured_uris_route_the_jobs_events_to_them_with_the_metadata(simulator: Any) -> None:
    job_uri = simulator.receiver.url.replace("/gemini", "/job-route")
    large = [(f"f{i}.md", "x" * 1000) for i in range(3)]
    name = gateway(simulator, (job_uri,)).create_batch(MODEL, large, display_name="t:1")

    assert stored_config(simulator, name) == {
        "uris": [job_uri],
        "user_metadata": {HOOKLEDGER_ID: "t:1"},
    }
    simulator.control.complete(name, "failed")
    [(path, body)] = events(simulator, 1)
    assert path == "/job-route"
    assert body["type"] == "batch.failed" and "error_code" in body["data"]
    assert body["data"]["user_metadata"] == {HOOKLEDGER_ID: "t:1"}


def test_the_metadata_is_in_every_event_of_the_job_and_only_of_that_job(simulator: Any) -> None:
    gemini = gateway(simulator)
    ours = gemini.create_batch(MODEL, [("a.md", "x")], display_name="hookledger:t:1")
    simulator.control.complete(ours, "succeeded", webhook="duplicate")
    simulator.control.complete(ours, "succeeded")  # a redelivery
    video = "models/veo-3.0-generate-001/operations/v1"
    simulator.control.create_operation(
        video, webhook_config={"user_metadata": {HOOKLEDGER_ID: "hookledger:video:1"}}
    )
    simulator.control.complete(video, "succeeded")
    simulator.control.create_operation("interactions/plain")
    simulator.control.complete("interactions/plain", "succeeded")

    bodies = [body for _path, body in events(simulator, 5)]
    by_type = sorted((b["type"], json.dumps(b["data"].get("user_metadata"))) for b in bodies)
    assert by_type == [
        ("batch.succeeded", json.dumps({HOOKLEDGER_ID: "hookledger:t:1"})),
        ("batch.succeeded", json.dumps({HOOKLEDGER_ID: "hookledger:t:1"})),
        ("batch.succeeded", json.dumps({HOOKLEDGER_ID: "hookledger:t:1"})),
        ("interaction.completed", "null"),
        ("video.generated", json.dumps({HOOKLEDGER_ID: "hookledger:video:1"})),
    ]
