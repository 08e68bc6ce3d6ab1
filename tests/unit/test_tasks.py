"""Pure rules: the emulator's retry schedule and names, shared.handoff.tasks' task ids and channels."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from collections.abc import Iterator
from concurrent import futures

import grpc
import pytest
from google.api_core import exceptions
from google.auth.credentials import AnonymousCredentials
from google.cloud.tasks_v2 import types
from google.cloud.tasks_v2.services.cloud_tasks.transports import CloudTasksGrpcTransport
from hypothesis import given
from hypothesis import strategies as st
from pytest_mock import MockerFixture

from local.cloudtasks_emulator.model import (
    DEFAULT_RETRY,
    ApiError,
    RetryPolicy,
    parse_queue,
    parse_task,
)
from shared.handoff.tasks import (
    CHANNEL_OPTIONS,
    EnqueueError,
    TaskQueue,
    _create_request,
    make_client,
    task_id_for,
)
from tests.ports import refusing_port

TASK_ID = re.compile(r"^[A-Za-z0-9_-]{1,500}$")


def test_default_retry_config_is_the_documented_one() -> None:
    documented = RetryPolicy(
        max_attempts=100,
        max_retry_duration_s=0.0,
        min_backoff_s=0.1,
        max_backoff_s=3600.0,
        max_doublings=16,
    )
    assert documented == DEFAULT_RETRY


def test_default_backoff_schedule_doubles_from_a_tenth_of_a_second_up_to_an_hour() -> None:
    schedule = [DEFAULT_RETRY.backoff_s(i) for i in range(18)]
    doubling = [0.1 * 2**i for i in range(16)]  # 0.1 s ... 3276.8 s
    assert schedule == pytest.approx([*doubling[:16], 3600.0, 3600.0])


def test_backoff_matches_the_api_reference_example() -> None:
    # min_backoff 10s, max_backoff 300s, max_doublings 3 -> 10, 20, 40, 80, 160, 240, 300, 300.
    policy = RetryPolicy(min_backoff_s=10, max_backoff_s=300, max_doublings=3)
    assert [policy.backoff_s(i) for i in range(8)] == [10, 20, 40, 80, 160, 240, 300, 300]


@pytest.mark.parametrize(
    ("policy", "attempts", "elapsed", "exhausted"),
    [
        (RetryPolicy(max_attempts=3), 2, 0, False),
        (RetryPolicy(max_attempts=3), 3, 0, True),
        # Both limits must be met.
        (RetryPolicy(max_attempts=3, max_retry_duration_s=60), 3, 59, False),
        (RetryPolicy(max_attempts=3, max_retry_duration_s=60), 3, 60, True),
        (RetryPolicy(max_attempts=-1, max_retry_duration_s=60), 500, 60, True),
        # Unlimited attempts and no duration: retried until retention ends.
        (RetryPolicy(max_attempts=-1), 10_000, 10**6, False),
    ],
)
def test_retries_stop_only_when_both_limits_are_met(
    policy: RetryPolicy, attempts: int, elapsed: float, exhausted: bool
) -> None:
    assert policy.exhausted(attempts, elapsed) is exhausted


def test_bad_retry_settings_are_invalid_argument() -> None:
    for policy in (
        RetryPolicy(max_attempts=-2),
        RetryPolicy(min_backoff_s=5, max_backoff_s=1),
        RetryPolicy(min_backoff_s=-1),
    ):
        with pytest.raises(ApiError) as caught:
            policy.validate()
        assert caught.value.code == grpc.StatusCode.INVALID_ARGUMENT


def test_names_parse_and_malformed_names_are_invalid_argument() -> None:
    queue = "projects/demo-x:y.z/locations/us-central1/queues/my-q"
    assert parse_queue(queue) == ("projects/demo-x:y.z/locations/us-central1", "my-q")
    assert parse_task(f"{queue}/tasks/a_b-1") == (queue, "a_b-1")
    for bad in (
        "",
        "queues/q",
        f"{queue}/tasks/a\n",
        f"{queue}/tasks/",
        f"{queue}/tasks/a b",
        f"{queue}x/",
    ):
        with pytest.raises(ApiError):
            parse_task(bad)


def test_task_id_is_deterministic_and_keeps_parts_apart() -> None:
    assert task_id_for("github", "abc") == task_id_for("github", "abc")
    assert task_id_for("a-b") != task_id_for("a", "b")
    assert task_id_for("github", "abc").endswith("-github_abc")


@given(st.lists(st.text(), min_size=1, max_size=5))
def test_task_id_is_always_valid(parts: list[str]) -> None:
    assert TASK_ID.match(task_id_for(*parts))


@given(
    st.lists(
        st.one_of(st.text(), st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7F))),
        min_size=1,
        max_size=5,
    )
)
def test_task_id_is_the_one_named_by_the_json_of_its_parts(parts: list[str]) -> None:
    """Ids name tasks across deploys (a redelivery finds its task taken): never reworded."""
    digest = hashlib.sha256(json.dumps(parts).encode("utf-8")).hexdigest()
    readable = re.sub(r"[^A-Za-z0-9_-]+", "-", "_".join(parts)).strip("-")
    expected = f"{digest}-{readable}" if readable else digest
    assert task_id_for(*parts) == expected[:500].rstrip("-")


def test_task_id_of_a_huge_part_is_capped_at_500() -> None:
    assert len(task_id_for("x" * 10_000)) == 500
    with pytest.raises(ValueError):
        task_id_for()


def test_task_queue_rejects_a_non_positive_timeout() -> None:
    with pytest.raises(ValueError, match="timeout_s"):
        TaskQueue(make_client("127.0.0.1:1"), "projects/p/locations/l/queues/q", timeout_s=0)


def test_enqueue_raises_enqueue_error_naming_the_task_when_the_emulator_is_down() -> None:
    with refusing_port() as port:
        client = make_client(f"127.0.0.1:{port}")
        queue = TaskQueue(client, "projects/p/locations/l/queues/down", timeout_s=1.0)
        with pytest.raises(EnqueueError, match="tasks/delivery-9") as caught:
            queue.enqueue("http://127.0.0.1:9/", b"{}", task_id="delivery-9")
    assert caught.value.__cause__ is not None


def test_enqueue_passes_its_timeout_on_every_create_task_call(mocker: MockerFixture) -> None:
    client = make_client("127.0.0.1:1")
    create = mocker.patch.object(
        client, "create_task", side_effect=exceptions.DeadlineExceeded("slow")
    )
    queue = TaskQueue(client, "projects/p/locations/l/queues/q", timeout_s=1.5)
    with pytest.raises(EnqueueError, match="tasks/delivery-7"):
        queue.enqueue("http://127.0.0.1:9/", b"{}", task_id="delivery-7")
    # The whole deadline: no client-side retry multiplies it.
    assert (create.call_args.kwargs["timeout"], create.call_args.kwargs["retry"]) == (1.5, None)


def test_the_production_client_keeps_the_transports_options_and_adds_ours(
    mocker: MockerFixture,
) -> None:
    mocker.patch("google.auth.default", return_value=(AnonymousCredentials(), "demo-p"))
    create_channel = mocker.patch.object(
        CloudTasksGrpcTransport, "create_channel", return_value=grpc.insecure_channel("127.0.0.1:1")
    )

    make_client(None)

    (host,), kwargs = create_channel.call_args
    options = dict(kwargs["options"])
    assert host == "cloudtasks.googleapis.com:443"
    assert options["grpc.max_send_message_length"] == -1, "the transport's own options stay"
    assert {name: options[name] for name, _ in CHANNEL_OPTIONS} == dict(CHANNEL_OPTIONS)
    assert isinstance(kwargs["credentials"], AnonymousCredentials)


def test_calls_wait_for_a_ready_channel_and_reconnects_back_off_at_most_a_second() -> None:
    options = dict(CHANNEL_OPTIONS)
    (method,) = json.loads(options["grpc.service_config"])["methodConfig"]
    assert method == {
        "name": [{"service": "google.cloud.tasks.v2.CloudTasks"}],
        "waitForReady": True,
    }
    assert options["grpc.max_reconnect_backoff_ms"] <= 1000


def test_create_request_is_byte_for_byte_what_the_proto_plus_types_build() -> None:
    """The raw-protobuf build (for speed) must put every field where the typed build does."""
    queue = "projects/p/locations/us-central1/queues/q"
    when = dt.datetime(2026, 12, 2, 3, 4, 5, 123456, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    fast = _create_request(
        queue,
        "https://worker.example/",
        b'{"v":1}',
        {"Content-Type": "application/json"},
        name=f"{queue}/tasks/github-abc",
        schedule_time=when,
        oidc=("tasks@p.iam.gserviceaccount.com", "https://worker.example/"),
        dispatch_deadline_s=600.5,
    )
    http = types.HttpRequest(
        url="https://worker.example/",
        http_method=types.HttpMethod.POST,
        headers={"Content-Type": "application/json"},
        body=b'{"v":1}',
        oidc_token=types.OidcToken(
            service_account_email="tasks@p.iam.gserviceaccount.com",
            audience="https://worker.example/",
        ),
    )
    typed = types.CreateTaskRequest(
        parent=queue,
        task=types.Task(
            name=f"{queue}/tasks/github-abc",
            http_request=http,
            schedule_time=when,
            dispatch_deadline=dt.timedelta(seconds=600.5),
        ),
    )
    assert fast.SerializeToString() == types.CreateTaskRequest.serialize(typed)
    bare = _create_request(
        queue,
        "https://w/",
        b"",
        None,
        name="",
        schedule_time=None,
        oidc=None,
        dispatch_deadline_s=None,
    )
    assert not bare.task.name and not bare.task.http_request.oidc_token.service_account_email
    assert not bare.task.HasField("dispatch_deadline")  # unset: the queue's default applies


@pytest.fixture
def create_task_server() -> Iterator[tuple[str, list[tuple[bytes, dict[str, str]]]]]:
    """A gRPC server answering CreateTask (with an ALREADY_EXISTS for a name seen
    before), keeping each request's bytes and metadata; its address and what it kept."""
    seen: list[tuple[bytes, dict[str, str]]] = []

    def create(request: bytes, context: grpc.ServicerContext) -> bytes:
        name = types.CreateTaskRequest.pb().FromString(request).task.name
        if any(types.CreateTaskRequest.pb().FromString(r).task.name == name for r, _ in seen):
            context.abort(grpc.StatusCode.ALREADY_EXISTS, "taken")
        seen.append((request, dict(context.invocation_metadata())))
        return types.Task.pb()(
            name=name or "projects/p/locations/l/queues/q/tasks/made"
        ).SerializeToString()

    handler = grpc.method_handlers_generic_handler(
        "google.cloud.tasks.v2.CloudTasks",
        {"CreateTask": grpc.unary_unary_rpc_method_handler(create)},
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2), handlers=(handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield f"127.0.0.1:{port}", seen
    server.stop(None)


def test_a_task_is_created_on_the_channel_as_the_client_would_create_it(create_task_server) -> None:
    address, seen = create_task_server
    queue_path = "projects/p/locations/l/queues/q"
    direct = TaskQueue(make_client(address), queue_path)
    through_client = make_client(address)
    stock = type(through_client).create_task
    through_client.create_task = lambda **kwargs: stock(through_client, **kwargs)  # type: ignore[method-assign]
    wrapped = TaskQueue(through_client, queue_path)
    options = {"oidc_service_account": "t@p.iam.gserviceaccount.com", "dispatch_deadline_s": 60}

    made = [
        queue.enqueue(
            "https://w/", b"{}", {"Content-Type": "application/json"}, task_id=name, **options
        )  # type: ignore[arg-type]
        for queue, name in ((direct, "a"), (wrapped, "b"), (direct, "a"), (direct, None))
    ]

    assert [result.status for result in made] == ["created", "created", "duplicate", "created"]
    assert made[3].task_name == "projects/p/locations/l/queues/q/tasks/made"
    (first, by_direct), (second, by_client), _ = seen
    assert first == second.replace(b"tasks/b", b"tasks/a"), "the same request"
    for name in ("x-goog-request-params", "x-goog-api-client"):
        assert by_direct[name] == by_client[name], name
