"""The ledger: operations settled exactly once, webhook deliveries, and their results.

The only code in hookledger that names Firestore collections and fields (besides the
claim-check store, shared/claims.py); everything else asks it. Layout (docs/architecture.md,
"Ledger"): `records` (types, statuses, converters), `errors`, `ids` (document ids and
input checks), `commits` (conditional commits and retries), one module per collection
(`operations`, `deliveries`, `outbox`, `results`, `submissions`, `runs`) and `queries`
(read-only listings); `Ledger` composes them. `protocols` names what each caller calls
(`Settler`: `SettleLedger`; reconcile: `ReconcileLedger`; the kinds: `PushLedger`, …);
those callers depend on the protocols, and `Ledger` satisfies them structurally.

Public API (every method may raise the `LedgerError`s in `shared.ledger.errors`)::

    ledger = Ledger(client, clock=system_clock, grace=…, retention=…,  # Config's defaults
                    backoff=Backoff(), sleep=…, rand=…, timeout_s=FIRESTORE_TIMEOUT_S,
                    outbox_policy=OutboxPolicy())
    # operations
    ledger.register(name, kind, context=None) -> Operation        # idempotent
    ledger.get(name_or_bare_id) -> Operation | None
    ledger.put_operations(docs) -> int        # as given, unchecked: seeding, restores
    ledger.settle(name, status, by, *, error=None, writeback=None, outbox=None,
                  deliver=None, expected=None, outcome=None)
        -> Settlement                          # settled|already_settled|unknown
    ledger.mark_waiting_alerted(name, now, window) -> bool          # True: a new alert
    ledger.mark_not_found(name, now) -> datetime | None   # the first consecutive 404
    ledger.clear_not_found(name) -> bool
    ledger.due_pending(now, limit, start_after=None) -> list[Operation]
    ledger.defer(name, next_check_at, attempts) -> bool             # False once settled
    ledger.mark_stuck_alerted(name, now, window) -> bool            # True: a new alert
    # outbox
    ledger.deliver_outbox(name, deliver) -> int                     # items delivered now
    ledger.sweep_outbox(deliver, older_than=timedelta(seconds=60), limit=100, stop=None)
        -> SweepReport                                              # due items, earliest first
    # write-backs: settle(..., writeback=fn) calls fn(writes: ResultWrites, record)
    writes.put_review(repo, sha, path, fields, replace=True) -> str # staged; the doc id
    review_doc_id(repo, sha, path) -> str                           # sha256 hex
    ledger.get_review(repo, sha, path) -> dict | None
    ledger.reviews_for(operation_name, limit=1000) -> list[dict]
    ledger.reviews_for_push(repo, sha, limit=1000) -> list[dict]   # by path
    ledger.count_reviews_for_push(repo, sha) -> int
    # submissions (one winning batch per push; shared/ledger/submissions.py)
    ledger.submissions.claim(tag, *, delivery_id, attempt, lease_until, now, context)
        -> Claimed(state, submission)     # OWNED | DECIDED | BUSY | STALE
    ledger.submissions.take_over(stale, ...) / release(tag, ...)
    ledger.submissions.register_winner(tag, name, kind, context) -> Winner(won, operation)
    ledger.record_superseded(name, kind, context, *, winner, outbox) -> Operation
    # deliveries
    ledger.record_delivery(source, delivery_id, event, payload=None, payload_ref=None,
                           *, attempt=None, lease_for=None) -> Recorded(new, delivery, busy)
    ledger.end_attempt(source, delivery_id, attempt, status, error=None)
        -> Marked(applied, delivery)                # the worker's mark; ends its lease
    ledger.mark_delivery(source, delivery_id, status, error=None) -> Delivery
    ledger.reopen_delivery(source, delivery_id) -> Delivery       # a replay: back to queued
    ledger.get_delivery(source, delivery_id) -> Delivery | None
    ledger.list_deliveries(status=None, limit=50, *, source=None, event=None,
                           start_after=None) -> list[Delivery]          # newest first
    ledger.find_deliveries(delivery_id, limit=2) -> list[Delivery]
    # read-only queries
    ledger.count_operations(status=None, kind=None) -> int
    ledger.count_deliveries(status=None) -> int
    ledger.oldest_pending() -> Operation | None
    ledger.stuck_alerted(limit=10) -> list[Operation]; ledger.count_stuck_alerted() -> int
    ledger.list_operations(status=None, kind=None, settled_by=None, limit=50,
                           start_after=None) -> list[Operation]      # newest submitted first
    ledger.find_operation(context_key, value) -> Operation | None   # e.g. "context.sha"
    ledger.operation_for_tag(tag) -> Operation | None   # the batch created under a tag
    ledger.stored_fields(name) -> dict | None                       # raw stored fields
    ledger.counts() -> {"aborted": n, "conflicts": n}               # transaction retries
    # console reads (hookledger/console) and reconcile run records
    ledger.operations_page(status=None, kind=None, settled_by=None, *, submitted_since=None,
                           limit=50, after=(submitted_at, doc_id) | None) -> list[Operation]
    ledger.count_settled(by, start, end) -> int                     # settled_at in [start, end)
    ledger.webhook_deliveries_since(source, since, limit) -> list[dict]  # no payload
    ledger.record_run(started_at, finished_at, counts, examined_ops=(), budget_s=None) -> str
    ledger.reconcile_runs(limit=20, after=(finished_at, run_id) | None) -> list[ReconcileRun]
    ledger.runs_for_operation(name, limit=20) -> list[ReconcileRun]
    ledger.adoption_watermark() -> datetime | None      # reconcile_state/adoption (1 read)
    ledger.set_adoption_watermark(listed_at) -> None

Settlement: an operation goes from `pending` to a terminal status once, and its
write-back commits in that same transaction (timeline in `operations`). A delivery is
run by one worker attempt at a time, under a lease, and a finished delivery never moves
back but by `reopen_delivery` (timeline in `deliveries`). Side effects
outside Firestore go through the outbox, claimed with a lease and delivered with a
stable idempotency key (timeline in `outbox`).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from google.cloud import firestore

from shared.clock import Clock, system_clock
from shared.config import DEFAULTS, FIRESTORE_TIMEOUT_S
from shared.crashpoints import crash_point
from shared.ledger.commits import Commits
from shared.ledger.deliveries import Deliveries
from shared.ledger.errors import (
    AmbiguousId,
    ContentionError,
    InvalidArgument,
    LedgerError,
    OutboxDeliveryFailed,
    StoreUnavailable,
    UnknownDelivery,
    WritebackFailed,
)
from shared.ledger.ids import review_doc_id
from shared.ledger.operations import Operations
from shared.ledger.outbox import Outbox, OutboxPolicy
from shared.ledger.queries import ConsoleQueries, Queries
from shared.ledger.records import (
    DELIVERIES,
    DELIVERY_STATUSES,
    FINISHED_DELIVERY_STATUSES,
    OPERATION_STATUSES,
    OPERATIONS,
    PENDING,
    REVIEWS,
    SETTLED_BY,
    STUCK_ALERTED_AT,
    SUBMISSIONS,
    SUPERSEDED,
    TERMINAL_STATUSES,
    UNRESOLVED,
    Deliver,
    Delivery,
    DeliveryLease,
    ItemLease,
    Marked,
    Operation,
    OutboxItem,
    Recorded,
    Settlement,
    Submission,
    SweepReport,
)
from shared.ledger.results import ResultWrites, Reviews, Writeback
from shared.ledger.runs import (
    RECONCILE_RUNS,
    RECONCILE_STATE,
    AdoptionWatermark,
    ReconcileRun,
    Runs,
)
from shared.ledger.submissions import Submissions
from shared.logs import event as log_event
from shared.logs import get_logger
from shared.retry import Backoff

__all__ = [
    "DELIVERIES",
    "DELIVERY_STATUSES",
    "FINISHED_DELIVERY_STATUSES",
    "OPERATIONS",
    "OPERATION_STATUSES",
    "PENDING",
    "RECONCILE_RUNS",
    "RECONCILE_STATE",
    "REVIEWS",
    "SETTLED_BY",
    "STUCK_ALERTED_AT",
    "SUBMISSIONS",
    "SUPERSEDED",
    "TERMINAL_STATUSES",
    "UNRESOLVED",
    "AmbiguousId",
    "ContentionError",
    "Deliver",
    "Delivery",
    "DeliveryLease",
    "InvalidArgument",
    "ItemLease",
    "Ledger",
    "LedgerError",
    "Marked",
    "Operation",
    "OutboxDeliveryFailed",
    "OutboxItem",
    "OutboxPolicy",
    "ReconcileRun",
    "Recorded",
    "ResultWrites",
    "Settlement",
    "StoreUnavailable",
    "Submission",
    "SweepReport",
    "UnknownDelivery",
    "Writeback",
    "WritebackFailed",
    "review_doc_id",
]

log = get_logger("ledger")


class Ledger:
    """Operations, deliveries and their results in Firestore; see the package docstring."""

    def __init__(
        self,
        client: firestore.Client,
        clock: Clock = system_clock,
        *,
        grace: timedelta = timedelta(seconds=DEFAULTS.reconcile_grace_s),
        retention: timedelta = timedelta(days=DEFAULTS.retention_days),
        backoff: Backoff | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rand: Callable[[], float] = random.random,
        timeout_s: float = FIRESTORE_TIMEOUT_S,
        outbox_policy: OutboxPolicy | None = None,
    ) -> None:
        if grace < timedelta(0) or retention <= timedelta(0):
            raise InvalidArgument(f"need grace ≥ 0 and retention > 0, got {grace}, {retention}")
        commits = Commits(client, backoff=backoff, sleep=sleep, rand=rand, timeout_s=timeout_s)
        self._clock = clock
        self._commits = commits
        self._operations = Operations(commits, clock, grace=grace, retention=retention)
        self._outbox = Outbox(
            commits, self._operations, clock, outbox_policy or OutboxPolicy(), retention=retention
        )
        self._deliveries = Deliveries(commits, clock, retention=retention)
        self._reviews = Reviews(commits)
        self._submissions = Submissions(commits, self._operations)
        self._queries = Queries(commits, self._operations)
        self._console = ConsoleQueries(commits, self._operations)
        self._runs = Runs(commits, retention=retention)
        self._watermark = AdoptionWatermark(commits)

    @property
    def clock(self) -> Clock:
        """The clock the ledger stamps times with; settlement's deadlines read the same one."""
        return self._clock

    # ----------------------------------------------------------------- operations

    def register(self, name: str, kind: str, context: Mapping[str, Any] | None = None) -> Operation:
        """Record `name` as pending; if it exists, return it unchanged."""
        return self._operations.register(name, kind, context)

    def get(self, name: str) -> Operation | None:
        """The operation named `name`, or whose last path segment is `name` (a bare id)."""
        return self._operations.get(name)

    def put_operations(self, docs: Iterable[Mapping[str, Any]]) -> int:
        """Write operation documents as given (benchmark seeding, a `stored_fields` restore)."""
        return self._operations.put_many(docs)

    def settle(
        self,
        name: str,
        status: str,
        by: str,
        *,
        error: str | Mapping[str, Any] | None = None,
        writeback: Writeback | None = None,
        outbox: Sequence[Any] | None = None,
        deliver: Deliver | None = None,
        expected: Operation | None = None,
        result_counts: Mapping[str, Any] | None = None,
        outcome: Mapping[str, Any] | None = None,
    ) -> Settlement:
        """Move a pending operation to `status` once.

        `result_counts` (a batch's rows per outcome) and `outcome` (e.g. `{"partial":
        True}`) are stored on the operation in the same commit.

        `writeback(writes, record)` commits with the settlement or not at all. `outbox`
        items are stored in the same commit; with `deliver`, they are delivered right after
        (a failure is logged and left to `sweep_outbox`; the answer is still `settled`).

        `expected`, a pending record the caller has just read, saves the first read: the
        commit is conditional on its `update_time`, and a refusal re-reads as usual.
        """
        result = self._operations.settle(
            name,
            status,
            by,
            error=error,
            writeback=writeback,
            outbox=outbox,
            expected=expected,
            result_counts=result_counts,
            outcome=outcome,
        )
        if result is Settlement.SETTLED:
            log_event(log, logging.INFO, "operation settled", operation=name, status=status, by=by)
            crash_point("settle.committed")
            if outbox and deliver is not None:
                try:
                    self._outbox.deliver(name, deliver)
                except LedgerError as exc:
                    log_event(
                        log,
                        logging.WARNING,
                        "outbox delivery failed; the sweep will retry",
                        operation=name,
                        error=str(exc),
                    )
        elif result is Settlement.UNKNOWN:
            log_event(log, logging.INFO, "settle: unknown operation", operation=name, status=status)
        return result

    def due_pending(
        self, now: datetime, limit: int, start_after: Operation | None = None
    ) -> list[Operation]:
        """Pending operations with `next_check_at <= now`, earliest first, one page."""
        return self._operations.due_pending(now, limit, start_after)

    def defer(
        self, name: str, next_check_at: datetime, attempts: int, *, answer: str | None = None
    ) -> bool:
        """Set a pending operation's `attempts` and `next_check_at`; False if not pending.

        With `answer` (what the check saw: "still running", a Gemini error), the check is
        kept in the operation's bounded `checks` history (see `Operations.defer`)."""
        return self._operations.defer(name, next_check_at, attempts, answer=answer)

    def mark_stuck_alerted(self, name: str, now: datetime, window: timedelta) -> bool:
        """True exactly when this call recorded a new stuck alert (see `Operations`)."""
        return self._operations.mark_stuck_alerted(name, now, window)

    def mark_waiting_alerted(self, name: str, now: datetime, window: timedelta) -> bool:
        """True exactly when this call recorded a new `operation_waiting` alert."""
        return self._operations.mark_waiting_alerted(name, now, window)

    def mark_not_found(self, name: str, now: datetime) -> datetime | None:
        """Record a 404 from Gemini at `now`; the first of the consecutive 404s, None if the
        operation is unknown or settled (see `Operations.mark_not_found`)."""
        return self._operations.mark_not_found(name, now)

    def clear_not_found(self, name: str) -> bool:
        """Forget the 404s: Gemini knows the operation again; True if one was recorded."""
        return self._operations.clear_not_found(name)

    # ----------------------------------------------------------------- outbox

    def deliver_outbox(self, name: str, deliver: Deliver) -> int:
        """Claim and deliver each undelivered item of `name`; how many were delivered now."""
        return self._outbox.deliver(name, deliver)

    def sweep_outbox(
        self,
        deliver: Deliver,
        older_than: timedelta = timedelta(seconds=60),
        limit: int = 100,
        stop: Callable[[], bool] | None = None,
    ) -> SweepReport:
        """Deliver due outbox items, earliest due first (see `Outbox.sweep`).

        Items never tried wait `older_than` after settlement; `stop()` ends it early.
        """
        return self._outbox.sweep(deliver, older_than, limit, stop)

    # ----------------------------------------------------------------- results

    def get_review(self, repo: str, sha: str, path: str) -> dict[str, Any] | None:
        return self._reviews.get_review(repo, sha, path)

    def reviews_for(self, operation_name: str, limit: int = 1000) -> list[dict[str, Any]]:
        return self._reviews.reviews_for(operation_name, limit)

    def reviews_for_push(self, repo: str, sha: str, limit: int = 1000) -> list[dict[str, Any]]:
        """Up to `limit` reviews of the push `repo@sha` (whichever operation wrote them)."""
        return self._reviews.reviews_for_push(repo, sha, limit)

    def count_reviews_for_push(self, repo: str, sha: str) -> int:
        return self._reviews.count_for_push(repo, sha)

    # ----------------------------------------------------------------- submissions

    @property
    def submissions(self) -> Submissions:
        """The push submissions: claim, take over, release, `register_winner`."""
        return self._submissions

    def record_superseded(
        self,
        name: str,
        kind: str,
        context: Mapping[str, Any] | None,
        *,
        winner: str,
        outbox: Sequence[Any],
    ) -> Operation:
        """Record a batch that lost its push to `winner`; its outbox makes it harmless."""
        return self._operations.record_superseded(name, kind, context, winner=winner, outbox=outbox)

    # ----------------------------------------------------------------- deliveries

    def record_delivery(
        self,
        source: str,
        delivery_id: str,
        event: str,
        payload: Any = None,
        payload_ref: str | None = None,
        *,
        attempt: str | None = None,
        lease_for: timedelta | None = None,
    ) -> Recorded:
        """Create the delivery as `queued` if absent; a redelivery returns the stored one.

        With `attempt` and `lease_for`, the attempt takes the delivery's lease; `busy`
        when another attempt's lease is live (see `shared.ledger.deliveries`).
        """
        return self._deliveries.record(
            source, delivery_id, event, payload, payload_ref, attempt=attempt, lease_for=lease_for
        )

    def end_attempt(
        self, source: str, delivery_id: str, attempt: str, status: str, error: str | None = None
    ) -> Marked:
        """The worker's mark: applied only while `attempt` holds the lease and the delivery
        is not finished; it ends the lease. `applied` False: left as stored."""
        return self._deliveries.mark(source, delivery_id, status, error, attempt=attempt)

    def mark_delivery(
        self, source: str, delivery_id: str, status: str, error: str | None = None
    ) -> Delivery:
        """Set the status, add one attempt, keep `error` as `last_error` when given.

        A finished delivery is never moved (returned as stored); use `reopen_delivery`.
        """
        return self._deliveries.mark(source, delivery_id, status, error).delivery

    def reopen_delivery(self, source: str, delivery_id: str) -> Delivery:
        """Back to `queued` for a replay, even when finished; a live lease is kept."""
        return self._deliveries.reopen(source, delivery_id)

    def get_delivery(self, source: str, delivery_id: str) -> Delivery | None:
        return self._deliveries.get(source, delivery_id)

    def list_deliveries(
        self,
        status: str | None = None,
        limit: int = 50,
        *,
        source: str | None = None,
        event: str | None = None,
        start_after: Delivery | None = None,
    ) -> list[Delivery]:
        """Deliveries, newest first, optionally filtered; one page."""
        return self._deliveries.listing(
            status, limit, source=source, event=event, start_after=start_after
        )

    def find_deliveries(self, delivery_id: str, limit: int = 2) -> list[Delivery]:
        return self._deliveries.find(delivery_id, limit)

    def count_deliveries(self, status: str | None = None) -> int:
        return self._deliveries.count(status)

    # ----------------------------------------------------------------- queries

    def count_operations(self, status: str | None = None, kind: str | None = None) -> int:
        return self._queries.count_operations(status, kind)

    def oldest_pending(self) -> Operation | None:
        return self._queries.oldest_pending()

    def stuck_alerted(self, limit: int = 10) -> list[Operation]:
        return self._queries.stuck_alerted(limit)

    def count_stuck_alerted(self) -> int:
        return self._queries.count_stuck_alerted()

    def list_operations(
        self,
        status: str | None = None,
        kind: str | None = None,
        settled_by: str | None = None,
        limit: int = 50,
        start_after: Operation | None = None,
    ) -> list[Operation]:
        return self._queries.list_operations(status, kind, settled_by, limit, start_after)

    def find_operation(self, context_key: str, value: str) -> Operation | None:
        return self._queries.find_operation(context_key, value)

    def operation_for_tag(self, tag: str) -> Operation | None:
        """The operation hookledger created under `tag` (a batch's display name): the
        push's winning batch from its submission, else the one registered with that
        `context.display_name` (`hookledger submit`, an adopted orphan); None if neither
        (not ours, not registered yet, or the submission has expired)."""
        submission = self._submissions.get(tag)
        if submission is not None and submission.operation:
            return self.get(submission.operation)
        return self._queries.find_operation("context.display_name", tag)

    def stored_fields(self, name: str) -> dict[str, Any] | None:
        return self._queries.stored_fields(name)

    def counts(self) -> dict[str, int]:
        """Retries so far: `aborted` (backed off) and `conflicts` (re-read at once)."""
        return self._commits.counts()

    # ----------------------------------------------------------------- console reads

    def operations_page(
        self,
        status: str | None = None,
        kind: str | None = None,
        settled_by: str | None = None,
        *,
        submitted_since: datetime | None = None,
        limit: int = 50,
        after: tuple[datetime, str] | None = None,
    ) -> list[Operation]:
        """Operations newest first, filtered, one page after the cursor (submitted_at, doc_id)."""
        return self._queries.operations_page(
            status, kind, settled_by, submitted_since=submitted_since, limit=limit, after=after
        )

    def count_settled(self, by: str, start: datetime, end: datetime) -> int:
        return self._console.count_settled(by, start, end)

    def webhook_deliveries_since(
        self, source: str, since: datetime, limit: int
    ) -> list[dict[str, Any]]:
        return self._console.webhook_deliveries_since(source, since, limit)

    # ----------------------------------------------------------------- reconcile runs

    def record_run(
        self,
        started_at: datetime,
        finished_at: datetime,
        counts: Mapping[str, Any],
        examined_ops: Sequence[str] = (),
        budget_s: float | None = None,
    ) -> str:
        """Store one reconcile run's report; returns the run id."""
        return self._runs.record(started_at, finished_at, counts, examined_ops, budget_s)

    def reconcile_runs(
        self, limit: int = 20, after: tuple[datetime, str] | None = None
    ) -> list[ReconcileRun]:
        return self._runs.recent(limit, after)

    def runs_for_operation(self, name: str, limit: int = 20) -> list[ReconcileRun]:
        return self._runs.for_operation(name, limit)

    def adoption_watermark(self) -> datetime | None:
        """When the last complete listing of Gemini's batches began (orphan adoption)."""
        return self._watermark.get()

    def set_adoption_watermark(self, listed_at: datetime) -> None:
        """Record a complete listing begun at `listed_at`; only adoption calls this."""
        self._watermark.set(listed_at)
