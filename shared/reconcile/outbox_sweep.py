"""The outbox sweep: settled operations whose outbox is unfinished get it delivered.

What delivers an item is decided by the kinds registry (`shared.kinds.Deliverers`: the
deliverer registered for the item's payload kind); the sweep only drives the ledger.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta

from shared import logs
from shared.ledger import Ledger, LedgerError, OutboxItem
from shared.reconcile.report import Budget, RunReport

log = logs.get_logger("reconcile")

Deliver = Callable[[OutboxItem], None]


def sweep(
    ledger: Ledger,
    deliver: Deliver,
    *,
    older_than: timedelta,
    limit: int,
    report: RunReport,
    budget: Budget,
) -> None:
    """One `Ledger.sweep_outbox` pass, counted in `report`; never raises a `LedgerError`."""
    if budget.spent():
        report.stop("sweep", None)
        return
    try:
        swept = ledger.sweep_outbox(deliver, older_than=older_than, limit=limit)
    except LedgerError as exc:
        report.add(errors=1)
        logs.event(log, logging.ERROR, "outbox sweep failed", reason=str(exc))
        return
    report.add(swept=len(swept.completed), sweep_failed=len(swept.failed))
