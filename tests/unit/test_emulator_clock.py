"""The Cloud Tasks emulator's manual clock: it moves only forward, only when told to."""

from __future__ import annotations

import pytest

from local.cloudtasks_emulator.clock import ManualClock
from local.cloudtasks_emulator.model import ApiError, QueueRecord, TaskRecord
from local.cloudtasks_emulator.store import RUNNING, Store


def task(name: str) -> TaskRecord:
    return TaskRecord(
        name=name,
        url="http://127.0.0.1:9/",
        http_method=1,
        headers={},
        body=b"",
        oidc_email=None,
        oidc_audience=None,
        schedule_time=0.0,
        create_time=0.0,
        dispatch_deadline_s=600.0,
        retry=None,
    )


def test_the_clock_stands_still_until_advanced_and_tells_its_listeners() -> None:
    clock = ManualClock(start=1_000.0)
    woken: list[float] = []
    clock.on_advance(lambda: woken.append(clock()))

    assert clock() == clock() == 1_000.0
    assert clock.advance(2.5) == 1_002.5
    assert woken == [1_002.5]
    with pytest.raises(ValueError, match="forward"):
        clock.advance(-1)
    assert clock() == 1_002.5


def test_a_store_on_the_manual_clock_keeps_a_tombstone_until_the_clock_passes_it() -> None:
    clock = ManualClock(start=1_000.0)
    store = Store(tombstone_s=60, now=clock)
    location = "projects/p/locations/l"
    queue = f"{location}/queues/q"
    store.create_queue(location, QueueRecord(name=queue, state=RUNNING))
    name = f"{queue}/tasks/t"
    store.create_task(queue, task(name))
    store.delete_task(name)

    clock.advance(59)
    with pytest.raises(ApiError, match="too recently"):
        store.create_task(queue, task(name))
    clock.advance(2)
    assert store.create_task(queue, task(name)).name == name
