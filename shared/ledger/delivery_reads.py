"""Reading a delivery: one by its id (with the version read), by a bare id, a page of a
listing, a count. The `DeliveryReads` mixin gives `Deliveries` (deliveries.py) these methods.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from google.cloud import firestore

from shared.ledger.commits import Commits
from shared.ledger.errors import InvalidArgument
from shared.ledger.ids import SOURCE, check_limit, delivery_id
from shared.ledger.records import (
    DELIVERY_STATUSES,
    Delivery,
    DeliveryRead,
    delivery_from,
)


class DeliveryReads:
    """`Deliveries`' reads; mixed into `Deliveries` (deliveries.py), which provides the
    attributes and methods declared here."""

    _commits: Commits
    collection: Callable[[], Any]

    def get(self, source: str, delivery_id_: str) -> Delivery | None:
        return self.read(source, delivery_id_).delivery

    def read(self, source: str, delivery_id_: str) -> DeliveryRead:
        """The delivery and the version read, for a later write conditional on this very
        read (`DeliveryEnd.seen`): the worker's dedupe read serves its done mark too."""
        doc_id = delivery_id(source, delivery_id_)
        return self._read(self.collection().document(doc_id), doc_id)

    def ref(self, source: str, delivery_id_: str) -> Any:
        """The delivery's document, to read with others in one call (`read_of`)."""
        return self.collection().document(delivery_id(source, delivery_id_))

    def _read(self, ref: Any, doc_id: str) -> DeliveryRead:
        return self.read_of(self._commits.read(ref, doc_id))

    @staticmethod
    def read_of(snapshot: Any) -> DeliveryRead:
        """A delivery's document as read (`DeliveryEnd.seen`)."""
        if not snapshot.exists:
            return DeliveryRead(None)
        data = snapshot.to_dict() or {}
        return DeliveryRead(delivery_from(data, snapshot.id), snapshot.update_time)

    def listing(
        self,
        status: str | None = None,
        limit: int = 50,
        *,
        source: str | None = None,
        event: str | None = None,
        start_after: Delivery | None = None,
    ) -> list[Delivery]:
        """Deliveries, newest first, filtered by any of status, source and event; one page.

        Pass the last delivery of a page as `start_after` to get the next page.
        """
        check_limit(limit)
        if status is not None and status not in DELIVERY_STATUSES:
            raise InvalidArgument(
                f"status must be one of {sorted(DELIVERY_STATUSES)}, got {status!r}"
            )
        if source is not None and not (isinstance(source, str) and SOURCE.fullmatch(source)):
            raise InvalidArgument(f"delivery source must match {SOURCE.pattern}, got {source!r}")
        if event is not None and (not isinstance(event, str) or not event):
            raise InvalidArgument(f"event must be a non-empty string, got {event!r}")
        query: Any = self.collection()
        for name, value in (("status", status), ("source", source), ("event", event)):
            if value is not None:
                query = query.where(filter=firestore.FieldFilter(name, "==", value))
        descending = firestore.Query.DESCENDING
        query = query.order_by("received_at", direction=descending).order_by(
            "__name__", direction=descending
        )
        if start_after is not None:
            query = query.start_after(
                {
                    "received_at": start_after.received_at,
                    "__name__": self.collection().document(start_after.doc_id),
                }
            )
        snapshots = self._commits.stream(query.limit(limit), "list_deliveries")
        return [delivery_from(s.to_dict() or {}, s.id) for s in snapshots]

    def find(self, delivery_id_: str, limit: int = 2) -> list[Delivery]:
        """Deliveries with this id from any source (at most `limit`), to resolve a bare id."""
        if not isinstance(delivery_id_, str) or not delivery_id_:
            raise InvalidArgument(f"delivery id must be a non-empty string, got {delivery_id_!r}")
        check_limit(limit)
        query = self.collection().where(
            filter=firestore.FieldFilter("delivery_id", "==", delivery_id_)
        )
        snapshots = self._commits.stream(query.limit(limit), "find_deliveries")
        return [delivery_from(s.to_dict() or {}, s.id) for s in snapshots]

    def count(self, status: str | None = None) -> int:
        """How many deliveries (with `status`), by a count aggregation."""
        query: Any = self.collection()
        if status is not None:
            if status not in DELIVERY_STATUSES:
                raise InvalidArgument(
                    f"status must be one of {sorted(DELIVERY_STATUSES)}, got {status!r}"
                )
            query = query.where(filter=firestore.FieldFilter("status", "==", status))
        return self._commits.count(query, "count_deliveries")
