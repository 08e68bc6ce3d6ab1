"""The ledger: operations settled exactly once, webhook deliveries, and their results.

The only code in hookledger that names Firestore collections and fields (besides the
payload store, shared/handoff/payloads.py); everything else asks it. Layout
(docs/architecture.md, "Code map"): `records` (types, statuses, converters; it re-exports
`recordtypes`, the types that need no status or field name), `errors`, `ids` (document ids
and input checks), `commits` (conditional commits and retries), one module per collection
(`operations`, whose settle commit is the `settling` mixin; `deliveries` with its `bodies`
markers, whose marks are the `delivery_marks` mixin and reads the `delivery_reads` one;
`outbox`, `results`, `submissions`, `runs`, `installations`) and `queries` (read-only
listings). `Ledger` builds the parts over one client and callers reach each by name
(`ledger.deliveries.record(...)`); it adds only what spans parts. `protocols` names what
each caller calls (`Settler`: `SettleLedger`; reconcile: `ReconcileLedger`; the kinds:
`PushLedger`, …); those callers depend on the protocols, and `Ledger` satisfies them
structurally.

Public API (every method may raise the `LedgerError`s in `shared.ledger.errors`)::

    ledger = Ledger(client, clock=system_clock, grace=…, retention=…,  # Config's defaults
                    backoff=Backoff(), sleep=…, rand=…, timeout_s=FIRESTORE_TIMEOUT_S,
                    outbox_policy=OutboxPolicy())
    # what spans parts
    ledger.settle(name, status, by, *, error=None, writeback=None, outbox=None,
                  deliver=None, expected=None, result_counts=None, outcome=None, end=None)
        -> Settlement                  # settled|already_settled|unknown; then the outbox
    ledger.record_and_claim(source, delivery_id, event, payload=None, payload_ref=None, *,
                            attempt, lease_for, tag, context=None, body_sha256=None)
        -> Recorded(new, delivery, busy, claimed, duplicate_of)  # a push's first run: ONE commit
    ledger.operation_for_tag(tag) -> Operation | None   # the batch created under a tag
    ledger.clock; ledger.counts() -> {"aborted": n, "conflicts": n}  # transaction retries
    # ledger.operations (operations.py)
    .register(name, kind, context=None) -> Operation                 # idempotent
    .get(name_or_bare_id) -> Operation | None
    .put_many(docs) -> int            # as given, unchecked: seeding, restores
    .due_pending(now, limit, start_after=None) -> list[Operation]
    .defer(name, next_check_at, attempts, *, answer=None) -> bool    # False once settled
    .mark_stuck_alerted(name, now, window) / .mark_waiting_alerted(...) -> bool  # new alert
    .mark_not_found(name, now) -> datetime | None     # the first consecutive 404
    .clear_not_found(name) -> bool
    .record_superseded(name, kind, context, *, winner, outbox) -> Operation
    # ledger.outbox (outbox.py)
    .deliver(name, deliver) -> int                                   # items delivered now
    .sweep(deliver, older_than=timedelta(seconds=60), limit=100, stop=None) -> SweepReport
    # ledger.results (results.py: apps' result documents); write-backs: settle(...,
    # writeback=fn) calls fn(writes: ResultWrites, record); writes.put(collection, id, fields)
    .get(collection, id) -> dict | None
    .find(collection, limit=1000, order_by=None, **equals) / .count(collection, **equals)
    .update(collection, id, change) -> dict | None    # read-modify-write, one transaction
    # ledger.submissions (submissions.py: one winning batch per push)
    .claim(tag, *, delivery_id, attempt, lease_until, now, context) -> Claimed
    .take_over(stale, ...) / .release(tag, ...) / .get(tag)
    .open_claims(before, limit) -> [OpenClaim]; .close_open(claim) -> bool  # adoption's
    .register_winner(tag, name, kind, context, *, end=None, outbox=()) -> Winner(won, operation)
    # ledger.deliveries (deliveries.py)
    .record(source, delivery_id, event, payload=None, payload_ref=None, *, attempt=None,
            lease_for=None, body_sha256=None) -> Recorded(new, delivery, busy, duplicate_of)
        # a GitHub body marked by another delivery id: recorded `ignored`, `duplicate_of` it
    .end_attempt(source, delivery_id, attempt, status, error=None) -> Marked  # the worker's
    .mark(source, delivery_id, status, error=None) -> Delivery       # an operator's
    .reopen(source, delivery_id) -> Delivery                         # a replay: queued again
    .get(source, delivery_id) / .find(delivery_id, limit=2) / .count(status=None)
    .read(source, delivery_id) -> DeliveryRead(delivery, update_time)  # for DeliveryEnd.seen
    .listing(status=None, limit=50, *, source=None, event=None, start_after=None)
    # ledger.queries (queries.py: read-only)
    .count_operations(status=None, kind=None) / .oldest_pending() / .stuck_alerted(limit)
    .count_stuck_alerted() / .find_operation(context_key, value) / .stored_fields(name)
    .list_operations(status=None, kind=None, settled_by=None, limit=50, start_after=None)
    .operations_page(status=None, kind=None, settled_by=None, *, submitted_since=None,
                     limit=50, after=(submitted_at, doc_id) | None) -> list[Operation]
    # ledger.console (queries.py): .count_settled(by, start, end), .webhook_deliveries_since(...)
    # ledger.runs (runs.py): .record(started_at, finished_at, counts, examined_ops=(),
    #   budget_s=None) -> run id; .recent(limit=20, after=None); .for_operation(name, limit=20)
    # ledger.watermark (runs.py, the old adoption's): .get() -> datetime | None; .clear()
    # ledger.recoveries (recoveries.py: GitHub deliveries the sweep found failed)
    .checkpoint() / .save_checkpoint(checkpoint, **run); .open_once(recovery) -> bool
    .open_page(limit=200, after=None) / .change(recovery, **fields) -> Recovery | None
    .get_many(guids) -> {guid: Recovery}; .count(status=None); .recent(limit=50)
    # ledger.installations (installations.py: GitHub App installations, out-of-order safe)
    .apply(event, *, received_at, delivery_id, end=None) -> Applied(changed, installation)
    .get(installation_id) -> Installation | None     # .refusal(repo): why a push is ignored
    .listing(status=None, limit=50, after=None) -> list[Installation]   # by id

Settlement: an operation goes from `pending` to a terminal status once, and its
write-back commits in that same transaction (timeline in `settling`). A delivery is
run by one worker attempt at a time, under a lease, and a finished delivery never moves
back but by `deliveries.reopen` (timeline in `deliveries`). Side effects
outside Firestore go through the outbox, claimed with a lease and delivered with a
stable idempotency key (timeline in `outbox`).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from functools import partial
from typing import Any

from google.api_core import exceptions as gexc
from google.cloud import firestore

from shared import tracing
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
from shared.ledger.group_rows import GroupRows
from shared.ledger.groups import Groups
from shared.ledger.installations import Applied, Installation, Installations
from shared.ledger.operations import Operations
from shared.ledger.outbox import Outbox
from shared.ledger.outbox_policy import OutboxPolicy
from shared.ledger.queries import ConsoleQueries, Queries
from shared.ledger.records import (
    DELIVERIES,
    DELIVERY_STATUSES,
    FINISHED_DELIVERY_STATUSES,
    INSTALLATION_STATUSES,
    INSTALLATIONS,
    OPERATION_STATUSES,
    OPERATIONS,
    PENDING,
    SETTLED_BY,
    STUCK_ALERTED_AT,
    SUBMISSIONS,
    SUPERSEDED,
    TERMINAL_STATUSES,
    UNRESOLVED,
    Deliver,
    Delivery,
    DeliveryEnd,
    DeliveryLease,
    DeliveryRead,
    ItemLease,
    Marked,
    Operation,
    OutboxItem,
    Recorded,
    Settled,
    Settlement,
    Submission,
    SweepReport,
    delivery_from,
    submission_from,
)
from shared.ledger.recoveries import Recoveries, Recovery
from shared.ledger.results import Results, ResultWrites, Writeback
from shared.ledger.runs import (
    RECONCILE_RUNS,
    RECONCILE_STATE,
    AdoptionWatermark,
    ReconcileRun,
    Runs,
)
from shared.ledger.submissions import Claim, Claimed, Submissions
from shared.logs import event as log_event
from shared.logs import get_logger
from shared.retry import Backoff

__all__ = [
    "DELIVERIES",
    "DELIVERY_STATUSES",
    "FINISHED_DELIVERY_STATUSES",
    "INSTALLATIONS",
    "INSTALLATION_STATUSES",
    "OPERATIONS",
    "OPERATION_STATUSES",
    "PENDING",
    "RECONCILE_RUNS",
    "RECONCILE_STATE",
    "SETTLED_BY",
    "STUCK_ALERTED_AT",
    "SUBMISSIONS",
    "SUPERSEDED",
    "TERMINAL_STATUSES",
    "UNRESOLVED",
    "AmbiguousId",
    "Applied",
    "ContentionError",
    "Deliver",
    "Delivery",
    "DeliveryEnd",
    "DeliveryLease",
    "DeliveryRead",
    "Installation",
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
    "Recoveries",
    "Recovery",
    "ResultWrites",
    "Results",
    "Settled",
    "Settlement",
    "StoreUnavailable",
    "Submission",
    "SweepReport",
    "UnknownDelivery",
    "Writeback",
    "WritebackFailed",
]

log = get_logger("ledger")


class Ledger:
    """The ledger's parts over one Firestore client; see the package docstring.

    Callers reach each part by name (`ledger.operations.get(...)`,
    `ledger.deliveries.record(...)`); `Ledger` itself only builds them and holds what
    spans parts: `settle` (the operation's commit, then its outbox) and
    `operation_for_tag` (a submission's winner, else a registered display name).
    """

    operations: Operations
    outbox: Outbox
    deliveries: Deliveries
    results: Results
    submissions: Submissions
    queries: Queries
    console: ConsoleQueries
    runs: Runs
    watermark: AdoptionWatermark
    installations: Installations
    recoveries: Recoveries
    groups: Groups
    group_rows: GroupRows

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
        self.operations = Operations(commits, clock, grace=grace, retention=retention)
        self.outbox = Outbox(
            commits, self.operations, clock, outbox_policy or OutboxPolicy(), retention=retention
        )
        self.deliveries = Deliveries(commits, clock, retention=retention)
        self.results = Results(commits)
        self.submissions = Submissions(commits, self.operations, self.deliveries)
        self.queries = Queries(commits, self.operations)
        self.console = ConsoleQueries(commits, self.operations)
        self.runs = Runs(commits, retention=retention)
        self.watermark = AdoptionWatermark(commits)
        self.installations = Installations(commits, clock, self.deliveries)
        self.recoveries = Recoveries(commits, retention=retention)
        self.groups = Groups(commits, self.operations, self.deliveries, clock, retention=retention)
        self.group_rows = GroupRows(commits, clock, retention=retention)

    @property
    def clock(self) -> Clock:
        """The clock the ledger stamps times with; settlement's deadlines read the same one."""
        return self._clock

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
        end: DeliveryEnd | None = None,
    ) -> Settlement:
        """Move a pending operation to `status` once.

        `result_counts` (a batch's rows per outcome) and `outcome` (e.g. `{"partial":
        True}`) are stored on the operation in the same commit.

        `writeback(writes, record)` commits with the settlement or not at all. `outbox`
        items are stored in the same commit; with `deliver`, they are delivered right after
        (a failure is logged and left to the outbox sweep; the answer is still `settled`).

        `expected`, a pending record the caller has just read, saves the first read: the
        commit is conditional on its `update_time`, and a refusal re-reads as usual.

        `end`, the settling attempt's end of its delivery (a webhook's), is written in the
        settling commit while the attempt holds its lease; `end.applied` says if it was.
        """
        settled = self.operations.settle(
            name,
            status,
            by,
            error=error,
            writeback=writeback,
            outbox=outbox,
            expected=expected,
            result_counts=result_counts,
            outcome=outcome,
            also=partial(self.deliveries.stage_end, end) if end is not None else None,
        )
        result = settled.result
        if end is not None:
            end.applied = settled.also_applied
        if result is Settlement.SETTLED:
            log_event(log, logging.INFO, "operation settled", operation=name, status=status, by=by)
            crash_point("settle.committed")
            if outbox and deliver is not None:
                try:
                    self.outbox.deliver(name, deliver)
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

    def record_and_claim(
        self,
        source: str,
        delivery_id: str,
        event: str,
        payload: Any = None,
        payload_ref: str | None = None,
        *,
        attempt: str,
        lease_for: timedelta,
        tag: str,
        context: Mapping[str, Any] | None = None,
        body_sha256: str | None = None,
    ) -> Recorded:
        """Record the delivery with `attempt`'s lease AND claim the push's submission `tag`
        for it, in ONE commit when both are new (a push's first run: no read at all), with
        its body's marker (`deliveries.record`).

        Otherwise (a retry, a second delivery of the push, a replay of its body under a new
        id) as `deliveries.record` then `submissions.claim`, the claim only when the delivery
        is this attempt's to run. `Recorded.claimed` is where the submission stands for
        `attempt`.
        """
        ref, record = self.deliveries.new_record(
            source, delivery_id, event, payload, payload_ref, attempt=attempt, lease_for=lease_for
        )
        now = record["received_at"]
        body = self.deliveries.new_body(
            source, delivery_id, event, payload, body_sha256=body_sha256, now=now
        )
        holder = {"delivery_id": delivery_id, "attempt": attempt, "now": now}
        claim_ref, claim = self.submissions.new_claim(
            tag, **holder, lease_until=now + lease_for, context=context
        )
        batch = self._commits.client.batch()
        batch.create(ref, record)
        batch.create(claim_ref, claim)
        if body is not None:
            batch.create(body.ref, body.fields)
        # An existing document is an answer, not a failure: caught inside the commit's span.
        with tracing.span("firestore.commit", subject=ref.id) as span:
            try:
                batch.commit(timeout=self._commits.timeout_s)
                created = True
            except gexc.AlreadyExists:
                created = False  # one of them exists: each is decided on its own below
            except gexc.GoogleAPIError as exc:
                raise StoreUnavailable(f"delivery {ref.id}: record failed: {exc}") from exc
            span.set(created=created)
        if created:
            owned = Claimed(Claim.OWNED, submission_from(claim, tag))
            return Recorded(True, delivery_from(record, ref.id), claimed=owned)
        recorded = self.deliveries.record(
            source,
            delivery_id,
            event,
            payload,
            payload_ref,
            attempt=attempt,
            lease_for=lease_for,
            body_sha256=body_sha256,
        )
        if recorded.busy or recorded.delivery.finished:
            return recorded
        lease = recorded.delivery.lease
        until = lease.until if lease is not None else now + lease_for
        claimed = self.submissions.claim(tag, **holder, lease_until=until, context=context)
        return recorded._replace(claimed=claimed)

    def operation_for_tag(self, tag: str) -> Operation | None:
        """The operation hookledger created under `tag` (a batch's display name): the
        push's winning batch from its submission, else the one registered with that
        `context.display_name` (`hookledger submit`, an adopted orphan); None if neither
        (not ours, not registered yet, or the submission has expired)."""
        submission = self.submissions.get(tag)
        if submission is not None and submission.operation:
            return self.operations.get(submission.operation)
        return self.queries.find_operation("context.display_name", tag)

    def counts(self) -> dict[str, int]:
        """Retries so far: `aborted` (backed off) and `conflicts` (re-read at once)."""
        return self._commits.counts()
