"""Stuck alerts: one ERROR log per long-pending operation per alert window; never a close."""

from __future__ import annotations

import logging
from datetime import timedelta

from shared import logs
from shared.clock import Clock
from shared.ledger import STUCK_ALERTED_AT, Ledger, Operation

log = logs.get_logger("reconcile")

__all__ = ["STUCK_ALERTED_AT", "StuckAlerts"]


class StuckAlerts:
    """Decides whether a pending operation is stuck and, once per window, says so."""

    def __init__(
        self, ledger: Ledger, clock: Clock, stuck_after: timedelta, window: timedelta
    ) -> None:
        self._ledger = ledger
        self._clock = clock
        self._stuck_after = stuck_after
        self._window = window

    def alert_if_stuck(self, record: Operation) -> bool:
        """Log `alert="operation_stuck"` if `record` is stuck and no run alerted this window.

        True when this call logged it. Raises the ledger's errors; the operation itself is
        never changed beyond the alert mark, which the ledger writes conditionally so that
        overlapping runs alert once (`Ledger.mark_stuck_alerted`).
        """
        now = self._clock()
        age = now - record.submitted_at
        if age < self._stuck_after:
            return False
        if not self._ledger.mark_stuck_alerted(record.name, now, self._window):
            return False
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
        )
        return True
