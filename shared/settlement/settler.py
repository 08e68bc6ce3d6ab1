"""Settle an operation from what Gemini says now: the one path for webhook and reconcile.

A webhook is only a hint. Whoever learns that an operation may be done (the worker on a
Gemini event, reconcile on a poll) asks a `Settler`, which re-fetches the operation and,
when it is terminal, settles it through the ledger with its kind's write-back and outbox
items in the same commit (the kinds registry: kinds.py here), so the result is written
exactly once, whoever arrives first (cancel.py: a superseded batch's cancel). The outbox
items are delivered right after the commit when the settler has a `deliver`; what fails
there is left to reconcile's sweep.

A succeeded batch settles only with every result row read (`BatchStatus.rows_complete`):
settlement is exactly once, so settling without them would lose those results for good.
Otherwise `GeminiRowsUnread` (transient) leaves it pending: the worker answers 5xx and
reconcile defers it, alerting like any stuck operation after STUCK_AFTER_S. Once the
results file is close to the end of its retention (`GIVE_UP_AFTER` past the batch's end),
waiting can only lose the reason too: the batch settles `failed` with it, and an alert.

Rows are placed under the requests they answer (the kind's `request_keys`; rows that
echo no key go by position), and their counts per outcome are stored on the operation
in the settling commit and checked against Gemini's `batchStats`.

A batch Gemini no longer knows (deleted, aged out) is settled `failed` with reason `gone`
only on a second 404 at least `gone_after` after the first, whoever sees them (webhook
or reconcile); the first is recorded on the operation (`ledger.operations.mark_not_found`) and
forgotten when Gemini answers again (docs/architecture.md, "Gone operations")::

    check 1: 404 → not_found_at = t1, GeminiNotFound(recheck_after_s=gone_after): deferred
    check 2 (t2 < t1 + gone_after): 404 → still GeminiNotFound, deferred to t1 + gone_after
    check 3 (t3 ≥ t1 + gone_after): 404 → settled failed, error.reason "gone", the kind's
             write-back (e.g. per-item error documents) and outbox; ERROR alert="operation_gone"

A write-back that fails by its own fault (an exception outside the error tree: a bug, an
answer it cannot handle) is counted on the operation by the ledger (`WritebackFaulted`);
the `WRITEBACK_ATTEMPTS`-th such failure settles the operation `failed` with error.reason
`writeback_failed`, its outbox but no results, and ERROR alert="writeback_failed", instead
of retrying it until Gemini forgets the batch and it settles `gone`. A transient error of
the tree (a Firestore outage) is never counted: it is retried as long as it lasts::

    attempt 1..N-1: write-back raises TypeError → rolled back, writeback_failures = k,
                    WritebackFaulted (transient): the worker answers 5xx, reconcile retries
    attempt N:      the same → writeback_failures = N → one conditional commit: failed,
                    reason "writeback_failed" (or already_settled if another caller won)
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from shared import apps, kinds, logs, tracing
from shared.clock import Clock, system_clock
from shared.crashpoints import crash_point
from shared.gemini import BatchStatus, GeminiNotFound, GeminiRowsUnread
from shared.ledger import Settlement
from shared.ledger.operations import WritebackFaulted
from shared.settlement import (
    cancel,  # noqa: F401  registers the cancel deliverer
    groups,
)
from shared.statuses import OperationStatus

if TYPE_CHECKING:
    from shared.gemini import BatchStatus, GeminiGateway
    from shared.ledger import DeliveryEnd, Operation, OutboxItem
    from shared.ledger.operations import WritebackFaulted
    from shared.ledger.protocols import ResultWrites, SettleLedger

log = logs.get_logger("settlement")

RUNNING = "running"
GONE = "gone"
# The shortest time between two checks that may call an operation gone: reconcile's first
# backoff delay (RECONCILE_BACKOFF_FIRST_S), so two runs in a row can confirm it.
GONE_AFTER = timedelta(seconds=30)

# The docs give batch results files no retention of their own; they are Files API files,
# which "are stored for 48 hours" (docs/gemini-coverage.md). Give up 2 h before that: far
# more than reconcile's longest wait between checks (30 min backoff cap, 5 min schedule).
RESULTS_FILE_RETENTION = timedelta(hours=48)
GIVE_UP_AFTER = RESULTS_FILE_RETENTION - timedelta(hours=2)
UNREADABLE = "results_unreadable"

# A write-back stages writes and nothing else, so the same rows fail it the same way every
# time; the failures counted exclude every transient one (the tree's, Firestore's, ABORTED,
# conflicts). The first failure may still be a fluke of the process (a MemoryError on a
# busy instance): a few attempts rule that out, and bound the re-fetches of the results.
WRITEBACK_ATTEMPTS = 5
WRITEBACK_FAILED = "writeback_failed"


@dataclass(frozen=True)
class SettleResult:
    """`settled`, `already_settled`, `unknown` (not in the ledger) or `running`; a running
    operation that waits on its caller says for what (`waits_for`)."""

    result: str
    status: str | None = None
    waits_for: str | None = None


@dataclass(frozen=True)
class Settler:
    """Settles operations for one caller (`by`: webhook or reconcile)."""

    ledger: SettleLedger
    gemini: GeminiGateway
    deliver: Callable[[OutboxItem], None] | None = None
    clock: Clock = system_clock
    gone_after: timedelta = GONE_AFTER

    def settle(
        self,
        name: str,
        by: str,
        record: Operation | None = None,
        *,
        end: DeliveryEnd | None = None,
        batch: BatchStatus | None = None,
    ) -> SettleResult:
        """Re-fetch `name` from Gemini and settle it if terminal. Gemini errors propagate,
        and so does `GeminiRowsUnread` for a succeeded batch whose rows are incomplete.

        `record` saves a read when the caller already holds the operation (reconcile's
        query). Either way the settlement commits only if the operation is unchanged
        since that read; a stale record costs a re-read, never a second settlement.
        `end` (a webhook run's delivery) is marked done in the settling commit. `batch`:
        what Gemini reported, read by the caller (a shared batch's fan-out reads its batch
        once for many items), instead of a fetch.
        """
        record = record if record is not None else self.ledger.operations.get(name)
        if record is None:
            return SettleResult(Settlement.UNKNOWN.value)
        if not record.pending:
            return SettleResult(Settlement.ALREADY_SETTLED.value, record.status)
        # In the push's trace, however late and by whom (shared/tracing `span_in`).
        with tracing.span_in(record.trace, "settle", operation=record.name, settled_by=by) as span:
            outcome = self._settle(record, by, end, batch)
            span.set(result=outcome.result, status=outcome.status, waits_for=outcome.waits_for)
        return outcome

    def _settle(
        self, record: Operation, by: str, end: DeliveryEnd | None, given: BatchStatus | None
    ) -> SettleResult:
        crash_point("settle.before_fetch")
        batch = given if given is not None else self.status(record)
        status = batch.terminal_status
        if status is None:
            return SettleResult(RUNNING, waits_for=batch.waits_for)
        if status == OperationStatus.SUCCEEDED and not batch.rows_complete:
            batch = self._unread(record, batch)
            status = "failed"
        kind = kinds.get(record.kind)
        keys = (kind.request_keys or kinds.SUBMITTED_KEYS)(record)
        if keys:
            batch = batch.placed(keys)
        counts = _checked_counts(record, batch)
        if batch.all_rows_failed:
            logs.event(
                log,
                logging.WARNING,
                "batch succeeded but every row failed",
                operation=record.name,
                rows=len(batch.rows),
            )

        def stage(writes: ResultWrites, current: Operation) -> None:
            if kind.writeback is not None:
                kind.writeback(_app_writes(kind, writes), current, batch)

        if status == OperationStatus.SUCCEEDED:
            _keep_rows(self.ledger, record, batch)
        outbox = kinds.kind_items(kind.outbox(record, batch), record.context) if kind.outbox else []
        error = batch.error if status != OperationStatus.SUCCEEDED else None
        if error is None and status != OperationStatus.SUCCEEDED:
            error = {"message": f"batch ended {batch.state}"}
        crash_point("settle.before_commit")

        try:
            result = self.ledger.settle(
                record.name,
                status,
                by,
                error=error,
                writeback=stage,
                outbox=outbox or None,
                deliver=self.deliver if outbox else None,
                expected=record,
                result_counts=counts,
                outcome=batch.outcome or None,
                end=end,
            )
        except WritebackFaulted as exc:
            if exc.failures < WRITEBACK_ATTEMPTS:
                raise
            return self._give_up_writeback(record, by, batch, exc, outbox, counts, end)
        if result.value == "settled" and (error or {}).get("reason") == GONE:
            logs.event(
                log,
                logging.ERROR,
                f"operation {record.name} is gone at Gemini; settled failed",
                alert="operation_gone",
                operation=record.name,
                kind=record.kind,
                reason=(error or {}).get("message"),
            )
        return SettleResult(result.value, status)

    def _give_up_writeback(
        self,
        record: Operation,
        by: str,
        batch: BatchStatus,
        fault: WritebackFaulted,
        outbox: list[Any],
        counts: dict[str, Any] | None,
        end: DeliveryEnd | None,
    ) -> SettleResult:
        """Settle `failed` without the results the write-back keeps failing to write: one
        conditional commit through the ledger like any settlement (a caller that settled it
        meanwhile wins: `already_settled`), with the outbox and an alert."""
        error: dict[str, Any] = {
            "reason": WRITEBACK_FAILED,
            "message": f"the write-back failed {fault.failures} times (at most "
            f"{WRITEBACK_ATTEMPTS}); Gemini reported {batch.state}, its results are not "
            f"written; the last failure: {fault.reason}",
        }
        if batch.error:
            error["batch_error"] = dict(batch.error)
        result = self.ledger.settle(
            record.name,
            "failed",
            by,
            error=error,
            outbox=outbox or None,
            deliver=self.deliver if outbox else None,
            result_counts=counts,  # the rows that were read, though none is written
            end=end,
        )
        if result.value == "settled":
            logs.event(
                log,
                logging.ERROR,
                f"{record.name}: its write-back failed {fault.failures} times; settled failed "
                "without its results",
                alert=WRITEBACK_FAILED,
                operation=record.name,
                kind=record.kind,
                failures=fault.failures,
                state=batch.state,
                reason=fault.reason,
            )
        return SettleResult(result.value, "failed")

    def status(self, record: Operation) -> BatchStatus:
        """What Gemini reports now of the operation: its own batch's, or, for an item of a
        shared batch, its rows of its group's batch (still running while the group has
        none registered)."""
        if record.group is None:
            return self._fetch(record)
        return groups.item_status(
            self.ledger, record, self.group_status, gone=lambda exc: self.not_found(record, exc)
        )

    def group_status(self, group: Operation) -> BatchStatus:
        """A group batch's status with its rows placed under their items' keys."""
        batch = self._fetch(group)
        keys = kinds.get(group.kind).request_keys
        placed = keys(group) if keys is not None else None
        return batch.placed(placed) if placed else batch

    def _fetch(self, record: Operation) -> BatchStatus:
        """What Gemini reports now; a confirmed 404 (see the module docstring) is reported
        as a failed status with reason `gone`, an unconfirmed one raises GeminiNotFound."""
        try:
            batch = self.gemini.fetch(record.name)
        except GeminiNotFound as exc:
            return self.not_found(record, exc)
        if record.not_found_at is not None:
            self.ledger.operations.clear_not_found(record.name)  # a passing 404: forget it
        return batch

    def not_found(self, record: Operation, exc: Exception) -> BatchStatus:
        """Gemini answered 404 for `record`'s batch: the failed status with reason `gone`
        once confirmed (see the module docstring), else `GeminiNotFound` to wait."""
        now = self.clock()
        first = self.ledger.operations.mark_not_found(record.name, now)
        if first is None:  # settled (or removed) meanwhile: nothing to decide here
            raise exc
        waited = now - first
        if waited < self.gone_after:
            remaining = (self.gone_after - waited).total_seconds()
            raise GeminiNotFound(
                f"{exc}; first 404 at {first.isoformat()}, settled gone if Gemini "
                f"still answers 404 in {remaining:g} s",
                recheck_after_s=remaining,
            ) from exc
        error = {
            "code": 404,
            "reason": GONE,
            "message": f"{record.name} is gone: Gemini answered 404 at "
            f"{first.isoformat()} and again {int(waited.total_seconds())} s later "
            "(deleted, or aged out)",
        }
        return BatchStatus(name=record.name, state="JOB_STATE_FAILED", error=error)

    def _unread(self, record: Operation, batch: BatchStatus) -> BatchStatus:
        """Raise `GeminiRowsUnread` (stay pending) while the results file may still be read;
        past `GIVE_UP_AFTER` from the batch's end, the batch to settle `failed` instead."""
        ended = batch.ended_at or record.submitted_at
        now = self.ledger.clock()
        if now < ended + GIVE_UP_AFTER:
            raise GeminiRowsUnread(
                f"{record.name} succeeded but its results are unread ({batch.rows_unread}); "
                "it stays pending"
            )
        reason = (
            f"results never read in {GIVE_UP_AFTER} since the batch ended "
            f"(its results file is kept {RESULTS_FILE_RETENTION}): {batch.rows_unread}"
        )
        logs.event(
            log,
            logging.ERROR,
            f"{record.name}: results unreadable until their retention nearly ran out; "
            "settling it failed",
            alert=UNREADABLE,
            operation=record.name,
            ended_at=ended.isoformat(),
            reason=batch.rows_unread,
        )
        # Gemini says SUCCEEDED, but without its rows hookledger can only record the failure.
        return replace(
            batch,
            state="JOB_STATE_FAILED",
            error={"message": reason, "reason": UNREADABLE},
            rows=(),
        )


def _keep_rows(ledger: SettleLedger, record: Operation, batch: BatchStatus) -> None:
    """A shared batch's rows, stored per item before its settling commit: its items settle
    from them, never from Gemini's copy (kept 48 h; shared/settlement/groups.py)."""
    if record.kind == groups.GROUP_KIND:
        groups.keep_rows(ledger, record, batch)


def _checked_counts(record: Operation, batch: BatchStatus) -> dict[str, Any] | None:
    """The rows' counts per outcome (None without rows); every unplaced row is logged at
    ERROR and a disagreement with Gemini's `batchStats` at WARNING, naming the operation."""
    if not batch.rows:
        return None
    for row in batch.rows:
        if row.unplaced:
            logs.event(
                log,
                logging.ERROR,
                f"{record.name}: a result row matches no request; recorded as an error row",
                operation=record.name,
                line=row.line,
                index=row.index,
                key=row.key,
                reason=row.error,
            )
    counts = batch.result_counts()
    mismatch = batch.stats_mismatch()
    if mismatch is not None:
        logs.event(
            log,
            logging.WARNING,
            f"{record.name}: result rows disagree with Gemini's batchStats",
            operation=record.name,
            result_counts=counts,
            **mismatch,
        )
    return dict(counts)


def _app_writes(kind: kinds.OperationKind, writes: ResultWrites) -> ResultWrites:
    """`writes` limited to the collections the kind's app declared: an app never writes
    outside its own (a kind with no app, a generic one, has none)."""
    app = apps.get(kind.app) if kind.app else None
    scoped = getattr(writes, "scoped", None)  # a test double may not scope
    allowed = app.collections if app is not None else frozenset()
    return scoped(allowed) if scoped is not None else writes


def settle_from_gemini(
    ledger: SettleLedger, gemini: GeminiGateway, name: str, by: str, record: Operation | None = None
) -> SettleResult:
    """`Settler(ledger, gemini).settle(name, by, record)`: no outbox delivery, default options."""
    return Settler(ledger, gemini).settle(name, by, record)


def _members_settler(services: kinds.DeliveryServices) -> Settler:
    """The `Settler` a page of a group's items settles with: the services' ledger, Gemini
    and deliverers."""
    ledger: Any = services.ledger
    return Settler(ledger, services.gemini, kinds.Deliverers(services), clock=ledger.clock)


def _deliver_members(item: OutboxItem, services: kinds.DeliveryServices) -> None:
    groups.deliver_members(item, services, _members_settler)


# Registered here, with this module's Settler: groups.py sits below it and may not import it.
kinds.register_deliverer(groups.MEMBERS)(_deliver_members)
