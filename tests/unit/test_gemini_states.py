"""The one state table (shared/gemini/states.py) against the installed google-genai: every
value of its `JobState` and of its Interactions `InteractionStatus` is mapped on purpose."""

from __future__ import annotations

import typing

import pytest
from google.genai import interactions as genai_interactions
from google.genai import types

from shared.gemini import STATES, BatchStatus, Row, meaning_of
from shared.gemini.states import RUNNING, TERMINAL, WAITING
from shared.ledger import TERMINAL_STATUSES


def sdk_interaction_statuses() -> set[str]:
    """The literal values of `google.genai.interactions.InteractionStatus`."""
    found: set[str] = set()
    stack: list[typing.Any] = [genai_interactions.InteractionStatus]
    while stack:
        hint = stack.pop()
        if typing.get_origin(hint) is typing.Literal:
            found.update(str(value) for value in typing.get_args(hint))
        else:
            stack.extend(typing.get_args(hint))
    return found


def test_every_job_state_of_the_installed_sdk_is_in_the_table() -> None:
    missing = sorted(state.value for state in types.JobState if state.value not in STATES)
    assert missing == [], f"JobState values with no entry in shared/gemini/states.py: {missing}"


def test_every_interaction_status_of_the_installed_sdk_is_in_the_table() -> None:
    statuses = sdk_interaction_statuses()
    assert statuses, "google.genai.interactions.InteractionStatus lists no statuses any more"
    missing = sorted(statuses - set(STATES))
    assert missing == [], f"InteractionStatus values with no entry in the table: {missing}"


@pytest.mark.parametrize("state", sorted(STATES))
def test_each_entry_is_a_deliberate_kind(state: str) -> None:
    meaning = STATES[state]
    assert meaning.kind in {TERMINAL, RUNNING, WAITING}, state
    assert meaning.meaning, state
    if meaning.kind == TERMINAL:
        assert meaning.status in TERMINAL_STATUSES, state
    else:
        assert meaning.status is None and not (meaning.partial or meaning.incomplete), state


@pytest.mark.parametrize(
    ("name", "state", "status", "flags"),
    [
        ("success", "JOB_STATE_SUCCEEDED", "succeeded", {}),
        (
            "partial success is not a full one",
            "JOB_STATE_PARTIALLY_SUCCEEDED",
            "succeeded",
            {"partial": True},
        ),
        ("cancelling is still running", "JOB_STATE_CANCELLING", None, {}),
        ("queued", "JOB_STATE_QUEUED", None, {}),
        ("updating", "JOB_STATE_UPDATING", None, {}),
        ("paused waits", "JOB_STATE_PAUSED", None, {}),
        ("the REST spelling", "BATCH_STATE_EXPIRED", "expired", {}),
        ("an unknown state never settles", "JOB_STATE_FROM_THE_FUTURE", None, {}),
        ("incomplete interaction", "incomplete", "succeeded", {"incomplete": True}),
        ("budget exceeded", "budget_exceeded", "failed", {}),
    ],
)
def test_a_status_settles_as_its_table_entry_says(
    name: str, state: str, status: str | None, flags: dict[str, bool]
) -> None:
    batch = BatchStatus("batches/x", state, rows=(Row("a.md", text="t"),))
    assert batch.terminal_status == status, name
    assert batch.outcome == flags, name


@pytest.mark.parametrize(
    ("state", "says"),
    [
        ("requires_action", "tool result"),
        ("requires_continuation", "continuation_token"),
        ("idle", "new turn"),
        ("JOB_STATE_PAUSED", "resume"),
    ],
)
def test_a_waiting_state_says_what_it_waits_for(state: str, says: str) -> None:
    assert says in (BatchStatus("interactions/i", state).waits_for or ""), state
    assert meaning_of(state).kind == WAITING


def test_running_states_wait_for_nothing() -> None:
    assert BatchStatus("batches/x", "JOB_STATE_RUNNING").waits_for is None
