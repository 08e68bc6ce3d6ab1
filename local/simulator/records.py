"""The records the simulator's world holds (a batch, any other long-running operation, a
registered webhook) and the state words they move through.

Names follow the Gemini API: a batch is `batches/{id}`, any other operation keeps the
name it was created with (e.g. `models/veo-2.0-generate-001/operations/abc`). `World`
(`state.py`) owns every change; these are what callers get back, as snapshots.
"""

from __future__ import annotations

import base64
import secrets
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

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
    priority: int = 0  # Gemini's `batch.priority`: higher runs first (processing.py)
    started_at: datetime | None = None  # when it went RUNNING

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
