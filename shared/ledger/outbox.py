"""The outbox: side effects of a settlement, delivered outside Firestore, exactly once.

Items are stored on the operation in the settling transaction and delivered afterwards
with the idempotency key `"{doc_id}:{index}"` (docs/architecture.md, "Outbox"). Each
delivery first CLAIMS its item with a lease (`claimed_until`), by a conditional commit
on the operation, so two sweeps never call `deliver` for one item at once::

    S1 reads v1 (item free)          S2 reads v1 (item free)
    S1 claims on "still v1" → v2     S2 claims on "still v1" → refused, re-reads v2:
    S1 deliver(item) → ok                leased by S1 → skipped (not an error)
    S1 marks delivered → v3

A crash after the external call and before the mark leaves the item claimed; once the
lease expires the next sweep claims it again and repeats the call with the SAME key::

    S1 claims → deliver(item) → ok → ✗ crash      (item still claimed, not delivered)
    … lease expires …
    S2 claims → deliver(item) again, same idempotency key → marks delivered

so a deliverer must be idempotent: it looks for its marker (e.g. a GitHub comment
carrying the key) before acting. A failing `deliver` releases the lease and sets
`attempts + 1`, `last_error` and `next_attempt_at` (backoff from 30 s up to 30 min);
the sweep skips an item until it is due, and logs ERROR `alert="outbox_item_failing"`
once an item has failed `alert_after` times.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import Enum
from typing import Any

from google.cloud import firestore

from shared.clock import Clock
from shared.ledger.commits import Commits
from shared.ledger.errors import InvalidArgument, LedgerError, OutboxDeliveryFailed
from shared.ledger.ids import check_limit, clip_error
from shared.ledger.operations import Operations
from shared.ledger.records import (
    Deliver,
    Operation,
    OutboxItem,
    SweepReport,
    operation_from_snapshot,
    outbox_item_from,
)
from shared.logs import event as log_event
from shared.logs import get_logger
from shared.retry import Backoff

log = get_logger("ledger")


@dataclass(frozen=True)
class OutboxPolicy:
    """How long a claim holds, how failed items back off, and when a failing one alerts."""

    lease: timedelta = timedelta(minutes=5)
    backoff: Backoff = field(default_factory=lambda: Backoff(attempts=1, first_s=30, cap_s=1800))
    alert_after: int = 5
    rand: Callable[[], float] = random.random

    def __post_init__(self) -> None:
        if self.lease <= timedelta(0) or self.alert_after < 1:
            raise InvalidArgument(f"bad outbox policy: need lease > 0, alert_after ≥ 1: {self}")


class _Claim(Enum):
    CLAIMED = "claimed"
    LEASED = "leased"  # another caller holds an unexpired lease
    NOT_DUE = "not_due"  # failed before; its next attempt is later
    DELIVERED = "delivered"  # someone else finished it meanwhile


class Outbox:
    """Claims, delivers and marks outbox items; sweeps what a crash left undone."""

    def __init__(
        self, commits: Commits, operations: Operations, clock: Clock, policy: OutboxPolicy
    ) -> None:
        self._commits = commits
        self._operations = operations
        self._clock = clock
        self._policy = policy

    def deliver(self, name: str, deliver: Deliver) -> int:
        """Deliver each undelivered, unleased item of `name`; how many were delivered now.

        Raises `OutboxDeliveryFailed` at the first item whose `deliver` raises (earlier
        ones stay marked); that item backs off. Ignores `next_attempt_at`: an explicit call.
        """
        return self._deliver_all(name, deliver, due_only=False)[0]

    def sweep(self, deliver: Deliver, older_than: timedelta, limit: int) -> SweepReport:
        """Finish outboxes of operations settled at least `older_than` ago, oldest first."""
        check_limit(limit)
        cutoff = self._clock() - older_than
        query = (
            self._operations.collection()
            .where(filter=firestore.FieldFilter("writeback_done", "==", False))
            .where(filter=firestore.FieldFilter("settled_at", "<=", cutoff))
            .order_by("settled_at")
            .limit(limit)
        )
        report = SweepReport()
        for snapshot in self._commits.stream(query, "sweep_outbox"):
            name = operation_from_snapshot(snapshot).name
            try:
                _, skipped = self._deliver_all(name, deliver, due_only=True)
            except LedgerError:
                report.failed.append(name)  # logged where it failed; a later sweep retries
                continue
            (report.skipped if skipped else report.completed).append(name)
        return report

    def _deliver_all(self, name: str, deliver: Deliver, *, due_only: bool) -> tuple[int, int]:
        record = self._operations.get(name)
        if record is None:
            raise InvalidArgument(f"operation {name}: no such operation")
        undelivered = [item for item in record.outbox if item.delivered_at is None]
        if not undelivered and not record.pending and not record.writeback_done:
            self._mark_delivered(record, None)  # nothing left to send: just close it
        delivered = skipped = 0
        for item in undelivered:
            claim, claimed = self._claim(record, item.index, due_only)
            if claim in (_Claim.LEASED, _Claim.NOT_DUE):
                skipped += 1
                continue
            if claim is _Claim.DELIVERED or claimed is None:
                continue
            try:
                deliver(claimed)
            except Exception as exc:
                self._record_failure(record, claimed, exc)
                raise OutboxDeliveryFailed(
                    f"operation {record.name}: outbox item {item.idempotency_key} failed: {exc}"
                ) from exc
            self._mark_delivered(record, item.index)
            delivered += 1
        return delivered, skipped

    def _claim(
        self, record: Operation, index: int, due_only: bool
    ) -> tuple[_Claim, OutboxItem | None]:
        """Take the lease on item `index`, by a conditional commit on the operation."""
        ref = self._operations.collection().document(record.doc_id)

        def attempt() -> tuple[_Claim, OutboxItem | None]:
            snapshot = self._commits.read(ref, record.name)
            stored = list((snapshot.to_dict() or {}).get("outbox") or [])
            item = stored[index]
            now = self._clock()
            if item.get("delivered_at") is not None:
                return _Claim.DELIVERED, None
            if _later(item.get("claimed_until"), now):
                return _Claim.LEASED, None
            if due_only and _later(item.get("next_attempt_at"), now):
                return _Claim.NOT_DUE, None
            stored[index] = {**item, "claimed_until": now + self._policy.lease}
            self._commits.update_if_unchanged(ref, snapshot, {"outbox": stored})
            return _Claim.CLAIMED, outbox_item_from(
                stored[index], record.name, record.doc_id, index
            )

        return self._commits.retrying(record.name, attempt)

    def _mark_delivered(self, record: Operation, index: int | None) -> None:
        """Mark item `index` delivered (None: none left) and maybe `writeback_done`."""

        def change(stored: list[dict[str, Any]], now: datetime) -> None:
            if index is not None and stored[index].get("delivered_at") is None:
                stored[index] = {**stored[index], "delivered_at": now, "claimed_until": None}

        self._rewrite(record, change)

    def _record_failure(self, record: Operation, item: OutboxItem, exc: Exception) -> None:
        """Release the lease; count the failure and schedule the next attempt."""
        attempts = item.attempts + 1
        error = clip_error(f"{type(exc).__name__}: {exc}")

        def change(stored: list[dict[str, Any]], now: datetime) -> None:
            if stored[item.index].get("delivered_at") is not None:
                return
            delay = self._policy.backoff.delay(attempts - 1, self._policy.rand)
            stored[item.index] = {
                **stored[item.index],
                "claimed_until": None,
                "attempts": attempts,
                "last_error": error,
                "next_attempt_at": now + timedelta(seconds=delay),
            }

        fields: dict[str, Any] = {"operation": record.name, "idempotency_key": item.idempotency_key}
        log_event(log, logging.ERROR, "outbox item delivery failed", error=error, **fields)
        try:
            self._rewrite(record, change)
        except LedgerError as store_exc:
            # The lease still expires on its own; the failure count is what is lost.
            log_event(
                log,
                logging.ERROR,
                "recording an outbox failure failed",
                **fields,
                error=str(store_exc),
            )
        if attempts >= self._policy.alert_after:
            log_event(
                log,
                logging.ERROR,
                f"outbox item {item.idempotency_key} of {record.name} failed {attempts} times",
                alert="outbox_item_failing",
                attempts=attempts,
                error=error,
                **fields,
            )

    def _rewrite(
        self, record: Operation, change: Callable[[list[dict[str, Any]], datetime], None]
    ) -> None:
        """Apply `change` to the stored outbox list and recompute `writeback_done`."""
        ref = self._operations.collection().document(record.doc_id)

        def attempt() -> None:
            snapshot = self._commits.read(ref, record.name)
            stored = list((snapshot.to_dict() or {}).get("outbox") or [])
            change(stored, self._clock())
            done = all(item.get("delivered_at") is not None for item in stored)
            self._commits.update_if_unchanged(
                ref, snapshot, {"outbox": stored, "writeback_done": done}
            )

        self._commits.retrying(record.name, attempt)


def _later(value: Any, now: datetime) -> bool:
    return isinstance(value, datetime) and value > now
