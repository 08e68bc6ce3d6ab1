"""Start local services as child processes and stop them by PID, leaving nothing behind.

Used by the test fixtures and by `make run`. Each child runs in its own process group,
so stopping it also stops whatever it spawned (the Firestore emulator's wrapper
script starts a Java child).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar


class ServiceError(RuntimeError):
    """A local service could not be started; the message names it and shows its output."""


def free_port(host: str = "127.0.0.1") -> int:
    """A port on `host` that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


# What a child prints when another process took its port between `free_port()` and its bind.
_PORT_TAKEN = re.compile(
    r"address already in use|(cannot|failed to) bind|bindexception|errno 98", re.I
)
T = TypeVar("T")


def start_on_free_ports(
    start_on: Callable[..., T], *, count: int = 1, attempts: int = 3
) -> tuple[T, tuple[int, ...]]:
    """`start_on(*ports)` with `count` fresh free ports, again on new ports if one was taken.

    `free_port()` only says a port was free a moment ago: a parallel run (a second clone's
    `make test`) may bind it first. A `ServiceError` that does not look like a port clash,
    or the last attempt's, propagates. Returns the started service and its ports.
    """
    for attempt in range(1, attempts + 1):
        ports = tuple(free_port() for _ in range(count))
        try:
            return start_on(*ports), ports
        except ServiceError as exc:
            if attempt == attempts or not port_was_taken(exc):
                raise
    raise AssertionError("unreachable: the last attempt returns or raises")


def port_was_taken(exc: ServiceError) -> bool:
    """True when a service failed because its port was taken (try again on other ports)."""
    return _PORT_TAKEN.search(str(exc)) is not None


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def port_accepts(port: int, host: str = "127.0.0.1", timeout: float = 0.2) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=timeout):
        return True
    return False


@dataclass
class Service:
    """A running child process whose output is kept in memory and optionally echoed."""

    name: str
    process: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)
    _reader: threading.Thread | None = None

    @property
    def pid(self) -> int:
        return self.process.pid

    def output(self) -> str:
        return "".join(self.lines[-200:])

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM the whole process group, then SIGKILL what is left after `timeout`."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout)
        # The leader may be gone while a child (the emulator's JVM) lingers in the group.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(5)
        if self._reader is not None:
            self._reader.join(timeout=2)


def start(
    name: str,
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    ready: Callable[[Service], bool],
    timeout: float = 60.0,
    echo: Callable[[str, str], None] | None = None,
) -> Service:
    """Start `argv` and wait until `ready(service)` is true; raise `ServiceError` on failure.

    `echo(name, line)` sees every output line as it arrives (for `make run`'s log).
    """
    try:
        process = subprocess.Popen(
            list(argv),
            env=dict(env) if env is not None else None,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
            start_new_session=True,
        )
    except OSError as exc:
        raise ServiceError(f"{name}: cannot start {argv[0]!r}: {exc}") from exc
    service = Service(name=name, process=process)

    def pump() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            service.lines.append(line)
            if echo is not None:
                echo(name, line.rstrip("\n"))

    service._reader = threading.Thread(target=pump, name=f"{name}-output", daemon=True)
    service._reader.start()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if ready(service):
                return service
            if not service.alive():
                raise ServiceError(
                    f"{name} exited with code {process.returncode} before it was ready:\n"
                    f"{service.output()}"
                )
            time.sleep(0.05)
        raise ServiceError(f"{name} was not ready after {timeout:.0f} s:\n{service.output()}")
    except BaseException:
        # Ctrl-C while waiting too: the child is in its own session and would outlive us.
        service.stop()
        raise


def printed(marker: str) -> Callable[[Service], bool]:
    """Ready once the service printed a line containing `marker`."""
    return lambda service: any(marker in line for line in list(service.lines))


def listening_on(port: int, host: str = "127.0.0.1") -> Callable[[Service], bool]:
    """Ready once `host:port` accepts a TCP connection."""
    return lambda service: port_accepts(port, host)
