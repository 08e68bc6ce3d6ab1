"""Calls the Cloud Tasks emulator tests share: a fresh queue, an HTTP task, waiting on a task."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from google.api_core import exceptions
from google.cloud.tasks_v2 import CloudTasksClient, types

from tests.plugins.cloudtasks import EmulatorHandle, TargetServer
from tests.waiting import wait_until

LOCATION = "projects/demo-hookledger/locations/us-central1"


def new_queue(client: CloudTasksClient, **settings: object) -> str:
    name = f"{LOCATION}/queues/q-{uuid.uuid4().hex[:12]}"
    client.create_queue(parent=LOCATION, queue=types.Queue(name=name, **settings), timeout=5)
    return name


def http_task(url: str, *, name: str = "", body: bytes = b"{}", **fields: object) -> types.Task:
    request = types.HttpRequest(url=url, http_method=types.HttpMethod.POST, body=body)
    return types.Task(name=name, http_request=request, **fields)


def gone(client: CloudTasksClient, task_name: str) -> Callable[[], bool]:
    def check() -> bool:
        try:
            client.get_task(name=task_name, timeout=5)
        except exceptions.NotFound:
            return True
        return False

    return check


def answered_or_gone(
    client: CloudTasksClient, task_name: str, attempts: int
) -> Callable[[], types.Task | bool | None]:
    """The task once its `attempts`-th attempt was answered (its retry then scheduled);
    True once the task is gone (completed, or deleted after its last attempt)."""

    def check() -> types.Task | bool | None:
        try:
            task = client.get_task(name=task_name, timeout=5)
        except exceptions.NotFound:
            return True
        done = task.dispatch_count == attempts and "response_time" in task.last_attempt
        return task if done else None

    return check


def backoffs(
    client: CloudTasksClient, emulator: EmulatorHandle, target: TargetServer, task_name: str
) -> list[float]:
    """Each retry delay (in seconds, to the millisecond) the emulator schedules after a failed
    attempt, advancing its clock just past that delay to let the next attempt go, until the
    task is gone."""
    delays: list[float] = []
    while True:
        attempts = len(delays) + 1
        target.wait_for(attempts)
        task = wait_until(
            answered_or_gone(client, task_name, attempts),
            what=f"attempt {attempts} of {task_name} to be answered",
        )
        if task is True:
            return delays
        assert isinstance(task, types.Task)
        # The API's times have microsecond resolution: milliseconds are exact enough.
        delay = task.schedule_time.timestamp() - task.last_attempt.response_time.timestamp()
        delays.append(round(delay, 3))
        emulator.advance(delays[-1] + 0.001)  # just past it, whatever the float rounding
