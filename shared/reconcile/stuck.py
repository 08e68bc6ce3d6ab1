"""Stuck and waiting alerts: one ERROR log per operation per alert window; never a close.

`operation_stuck`: pending longer than STUCK_AFTER_S; a shared batch alerts once for its
items (naming how many), an item of it never alerts on its own. `operation_waiting`: Gemini says
the operation waits on its caller (an interaction's requires_action,
requires_continuation or idle; a paused job), alerted at once, naming what it waits for
(docs/architecture.md, "Reconcile")."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from shared import logs
from shared.clock import Clock
from shared.ledger import STUCK_ALERTED_AT, Operation
from shared.ledger.protocols import AlertLedger

log = logs.get_logger("reconcile")

__all__ = ["STUCK_ALERTED_AT", "StuckAlerts"]


class StuckAlerts:
    """Decides whether a pending operation is stuck and, once per window, says so."""

    def __init__(
        self, ledger: AlertLedger, clock: Clock, stuck_after: timedelta, window: timedelta
    ) -> None:
        self._ledger = ledger
        self._clock = clock
        self._stuck_after = stuck_after
        self._window = window

    def alert_if_stuck(self, record: Operation) -> bool:
        """Log `alert="operation_stuck"` if `record` is stuck and no run alerted this window.

        True when this call logged it. Raises the ledger's errors; the operation itself is
        never changed beyond the alert mark, which the ledger writes conditionally so that
        overlapping runs alert once (`ledger.operations.mark_stuck_alerted`).
        """
        now = self._clock()
        age = now - record.submitted_at
        if age < self._stuck_after or record.group is not None:  # its group's batch alerts
            return False
        if not self._ledger.mark_stuck_alerted(record.name, now, self._window):
            return False
        members = record.context.get("members") if isinstance(record.context, dict) else None
        items: dict[str, Any] = {"items": len(members)} if isinstance(members, list) else {}
        logs.event(
            log,
            logging.ERROR,
            f"operation {record.name} pending for {int(age.total_seconds())} s",
            alert="operation_stuck",
            operation=record.name,
            kind=record.kind,
            age_s=int(age.total_seconds()),
            attempts=record.attempts,
            submitted_at=record.submitted_at,
            **items,
        )
        return True

    def alert_if_waiting(self, record: Operation, waits_for: str) -> bool:
        """Log `alert="operation_waiting"` naming what `record` waits for, once per window.

        True when this call logged it; conditional like `alert_if_stuck`
        (`ledger.operations.mark_waiting_alerted`), so overlapping runs alert once.
        """
        now = self._clock()
        if not self._ledger.mark_waiting_alerted(record.name, now, self._window):
            return False
        logs.event(
            log,
            logging.ERROR,
            f"operation {record.name} waits for {waits_for}",
            alert="operation_waiting",
            operation=record.name,
            kind=record.kind,
            waits_for=waits_for,
            age_s=int((now - record.submitted_at).total_seconds()),
        )
        return True
