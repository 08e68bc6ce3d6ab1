"""A Cloud Tasks emulator a test can stop and start again on the SAME ports (a blip).

The emulator keeps no state over a restart: each start creates `queue_path` again
(`--queue`), and mints with a new signing key, as a restarted emulator does.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from local.cloudtasks_emulator.launch import start_cloudtasks
from local.processes import Service, ServiceError, start_on_free_ports


def start_emulator_with_queue(port: int, http_port: int, queue_path: str) -> Service:
    """The emulator with `queue_path` created at start (it keeps no state over a restart)."""
    return start_cloudtasks(port, http_port, queues=[queue_path])


@dataclass
class Blip:
    """One emulator that the test stops and restarts on the same ports; stopped at the end."""

    port: int
    http_port: int
    queue_path: str
    services: list[Service] = field(default_factory=list)
    restarts: list[threading.Thread] = field(default_factory=list)

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def jwks_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}/jwks.json"

    def output(self) -> str:
        """Every start's output, oldest first."""
        return "".join(line for service in self.services for line in service.lines)

    def restart(self) -> None:
        """Stop it and start it again on the same ports, now."""
        for service in self.services:
            service.stop()
        self.services.append(start_emulator_with_queue(self.port, self.http_port, self.queue_path))

    def stop(self) -> None:
        """Stop every start, waiting first for a pending restart (it would outlive us)."""
        for thread in self.restarts:
            thread.join(timeout=90)
        for service in self.services:
            service.stop()

    def restart_after(self, delay_s: float) -> threading.Thread:
        """Start the emulator again on the same ports `delay_s` from now, in a thread."""
        failures: list[BaseException] = []

        def run() -> None:
            time.sleep(delay_s)  # the outage itself, not a wait for an outcome
            try:
                self.services.append(
                    start_emulator_with_queue(self.port, self.http_port, self.queue_path)
                )
            except ServiceError as exc:
                failures.append(exc)

        thread = threading.Thread(target=run, name="cloudtasks-restart", daemon=True)
        thread.failures = failures  # type: ignore[attr-defined]
        self.restarts.append(thread)
        thread.start()
        return thread


def start_blip(queue_path: str) -> Blip:
    """The emulator on two free ports, with `queue_path`; the caller stops it."""
    service, (port, http_port) = start_on_free_ports(
        lambda port, http_port: start_emulator_with_queue(port, http_port, queue_path), count=2
    )
    return Blip(port, http_port, queue_path, [service])
