"""The outbox sweep: due outbox items get delivered, the earliest due first.

What delivers an item is decided by the kinds registry (`shared.kinds.Deliverers`: the
deliverer registered for the item's payload kind); the sweep only drives the ledger.
It runs against its OWN budget (`sweep_budget_s`), not what the run's other phases left,
so a run that spent its main budget still sweeps (docs/architecture.md, "Outbox").
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta

from shared import logs
from shared.ledger import LedgerError, OutboxItem
from shared.ledger.protocols import SweepLedger
from shared.reconcile.report import Budget, RunReport

log = logs.get_logger("reconcile")

Deliver = Callable[[OutboxItem], None]


def sweep(
    ledger: SweepLedger,
    deliver: Deliver,
    *,
    older_than: timedelta,
    limit: int,
    report: RunReport,
    budget: Budget,
) -> None:
    """One `ledger.outbox.sweep` pass within `budget` (the sweep's own), counted in `report`.

    No new operation starts once `budget` is spent; those left are the next run's first.
    Never raises a `LedgerError`.
    """
    try:
        swept = ledger.sweep(deliver, older_than=older_than, limit=limit, stop=budget.spent)
    except LedgerError as exc:
        report.add(errors=1)
        logs.event(log, logging.ERROR, "outbox sweep failed", reason=str(exc))
        return
    report.add(swept=len(swept.completed), sweep_failed=len(swept.failed))
    if swept.stopped:
        report.stop("sweep", swept.stopped[0])
