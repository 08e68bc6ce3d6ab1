"""The outbox sweep: settled operations whose outbox is unfinished get it delivered.

Deliverers are registered per payload `kind` (`outbox_deliverer`); `default_deliver`
looks one up, so a run needs no list of them.
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

_DELIVERERS: dict[str, Deliver] = {}


def outbox_deliverer(kind: str) -> Callable[[Deliver], Deliver]:
    """Register how to deliver outbox items whose payload has `{"kind": kind, ...}`."""

    def register(fn: Deliver) -> Deliver:
        if kind in _DELIVERERS and _DELIVERERS[kind] is not fn:
            raise ValueError(f"an outbox deliverer for kind {kind!r} is already registered")
        _DELIVERERS[kind] = fn
        return fn

    return register


def default_deliver(item: OutboxItem) -> None:
    """Deliver `item` with the deliverer registered for its payload's `kind`.

    With none registered it raises (naming the operation and key), so the item stays
    undelivered and is reported each sweep rather than silently dropped.
    """
    kind = item.payload.get("kind") if isinstance(item.payload, dict) else None
    fn = _DELIVERERS.get(kind) if isinstance(kind, str) else None
    if fn is None:
        raise LookupError(
            f"operation {item.operation}: no outbox deliverer registered for kind {kind!r} "
            f"(item {item.idempotency_key})"
        )
    fn(item)


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
