"""`hookledger webhooks register`: the API reference's events by default, and a refusal
of an event reported as one clean line."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import pytest

from shared.entrypoints import runtime
from shared.handlers.builtin import DOCUMENTED_EVENTS
from tests.integration.test_cli import cli, run, run_json  # noqa: F401 - `cli` is a fixture
from tests.plugins.loopback import QuietHandler, Serve
from tests.waiting import wait_until


@pytest.mark.slow
@pytest.mark.usefixtures("cli")
def test_register_defaults_to_the_events_the_api_reference_lists(capsys) -> None:
    registered = run_json(capsys, "webhooks", "register", "--uri", "https://hooks.example/g")
    assert registered["subscribed_events"] == list(DOCUMENTED_EVENTS)
    assert not any(event.endswith(".cancelled") for event in registered["subscribed_events"])


@pytest.fixture
def refusing_gemini(serve: Serve) -> Iterator[str]:
    """A loopback stand-in for the webhooks API that refuses every subscription with 400."""

    class Handler(QuietHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = json.dumps(
                {
                    "error": {
                        "code": 400,
                        "message": "Invalid value at 'subscribed_events[0]': batch.cancelled",
                        "status": "INVALID_ARGUMENT",
                    }
                }
            ).encode()
            self.send_response(400)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = serve(Handler)
    saved = dict(os.environ)
    os.environ.update(
        {
            "GEMINI_BASE_URL": server.url,
            "GEMINI_API_KEY": "k",
            "HTTP_TIMEOUT_S": "5",
        }
    )
    runtime.reset()
    try:
        yield server.url
    finally:
        os.environ.clear()
        os.environ.update(saved)
        runtime.reset()


def test_an_api_refusal_of_an_event_is_one_clean_line(refusing_gemini: str, capsys) -> None:
    code, out, err = run(
        capsys,
        "webhooks",
        "register",
        "--uri",
        "https://h.example/g",
        "--events",
        "batch.cancelled",
    )
    assert code != 0 and out == ""
    [line] = err.strip().splitlines()
    assert "Gemini refused the subscription to batch.cancelled" in line
    assert "Invalid value at 'subscribed_events[0]'" in line


# --------------------------------------------------------------------------- ping, update


def _register(capsys: Any, uri: str) -> str:
    registered = run_json(
        capsys, "webhooks", "register", "--uri", uri, "--events", "batch.succeeded"
    )
    return str(registered["id"])


@pytest.mark.usefixtures("cli")
def test_ping_has_gemini_send_a_signed_ping_to_the_webhook(simulator: Any, capsys) -> None:
    hook_id = _register(capsys, simulator.receiver.url)

    assert run_json(capsys, "webhooks", "ping", hook_id) == {"id": hook_id, "pinged": True}

    (received,) = simulator.receiver.wait_for(1)
    assert json.loads(received.body)["type"] == "webhook.ping"
    assert received.headers["webhook-signature"].startswith("v1,")
    code, out, err = run(capsys, "webhooks", "ping", hook_id)
    assert (code, err) == (
        0,
        "",
    ) and out.strip() == f"Gemini sent a ping event to webhook {hook_id}"


@pytest.mark.usefixtures("cli")
def test_update_enable_re_enables_a_webhook_disabled_after_failed_deliveries(
    simulator: Any, capsys
) -> None:
    hook_id = _register(capsys, simulator.receiver.url)
    simulator.receiver.respond_with([500] * 12)  # every attempt of 3 events fails
    for _ in range(3):
        run_json(capsys, "webhooks", "ping", hook_id)
    wait_until(
        lambda: run_json(capsys, "webhooks", "list")[0]["disabled_due_to_failed_deliveries"],
        what="Gemini disabling the webhook after failed deliveries",
    )
    _code, out, _ = run(capsys, "webhooks", "list")
    assert f"webhook {hook_id} is disabled_due_to_failed_deliveries" in out

    updated = run_json(capsys, "webhooks", "update", hook_id, "--enable")

    assert updated["state"] == "enabled" and updated["disabled_due_to_failed_deliveries"] is False
    assert updated["uri"] == simulator.receiver.url  # only the state was sent
    assert updated["subscribed_events"] == ["batch.succeeded"]
    assert run_json(capsys, "webhooks", "list")[0]["state"] == "enabled"


@pytest.mark.usefixtures("cli")
def test_update_moves_and_resubscribes_only_what_is_given(simulator: Any, capsys) -> None:
    hook_id = _register(capsys, "https://old.example/gemini")

    moved = run_json(capsys, "webhooks", "update", hook_id, "--uri", "https://new.example/g")
    assert (moved["uri"], moved["subscribed_events"]) == (
        "https://new.example/g",
        ["batch.succeeded"],
    )
    resubscribed = run_json(
        capsys, "webhooks", "update", hook_id, "--events", "batch.failed", "batch.expired"
    )
    assert resubscribed["subscribed_events"] == ["batch.failed", "batch.expired"]
    assert resubscribed["uri"] == "https://new.example/g" and resubscribed["state"] == "enabled"
    assert run_json(capsys, "webhooks", "update", hook_id, "--disable")["state"] == "disabled"


@pytest.mark.usefixtures("cli")
def test_ping_and_update_errors_are_one_line_naming_the_webhook(capsys) -> None:
    for argv in (("ping", "no-such-hook"), ("update", "no-such-hook", "--enable")):
        code, out, err = run(capsys, "webhooks", *argv)
        assert (code, out) == (1, "") and err.count("\n") == 1, argv
        assert "no-such-hook" in err and "404" in err, argv
    code, out, err = run(capsys, "webhooks", "update", "some-hook")
    assert (code, out) == (2, "") and "--enable, --disable, --uri or --events" in err
