"""`Settler`'s decisions against the in-memory ledger (tests/memory_ledger.py): no emulator.

The double passes the same exactly-once contract as the Firestore ledger
(tests/integration/test_ledger_contract.py), so what is decided here is what Settler
does against Firestore; the emulator tests keep the end-to-end paths (test_reconcile.py,
test_gemini_files.py).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest

from apps.review.results import Reviews
from local.fakes import FakeClock
from shared.gemini import BatchStatus, GeminiNotFound, GeminiRowsUnread, Row
from shared.settlement.settler import GIVE_UP_AFTER, GONE_AFTER, RUNNING, Settler
from tests.memory_ledger import MemoryLedger
from tests.standins import ScriptedGemini as Gemini

NAME = "batches/unit"
CONTEXT = {"repo": "o/r", "sha": "abc123", "paths": ["a.md", "b.md"]}


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def ledger(clock: FakeClock) -> MemoryLedger:
    memory = MemoryLedger(clock)
    memory.operations.register(NAME, "github-review", CONTEXT)
    return memory


def settler(ledger: MemoryLedger, gemini: Gemini, clock: FakeClock) -> Settler:
    return Settler(ledger, gemini, clock=clock)


def status(state: str, **fields) -> BatchStatus:
    return BatchStatus(NAME, state, **fields)


def reviews(ledger: MemoryLedger) -> dict[str, dict]:
    return {doc["path"]: doc for doc in Reviews(ledger).reviews_for(NAME)}


def test_a_running_batch_is_not_settled(ledger, clock):
    outcome = settler(ledger, Gemini(status("JOB_STATE_RUNNING")), clock).settle(NAME, "webhook")

    assert (outcome.result, outcome.waits_for) == (RUNNING, None)
    assert ledger.operations.get(NAME).pending and ledger.settle_calls == 0


def test_an_interaction_waiting_on_its_caller_says_for_what(ledger, clock):
    outcome = settler(ledger, Gemini(status("requires_action")), clock).settle(NAME, "reconcile")

    assert outcome.result == RUNNING and "function call" in (outcome.waits_for or "")
    assert ledger.operations.get(NAME).pending


def test_a_succeeded_batch_with_its_rows_settles_with_one_review_per_file(ledger, clock):
    rows = (Row("a.md", text="fine"), Row("b.md", error="empty answer"))
    gemini = Gemini(status("JOB_STATE_SUCCEEDED", rows=rows))

    outcome = settler(ledger, gemini, clock).settle(NAME, "webhook")

    assert (outcome.result, outcome.status) == ("settled", "succeeded")
    record = ledger.operations.get(NAME)
    assert (record.status, record.settled_by, record.error) == ("succeeded", "webhook", None)
    assert record.result_counts == {"succeeded": 1, "failed": 1, "blocked": 0, "truncated": 0}
    got = reviews(ledger)
    assert (got["a.md"]["status"], got["a.md"]["text"]) == ("ok", "fine")
    assert (got["b.md"]["status"], got["b.md"]["error"]) == ("error", "empty answer")


def test_a_settled_operation_is_not_fetched_again(ledger, clock):
    ledger.settle(NAME, "failed", "webhook")
    gemini = Gemini()

    outcome = settler(ledger, gemini, clock).settle(NAME, "reconcile")

    assert (outcome.result, outcome.status, gemini.fetched) == ("already_settled", "failed", [])


def test_an_unknown_operation_is_reported_unknown(ledger, clock):
    assert settler(ledger, Gemini(), clock).settle("batches/nope", "webhook").result == "unknown"


def test_a_404_settles_gone_only_when_seen_again_gone_after_the_first(ledger, clock):
    gone = GeminiNotFound("404")
    run: Callable[[], object] = settler(ledger, Gemini(gone, gone, gone), clock).settle

    with pytest.raises(GeminiNotFound) as first:
        run(NAME, "reconcile")
    assert first.value.recheck_after_s == GONE_AFTER.total_seconds()
    clock.advance(GONE_AFTER.total_seconds() / 2)
    with pytest.raises(GeminiNotFound) as second:
        run(NAME, "webhook")  # a redelivered event cannot shorten the wait
    assert second.value.recheck_after_s == GONE_AFTER.total_seconds() / 2
    assert ledger.operations.get(NAME).pending
    clock.advance(GONE_AFTER.total_seconds() / 2)

    outcome = run(NAME, "reconcile")

    assert (outcome.result, outcome.status) == ("settled", "failed")
    record = ledger.operations.get(NAME)
    assert (record.error["reason"], record.error["code"]) == ("gone", 404)
    assert {doc["status"] for doc in reviews(ledger).values()} == {"error"}  # one per file


def test_an_answer_between_two_404s_forgets_the_first(ledger, clock):
    gemini = Gemini(GeminiNotFound("404"), status("JOB_STATE_RUNNING"), GeminiNotFound("404"))
    run = settler(ledger, gemini, clock).settle

    with pytest.raises(GeminiNotFound):
        run(NAME, "reconcile")
    clock.advance(60)
    assert run(NAME, "reconcile").result == RUNNING
    assert ledger.operations.get(NAME).not_found_at is None
    clock.advance(60)
    with pytest.raises(GeminiNotFound) as again:
        run(NAME, "reconcile")  # a first 404 once more: the wait starts over

    assert again.value.recheck_after_s == GONE_AFTER.total_seconds()
    assert ledger.operations.get(NAME).pending


def test_unreadable_rows_keep_it_pending_then_settle_failed_near_the_files_retention(ledger, clock):
    ended = clock()
    unread = status("JOB_STATE_SUCCEEDED", rows_unread="download failed: 503", ended_at=ended)
    run = settler(ledger, Gemini(unread, unread), clock).settle

    with pytest.raises(GeminiRowsUnread, match="stays pending"):
        run(NAME, "reconcile")
    assert ledger.operations.get(NAME).pending and ledger.settle_calls == 0
    clock.advance((GIVE_UP_AFTER + timedelta(seconds=1)).total_seconds())

    outcome = run(NAME, "reconcile")

    assert (outcome.result, outcome.status) == ("settled", "failed")
    error = ledger.operations.get(NAME).error
    assert error["reason"] == "results_unreadable" and "download failed: 503" in error["message"]
    got = reviews(ledger)
    assert sorted(got) == ["a.md", "b.md"]
    assert all("results never read" in doc["error"] for doc in got.values())
