"""Settle an operation from what Gemini says now: the one path for webhook and reconcile.

A webhook is only a hint. Whoever learns that an operation may be done (the worker on a
Gemini event, reconcile on a poll) asks a `Settler`, which re-fetches the operation and,
when it is terminal, settles it through the ledger with its kind's write-back and outbox
items in the same commit (kinds: shared/kinds/), so the result is written exactly once,
whoever arrives first. The outbox items are delivered right after the commit when the
settler has a `deliver`; what fails there is left to reconcile's sweep.

A succeeded batch settles only with every result row read (`BatchStatus.rows_complete`):
settlement is exactly once, so settling without them would lose those results for good.
Otherwise `GeminiRowsUnread` (transient) leaves it pending: the worker answers 5xx and
reconcile defers it, alerting like any stuck operation after STUCK_AFTER_S.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from shared import kinds, logs
from shared.crashpoints import crash_point
from shared.kinds import KindOptions

if TYPE_CHECKING:
    from shared.gemini import GeminiGateway
    from shared.ledger import Ledger, Operation, OutboxItem, ResultWrites

log = logs.get_logger("settlement")

RUNNING = "running"


@dataclass(frozen=True)
class Outcome:
    """`settled`, `already_settled`, `unknown` (not in the ledger) or `running`."""

    result: str
    status: str | None = None


@dataclass(frozen=True)
class Settler:
    """Settles operations for one caller (`by`: webhook or reconcile)."""

    ledger: Ledger
    gemini: GeminiGateway
    options: KindOptions = field(default_factory=KindOptions)
    deliver: Callable[[OutboxItem], None] | None = None

    def settle(self, name: str, by: str, record: Operation | None = None) -> Outcome:
        """Re-fetch `name` from Gemini and settle it if terminal. Gemini errors propagate,
        and so does `GeminiRowsUnread` for a succeeded batch whose rows are incomplete.

        `record` saves a read when the caller already holds the operation (reconcile's
        query). Either way the settlement commits only if the operation is unchanged
        since that read; a stale record costs a re-read, never a second settlement.
        """
        from shared.ledger import Settlement

        record = record if record is not None else self.ledger.get(name)
        if record is None:
            return Outcome(Settlement.UNKNOWN.value)
        if not record.pending:
            return Outcome(Settlement.ALREADY_SETTLED.value, record.status)
        crash_point("settle.before_fetch")
        batch = self.gemini.fetch(record.name)
        status = batch.terminal_status
        if status is None:
            return Outcome(RUNNING)
        if status == "succeeded" and not batch.rows_complete:
            from shared.gemini import GeminiRowsUnread

            raise GeminiRowsUnread(
                f"{record.name} succeeded but its results are unread ({batch.rows_unread}); "
                "it stays pending"
            )
        if batch.all_rows_failed:
            logs.event(
                log,
                logging.WARNING,
                "batch succeeded but every row failed",
                operation=record.name,
                rows=len(batch.rows),
            )
        kind = kinds.get(record.kind)

        def stage(writes: ResultWrites, current: Operation) -> None:
            if kind.writeback is not None:
                kind.writeback(writes, current, batch)

        outbox = list(kind.outbox(record, batch, self.options)) if kind.outbox else []
        error = batch.error if status != "succeeded" else None
        if error is None and status != "succeeded":
            error = {"message": f"batch ended {batch.state}"}
        crash_point("settle.before_commit")
        result = self.ledger.settle(
            record.name,
            status,
            by,
            error=error,
            writeback=stage,
            outbox=outbox or None,
            deliver=self.deliver if outbox else None,
            expected=record,
        )
        return Outcome(result.value, status)


def settle_from_gemini(
    ledger: Ledger, gemini: GeminiGateway, name: str, by: str, record: Operation | None = None
) -> Outcome:
    """`Settler(ledger, gemini).settle(name, by, record)`: no outbox delivery, default options."""
    return Settler(ledger, gemini).settle(name, by, record)
