"""On a ledger of 10,000 operations, each console page reads at most one page of documents.

Reads are counted honestly, as bench/reconcile.py counts them: every snapshot returned by
`DocumentReference.get` or `Query.stream` (an empty result billed as one), and every count
aggregation separately (Firestore bills those per 1,000 index entries, not per document).
"""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from google.cloud.firestore_v1.aggregation import AggregationQuery
from google.cloud.firestore_v1.client import Client
from google.cloud.firestore_v1.document import DocumentReference
from google.cloud.firestore_v1.query import Query

from hookledger.console import create_app
from hookledger.console.figures import DEAD_SHOWN, LATENCY_SAMPLE, STUCK_SHOWN
from hookledger.console.views import PAGE, REVIEWS_SHOWN, RUNS_SHOWN
from local.fakes import FakeClock
from shared.ledger import DELIVERY_STATUSES as DELIVERY_ORDER
from shared.ledger import OPERATION_STATUSES as OP_STATUSES
from shared.ledger import Ledger, opnames
from shared.ledger.recoveries import RECOVERY_STATUSES

OPERATIONS = 10_000
BATCH = 500


class Reads:
    """Documents and count aggregations read through the Firestore client, process-wide."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.documents = 0
        self.counts = 0
        self._lock = threading.Lock()
        get, stream, count = DocumentReference.get, Query.stream, AggregationQuery.get
        get_all = Client.get_all
        reads = self

        def counted_get(ref: Any, *args: Any, **kwargs: Any) -> Any:
            reads._add(documents=1)  # a missing document is billed as one read too
            return get(ref, *args, **kwargs)

        def counted_stream(query: Any, *args: Any, **kwargs: Any) -> Any:
            returned = 0
            for snapshot in stream(query, *args, **kwargs):
                returned += 1
                yield snapshot
            reads._add(documents=max(returned, 1))

        def counted_count(query: Any, *args: Any, **kwargs: Any) -> Any:
            reads._add(counts=1)
            return count(query, *args, **kwargs)

        def counted_get_all(client: Any, refs: Any, *args: Any, **kwargs: Any) -> Any:
            refs = list(refs)
            reads._add(documents=len(refs))  # each named document is billed, found or not
            return get_all(client, refs, *args, **kwargs)

        monkeypatch.setattr(DocumentReference, "get", counted_get)
        monkeypatch.setattr(Client, "get_all", counted_get_all)
        monkeypatch.setattr(Query, "stream", counted_stream)
        monkeypatch.setattr(AggregationQuery, "get", counted_count)

    def _add(self, documents: int = 0, counts: int = 0) -> None:
        with self._lock:
            self.documents += documents
            self.counts += counts

    def reset(self) -> None:
        with self._lock:
            self.documents = self.counts = 0


def fill(client: Any, clock: FakeClock) -> None:
    """10,000 operations in batched writes: half settled (webhook/reconcile), half pending."""
    start = clock() - timedelta(hours=20)
    for first in range(0, OPERATIONS, BATCH):
        batch = client.batch()
        for n in range(first, first + BATCH):
            name = f"batches/op{n:05d}"
            submitted = start + timedelta(seconds=7 * n)
            fields: dict[str, Any] = {
                "name": name,
                "short_id": opnames.short_id(name),
                "kind": "review" if n % 2 else "other",
                "status": "pending",
                "submitted_at": submitted,
                "attempts": n % 4,
                "next_check_at": submitted + timedelta(seconds=90),
                "writeback_done": False,
                "context": {},
                "outbox": [],
            }
            if n % 2:
                fields.update(
                    status="succeeded",
                    settled_at=submitted + timedelta(seconds=30),
                    settled_by="webhook" if n % 3 else "reconcile",
                    writeback_done=True,
                )
            batch.set(client.collection("operations").document(opnames.encode(name)), fields)
        batch.commit()


@pytest.mark.slow
def test_each_page_reads_at_most_one_page_of_documents(firestore_client, monkeypatch):
    clock = FakeClock()
    ledger = Ledger(firestore_client, clock=clock)
    fill(firestore_client, clock)
    for n in range(3):
        ledger.deliveries.record("github", f"d-{n}", "push", payload="{}")
    ledger.runs.record(clock(), clock(), {"examined": 1}, examined_ops=["batches/op00001"])
    client = create_app(ledger, clock=clock).test_client()
    reads = Reads(monkeypatch)
    assert ledger.queries.count_operations() == OPERATIONS
    [cursor_row] = ledger.queries.list_operations(limit=1)

    bounds = {
        # counts: one per operation, delivery and GitHub recovery status, stuck alerts, 48
        # chart buckets
        "/": (
            1 + STUCK_SHOWN + DEAD_SHOWN + LATENCY_SAMPLE,
            len(OP_STATUSES) + len(DELIVERY_ORDER) + len(RECOVERY_STATUSES) + 1 + 48,
        ),
        "/operations": (PAGE, 0),
        "/operations?status=succeeded&settled_by=reconcile&age=24h": (PAGE, 0),
        "/operations/batches/op00001": (1 + RUNS_SHOWN + REVIEWS_SHOWN, 0),
        # A GitHub delivery's row also reads its recovery, if any (one batched read).
        "/deliveries?source=github": (2 * PAGE, 0),
        "/deliveries/github/d-1": (2, 0),
        "/reconcile": (RUNS_SHOWN, 0),
    }
    seen = {}
    for url, (max_documents, max_counts) in bounds.items():
        reads.reset()
        response = client.get(url)
        assert response.status_code == 200, url
        seen[url] = (reads.documents, reads.counts)
        assert reads.documents <= max_documents, (url, seen[url])
        assert reads.counts <= max_counts, (url, seen[url])
    # A full table page really is one page: the bound is met, not dodged by an empty answer.
    assert seen["/operations"][0] == PAGE
    html = client.get("/operations").get_data(as_text=True)
    next_url = html.split('id="next-page"')[0].rsplit('href="', 1)[1].split('"')[0]
    reads.reset()
    second = client.get(next_url.replace("&amp;", "&"))
    assert second.status_code == 200 and reads.documents == PAGE
    assert cursor_row.name not in second.get_data(as_text=True)
