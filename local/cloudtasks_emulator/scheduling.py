"""The dispatch side of `Store` (store.py): which attempts start now, within each queue's
rate and concurrency, and what becomes of a task once an attempt answers (done, retried
after its backoff, or retired when its retries are exhausted).

A part of `Store`: it shares the store's condition (the one lock), journal, clock,
time scale and queues, and runs under that lock like every other store call.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from local.cloudtasks_emulator.attempts import (
    HTTP_METHODS,
    DispatchJob,
    Outcome,
    dispatch_headers,
    retry_delay_s,
)
from local.cloudtasks_emulator.journal import Journal, JournalError
from local.cloudtasks_emulator.model import RUNNING, Attempt, QueueRecord, TaskRecord, parse_task


class Scheduling:
    """`take_due` and `complete`, for the dispatcher; `run_task` starts one through `_begin`."""

    cond: threading.Condition
    journal: Journal
    now: Callable[[], float]
    time_scale: float
    _queues: dict[str, QueueRecord]

    def _task(self, name: str) -> tuple[QueueRecord, TaskRecord]:
        raise NotImplementedError  # Store's

    def _retire(self, queue: QueueRecord, task_names: list[str], now: float) -> None:
        raise NotImplementedError  # Store's

    def _begin(self, queue: QueueRecord, task: TaskRecord, now: float) -> DispatchJob:
        """Count the attempt and commit it before anything is sent (a restart re-sends it)."""
        retry_count = task.dispatch_count
        headers = dispatch_headers(queue.short_id, task, retry_count)
        task.dispatch_count += 1
        task.generation += 1
        attempt = Attempt(schedule_time=task.schedule_time, dispatch_time=now)
        if task.first_attempt is None:
            task.first_attempt = Attempt(schedule_time=task.schedule_time, dispatch_time=now)
        task.last_attempt = attempt
        self.journal.put_task(task)
        task.running += 1
        queue.running += 1
        return DispatchJob(
            queue_id=queue.short_id,
            task_name=task.name,
            generation=task.generation,
            attempt=task.dispatch_count,
            url=task.url,
            method=HTTP_METHODS[task.http_method],
            headers=headers,
            body=task.body,
            deadline_s=task.dispatch_deadline_s * self.time_scale,
            oidc_email=task.oidc_email,
            oidc_audience=task.oidc_audience,
            record=task,
        )

    def take_due(self) -> tuple[list[DispatchJob], float]:
        """Start every attempt allowed now; returns them and how long to sleep (seconds)."""
        jobs: list[DispatchJob] = []
        now = self.now()
        mono = time.monotonic()
        with self.cond:
            try:
                with self.journal.atomic():  # one commit for the whole batch
                    wait = self._begin_due(jobs, now, mono)
            except JournalError:
                for job in jobs:  # rolled back: none of them is sent
                    queue, task = self._task(job.task_name)
                    queue.running, task.running = queue.running - 1, task.running - 1
                raise
        return jobs, max(wait, 0.001)

    def _begin_due(self, jobs: list[DispatchJob], now: float, mono: float) -> float:
        """Append every attempt allowed now to `jobs`; returns how long to sleep."""
        wait = 1.0
        for queue in self._queues.values():
            if queue.state != RUNNING:
                continue
            rate = queue.rate.max_dispatches_per_second / self.time_scale
            burst = float(queue.rate.max_burst_size)
            queue.tokens = min(burst, queue.tokens + (mono - queue.refilled_at) * rate)
            queue.refilled_at = mono
            waiting = sorted(
                (t for t in queue.tasks.values() if not t.running),
                key=lambda t: (t.schedule_time, t.name),
            )
            for task in waiting:
                if task.schedule_time > now:
                    wait = min(wait, task.schedule_time - now)
                    break
                if queue.running >= queue.rate.max_concurrent_dispatches:
                    break  # a completion will notify
                if queue.tokens < 1.0:
                    wait = min(wait, (1.0 - queue.tokens) / rate)
                    break
                queue.tokens -= 1.0
                jobs.append(self._begin(queue, task, now))
        return wait

    def complete(self, job: DispatchJob, outcome: Outcome) -> str:
        """Record an attempt's result; returns what became of the task (for the log)."""
        with self.cond:
            self.cond.notify_all()
            queue_path, _ = parse_task(job.task_name)
            queue = self._queues.get(queue_path)
            task = queue.tasks.get(job.task_name) if queue else None
            if queue is None or task is None or task is not job.record:
                return "gone"
            queue.running = max(0, queue.running - 1)
            task.running = max(0, task.running - 1)
            now = self.now()
            if task.last_attempt is not None and task.generation == job.generation:
                task.last_attempt.response_time = now
                task.last_attempt.status_code = outcome.rpc_code
                task.last_attempt.status_message = outcome.message
            task.previous_response = outcome.http_status
            if outcome.http_status is not None:
                task.response_count += 1
                if outcome.http_status < 500:
                    task.execution_count += 1
                if 200 <= outcome.http_status < 300:
                    self._retire(queue, [task.name], now)
                    return "done"
            policy = task.retry or queue.retry
            assert task.first_attempt is not None
            elapsed = (now - task.first_attempt.dispatch_time) / self.time_scale
            if policy.exhausted(task.dispatch_count, elapsed):
                self._retire(queue, [task.name], now)
                return "deleted: retries exhausted"
            if task.running:
                self.journal.put_task(task)
                return "still running"
            delay = retry_delay_s(policy, task.dispatch_count - 1, outcome, now) * self.time_scale
            task.schedule_time = now + delay
            self.journal.put_task(task)
            return f"retry in {delay:.3f}s"
