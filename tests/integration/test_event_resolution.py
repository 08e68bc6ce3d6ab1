"""Which operation a Gemini event is about: the hookledger id its job echoes
(`user_metadata`), then `data.id` — against the Firestore emulator."""

from __future__ import annotations

from datetime import timedelta

import pytest

from apps.review.kind import KIND, review_tag
from local.fakes import FakeClock
from shared.gemini import HOOKLEDGER_ID
from shared.handlers.builtin import echoed_id, event_operation
from shared.ledger import Ledger

TAG = review_tag("o/r", "c" * 40)
CONTEXT = {"repo": "o/r", "sha": "c" * 40, "paths": ["a.md"], "refused": []}


@pytest.fixture
def ledger(firestore_client):
    clock = FakeClock()
    ledger = Ledger(firestore_client, clock=clock)
    now = clock()
    ledger.submissions.claim(
        TAG,
        delivery_id="d-1",
        attempt="a1",
        lease_until=now + timedelta(minutes=10),
        now=now,
        context=CONTEXT,
    )
    assert ledger.submissions.register_winner(TAG, "batches/winner1", KIND, CONTEXT).won
    # A second batch of the same push that slipped through, recorded in the ledger too.
    ledger.operations.register("batches/duplicate1", KIND, CONTEXT)
    ledger.operations.register(
        "batches/submitted1", "probe", {"display_name": "hookledger:probe:k1"}
    )
    return ledger


CASES = [
    # (case, data.id, echoed id, the operation it resolves to)
    ("echoed id and data.id agree", "batches/winner1", TAG, "batches/winner1"),
    ("echoed id, bare data.id", "winner1", TAG, "batches/winner1"),
    ("echoed id, data.id in a form not known", "evt-opaque-77", TAG, "batches/winner1"),
    ("echoed id, data.id names the duplicate", "duplicate1", TAG, "batches/duplicate1"),
    (
        "submit's tag, from context.display_name",
        "op-9",
        "hookledger:probe:k1",
        "batches/submitted1",
    ),
    (
        "unknown tag: data.id decides",
        "batches/duplicate1",
        "hookledger:review:x@y",
        "batches/duplicate1",
    ),
    ("no echoed id: data.id as before", "winner1", None, "batches/winner1"),
    ("neither names an operation", "evt-opaque-77", None, None),
    ("unknown tag, unknown data.id", "evt-opaque-77", "hookledger:review:x@y", None),
]


@pytest.mark.parametrize(
    ("case", "data_id", "echoed", "expected"), CASES, ids=[c[0] for c in CASES]
)
def test_the_echoed_id_first_then_data_id(ledger, case, data_id, echoed, expected) -> None:
    found = event_operation(ledger, data_id, echoed, "batch.succeeded")
    assert (found.name if found else None) == expected, case


def test_only_hookledger_tags_are_read_from_user_metadata() -> None:
    def event(where: str, value: object) -> dict[str, object]:
        metadata = {"user_metadata": {HOOKLEDGER_ID: value}}
        return {"data": {"id": "x", **metadata}} if where == "data" else {"data": {}, **metadata}

    assert echoed_id(event("data", TAG)) == TAG
    assert echoed_id(event("top", TAG)) == TAG
    assert echoed_id(event("data", "someone-elses-job")) is None
    assert echoed_id(event("data", 42)) is None
    assert echoed_id(event("data", "hookledger:x:" + "k" * 600)) is None
    assert echoed_id({"data": {"id": "x", "user_metadata": "not-an-object"}}) is None
