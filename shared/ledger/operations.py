"""Operations: register, look up, defer, and record stuck alerts; settle once (settling.py).

`Operations` writes every lifecycle field of an `operations` document. Its `settle`, the
one rule everything else protects (pending to terminal once, with the write-back in the
same transaction), comes from the `Settling` mixin in settling.py, with the timeline of two
racing settles and how a failing write-back is counted; `WritebackFaulted` and
`WRITEBACK_FAILURES` are defined there and importable from here as before.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from google.api_core import exceptions as gexc
from google.cloud import firestore

from shared import tracing
from shared.clock import Clock
from shared.ledger import opnames as opnames  # the sibling module, not the package
from shared.ledger.commits import Commits
from shared.ledger.errors import AmbiguousId, ContentionError, InvalidArgument, StoreUnavailable
from shared.ledger.ids import check_limit, check_time, clip_error, operation_id, submission_id
from shared.ledger.records import (
    CHECKS,
    MAX_CHECKS,
    NOT_FOUND_AT,
    OPERATIONS,
    OUTBOX_DUE_AT,
    PENDING,
    STUCK_ALERTED_AT,
    SUBMISSIONS,
    SUPERSEDED,
    TRACE,
    WAITING_ALERTED_AT,
    Operation,
    operation_from,
    operation_from_snapshot,
)
from shared.ledger.settling import WRITEBACK_FAILURES, Settling, WritebackFaulted
from shared.logs import event as log_event
from shared.logs import get_logger

__all__ = ["WRITEBACK_FAILURES", "Operations", "WritebackFaulted"]

log = get_logger("ledger")


class Operations(Settling):
    """The `operations` collection: every write to an operation's lifecycle fields."""

    def __init__(
        self, commits: Commits, clock: Clock, *, grace: timedelta, retention: timedelta
    ) -> None:
        self._commits = commits
        self._clock = clock
        self._grace = grace
        self._retention = retention

    def collection(self) -> Any:
        return self._commits.collection(OPERATIONS)

    def register(self, name: str, kind: str, context: Mapping[str, Any] | None = None) -> Operation:
        """Record `name` as pending; if it exists, return it unchanged."""
        doc_id, data = self.pending_fields(name, kind, context)
        try:
            self.collection().document(doc_id).create(data, timeout=self._commits.timeout_s)
        except gexc.AlreadyExists:
            existing = self.get(name)
            if existing is None:  # deleted (TTL) between create and read
                raise ContentionError(f"operation {name} vanished while registering") from None
            return existing
        except gexc.GoogleAPIError as exc:
            raise StoreUnavailable(f"operation {name}: register failed: {exc}") from exc
        self.log_registered(name, kind)
        return operation_from(data, doc_id, None)

    def put_many(self, docs: Iterable[Mapping[str, Any]]) -> int:
        """Write each document as given, under its `name`'s id, 500 per batched write.

        Checks no rule and reads nothing: for seeding a benchmark's ledger and putting back
        what `stored_fields` returned. Returns how many documents were written.
        """
        written, batch = 0, self._commits.client.batch()
        try:
            for data in docs:
                batch.set(self.collection().document(operation_id(data["name"])), dict(data))
                written += 1
                if written % 500 == 0:
                    batch.commit()
                    batch = self._commits.client.batch()
            if written % 500:
                batch.commit()
        except gexc.GoogleAPIError as exc:
            raise StoreUnavailable(f"operations: put_many failed after {written}: {exc}") from exc
        return written

    def pending_fields(
        self,
        name: str,
        kind: str,
        context: Mapping[str, Any] | None,
        *,
        submission: str | None = None,
        outbox: Sequence[Any] = (),
    ) -> tuple[str, dict[str, Any]]:
        """(document id, fields) of `name` registered pending now, checked; nothing written.
        `outbox`: items to deliver while it is pending, due now (docs/architecture.md,
        "Check runs")."""
        doc_id = operation_id(name)
        if not isinstance(kind, str) or not kind.strip():
            raise InvalidArgument(f"operation {name}: kind must be a non-empty string")
        if context is not None and not isinstance(context, Mapping):
            raise InvalidArgument(f"operation {name}: context must be a mapping")
        now = self._clock()
        data: dict[str, Any] = {
            "name": name,
            "short_id": opnames.short_id(name),
            "kind": kind,
            "status": PENDING,
            "submitted_at": now,
            "attempts": 0,
            "next_check_at": now + self._grace,
            "writeback_done": False,
            "context": dict(context or {}),
            "outbox": [{"payload": item, "delivered_at": None} for item in outbox],
        }
        if outbox:
            data[OUTBOX_DUE_AT] = now
        if submission is not None:
            data["submission"] = submission
        trace = tracing.run_traceparent()
        if trace is not None:  # the run that registered it: its settlement links back to it
            data[TRACE] = trace
        return doc_id, data

    def expire_submission(self, txn: Any, tag: str | None, expire_at: Any) -> None:
        """Stage the push's submission `tag` to expire with its winner (docs/architecture.md,
        "Expiry"): kept while the operation is, so an old push never gets a second batch."""
        if tag and expire_at is not None:
            ref = self._commits.collection(SUBMISSIONS).document(submission_id(tag))
            txn.set(ref, {"expire_at": expire_at}, merge=True)

    def log_registered(self, name: str, kind: str) -> None:
        log_event(log, logging.INFO, "operation registered", operation=name, kind=kind)

    def record_superseded(
        self,
        name: str,
        kind: str,
        context: Mapping[str, Any] | None,
        *,
        winner: str,
        outbox: Sequence[Any],
    ) -> Operation:
        """Record the batch `name` that lost its push to `winner`: final at once, never settled.

        Its outbox holds what makes it harmless (cancelling it at Gemini). If `name` is
        already recorded, the stored record is returned unchanged.
        """
        doc_id, data = self.pending_fields(name, kind, context)
        now = data["submitted_at"]
        data.update(
            status=SUPERSEDED,
            superseded_by=winner,
            settled_at=now,
            next_check_at=None,
            writeback_done=not outbox,
            outbox=[{"payload": item, "delivered_at": None} for item in outbox],
            # Swept at once if the inline cancel fails; TTL only once it is done.
            **({OUTBOX_DUE_AT: now} if outbox else {"expire_at": now + self._retention}),
        )
        try:
            self.collection().document(doc_id).create(data, timeout=self._commits.timeout_s)
        except gexc.AlreadyExists:
            existing = self.get(name)
            if existing is None:
                raise ContentionError(f"operation {name} vanished while recording it") from None
            return existing
        except gexc.GoogleAPIError as exc:
            raise StoreUnavailable(
                f"operation {name}: recording it superseded failed: {exc}"
            ) from exc
        log_event(
            log,
            logging.WARNING,
            f"batch {name} superseded by {winner}: a second batch for one push, cancelled",
            operation=name,
            kind=kind,
            winner=winner,
            alert="batch_superseded",
        )
        return operation_from(data, doc_id, None)

    def get(self, name: str) -> Operation | None:
        """The operation named `name`, or whose last path segment is `name` (a bare id)."""
        ref = self.resolve(name)
        if ref is None:
            return None
        snapshot = self._commits.read(ref, name)
        return operation_from_snapshot(snapshot) if snapshot.exists else None

    def resolve(self, name: str) -> Any:
        """The document for a full name or a bare id; None when a bare id matches nothing."""
        ref = self.collection().document(operation_id(name))
        if "/" in name or self._commits.read(ref, name).exists:
            return ref
        query = self.collection().where(filter=firestore.FieldFilter("short_id", "==", name))
        matches = [s.reference for s in self._commits.stream(query.limit(2), f"operation {name}")]
        if len(matches) > 1:
            raise AmbiguousId(f"operation id {name!r} matches several operations; use the name")
        return matches[0] if matches else None

    def due_pending(
        self, now: datetime, limit: int, start_after: Operation | None = None
    ) -> list[Operation]:
        """Pending operations with `next_check_at <= now`, earliest first, one page.

        Pass the last operation of a page as `start_after` to get the next page.
        """
        check_time(now, "now")
        check_limit(limit)
        query = (
            self.collection()
            .where(filter=firestore.FieldFilter("status", "==", PENDING))
            .where(filter=firestore.FieldFilter("next_check_at", "<=", now))
            .order_by("next_check_at")
            .order_by("__name__")  # a total order, so a page boundary never skips a tie
        )
        if start_after is not None:
            query = query.start_after(
                {
                    "next_check_at": start_after.next_check_at,
                    "__name__": self.collection().document(start_after.doc_id),
                }
            )
        snapshots = self._commits.stream(query.limit(limit), "due_pending")
        return [operation_from_snapshot(s) for s in snapshots]

    def defer(
        self, name: str, next_check_at: datetime, attempts: int, *, answer: str | None = None
    ) -> bool:
        """Set a pending operation's `attempts` and `next_check_at`; False if not pending.

        With `answer`, the check is appended to `checks` ({at, attempt, answer}, the newest
        `MAX_CHECKS` kept) in the same conditional write: the console's timeline, no extra
        write per check."""
        check_time(next_check_at, "next_check_at")
        if not isinstance(attempts, int) or attempts < 0:
            raise InvalidArgument(f"operation {name}: attempts must be ≥ 0, got {attempts!r}")
        if answer is not None and not isinstance(answer, str):
            raise InvalidArgument(f"operation {name}: answer must be a string")
        now = self._clock()

        def update(data: Mapping[str, Any]) -> dict[str, Any]:
            fields: dict[str, Any] = {"attempts": attempts, "next_check_at": next_check_at}
            if answer is not None:
                check = {"at": now, "attempt": attempts, "answer": clip_error(answer)}
                fields[CHECKS] = [*list(data.get(CHECKS) or [])[-(MAX_CHECKS - 1) :], check]
            return fields

        return self._update_if_pending(name, update)

    def mark_stuck_alerted(self, name: str, now: datetime, window: timedelta) -> bool:
        """Record a stuck alert; True exactly when this call recorded a new one.

        False when the operation is unknown, settled, or already alerted within `window`.
        Timeline it closes (two overlapping reconcile runs A and B)::

            A reads v1 (no alert yet)      B reads v1 (no alert yet)
            A writes stuck_alerted_at on condition "still v1" → v2, A alerts
                                           B writes on condition "still v1" → refused
                                           B re-reads v2: alerted this window → False
        """
        return self._mark_alerted(STUCK_ALERTED_AT, name, now, window)

    def mark_waiting_alerted(self, name: str, now: datetime, window: timedelta) -> bool:
        """Like `mark_stuck_alerted`, for the `operation_waiting` alert (its own field)."""
        return self._mark_alerted(WAITING_ALERTED_AT, name, now, window)

    def _mark_alerted(self, field: str, name: str, now: datetime, window: timedelta) -> bool:
        check_time(now, "now")
        if not isinstance(window, timedelta) or window <= timedelta(0):
            raise InvalidArgument(f"operation {name}: window must be positive, got {window!r}")

        def alert(data: Mapping[str, Any]) -> dict[str, Any] | None:
            alerted = data.get(field)
            if alerted is not None and now - alerted < window:
                return None
            return {field: now}

        return self._update_if_pending(name, alert)

    def mark_not_found(self, name: str, now: datetime) -> datetime | None:
        """Record that Gemini answered 404 for a pending operation at `now`; returns the
        first of these consecutive 404s (`now` itself on a first one), None if the
        operation is unknown or settled. Conditional, so overlapping checks agree on the
        first sighting."""
        check_time(now, "now")
        seen: list[datetime] = []

        def first(data: Mapping[str, Any]) -> dict[str, Any] | None:
            seen.clear()
            earlier = data.get(NOT_FOUND_AT)
            seen.append(earlier or now)
            return None if earlier is not None else {NOT_FOUND_AT: now}

        self._update_if_pending(name, first)
        return seen[-1] if seen else None

    def clear_not_found(self, name: str) -> bool:
        """Forget a 404 sighting (Gemini knows the operation again); True if one was cleared."""

        def clear(data: Mapping[str, Any]) -> dict[str, Any] | None:
            return {NOT_FOUND_AT: None} if data.get(NOT_FOUND_AT) is not None else None

        return self._update_if_pending(name, clear)

    def _update_if_pending(self, name: str, decide: Any) -> bool:
        """Apply `decide(stored)` (None: nothing to do) to a pending operation, conditionally."""
        ref = self.resolve(name)
        if ref is None:
            return False

        def attempt() -> bool:
            snapshot = self._commits.read(ref, name)
            data = snapshot.to_dict() or {}
            if not snapshot.exists or data.get("status") != PENDING:
                return False
            update = decide(data)
            if update is None:
                return False
            self._commits.update_if_unchanged(ref, snapshot, update)
            return True

        return self._commits.retrying(name, attempt)
