"""The ledger: long-running operations settled exactly once, and webhook deliveries.

Collections (DESIGN.md): `operations/{opnames.encode(name)}` and
`deliveries/{source}:{opnames.encode(delivery_id)}`.

Public API (every method may raise the `LedgerError`s below)::

    ledger = Ledger(client, clock=system_clock, grace=timedelta(seconds=90),
                    retention=timedelta(days=14), backoff=Backoff(), sleep=…, rand=…)
    ledger.register(name, kind, context=None) -> Operation        # idempotent
    ledger.get(name_or_bare_id) -> Operation | None
    ledger.settle(name, status, by, *, error=None, writeback=None, outbox=None,
                  deliver=None) -> Settlement          # settled|already_settled|unknown
    ledger.deliver_outbox(name, deliver) -> int                     # items delivered now
    ledger.sweep_outbox(deliver, older_than=timedelta(seconds=60), limit=100) -> SweepReport
    ledger.due_pending(now, limit, start_after=None) -> list[Operation]
    ledger.defer(name, next_check_at, attempts) -> bool             # False once settled
    ledger.record_delivery(source, delivery_id, event, payload=None, payload_ref=None)
        -> Recorded(new, delivery)
    ledger.mark_delivery(source, delivery_id, status, error=None) -> Delivery
    ledger.get_delivery(source, delivery_id) -> Delivery | None
    ledger.list_deliveries(status=None, limit=50) -> list[Delivery]

Settlement, the one rule everything else protects: an operation goes from `pending` to a
terminal status once, and its write-back commits in that same transaction. Timeline of
two racing settles (webhook W, reconcile R)::

    W reads v1 (pending)      R reads v1 (pending)
    W commits write-back + status, on condition "still v1"  → v2, settled
                              R commits on condition "still v1" → FAILED_PRECONDITION
                              R re-reads v2 (succeeded)      → already_settled, no write

The read is outside the transaction and the commit is conditional on the version read
(optimistic concurrency): on the emulator a read inside the transaction takes a lock
that makes every race cost a ~2 s lock timeout; the condition gives the same guarantee
without it. A stale read can only say `pending` wrongly, never `settled`, because a
terminal status never changes.

Side effects outside Firestore go through an outbox: items stored on the operation in
the settling transaction, delivered afterwards with the idempotency key
`"{doc_id}:{index}"`, each marked delivered in its own conditional commit.
`writeback_done` turns true when all are (at once when there are none);
`sweep_outbox` finishes what a crash left undone. A crash between the external call
and its mark repeats the call with the same key: the external API dedupes on it.

Exceptions::

    LedgerError                 base of everything this module raises
    ├── InvalidArgument         (also ValueError) bad input; nothing was written
    ├── AmbiguousId             (also LookupError) a bare id names several operations
    ├── UnknownDelivery         (also LookupError) mark_delivery on a delivery never recorded
    ├── WritebackFailed         the write-back raised; the settlement was rolled back
    ├── OutboxDeliveryFailed    `deliver` raised; the item stays undelivered for the sweep
    ├── ContentionError         still ABORTED / conflicting after every attempt: retry later
    └── StoreUnavailable        a Firestore call failed: retry later

Infrastructure errors are raised `from` the original exception.
"""

from __future__ import annotations

import logging
import random
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, NamedTuple, TypeVar

from google.api_core import exceptions as gexc
from google.cloud import firestore

from shared import opnames
from shared.clock import Clock, system_clock
from shared.errors import HookledgerError, PermanentError, TransientError
from shared.logs import event as log_event
from shared.logs import get_logger
from shared.retry import Backoff, RetriesExhausted, Retry, find_cause, retrying

T = TypeVar("T")
log = get_logger("ledger")

OPERATIONS = "operations"
DELIVERIES = "deliveries"

PENDING = "pending"
TERMINAL_STATUSES = frozenset({"succeeded", "failed", "cancelled", "expired"})
SETTLED_BY = frozenset({"webhook", "reconcile"})
DELIVERY_STATUSES = frozenset({"queued", "done", "ignored", "dead"})
_SOURCE = re.compile(r"[a-z][a-z0-9_-]{0,39}")
_MAX_ERROR_CHARS = 4000
_MAX_PAYLOAD_BYTES = 900_000
# What a commit raises when a write's precondition fails.
_REFUSED = (
    gexc.FailedPrecondition,
    gexc.AlreadyExists,
    gexc.NotFound,
)  # a Firestore document holds 1 MiB; leave room for the rest


class LedgerError(HookledgerError):
    """Base of every error the ledger raises."""


class InvalidArgument(LedgerError, PermanentError, ValueError):
    """Bad input (status, name, time…); the message names it. Nothing was written."""


class AmbiguousId(LedgerError, PermanentError, LookupError):
    """A bare id matches more than one operation; use the full name."""


class UnknownDelivery(LedgerError, PermanentError, LookupError):
    """No delivery with that source and id was recorded."""


class WritebackFailed(LedgerError, TransientError):
    """The write-back raised (its exception is `__cause__`); the operation stays pending."""


class OutboxDeliveryFailed(LedgerError, TransientError):
    """Delivering an outbox item raised; it stays undelivered and the sweep retries it."""


class ContentionError(LedgerError, TransientError):
    """The transaction kept aborting or conflicting; the caller should retry later."""


class StoreUnavailable(LedgerError, TransientError):
    """Firestore failed (network, permission, quota…); the caller should retry later."""


class Settlement(StrEnum):
    """What `settle` did."""

    SETTLED = "settled"
    ALREADY_SETTLED = "already_settled"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class OutboxItem:
    """One side effect to deliver; `idempotency_key` is stable across retries and crashes."""

    operation: str
    index: int
    idempotency_key: str
    payload: Any
    delivered_at: datetime | None = None


@dataclass(frozen=True)
class Operation:
    """An `operations` document as stored; times are aware UTC datetimes."""

    name: str
    doc_id: str
    kind: str
    status: str
    submitted_at: datetime
    attempts: int
    next_check_at: datetime | None
    writeback_done: bool
    context: dict[str, Any]
    settled_at: datetime | None = None
    settled_by: str | None = None
    error: Any = None
    expire_at: datetime | None = None
    outbox: tuple[OutboxItem, ...] = ()
    update_time: datetime | None = field(default=None, repr=False, compare=False)

    @property
    def pending(self) -> bool:
        return self.status == PENDING

    def to_dict(self) -> dict[str, Any]:
        """Every stored field (outbox items as dicts), for the CLI and logs."""
        return {
            "name": self.name,
            "doc_id": self.doc_id,
            "kind": self.kind,
            "status": self.status,
            "submitted_at": self.submitted_at,
            "settled_at": self.settled_at,
            "settled_by": self.settled_by,
            "attempts": self.attempts,
            "next_check_at": self.next_check_at,
            "writeback_done": self.writeback_done,
            "error": self.error,
            "context": self.context,
            "expire_at": self.expire_at,
            "outbox": [
                {
                    "idempotency_key": item.idempotency_key,
                    "payload": item.payload,
                    "delivered_at": item.delivered_at,
                }
                for item in self.outbox
            ],
        }


@dataclass(frozen=True)
class Delivery:
    """A `deliveries` document as stored."""

    source: str
    delivery_id: str
    doc_id: str
    event: str
    status: str
    attempts: int
    last_error: str | None
    received_at: datetime
    updated_at: datetime | None
    expire_at: datetime | None
    payload: Any = None
    payload_ref: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "delivery_id": self.delivery_id,
            "doc_id": self.doc_id,
            "event": self.event,
            "status": self.status,
            "attempts": self.attempts,
            "last_error": self.last_error,
            "received_at": self.received_at,
            "updated_at": self.updated_at,
            "expire_at": self.expire_at,
            "payload": self.payload,
            "payload_ref": self.payload_ref,
        }


class Recorded(NamedTuple):
    """`record_delivery`'s answer: `new` is False for a redelivery of a known id."""

    new: bool
    delivery: Delivery


@dataclass
class SweepReport:
    """Operations whose outbox the sweep completed, and those it could not (retried later)."""

    completed: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


Writeback = Callable[[Any, Operation], None]
"""`writeback(txn, record)`: stage Firestore writes on `txn` (reads first, if any).

Called again on each retry, so it must not have effects outside `txn`."""
Deliver = Callable[[OutboxItem], None]
"""`deliver(item)`: perform one side effect, passing `item.idempotency_key` along."""


@dataclass(frozen=True)
class _Seen:
    """What a conditional commit needs of a snapshot, taken from a record already read."""

    id: str
    update_time: Any


class _Conflict(Exception):
    """A conditional write found the document changed since it was read."""


class Ledger:
    """Operations and deliveries in Firestore; see the module docstring for the contract."""

    def __init__(
        self,
        client: firestore.Client,
        clock: Clock = system_clock,
        *,
        grace: timedelta = timedelta(seconds=90),
        retention: timedelta = timedelta(days=14),
        backoff: Backoff | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rand: Callable[[], float] = random.random,
        timeout_s: float = 15.0,
    ) -> None:
        if grace < timedelta(0) or retention <= timedelta(0):
            raise InvalidArgument(f"need grace ≥ 0 and retention > 0, got {grace}, {retention}")
        self._client = client
        self._clock = clock
        self._grace = grace
        self._retention = retention
        self._backoff = backoff or Backoff()
        self._sleep = sleep
        self._rand = rand
        # Reads, creates and queries carry it; commits keep the client's own 60 s deadline.
        self._timeout_s = timeout_s
        self._counts_lock = threading.Lock()
        self._counts = {"aborted": 0, "conflicts": 0}

    # ----------------------------------------------------------------- operations

    def register(self, name: str, kind: str, context: Mapping[str, Any] | None = None) -> Operation:
        """Record `name` as pending; if it exists, return it unchanged."""
        doc_id = _operation_id(name)
        if not isinstance(kind, str) or not kind.strip():
            raise InvalidArgument(f"operation {name}: kind must be a non-empty string")
        if context is not None and not isinstance(context, Mapping):
            raise InvalidArgument(f"operation {name}: context must be a mapping")
        now = self._clock()
        ref = self._operations().document(doc_id)
        data = {
            "name": name,
            "short_id": opnames.short_id(name),
            "kind": kind,
            "status": PENDING,
            "submitted_at": now,
            "attempts": 0,
            "next_check_at": now + self._grace,
            "writeback_done": False,
            "context": dict(context or {}),
            "outbox": [],
        }
        try:
            ref.create(data, timeout=self._timeout_s)
        except gexc.AlreadyExists:
            existing = self.get(name)
            if existing is None:  # deleted (TTL) between create and read
                raise ContentionError(f"operation {name} vanished while registering") from None
            return existing
        except gexc.GoogleAPIError as exc:
            raise StoreUnavailable(f"operation {name}: register failed: {exc}") from exc
        log_event(log, logging.INFO, "operation registered", operation=name, kind=kind)
        return _operation(data, doc_id, None)

    def get(self, name: str) -> Operation | None:
        """The operation named `name`, or whose last path segment is `name` (a bare id)."""
        ref = self._resolve(name)
        if ref is None:
            return None
        snapshot = self._read(ref, name)
        return _from_snapshot(snapshot) if snapshot.exists else None

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
    ) -> Settlement:
        """Move a pending operation to `status` once; see the module docstring.

        `writeback(txn, record)` commits with the settlement or not at all. `outbox` items
        are stored in the same commit; with `deliver`, they are delivered right after
        (a failure is logged and left to `sweep_outbox`; the answer is still `settled`).

        `expected`, a pending record the caller has just read, saves the first read: the
        commit is conditional on its `update_time`, and a refusal re-reads as usual.
        """
        if status not in TERMINAL_STATUSES:
            raise InvalidArgument(
                f"operation {name}: status must be one of {sorted(TERMINAL_STATUSES)}, "
                f"got {status!r}"
            )
        if by not in SETTLED_BY:
            raise InvalidArgument(
                f"operation {name}: by must be one of {sorted(SETTLED_BY)}, got {by!r}"
            )
        if error is not None and not isinstance(error, str | Mapping):
            raise InvalidArgument(f"operation {name}: error must be a string or a mapping")
        if outbox is not None and (isinstance(outbox, str | bytes | Mapping)):
            raise InvalidArgument(f"operation {name}: outbox must be a list of items")
        items = list(outbox or [])
        ref = self._resolve(name)
        if ref is None:
            log_event(log, logging.INFO, "settle: unknown operation", operation=name, status=status)
            return Settlement.UNKNOWN

        known: list[Operation] = []
        if expected is not None and expected.update_time is not None and expected.doc_id == ref.id:
            known.append(expected)  # the caller's own read of this very operation

        def attempt() -> Settlement:
            if known:  # first attempt only: trust the caller's fresh read
                record = known.pop()
                snapshot: Any = _Seen(ref.id, record.update_time)
            else:
                snapshot = self._read(ref, name)
                if not snapshot.exists:
                    return Settlement.UNKNOWN
                record = _from_snapshot(snapshot)
            if not record.pending:
                if record.status != status:
                    log_event(
                        log,
                        logging.INFO,
                        "settle: already settled with another status",
                        operation=record.name,
                        stored_status=record.status,
                        requested_status=status,
                        by=by,
                    )
                return Settlement.ALREADY_SETTLED
            now = self._clock()
            update: dict[str, Any] = {
                "status": status,
                "settled_at": now,
                "settled_by": by,
                "expire_at": now + self._retention,
                "writeback_done": not items,
                "outbox": [{"payload": item, "delivered_at": None} for item in items],
            }
            if error is not None:
                update["error"] = _clip_error(error) if isinstance(error, str) else dict(error)

            def body(txn: Any) -> None:
                if writeback is not None:
                    try:
                        writeback(txn, record)
                    except Exception as exc:
                        if find_cause(exc, gexc.Aborted):
                            raise  # lock contention on the write-back's reads: retry it
                        raise WritebackFailed(
                            f"operation {record.name}: write-back failed: {exc}"
                        ) from exc
                txn.update(ref, update, option=self._unchanged_since(snapshot))

            try:
                self._commit(body, ref, snapshot)
            except _REFUSED as exc:
                # The operation is unchanged, so one of the write-back's own writes was refused.
                raise WritebackFailed(
                    f"operation {record.name}: write-back refused by Firestore: {exc}"
                ) from exc
            return Settlement.SETTLED

        outcome = self._retrying(name, attempt)
        if outcome is Settlement.SETTLED:
            log_event(log, logging.INFO, "operation settled", operation=name, status=status, by=by)
            if items and deliver is not None:
                try:
                    self.deliver_outbox(name, deliver)
                except LedgerError as exc:
                    log_event(
                        log,
                        logging.WARNING,
                        "outbox delivery failed; the sweep will retry",
                        operation=name,
                        error=str(exc),
                    )
        elif outcome is Settlement.UNKNOWN:
            log_event(log, logging.INFO, "settle: unknown operation", operation=name, status=status)
        return outcome

    def deliver_outbox(self, name: str, deliver: Deliver) -> int:
        """Deliver each undelivered outbox item of `name`, marking each after its call.

        Returns how many were delivered now. Raises `OutboxDeliveryFailed` at the first
        item whose `deliver` raises (earlier ones stay marked).
        """
        record = self.get(name)
        if record is None:
            raise InvalidArgument(f"operation {name}: no such operation")
        undelivered = [item for item in record.outbox if item.delivered_at is None]
        if not undelivered and not record.pending and not record.writeback_done:
            self._mark_item_delivered(record, None)  # nothing left to send: just close it
        delivered = 0
        for item in undelivered:
            try:
                deliver(item)
            except Exception as exc:
                log_event(
                    log,
                    logging.ERROR,
                    "outbox item delivery failed",
                    operation=record.name,
                    idempotency_key=item.idempotency_key,
                    error=str(exc),
                )
                raise OutboxDeliveryFailed(
                    f"operation {record.name}: outbox item {item.idempotency_key} failed: {exc}"
                ) from exc
            self._mark_item_delivered(record, item.index)
            delivered += 1
        return delivered

    def sweep_outbox(
        self, deliver: Deliver, older_than: timedelta = timedelta(seconds=60), limit: int = 100
    ) -> SweepReport:
        """Finish outboxes of operations settled at least `older_than` ago, oldest first."""
        _check_limit(limit)
        cutoff = self._clock() - older_than
        query = (
            self._operations()
            .where(filter=firestore.FieldFilter("writeback_done", "==", False))
            .where(filter=firestore.FieldFilter("settled_at", "<=", cutoff))
            .order_by("settled_at")
            .limit(limit)
        )
        report = SweepReport()
        for record in self._query(query, "sweep_outbox"):
            try:
                self.deliver_outbox(record.name, deliver)
                report.completed.append(record.name)
            except LedgerError:
                report.failed.append(record.name)  # logged by deliver_outbox; next sweep retries
        return report

    def due_pending(
        self, now: datetime, limit: int, start_after: Operation | None = None
    ) -> list[Operation]:
        """Pending operations with `next_check_at <= now`, earliest first, one page.

        Pass the last operation of a page as `start_after` to get the next page.
        """
        _check_time(now, "now")
        _check_limit(limit)
        query = (
            self._operations()
            .where(filter=firestore.FieldFilter("status", "==", PENDING))
            .where(filter=firestore.FieldFilter("next_check_at", "<=", now))
            .order_by("next_check_at")
            .order_by("__name__")  # a total order, so a page boundary never skips a tie
        )
        if start_after is not None:
            query = query.start_after(
                {
                    "next_check_at": start_after.next_check_at,
                    "__name__": self._operations().document(start_after.doc_id),
                }
            )
        return self._query(query.limit(limit), "due_pending")

    def defer(self, name: str, next_check_at: datetime, attempts: int) -> bool:
        """Set a pending operation's `attempts` and `next_check_at`; False if not pending."""
        _check_time(next_check_at, "next_check_at")
        if not isinstance(attempts, int) or attempts < 0:
            raise InvalidArgument(f"operation {name}: attempts must be ≥ 0, got {attempts!r}")
        ref = self._resolve(name)
        if ref is None:
            return False

        def attempt() -> bool:
            snapshot = self._read(ref, name)
            if not snapshot.exists or snapshot.get("status") != PENDING:
                return False
            update = {"attempts": attempts, "next_check_at": next_check_at}
            self._commit(
                lambda txn: txn.update(ref, update, option=self._unchanged_since(snapshot)),
                ref,
                snapshot,
            )
            return True

        return self._retrying(name, attempt)

    # ----------------------------------------------------------------- deliveries

    def record_delivery(
        self,
        source: str,
        delivery_id: str,
        event: str,
        payload: Any = None,
        payload_ref: str | None = None,
    ) -> Recorded:
        """Create the delivery as `queued` if absent; a redelivery returns the stored one."""
        doc_id = _delivery_id(source, delivery_id)
        if not isinstance(event, str) or not event:
            raise InvalidArgument(f"delivery {doc_id}: event must be a non-empty string")
        if isinstance(payload, str | bytes) and len(payload) > _MAX_PAYLOAD_BYTES:
            raise InvalidArgument(
                f"delivery {doc_id}: payload of {len(payload)} bytes is too large for a "
                "document; store it elsewhere and pass payload_ref"
            )
        now = self._clock()
        data = {
            "source": source,
            "delivery_id": delivery_id,
            "event": event,
            "status": "queued",
            "attempts": 0,
            "last_error": None,
            "received_at": now,
            "updated_at": now,
            "expire_at": now + self._retention,
            "payload": payload,
            "payload_ref": payload_ref,
        }
        ref = self._deliveries().document(doc_id)
        try:
            ref.create(data, timeout=self._timeout_s)
        except gexc.AlreadyExists:
            existing = self.get_delivery(source, delivery_id)
            if existing is None:  # expired by TTL between create and read
                raise ContentionError(f"delivery {doc_id} vanished while recording") from None
            return Recorded(False, existing)
        except gexc.GoogleAPIError as exc:
            raise StoreUnavailable(f"delivery {doc_id}: record failed: {exc}") from exc
        return Recorded(True, _delivery(data, doc_id))

    def mark_delivery(
        self, source: str, delivery_id: str, status: str, error: str | None = None
    ) -> Delivery:
        """Set the status, add one attempt, keep `error` as `last_error` when given."""
        doc_id = _delivery_id(source, delivery_id)
        if status not in DELIVERY_STATUSES:
            raise InvalidArgument(
                f"delivery {doc_id}: status must be one of {sorted(DELIVERY_STATUSES)}, "
                f"got {status!r}"
            )
        if error is not None and not isinstance(error, str):
            raise InvalidArgument(f"delivery {doc_id}: error must be a string")
        ref = self._deliveries().document(doc_id)

        def attempt() -> Delivery:
            snapshot = self._read(ref, doc_id)
            if not snapshot.exists:
                raise UnknownDelivery(f"delivery {doc_id} was never recorded")
            now = self._clock()
            data = snapshot.to_dict() or {}
            update: dict[str, Any] = {
                "status": status,
                "attempts": int(data.get("attempts", 0)) + 1,
                "updated_at": now,
                "expire_at": now + self._retention,
            }
            if error is not None:
                update["last_error"] = _clip_error(error)
            self._commit(
                lambda txn: txn.update(ref, update, option=self._unchanged_since(snapshot)),
                ref,
                snapshot,
            )
            return _delivery({**data, **update}, doc_id)

        return self._retrying(doc_id, attempt)

    def get_delivery(self, source: str, delivery_id: str) -> Delivery | None:
        doc_id = _delivery_id(source, delivery_id)
        snapshot = self._read(self._deliveries().document(doc_id), doc_id)
        return _delivery(snapshot.to_dict() or {}, doc_id) if snapshot.exists else None

    def list_deliveries(self, status: str | None = None, limit: int = 50) -> list[Delivery]:
        """Deliveries, newest first, optionally only those with `status`."""
        _check_limit(limit)
        query: Any = self._deliveries()
        if status is not None:
            if status not in DELIVERY_STATUSES:
                raise InvalidArgument(
                    f"status must be one of {sorted(DELIVERY_STATUSES)}, got {status!r}"
                )
            query = query.where(filter=firestore.FieldFilter("status", "==", status))
        query = query.order_by("received_at", direction=firestore.Query.DESCENDING).limit(limit)
        try:
            return [
                _delivery(s.to_dict() or {}, s.id) for s in query.stream(timeout=self._timeout_s)
            ]
        except gexc.GoogleAPIError as exc:
            raise StoreUnavailable(f"list_deliveries failed: {exc}") from exc

    def counts(self) -> dict[str, int]:
        """Retries so far: `aborted` (backed off) and `conflicts` (re-read at once)."""
        with self._counts_lock:
            return dict(self._counts)

    # ----------------------------------------------------------------- internals

    def _operations(self) -> Any:
        return self._client.collection(OPERATIONS)

    def _deliveries(self) -> Any:
        return self._client.collection(DELIVERIES)

    def _resolve(self, name: str) -> Any:
        """The document for a full name or a bare id; None when a bare id matches nothing."""
        doc_id = _operation_id(name)
        ref = self._operations().document(doc_id)
        if "/" in name:
            return ref
        if self._read(ref, name).exists:
            return ref
        query = self._operations().where(filter=firestore.FieldFilter("short_id", "==", name))
        try:
            matches = [
                snapshot.reference for snapshot in query.limit(2).stream(timeout=self._timeout_s)
            ]
        except gexc.GoogleAPIError as exc:
            raise StoreUnavailable(f"operation {name}: lookup by id failed: {exc}") from exc
        if len(matches) > 1:
            raise AmbiguousId(f"operation id {name!r} matches several operations; use the name")
        return matches[0] if matches else None

    def _read(self, ref: Any, subject: str) -> Any:
        try:
            return ref.get(timeout=self._timeout_s)
        except gexc.GoogleAPIError as exc:
            raise StoreUnavailable(f"{subject}: read failed: {exc}") from exc

    def _query(self, query: Any, what: str) -> list[Operation]:
        try:
            return [_from_snapshot(snapshot) for snapshot in query.stream(timeout=self._timeout_s)]
        except gexc.GoogleAPIError as exc:
            raise StoreUnavailable(f"{what} query failed: {exc}") from exc

    def _unchanged_since(self, snapshot: Any) -> Any:
        return self._client.write_option(last_update_time=snapshot.update_time)

    def _commit(self, body: Callable[[Any], None], ref: Any, snapshot: Any) -> None:
        """Run `body(txn)` as one transaction attempt; retrying is `_retrying`'s job.

        `body` writes `ref` on condition it is unchanged since `snapshot`. When the commit
        is refused and `ref` did change, raises `_Conflict` (re-read and decide again):
        the refusal may name another write of the same commit (a write-back's `create`),
        so the error code alone cannot tell.
        """
        try:
            firestore.transactional(body)(self._client.transaction(max_attempts=1))
        except LedgerError:
            raise
        except Exception as exc:
            if find_cause(exc, gexc.Aborted) or not find_cause(exc, _REFUSED):
                raise
            if self._read(ref, snapshot.id).update_time != snapshot.update_time:
                raise _Conflict(str(exc)) from exc
            raise

    def _retrying(self, subject: str, attempt: Callable[[], T]) -> T:
        def classify(exc: Exception) -> Retry | None:
            if isinstance(exc, _Conflict):
                return Retry.NOW
            if isinstance(exc, LedgerError):
                return None
            return Retry.LATER if find_cause(exc, gexc.Aborted) else None

        def on_retry(number: int, kind: Retry, delay: float, exc: Exception) -> None:
            counter = "conflicts" if kind is Retry.NOW else "aborted"
            with self._counts_lock:
                self._counts[counter] += 1
            log_event(
                log,
                logging.INFO if kind is Retry.NOW else logging.WARNING,
                "transaction conflict; re-reading"
                if kind is Retry.NOW
                else "transaction aborted; backing off",
                operation=subject,
                attempt=number,
                delay_s=round(delay, 3),
            )

        try:
            return retrying(
                attempt,
                classify=classify,
                backoff=self._backoff,
                sleep=self._sleep,
                rand=self._rand,
                on_retry=on_retry,
            )
        except RetriesExhausted as exc:
            if isinstance(exc.__cause__, _Conflict):
                with self._counts_lock:
                    self._counts["conflicts"] += 1
            else:
                with self._counts_lock:
                    self._counts["aborted"] += 1
            log_event(
                log, logging.ERROR, "transaction gave up", operation=subject, attempts=exc.attempts
            )
            raise ContentionError(
                f"{subject}: transaction still contended after {exc.attempts} attempts"
            ) from exc.__cause__
        except LedgerError:
            raise
        except Exception as exc:
            # The client wraps some failed commits in ValueError: look for the API error.
            if not find_cause(exc, gexc.GoogleAPIError):
                raise
            raise StoreUnavailable(f"{subject}: transaction failed: {exc}") from exc

    def _mark_item_delivered(self, record: Operation, index: int | None) -> None:
        """Mark outbox item `index` delivered (None: none left) and maybe `writeback_done`."""
        ref = self._operations().document(record.doc_id)

        def attempt() -> None:
            snapshot = self._read(ref, record.name)
            stored = list((snapshot.to_dict() or {}).get("outbox") or [])
            if index is not None:
                if stored[index].get("delivered_at") is not None:
                    return
                stored[index] = {**stored[index], "delivered_at": self._clock()}
            done = all(item.get("delivered_at") is not None for item in stored)
            update = {"outbox": stored, "writeback_done": done}
            self._commit(
                lambda txn: txn.update(ref, update, option=self._unchanged_since(snapshot)),
                ref,
                snapshot,
            )

        self._retrying(record.name, attempt)


# --------------------------------------------------------------------- helpers


def _operation_id(name: str) -> str:
    if not isinstance(name, str) or not name or any(part == "" for part in name.split("/")):
        raise InvalidArgument(f"operation name must be non-empty path segments, got {name!r}")
    try:
        return opnames.encode(name)
    except ValueError as exc:
        raise InvalidArgument(str(exc)) from exc


def _delivery_id(source: str, delivery_id: str) -> str:
    if not isinstance(source, str) or not _SOURCE.fullmatch(source):
        raise InvalidArgument(f"delivery source must match {_SOURCE.pattern}, got {source!r}")
    if not isinstance(delivery_id, str) or not delivery_id:
        raise InvalidArgument(f"delivery id from {source} must be a non-empty string")
    try:
        return f"{source}:{opnames.encode(delivery_id)}"
    except ValueError as exc:
        raise InvalidArgument(f"delivery id from {source}: {exc}") from exc


def _check_time(value: Any, what: str) -> None:
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise InvalidArgument(f"{what} must be an aware datetime, got {value!r}")


def _check_limit(limit: Any) -> None:
    if not isinstance(limit, int) or not 1 <= limit <= 1000:
        raise InvalidArgument(f"limit must be an integer in 1..1000, got {limit!r}")


def _clip_error(error: str) -> str:
    return error if len(error) <= _MAX_ERROR_CHARS else error[:_MAX_ERROR_CHARS] + "…"


def _from_snapshot(snapshot: Any) -> Operation:
    return _operation(snapshot.to_dict() or {}, snapshot.id, snapshot.update_time)


def _operation(data: Mapping[str, Any], doc_id: str, update_time: Any) -> Operation:
    name = data.get("name") or opnames.decode(doc_id)
    return Operation(
        name=name,
        doc_id=doc_id,
        kind=data.get("kind", ""),
        status=data.get("status", PENDING),
        submitted_at=data["submitted_at"],
        attempts=int(data.get("attempts", 0)),
        next_check_at=data.get("next_check_at"),
        writeback_done=bool(data.get("writeback_done", False)),
        context=dict(data.get("context") or {}),
        settled_at=data.get("settled_at"),
        settled_by=data.get("settled_by"),
        error=data.get("error"),
        expire_at=data.get("expire_at"),
        outbox=tuple(
            OutboxItem(
                operation=name,
                index=index,
                idempotency_key=f"{doc_id}:{index}",
                payload=item.get("payload"),
                delivered_at=item.get("delivered_at"),
            )
            for index, item in enumerate(data.get("outbox") or [])
        ),
        update_time=update_time,
    )


def _delivery(data: Mapping[str, Any], doc_id: str) -> Delivery:
    return Delivery(
        source=data.get("source", doc_id.split(":", 1)[0]),
        delivery_id=data.get("delivery_id", ""),
        doc_id=doc_id,
        event=data.get("event", ""),
        status=data.get("status", "queued"),
        attempts=int(data.get("attempts", 0)),
        last_error=data.get("last_error"),
        received_at=data["received_at"],
        updated_at=data.get("updated_at"),
        expire_at=data.get("expire_at"),
        payload=data.get("payload"),
        payload_ref=data.get("payload_ref"),
    )
