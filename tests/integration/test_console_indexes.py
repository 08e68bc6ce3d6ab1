"""Every query the console adds to the ledger is served by a declared index.

Uses the checker of tests/integration/test_ledger_indexes.py (queries captured as the real
client builds them, matched against terraform/firestore_indexes.json).
"""

from __future__ import annotations

import itertools
from datetime import timedelta

from shared.clock import FakeClock
from shared.ledger import Ledger
from tests.integration.test_ledger_indexes import (  # noqa: F401 (the fixture is used by name)
    captured,
    declared_indexes,
    missing_index,
)


def test_each_console_query_uses_a_declared_index(firestore_client, captured):  # noqa: F811
    clock = FakeClock()
    ledger = Ledger(firestore_client, clock=clock)
    ledger.operations.register("batches/a", "k")
    ledger.runs.record(clock(), clock(), {"examined": 1}, examined_ops=["batches/a"])
    [first] = ledger.queries.list_operations(limit=1)
    [run] = ledger.runs.recent(limit=1)
    captured.clear()

    since = clock() - timedelta(hours=1)
    for status, kind, settled_by, age in itertools.product(
        [None, "pending"], [None, "k"], [None, "webhook"], [None, since]
    ):
        ledger.queries.operations_page(
            status,
            kind,
            settled_by,
            submitted_since=age,
            limit=5,
            after=(first.submitted_at, first.doc_id),
        )
    ledger.console.count_settled("webhook", since, clock())
    ledger.console.count_settled("reconcile", since, clock())
    ledger.console.webhook_deliveries_since("gemini", since, 10)
    ledger.runs.recent(5, after=(run.finished_at, run.run_id))
    ledger.runs.for_operation("batches/a")

    assert len(captured) == 16 + 2 + 1 + 1 + 1
    indexes = declared_indexes()
    problems = [missing_index(query, indexes) for query in captured]
    assert [p for p in problems if p is not None] == []


def test_runs_page_newest_first_and_find_the_runs_that_examined_an_operation(firestore_client):
    clock = FakeClock()
    ledger = Ledger(firestore_client, clock=clock)
    ids = []
    for n in range(3):
        start = clock()
        clock.advance(5)
        ids.append(
            ledger.runs.record(
                start,
                clock(),
                {"examined": n, "note": object()},
                examined_ops=[f"batches/{n}", "batches/all"],
            )
        )

    first_page = ledger.runs.recent(2)
    rest = ledger.runs.recent(2, after=(first_page[-1].finished_at, first_page[-1].run_id))
    assert [r.run_id for r in first_page + rest] == ids[::-1]
    assert first_page[0].counts == {"examined": 2}  # only plain values are kept
    assert [r.run_id for r in ledger.runs.for_operation("batches/all")] == ids[::-1]
    assert [r.run_id for r in ledger.runs.for_operation("batches/1")] == [ids[1]]
