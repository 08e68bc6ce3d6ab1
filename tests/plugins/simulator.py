"""Fixtures for the local Gemini + GitHub simulator.

- `webhook_receiver`: a loopback HTTP server recording every request (session-wide,
  emptied per test); `respond_with([500, 200])` scripts its next answers.
- `simulator_service`: one `python -m local.simulator` for the session, its static
  webhook URL pointing at the receiver, fast retry backoff; stopped by PID.
- `simulator`: the same process reset before each test; has `.url`, `.control`
  (a `SimulatorClient`), `.webhook_secret`, `.receiver`, `.genai(timeout_ms=10_000)` (a
  real google-genai client pointed at it, no retries), `.github_comments()` (a real `CommentsClient`
  pointed at it, no backoff sleeps) and `.github_checks()` (a real `ChecksClient`, likewise).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from local import loopback
from local.processes import ServiceError, start_on_free_ports
from local.simulator.client import SimulatorClient, start_simulator
from shared.config import LOCAL_GEMINI_SECRET
from shared.github import CommentsClient
from shared.github.checks import ChecksClient


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class WebhookReceiver:
    """Records POSTs; answers each with the next scripted status (default 200)."""

    url: str = ""
    requests: list[Received] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def clear(self) -> None:
        with self.lock:
            self.requests.clear()
            self.statuses.clear()

    def respond_with(self, statuses: list[int]) -> None:
        with self.lock:
            self.statuses[:] = statuses

    def next_status(self) -> int:
        with self.lock:
            return self.statuses.pop(0) if self.statuses else 200

    def record(self, item: Received) -> None:
        with self.lock:
            self.requests.append(item)

    def wait_for(self, count: int, timeout: float = 10.0) -> list[Received]:
        """At least `count` requests, polling until `timeout`; fails the test otherwise."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.requests) >= count:
                    return list(self.requests)
            time.sleep(0.02)
        with self.lock:
            got = len(self.requests)
        pytest.fail(f"webhook receiver got {got} requests, expected {count}", pytrace=False)

    def snapshot(self) -> list[Received]:
        with self.lock:
            return list(self.requests)


@pytest.fixture(scope="session")
def webhook_receiver() -> Iterator[WebhookReceiver]:
    receiver = WebhookReceiver()

    class Handler(loopback.QuietHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length)
            receiver.record(
                Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
            )
            status = receiver.next_status()
            self.send_response(status)
            self.send_header("content-length", "0")
            self.end_headers()

    with loopback.serve(Handler, name="webhook-receiver") as server:
        receiver.url = f"{server.url}/gemini"
        yield receiver


@dataclass
class SimulatorHandle:
    url: str
    control: SimulatorClient
    webhook_secret: str
    receiver: WebhookReceiver
    pid: int

    def genai(self, timeout_ms: int = 10_000) -> Any:
        """A real google-genai client talking to the simulator (API version v1beta)."""
        from google import genai
        from google.genai import types

        options = types.HttpOptions(base_url=self.url, api_version="v1beta", timeout=timeout_ms)
        return genai.Client(api_key="sim", http_options=options)

    def github_comments(self, **kwargs: Any) -> CommentsClient:
        """A real `CommentsClient` talking to the simulator; `kwargs` override its settings."""
        settings: dict[str, Any] = {"timeout_s": 5.0, "attempts": 2, "sleep": lambda _s: None}
        return CommentsClient(self.url, "sim-token", **{**settings, **kwargs})

    def github_checks(self, **kwargs: Any) -> ChecksClient:
        """A real `ChecksClient` talking to the simulator; `kwargs` override its settings."""
        settings: dict[str, Any] = {"timeout_s": 5.0, "attempts": 2, "sleep": lambda _s: None}
        return ChecksClient(self.url, "sim-token", **{**settings, **kwargs})


@pytest.fixture(scope="session")
def simulator_service(webhook_receiver: WebhookReceiver) -> Iterator[SimulatorHandle]:
    def start_on(port: int) -> Any:
        return start_simulator(
            port,
            webhook_url=webhook_receiver.url,
            webhook_secret=LOCAL_GEMINI_SECRET,
            extra_args=["--webhook-backoff-s", "0.05", "--webhook-timeout-s", "2"],
        )

    try:  # a parallel run may take a free port before we bind it: start over on another
        service, (port,) = start_on_free_ports(start_on)
    except ServiceError as exc:
        pytest.fail(str(exc), pytrace=False)
    url = f"http://127.0.0.1:{port}"
    try:
        yield SimulatorHandle(
            url, SimulatorClient(url), LOCAL_GEMINI_SECRET, webhook_receiver, service.pid
        )
    finally:
        service.stop()


@pytest.fixture
def simulator(simulator_service: SimulatorHandle) -> SimulatorHandle:
    """The session's simulator, emptied (state, faults, files, deliveries) for this test."""
    simulator_service.control.reset()
    simulator_service.receiver.clear()
    return simulator_service
