"""Every query the ledger issues is served by an index declared in terraform/firestore_indexes.json.

The emulator runs any query without an index; production rejects one that needs a missing
composite index. So the queries are captured as the real client builds them, and each
is matched against the declared indexes by Firestore's rules.
"""

from __future__ import annotations

import itertools
import json
from datetime import timedelta
from pathlib import Path

import pytest
from google.cloud import firestore
from google.cloud.firestore_v1.aggregation import AggregationQuery
from google.cloud.firestore_v1.query import Query

from shared.clock import FakeClock
from shared.ledger import Ledger

INDEXES = Path(__file__).resolve().parents[2] / "terraform" / "firestore_indexes.json"
EQUALITY = {"EQUAL"}


def declared_indexes():
    spec = json.loads(INDEXES.read_text())
    return [
        (index["collectionGroup"], [(f["fieldPath"], f["order"]) for f in index["fields"]])
        for index in spec["indexes"]
    ]


def shape(structured):
    """(collection, equality fields, other filter fields, [(order field, direction)])."""
    query = type(structured).to_dict(structured, use_integers_for_enums=False)
    collection = query["from_"][0]["collection_id"]
    where = query.get("where") or {}
    filters = [f["field_filter"] for f in (where.get("composite_filter") or {}).get("filters", [])]
    if where.get("field_filter"):
        filters.append(where["field_filter"])
    equality = {f["field"]["field_path"] for f in filters if f["op"] in EQUALITY}
    others = {f["field"]["field_path"] for f in filters if f["op"] not in EQUALITY}
    order = [
        (o["field"]["field_path"], o["direction"])
        for o in query.get("order_by", [])
        if o["field"]["field_path"] != "__name__"
    ]
    return collection, equality, others, order


def missing_index(structured, indexes):
    """None when the query is served; else a description of the index it needs."""
    collection, equality, others, order = shape(structured)
    fields = equality | others | {field for field, _ in order}
    if len(fields) <= 1:
        return None  # single-field indexes exist automatically
    if not others and not order:
        return None  # equality filters only: Firestore merges the single-field indexes
    if others and (not order or order[0][0] not in others):
        return f"{collection}: inequality on {others} must be the first order-by"
    for group, index_fields in indexes:
        if group != collection or len(index_fields) != len(equality) + len(order):
            continue
        prefix, rest = index_fields[: len(equality)], index_fields[len(equality) :]
        if {field for field, _ in prefix} == equality and rest == order:
            return None
    return f"{collection}: equality {sorted(equality)} then order {order}"


@pytest.fixture
def captured(monkeypatch):
    queries = []
    real_stream, real_count = Query.stream, AggregationQuery.get

    def recording_stream(self, *args, **kwargs):
        queries.append(self._to_protobuf())
        return real_stream(self, *args, **kwargs)

    def recording_count(self, *args, **kwargs):
        queries.append(self._nested_query._to_protobuf())
        return real_count(self, *args, **kwargs)

    monkeypatch.setattr(Query, "stream", recording_stream)
    monkeypatch.setattr(AggregationQuery, "get", recording_count)
    return queries


def test_each_ledger_query_uses_a_declared_index(firestore_client, captured):
    clock = FakeClock()
    ledger = Ledger(firestore_client, clock=clock)
    ledger.operations.register("batches/a", "k")
    ledger.operations.register("batches/b", "k")
    ledger.settle("batches/b", "succeeded", "webhook", outbox=[{"n": 1}])
    ledger.deliveries.record("github", "d-1", "push")
    clock.advance(3600)

    page = ledger.operations.due_pending(clock.now, limit=1)
    ledger.operations.due_pending(clock.now, limit=1, start_after=page[-1])
    ledger.outbox.sweep(lambda item: None, older_than=timedelta(seconds=60))
    ledger.deliveries.listing(status="queued")
    ledger.deliveries.listing()
    ledger.operations.get("a")  # bare id: looked up by short_id

    assert len(captured) == 6
    indexes = declared_indexes()
    assert [missing_index(query, indexes) for query in captured] == [None] * len(captured)


def test_each_read_only_query_uses_a_declared_index(firestore_client, captured):
    ledger = Ledger(firestore_client, clock=FakeClock())
    ledger.operations.register("batches/a", "k", {"sha": "s1"})
    ledger.deliveries.record("github", "d-1", "push")
    [first] = ledger.queries.list_operations(limit=1)
    [delivery] = ledger.deliveries.listing(limit=1)
    captured.clear()

    for status, kind, settled_by in itertools.product(
        [None, "pending"], [None, "k"], [None, "webhook"]
    ):
        ledger.queries.list_operations(status, kind, settled_by, limit=5, start_after=first)
        if settled_by is None:
            ledger.queries.count_operations(status, kind)
    for status, source, event in itertools.product(
        [None, "queued"], [None, "github"], [None, "push"]
    ):
        ledger.deliveries.listing(status, 5, source=source, event=event, start_after=delivery)
    ledger.deliveries.count()
    ledger.deliveries.count("dead")
    ledger.queries.oldest_pending()
    ledger.queries.stuck_alerted(limit=3)
    ledger.queries.count_stuck_alerted()
    ledger.deliveries.find("d-1")
    ledger.queries.find_operation("context.sha", "s1")
    ledger.reviews.reviews_for("batches/a")

    assert len(captured) == 8 + 4 + 8 + 2 + 3 + 3
    indexes = declared_indexes()
    problems = [missing_index(query, indexes) for query in captured]
    assert [p for p in problems if p is not None] == []


def test_the_checker_reports_a_query_without_a_declared_index(firestore_client):
    query = (
        firestore_client.collection("operations")
        .where(filter=firestore.FieldFilter("kind", "==", "github-review"))
        .order_by("submitted_at")
    )

    assert missing_index(query._to_protobuf(), declared_indexes()) is not None
    wrong_direction = (
        firestore_client.collection("deliveries")
        .where(filter=firestore.FieldFilter("status", "==", "done"))
        .order_by("received_at")
    )
    assert missing_index(wrong_direction._to_protobuf(), declared_indexes()) is not None
