"""The local Cloud Tasks emulator, driven only through the unmodified google-cloud-tasks client.

Most tests use the fast emulator (time scale 0.01: backoff, dispatch deadline and
rate waits run 100x faster); the `faithful` tests run at real speed with defaults; the
`manual` tests run at real scale on a clock that moves only when the test advances it,
so backoff and tombstones are checked exactly, without sleeping or timing anything.
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import uuid
from collections.abc import Callable, Iterator

import google.auth.transport.requests
import pytest
from google.api_core import exceptions
from google.auth import jwt as google_jwt
from google.cloud.tasks_v2 import CloudTasksClient, types
from google.oauth2 import id_token
from google.protobuf import field_mask_pb2

from shared.handoff.tasks import (
    TaskQueue,
    ensure_queue,
    make_client,
    task_id_for,
)
from tests.integration.cloudtasks_calls import (
    LOCATION,
    backoffs,
    gone,
    http_task,
    new_queue,
)
from tests.plugins.cloudtasks import EmulatorHandle, TargetServer, start_emulator
from tests.waiting import wait_until

SERVICE_ACCOUNT = "tasks@demo-hookledger.iam.gserviceaccount.com"


@pytest.fixture(scope="module")
def fast(cloudtasks_emulator_fast: EmulatorHandle) -> Iterator[CloudTasksClient]:
    client = make_client(cloudtasks_emulator_fast.host)
    yield client
    client.transport.close()


@pytest.fixture(scope="module")
def manual(cloudtasks_emulator_manual: EmulatorHandle) -> Iterator[CloudTasksClient]:
    client = make_client(cloudtasks_emulator_manual.host)
    yield client
    client.transport.close()


@pytest.fixture(scope="module")
def faithful(cloudtasks_emulator: EmulatorHandle) -> Iterator[CloudTasksClient]:
    client = make_client(cloudtasks_emulator.host)
    yield client
    client.transport.close()


# ---- names, dedupe, tombstones --------------------------------------------------------------


def test_duplicate_task_name_is_already_exists_and_the_target_is_hit_once(
    fast: CloudTasksClient, task_target: TargetServer
) -> None:
    queue = new_queue(fast)
    name = f"{queue}/tasks/delivery-1"
    created = fast.create_task(parent=queue, task=http_task(task_target.url, name=name))
    with pytest.raises(exceptions.AlreadyExists):
        fast.create_task(parent=queue, task=http_task(task_target.url, name=name))
    task_target.wait_for(1)
    wait_until(gone(fast, name), what="the task to finish")
    assert created.name == name
    assert len(task_target.requests) == 1


def test_a_name_reused_after_the_task_ran_or_was_deleted_is_already_exists(
    fast: CloudTasksClient, task_target: TargetServer
) -> None:
    queue = new_queue(fast)
    ran, deleted = f"{queue}/tasks/ran", f"{queue}/tasks/deleted"
    fast.create_task(parent=queue, task=http_task(task_target.url, name=ran))
    wait_until(gone(fast, ran), what="the task to run")
    far = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
    fast.create_task(parent=queue, task=http_task(task_target.url, name=deleted, schedule_time=far))
    fast.delete_task(name=deleted)
    for name in (ran, deleted):
        with pytest.raises(exceptions.AlreadyExists, match="too recently"):
            fast.create_task(parent=queue, task=http_task(task_target.url, name=name))
    assert len(task_target.requests) == 1


def test_a_name_is_free_again_after_the_tombstone_window(
    manual: CloudTasksClient, cloudtasks_emulator_manual: EmulatorHandle, task_target: TargetServer
) -> None:
    queue = new_queue(manual)
    name = f"{queue}/tasks/again"
    manual.create_task(parent=queue, task=http_task(task_target.url, name=name))
    wait_until(gone(manual, name), what="the task to run")
    # The tombstone lasts an hour (the default); a second either side of it, clear of
    # float rounding at the boundary.
    cloudtasks_emulator_manual.advance(3599)
    with pytest.raises(exceptions.AlreadyExists, match="too recently"):
        manual.create_task(parent=queue, task=http_task(task_target.url, name=name))
    cloudtasks_emulator_manual.advance(2)
    manual.create_task(parent=queue, task=http_task(task_target.url, name=name))
    task_target.wait_for(2)


def test_a_task_without_a_name_gets_a_generated_id(
    fast: CloudTasksClient, task_target: TargetServer
) -> None:
    queue = new_queue(fast)
    first = fast.create_task(parent=queue, task=http_task(task_target.url))
    second = fast.create_task(parent=queue, task=http_task(task_target.url))
    assert first.name.startswith(f"{queue}/tasks/") and second.name.startswith(f"{queue}/tasks/")
    assert first.name != second.name
    names = {r.headers["x-cloudtasks-taskname"] for r in task_target.wait_for(2)}
    assert names == {first.name.rsplit("/", 1)[1], second.name.rsplit("/", 1)[1]}


# ---- dispatch -------------------------------------------------------------------------------


def test_dispatch_sends_method_url_headers_body_and_the_cloud_tasks_headers(
    fast: CloudTasksClient, task_target: TargetServer
) -> None:
    queue = new_queue(fast)
    request = types.HttpRequest(
        url=f"{task_target.url}/work?x=1",
        http_method=types.HttpMethod.PUT,
        headers={"Content-Type": "application/json", "X-Custom": "yes", "User-Agent": "mine"},
        body=b'{"a": 1}',
    )
    task = fast.create_task(
        parent=queue, task=types.Task(name=f"{queue}/tasks/hdr", http_request=request)
    )
    got = task_target.wait_for(1)[0]
    assert (got.method, got.path, got.body) == ("PUT", "/work?x=1", b'{"a": 1}')
    assert got.headers["content-type"] == "application/json"
    assert got.headers["x-custom"] == "yes"
    assert got.headers["user-agent"] == "Google-Cloud-Tasks"
    assert got.headers["x-cloudtasks-queuename"] == queue.rsplit("/", 1)[1]
    assert got.headers["x-cloudtasks-taskname"] == "hdr"
    assert got.headers["x-cloudtasks-taskretrycount"] == "0"
    assert got.headers["x-cloudtasks-taskexecutioncount"] == "0"
    eta = float(got.headers["x-cloudtasks-tasketa"])
    assert eta == pytest.approx(task.schedule_time.timestamp(), abs=1e-3)


def test_a_failing_target_is_retried_with_growing_backoff_until_max_attempts(
    manual: CloudTasksClient, cloudtasks_emulator_manual: EmulatorHandle, task_target: TargetServer
) -> None:
    retry = types.RetryConfig(
        max_attempts=5,
        min_backoff=dt.timedelta(seconds=10),
        max_backoff=dt.timedelta(seconds=40),
        max_doublings=1,
    )
    queue = new_queue(manual, retry_config=retry)
    task_target.respond(500)
    name = f"{queue}/tasks/failing"
    manual.create_task(parent=queue, task=http_task(task_target.url, name=name))
    # 10s, 20s (one doubling), then +20s linearly, capped at 40s; then deleted after 5 attempts.
    assert backoffs(manual, cloudtasks_emulator_manual, task_target, name) == [10, 20, 40, 40]
    # Gone after the fifth answer: no task is left to make a sixth attempt.
    assert len(task_target.requests) == 5
    retry_counts = [r.headers["x-cloudtasks-taskretrycount"] for r in task_target.requests]
    assert retry_counts == ["0", "1", "2", "3", "4"]
    # 5xx answers are not executions; the previous answer is reported from the 2nd attempt.
    assert {r.headers["x-cloudtasks-taskexecutioncount"] for r in task_target.requests} == {"0"}
    assert task_target.requests[1].headers["x-cloudtasks-taskpreviousresponse"] == "500"


def test_a_target_that_recovers_completes_the_task_and_counts_executions(
    fast: CloudTasksClient, task_target: TargetServer
) -> None:
    queue = new_queue(fast, retry_config=types.RetryConfig(min_backoff=dt.timedelta(seconds=1)))
    task_target.respond(200, statuses=[404, 500])
    name = f"{queue}/tasks/recovers"
    fast.create_task(parent=queue, task=http_task(task_target.url, name=name))
    got = task_target.wait_for(3)
    wait_until(gone(fast, name), what="the task to complete")
    assert [r.headers["x-cloudtasks-taskexecutioncount"] for r in got] == ["0", "1", "1"]


def test_dispatch_deadline_cuts_a_slow_target_off_and_counts_a_failure(
    fast: CloudTasksClient, task_target: TargetServer
) -> None:
    retry = types.RetryConfig(max_attempts=2, min_backoff=dt.timedelta(seconds=50))
    queue = new_queue(fast, retry_config=retry)
    task_target.hold()  # the target never answers while the test runs: only the deadline ends it
    name = f"{queue}/tasks/slow"
    deadline = dt.timedelta(seconds=15)  # the API's minimum; 0.15 s on the fast emulator
    fast.create_task(
        parent=queue, task=http_task(task_target.url, name=name, dispatch_deadline=deadline)
    )

    def first_attempt_answered() -> bool:
        task = fast.get_task(name=name)
        return "response_time" in task.last_attempt

    wait_until(first_attempt_answered, what="the first attempt to be cut off")
    task = fast.get_task(name=name)
    assert task.dispatch_count == 1 and task.response_count == 0
    assert task.last_attempt.response_status.code == 4  # DEADLINE_EXCEEDED
    assert task_target.in_flight >= 1  # cut off while the target still held the request
    assert task.dispatch_deadline == deadline
    task_target.wait_for(2)  # retried
    wait_until(gone(fast, name), what="the task to be deleted after two cut-off attempts")


def test_a_paused_queue_dispatches_nothing_keeps_tasks_listable_and_resume_dispatches(
    fast: CloudTasksClient, task_target: TargetServer
) -> None:
    queue = new_queue(fast)
    paused = fast.pause_queue(name=queue)
    assert paused.state == types.Queue.State.PAUSED
    names = {fast.create_task(parent=queue, task=http_task(task_target.url)).name for _ in range(3)}
    # A running queue created later: the dispatcher visits queues in creation order, so
    # had the paused queue been dispatching, its tasks would have gone before this one.
    marker_queue = new_queue(fast)
    marker = fast.create_task(parent=marker_queue, task=http_task(f"{task_target.url}/marker"))
    assert [r.path for r in task_target.wait_for(1)] == ["/marker"]
    wait_until(gone(fast, marker.name), what="the marker task to complete")
    assert [r.path for r in task_target.requests] == ["/marker"]
    listed = list(fast.list_tasks(parent=queue))
    assert {t.name for t in listed} == names
    assert all(t.dispatch_count == 0 for t in listed)
    assert fast.resume_queue(name=queue).state == types.Queue.State.RUNNING
    task_target.wait_for(4)
    for name in names:
        wait_until(gone(fast, name), what=f"{name} to complete")


def test_run_task_dispatches_at_once_even_in_a_paused_queue(
    fast: CloudTasksClient, task_target: TargetServer
) -> None:
    queue = new_queue(fast)
    fast.pause_queue(name=queue)
    later = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
    task = fast.create_task(parent=queue, task=http_task(task_target.url, schedule_time=later))
    ran = fast.run_task(name=task.name)
    assert ran.dispatch_count == 1
    task_target.wait_for(1)
    wait_until(gone(fast, task.name), what="the forced task to complete")


def test_schedule_time_is_honoured(fast: CloudTasksClient, task_target: TargetServer) -> None:
    queue = new_queue(fast)
    when = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=1)
    created = fast.create_task(parent=queue, task=http_task(task_target.url, schedule_time=when))
    assert created.schedule_time.timestamp() == pytest.approx(when.timestamp(), abs=1e-3)
    got = task_target.wait_for(1, timeout=10)[0]
    assert got.at >= when.timestamp()
    assert float(got.headers["x-cloudtasks-tasketa"]) == pytest.approx(when.timestamp(), abs=1e-3)


def test_max_concurrent_dispatches_bounds_concurrency(
    fast: CloudTasksClient, task_target: TargetServer
) -> None:
    queue = new_queue(fast, rate_limits=types.RateLimits(max_concurrent_dispatches=2))
    task_target.hold()
    for _ in range(6):
        fast.create_task(parent=queue, task=http_task(task_target.url))
    wait_until(lambda: task_target.in_flight == 2, what="two dispatches held in flight")
    task_target.release()
    task_target.wait_for(6)
    wait_until(lambda: not list(fast.list_tasks(parent=queue)), what="all tasks to complete")
    assert task_target.max_in_flight == 2


def test_faithful_max_dispatches_per_second_spreads_dispatches(
    faithful: CloudTasksClient, task_target: TargetServer
) -> None:
    # 5/s with a burst of 5: five at once, then one every 0.2 s.
    queue = new_queue(faithful, rate_limits=types.RateLimits(max_dispatches_per_second=5))
    assert faithful.get_queue(name=queue).rate_limits.max_burst_size == 5
    for _ in range(10):
        faithful.create_task(parent=queue, task=http_task(task_target.url))
    arrivals = [r.at_monotonic for r in task_target.wait_for(10)]
    # A lower bound only: the bucket cannot refill five tokens faster than 1 s; how much
    # slower a loaded machine is belongs to the benchmarks, not to a pass/fail check.
    assert arrivals[-1] - arrivals[0] >= 0.8


def test_default_backoff_starts_at_a_tenth_of_a_second_and_doubles(
    manual: CloudTasksClient, cloudtasks_emulator_manual: EmulatorHandle, task_target: TargetServer
) -> None:
    queue = new_queue(manual)  # documented defaults: min_backoff 0.1s, 16 doublings
    task_target.respond(200, statuses=[500, 500, 500])
    task = manual.create_task(parent=queue, task=http_task(task_target.url))
    assert backoffs(manual, cloudtasks_emulator_manual, task_target, task.name) == [0.1, 0.2, 0.4]
    assert len(task_target.requests) == 4


# ---- OIDC -----------------------------------------------------------------------------------


def test_oidc_token_verifies_against_the_jwks_with_google_auth(
    fast: CloudTasksClient, task_target: TargetServer, cloudtasks_emulator_fast: EmulatorHandle
) -> None:
    queue = new_queue(fast)
    audience = "https://worker.example.test/"
    request = types.HttpRequest(
        url=task_target.url,
        body=b"{}",
        oidc_token=types.OidcToken(service_account_email=SERVICE_ACCOUNT, audience=audience),
    )
    fast.create_task(parent=queue, task=types.Task(http_request=request))
    auth = task_target.wait_for(1)[0].headers["authorization"]
    assert auth.startswith("Bearer ")
    token = auth.removeprefix("Bearer ")
    http = google.auth.transport.requests.Request()
    claims = id_token.verify_token(
        token, http, audience=audience, certs_url=cloudtasks_emulator_fast.jwks_url
    )
    assert claims["aud"] == audience
    assert claims["email"] == SERVICE_ACCOUNT
    assert claims["email_verified"] is True
    assert claims["iss"] == "https://accounts.google.com"
    assert claims["sub"] and claims["exp"] > claims["iat"]
    header = google_jwt.decode_header(token)
    assert header["alg"] == "RS256" and header["kid"]
    with pytest.raises(Exception, match=r"[Aa]udience"):
        id_token.verify_token(
            token, http, audience="https://other/", certs_url=cloudtasks_emulator_fast.jwks_url
        )


def test_oidc_audience_defaults_to_the_url_and_verifies_with_x509_certs(
    fast: CloudTasksClient, task_target: TargetServer, cloudtasks_emulator_fast: EmulatorHandle
) -> None:
    queue = new_queue(fast)
    url = f"{task_target.url}/worker"
    request = types.HttpRequest(
        url=url, oidc_token=types.OidcToken(service_account_email=SERVICE_ACCOUNT)
    )
    fast.create_task(parent=queue, task=types.Task(http_request=request))
    token = task_target.wait_for(1)[0].headers["authorization"].removeprefix("Bearer ")
    http = google.auth.transport.requests.Request()
    claims = id_token.verify_token(
        token, http, audience=url, certs_url=cloudtasks_emulator_fast.certs_url
    )
    assert (claims["aud"], claims["email"]) == (url, SERVICE_ACCOUNT)


# ---- the API surface ------------------------------------------------------------------------


def test_queue_defaults_are_the_documented_ones_and_update_mask_limits_the_change(
    fast: CloudTasksClient,
) -> None:
    queue = fast.get_queue(name=new_queue(fast))
    assert queue.state == types.Queue.State.RUNNING
    retry, rate = queue.retry_config, queue.rate_limits
    assert (retry.max_attempts, retry.max_doublings) == (100, 16)
    assert retry.min_backoff == dt.timedelta(seconds=0.1)
    assert retry.max_backoff == dt.timedelta(seconds=3600)
    assert retry.max_retry_duration == dt.timedelta(0)
    assert (rate.max_dispatches_per_second, rate.max_burst_size) == (500, 100)
    assert rate.max_concurrent_dispatches == 1000
    change = types.Queue(
        name=queue.name,
        retry_config=types.RetryConfig(max_attempts=3),
        rate_limits=types.RateLimits(max_concurrent_dispatches=7),
    )
    updated = fast.update_queue(
        queue=change, update_mask=field_mask_pb2.FieldMask(paths=["retry_config.max_attempts"])
    )
    assert updated.retry_config.max_attempts == 3
    assert updated.retry_config.min_backoff == dt.timedelta(seconds=0.1)
    assert updated.rate_limits.max_concurrent_dispatches == 1000
    assert fast.get_queue(name=queue.name).retry_config.max_attempts == 3


def test_list_queues_filters_by_state_and_pages(fast: CloudTasksClient) -> None:
    location = f"projects/demo-list-{uuid.uuid4().hex[:8]}/locations/us-central1"
    names = [f"{location}/queues/q{i}" for i in range(3)]
    for name in names:
        fast.create_queue(parent=location, queue=types.Queue(name=name))
    fast.pause_queue(name=names[1])
    listed = fast.list_queues(request={"parent": location, "page_size": 2})
    assert [q.name for q in listed] == names  # the pager follows next_page_token
    paused = fast.list_queues(request={"parent": location, "filter": "state: PAUSED"})
    assert [q.name for q in paused] == [names[1]]


def test_list_tasks_pages_and_views_hide_the_body_unless_full(fast: CloudTasksClient) -> None:
    queue = new_queue(fast)
    fast.pause_queue(name=queue)
    for i in range(5):
        fast.create_task(
            parent=queue, task=http_task("http://127.0.0.1:9/x", name=f"{queue}/tasks/t{i}")
        )
    first = fast.list_tasks(request={"parent": queue, "page_size": 2})
    assert len(first.tasks) == 2 and first.next_page_token
    every = list(fast.list_tasks(request={"parent": queue, "page_size": 2}))
    assert sorted(t.name.rsplit("/", 1)[1] for t in every) == [f"t{i}" for i in range(5)]
    basic = fast.get_task(name=f"{queue}/tasks/t0")
    full = fast.get_task(
        request={"name": f"{queue}/tasks/t0", "response_view": types.Task.View.FULL}
    )
    assert (basic.view, basic.http_request.body) == (types.Task.View.BASIC, b"")
    assert (full.view, full.http_request.body) == (types.Task.View.FULL, b"{}")
    assert full.dispatch_deadline == dt.timedelta(minutes=10)


def test_purge_and_delete_queue(fast: CloudTasksClient) -> None:
    queue = new_queue(fast)
    fast.pause_queue(name=queue)
    fast.create_task(parent=queue, task=http_task("http://127.0.0.1:9/x"))
    purged = fast.purge_queue(name=queue)
    assert "purge_time" in purged
    assert list(fast.list_tasks(parent=queue)) == []
    fast.delete_queue(name=queue)
    with pytest.raises(exceptions.NotFound):
        fast.get_queue(name=queue)


BAD_INPUT: list[tuple[str, Callable[[CloudTasksClient, str], object], type[Exception]]] = [
    (
        "unknown queue on GetQueue",
        lambda c, q: c.get_queue(name=f"{LOCATION}/queues/nope-{uuid.uuid4().hex[:6]}"),
        exceptions.NotFound,
    ),
    (
        "unknown queue on CreateTask",
        lambda c, q: c.create_task(
            parent=f"{LOCATION}/queues/nope-{uuid.uuid4().hex[:6]}", task=http_task("http://h/")
        ),
        exceptions.NotFound,
    ),
    ("unknown task", lambda c, q: c.get_task(name=f"{q}/tasks/none"), exceptions.NotFound),
    ("malformed queue name", lambda c, q: c.get_queue(name="queues/x"), exceptions.InvalidArgument),
    (
        "queue id with underscore",
        lambda c, q: c.create_queue(
            parent=LOCATION, queue=types.Queue(name=f"{LOCATION}/queues/bad_id")
        ),
        exceptions.InvalidArgument,
    ),
    (
        "queue outside its parent",
        lambda c, q: c.create_queue(
            parent="projects/other/locations/x", queue=types.Queue(name=f"{LOCATION}/queues/ok")
        ),
        exceptions.InvalidArgument,
    ),
    (
        "malformed task id",
        lambda c, q: c.create_task(parent=q, task=http_task("http://h/", name=f"{q}/tasks/a.b")),
        exceptions.InvalidArgument,
    ),
    (
        "task id over 500 characters",
        lambda c, q: c.create_task(
            parent=q, task=http_task("http://h/", name=f"{q}/tasks/{'a' * 501}")
        ),
        exceptions.InvalidArgument,
    ),
    (
        "missing URL",
        lambda c, q: c.create_task(parent=q, task=types.Task(http_request=types.HttpRequest())),
        exceptions.InvalidArgument,
    ),
    (
        "no http_request at all",
        lambda c, q: c.create_task(parent=q, task=types.Task()),
        exceptions.InvalidArgument,
    ),
    (
        "body on a GET",
        lambda c, q: c.create_task(
            parent=q,
            task=types.Task(
                http_request=types.HttpRequest(
                    url="http://h/", http_method=types.HttpMethod.GET, body=b"x"
                )
            ),
        ),
        exceptions.InvalidArgument,
    ),
    (
        "dispatch deadline under 15 s",
        lambda c, q: c.create_task(
            parent=q, task=http_task("http://h/", dispatch_deadline=dt.timedelta(seconds=5))
        ),
        exceptions.InvalidArgument,
    ),
    (
        "min_backoff above max_backoff",
        lambda c, q: c.create_queue(
            parent=LOCATION,
            queue=types.Queue(
                name=f"{LOCATION}/queues/b-{uuid.uuid4().hex[:6]}",
                retry_config=types.RetryConfig(
                    min_backoff=dt.timedelta(seconds=10), max_backoff=dt.timedelta(seconds=5)
                ),
            ),
        ),
        exceptions.InvalidArgument,
    ),
    (
        "create queue twice",
        lambda c, q: c.create_queue(parent=LOCATION, queue=types.Queue(name=q)),
        exceptions.AlreadyExists,
    ),
]


@pytest.mark.parametrize(
    ("case", "call", "error"), BAD_INPUT, ids=[case for case, _, _ in BAD_INPUT]
)
def test_bad_input_gets_the_grpc_error_of_the_real_api(
    fast: CloudTasksClient,
    case: str,
    call: Callable[[CloudTasksClient, str], object],
    error: type[Exception],
) -> None:
    queue = new_queue(fast)
    with pytest.raises(error):
        call(fast, queue)
    fast.get_queue(name=queue)  # still serving after the bad request


# ---- the shared.handoff.tasks adapter ---------------------------------------------------------------


def test_adapter_reports_created_then_duplicate(
    fast: CloudTasksClient, task_target: TargetServer
) -> None:
    queue_path = f"{LOCATION}/queues/adapter-{uuid.uuid4().hex[:8]}"
    ensured = ensure_queue(fast, queue_path, retry_config=types.RetryConfig(max_attempts=4))
    again = ensure_queue(fast, queue_path)  # exists: returned as it is
    assert ensured.retry_config.max_attempts == again.retry_config.max_attempts == 4
    queue = TaskQueue(fast, queue_path, timeout_s=5)
    task_id = task_id_for("github", "delivery/1 2")
    first = queue.enqueue(
        task_target.url,
        b'{"n": 1}',
        {"Content-Type": "application/json"},
        task_id=task_id,
        oidc_service_account=SERVICE_ACCOUNT,
        dispatch_deadline_s=30,
    )
    second = queue.enqueue(task_target.url, b'{"n": 1}', task_id=task_id)
    assert (first.status, second.status) == ("created", "duplicate")
    assert first.task_name == second.task_name == f"{queue_path}/tasks/{task_id}"
    got = task_target.wait_for(1)[0]
    assert got.body == b'{"n": 1}' and got.headers["authorization"].startswith("Bearer ")
    assert got.headers["x-cloudtasks-taskname"] == task_id


# ---- the process ----------------------------------------------------------------------------


@pytest.mark.slow  # starts and stops a process of its own: 3-5 s on a shared machine
def test_the_process_prints_its_jwks_url_and_exits_cleanly_on_sigterm() -> None:
    handle = start_emulator(time_scale=1.0)
    try:
        assert f"jwks {handle.jwks_url}" in handle.output()
        os.killpg(handle.service.pid, signal.SIGTERM)
        assert handle.service.process.wait(timeout=10) == 0
        wait_until(lambda: "stopped" in handle.output(), timeout=5, what="the stop line")
    finally:
        handle.service.stop()
