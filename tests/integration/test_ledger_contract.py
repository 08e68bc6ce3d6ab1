"""The exactly-once contract every ledger implementation must pass (docs/architecture.md,
"Settlement"): one suite, parametrized over the implementations.

- `settling`: the settle side (`shared.ledger.protocols.SettleLedger`, `DeferLedger`,
  `AlertLedger`): the Firestore `Ledger` on the emulator, and the in-memory double the
  fast unit tests use (tests/memory_ledger.py). A double that passes these may stand in
  for Firestore in tests of `Settler` and reconcile's decisions.
- `ledger_with_leases`: what only the Firestore ledger implements (one winner per push,
  the delivery lease).
- `installing`: GitHub App installations (`ledger.installations`): idempotent, and an
  older event never overwrites a newer one, on both implementations (the rules
  themselves, `merged`, are unit tests: tests/unit/test_installations.py).

Only the interface is used: what a test observes is what a caller could read.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import pytest

from apps.review.results import Reviews, put_review
from shared.errors import PermanentError
from shared.ledger import Settlement, WritebackFailed
from tests.ledger_parts import installation_event
from tests.memory_ledger import MemoryLedger

NAME = "batches/contract"
REPO, SHA = "o/r", "abc123"


def firestore_ledger(request):
    """The emulator's `ledger`, started only for the tests that use it.

    Asked for lazily, the session's emulator may start after `_restore_environ` saved the
    environment, which then drops its address after this test: set it again each time."""
    os.environ["FIRESTORE_EMULATOR_HOST"] = request.getfixturevalue("firestore_emulator")
    return request.getfixturevalue("ledger")


@pytest.fixture(params=["firestore", "memory"])
def settling(request, clock):
    if request.param == "memory":
        return MemoryLedger(clock)
    return firestore_ledger(request)


@pytest.fixture(params=["firestore"])
def ledger_with_leases(request):
    return firestore_ledger(request)


def review(text, calls=None):
    """A write-back storing one review of README.md saying `text`."""

    def writeback(writes, record):
        if calls is not None:
            calls.append(text)
        put_review(writes, REPO, SHA, "README.md", {"status": "ok", "text": text})

    return writeback


def texts(ledger):
    return [doc["text"] for doc in Reviews(ledger).reviews_for(NAME)]


# ----------------------------------------------------------------- conditional settle


def test_two_settles_from_one_read_settle_once_and_write_back_once(settling):
    settling.operations.register(NAME, "k")
    read = settling.operations.get(NAME)  # webhook W and reconcile R both read v1 (pending)
    calls: list[str] = []

    first = settling.settle(
        NAME, "succeeded", "webhook", writeback=review("W", calls), expected=read
    )
    second = settling.settle(
        NAME, "failed", "reconcile", writeback=review("R", calls), expected=read
    )

    assert (first, second) == (Settlement.SETTLED, Settlement.ALREADY_SETTLED)
    record = settling.operations.get(NAME)
    assert (record.status, record.settled_by) == ("succeeded", "webhook")
    assert texts(settling) == ["W"]  # R's write-back may have run, but never committed
    assert calls[0] == "W"


def test_settles_racing_on_threads_have_exactly_one_winner(settling):
    settling.operations.register(NAME, "k")
    barrier = threading.Barrier(4)

    def race(i: int) -> Settlement:
        barrier.wait()
        return settling.settle(NAME, "succeeded", "reconcile", writeback=review(f"t{i}"))

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(race, range(4)))

    assert sorted(results) == [Settlement.ALREADY_SETTLED] * 3 + [Settlement.SETTLED]
    assert texts(settling) == [f"t{results.index(Settlement.SETTLED)}"]


def test_settling_an_unknown_operation_writes_nothing(settling):
    calls: list[str] = []

    assert (
        settling.settle(NAME, "succeeded", "webhook", writeback=review("x", calls))
        is Settlement.UNKNOWN
    )
    assert (settling.operations.get(NAME), calls, texts(settling)) == (None, [], [])


# ----------------------------------------------------------------- write-back in the commit


def test_a_failing_writeback_leaves_the_operation_pending_with_no_result_nor_outbox(settling):
    settling.operations.register(NAME, "k")

    def half_then_fail(writes, record):
        review("half")(writes, record)
        raise RuntimeError("model output unparsable")

    with pytest.raises(WritebackFailed, match=NAME):
        settling.settle(NAME, "succeeded", "webhook", writeback=half_then_fail, outbox=[{"n": 1}])

    record = settling.operations.get(NAME)
    assert (record.status, record.settled_at, record.outbox) == ("pending", None, ())
    assert texts(settling) == []
    assert settling.settle(NAME, "succeeded", "reconcile", writeback=review("later")) == (
        Settlement.SETTLED
    )
    assert texts(settling) == ["later"]


def test_a_permanent_writeback_error_settles_without_its_results(settling):
    settling.operations.register(NAME, "k")

    def refused(writes, record):
        review("half")(writes, record)
        raise PermanentError("cannot be stored")

    assert settling.settle(NAME, "succeeded", "webhook", writeback=refused) is Settlement.SETTLED

    record = settling.operations.get(NAME)
    assert record.status == "succeeded"
    assert "cannot be stored" in str(record.writeback_error)
    assert texts(settling) == []


def test_the_writeback_sees_the_pending_record_it_settles(settling):
    settling.operations.register(NAME, "k", {"repo": REPO})
    seen = []

    settling.settle(NAME, "succeeded", "webhook", writeback=lambda w, r: seen.append(r))

    assert [(r.name, r.status, r.context) for r in seen][-1] == (NAME, "pending", {"repo": REPO})


# ----------------------------------------------------------------- outbox in the commit


def test_outbox_items_are_stored_by_the_settling_commit_with_stable_keys(settling):
    settling.operations.register(NAME, "k")

    settling.settle(NAME, "succeeded", "webhook", outbox=[{"a": 1}, {"b": 2}])
    late = settling.settle(NAME, "failed", "reconcile", outbox=[{"c": 3}])

    record = settling.operations.get(NAME)
    assert late is Settlement.ALREADY_SETTLED
    assert [item.payload for item in record.outbox] == [{"a": 1}, {"b": 2}]
    assert [item.idempotency_key for item in record.outbox] == [
        f"{record.doc_id}:0",
        f"{record.doc_id}:1",
    ]
    assert all(item.open for item in record.outbox) and record.writeback_done is False


def test_with_a_deliverer_each_item_is_delivered_once_right_after_the_commit(settling):
    settling.operations.register(NAME, "k")
    delivered: list[str] = []

    settling.settle(
        NAME,
        "succeeded",
        "webhook",
        outbox=[{"a": 1}],
        deliver=lambda item: delivered.append(item.idempotency_key),
    )

    record = settling.operations.get(NAME)
    assert delivered == [f"{record.doc_id}:0"]
    assert record.writeback_done is True and not record.outbox[0].open


# ----------------------------------------------------------------- pending-only marks


def test_404_marks_keep_the_first_sighting_until_cleared_and_stop_once_settled(settling, clock):
    settling.operations.register(NAME, "k")
    first = clock()

    assert settling.operations.mark_not_found(NAME, first) == first
    clock.advance(30)
    assert settling.operations.mark_not_found(NAME, clock()) == first
    assert settling.operations.clear_not_found(NAME) is True
    assert settling.operations.clear_not_found(NAME) is False
    assert settling.operations.mark_not_found(NAME, clock()) == clock()

    settling.settle(NAME, "failed", "reconcile")
    assert settling.operations.mark_not_found(NAME, clock()) is None
    assert settling.operations.mark_not_found("batches/unknown", clock()) is None


def test_defer_and_alerts_apply_to_pending_operations_only_once_per_window(settling, clock):
    settling.operations.register(NAME, "k")
    window = timedelta(hours=1)
    later = clock() + timedelta(minutes=5)

    assert settling.operations.defer(NAME, later, 1, answer="still running") is True
    assert settling.operations.mark_stuck_alerted(NAME, clock(), window) is True
    assert settling.operations.mark_stuck_alerted(NAME, clock(), window) is False
    assert settling.operations.mark_waiting_alerted(NAME, clock(), window) is True
    record = settling.operations.get(NAME)
    assert (record.attempts, record.next_check_at) == (1, later)
    assert [check["answer"] for check in record.checks] == ["still running"]

    settling.settle(NAME, "succeeded", "webhook")
    clock.advance(2 * 3600)
    assert settling.operations.defer(NAME, clock(), 2) is False
    assert settling.operations.mark_stuck_alerted(NAME, clock(), window) is False
    assert settling.operations.get(NAME).attempts == 1


# ----------------------------------------------------------------- Firestore only


def test_of_two_batches_of_one_push_exactly_one_is_registered_the_winner(ledger_with_leases):
    tag = "hookledger:review:o/r@abc"
    submissions = ledger_with_leases.submissions

    first = submissions.register_winner(tag, "batches/one", "github-review", {"paths": []})
    second = submissions.register_winner(tag, "batches/two", "github-review", {"paths": []})

    assert (first.won, first.operation) == (True, "batches/one")
    assert (second.won, second.operation) == (False, "batches/one")
    assert ledger_with_leases.operations.get("batches/one").pending
    assert ledger_with_leases.operations.get("batches/two") is None


def test_a_second_attempt_while_a_delivery_is_leased_is_busy(ledger_with_leases, clock):
    lease = timedelta(minutes=10)
    record = ledger_with_leases.deliveries.record

    first = record("github", "d-1", "push", attempt="a", lease_for=lease)
    busy = record("github", "d-1", "push", attempt="b", lease_for=lease)
    clock.advance(lease.total_seconds())
    after = record("github", "d-1", "push", attempt="b", lease_for=lease)

    assert (first.busy, busy.busy, busy.delivery.lease.attempt) == (False, True, "a")
    assert (after.busy, after.delivery.lease.attempt) == (False, "b")


# ----------------------------------------------------------------- installations


@pytest.fixture(params=["firestore", "memory"])
def installing(request, clock):
    if request.param == "memory":
        return MemoryLedger(clock)
    return firestore_ledger(request)


def event_at(minute: int, **facts):
    """Installation 7's `created` facts at 02:`minute` (a selected one), with `facts`."""
    return installation_event(7, updated_at=datetime(2021, 4, 29, 2, minute, tzinfo=UTC), **facts)


def record(ledger, facts, delivery, clock):
    clock.advance(1)  # each delivery reaches the ingress a second after the last
    return ledger.installations.apply(facts, received_at=clock(), delivery_id=delivery)


def test_an_installation_event_is_recorded_and_its_duplicate_changes_nothing(installing, clock):
    first = record(installing, event_at(0), "d-created", clock)
    stored = installing.installations.get(7)
    again = installing.installations.apply(
        event_at(0), received_at=clock(), delivery_id="d-created"
    )

    assert (first.changed, again.changed) == (True, False)
    assert (stored.status, stored.account, stored.covered) == (
        "active",
        "octo-org",
        ("octo-org/handbook",),
    )
    assert installing.installations.get(7) == stored  # same updated_at, same delivery
    assert stored.delivery_id == "d-created"
    assert installing.installations.get(8) is None


def test_an_older_installation_event_delivered_late_changes_nothing(installing, clock):
    record(installing, event_at(0), "d-created", clock)
    record(installing, event_at(9, action="unsuspend"), "d-unsuspend", clock)
    late = record(installing, event_at(5, action="suspend", suspended=True), "d-suspend", clock)

    stored = installing.installations.get(7)
    assert late.changed is False
    assert (stored.status, stored.delivery_id) == ("active", "d-unsuspend")


def test_installations_list_by_id_filtered_by_status_a_page_at_a_time(installing, clock):
    for number, suspended in ((12, True), (3, False), (7, True)):
        facts = installation_event(number, suspended=suspended)
        installing.installations.apply(facts, received_at=clock(), delivery_id=f"d-{number}")
    listing = installing.installations.listing

    assert [i.installation_id for i in listing()] == [3, 7, 12]
    assert [i.installation_id for i in listing("suspended", 1)] == [7]
    assert [i.installation_id for i in listing("suspended", 5, after=7)] == [12]
