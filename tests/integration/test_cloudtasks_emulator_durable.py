"""The emulator with `--data-dir` survives a SIGKILL like the real, durable queue.

Each test starts an emulator process of its own, kills it with SIGKILL (no clean-up at
all) and starts it again on the same ports and data dir, then talks to it with a fresh
unmodified google-cloud-tasks client.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from google.api_core import exceptions
from google.cloud.tasks_v2 import CloudTasksClient, types

from shared.handoff.tasks import make_client
from tests.integration.cloudtasks_calls import gone, http_task, new_queue
from tests.plugins.cloudtasks import EmulatorHandle, TargetServer, restart_emulator
from tests.waiting import wait_until


@contextmanager
def client_of(handle: EmulatorHandle) -> Iterator[CloudTasksClient]:
    client = make_client(handle.host)
    try:
        yield client
    finally:
        client.transport.close()


def jwks(handle: EmulatorHandle) -> dict[str, object]:
    with urllib.request.urlopen(handle.jwks_url, timeout=10) as response:
        document: dict[str, object] = json.loads(response.read())
    return document


@pytest.fixture
def crashed_and_restarted(
    cloudtasks_emulator_factory: Callable[..., EmulatorHandle], tmp_path: Path
) -> Iterator[tuple[EmulatorHandle, Callable[[], EmulatorHandle]]]:
    """A durable emulator, and `crash_and_restart()` that SIGKILLs and restarts it."""
    first = cloudtasks_emulator_factory(data_dir=tmp_path / "cloudtasks")
    started: list[EmulatorHandle] = []

    def crash_and_restart() -> EmulatorHandle:
        first.kill()
        handle = restart_emulator(first)
        started.append(handle)
        return handle

    yield first, crash_and_restart
    for handle in started:
        handle.service.stop()


@pytest.mark.slow  # two emulator processes of its own
def test_queues_tasks_tombstones_and_the_signing_key_survive_a_sigkill(
    crashed_and_restarted: tuple[EmulatorHandle, Callable[[], EmulatorHandle]],
    task_target: TargetServer,
) -> None:
    first, crash_and_restart = crashed_and_restarted
    with client_of(first) as client:
        queue = new_queue(client, retry_config=types.RetryConfig(max_attempts=7))
        client.pause_queue(name=queue)  # nothing runs before the crash
        kept = client.create_task(
            parent=queue,
            task=http_task(task_target.url, name=f"{queue}/tasks/kept", body=b'{"n": 1}'),
        )
        deleted = f"{queue}/tasks/deleted"
        client.create_task(parent=queue, task=http_task(task_target.url, name=deleted))
        client.delete_task(name=deleted)
    keys_before = jwks(first)

    second = crash_and_restart()

    assert jwks(second) == keys_before
    with client_of(second) as client:
        restored = client.get_queue(name=queue)
        assert restored.state == types.Queue.State.PAUSED
        assert restored.retry_config.max_attempts == 7
        full = client.get_task(request={"name": kept.name, "response_view": types.Task.View.FULL})
        assert full.http_request.body == b'{"n": 1}'
        assert full.schedule_time == kept.schedule_time
        with pytest.raises(exceptions.AlreadyExists, match="too recently"):
            client.create_task(parent=queue, task=http_task(task_target.url, name=deleted))
        client.resume_queue(name=queue)
        got = task_target.wait_for(1)[0]
        assert (got.body, got.headers["x-cloudtasks-taskname"]) == (b'{"n": 1}', "kept")
        wait_until(gone(client, kept.name), what="the restored task to complete")


@pytest.mark.slow  # two emulator processes of its own
def test_a_task_in_flight_at_the_crash_is_dispatched_again_after_the_restart(
    crashed_and_restarted: tuple[EmulatorHandle, Callable[[], EmulatorHandle]],
    task_target: TargetServer,
) -> None:
    first, crash_and_restart = crashed_and_restarted
    task_target.hold()  # the first attempt is still in flight when the emulator dies
    with client_of(first) as client:
        queue = new_queue(client)
        task = client.create_task(parent=queue, task=http_task(task_target.url))
        task_target.wait_for(1)

    second = crash_and_restart()

    task_target.release()
    again = task_target.wait_for(2)[1]
    assert again.headers["x-cloudtasks-taskname"] == task.name.rsplit("/", 1)[1]
    # The crashed attempt was committed before it was sent: it counts as a dispatch.
    assert again.headers["x-cloudtasks-taskretrycount"] == "1"
    with client_of(second) as client:
        wait_until(gone(client, task.name), what="the re-dispatched task to complete")
