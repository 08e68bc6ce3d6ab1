"""The simulator's in-memory world: batches, other long-running operations and registered
webhooks (`webhook_registry.py`), all behind one lock (the fault model lives in
`faults.py` / `injector.py`), and how batches are run (`processing.py`: slots, queued by
priority then creation order).

Every transition goes through `World`; callers get plain snapshots back. The records and
their state words are in `records.py`, the errors in `errors.py`; both are importable
from here too.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from local.simulator.errors import (
    BadRequest,
    BatchQuotaExceeded,
    Conflict,
    FailedPrecondition,
    NotFound,
    SimError,
)
from local.simulator.processing import ProcessingSettings, queue_order
from local.simulator.records import (
    BATCH_STATES,
    INTERACTION_API_STATUSES,
    INTERACTION_EVENTS,
    INTERACTION_STATUS,
    PENDING,
    RUNNING,
    TERMINAL_STATES,
    WEBHOOK_EVENTS,
    WEBHOOK_STATES,
    WITH_ROWS,
    Batch,
    Operation,
    RegisteredWebhook,
    SigningSecret,
    new_batch_id,
    new_secret,
)
from local.simulator.webhook_registry import RegisteredWebhooks
from shared.clock import Clock, system_clock

__all__ = [  # the records and errors live in `records` and `errors`; importable here as before
    "BATCH_STATES",
    "INTERACTION_API_STATUSES",
    "INTERACTION_EVENTS",
    "INTERACTION_STATUS",
    "PENDING",
    "RUNNING",
    "TERMINAL_STATES",
    "WEBHOOK_EVENTS",
    "WEBHOOK_STATES",
    "WITH_ROWS",
    "BadRequest",
    "Batch",
    "BatchQuotaExceeded",
    "Conflict",
    "FailedPrecondition",
    "NotFound",
    "Operation",
    "RegisteredWebhook",
    "SigningSecret",
    "SimError",
    "World",
    "new_batch_id",
    "new_secret",
]


class World(RegisteredWebhooks):
    """Thread-safe store of everything the simulator knows; `reset()` empties it."""

    def __init__(self, clock: Clock = system_clock, running_after_s: float = 10.0) -> None:
        self.clock = clock
        # A pending batch starts RUNNING this long after creation (noticed when read).
        self.running_after_s = running_after_s
        self._lock = threading.RLock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self.processing = ProcessingSettings()
            self._batches: dict[str, Batch] = {}
            self._seq = 0
            self._operations: dict[str, Operation] = {}
            self._webhooks: dict[str, RegisteredWebhook] = {}
            # Bumped on reset so deliveries still in flight stop recording into the new world.
            self.generation = getattr(self, "generation", 0) + 1

    # --- batches -------------------------------------------------------------------

    def create_batch(
        self,
        model: str,
        display_name: str,
        requests: list[dict[str, Any]],
        webhook_uris: Iterable[str] = (),
        user_metadata: dict[str, Any] | None = None,
        input_file: str | None = None,
        max_in_flight: int | None = None,
        priority: int = 0,
    ) -> Batch:
        """A new PENDING batch; `BatchQuotaExceeded` when `max_in_flight` batches are
        already in flight (counted and added under one lock, so racing creates cannot
        pass the limit together). `max_in_flight=None`: no limit. `priority`: Gemini's
        `batch.priority`, its place in the queue when processing has slots."""
        now = self.clock()
        batch = Batch(
            id=new_batch_id(),
            model=model,
            display_name=display_name,
            requests=requests,
            created_at=now,
            updated_at=now,
            webhook_uris=tuple(webhook_uris),
            user_metadata=user_metadata,
            input_file=input_file,
            priority=priority,
        )
        with self._lock:
            if max_in_flight is not None and self._in_flight() >= max_in_flight:
                raise BatchQuotaExceeded(max_in_flight)
            self._seq += 1
            batch.seq = self._seq
            self._batches[batch.id] = batch
            self._schedule()
            return replace(batch)

    def batches_in_flight(self) -> int:
        """How many batches are not yet in a terminal state (PENDING or RUNNING)."""
        with self._lock:
            return self._in_flight()

    def _in_flight(self) -> int:
        return sum(1 for batch in self._batches.values() if not batch.done)

    def batch(self, batch_id: str) -> Batch:
        with self._lock:
            found = self._batches.get(batch_id)
            if found is None:
                raise NotFound(f"Batch batches/{batch_id} not found.")
            self._advance(found)
            return replace(found)

    def batches(self) -> list[Batch]:
        """Every batch, newest first (the order the Gemini API lists them in)."""
        with self._lock:
            self._advance_all()
            return sorted(
                (replace(b) for b in self._batches.values()), key=lambda b: b.seq, reverse=True
            )

    def _advance(self, batch: Batch) -> None:
        """PENDING -> RUNNING once `running_after_s` passed, unless processing has slots:
        then the queue decides (`_schedule`). The caller holds the lock."""
        if self.processing.slots is not None:
            self._schedule()
            return
        now = self.clock()
        if batch.state == PENDING and (now - batch.created_at).total_seconds() >= (
            self.running_after_s
        ):
            batch.state = RUNNING
            batch.updated_at = now
            batch.started_at = now

    def _advance_all(self) -> None:
        if self.processing.slots is not None:
            self._schedule()  # once, not once per batch
            return
        for batch in self._batches.values():
            self._advance(batch)

    def _schedule(self) -> None:
        """With processing slots: start queued batches, highest priority then oldest first
        (creation order alone when priority is not honoured), while a slot is free. The
        caller holds the lock."""
        slots = self.processing.slots
        if slots is None:
            return
        live = [b for b in self._batches.values() if not b.done]
        running = sum(1 for b in live if b.state == RUNNING)
        if running >= slots:
            return
        honour = self.processing.honour_priority
        queued = sorted(
            (b for b in live if b.state == PENDING and not b.cancelling),
            key=lambda b: queue_order(b.priority, b.seq, honour),
        )
        now = self.clock()
        for batch in queued[: slots - running]:
            batch.state = RUNNING
            batch.updated_at = now
            batch.started_at = now

    def set_processing(self, settings: ProcessingSettings) -> ProcessingSettings:
        """Run batches under `settings` from now on (queued ones start if slots allow)."""
        with self._lock:
            self.processing = settings
            self._schedule()
            return settings

    def processing_report(self) -> dict[str, Any]:
        """The processing settings and how many batches run and wait now."""
        with self._lock:
            self._advance_all()
            live = [b for b in self._batches.values() if not b.done]
            return {
                **self.processing.report(),
                "running": sum(1 for b in live if b.state == RUNNING),
                "queued": sum(1 for b in live if b.state == PENDING),
            }

    def mark_cancelling(self, batch_id: str) -> Batch:
        """Record a cancel request; refused (FailedPrecondition) once the batch ended."""
        with self._lock:
            batch = self._batches.get(batch_id)
            if batch is None:
                raise NotFound(f"Batch batches/{batch_id} not found.")
            if batch.done:
                raise FailedPrecondition(f"Batch {batch.name} is already {batch.state}.")
            batch.cancelling = True
            return replace(batch)

    def delete_batch(self, batch_id: str) -> None:
        with self._lock:
            if self._batches.pop(batch_id, None) is None:
                raise NotFound(f"Batch batches/{batch_id} not found.")
            self._schedule()

    def finish_batch(
        self,
        batch_id: str,
        state: str,
        rows: list[dict[str, Any]] | None = None,
        error: dict[str, Any] | None = None,
        output_file: str | None = None,
    ) -> tuple[Batch, bool]:
        """Move a batch to terminal `state` (a `BATCH_STATE_*`); its results are `rows`
        (inlined) or the generated file `output_file`.

        Returns the batch and whether it changed. Finishing again with the same state
        is allowed (it changes nothing; the caller may re-send the webhook); finishing
        with a different state is a `Conflict`.
        """
        with self._lock:
            batch = self._batches.get(batch_id)
            if batch is None:
                raise NotFound(f"Batch batches/{batch_id} not found.")
            if batch.done:
                if batch.state != state:
                    raise Conflict(
                        f"Batch {batch.name} is already {batch.state}; cannot make it {state}."
                    )
                return replace(batch), False
            now = self.clock()
            batch.state = state
            batch.updated_at = now
            batch.end_time = now
            batch.rows = rows
            batch.error = error
            batch.output_file = output_file
            self._schedule()  # its slot, if it had one, goes to the next queued batch
            return replace(batch), True

    def pending_batches_older_than(self, seconds: float) -> list[str]:
        now = self.clock()
        with self._lock:
            return [
                b.id
                for b in self._batches.values()
                if not b.done and (now - b.created_at).total_seconds() >= seconds
            ]

    def batches_due(self, run_s: float) -> list[str]:
        """The batches that have run `run_s`, in the order they started: since creation with
        processing slots off (every batch runs at once), since starting with them on."""
        now = self.clock()
        with self._lock:
            if self.processing.slots is None:
                return self.pending_batches_older_than(run_s)
            self._schedule()
            due = [
                b
                for b in self._batches.values()
                if b.state == RUNNING
                and b.started_at is not None
                and (now - b.started_at).total_seconds() >= run_s
            ]
            return [b.id for b in sorted(due, key=lambda b: (b.started_at, b.seq))]

    # --- other operations ----------------------------------------------------------

    def create_operation(
        self,
        name: str,
        metadata: dict[str, Any],
        webhook_uris: Iterable[str] = (),
        user_metadata: dict[str, Any] | None = None,
    ) -> Operation:
        with self._lock:
            if name in self._operations:
                raise Conflict(f"Operation {name} already exists.")
            operation = Operation(
                name=name,
                created_at=self.clock(),
                metadata=metadata,
                webhook_uris=tuple(webhook_uris),
                user_metadata=user_metadata,
            )
            self._operations[name] = operation
            return replace(operation)

    def operation(self, name: str) -> Operation:
        with self._lock:
            found = self._operations.get(name)
            if found is None:
                raise NotFound(f"Operation {name} not found.")
            return replace(found)

    def finish_operation(
        self,
        name: str,
        status: str,
        response: dict[str, Any] | None,
        error: dict[str, Any] | None,
    ) -> tuple[Operation, bool]:
        """Like `finish_batch`, for a generic operation; `status` is the control word."""
        with self._lock:
            operation = self._operations.get(name)
            if operation is None:
                raise NotFound(f"Operation {name} not found.")
            if operation.done:
                if operation.status != status:
                    raise Conflict(
                        f"Operation {name} is already {operation.status}; cannot make it {status}."
                    )
                return replace(operation), False
            operation.done = True
            operation.status = status
            operation.response = response
            operation.error = error
            operation.api_status = None  # a waiting interaction, now ended by the control word
            return replace(operation), True

    def set_interaction_status(
        self, name: str, status: str, output_text: str | None, error: dict[str, Any] | None
    ) -> Operation:
        """Put interaction `name` in Interactions API `status` (INTERACTION_API_STATUSES);
        an ended interaction cannot move again (`Conflict`)."""
        ends, _event = INTERACTION_API_STATUSES[status]
        with self._lock:
            operation = self._operations.get(name)
            if operation is None:
                raise NotFound(f"Interaction {name} not found.")
            if operation.done:
                raise Conflict(f"Interaction {name} already ended {operation.interaction_status}.")
            operation.api_status = status
            operation.output_text = output_text
            operation.error = error
            operation.done = ends
            return replace(operation)
