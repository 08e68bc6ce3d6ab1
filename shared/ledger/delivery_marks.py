"""Marking and ending a delivery: the worker's end of its attempt, an operator's mark,
the same end staged into another part's commit, and an operator's reopen.

The `DeliveryMarks` mixin gives `Deliveries` (deliveries.py, whose docstring has the
lease's timeline) these methods. A mark never moves a finished delivery, nor applies for
an attempt that lost its lease; only `reopen` puts a finished delivery back to `queued`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from shared.clock import Clock
from shared.ledger.commits import Commits, Seen, Staged
from shared.ledger.errors import InvalidArgument, UnknownDelivery
from shared.ledger.ids import clip_error, delivery_id
from shared.ledger.records import (
    DELIVERY_STATUSES,
    LEASE,
    QUEUED,
    Delivery,
    DeliveryEnd,
    DeliveryLease,
    DeliveryRead,
    Marked,
    delivery_from,
)
from shared.logs import event as log_event
from shared.logs import get_logger

log = get_logger("ledger")


class DeliveryMarks:
    """`Deliveries`' marks and ends; mixed into `Deliveries` (deliveries.py), which
    provides the attributes and methods declared here (`_read`: `DeliveryReads`)."""

    _commits: Commits
    _clock: Clock
    _retention: Any
    collection: Callable[[], Any]
    _read: Callable[[Any, str], DeliveryRead]

    def end_attempt(
        self,
        source: str,
        delivery_id_: str,
        attempt: str | None,
        status: str,
        error: str | None = None,
    ) -> Marked:
        """The worker's mark: applied only while `attempt` holds the lease and the delivery
        is not finished; it ends the lease. `applied` False: left as stored. An unleased
        run (`attempt` None) may mark any unfinished delivery."""
        return self._mark(source, delivery_id_, status, error, attempt=attempt)

    def mark(
        self, source: str, delivery_id_: str, status: str, error: str | None = None
    ) -> Delivery:
        """An operator's (or a test's) mark: set the status, add one attempt, keep `error` as
        `last_error`; a finished status ends the lease. A finished delivery is never moved
        (returned as stored); `reopen` is the way back."""
        return self._mark(source, delivery_id_, status, error).delivery

    def _mark(
        self,
        source: str,
        delivery_id_: str,
        status: str,
        error: str | None = None,
        *,
        attempt: str | None = None,
    ) -> Marked:
        """Set the status, add one attempt, keep `error` as `last_error` when given.

        Never moves a finished delivery: it is returned as stored (`applied` False). With
        `attempt` (a worker's), the mark also needs that attempt to hold the lease, and it
        ends the lease; without one (an operator, a test), a finished status ends it.
        """
        doc_id = delivery_id(source, delivery_id_)
        if status not in DELIVERY_STATUSES:
            raise InvalidArgument(
                f"delivery {doc_id}: status must be one of {sorted(DELIVERY_STATUSES)}, "
                f"got {status!r}"
            )
        if error is not None and not isinstance(error, str):
            raise InvalidArgument(f"delivery {doc_id}: error must be a string")
        ref = self.collection().document(doc_id)

        def once() -> Marked:
            snapshot = self._commits.read(ref, doc_id)
            if not snapshot.exists:
                raise UnknownDelivery(f"delivery {doc_id} was never recorded")
            data = snapshot.to_dict() or {}
            update = self._mark_update(delivery_from(data, doc_id), status, error, attempt)
            if update is None:
                return Marked(False, delivery_from(data, doc_id))
            self._commits.update_if_unchanged(ref, snapshot, update)
            return Marked(True, delivery_from({**data, **update}, doc_id))

        return self._commits.retrying(doc_id, once)

    def stage_end(self, end: DeliveryEnd) -> Staged | None:
        """`end` as a write for another part's commit (`Commits.commit(..., also=)`), on
        condition the delivery is as `end.seen` found it (taken once: the next staging of
        `end` reads it now); None when the mark would be refused (see `end_attempt`) or the
        delivery is unknown: the commit then goes ahead without it and the worker marks."""
        doc_id = delivery_id(end.source, end.delivery_id)
        if end.status not in DELIVERY_STATUSES:
            raise InvalidArgument(
                f"delivery {doc_id}: status must be one of {sorted(DELIVERY_STATUSES)}, "
                f"got {end.status!r}"
            )
        ref = self.collection().document(doc_id)
        seen, end.seen = end.seen, None  # a retry follows a conflict: that read is stale
        if seen is None:
            seen = self._read(ref, doc_id)
        condition = Seen(doc_id, seen.update_time)
        if seen.delivery is None:
            if end.new is None:
                return None
            now = self._clock()
            created = {**end.new, "status": end.status, "attempts": 1, "updated_at": now}
            return Staged(ref, condition, created, create=True)
        update = self._mark_update(seen.delivery, end.status, None, end.attempt)
        return None if update is None else Staged(ref, condition, update)

    def _mark_update(
        self, stored: Delivery, status: str, error: str | None, attempt: str | None
    ) -> dict[str, Any] | None:
        """The fields a mark writes over `stored`; None (logged) when refused."""
        doc_id = stored.doc_id
        held = stored.lease
        refusal = _refusal(stored, attempt)
        if refusal is not None:
            log_event(
                log,
                logging.INFO,
                f"delivery {doc_id} left {stored.status}: {refusal}",
                delivery=doc_id,
                status=stored.status,
                refused=status,
                attempt=attempt,
            )
            return None
        now = self._clock()
        update: dict[str, Any] = {
            "status": status,
            "attempts": stored.attempts + 1,
            "updated_at": now,
            "expire_at": now + self._retention,
        }
        if error is not None:
            update["last_error"] = clip_error(error)
        if held is not None and (attempt is not None or status != QUEUED):
            # The attempt is over: its lease ends now, and its id stays on record.
            update[LEASE] = DeliveryLease(held.attempt, min(held.until, now)).to_dict()
        return update

    def reopen(self, source: str, delivery_id_: str) -> Delivery:
        """Put the delivery back to `queued` for a replay, finished or not; add one attempt.

        The one way back from a finished status, for an operator. A live lease is kept, so
        a replayed run waits (503) for the attempt holding it instead of running beside it.
        """
        doc_id = delivery_id(source, delivery_id_)
        ref = self.collection().document(doc_id)

        def once() -> Delivery:
            snapshot = self._commits.read(ref, doc_id)
            if not snapshot.exists:
                raise UnknownDelivery(f"delivery {doc_id} was never recorded")
            data = snapshot.to_dict() or {}
            now = self._clock()
            update: dict[str, Any] = {
                "status": QUEUED,
                "attempts": int(data.get("attempts", 0)) + 1,
                "updated_at": now,
                "expire_at": now + self._retention,
            }
            self._commits.update_if_unchanged(ref, snapshot, update)
            return delivery_from({**data, **update}, doc_id)

        return self._commits.retrying(doc_id, once)


def _refusal(stored: Delivery, attempt: str | None) -> str | None:
    """Why a mark must leave `stored` as it is; None when it may apply."""
    if stored.finished:
        return f"it is already {stored.status}"
    if attempt is not None and (stored.lease is None or stored.lease.attempt != attempt):
        return f"attempt {attempt} no longer holds its lease"
    return None
