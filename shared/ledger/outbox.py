"""The outbox: side effects of a settlement, delivered outside Firestore, exactly once.

Items are stored on the operation in the settling transaction and delivered afterwards
with the idempotency key `"{doc_id}:{index}"` (docs/architecture.md, "Outbox"). Each
delivery first LEASES its item by a conditional commit on the operation: a new owner token
(`leased_by`) and the lease's end (`leased_until`). Only the token's holder may mark the
item delivered or record its failure; a holder whose lease expired and was leased again by
someone else changes nothing::

    A leases (token a, 5 min) → v2
    A deliver: slow pages …                    … lease expires …
                                               B leases (token b) → v3
                                               B deliver: re-check "still b" → POST → #7
                                               B marks delivered on "leased_by == b" → v4
    A deliver: re-check "still a" → no → no POST (retryable)
    A records its failure: leased_by is b → nothing written, logged

The deliverer gets the lease as `item.lease` (`ItemLease`: `seconds_left()`, `still_owner()`),
so it can keep each external call inside the lease and re-check ownership right before
acting. A crash after the external call and before the mark leaves the item leased; once
the lease expires the next sweep leases it again and repeats the call with the SAME key,
so a deliverer must be idempotent (look for its marker before acting). Items stored before
the lease had its own words carry `claimed_by`/`claimed_until`: read as the lease, and
rewritten with the new words at the next change.

A failing `deliver` releases the lease and sets `attempts + 1`, `last_error` and
`next_attempt_at` (backoff from 30 s up to 30 min); ERROR `alert="outbox_item_failing"`
once an item has failed `alert_after` times. A `PermanentError`, or `give_up_after`
failures, GIVES THE ITEM UP (`given_up_at`, `given_up_reason`, the same alert): it is
never tried again and no longer holds the outbox open. Only a failure left for the sweep
raises `OutboxDeliveryFailed`; a given-up item is closed, so the call goes on with the next
item and no caller says "the sweep will retry" about it.

Crash points around each deliverer call (shared/crashpoints.py): `outbox.leased` (the
lease committed), `outbox.before_deliver` (the deliverer about to be called),
`outbox.delivered` (it returned; the mark not yet committed) and `outbox.marked`. Between
`outbox.delivered` and the marking commit there is only that commit's read: a crash there
leaves what `outbox.delivered` leaves, so it has no point of its own.

Every write keeps two operation fields derived from the items: `outbox_due_at`, the
earliest time an open item is due (its `next_attempt_at`, else settlement; never before
its lease ends), which the sweep queries in order; and, once no item is open,
`writeback_done` and the TTL `expire_at` (nothing is deleted while its outbox is unsent).

A PENDING operation may carry items too (a check run shown `in_progress`, recorded with
the push's winner: docs/architecture.md, "Check runs"): they are leased, delivered and
swept the same way, due from registration, but `writeback_done` and `expire_at` follow
only settlement, which appends its own items after them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import Enum
from typing import Any

from google.cloud import firestore

from shared import tracing
from shared.clock import Clock
from shared.crashpoints import crash_point
from shared.errors import retryable
from shared.ledger.commits import Commits
from shared.ledger.errors import InvalidArgument, LedgerError, OutboxDeliveryFailed
from shared.ledger.ids import check_limit, clip_error
from shared.ledger.operations import Operations
from shared.ledger.outbox_policy import CALLS_PER_LEASE as CALLS_PER_LEASE
from shared.ledger.outbox_policy import OutboxPolicy as OutboxPolicy
from shared.ledger.records import (
    LEASED_BY,
    LEASED_UNTIL,
    OLD_LEASED_BY,
    OLD_LEASED_UNTIL,
    OUTBOX_DUE_AT,
    PENDING,
    Deliver,
    ItemLease,
    Operation,
    OutboxItem,
    SweepReport,
    operation_from_snapshot,
    outbox_item_from,
)
from shared.logs import event as log_event
from shared.logs import get_logger

log = get_logger("ledger")


@dataclass(frozen=True)
class _Delivered:
    """What one pass over an operation's open items did."""

    delivered: int
    skipped: int  # leased by another caller, or not yet due
    given_up: int


class _Take(Enum):
    TAKEN = "taken"
    HELD = "held"  # another caller holds an unexpired lease
    NOT_DUE = "not_due"  # failed before; its next attempt is later
    CLOSED = "closed"  # delivered or given up meanwhile


class Outbox:
    """Leases, delivers and marks outbox items; sweeps what a crash or a failure left undone."""

    def __init__(
        self,
        commits: Commits,
        operations: Operations,
        clock: Clock,
        policy: OutboxPolicy,
        *,
        retention: timedelta,
    ) -> None:
        self._commits = commits
        self._operations = operations
        self._clock = clock
        self._policy = policy
        self._retention = retention

    def deliver(self, name: str, deliver: Deliver) -> int:
        """Deliver each open, unleased item of `name`; how many were delivered now.

        Raises `OutboxDeliveryFailed` at the first item whose `deliver` failed and is left
        to the sweep, backing off (earlier ones stay marked). An item given up (a
        `PermanentError`, or its last allowed failure) is logged at ERROR and the call goes
        on with the next. Ignores `next_attempt_at`: an explicit call.
        """
        return self._deliver_all(name, deliver, due_only=False).delivered

    def sweep(
        self,
        deliver: Deliver,
        older_than: timedelta = timedelta(seconds=60),
        limit: int = 100,
        stop: Callable[[], bool] | None = None,
    ) -> SweepReport:
        """Deliver due outbox items, the earliest due first, at most `limit` operations.

        Selects operations by `outbox_due_at <= now` (an index), so items given up or not
        yet due never take a place. An operation settled less than `older_than` ago whose
        items were never tried is left to its settling caller (`skipped`). An operation with
        an item that failed now (backing off, or given up) is `failed`. `stop()`, asked
        before each operation, ends the sweep early (the rest are `stopped`).
        """
        check_limit(limit)
        now = self._clock()
        query = (
            self._operations.collection()
            .where(filter=firestore.FieldFilter(OUTBOX_DUE_AT, "<=", now))
            .order_by(OUTBOX_DUE_AT)
            .order_by("__name__")
            .limit(limit)
        )
        report = SweepReport()
        for snapshot in self._commits.stream(query, "sweep_outbox"):
            record = operation_from_snapshot(snapshot)
            if stop is not None and stop():
                report.stopped.append(record.name)
                continue
            if _fresh(record, now - older_than):
                report.skipped.append(record.name)
                continue
            try:
                done = self._deliver_all(record.name, deliver, due_only=True)
            except LedgerError:
                report.failed.append(record.name)  # logged where it failed; a later sweep retries
                continue
            if done.given_up:
                report.failed.append(record.name)  # logged (ERROR) where it was given up
            else:
                (report.skipped if done.skipped else report.completed).append(record.name)
        return report

    def _deliver_all(self, name: str, deliver: Deliver, *, due_only: bool) -> _Delivered:
        record = self._operations.get(name)
        if record is None:
            raise InvalidArgument(f"operation {name}: no such operation")
        open_items = [item for item in record.outbox if item.open]
        if not open_items and not record.pending and not record.writeback_done:
            self._rewrite(record, lambda stored, now: True)  # nothing left: just close it
        delivered = skipped = given_up = 0
        for item in open_items:
            take, leased = self._lease(record, item.index, due_only)
            if take in (_Take.HELD, _Take.NOT_DUE):
                skipped += 1
                continue
            if take is _Take.CLOSED or leased is None:
                continue
            crash_point("outbox.leased")
            try:
                with tracing.span_in(
                    record.trace,
                    "outbox.deliver",
                    operation=record.name,
                    outbox_kind=_kind_of(leased.payload),
                    idempotency_key=leased.idempotency_key,
                ):
                    crash_point("outbox.before_deliver")
                    deliver(leased)
                    crash_point("outbox.delivered")
            except Exception as exc:
                if self._record_failure(record, leased, exc):
                    given_up += 1  # closed and alerted: no one retries it
                    continue
                raise OutboxDeliveryFailed(
                    f"operation {record.name}: outbox item {item.idempotency_key} failed: {exc}"
                ) from exc
            if self._mark_delivered(record, leased):
                crash_point("outbox.marked")
                delivered += 1
        return _Delivered(delivered, skipped, given_up)

    def _lease(
        self, record: Operation, index: int, due_only: bool
    ) -> tuple[_Take, OutboxItem | None]:
        """Take item `index` with a new owner token and a lease, by a conditional commit."""
        ref = self._operations.collection().document(record.doc_id)

        def attempt() -> tuple[_Take, OutboxItem | None]:
            snapshot = self._commits.read(ref, record.name)
            data = snapshot.to_dict() or {}
            stored = list(data.get("outbox") or [])
            item = stored[index]
            now = self._clock()
            if not _open(item):
                return _Take.CLOSED, None
            if _later(_leased_until(item), now):
                return _Take.HELD, None
            if due_only and _later(item.get("next_attempt_at"), now):
                return _Take.NOT_DUE, None
            token, until = self._policy.new_token(), now + self._policy.lease
            stored[index] = _with_lease(item, token, until)
            self._commits.update_if_unchanged(ref, snapshot, self._derived(data, stored, now))
            lease = ItemLease(token, until, self._clock, lambda: self._owns(record, index, token))
            leased = outbox_item_from(stored[index], record.name, record.doc_id, index)
            return _Take.TAKEN, replace(leased, lease=lease)

        return self._commits.retrying(record.name, attempt)

    def _owns(self, record: Operation, index: int, token: str) -> bool:
        """Whether item `index` is still leased by `token`, unexpired and open (one read)."""
        ref = self._operations.collection().document(record.doc_id)
        stored = list((self._commits.read(ref, record.name).to_dict() or {}).get("outbox") or [])
        if index >= len(stored):
            return False
        item = stored[index]
        return (
            _open(item) and _leased_by(item) == token and _later(_leased_until(item), self._clock())
        )

    def _mark_delivered(self, record: Operation, item: OutboxItem) -> bool:
        """Mark `item` delivered if its lease is still ours; False (logged) when it is not."""

        def change(stored: list[dict[str, Any]], now: datetime) -> bool:
            if not self._still_ours(stored, item, "mark delivered"):
                return False
            stored[item.index] = {
                **_with_lease(stored[item.index], None, None),
                "delivered_at": now,
            }
            return True

        return self._rewrite(record, change)

    def _record_failure(self, record: Operation, item: OutboxItem, exc: Exception) -> bool:
        """If the lease is still ours: release it, count the failure, back off or give up.
        True when this call gave the item up (and recorded it so)."""
        attempts = item.attempts + 1
        error = clip_error(f"{type(exc).__name__}: {exc}")
        gives_up = not retryable(exc) or attempts >= self._policy.give_up_after
        reason = (
            f"permanent error: {error}"
            if not retryable(exc)
            else f"failed {attempts} times; last: {error}"
        )

        def change(stored: list[dict[str, Any]], now: datetime) -> bool:
            if not self._still_ours(stored, item, "record a failure"):
                return False
            delay = self._policy.backoff.delay(attempts - 1, self._policy.rand)
            stored[item.index] = {
                **_with_lease(stored[item.index], None, None),
                "attempts": attempts,
                "last_error": error,
                "next_attempt_at": None if gives_up else now + timedelta(seconds=delay),
                **({"given_up_at": now, "given_up_reason": clip_error(reason)} if gives_up else {}),
            }
            return True

        fields: dict[str, Any] = {"operation": record.name, "idempotency_key": item.idempotency_key}
        try:
            recorded = self._rewrite(record, change)
        except LedgerError as store_exc:
            # The lease still expires on its own; the failure count is what is lost.
            log_event(log, logging.ERROR, "outbox item delivery failed", error=error, **fields)
            log_event(
                log,
                logging.ERROR,
                "recording an outbox failure failed",
                **fields,
                error=str(store_exc),
            )
            return False
        if not recorded:
            return False  # another caller holds the item now; `_still_ours` logged why
        log_event(log, logging.ERROR, "outbox item delivery failed", error=error, **fields)
        if gives_up or attempts >= self._policy.alert_after:
            message = (
                f"outbox item {item.idempotency_key} of {record.name} given up: {reason}"
                if gives_up
                else f"outbox item {item.idempotency_key} of {record.name} failed {attempts} times"
            )
            log_event(
                log,
                logging.ERROR,
                message,
                alert="outbox_item_failing",
                attempts=attempts,
                error=error,
                given_up=gives_up,
                **fields,
            )
        return gives_up

    def _still_ours(self, stored: list[dict[str, Any]], item: OutboxItem, what: str) -> bool:
        """Whether the stored item is open and still leased by `item.lease`'s token."""
        current = stored[item.index] if item.index < len(stored) else {}
        token = item.lease.token if item.lease is not None else None
        if _open(current) and token is not None and _leased_by(current) == token:
            return True
        log_event(
            log,
            logging.WARNING,
            f"outbox: not the item's owner any more; did not {what}",
            operation=item.operation,
            idempotency_key=item.idempotency_key,
            leased_by=_leased_by(current),
            closed=not _open(current),
        )
        return False

    def _rewrite(
        self, record: Operation, change: Callable[[list[dict[str, Any]], datetime], bool]
    ) -> bool:
        """Apply `change` to the stored outbox (False: write nothing) with the derived fields."""
        ref = self._operations.collection().document(record.doc_id)

        def attempt() -> bool:
            snapshot = self._commits.read(ref, record.name)
            data = snapshot.to_dict() or {}
            stored = list(data.get("outbox") or [])
            now = self._clock()
            if not change(stored, now):
                return False
            update = self._derived(data, stored, now)

            def body(txn: Any) -> None:
                txn.update(ref, update, option=self._commits.unchanged_since(snapshot))
                # The push's submission expires with its winner, in the same commit.
                self._operations.expire_submission(
                    txn, data.get("submission"), update.get("expire_at")
                )

            self._commits.commit(body, ref, snapshot)
            return True

        return self._commits.retrying(record.name, attempt)

    def _derived(
        self, data: dict[str, Any], stored: list[dict[str, Any]], now: datetime
    ) -> dict[str, Any]:
        """The update for `stored`: the items, `outbox_due_at`, and once finished the TTL."""
        settled_at = data.get("settled_at") or now
        due = [_due_at(item, settled_at) for item in stored if _open(item)]
        pending = data.get("status") == PENDING  # its write-back and TTL follow settlement
        update: dict[str, Any] = {"outbox": stored, "writeback_done": not due and not pending}
        if due:
            update[OUTBOX_DUE_AT] = min(due)
        else:
            update[OUTBOX_DUE_AT] = firestore.DELETE_FIELD
            if data.get("expire_at") is None and not pending:
                update["expire_at"] = now + self._retention  # kept until its outbox is done
        return update


def _open(item: Any) -> bool:
    return (
        isinstance(item, dict)
        and item.get("delivered_at") is None
        and item.get("given_up_at") is None
    )


def _due_at(item: dict[str, Any], settled_at: datetime) -> datetime:
    """When the sweep should look at `item`: its next attempt (else settlement), not before
    its lease ends (a holder that crashed is retried then)."""
    due = item.get("next_attempt_at") or settled_at
    until = _leased_until(item)
    return max(due, until) if isinstance(until, datetime) else due


def _fresh(record: Operation, cutoff: datetime) -> bool:
    """Settled (or, still pending, registered) after `cutoff` and never tried: the caller
    that recorded its items may be delivering them."""
    recorded = record.settled_at if not record.pending else record.submitted_at
    return (
        recorded is not None
        and recorded > cutoff
        and all(item.attempts == 0 and item.leased_by is None for item in record.outbox)
    )


def _leased_by(item: dict[str, Any]) -> Any:
    return item.get(LEASED_BY, item.get(OLD_LEASED_BY))


def _leased_until(item: dict[str, Any]) -> Any:
    return item.get(LEASED_UNTIL, item.get(OLD_LEASED_UNTIL))


def _with_lease(item: dict[str, Any], token: str | None, until: datetime | None) -> dict[str, Any]:
    """`item` leased to `token` until `until` (None, None: released), in the lease's words
    only: an item stored with the old ones (`claimed_by`) loses them here."""
    kept = {
        key: value for key, value in item.items() if key not in (OLD_LEASED_BY, OLD_LEASED_UNTIL)
    }
    return {**kept, LEASED_BY: token, LEASED_UNTIL: until}


def _later(value: Any, now: datetime) -> bool:
    return isinstance(value, datetime) and value > now


def _kind_of(payload: Any) -> str | None:
    """An item's kind (`kind` in its payload), for its span; None when it names none."""
    kind = payload.get("kind") if isinstance(payload, dict) else None
    return kind if isinstance(kind, str) else None
