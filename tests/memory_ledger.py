"""An in-memory ledger for fast tests of settlement and reconcile: a test double, never shipped.

It implements the settle side of the ledger, laid out like `Ledger` (`shared.ledger.protocols`:
`SettleLedger`; its `operations` part also `DeferLedger` and `AlertLedger`) plus the reads a
test asserts with (`operations.register`, `results.get`, `results.find`), and
`installations` (the same `merged` rules as the Firestore part), one lock standing in for
Firestore's conditional commit. It must pass the
same exactly-once contract as the Firestore ledger (tests/integration/test_ledger_contract.py);
a test that needs more (submissions, deliveries, queries) uses the emulator.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from shared.clock import Clock
from shared.config import DEFAULTS
from shared.errors import retryable
from shared.ledger import opnames
from shared.ledger.errors import InvalidArgument, WritebackFailed
from shared.ledger.ids import check_limit, installation_doc_id, operation_id
from shared.ledger.installations import (
    Applied,
    Installation,
    InstallationFacts,
    installation_from,
    merged,
)
from shared.ledger.records import (
    MAX_CHECKS,
    PENDING,
    SETTLED_BY,
    TERMINAL_STATUSES,
    Deliver,
    DeliveryEnd,
    Operation,
    OutboxItem,
    Settlement,
)
from shared.ledger.results import Writeback

_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)


class _Writes:
    """Stages result documents; they reach the store only if the settlement commits."""

    def __init__(self, record: Operation) -> None:
        self._record = record
        self.staged: dict[tuple[str, str], dict[str, Any]] = {}

    def put(
        self, collection: str, document: str, fields: Mapping[str, Any], *, replace: bool = True
    ) -> str:
        self.staged[(collection, document)] = {**fields, "operation": self._record.name}
        return document


class _Store:
    """The dicts and the one lock every part shares; each write is one step under it."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.lock = threading.Lock()
        self.ops: dict[str, Operation] = {}
        self.results: dict[tuple[str, str], dict[str, Any]] = {}
        self.installations: dict[int, dict[str, Any]] = {}
        self._version = 0

    def pending(self, name: str) -> Operation | None:
        record = self.ops.get(name)
        return record if record is not None and record.pending else None

    def update_if_pending(self, name: str, decide: Any) -> bool:
        with self.lock:
            record = self.pending(name)
            updated = decide(record) if record is not None else None
            if updated is None:
                return False
            self.put(updated)
            return True

    def put(self, record: Operation) -> Operation:
        """Store `record` as a new version (its `update_time`, as Firestore stamps one)."""
        self._version += 1
        stamped = replace(record, update_time=_EPOCH + timedelta(microseconds=self._version))
        self.ops[record.name] = stamped
        return stamped


class MemoryOperations:
    """`ledger.operations`: register, reads and the pending-only marks."""

    def __init__(self, store: _Store, grace: timedelta) -> None:
        self._store = store
        self._grace = grace

    def register(self, name: str, kind: str, context: Mapping[str, Any] | None = None) -> Operation:
        store = self._store
        with store.lock:
            if name in store.ops:
                return store.ops[name]
            now = store.clock()
            return store.put(
                Operation(
                    name=name,
                    doc_id=operation_id(name),
                    kind=kind,
                    status=PENDING,
                    submitted_at=now,
                    attempts=0,
                    next_check_at=now + self._grace,
                    writeback_done=False,
                    context=dict(context or {}),
                )
            )

    def get(self, name: str) -> Operation | None:
        with self._store.lock:
            ops = self._store.ops
            found = ops.get(name)
            if found is None:
                matches = [op for op in ops.values() if opnames.short_id(op.name) == name]
                found = matches[0] if len(matches) == 1 else None
            return found

    def mark_not_found(self, name: str, now: datetime) -> datetime | None:
        store = self._store
        with store.lock:
            record = store.pending(name)
            if record is None:
                return None
            if record.not_found_at is None:
                store.put(replace(record, not_found_at=now))
                return now
            return record.not_found_at

    def clear_not_found(self, name: str) -> bool:
        return self._store.update_if_pending(
            name, lambda r: replace(r, not_found_at=None) if r.not_found_at else None
        )

    def defer(
        self, name: str, next_check_at: datetime, attempts: int, *, answer: str | None = None
    ) -> bool:
        now = self._store.clock()

        def update(record: Operation) -> Operation:
            checks = record.checks
            if answer is not None:
                check = {"at": now, "attempt": attempts, "answer": answer}
                checks = (*checks[-(MAX_CHECKS - 1) :], check)
            return replace(record, attempts=attempts, next_check_at=next_check_at, checks=checks)

        return self._store.update_if_pending(name, update)

    def mark_stuck_alerted(self, name: str, now: datetime, window: timedelta) -> bool:
        def alert(record: Operation) -> Operation | None:
            last = record.stuck_alerted_at
            return None if last and now - last < window else replace(record, stuck_alerted_at=now)

        return self._store.update_if_pending(name, alert)

    def mark_waiting_alerted(self, name: str, now: datetime, window: timedelta) -> bool:
        def alert(record: Operation) -> Operation | None:
            last = record.waiting_alerted_at
            if last and now - last < window:
                return None
            return replace(record, waiting_alerted_at=now)

        return self._store.update_if_pending(name, alert)


class MemoryResults:
    """`ledger.results`: the result documents settlements wrote."""

    def __init__(self, store: _Store) -> None:
        self._store = store

    def get(self, collection: str, document: str) -> dict[str, Any] | None:
        with self._store.lock:
            found = self._store.results.get((collection, document))
        return dict(found) if found is not None else None

    def find(
        self, collection: str, limit: int = 1000, order_by: str | None = None, **equals: Any
    ) -> list[dict[str, Any]]:
        with self._store.lock:
            found = [
                dict(doc)
                for (name, _), doc in self._store.results.items()
                if name == collection and all(doc.get(k) == v for k, v in equals.items())
            ]
        if order_by is not None:
            found.sort(key=lambda doc: str(doc.get(order_by, "")))
        return found[:limit]

    def count(self, collection: str, **equals: Any) -> int:
        return len(self.find(collection, 1_000_000, **equals))


class MemoryOutbox:
    """`ledger.outbox`: delivers each open item once (no leases: one process, no crash)."""

    def __init__(self, store: _Store) -> None:
        self._store = store

    def deliver(self, name: str, deliver: Deliver) -> int:
        store = self._store
        with store.lock:
            record = store.ops.get(name)
        delivered = 0
        for item in record.outbox if record is not None else ():
            if item.open:
                deliver(item)
                delivered += 1
                with store.lock:
                    current = store.ops[name]
                    done = replace(item, delivered_at=store.clock())
                    items = tuple(done if i.index == item.index else i for i in current.outbox)
                    finished = all(not i.open for i in items)
                    store.put(replace(current, outbox=items, writeback_done=finished))
        return delivered


class MemoryInstallations:
    """`ledger.installations`: `merged` under the lock; the delivery's mark is the worker's."""

    def __init__(self, store: _Store) -> None:
        self._store = store

    def get(self, installation_id: int) -> Installation | None:
        installation_doc_id(installation_id)
        with self._store.lock:
            stored = self._store.installations.get(installation_id)
        return installation_from(stored) if stored is not None else None

    def apply(
        self,
        event: InstallationFacts,
        *,
        received_at: datetime,
        delivery_id: str,
        end: DeliveryEnd | None = None,  # no deliveries here: left unapplied for the worker
    ) -> Applied:
        store = self._store
        with store.lock:
            stored = store.installations.get(event.installation_id)
            doc = merged(stored, event, received_at=received_at, delivery_id=delivery_id)
            if doc is None:
                assert stored is not None
                return Applied(False, installation_from(stored))
            doc.update(updated_at=store.clock(), delivery_id=delivery_id)
            store.installations[event.installation_id] = doc
            return Applied(True, installation_from(doc))

    def listing(
        self, status: str | None = None, limit: int = 50, after: int | None = None
    ) -> list[Installation]:
        check_limit(limit)
        with self._store.lock:
            docs = sorted(self._store.installations.items())
        found = [
            installation_from(doc)
            for number, doc in docs
            if (status is None or doc["status"] == status) and (after is None or number > after)
        ]
        return found[:limit]


class MemoryLedger:
    """Operations and reviews in dicts, in the parts `Ledger` has; `settle` spans them."""

    def __init__(
        self,
        clock: Clock,
        *,
        grace: timedelta = timedelta(seconds=DEFAULTS.reconcile_grace_s),
        retention: timedelta = timedelta(days=DEFAULTS.retention_days),
    ) -> None:
        self._store = _Store(clock)
        self._retention = retention
        self.operations = MemoryOperations(self._store, grace)
        self.results = MemoryResults(self._store)
        self.outbox = MemoryOutbox(self._store)
        self.installations = MemoryInstallations(self._store)
        self.settle_calls = 0  # how many settles reached the store (a test's spy)

    @property
    def clock(self) -> Clock:
        return self._store.clock

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
        end: DeliveryEnd | None = None,  # no deliveries here: left unapplied for the worker
    ) -> Settlement:
        if status not in TERMINAL_STATUSES or by not in SETTLED_BY:
            raise InvalidArgument(f"operation {name}: bad status {status!r} or by {by!r}")
        items = list(outbox or [])
        store = self._store
        with store.lock:
            self.settle_calls += 1
            record = store.ops.get(name)
            if record is None:
                return Settlement.UNKNOWN
            if not record.pending:  # `expected` or not: the stored record decides
                return Settlement.ALREADY_SETTLED
            writes = _Writes(record)
            writeback_error = None
            if writeback is not None:
                try:
                    writeback(writes, record)
                except Exception as exc:
                    if retryable(exc):
                        raise WritebackFailed(
                            f"operation {name}: write-back failed: {exc}"
                        ) from exc
                    writes.staged.clear()
                    writeback_error = f"write-back failed: {exc}"
            now = store.clock()
            settled = replace(
                record,
                status=status,
                settled_at=now,
                settled_by=by,
                error=error if isinstance(error, str) or error is None else dict(error),
                writeback_done=not items,
                expire_at=None if items else now + self._retention,
                outbox_due_at=now if items else None,
                outbox=tuple(
                    OutboxItem(name, i, f"{record.doc_id}:{i}", item)
                    for i, item in enumerate(items)
                ),
                result_counts=dict(result_counts) if result_counts is not None else None,
                outcome=dict(outcome or {}),
                writeback_error=writeback_error,
            )
            store.results.update(writes.staged)
            store.put(settled)
        if items and deliver is not None:
            self.outbox.deliver(name, deliver)
        return Settlement.SETTLED
