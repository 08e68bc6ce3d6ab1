"""Stuck alerts: one ERROR log per long-pending operation per alert window; never a close."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from google.api_core import exceptions as gexc

from shared import logs
from shared.clock import Clock
from shared.config import FIRESTORE_TIMEOUT_S
from shared.ledger import OPERATIONS, PENDING, Operation

log = logs.get_logger("reconcile")

STUCK_ALERTED_AT = "stuck_alerted_at"
_RECORD_TRIES = 3  # conditional writes refused this often: another run is on it


class StuckAlerts:
    """Decides whether a pending operation is stuck and, once per window, says so."""

    def __init__(
        self, firestore_client: Any, clock: Clock, stuck_after: timedelta, window: timedelta
    ) -> None:
        self._client = firestore_client
        self._clock = clock
        self._stuck_after = stuck_after
        self._window = window

    def alert_if_stuck(self, record: Operation) -> bool:
        """Log `alert="operation_stuck"` if `record` is stuck and no run alerted this window.

        True when this call logged it. Raises what the Firestore write raises
        (`GoogleAPIError`); the operation itself is never changed beyond the alert mark.
        """
        now = self._clock()
        age = now - record.submitted_at
        if age < self._stuck_after:
            return False
        if not _record_alert(self._client, record, now, self._window):
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


def _record_alert(client: Any, record: Operation, now: datetime, window: timedelta) -> bool:
    """Mark `record` alerted at `now` unless it was within `window`; True when this call did.

    The one Firestore access of stuck alerts (to become the ledger's
    `mark_stuck_alerted(name, now, window)`). Timeline it closes (overlapping runs A, B)::

        A reads v1 (no alert yet)      B reads v1 (no alert yet)
        A writes stuck_alerted_at on condition "still v1" → v2, A logs
                                       B writes on condition "still v1" → refused
                                       B re-reads v2: alerted this window → no log
    """
    ref = client.collection(OPERATIONS).document(record.doc_id)
    for _ in range(_RECORD_TRIES):
        snapshot = ref.get(timeout=FIRESTORE_TIMEOUT_S)
        data = snapshot.to_dict() or {}
        if not snapshot.exists or data.get("status") != PENDING:
            return False
        alerted = data.get(STUCK_ALERTED_AT)
        if alerted is not None and now - alerted < window:
            return False
        option = client.write_option(last_update_time=snapshot.update_time)
        try:
            ref.update({STUCK_ALERTED_AT: now}, option=option, timeout=FIRESTORE_TIMEOUT_S)
        except (gexc.FailedPrecondition, gexc.NotFound):
            continue  # changed under us (another run, a defer): decide again
        return True
    return False
