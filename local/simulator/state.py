"""The simulator's in-memory world: batches, other long-running operations and registered
webhooks, all behind one lock (the fault model lives in `faults.py` / `injector.py`).

Names follow the Gemini API: a batch is `batches/{id}`, any other operation keeps the
name it was created with (e.g. `models/veo-2.0-generate-001/operations/abc`).
Every transition goes through `World`; callers get plain snapshots back.
"""

from __future__ import annotations

import base64
import secrets
import threading
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from shared.clock import Clock, system_clock

# Control-API state word -> the batch state the Gemini API reports.
BATCH_STATES = {
    "succeeded": "BATCH_STATE_SUCCEEDED",
    "failed": "BATCH_STATE_FAILED",
    "cancelled": "BATCH_STATE_CANCELLED",
    "expired": "BATCH_STATE_EXPIRED",
    # Not in the Batch API reference's BatchState, but in google-genai's JobState: sent in
    # the REST spelling, which the SDK passes through as is (`t_job_state`).
    "partially_succeeded": "BATCH_STATE_PARTIALLY_SUCCEEDED",
}
# Control words whose batch carries result rows (some of them failed, for a partial one).
WITH_ROWS = frozenset({"succeeded", "partially_succeeded"})
PENDING = "BATCH_STATE_PENDING"
RUNNING = "BATCH_STATE_RUNNING"
TERMINAL_STATES = frozenset(BATCH_STATES.values())

WEBHOOK_EVENTS = (
    "batch.succeeded",
    "batch.expired",
    "batch.failed",
    "batch.cancelled",
    "interaction.requires_action",
    "interaction.completed",
    "interaction.failed",
    "interaction.cancelled",
    "video.generated",
)
WEBHOOK_STATES = ("enabled", "disabled", "disabled_due_to_failed_deliveries")


class SimError(Exception):
    """A request the simulator refuses; `status` is the HTTP code to answer with."""

    status = 400

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BadRequest(SimError):
    status = 400


class NotFound(SimError):
    status = 404


class Conflict(SimError):
    status = 409


class FailedPrecondition(SimError):
    status = 400


class BatchQuotaExceeded(SimError):
    """A create beyond the concurrent-batch quota: `limit` batches are already in flight."""

    status = 429

    def __init__(self, limit: int) -> None:
        super().__init__(f"{limit} batches are already in flight (the project's quota).")
        self.limit = limit


@dataclass
class Batch:
    """One batch job. `rows` holds the inlined responses once it succeeded; a batch made
    from an input file (`input_file`) reports its results as a file (`output_file`)."""

    id: str
    model: str
    display_name: str
    requests: list[dict[str, Any]]
    created_at: datetime
    updated_at: datetime
    state: str = PENDING
    end_time: datetime | None = None
    rows: list[dict[str, Any]] | None = None
    error: dict[str, Any] | None = None
    webhook_uris: tuple[str, ...] = ()
    user_metadata: dict[str, Any] | None = None
    seq: int = 0  # creation order; list pages are cut on it, so inserts never shift a page
    input_file: str | None = None
    output_file: str | None = None
    cancelling: bool = False  # cancel asked for; the batch ends CANCELLED a moment later

    @property
    def name(self) -> str:
        return f"batches/{self.id}"

    @property
    def done(self) -> bool:
        return self.state in TERMINAL_STATES


@dataclass
class Operation:
    """Any other long-running operation (video generation, file-search import…)."""

    name: str
    created_at: datetime
    metadata: dict[str, Any] = field(default_factory=dict)
    done: bool = False
    status: str = "pending"
    response: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    # The job's `webhook_config`, as for a batch (`generate_videos`, `interactions.create`).
    webhook_uris: tuple[str, ...] = ()
    user_metadata: dict[str, Any] | None = None
    # An interaction put in an Interactions API status directly (`:status`), and its output.
    api_status: str | None = None
    output_text: str | None = None

    def event_for(self, status: str) -> str | None:
        """The webhook event Gemini sends when this operation ends with `status`, if any."""
        if self.name.startswith("interactions/"):
            return INTERACTION_EVENTS.get(status)
        if self.name.startswith("models/") and status == "succeeded":
            return "video.generated"
        return None

    @property
    def interaction_status(self) -> str:
        """The Interactions API's `status` for this interaction."""
        if self.api_status is not None:
            return self.api_status
        return INTERACTION_STATUS.get(self.status, "in_progress") if self.done else "in_progress"


INTERACTION_EVENTS = {
    "succeeded": "interaction.completed",
    "failed": "interaction.failed",
    "cancelled": "interaction.cancelled",
}
INTERACTION_STATUS = {
    "succeeded": "completed",
    "failed": "failed",
    "cancelled": "cancelled",
    "expired": "incomplete",
}
# Every Interactions API status `:status` can set: whether it ends the interaction, and
# the event Gemini sends on reaching it (the Webhooks guide's `interaction.*` events; the
# guide names none for `requires_continuation` or `idle`).
INTERACTION_API_STATUSES: dict[str, tuple[bool, str | None]] = {
    "queued": (False, None),
    "in_progress": (False, None),
    "requires_action": (False, "interaction.requires_action"),
    "requires_continuation": (False, None),
    "idle": (False, None),
    "completed": (True, "interaction.completed"),
    "incomplete": (True, "interaction.completed"),
    "failed": (True, "interaction.failed"),
    "budget_exceeded": (True, "interaction.failed"),
    "cancelled": (True, "interaction.cancelled"),
}


@dataclass
class SigningSecret:
    secret: str
    expire_time: datetime | None = None


@dataclass
class RegisteredWebhook:
    """A webhook created through the webhooks API (a static, project-level webhook)."""

    id: str
    uri: str
    subscribed_events: list[str]
    name: str | None
    created_at: datetime
    updated_at: datetime
    secrets: list[SigningSecret]
    state: str = "enabled"
    consecutive_failures: int = 0


def new_batch_id() -> str:
    """Lower-case alphanumeric, like the ids the Gemini API hands out."""
    return uuid.uuid4().hex[:20]


def new_secret() -> str:
    """A Standard Webhooks secret: `whsec_` + base64 of 32 random bytes."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


class World:
    """Thread-safe store of everything the simulator knows; `reset()` empties it."""

    def __init__(self, clock: Clock = system_clock, running_after_s: float = 10.0) -> None:
        self.clock = clock
        # A pending batch starts RUNNING this long after creation (noticed when read).
        self.running_after_s = running_after_s
        self._lock = threading.RLock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
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
    ) -> Batch:
        """A new PENDING batch; `BatchQuotaExceeded` when `max_in_flight` batches are
        already in flight (counted and added under one lock, so racing creates cannot
        pass the limit together). `max_in_flight=None`: no limit."""
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
        )
        with self._lock:
            if max_in_flight is not None and self._in_flight() >= max_in_flight:
                raise BatchQuotaExceeded(max_in_flight)
            self._seq += 1
            batch.seq = self._seq
            self._batches[batch.id] = batch
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
            for batch in self._batches.values():
                self._advance(batch)
            return sorted(
                (replace(b) for b in self._batches.values()), key=lambda b: b.seq, reverse=True
            )

    def _advance(self, batch: Batch) -> None:
        """PENDING -> RUNNING once `running_after_s` passed (caller holds the lock)."""
        now = self.clock()
        if batch.state == PENDING and (now - batch.created_at).total_seconds() >= (
            self.running_after_s
        ):
            batch.state = RUNNING
            batch.updated_at = now

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
            return replace(batch), True

    def pending_batches_older_than(self, seconds: float) -> list[str]:
        now = self.clock()
        with self._lock:
            return [
                b.id
                for b in self._batches.values()
                if not b.done and (now - b.created_at).total_seconds() >= seconds
            ]

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

    # --- registered webhooks -------------------------------------------------------

    def create_webhook(
        self, uri: str, subscribed_events: list[str], name: str | None
    ) -> tuple[RegisteredWebhook, str]:
        """Register a webhook; returns it and its signing secret (shown once, like Gemini)."""
        now = self.clock()
        secret = new_secret()
        webhook = RegisteredWebhook(
            id=uuid.uuid4().hex[:16],
            uri=uri,
            subscribed_events=list(subscribed_events),
            name=name,
            created_at=now,
            updated_at=now,
            secrets=[SigningSecret(secret)],
        )
        with self._lock:
            self._webhooks[webhook.id] = webhook
            return replace(webhook), secret

    def webhook(self, webhook_id: str) -> RegisteredWebhook:
        with self._lock:
            found = self._webhooks.get(webhook_id)
            if found is None:
                raise NotFound(f"Webhook {webhook_id} not found.")
            return replace(found, secrets=list(found.secrets))

    def webhooks(self) -> list[RegisteredWebhook]:
        with self._lock:
            return [replace(w, secrets=list(w.secrets)) for w in self._webhooks.values()]

    def update_webhook(self, webhook_id: str, changes: dict[str, Any]) -> RegisteredWebhook:
        with self._lock:
            webhook = self._webhooks.get(webhook_id)
            if webhook is None:
                raise NotFound(f"Webhook {webhook_id} not found.")
            for key, value in changes.items():
                setattr(webhook, key, value)
            if changes.get("state") == "enabled":
                webhook.consecutive_failures = 0
            webhook.updated_at = self.clock()
            return replace(webhook, secrets=list(webhook.secrets))

    def delete_webhook(self, webhook_id: str) -> None:
        with self._lock:
            if self._webhooks.pop(webhook_id, None) is None:
                raise NotFound(f"Webhook {webhook_id} not found.")

    def rotate_webhook_secret(self, webhook_id: str, revoke_immediately: bool) -> str:
        """A new signing secret; the old ones keep signing for 24 h unless revoked now."""
        secret = new_secret()
        now = self.clock()
        with self._lock:
            webhook = self._webhooks.get(webhook_id)
            if webhook is None:
                raise NotFound(f"Webhook {webhook_id} not found.")
            if revoke_immediately:
                webhook.secrets = []
            else:
                for old in webhook.secrets:
                    if old.expire_time is None:
                        old.expire_time = now + timedelta(hours=24)
            webhook.secrets.insert(0, SigningSecret(secret))
            webhook.updated_at = now
            return secret

    def live_secrets(self, webhook: RegisteredWebhook) -> list[str]:
        now = self.clock()
        return [s.secret for s in webhook.secrets if s.expire_time is None or s.expire_time > now]

    def record_delivery_outcome(self, webhook_id: str, delivered: bool, disable_after: int) -> None:
        """Count failed deliveries in a row; past `disable_after` the webhook is disabled."""
        with self._lock:
            webhook = self._webhooks.get(webhook_id)
            if webhook is None:
                return
            if delivered:
                webhook.consecutive_failures = 0
                return
            webhook.consecutive_failures += 1
            if disable_after > 0 and webhook.consecutive_failures >= disable_after:
                webhook.state = "disabled_due_to_failed_deliveries"
