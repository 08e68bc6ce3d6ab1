"""Hand-off to Cloud Tasks: named HTTP tasks, with ALREADY_EXISTS reported as a duplicate.

    make_client(emulator_host)                -> CloudTasksClient (emulator or production)
    CHANNEL_OPTIONS                           gRPC channel args both clients are built with
    TaskQueue(client, queue_path, timeout_s)  .enqueue(url, body, ...) -> EnqueueResult
    ensure_queue(client, queue_path, ...)     -> Queue (create-or-get, local set-up)
    task_id_for(*parts)                       -> a valid, deterministic task id

A blip of Cloud Tasks must not turn into lost pushes (GitHub never retries a 503): the
channel waits for the service to be ready instead of failing fast, and reconnects on a
short, bounded backoff, so a call made while the service is down succeeds as soon as it
is back, within the call's own deadline:

    t=0     Cloud Tasks goes away; the channel enters reconnect backoff (100 ms .. 1 s)
    t=1.0   enqueue(timeout_s=5): waits for the channel (waitForReady), not UNAVAILABLE
    t=1.4   Cloud Tasks is back; the next reconnect (<= 1 s later) makes the channel READY
    t=2.2   CreateTask runs: created                       (else DEADLINE at t=6: EnqueueError)

`enqueue` sends CreateTask on the client's own channel, with the metadata the client
would send, not through the client's per-call wrappers (~70 µs of Python a task, more than
every check of the ingress; `TaskQueue._send`); a client whose `create_task` a test or a
bench replaced is called through that method.

Exceptions (every one names the task or queue, and chains the client's error):

    TasksError
    ├── EnqueueError      CreateTask failed or timed out (not ALREADY_EXISTS)
    └── QueueSetupError   ensure_queue could neither create nor read the queue
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import grpc
from google.api_core import exceptions as api_exceptions
from google.api_core.gapic_v1 import routing_header
from google.cloud.tasks_v2 import CloudTasksClient, types
from google.cloud.tasks_v2.services.cloud_tasks.transports import CloudTasksGrpcTransport
from google.cloud.tasks_v2.services.cloud_tasks.transports.base import DEFAULT_CLIENT_INFO

from shared import tracing
from shared.errors import HookledgerError, TransientError
from shared.retry import Backoff, RetryPolicy

MAX_TASK_ID_CHARS = 500
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")
# The characters `json.dumps` writes as they are: printable ASCII but `"` and `\`.
_AS_IS = re.compile(r"[ !#-\[\]-~]*")
_SERVICE = "google.cloud.tasks.v2.CloudTasks"
# Every method waits for a ready channel (gRPC "wait for ready") rather than failing at
# once while the channel is in reconnect backoff; the call's deadline still bounds it.
_SERVICE_CONFIG = json.dumps(
    {"methodConfig": [{"name": [{"service": _SERVICE}], "waitForReady": True}]}
)
# The shared retry policy (shared/retry.py) for Cloud Tasks calls: ONE attempt per call
# (the sender's or the queue's schedule is the retry: a second CreateTask inside one
# webhook answer would only spend its deadline), and the channel's reconnect backoff
# from the policy's: gRPC's default grows to 120 s; a blip of seconds must heal in about one.
TASKS_POLICY = RetryPolicy(backoff=Backoff(attempts=1, first_s=0.1, cap_s=1.0))
CHANNEL_OPTIONS: tuple[tuple[str, Any], ...] = (
    ("grpc.service_config", _SERVICE_CONFIG),
    ("grpc.initial_reconnect_backoff_ms", round(TASKS_POLICY.backoff.first_s * 1000)),
    ("grpc.min_reconnect_backoff_ms", round(TASKS_POLICY.backoff.first_s * 1000)),
    ("grpc.max_reconnect_backoff_ms", round(TASKS_POLICY.backoff.cap_s * 1000)),
)


class TasksError(HookledgerError, RuntimeError):
    """Base of this module's errors."""


class EnqueueError(TasksError, TransientError):
    """A task could not be created; the sender should be told to retry (503).

    Transient whatever the cause (a missing permission is fixed by a deployment, and the
    sender's retry then succeeds). `status` is the HTTP status of the client's error
    when it has one, and `TASKS_POLICY.retryable(status)` says whether it was a blip."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class QueueSetupError(TasksError):
    """A queue could not be created or read."""


@dataclass(frozen=True)
class EnqueueResult:
    """`created`: this call made the task; `duplicate`: a task with that name exists or ran."""

    status: Literal["created", "duplicate"]
    task_name: str


def make_client(emulator_host: str | None) -> CloudTasksClient:
    """A client for the emulator at `host:port` (insecure gRPC), else the production default.

    Both channels are built with `CHANNEL_OPTIONS`: calls wait for a ready channel (up to
    their deadline) and reconnects back off at most 1 s.
    """
    if emulator_host:
        channel = grpc.insecure_channel(emulator_host, options=list(CHANNEL_OPTIONS))
        return CloudTasksClient(transport=CloudTasksGrpcTransport(channel=channel))
    return CloudTasksClient(transport=_production_transport)


def _production_transport(**kwargs: Any) -> CloudTasksGrpcTransport:
    """The client's own gRPC transport (endpoint, credentials, mTLS as it chose them)."""
    return CloudTasksGrpcTransport(channel=_production_channel, **kwargs)


def _production_channel(host: str, **kwargs: Any) -> grpc.Channel:
    """`CloudTasksGrpcTransport.create_channel`, with our options after the transport's."""
    options: Sequence[tuple[str, Any]] = kwargs.pop("options", None) or ()
    return CloudTasksGrpcTransport.create_channel(
        host, options=[*options, *CHANNEL_OPTIONS], **kwargs
    )


def task_id_for(*parts: str) -> str:
    """A task id made from `parts`: the same parts always give the same id, others never do.

    A SHA-256 hex of the parts comes first (Cloud Tasks advises against sequential
    prefixes), then a readable, sanitized join of them; only letters, digits, `-` and
    `_`, at most 500 characters.
    """
    if not parts:
        raise ValueError("task_id_for needs at least one part")
    joined = "_".join(parts)
    # JSON keeps ("a-b",) and ("a", "b") apart. Parts JSON writes as they are (the usual
    # ids and digests) are quoted here, the same text without json.dumps's machinery.
    if _AS_IS.fullmatch(joined):
        listed = '["' + '", "'.join(parts) + '"]'
    else:
        listed = json.dumps(list(parts))
    digest = hashlib.sha256(listed.encode("utf-8")).hexdigest()
    readable = _UNSAFE.sub("-", joined).strip("-")
    task_id = f"{digest}-{readable}" if readable else digest
    return task_id[:MAX_TASK_ID_CHARS].rstrip("-")


class TaskQueue:
    """Creates HTTP tasks in one queue; `timeout_s` is each call's whole deadline.

    No client-side retry runs inside it (`TASKS_POLICY`: one attempt): a call waits for
    the channel to be ready and answers (or raises `EnqueueError`) within `timeout_s`.
    """

    def __init__(self, client: CloudTasksClient, queue_path: str, timeout_s: float = 5.0) -> None:
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s}")
        self.client = client
        self.queue_path = queue_path
        self.timeout_s = timeout_s
        self._direct = _direct_create_task(client)
        # What the client sends with every CreateTask: the routing header and its version.
        self._metadata = (
            routing_header.to_grpc_metadata((("parent", queue_path),)),
            DEFAULT_CLIENT_INFO.to_grpc_metadata(),
        )

    def task_path(self, task_id: str) -> str:
        return f"{self.queue_path}/tasks/{task_id}"

    def enqueue(
        self,
        url: str,
        body: bytes,
        headers: Mapping[str, str] | None = None,
        *,
        task_id: str | None = None,
        schedule_time: dt.datetime | None = None,
        oidc_service_account: str | None = None,
        oidc_audience: str | None = None,
        dispatch_deadline_s: float | None = None,
    ) -> EnqueueResult:
        """Create a POST task to `url`; ALREADY_EXISTS gives status `duplicate`.

        Raises `EnqueueError` (naming the task) on any other failure or on timeout.
        """
        name = self.task_path(task_id) if task_id is not None else ""
        with tracing.span("tasks.create_task", kind="producer", task_id=task_id) as span:
            if tracing.enabled():  # Cloud Tasks forwards a task's headers: the trace crosses
                headers = tracing.with_traceparent(headers or {})
            request = _create_request(
                self.queue_path,
                url,
                body,
                headers,
                name=name,
                schedule_time=schedule_time,
                oidc=(oidc_service_account, oidc_audience or "") if oidc_service_account else None,
                dispatch_deadline_s=dispatch_deadline_s,
            )
            result = self._create(request, name)
            span.set(created=result.status)
        return result

    def _create(self, request: Any, name: str) -> EnqueueResult:
        """Send `request` (task `name`, or "" for a generated one), errors as the class says."""
        label = name or f"a new task in {self.queue_path}"
        try:
            made = self._send(request, name)
        except api_exceptions.AlreadyExists:
            return EnqueueResult(status="duplicate", task_name=name)
        except api_exceptions.GoogleAPICallError as exc:
            status = int(exc.code) if exc.code is not None else None
            raise EnqueueError(f"CreateTask failed for {label}: {exc}", status=status) from exc
        except api_exceptions.GoogleAPIError as exc:
            raise EnqueueError(f"CreateTask failed for {label}: {exc}") from exc
        except grpc.RpcError as exc:  # the client re-raises some transport errors raw
            raise EnqueueError(f"CreateTask failed for {label}: {exc}") from exc
        return EnqueueResult(status="created", task_name=made)

    def _send(self, request: Any, name: str) -> str:
        """CreateTask of the raw `request` (task `name`, or "") on the client's channel,
        errors as the client raises them; the name of the task made.

        The client's own `create_task` wraps each call in ~70 µs of Python (retry and
        timeout wrappers, error mapping, a logging interceptor, proto-plus on both ends),
        more than all the ingress's checks; the direct call sends the same request with the
        same metadata on the same channel (its credentials, `CHANNEL_OPTIONS`). A client
        whose `create_task` was replaced (a test's mock, bench.cost's counter) is called
        through it.
        """
        if self._direct is not None and _as_shipped(self.client):
            try:
                made = self._direct(request, timeout=self.timeout_s, metadata=self._metadata)
            except grpc.RpcError as exc:
                raise api_exceptions.from_grpc_error(exc) from exc  # as the client's wrapper
            # The name asked for is the name made: the answer is read for a generated one.
            return name or str(_TASK.FromString(made).name)
        # retry=None: the timeout is the gRPC deadline itself, not one per attempt.
        created = self.client.create_task(
            request=types.CreateTaskRequest.wrap(request), retry=None, timeout=self.timeout_s
        )
        return name or str(created.name)


_CREATE_TASK = f"/{_SERVICE}/CreateTask"


def _direct_create_task(client: CloudTasksClient) -> Any:
    """CreateTask on `client`'s gRPC channel (raw messages in and out), or None."""
    transport = getattr(client, "transport", None)
    if not isinstance(transport, CloudTasksGrpcTransport):
        return None
    return transport.grpc_channel.unary_unary(
        _CREATE_TASK, request_serializer=_REQUEST.SerializeToString, response_deserializer=None
    )


def _as_shipped(client: CloudTasksClient) -> bool:
    """`client.create_task` is the library's own, neither mocked nor wrapped."""
    method = type(client).create_task
    return "create_task" not in vars(client) and (
        getattr(method, "__qualname__", "") == "CloudTasksClient.create_task"
        and getattr(method, "__module__", "") == CloudTasksClient.__module__
    )


def _create_request(
    queue_path: str,
    url: str,
    body: bytes,
    headers: Mapping[str, str] | None,
    *,
    name: str,
    schedule_time: dt.datetime | None,
    oidc: tuple[str, str] | None,
    dispatch_deadline_s: float | None,
) -> Any:
    """The CreateTask request, a raw protobuf (`types.CreateTaskRequest.pb()`).

    Setting fields through proto-plus marshals each one (an `OidcToken` and a
    `timedelta` cost ~0.3 ms a call on the ingress's hot path, bench/ack.py); the
    raw message gives the same bytes in a few microseconds, and a copy of the parts
    every task to one target shares (`_request_template`) in fewer still.
    """
    raw = _REQUEST()
    raw.CopyFrom(_request_template(queue_path, url, oidc, dispatch_deadline_s))
    task = raw.task
    task.name = name
    http = task.http_request
    if headers:
        http.headers.update(headers)
    http.body = body
    if schedule_time is not None:
        task.schedule_time.FromDatetime(schedule_time)
    return raw


_REQUEST = types.CreateTaskRequest.pb()
_TASK = types.Task.pb()


# A process's hand-offs name a few targets (the worker, reconcile's pages): a few templates.
@functools.lru_cache(maxsize=32)
def _request_template(
    queue_path: str, url: str, oidc: tuple[str, str] | None, dispatch_deadline_s: float | None
) -> Any:
    """What every CreateTask request to `url` in `queue_path` shares; copied, never changed."""
    raw = _REQUEST(parent=queue_path)
    http = raw.task.http_request
    http.url = url
    http.http_method = types.HttpMethod.POST
    if oidc is not None:
        http.oidc_token.service_account_email, http.oidc_token.audience = oidc
    if dispatch_deadline_s is not None:
        raw.task.dispatch_deadline.FromTimedelta(dt.timedelta(seconds=dispatch_deadline_s))
    return raw


def ensure_queue(
    client: CloudTasksClient,
    queue_path: str,
    *,
    retry_config: types.RetryConfig | None = None,
    rate_limits: types.RateLimits | None = None,
    timeout_s: float = 5.0,
) -> types.Queue:
    """Create the queue with these settings, or return it as it is when it already exists."""
    parent = queue_path.split("/queues/", 1)[0]
    queue = types.Queue(name=queue_path)
    if retry_config is not None:
        queue.retry_config = retry_config
    if rate_limits is not None:
        queue.rate_limits = rate_limits
    try:
        return client.create_queue(parent=parent, queue=queue, timeout=timeout_s)
    except api_exceptions.AlreadyExists:
        pass
    except api_exceptions.GoogleAPIError as exc:
        raise QueueSetupError(f"CreateQueue failed for {queue_path}: {exc}") from exc
    try:
        return client.get_queue(name=queue_path, timeout=timeout_s)
    except api_exceptions.GoogleAPIError as exc:
        raise QueueSetupError(f"GetQueue failed for {queue_path}: {exc}") from exc
