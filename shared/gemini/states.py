"""Every state Gemini reports for an operation, and what hookledger does with it: one table.

Two enums of google-genai 3.x feed it, and the unit test
`tests/unit/test_gemini_states.py` iterates both and fails when the installed SDK has a
value this table lacks:
- `google.genai.types.JobState` (batches): the Gemini API sends `metadata.state`
  `BATCH_STATE_*`, which the SDK turns into `JOB_STATE_*` (`_transformers.t_job_state`);
  the Batch API reference lists only UNSPECIFIED, PENDING, RUNNING, SUCCEEDED, FAILED,
  CANCELLED and EXPIRED, the SDK's `JobState` also QUEUED, CANCELLING, PAUSED, UPDATING and
  PARTIALLY_SUCCEEDED (Vertex's job states). We follow the SDK: all are mapped, and a
  value the SDK passes through unconverted (`t_job_state` returns an unknown state as
  sent) is read in either spelling (`BATCH_STATE_X` as `JOB_STATE_X`).
- `google.genai.interactions.InteractionStatus` (the Interactions API `status`).

Each value is one of (docs/gemini-coverage.md, "States"):
- terminal: settles with `status`, possibly `partial` (some results missing) or
  `incomplete` (the interaction ended with incomplete results);
- running: Gemini is working; reconcile checks again later;
- waiting: nothing happens until someone acts (`waits_for` says who/what); reconcile
  alerts once per window (`alert="operation_waiting"`) and keeps checking.
A value in neither enum is treated as running: never settled on a guess; the stuck
alert covers it if it lasts.
"""

from __future__ import annotations

from dataclasses import dataclass

RUNNING = "running"
WAITING = "waiting"
TERMINAL = "terminal"


@dataclass(frozen=True)
class StateMeaning:
    """What one reported state means: `kind` terminal/running/waiting, and for a terminal
    state the ledger `status` it settles with."""

    kind: str
    meaning: str
    status: str | None = None
    partial: bool = False
    incomplete: bool = False

    @property
    def waits_for(self) -> str | None:
        """What a waiting operation waits for; None unless `kind` is waiting."""
        return self.meaning if self.kind == WAITING else None


def _terminal(status: str, meaning: str, **flags: bool) -> StateMeaning:
    return StateMeaning(TERMINAL, meaning, status, **flags)


def _running(meaning: str) -> StateMeaning:
    return StateMeaning(RUNNING, meaning)


def _waiting(meaning: str) -> StateMeaning:
    return StateMeaning(WAITING, meaning)


# The one table. Keys are the values the SDK reports: `JobState` values (upper case) and
# Interactions API statuses (lower case); the two never collide.
STATES: dict[str, StateMeaning] = {
    # --- google.genai.types.JobState (batches)
    "JOB_STATE_UNSPECIFIED": _running("no state reported yet"),
    "JOB_STATE_QUEUED": _running("created or resumed; processing has not begun"),
    "JOB_STATE_PENDING": _running("the service is preparing to run it"),
    "JOB_STATE_RUNNING": _running("in progress"),
    "JOB_STATE_UPDATING": _running("being updated; goes back to RUNNING"),
    "JOB_STATE_CANCELLING": _running("cancel requested; ends SUCCEEDED, FAILED or CANCELLED"),
    "JOB_STATE_PAUSED": _waiting("someone to resume it (stopped, can be resumed)"),
    "JOB_STATE_SUCCEEDED": _terminal("succeeded", "completed"),
    "JOB_STATE_PARTIALLY_SUCCEEDED": _terminal(
        "succeeded", "partially succeeded: some results may be missing", partial=True
    ),
    "JOB_STATE_FAILED": _terminal("failed", "failed"),
    "JOB_STATE_CANCELLED": _terminal("cancelled", "cancelled"),
    "JOB_STATE_EXPIRED": _terminal("expired", "expired (pending or running past 48 h)"),
    # --- google.genai.interactions.InteractionStatus (interactions)
    "queued": _running("queued"),
    "in_progress": _running("in progress"),
    "completed": _terminal("succeeded", "completed"),
    "incomplete": _terminal(
        "succeeded", "completed, but contains incomplete results", incomplete=True
    ),
    "failed": _terminal("failed", "failed"),
    "budget_exceeded": _terminal("failed", "stopped: its budget was exceeded"),
    "cancelled": _terminal("cancelled", "cancelled"),
    "requires_action": _waiting("a client-side tool result (function call output)"),
    "requires_continuation": _waiting(
        "a continuation: create the next interaction with its continuation_token"
    ),
    "idle": _waiting("a new turn from its caller (all processing done)"),
}

_UNKNOWN = _running("a state this code does not know; never settled on a guess")


def meaning_of(state: str) -> StateMeaning:
    """The table's entry for `state` (a `BATCH_STATE_*` is read as its `JOB_STATE_*`)."""
    found = STATES.get(state)
    if found is None and state.startswith("BATCH_STATE_"):
        found = STATES.get("JOB_STATE_" + state.removeprefix("BATCH_STATE_"))
    return found or _UNKNOWN


# Views kept for callers that predate the table (the values are the table's).
TERMINAL_STATES = {
    state: meaning.status
    for state, meaning in STATES.items()
    if state.startswith("JOB_STATE_") and meaning.status is not None
}
INTERACTION_STATES = {
    state: meaning for state, meaning in STATES.items() if not state.startswith("JOB_STATE_")
}

__all__ = [
    "INTERACTION_STATES",
    "RUNNING",
    "STATES",
    "TERMINAL",
    "TERMINAL_STATES",
    "WAITING",
    "StateMeaning",
    "meaning_of",
]
