"""Reconcile run records as the console pages them: newest first, by cursor.

Whether each console query is served by a declared index is checked with every other query
in tests/integration/test_ledger_indexes.py.
"""

from __future__ import annotations

from local.fakes import FakeClock
from shared.ledger import Ledger


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
