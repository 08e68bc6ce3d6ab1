"""The local Cloud Tasks emulator as a process, and a loopback HTTP target to dispatch to.

Fixtures:
- `cloudtasks_emulator`: faithful timing (time scale 1.0), one per session; sets
  CLOUD_TASKS_EMULATOR_HOST for the session.
- `cloudtasks_emulator_fast`: time scale 0.01 (backoff, dispatch deadline and rate
  waits run 100x faster), one per session.
- `cloudtasks_emulator_factory`: `start(time_scale=..., tombstone_s=...)` for anything else;
  everything it started is stopped by PID at session end.
- `task_target`: a `TargetServer` recording each request, answering as programmed.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from local.cloudtasks_emulator.launch import start_cloudtasks
from local.processes import Service, ServiceError, free_port

REPO = Path(__file__).resolve().parents[2]
FAST_TIME_SCALE = 0.01


@dataclass
class EmulatorHandle:
    host: str  # "127.0.0.1:PORT", for make_client / CLOUD_TASKS_EMULATOR_HOST
    jwks_url: str
    certs_url: str
    time_scale: float
    service: Service

    def output(self) -> str:
        return self.service.output()


def start_emulator(time_scale: float = 1.0, tombstone_s: float = 3600.0) -> EmulatorHandle:
    """Start `python -m local.cloudtasks_emulator` on free ports; raises `ServiceError`."""
    port, http_port = free_port(), free_port()
    service = start_cloudtasks(port, http_port, time_scale=time_scale, tombstone_s=tombstone_s)
    base = f"http://127.0.0.1:{http_port}"
    return EmulatorHandle(
        host=f"127.0.0.1:{port}",
        jwks_url=f"{base}/jwks.json",
        certs_url=f"{base}/certs",
        time_scale=time_scale,
        service=service,
    )


@pytest.fixture(scope="session")
def cloudtasks_emulator_factory() -> Iterator[Callable[..., EmulatorHandle]]:
    started: list[EmulatorHandle] = []

    def factory(time_scale: float = 1.0, tombstone_s: float = 3600.0) -> EmulatorHandle:
        try:
            handle = start_emulator(time_scale, tombstone_s)
        except ServiceError as exc:
            pytest.fail(str(exc), pytrace=False)
        started.append(handle)
        return handle

    yield factory
    for handle in started:
        handle.service.stop()


@pytest.fixture(scope="session")
def cloudtasks_emulator(
    cloudtasks_emulator_factory: Callable[..., EmulatorHandle],
) -> Iterator[EmulatorHandle]:
    handle = cloudtasks_emulator_factory(time_scale=1.0)
    previous = os.environ.get("CLOUD_TASKS_EMULATOR_HOST")
    os.environ["CLOUD_TASKS_EMULATOR_HOST"] = handle.host
    try:
        yield handle
    finally:
        if previous is None:
            os.environ.pop("CLOUD_TASKS_EMULATOR_HOST", None)
        else:
            os.environ["CLOUD_TASKS_EMULATOR_HOST"] = previous


@pytest.fixture(scope="session")
def cloudtasks_emulator_fast(
    cloudtasks_emulator_factory: Callable[..., EmulatorHandle],
) -> EmulatorHandle:
    return cloudtasks_emulator_factory(time_scale=FAST_TIME_SCALE)


# ---- the HTTP target ----------------------------------------------------------------------


@dataclass(frozen=True)
class ReceivedRequest:
    method: str
    path: str
    headers: dict[str, str]  # names lower-cased
    body: bytes
    at: float  # time.time() on arrival
    at_monotonic: float


@dataclass
class TargetServer:
    """Answers `status` after `delay_s`; `statuses` (if any) are used first, one per request."""

    url: str = ""
    status: int = 200
    delay_s: float = 0.0
    statuses: list[int] = field(default_factory=list)
    requests: list[ReceivedRequest] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0
    _cond: threading.Condition = field(default_factory=threading.Condition)
    _closing: threading.Event = field(default_factory=threading.Event)

    def respond(
        self, status: int = 200, *, delay_s: float = 0.0, statuses: Sequence[int] = ()
    ) -> None:
        with self._cond:
            self.status, self.delay_s, self.statuses = status, delay_s, list(statuses)

    def wait_for(self, count: int, timeout: float = 10.0) -> list[ReceivedRequest]:
        """The first `count` requests; fails the test if they do not all arrive in time."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self.requests) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    pytest.fail(
                        f"task target got {len(self.requests)} of {count} requests in {timeout} s",
                        pytrace=False,
                    )
                self._cond.wait(left)
            return list(self.requests[:count])

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else b""
        with self._cond:
            self.requests.append(
                ReceivedRequest(
                    method=handler.command,
                    path=handler.path,
                    headers={k.lower(): v for k, v in handler.headers.items()},
                    body=body,
                    at=time.time(),
                    at_monotonic=time.monotonic(),
                )
            )
            status = self.statuses.pop(0) if self.statuses else self.status
            delay = self.delay_s
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self._cond.notify_all()
        try:
            if delay:
                self._closing.wait(delay)
            handler.send_response(status)
            handler.send_header("Content-Length", "0")
            handler.end_headers()
        except OSError:
            pass  # the dispatcher gave up on us (dispatch deadline): expected
        finally:
            with self._cond:
                self.in_flight -= 1


@pytest.fixture
def task_target() -> Iterator[TargetServer]:
    target = TargetServer()

    class Handler(BaseHTTPRequestHandler):
        def _any(self) -> None:
            target._handle(self)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _any

        def log_message(self, format: str, *args: object) -> None:
            return

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    target.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, name="task-target", daemon=True)
    thread.start()
    try:
        yield target
    finally:
        target._closing.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)
