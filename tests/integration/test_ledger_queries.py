"""The ledger's read-only queries (CLI, console) against the emulator: what each returns."""

from __future__ import annotations

from datetime import timedelta

import pytest

from shared.ledger import InvalidArgument, Ledger


@pytest.fixture
def ledger(firestore_client, clock):
    ledger = Ledger(firestore_client, clock=clock)
    for name, kind in [("batches/a", "review"), ("batches/b", "video"), ("batches/c", "review")]:
        ledger.operations.register(name, kind, {"sha": name[-1] * 3})
        clock.advance(10)
    ledger.settle("batches/b", "succeeded", "webhook")
    ledger.settle("batches/c", "failed", "reconcile", error="boom")
    return ledger


def names(records):
    return [record.name for record in records]


def test_counts_are_by_status_and_kind(ledger):
    assert ledger.queries.count_operations() == 3
    assert ledger.queries.count_operations(status="pending") == 1
    assert ledger.queries.count_operations(kind="review") == 2
    assert ledger.queries.count_operations(status="failed", kind="review") == 1
    assert ledger.queries.count_operations(status="expired") == 0


def test_list_operations_is_newest_first_filtered_and_paged(ledger):
    first = ledger.queries.list_operations(limit=2)
    rest = ledger.queries.list_operations(limit=2, start_after=first[-1])

    assert (names(first), names(rest)) == (["batches/c", "batches/b"], ["batches/a"])
    assert names(ledger.queries.list_operations(kind="review")) == ["batches/c", "batches/a"]
    assert names(ledger.queries.list_operations(settled_by="webhook")) == ["batches/b"]
    assert names(ledger.queries.list_operations(status="failed", kind="review")) == ["batches/c"]
    with pytest.raises(InvalidArgument):
        ledger.queries.list_operations(status="done")


def test_oldest_pending_and_stuck_alerts_count_only_pending_operations(ledger, clock):
    ledger.operations.register("batches/d", "review")
    ledger.operations.mark_stuck_alerted("batches/a", clock(), timedelta(hours=1))
    clock.advance(5)
    ledger.operations.mark_stuck_alerted("batches/d", clock(), timedelta(hours=1))
    clock.advance(5)
    ledger.settle("batches/d", "expired", "reconcile")  # keeps its old alert time

    assert ledger.queries.oldest_pending().name == "batches/a"
    assert names(ledger.queries.stuck_alerted()) == ["batches/a"]
    assert ledger.queries.count_stuck_alerted() == 1


def test_oldest_pending_is_none_when_nothing_is_pending(firestore_client, clock):
    assert Ledger(firestore_client, clock=clock).queries.oldest_pending() is None


def test_find_operation_by_context_and_stored_fields(ledger):
    assert ledger.queries.find_operation("context.sha", "ccc").name == "batches/c"
    assert ledger.queries.find_operation("context.sha", "zzz") is None
    with pytest.raises(InvalidArgument):
        ledger.queries.find_operation("status", "pending")

    fields = ledger.queries.stored_fields("c")
    assert fields["error"] == "boom" and fields["short_id"] == "c"
    assert ledger.queries.stored_fields("batches/none") is None


def test_deliveries_list_by_source_and_event_with_a_cursor_and_find_by_id(ledger, clock):
    for source, delivery_id, event in [
        ("github", "d-1", "push"),
        ("gemini", "d-1", "batch.succeeded"),
        ("github", "d-2", "ping"),
        ("github", "d-3", "push"),
    ]:
        ledger.deliveries.record(source, delivery_id, event)
        clock.advance(1)
    ledger.deliveries.mark("github", "d-3", "dead", error="bad")

    github = ledger.deliveries.listing(source="github", limit=2)
    more = ledger.deliveries.listing(source="github", limit=2, start_after=github[-1])

    assert [d.delivery_id for d in github + more] == ["d-3", "d-2", "d-1"]
    assert [d.delivery_id for d in ledger.deliveries.listing(event="push")] == ["d-3", "d-1"]
    assert [d.source for d in ledger.deliveries.listing("dead", source="github")] == ["github"]
    assert sorted(d.source for d in ledger.deliveries.find("d-1")) == ["gemini", "github"]
    assert ledger.deliveries.count() == 4
    assert ledger.deliveries.count("dead") == 1
