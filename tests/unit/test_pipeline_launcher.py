"""The one launcher of the pipeline (local/stack.py): its ports and its retry on a clash."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from local.processes import ServiceError
from local.stack import fresh_ports, start_on_fresh_ports


class Child:
    """A started child as the launcher sees it: it only gets stopped."""

    def __init__(self, stopped: list[str], name: str) -> None:
        self.stopped, self.name = stopped, name

    def stop(self, timeout: float = 10.0) -> None:
        self.stopped.append(self.name)


def test_fresh_ports_keeps_the_given_ones_and_picks_distinct_others() -> None:
    ports = fresh_ports(firestore=8686, console=0)
    values = dataclasses.astuple(ports)
    assert (ports.firestore, ports.console) == (8686, 0)
    others = [v for v in values if v not in (8686, 0)]
    assert len(others) == len(values) - 2 == len(set(others))


def test_a_port_clash_stops_what_started_and_starts_again() -> None:
    stopped: list[str] = []
    attempts: list[int] = []

    def start(services: list[Any]) -> str:
        attempts.append(len(attempts) + 1)
        services.append(Child(stopped, f"simulator-{len(attempts)}"))
        if len(attempts) < 3:
            raise ServiceError("ingress exited: OSError: [Errno 98] Address already in use")
        return "running"

    assert start_on_fresh_ports(start) == "running"
    assert attempts == [1, 2, 3]
    assert stopped == ["simulator-1", "simulator-2"]


@pytest.mark.parametrize(
    ("name", "error"),
    [
        ("a failure that is not a clash", ServiceError("worker exited: ImportError")),
        ("not a service error", KeyError("WORKER_URL")),
    ],
)
def test_any_other_failure_stops_what_started_and_propagates(name: str, error: Exception) -> None:
    stopped: list[str] = []

    def start(services: list[Any]) -> None:
        services.extend([Child(stopped, "simulator"), Child(stopped, "ingress")])
        raise error

    with pytest.raises(type(error)):
        start_on_fresh_ports(start)
    assert stopped == ["ingress", "simulator"], name


def test_the_last_clash_propagates() -> None:
    def start(services: list[Any]) -> None:
        raise ServiceError("address already in use")

    with pytest.raises(ServiceError, match="already in use"):
        start_on_fresh_ports(start, attempts=2)
