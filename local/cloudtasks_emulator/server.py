"""The gRPC service `google.cloud.tasks.v2.CloudTasks`, as the unmodified client calls it.

The package ships no servicer, so the method table is built here from the proto-plus
types' own `serialize`/`deserialize`. Each handler converts protos to `model` records
and back; every `ApiError` becomes the gRPC status the real API answers, and an
unexpected exception becomes INTERNAL with the method named, never a dropped call.
"""

from __future__ import annotations

import datetime as dt
import traceback
from collections.abc import Callable
from concurrent import futures
from dataclasses import replace
from typing import Any

import grpc
from google.cloud.tasks_v2 import types
from google.protobuf import empty_pb2
from google.rpc import status_pb2

from local.cloudtasks_emulator.dispatcher import Dispatcher
from local.cloudtasks_emulator.model import (
    DEFAULT_DISPATCH_DEADLINE_S,
    DEFAULT_RATE,
    DEFAULT_RETRY,
    ApiError,
    QueueRecord,
    RatePolicy,
    RetryPolicy,
    TaskRecord,
    invalid,
)
from local.cloudtasks_emulator.store import PAUSED, RUNNING, Store

SERVICE = "google.cloud.tasks.v2.CloudTasks"
_DURATIONS = {"max_retry_duration", "min_backoff", "max_backoff"}
_RETRY_FIELDS = {"max_attempts", "max_doublings", *_DURATIONS}
_RATE_FIELDS = {"max_dispatches_per_second", "max_concurrent_dispatches"}
_MAX_TASK_PAGE = 1000
_MAX_QUEUE_PAGE = 9800


def _ts(seconds: float | None) -> dt.datetime | None:
    return None if seconds is None else dt.datetime.fromtimestamp(seconds, tz=dt.UTC)


# ---- protos <-> records -------------------------------------------------------------------


def retry_from_proto(
    config: types.RetryConfig, base: RetryPolicy, fields: set[str] = _RETRY_FIELDS
) -> RetryPolicy:
    """`base` with `fields` taken from `config`; a zero (unset in proto3) means the default."""
    values: dict[str, Any] = {}
    for name in fields:
        if name in _DURATIONS:
            seconds = getattr(config, name).total_seconds()
            values[f"{name}_s"] = seconds or getattr(DEFAULT_RETRY, f"{name}_s")
        else:
            values[name] = getattr(config, name) or getattr(DEFAULT_RETRY, name)
    return replace(base, **values)


def rate_from_proto(
    limits: types.RateLimits, base: RatePolicy, fields: set[str] = _RATE_FIELDS
) -> RatePolicy:
    values = {name: getattr(limits, name) or getattr(DEFAULT_RATE, name) for name in fields}
    return replace(base, **values)


def queue_to_proto(queue: QueueRecord) -> types.Queue:
    retry = queue.retry
    message = types.Queue(
        name=queue.name,
        state=queue.state,
        rate_limits=types.RateLimits(
            max_dispatches_per_second=queue.rate.max_dispatches_per_second,
            max_burst_size=queue.rate.max_burst_size,
            max_concurrent_dispatches=queue.rate.max_concurrent_dispatches,
        ),
        retry_config=types.RetryConfig(
            max_attempts=retry.max_attempts,
            max_retry_duration=dt.timedelta(seconds=retry.max_retry_duration_s),
            min_backoff=dt.timedelta(seconds=retry.min_backoff_s),
            max_backoff=dt.timedelta(seconds=retry.max_backoff_s),
            max_doublings=retry.max_doublings,
        ),
    )
    if queue.purge_time is not None:
        message.purge_time = _ts(queue.purge_time)
    if queue.http_target:
        message.http_target = types.HttpTarget.deserialize(queue.http_target)
    if queue.logging_config:
        message.stackdriver_logging_config = types.StackdriverLoggingConfig.deserialize(
            queue.logging_config
        )
    return message


def _attempt_to_proto(attempt: Any, full: bool) -> types.Attempt:
    message = types.Attempt(dispatch_time=_ts(attempt.dispatch_time))
    if full:
        message.schedule_time = _ts(attempt.schedule_time)
        if attempt.response_time is not None:
            message.response_time = _ts(attempt.response_time)
            message.response_status = status_pb2.Status(
                code=attempt.status_code, message=attempt.status_message
            )
    return message


def task_to_proto(task: TaskRecord, view: int) -> types.Task:
    """The task as the API returns it; the BASIC view (also for 0 = unspecified) omits the body."""
    full = view == types.Task.View.FULL
    request = types.HttpRequest(
        url=task.url, http_method=task.http_method or 1, headers=task.headers
    )
    if full:
        request.body = task.body
    if task.oidc_email is not None:
        request.oidc_token = types.OidcToken(
            service_account_email=task.oidc_email, audience=task.oidc_audience or ""
        )
    message = types.Task(
        name=task.name,
        http_request=request,
        schedule_time=_ts(task.schedule_time),
        create_time=_ts(task.create_time),
        dispatch_deadline=dt.timedelta(seconds=task.dispatch_deadline_s),
        dispatch_count=task.dispatch_count,
        response_count=task.response_count,
        view=types.Task.View.FULL if full else types.Task.View.BASIC,
    )
    if task.first_attempt is not None:
        message.first_attempt = _attempt_to_proto(task.first_attempt, full=False)
    if task.last_attempt is not None:
        message.last_attempt = _attempt_to_proto(task.last_attempt, full=True)
    if task.retry is not None:
        message.retry_config = types.RetryConfig(
            max_attempts=task.retry.max_attempts,
            max_retry_duration=dt.timedelta(seconds=task.retry.max_retry_duration_s),
            min_backoff=dt.timedelta(seconds=task.retry.min_backoff_s),
            max_backoff=dt.timedelta(seconds=task.retry.max_backoff_s),
            max_doublings=task.retry.max_doublings,
        )
    return message


def task_from_proto(task: types.Task) -> TaskRecord:
    if "app_engine_http_request" in task:
        raise ApiError(
            grpc.StatusCode.UNIMPLEMENTED,
            f"Task {task.name!r}: App Engine tasks are not supported by the local emulator",
        )
    if "http_request" not in task:
        raise invalid(f"Task {task.name!r}: http_request is required")
    request = task.http_request
    if "oauth_token" in request:
        raise ApiError(
            grpc.StatusCode.UNIMPLEMENTED,
            f"Task {task.name!r}: oauth_token is not supported by the local emulator; "
            "use oidc_token",
        )
    oidc = request.oidc_token if "oidc_token" in request else None
    deadline = (
        task.dispatch_deadline.total_seconds()
        if "dispatch_deadline" in task
        else DEFAULT_DISPATCH_DEADLINE_S
    )
    return TaskRecord(
        name=task.name,
        url=request.url,
        http_method=int(request.http_method) or 1,
        headers=dict(request.headers),
        body=bytes(request.body),
        oidc_email=oidc.service_account_email if oidc is not None else None,
        oidc_audience=(oidc.audience or None) if oidc is not None else None,
        schedule_time=task.schedule_time.timestamp() if "schedule_time" in task else 0.0,
        create_time=0.0,
        dispatch_deadline_s=deadline,
        retry=(
            retry_from_proto(task.retry_config, DEFAULT_RETRY) if "retry_config" in task else None
        ),
    )


def _page(items: list[Any], page_size: int, token: str, maximum: int) -> tuple[list[Any], str]:
    if page_size < 0:
        raise invalid(f"page_size must not be negative, got {page_size}")
    size = min(page_size or maximum, maximum)
    try:
        start = int(token) if token else 0
    except ValueError:
        raise invalid(f"Invalid page_token {token!r}") from None
    if start < 0:
        raise invalid(f"Invalid page_token {token!r}")
    end = start + size
    return items[start:end], (str(end) if end < len(items) else "")


# ---- the service ----------------------------------------------------------------------------


class CloudTasksService:
    """One method per RPC; each takes the request and returns the response message."""

    def __init__(self, store: Store, dispatcher: Dispatcher) -> None:
        self.store = store
        self.dispatcher = dispatcher

    # queues
    def ListQueues(self, request: types.ListQueuesRequest) -> types.ListQueuesResponse:
        text = request.filter.replace(" ", "")
        states = {"": None, "state:RUNNING": RUNNING, "state:PAUSED": PAUSED}
        if text not in states:
            raise invalid(f"Unsupported filter {request.filter!r}: use 'state: PAUSED|RUNNING'")
        queues = self.store.list_queues(request.parent, states[text])
        page, token = _page(queues, request.page_size, request.page_token, _MAX_QUEUE_PAGE)
        return types.ListQueuesResponse(
            queues=[queue_to_proto(q) for q in page], next_page_token=token
        )

    def GetQueue(self, request: types.GetQueueRequest) -> types.Queue:
        return queue_to_proto(self.store.get_queue(request.name))

    def CreateQueue(self, request: types.CreateQueueRequest) -> types.Queue:
        queue = request.queue
        record = QueueRecord(
            name=queue.name,
            state=RUNNING,
            retry=retry_from_proto(queue.retry_config, DEFAULT_RETRY),
            rate=rate_from_proto(queue.rate_limits, DEFAULT_RATE),
            http_target=types.HttpTarget.serialize(queue.http_target)
            if "http_target" in queue
            else b"",
            logging_config=types.StackdriverLoggingConfig.serialize(
                queue.stackdriver_logging_config
            )
            if "stackdriver_logging_config" in queue
            else b"",
        )
        return queue_to_proto(self.store.create_queue(request.parent, record))

    def UpdateQueue(self, request: types.UpdateQueueRequest) -> types.Queue:
        queue = request.queue
        paths = list(request.update_mask.paths) if "update_mask" in request else []
        allowed = (
            {"retry_config", "rate_limits", "http_target", "stackdriver_logging_config"}
            | {f"retry_config.{f}" for f in _RETRY_FIELDS}
            | {f"rate_limits.{f}" for f in _RATE_FIELDS}
            | {"app_engine_routing_override"}
        )
        for path in paths:
            if path not in allowed:
                raise invalid(
                    f"update_mask path {path!r} cannot be updated on queue {queue.name!r}"
                )
        every = not paths

        def change(current: QueueRecord | None) -> QueueRecord:
            record = current or QueueRecord(name=queue.name, state=RUNNING)
            retry_fields = (
                set(_RETRY_FIELDS)
                if every or "retry_config" in paths
                else {p.split(".", 1)[1] for p in paths if p.startswith("retry_config.")}
            )
            rate_fields = (
                set(_RATE_FIELDS)
                if every or "rate_limits" in paths
                else {p.split(".", 1)[1] for p in paths if p.startswith("rate_limits.")}
            )
            record.retry = retry_from_proto(queue.retry_config, record.retry, retry_fields)
            record.rate = rate_from_proto(queue.rate_limits, record.rate, rate_fields)
            if every or "http_target" in paths:
                record.http_target = (
                    types.HttpTarget.serialize(queue.http_target) if "http_target" in queue else b""
                )
            if every or "stackdriver_logging_config" in paths:
                record.logging_config = (
                    types.StackdriverLoggingConfig.serialize(queue.stackdriver_logging_config)
                    if "stackdriver_logging_config" in queue
                    else b""
                )
            return record

        return queue_to_proto(self.store.update_queue(queue.name, change))

    def DeleteQueue(self, request: types.DeleteQueueRequest) -> empty_pb2.Empty:
        self.store.delete_queue(request.name)
        return empty_pb2.Empty()

    def PurgeQueue(self, request: types.PurgeQueueRequest) -> types.Queue:
        return queue_to_proto(self.store.purge_queue(request.name))

    def PauseQueue(self, request: types.PauseQueueRequest) -> types.Queue:
        return queue_to_proto(self.store.set_state(request.name, PAUSED))

    def ResumeQueue(self, request: types.ResumeQueueRequest) -> types.Queue:
        return queue_to_proto(self.store.set_state(request.name, RUNNING))

    # tasks
    def ListTasks(self, request: types.ListTasksRequest) -> types.ListTasksResponse:
        tasks = self.store.list_tasks(request.parent)
        page, token = _page(tasks, request.page_size, request.page_token, _MAX_TASK_PAGE)
        view = int(request.response_view)
        return types.ListTasksResponse(
            tasks=[task_to_proto(t, view) for t in page], next_page_token=token
        )

    def GetTask(self, request: types.GetTaskRequest) -> types.Task:
        return task_to_proto(self.store.get_task(request.name), int(request.response_view))

    def CreateTask(self, request: types.CreateTaskRequest) -> types.Task:
        record = task_from_proto(request.task)
        created = self.store.create_task(request.parent, record)
        return task_to_proto(created, int(request.response_view))

    def DeleteTask(self, request: types.DeleteTaskRequest) -> empty_pb2.Empty:
        self.store.delete_task(request.name)
        return empty_pb2.Empty()

    def RunTask(self, request: types.RunTaskRequest) -> types.Task:
        task, job = self.store.run_task(request.name)
        self.dispatcher.launch(job)
        return task_to_proto(task, int(request.response_view))


_METHODS: dict[str, tuple[Any, Callable[[Any], bytes]]] = {
    "ListQueues": (types.ListQueuesRequest, types.ListQueuesResponse.serialize),
    "GetQueue": (types.GetQueueRequest, types.Queue.serialize),
    "CreateQueue": (types.CreateQueueRequest, types.Queue.serialize),
    "UpdateQueue": (types.UpdateQueueRequest, types.Queue.serialize),
    "DeleteQueue": (types.DeleteQueueRequest, empty_pb2.Empty.SerializeToString),
    "PurgeQueue": (types.PurgeQueueRequest, types.Queue.serialize),
    "PauseQueue": (types.PauseQueueRequest, types.Queue.serialize),
    "ResumeQueue": (types.ResumeQueueRequest, types.Queue.serialize),
    "ListTasks": (types.ListTasksRequest, types.ListTasksResponse.serialize),
    "GetTask": (types.GetTaskRequest, types.Task.serialize),
    "CreateTask": (types.CreateTaskRequest, types.Task.serialize),
    "DeleteTask": (types.DeleteTaskRequest, empty_pb2.Empty.SerializeToString),
    "RunTask": (types.RunTaskRequest, types.Task.serialize),
}


def _handler(
    method: str, call: Callable[[Any], Any], log: Callable[[str], None]
) -> Callable[[Any, grpc.ServicerContext], Any]:
    def handle(request: Any, context: grpc.ServicerContext) -> Any:
        try:
            return call(request)
        except ApiError as exc:
            context.abort(exc.code, exc.message)
        except Exception as exc:
            log(f"error {method}: {type(exc).__name__}: {exc}\n{traceback.format_exc()}")
            context.abort(grpc.StatusCode.INTERNAL, f"{method} failed: {type(exc).__name__}")

    return handle


def build_server(
    service: CloudTasksService, address: str, log: Callable[[str], None]
) -> grpc.Server:
    """A gRPC server bound to `address`, not yet started; raises `OSError` if it cannot bind."""
    handlers = {
        name: grpc.unary_unary_rpc_method_handler(
            _handler(name, getattr(service, name), log),
            request_deserializer=request_type.deserialize,
            response_serializer=serialize,
        )
        for name, (request_type, serialize) in _METHODS.items()
    }
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16, thread_name_prefix="rpc"))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
    if server.add_insecure_port(address) == 0:
        raise OSError(f"cannot bind the gRPC server to {address}")
    return server
