"""Which operations a run looks at: due pending ones, page by page, by cursor."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import datetime

from shared import logs
from shared.ledger import LedgerError, Operation
from shared.ledger.protocols import DueLedger
from shared.reconcile.report import RunReport

log = logs.get_logger("reconcile")


def due_pages(
    ledger: DueLedger, now: datetime, page_size: int, report: RunReport, seen: set[str]
) -> Iterator[list[Operation]]:
    """Pages of operations due at `now` (`Operations.due_pending`), never the whole collection.

    Each page read is counted in `report.pages` and its names added to `seen`. A failed
    read is logged and counted as an error and ends the iteration: what was not read
    stays due for the next run.
    """
    cursor: Operation | None = None
    while True:
        try:
            page = ledger.due_pending(now, page_size, start_after=cursor)
        except LedgerError as exc:
            report.add(errors=1)
            logs.event(
                log,
                logging.ERROR,
                "reading due operations failed",
                after=cursor.name if cursor else None,
                reason=str(exc),
            )
            return
        if not page:
            return
        report.add(pages=1)
        seen.update(op.name for op in page)
        yield page
        if len(page) < page_size:
            return
        cursor = page[-1]
