"""`hookledger webhooks register`: the API reference's events by default, and a refusal
of an event reported as one clean line."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from shared import runtime
from shared.builtin_handlers import DOCUMENTED_EVENTS
from tests.integration.test_cli import cli, run, run_json  # noqa: F401 - `cli` is a fixture


@pytest.mark.slow
@pytest.mark.usefixtures("cli")
def test_register_defaults_to_the_events_the_api_reference_lists(capsys) -> None:
    registered = run_json(capsys, "webhooks", "register", "--uri", "https://hooks.example/g")
    assert registered["subscribed_events"] == list(DOCUMENTED_EVENTS)
    assert not any(event.endswith(".cancelled") for event in registered["subscribed_events"])


@pytest.fixture
def refusing_gemini() -> Iterator[str]:
    """A loopback stand-in for the webhooks API that refuses every subscription with 400."""

    class Handler(BaseHTTPRequestHandler):
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

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    saved = dict(os.environ)
    os.environ.update(
        {
            "GEMINI_BASE_URL": f"http://127.0.0.1:{server.server_port}",
            "GEMINI_API_KEY": "k",
            "HTTP_TIMEOUT_S": "5",
        }
    )
    runtime.reset()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        os.environ.clear()
        os.environ.update(saved)
        runtime.reset()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


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
