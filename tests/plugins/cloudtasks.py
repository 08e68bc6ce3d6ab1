"""The local Cloud Tasks emulator as a process, and a loopback HTTP target to dispatch to.

Fixtures:
- `cloudtasks_emulator`: faithful timing (time scale 1.0), one per session; sets
  CLOUD_TASKS_EMULATOR_HOST for the session.
- `cloudtasks_emulator_fast`: time scale 0.01 (backoff, dispatch deadline and rate
  waits run 100x faster), one per session.
- `cloudtasks_emulator_manual`: faithful timing on a manual clock, one per session: its
  schedule times, backoff and tombstones move only on `handle.advance(seconds)`.
- `cloudtasks_emulator_factory`: `start(time_scale=..., tombstone_s=..., manual_clock=...,
  data_dir=...)` for anything else; everything it started is stopped by PID at session end.
  `restart_emulator(handle, rotate_signing_key=False)` starts a stopped one again on the
  same ports and data dir (optionally with a new signing key).
- `task_target`: a `TargetServer` recording each request, answering as programmed.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from local import loopback
from local.cloudtasks_emulator.launch import start_cloudtasks
from local.processes import Service, ServiceError, start_on_free_ports

REPO = Path(__file__).resolve().parents[2]
FAST_TIME_SCALE = 0.01


@dataclass
class EmulatorHandle:
    host: str  # "127.0.0.1:PORT", for make_client / CLOUD_TASKS_EMULATOR_HOST
    jwks_url: str
    certs_url: str
    time_scale: float
    service: Service
    clock_url: str = ""  # set when the emulator runs on a manual clock
    data_dir: Path | None = None
    ports: tuple[int, int] = (0, 0)  # (gRPC, HTTP)
    tombstone_s: float = 3600.0

    def kill(self) -> None:
        """SIGKILL the emulator (a crash: no clean-up of any kind) and reap it."""
        os.killpg(self.service.pid, signal.SIGKILL)
        self.service.process.wait(timeout=10)

    def output(self) -> str:
        return self.service.output()

    def advance(self, seconds: float) -> float:
        """Move a manual-clock emulator's clock forward; returns its new epoch time."""
        return self._clock("POST", "/advance", {"seconds": seconds})

    def now(self) -> float:
        """A manual-clock emulator's current epoch time."""
        return self._clock("GET", "", None)

    def _clock(self, method: str, path: str, document: dict[str, float] | None) -> float:
        assert self.clock_url, "this emulator runs on the wall clock (manual_clock=False)"
        body = json.dumps(document).encode() if document is not None else None
        request = urllib.request.Request(f"{self.clock_url}{path}", data=body, method=method)
        with urllib.request.urlopen(request, timeout=10) as response:
            return float(json.loads(response.read())["now"])


def start_emulator(
    time_scale: float = 1.0,
    tombstone_s: float = 3600.0,
    *,
    manual_clock: bool = False,
    data_dir: Path | None = None,
) -> EmulatorHandle:
    """Start `python -m local.cloudtasks_emulator` on free ports; raises `ServiceError`."""

    def start_on(port: int, http_port: int) -> Service:
        return start_cloudtasks(
            port,
            http_port,
            time_scale=time_scale,
            tombstone_s=tombstone_s,
            manual_clock=manual_clock,
            data_dir=data_dir,
        )

    service, (port, http_port) = start_on_free_ports(start_on, count=2)
    base = f"http://127.0.0.1:{http_port}"
    return EmulatorHandle(
        host=f"127.0.0.1:{port}",
        jwks_url=f"{base}/jwks.json",
        certs_url=f"{base}/certs",
        time_scale=time_scale,
        service=service,
        clock_url=f"{base}/_clock" if manual_clock else "",
        data_dir=data_dir,
        ports=(port, http_port),
        tombstone_s=tombstone_s,
    )


def restart_emulator(handle: EmulatorHandle, *, rotate_signing_key: bool = False) -> EmulatorHandle:
    """Start a stopped (or killed) emulator again: same ports, settings and data dir.

    `rotate_signing_key`: with a new signing key (the only one published) instead of the
    data dir's, keeping the queued tasks. The ports were free a moment ago (its own);
    raises `ServiceError` if something else took one meanwhile. The caller stops the
    returned handle's service."""
    assert not handle.service.alive(), "stop or kill the emulator before restarting it"
    port, http_port = handle.ports
    service = start_cloudtasks(
        port,
        http_port,
        time_scale=handle.time_scale,
        tombstone_s=handle.tombstone_s,
        manual_clock=bool(handle.clock_url),
        data_dir=handle.data_dir,
        rotate_signing_key=rotate_signing_key,
    )
    return replace(handle, service=service)


@pytest.fixture(scope="session")
def cloudtasks_emulator_factory() -> Iterator[Callable[..., EmulatorHandle]]:
    started: list[EmulatorHandle] = []

    def factory(
        time_scale: float = 1.0,
        tombstone_s: float = 3600.0,
        *,
        manual_clock: bool = False,
        data_dir: Path | None = None,
    ) -> EmulatorHandle:
        try:
            handle = start_emulator(
                time_scale, tombstone_s, manual_clock=manual_clock, data_dir=data_dir
            )
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


@pytest.fixture(scope="session")
def cloudtasks_emulator_manual(
    cloudtasks_emulator_factory: Callable[..., EmulatorHandle],
) -> EmulatorHandle:
    return cloudtasks_emulator_factory(time_scale=1.0, manual_clock=True)


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
    """Answers `status` after `delay_s`; `statuses` (if any) are used first, one per request.
    Every answer carries `answer_headers` (e.g. `Retry-After`).

    After `hold()`, every request waits (in flight) until `release()` or the fixture's end.
    """

    url: str = ""
    status: int = 200
    delay_s: float = 0.0
    statuses: list[int] = field(default_factory=list)
    answer_headers: dict[str, str] = field(default_factory=dict)
    requests: list[ReceivedRequest] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0
    _cond: threading.Condition = field(default_factory=threading.Condition)
    _closing: threading.Event = field(default_factory=threading.Event)
    _released: threading.Event = field(default_factory=threading.Event)

    def hold(self) -> None:
        self._released.clear()

    def release(self) -> None:
        self._released.set()

    def respond(
        self,
        status: int = 200,
        *,
        delay_s: float = 0.0,
        statuses: Sequence[int] = (),
        headers: Mapping[str, str] | None = None,
    ) -> None:
        with self._cond:
            self.status, self.delay_s, self.statuses = status, delay_s, list(statuses)
            self.answer_headers = dict(headers or {})

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
            answer_headers = dict(self.answer_headers)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self._cond.notify_all()
        try:
            while not self._released.wait(0.05) and not self._closing.is_set():
                pass  # held: in flight until the test releases it
            if delay:
                self._closing.wait(delay)
            handler.send_response(status)
            for name, value in answer_headers.items():
                handler.send_header(name, value)
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
    target.release()

    class Handler(loopback.QuietHandler):
        def _any(self) -> None:
            target._handle(self)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _any

    server = loopback.serve(Handler, name="task-target")
    target.url = server.url
    try:
        yield target
    finally:
        target._closing.set()
        target.release()
        server.close()
