"""How the worker answers Cloud Tasks for one attempt, and marks the delivery to match.

`Answers` holds the worker's marks: `finish` (done, ignored, unresolved), `dead`, `retry`
(503; the delivery back to `queued`), `busy` (another attempt's lease is live),
`superseded` (this attempt's mark was refused) and `defer` (a handler's `Deferred`: the
same sealed envelope back to the queue as a new task, answered 202). Every mark goes
through the ledger's lease rules (docs/architecture.md, "Delivery lease").
"""

from __future__ import annotations

import contextlib
import logging
from datetime import timedelta
from typing import TYPE_CHECKING, Any, NamedTuple

from shared import logs
from shared.entrypoints.http import Reply
from shared.errors import Deferred
from shared.handoff.envelope import DEFAULT_MAX_AGE_S, Envelope
from shared.handoff.tasks import task_id_for
from shared.ledger import Delivery, LedgerError
from shared.statuses import DeliveryStatus

if TYPE_CHECKING:
    from shared.config import Config
    from shared.handlers.context import HandlerContext
    from shared.ledger import Ledger

log = logs.get_logger("worker")

# A `Deferred` runs again after at least a second (no busy loop through the queue) and
# at most an hour (a wait for another run is re-checked hourly, whatever the handler said).
DEFER_MIN_S = 1.0
DEFER_MAX_S = 3600.0
# On a deferred task: how many deferrals of this delivery led to it (logged, never trusted).
DEFERRALS_HEADER = "X-Hookledger-Deferrals"


class Task(NamedTuple):
    """The Cloud Task that brought this attempt, as a deferral hands it back."""

    envelope: Envelope  # opened from `sealed`
    sealed: bytes  # the envelope exactly as sealed: re-enqueued as it is
    retry_count: int  # X-CloudTasks-TaskRetryCount: 5xx answers so far
    name: str  # X-CloudTasks-TaskName; a new uuid for a call from outside the queue
    deferrals: int  # DEFERRALS_HEADER: deferrals before this task (0 for the first)


class Answers:
    """The worker's answers for one process: each marks the delivery, then says what to answer."""

    def __init__(self, config: Config, ledger: Ledger, context: HandlerContext) -> None:
        self._config = config
        self._ledger = ledger
        self._context = context

    def defer(
        self,
        ids: dict[str, Any],
        attempt: str | None,
        exc: Deferred,
        task: Task,
    ) -> Reply:
        """The handler said "not yet": hand the same sealed envelope back to the queue as a
        NEW task about `after_s` later and answer 202, so this task ends and the next one
        starts at retry count 0: waiting never spends WORKER_MAX_RETRIES.

        The delivery is marked `queued` with the reason first (ending this attempt's lease,
        as a retry does), then the task is created. Its id comes from this task's name, so a
        retry of this task (a lost answer, from CreateTask or to the queue) finds it
        ALREADY_EXISTS rather than making a second. Anything failing answers 503: this task
        is retried and nothing is lost. The same bytes stop opening when the envelope is
        too old (`DEFAULT_MAX_AGE_S`, 7 days): a wait that would outlast it is dead.
        """
        source, delivery_id = ids["source"], ids["delivery_id"]
        after_s = min(max(exc.after_s, DEFER_MIN_S), DEFER_MAX_S)
        now = self._context.clock()
        run_at = now + timedelta(seconds=after_s)
        envelope = task.envelope
        sealed_at = envelope.sealed_at or now
        expires = sealed_at + timedelta(seconds=DEFAULT_MAX_AGE_S)
        if run_at + timedelta(seconds=DEFER_MAX_S) > expires:  # its retries need time too
            return self.dead(
                ids,
                attempt,
                f"still deferred as its envelope expires at {expires.isoformat()}: {exc}",
            )
        reason = f"deferred {after_s:g} s: {exc}"
        try:
            marked = self._ledger.deliveries.end_attempt(
                source, delivery_id, attempt, "queued", error=reason
            )
        except LedgerError as error:
            return self.retry(ids, f"marking the delivery deferred failed: {error}", attempt)
        if not marked.applied:
            return self.superseded(ids, marked.delivery, "queued")
        deferrals = task.deferrals + 1
        task_id = task_id_for(source, delivery_id, "deferred", task.name)
        cfg = self._config
        try:
            created = self._context.tasks.enqueue(
                cfg.worker_url,
                task.sealed,
                {"Content-Type": "application/json", DEFERRALS_HEADER: str(deferrals)},
                task_id=task_id,
                schedule_time=run_at,
                # As the ingress hands a delivery off: the worker checks this caller.
                oidc_service_account=cfg.tasks_service_account or None,
                oidc_audience=cfg.worker_url,
                dispatch_deadline_s=cfg.task_dispatch_deadline_s,
            )
        except Exception as error:  # EnqueueError, or no queue client: this task retries
            reason = f"deferring failed: {type(error).__name__}: {error}"
            return self.retry(ids, reason, attempt, recorded=True)
        logs.event(
            log,
            logging.INFO,
            f"delivery {delivery_id} deferred {after_s:g} s: {exc}",
            reason=str(exc),
            after_s=after_s,
            deferrals=deferrals,
            waiting_s=round((now - envelope.received_at).total_seconds()),
            task_id=task_id,
            task_status=created.status,
            **ids,
        )
        return Reply(
            202,
            {"status": "deferred", "reason": str(exc), "after_s": after_s, "task": task_id, **ids},
        )

    def finish(
        self,
        ids: dict[str, Any],
        attempt: str | None,
        status: str,
        detail: str,
        error: str | None = None,
    ) -> Reply:
        try:
            marked = self._ledger.deliveries.end_attempt(
                ids["source"], ids["delivery_id"], attempt, status, error=error
            )
        except LedgerError as exc:
            return self.retry(ids, f"marking the delivery {status} failed: {exc}", attempt)
        if not marked.applied:
            return self.superseded(ids, marked.delivery, status)
        logs.event(log, logging.INFO, f"delivery {status}: {detail}", **ids)
        return Reply(200, {"status": status, "detail": detail, **ids})

    def dead(self, ids: dict[str, Any], attempt: str | None, reason: str) -> Reply:
        try:
            marked = self._ledger.deliveries.end_attempt(
                ids["source"], ids["delivery_id"], attempt, "dead", error=reason
            )
        except LedgerError as exc:
            return self.retry(ids, f"recording the dead delivery failed: {exc}", attempt)
        if not marked.applied:  # another attempt finished it: no alert for this late one
            return self.superseded(ids, marked.delivery, "dead")
        logs.event(
            log,
            logging.ERROR,
            f"delivery {ids['delivery_id']} dead: {reason}",
            alert="delivery_dead",
            reason=reason,
            **ids,
        )
        return Reply(200, {"status": DeliveryStatus.DEAD, "reason": reason, **ids})

    def busy(self, ids: dict[str, Any], stored: Delivery) -> Reply:
        """Another attempt's lease is live: run nothing, mark nothing, come back later."""
        lease = stored.lease
        holder = f"attempt {lease.attempt} until {lease.until.isoformat()}" if lease else "?"
        reason = f"another attempt is running this delivery ({holder})"
        logs.event(log, logging.INFO, f"delivery {ids['delivery_id']} busy", reason=reason, **ids)
        return Reply(503, {"status": "busy", "reason": reason, **ids})

    def superseded(self, ids: dict[str, Any], stored: Delivery, wanted: str) -> Reply:
        """This attempt's mark was refused: the delivery is finished or another attempt
        took it over after this one's lease ran out. The stored status stands."""
        logs.event(
            log,
            logging.WARNING,
            f"delivery {ids['delivery_id']} not marked {wanted}: another attempt has it",
            delivery_status=stored.status,
            **ids,
        )
        if stored.finished:
            return Reply(200, {"status": "duplicate", **ids, "delivery_status": stored.status})
        return self.busy(ids, stored)

    def retry(
        self,
        ids: dict[str, Any],
        reason: str,
        attempt: str | None = None,
        *,
        recorded: bool = False,
    ) -> Reply:
        """503 so Cloud Tasks retries; the delivery is marked `queued` with the reason when
        this attempt holds its lease, or (`recorded`) an unleased run has its record."""
        logs.event(
            log,
            logging.WARNING,
            f"delivery {ids['delivery_id']} will be retried",
            reason=reason,
            **ids,
        )
        if attempt is not None or recorded:
            # The retry itself is what matters; the record catches up on the next attempt.
            with contextlib.suppress(LedgerError):
                self._ledger.deliveries.end_attempt(
                    ids["source"], ids["delivery_id"], attempt, "queued", error=reason
                )
        return Reply(503, {"status": "retry", "reason": reason, **ids})
