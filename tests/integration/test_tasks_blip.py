"""The ingress's hand-off rides out a Cloud Tasks blip within its deadline (issue 12, item 1).

The real emulator is stopped and started again on the SAME ports, as a Cloud Tasks outage
looks to a client whose one gRPC channel was connected before it: a call made while it is
down waits for the channel (waitForReady) and succeeds once it is back; one whose deadline
passes first is still an `EnqueueError` (the ingress's 503).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from google.api_core import exceptions

from shared.handoff.tasks import EnqueueError, TaskQueue, make_client
from tests.integration.restartable_emulator import Blip, start_blip
from tests.ports import refusing_port

PROJECT_LOCATION = "projects/demo-hookledger/locations/us-central1"


@pytest.fixture
def blip() -> Iterator[Blip]:
    handle = start_blip(f"{PROJECT_LOCATION}/queues/blip-{uuid.uuid4().hex[:10]}")
    try:
        yield handle
    finally:
        handle.stop()


@pytest.mark.slow
def test_an_enqueue_issued_while_cloud_tasks_is_down_succeeds_once_it_is_back(
    blip: Blip,
) -> None:
    client = make_client(blip.host)
    # A deadline far past any restart time, so the outcome never depends on how fast the
    # emulator comes back on a loaded machine (the next test bounds a wait by its deadline).
    queue = TaskQueue(client, blip.queue_path, timeout_s=120.0)
    with refusing_port() as target:
        url = f"http://127.0.0.1:{target}/"  # never dispatched successfully: the task stays
        assert queue.enqueue(url, b"{}", task_id="before-the-blip").status == "created"

        blip.stop()  # the channel was READY; now every connect is refused
        restart = blip.restart_after(1.0)
        during = queue.enqueue(url, b"{}", task_id="during-the-blip")
        restart.join(timeout=120)

    assert not restart.failures, restart.failures  # type: ignore[attr-defined]
    assert during.status == "created"
    task = client.get_task(name=queue.task_path("during-the-blip"), timeout=5)
    assert task.name == during.task_name


@pytest.mark.slow
def test_an_outage_longer_than_the_deadline_is_an_enqueue_error_not_a_hang(blip: Blip) -> None:
    client = make_client(blip.host)
    queue = TaskQueue(client, blip.queue_path, timeout_s=1.0)
    with refusing_port() as target:
        url = f"http://127.0.0.1:{target}/"
        assert queue.enqueue(url, b"{}", task_id="before-the-outage").status == "created"
        blip.stop()

        started = time.monotonic()
        with pytest.raises(EnqueueError, match="tasks/during-the-outage") as caught:
            queue.enqueue(url, b"{}", task_id="during-the-outage")
        waited = time.monotonic() - started

    # It waited for the channel until the deadline, rather than failing fast as UNAVAILABLE.
    assert isinstance(caught.value.__cause__, exceptions.DeadlineExceeded)
    assert waited < 3 * queue.timeout_s, "the deadline bounds the wait: it must not hang"
