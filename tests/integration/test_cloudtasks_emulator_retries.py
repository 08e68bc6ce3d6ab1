"""Retry timing and retry headers of the Cloud Tasks emulator, on its manual clock.

The clock moves only when a test advances it, so "not before 2 s" is read off the task's
own schedule_time and checked by advancing the clock, never by timing anything.
"""

from __future__ import annotations

import datetime as dt
import email.utils
from collections.abc import Iterator

import pytest
from google.cloud.tasks_v2 import CloudTasksClient, types

from shared.handoff.tasks import make_client
from tests.integration.cloudtasks_calls import (
    answered_or_gone,
    backoffs,
    gone,
    http_task,
    new_queue,
)
from tests.plugins.cloudtasks import EmulatorHandle, TargetServer
from tests.waiting import wait_until


@pytest.fixture(scope="module")
def manual(cloudtasks_emulator_manual: EmulatorHandle) -> Iterator[CloudTasksClient]:
    client = make_client(cloudtasks_emulator_manual.host)
    yield client
    client.transport.close()


def first_retry_delay(client: CloudTasksClient, target: TargetServer, name: str) -> float:
    """How long after the first answer the emulator scheduled the retry (ms precision)."""
    target.wait_for(1)
    task = wait_until(answered_or_gone(client, name, 1), what=f"the first answer to {name}")
    assert isinstance(task, types.Task), f"{name} should be waiting for its retry"
    return round(task.schedule_time.timestamp() - task.last_attempt.response_time.timestamp(), 3)


def test_503_with_retry_after_2_is_not_retried_before_2_seconds(
    manual: CloudTasksClient, cloudtasks_emulator_manual: EmulatorHandle, task_target: TargetServer
) -> None:
    queue = new_queue(manual)  # default backoff: 0.1 s, 0.2 s on a 503
    task_target.respond(503, headers={"Retry-After": "2"})
    task = manual.create_task(parent=queue, task=http_task(task_target.url))
    assert first_retry_delay(manual, task_target, task.name) == 2.0
    task_target.respond(200)
    cloudtasks_emulator_manual.advance(1.9)
    # A task due now in the same queue: the dispatcher counts every due attempt of a
    # queue in the pass that sends it, so had 1.9 s been enough, the retry would show a
    # second dispatch by the time this one arrives.
    marker = manual.create_task(parent=queue, task=http_task(f"{task_target.url}/marker"))
    assert task_target.wait_for(2)[1].path == "/marker"
    assert manual.get_task(name=task.name).dispatch_count == 1
    cloudtasks_emulator_manual.advance(0.2)
    retry = task_target.wait_for(3)[2]
    wait_until(gone(manual, marker.name), what="the marker task to complete")
    assert retry.headers["x-cloudtasks-taskpreviousresponse"] == "503"
    assert retry.headers["x-cloudtasks-taskretrycount"] == "1"
    wait_until(gone(manual, task.name), what="the retried task to complete")


def test_429_and_503_get_twice_the_backoff_of_a_500(
    manual: CloudTasksClient, cloudtasks_emulator_manual: EmulatorHandle, task_target: TargetServer
) -> None:
    retry = types.RetryConfig(
        max_attempts=3,
        min_backoff=dt.timedelta(seconds=10),
        max_backoff=dt.timedelta(seconds=30),
        max_doublings=2,
    )
    delays = {}
    for status in (500, 429, 503):
        queue = new_queue(manual, retry_config=retry)
        task_target.requests.clear()
        task_target.respond(status)
        task = manual.create_task(parent=queue, task=http_task(task_target.url))
        delays[status] = backoffs(manual, cloudtasks_emulator_manual, task_target, task.name)
    # 10 s then 20 s; doubled on 429/503 and capped at max_backoff (30 s).
    assert delays == {500: [10, 20], 429: [20, 30], 503: [20, 30]}


def test_retry_after_as_an_http_date_counts_from_the_emulator_clock(
    manual: CloudTasksClient, cloudtasks_emulator_manual: EmulatorHandle, task_target: TargetServer
) -> None:
    queue = new_queue(manual)
    # An HTTP-date has whole seconds: 5 s past the next whole second of the emulator's clock.
    when = int(cloudtasks_emulator_manual.now()) + 6
    task_target.respond(429, headers={"Retry-After": email.utils.formatdate(when, usegmt=True)})
    task = manual.create_task(parent=queue, task=http_task(task_target.url))
    task_target.wait_for(1)
    answered = wait_until(answered_or_gone(manual, task.name, 1), what="the first answer")
    assert isinstance(answered, types.Task)
    assert answered.schedule_time.timestamp() == pytest.approx(when, abs=1e-3)
    task_target.respond(200)
    cloudtasks_emulator_manual.advance(7)
    task_target.wait_for(2)
    wait_until(gone(manual, task.name), what="the task to complete")


def test_the_retry_reason_header_comes_on_a_retry_only(
    manual: CloudTasksClient, cloudtasks_emulator_manual: EmulatorHandle, task_target: TargetServer
) -> None:
    queue = new_queue(manual)
    task_target.respond(200, statuses=[500])
    task = manual.create_task(parent=queue, task=http_task(task_target.url))
    assert first_retry_delay(manual, task_target, task.name) == 0.1
    cloudtasks_emulator_manual.advance(0.2)
    first, retry = task_target.wait_for(2)
    assert "x-cloudtasks-taskretryreason" not in first.headers
    assert "x-cloudtasks-taskpreviousresponse" not in first.headers
    # Present, and empty like the real service's for HTTP targets (no documented values).
    assert retry.headers["x-cloudtasks-taskretryreason"] == ""
    assert retry.headers["x-cloudtasks-taskpreviousresponse"] == "500"
    wait_until(gone(manual, task.name), what="the task to complete")


def test_a_past_schedule_time_becomes_now_and_runs_at_once(
    manual: CloudTasksClient, cloudtasks_emulator_manual: EmulatorHandle, task_target: TargetServer
) -> None:
    queue = new_queue(manual)
    now = cloudtasks_emulator_manual.now()
    past = dt.datetime.fromtimestamp(now - 3600, tz=dt.UTC)
    created = manual.create_task(parent=queue, task=http_task(task_target.url, schedule_time=past))
    assert created.schedule_time.timestamp() == pytest.approx(now, abs=1e-3)
    got = task_target.wait_for(1)[0]  # the clock stands still: it went at "now"
    assert float(got.headers["x-cloudtasks-tasketa"]) == pytest.approx(now, abs=1e-3)
    wait_until(gone(manual, created.name), what="the task to complete")
