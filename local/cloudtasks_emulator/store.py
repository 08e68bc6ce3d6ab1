"""Queues and tasks in memory, behind one lock: every API rule that is about state lives here.

The dispatcher asks `take_due()` for work and reports back through `complete()` (both in
`scheduling.py`, a part of `Store`); the gRPC layer converts protos to the records of
`model` and back. Times are epoch seconds from the injected `now`; emulator-side waits
(backoff, Retry-After, dispatch deadline, max_retry_duration, rate refill) are multiplied
by `time_scale`.

Every change is written to the injected `Journal` before the call returns (a no-op
without `--data-dir`); a store built on a journal that holds state starts from it.
"""

from __future__ import annotations

import copy
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import replace

import grpc

from local.cloudtasks_emulator.attempts import HTTP_METHODS, DispatchJob, Outcome, http_to_rpc
from local.cloudtasks_emulator.journal import Journal
from local.cloudtasks_emulator.model import (
    MAX_DISPATCH_DEADLINE_S,
    MAX_SCHEDULE_AHEAD_S,
    MAX_URL_CHARS,
    MIN_DISPATCH_DEADLINE_S,
    PAUSED,
    RUNNING,
    ApiError,
    QueueRecord,
    TaskRecord,
    invalid,
    parse_location,
    parse_queue,
    parse_task,
)
from local.cloudtasks_emulator.scheduling import Scheduling

_BODY_METHODS = {"POST", "PUT", "PATCH"}

__all__ = [  # the attempt types live in `attempts`, the states in `model`; importable here
    "HTTP_METHODS",
    "PAUSED",
    "RUNNING",
    "DispatchJob",
    "Outcome",
    "Store",
    "http_to_rpc",
]


class Store(Scheduling):
    """Queues and tasks, their API rules and their journal; dispatch in `Scheduling`."""

    def __init__(
        self,
        *,
        tombstone_s: float = 3600.0,
        time_scale: float = 1.0,
        now: Callable[[], float] = time.time,
        journal: Journal | None = None,
    ) -> None:
        """`journal`: where changes are written and the starting state is read (None: memory)."""
        if time_scale <= 0:
            raise ValueError(f"time_scale must be positive, got {time_scale}")
        self.tombstone_s = tombstone_s
        self.time_scale = time_scale
        self.now = now
        self.journal = journal or Journal()
        self.cond = threading.Condition()
        self._queues = self.journal.load(now())
        for queue in self._queues.values():
            self._fill_bucket(queue)

    @staticmethod
    def _fill_bucket(queue: QueueRecord) -> None:
        queue.tokens = float(queue.rate.max_burst_size)
        queue.refilled_at = time.monotonic()

    # ---- queues -------------------------------------------------------------------------

    def _queue(self, name: str) -> QueueRecord:
        parse_queue(name)
        queue = self._queues.get(name)
        if queue is None:
            raise ApiError(grpc.StatusCode.NOT_FOUND, f"Queue {name!r} does not exist.")
        return queue

    def create_queue(self, parent: str, queue: QueueRecord) -> QueueRecord:
        parse_location(parent)
        location, _ = parse_queue(queue.name)
        if location != parent:
            raise invalid(f"Queue name {queue.name!r} is not in parent {parent!r}")
        queue.retry.validate()
        queue.rate.validate()
        with self.cond:
            if queue.name in self._queues:
                raise ApiError(
                    grpc.StatusCode.ALREADY_EXISTS, f"Queue {queue.name!r} already exists."
                )
            queue.state = RUNNING
            self._fill_bucket(queue)
            self.journal.put_queue(queue)
            self._queues[queue.name] = queue
            return copy.deepcopy(queue)

    def get_queue(self, name: str) -> QueueRecord:
        with self.cond:
            return copy.deepcopy(self._queue(name))

    def list_queues(self, parent: str, state: int | None) -> list[QueueRecord]:
        parse_location(parent)
        with self.cond:
            found = [
                copy.deepcopy(q)
                for n, q in sorted(self._queues.items())
                if n.startswith(parent + "/queues/") and (state is None or q.state == state)
            ]
        return found

    def update_queue(
        self, name: str, change: Callable[[QueueRecord | None], QueueRecord]
    ) -> QueueRecord:
        """Apply `change` to the stored queue (None when absent: UpdateQueue creates it)."""
        parse_queue(name)
        with self.cond:
            current = self._queues.get(name)
            updated = change(copy.deepcopy(current) if current else None)
            updated.retry.validate()
            updated.rate.validate()
            if current is None:
                updated.state = RUNNING
                self._fill_bucket(updated)
            else:
                # Live state survives a settings change.
                updated.state = current.state
                updated.tasks = current.tasks
                updated.tombstones = current.tombstones
                updated.tokens = min(current.tokens, float(updated.rate.max_burst_size))
                updated.refilled_at = current.refilled_at
                updated.running = current.running
                updated.purge_time = current.purge_time
            self.journal.put_queue(updated)
            self._queues[name] = updated
            self.cond.notify_all()
            return copy.deepcopy(updated)

    def set_state(self, name: str, state: int) -> QueueRecord:
        with self.cond:
            queue = self._queue(name)
            self.journal.put_queue(replace(queue, state=state))
            queue.state = state
            self.cond.notify_all()
            return copy.deepcopy(queue)

    def purge_queue(self, name: str) -> QueueRecord:
        with self.cond:
            queue = self._queue(name)
            now = self.now()
            with self.journal.atomic():
                self.journal.put_queue(replace(queue, purge_time=now))
                self._retire(queue, list(queue.tasks), now)
            queue.purge_time = now
            return copy.deepcopy(queue)

    def delete_queue(self, name: str) -> None:
        with self.cond:
            self._queue(name)
            self.journal.drop_queue(name)
            del self._queues[name]
            self.cond.notify_all()

    # ---- tasks --------------------------------------------------------------------------

    def _retire(self, queue: QueueRecord, task_names: list[str], now: float) -> None:
        """Remove tasks and keep their names unusable for the tombstone window."""
        if not task_names:
            return
        expiry = now + self.tombstone_s
        self.journal.retire(queue.name, task_names, expiry)
        for name in task_names:
            queue.tasks.pop(name, None)
            queue.tombstones[name] = expiry

    def create_task(self, parent: str, task: TaskRecord) -> TaskRecord:
        parse_queue(parent)
        now = self.now()
        if task.name:
            queue_path, _ = parse_task(task.name)
            if queue_path != parent:
                raise invalid(f"Task name {task.name!r} is not in queue {parent!r}")
        self._validate_task(task, repr(task.name) if task.name else f"(new in {parent})", now)
        if not task.name:
            task.name = f"{parent}/tasks/{secrets.randbelow(10**20):020d}"
        with self.cond:
            queue = self._queue(parent)
            if task.name in queue.tasks:
                raise ApiError(
                    grpc.StatusCode.ALREADY_EXISTS, f"Task {task.name!r} already exists."
                )
            expiry = queue.tombstones.get(task.name)
            if expiry is not None and expiry > now:
                raise ApiError(
                    grpc.StatusCode.ALREADY_EXISTS,
                    f"Task {task.name!r} cannot be created: a task with this name existed "
                    "too recently (it ran or was deleted).",
                )
            task.create_time = float(int(now))
            # CreateTaskRequest: "If schedule_time is not set or is in the past then Cloud
            # Tasks will set it to the current time."
            task.schedule_time = max(task.schedule_time, now)
            self.journal.put_task(task)
            queue.tombstones.pop(task.name, None)
            queue.tasks[task.name] = task
            self.cond.notify_all()
            return copy.deepcopy(task)

    @staticmethod
    def _validate_task(task: TaskRecord, label: str, now: float) -> None:
        from urllib.parse import urlsplit

        if not task.url:
            raise invalid(f"Task {label}: http_request.url is required")
        parts = urlsplit(task.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise invalid(f"Task {label}: http_request.url must be an http(s) URL")
        if len(task.url) > MAX_URL_CHARS:
            raise invalid(f"Task {label}: http_request.url is longer than 2083 characters")
        method = HTTP_METHODS.get(task.http_method)
        if method is None:
            raise invalid(f"Task {label}: unknown http_method {task.http_method}")
        if task.body and method not in _BODY_METHODS:
            raise invalid(f"Task {label}: a body is only allowed with POST, PUT or PATCH")
        if not MIN_DISPATCH_DEADLINE_S <= task.dispatch_deadline_s <= MAX_DISPATCH_DEADLINE_S:
            raise invalid(
                f"Task {label}: dispatch_deadline must be in [15s, 30m], "
                f"got {task.dispatch_deadline_s}s"
            )
        if task.schedule_time > now + MAX_SCHEDULE_AHEAD_S:
            raise invalid(f"Task {label}: schedule_time is more than 30 days ahead")
        if task.oidc_email is not None and "@" not in task.oidc_email:
            raise invalid(f"Task {label}: oidc_token.service_account_email must be an email")
        if task.retry is not None:
            task.retry.validate()

    def _task(self, name: str) -> tuple[QueueRecord, TaskRecord]:
        queue_path, _ = parse_task(name)
        queue = self._queue(queue_path)
        task = queue.tasks.get(name)
        if task is None:
            raise ApiError(grpc.StatusCode.NOT_FOUND, f"Task {name!r} does not exist.")
        return queue, task

    def get_task(self, name: str) -> TaskRecord:
        with self.cond:
            return copy.deepcopy(self._task(name)[1])

    def list_tasks(self, parent: str) -> list[TaskRecord]:
        with self.cond:
            queue = self._queue(parent)
            tasks = sorted(queue.tasks.values(), key=lambda t: (t.schedule_time, t.name))
            return [copy.deepcopy(t) for t in tasks]

    def delete_task(self, name: str) -> None:
        with self.cond:
            queue, task = self._task(name)
            self._retire(queue, [task.name], self.now())
            self.cond.notify_all()

    def run_task(self, name: str) -> tuple[TaskRecord, DispatchJob]:
        """Dispatch now, even when paused or rate limited (RunTask is for debugging)."""
        with self.cond:
            queue, task = self._task(name)
            job = self._begin(queue, task, self.now())
            return copy.deepcopy(task), job
