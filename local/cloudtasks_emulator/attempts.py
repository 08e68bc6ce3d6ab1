"""One dispatch attempt: what is sent (headers), what came back, and when the retry goes.

Free of locks and I/O: the store calls these under its lock, the dispatcher sends the job.
Every rule cites the Cloud Tasks v2 reference (`HttpRequest`, `RetryConfig`, and the
"Create HTTP target tasks" page, section "Reading request headers").
"""

from __future__ import annotations

import email.utils
from dataclasses import dataclass, field
from typing import Any

from local.cloudtasks_emulator.model import RetryPolicy, TaskRecord

HTTP_METHODS = {
    0: "POST",
    1: "POST",
    2: "GET",
    3: "HEAD",
    4: "PUT",
    5: "DELETE",
    6: "PATCH",
    7: "OPTIONS",
}
# Headers Cloud Tasks computes or reserves itself; a task's own values are dropped.
_RESERVED_PREFIXES = ("x-cloudtasks-", "x-google-", "x-appengine-")
_RESERVED = {"host", "content-length", "user-agent"}
# HttpRequest reference: "if the worker returns 429 (Too Many Requests), 503 (Service
# Unavailable) ... Cloud Tasks will use a higher backoff rate. The retry specified in the
# Retry-After HTTP response header is considered."
THROTTLING_STATUSES = frozenset({429, 503})
# The reference gives no figure for "higher": the emulator doubles the retry's backoff.
THROTTLED_BACKOFF_FACTOR = 2.0


def http_to_rpc(status: int) -> int:
    """google.rpc.Code for an HTTP answer, as the API reports it in Attempt.response_status."""
    table = {400: 3, 401: 16, 403: 7, 404: 5, 409: 10, 429: 8, 499: 1, 501: 12, 503: 14, 504: 4}
    if 200 <= status < 300:
        return 0
    if status in table:
        return table[status]
    return 13 if status >= 500 else 9


@dataclass(frozen=True)
class DispatchJob:
    """One attempt handed to the dispatcher; `generation` ties the answer to this attempt."""

    queue_id: str
    task_name: str
    generation: int
    attempt: int
    url: str
    method: str
    headers: dict[str, str]
    body: bytes
    deadline_s: float  # already scaled
    oidc_email: str | None
    oidc_audience: str | None
    # The task as created: a result for it never touches a later task of the same name
    # (its queue deleted and created again while this attempt ran).
    record: Any = field(compare=False, repr=False)


@dataclass(frozen=True)
class Outcome:
    """What the target did: an HTTP status, or none (deadline, connection error) with a reason.

    `retry_after` is the answer's raw `Retry-After` header, if any.
    """

    http_status: int | None
    rpc_code: int
    message: str
    retry_after: str | None = None


def dispatch_headers(queue_id: str, task: TaskRecord, retry_count: int) -> dict[str, str]:
    """The request headers of the attempt about to start: the task's own, minus the reserved
    ones, plus the `X-CloudTasks-*` headers of the "Create HTTP target tasks" page.

    `X-CloudTasks-TaskPreviousResponse` and `-TaskRetryReason` ("might" be sent, says the
    page) come only on an attempt whose previous attempt got an HTTP answer. The page
    documents no value for the retry reason, and what the service sends for HTTP targets
    is empty (googleapis/nodejs-tasks#344; captured in aertje/cloud-tasks-emulator#114):
    the emulator sends it empty too, so nobody comes to depend on a made-up value.
    """
    headers = {
        k: v
        for k, v in task.headers.items()
        if k.lower() not in _RESERVED and not k.lower().startswith(_RESERVED_PREFIXES)
    }
    headers.update(
        {
            "User-Agent": "Google-Cloud-Tasks",
            "X-CloudTasks-QueueName": queue_id,
            "X-CloudTasks-TaskName": task.short_id,
            "X-CloudTasks-TaskRetryCount": str(retry_count),
            "X-CloudTasks-TaskExecutionCount": str(task.execution_count),
            "X-CloudTasks-TaskETA": f"{task.schedule_time:.6f}",
        }
    )
    if task.previous_response is not None:
        headers["X-CloudTasks-TaskPreviousResponse"] = str(task.previous_response)
        headers["X-CloudTasks-TaskRetryReason"] = ""
    return headers


def parse_retry_after(value: str | None, now: float) -> float | None:
    """Seconds to wait from `now` per a `Retry-After` value (RFC 9110 section 10.2.3:
    delay-seconds or an HTTP-date); None when absent or unreadable. Never negative."""
    if value is None:
        return None
    text = value.strip()
    if text.isdigit():
        return float(text)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # an HTTP-date is always GMT
        return None
    return max(0.0, when.timestamp() - now)


def retry_delay_s(policy: RetryPolicy, retry_index: int, outcome: Outcome, now: float) -> float:
    """Seconds (unscaled) before retry number `retry_index` (0 = the first retry).

    The RetryConfig backoff; on 429/503 twice that, and longer still when `Retry-After`
    asks for longer. Always within [min_backoff, max_backoff], the range RetryConfig
    promises ("A task will be scheduled for retry between min_backoff and max_backoff").
    """
    delay = policy.backoff_s(retry_index)
    if outcome.http_status in THROTTLING_STATUSES:
        delay *= THROTTLED_BACKOFF_FACTOR
        asked = parse_retry_after(outcome.retry_after, now)
        if asked is not None:
            delay = max(delay, asked)
    return min(max(delay, policy.min_backoff_s), policy.max_backoff_s)
