"""Plain data and rules of Cloud Tasks v2, free of gRPC: names, defaults, retry schedule.

Everything here follows the public v2 API reference; the defaults are what
`gcloud tasks queues describe` shows for a queue created without settings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import grpc

_PROJECT = r"[A-Za-z0-9\-:.]+"
_LOCATION = r"[A-Za-z0-9\-]+"
_QUEUE = r"[A-Za-z0-9\-]{1,100}"
_TASK = r"[A-Za-z0-9_\-]{1,500}"
# Matched with fullmatch: `$` would accept a trailing newline.
LOCATION_RE = re.compile(rf"projects/{_PROJECT}/locations/{_LOCATION}")
QUEUE_RE = re.compile(rf"(projects/{_PROJECT}/locations/{_LOCATION})/queues/({_QUEUE})")
TASK_RE = re.compile(
    rf"(projects/{_PROJECT}/locations/{_LOCATION}/queues/{_QUEUE})/tasks/({_TASK})"
)

# Bounds the v2 API enforces.
MAX_DISPATCHES_PER_SECOND = 500.0
MAX_CONCURRENT_DISPATCHES = 5000
MIN_DISPATCH_DEADLINE_S = 15.0
MAX_DISPATCH_DEADLINE_S = 30 * 60.0
DEFAULT_DISPATCH_DEADLINE_S = 10 * 60.0
MAX_SCHEDULE_AHEAD_S = 30 * 24 * 3600.0
MAX_URL_CHARS = 2083
RUNNING, PAUSED = 1, 2  # google.cloud.tasks.v2.Queue.State


class ApiError(Exception):
    """A request the real API would refuse: carries the gRPC status code and a message."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def invalid(message: str) -> ApiError:
    return ApiError(grpc.StatusCode.INVALID_ARGUMENT, message)


def parse_location(parent: str) -> str:
    if not LOCATION_RE.fullmatch(parent or ""):
        raise invalid(f"Invalid resource field value in the request: parent {parent!r}")
    return parent


def parse_queue(name: str) -> tuple[str, str]:
    """(location path, queue id) of a queue name; INVALID_ARGUMENT when malformed."""
    match = QUEUE_RE.fullmatch(name or "")
    if not match:
        raise invalid(
            f"Invalid queue name {name!r}: expected "
            "projects/PROJECT_ID/locations/LOCATION_ID/queues/QUEUE_ID "
            "(QUEUE_ID: letters, digits, hyphens, at most 100)"
        )
    return match.group(1), match.group(2)


def parse_task(name: str) -> tuple[str, str]:
    """(queue path, task id) of a task name; INVALID_ARGUMENT when malformed."""
    match = TASK_RE.fullmatch(name or "")
    if not match:
        raise invalid(
            f"Invalid task name {name!r}: expected "
            "projects/PROJECT_ID/locations/LOCATION_ID/queues/QUEUE_ID/tasks/TASK_ID "
            "(TASK_ID: letters, digits, hyphens, underscores, at most 500)"
        )
    return match.group(1), match.group(2)


@dataclass(frozen=True)
class RetryPolicy:
    """RetryConfig with every field resolved (0 = unset has been replaced by the default)."""

    max_attempts: int = 100
    max_retry_duration_s: float = 0.0
    min_backoff_s: float = 0.1
    max_backoff_s: float = 3600.0
    max_doublings: int = 16

    def validate(self) -> RetryPolicy:
        if self.max_attempts < -1:
            raise invalid(f"retry_config.max_attempts must be >= -1, got {self.max_attempts}")
        if self.max_doublings < 0:
            raise invalid(f"retry_config.max_doublings must be >= 0, got {self.max_doublings}")
        for label, value in (
            ("max_retry_duration", self.max_retry_duration_s),
            ("min_backoff", self.min_backoff_s),
            ("max_backoff", self.max_backoff_s),
        ):
            if value < 0:
                raise invalid(f"retry_config.{label} must not be negative, got {value}s")
        if self.min_backoff_s > self.max_backoff_s:
            raise invalid(
                f"retry_config.min_backoff ({self.min_backoff_s}s) must not exceed "
                f"max_backoff ({self.max_backoff_s}s)"
            )
        return self

    def backoff_s(self, retry_index: int) -> float:
        """Delay before retry number `retry_index` (0 = the first retry), unscaled.

        Starts at min_backoff, doubles max_doublings times, then grows linearly by
        min_backoff * 2**max_doublings, capped at max_backoff (the API reference's
        example: 10s, 20s, 40s, 80s, 160s, 240s, 300s, 300s for 10s/300s/3).
        """
        if retry_index < 0:
            raise ValueError(f"retry_index must be >= 0, got {retry_index}")
        doublings = min(retry_index, self.max_doublings)
        delay = self.min_backoff_s * (2**doublings)
        if retry_index > self.max_doublings:
            delay += (
                (retry_index - self.max_doublings) * self.min_backoff_s * (2**self.max_doublings)
            )
        return min(delay, self.max_backoff_s)

    def exhausted(self, attempts: int, since_first_attempt_s: float) -> bool:
        """True when no further attempt is allowed: both limits met (an unset one counts as met).

        max_attempts = -1 with max_retry_duration = 0 retries forever.
        """
        limit_attempts = self.max_attempts != -1
        limit_duration = self.max_retry_duration_s > 0
        if not limit_attempts and not limit_duration:
            return False
        attempts_met = not limit_attempts or attempts >= self.max_attempts
        duration_met = not limit_duration or since_first_attempt_s >= self.max_retry_duration_s
        return attempts_met and duration_met


DEFAULT_RETRY = RetryPolicy()


def burst_for(rate: float) -> int:
    """Output-only max_burst_size, picked from the rate (100 for the default 500/s)."""
    return max(1, min(100, int(rate + 0.999999)))


@dataclass(frozen=True)
class RatePolicy:
    """RateLimits with every field resolved."""

    max_dispatches_per_second: float = 500.0
    max_concurrent_dispatches: int = 1000

    @property
    def max_burst_size(self) -> int:
        return burst_for(self.max_dispatches_per_second)

    def validate(self) -> RatePolicy:
        rate = self.max_dispatches_per_second
        if not 0 < rate <= MAX_DISPATCHES_PER_SECOND:
            raise invalid(f"rate_limits.max_dispatches_per_second must be in (0, 500], got {rate}")
        if not 0 < self.max_concurrent_dispatches <= MAX_CONCURRENT_DISPATCHES:
            raise invalid(
                "rate_limits.max_concurrent_dispatches must be in [1, 5000], "
                f"got {self.max_concurrent_dispatches}"
            )
        return self


DEFAULT_RATE = RatePolicy()


@dataclass
class Attempt:
    """One dispatch as the API reports it (times are epoch seconds)."""

    schedule_time: float
    dispatch_time: float
    response_time: float | None = None
    status_code: int = 0  # google.rpc.Code
    status_message: str = ""


@dataclass
class TaskRecord:
    """A task in a queue; `due` is when it may next be dispatched (epoch seconds)."""

    name: str
    url: str
    http_method: int
    headers: dict[str, str]
    body: bytes
    oidc_email: str | None
    oidc_audience: str | None
    schedule_time: float
    create_time: float
    dispatch_deadline_s: float
    retry: RetryPolicy | None  # task-level override of the queue's policy
    dispatch_count: int = 0
    response_count: int = 0
    # Responses that were not 5xx: what X-CloudTasks-TaskExecutionCount reports.
    execution_count: int = 0
    # The previous attempt's HTTP status; None before the first answer or after a
    # deadline or connection failure (no answer to report).
    previous_response: int | None = None
    first_attempt: Attempt | None = None
    last_attempt: Attempt | None = None
    running: int = 0  # attempts in flight; never persisted (a restart re-dispatches them)
    generation: int = 0  # bumped on every dispatch so a stale completion is ignored

    @property
    def short_id(self) -> str:
        return self.name.rsplit("/", 1)[-1]


@dataclass
class QueueRecord:
    name: str
    state: int  # Queue.State value
    retry: RetryPolicy = DEFAULT_RETRY
    rate: RatePolicy = DEFAULT_RATE
    purge_time: float | None = None
    # Opaque settings echoed back unchanged (serialized proto messages).
    http_target: bytes = b""
    logging_config: bytes = b""
    tasks: dict[str, TaskRecord] = field(default_factory=dict)
    tombstones: dict[str, float] = field(default_factory=dict)  # task name -> expiry
    tokens: float = 0.0
    refilled_at: float = 0.0
    running: int = 0

    @property
    def short_id(self) -> str:
        return self.name.rsplit("/", 1)[-1]
