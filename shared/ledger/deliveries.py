"""Deliveries: one `deliveries/{source}:{id}` document per webhook delivery (dedupe, replay)."""

from __future__ import annotations

from typing import Any

from google.api_core import exceptions as gexc
from google.cloud import firestore

from shared.clock import Clock
from shared.ledger.commits import Commits
from shared.ledger.errors import (
    ContentionError,
    InvalidArgument,
    StoreUnavailable,
    UnknownDelivery,
)
from shared.ledger.ids import SOURCE, check_limit, clip_error, delivery_id
from shared.ledger.records import (
    DELIVERIES,
    DELIVERY_STATUSES,
    Delivery,
    Recorded,
    delivery_from,
)

# A Firestore document holds 1 MiB; leave room for the rest.
MAX_PAYLOAD_BYTES = 900_000


class Deliveries:
    """The `deliveries` collection."""

    def __init__(self, commits: Commits, clock: Clock, *, retention: Any) -> None:
        self._commits = commits
        self._clock = clock
        self._retention = retention

    def collection(self) -> Any:
        return self._commits.collection(DELIVERIES)

    def record(
        self,
        source: str,
        delivery_id_: str,
        event: str,
        payload: Any = None,
        payload_ref: str | None = None,
    ) -> Recorded:
        """Create the delivery as `queued` if absent; a redelivery returns the stored one."""
        doc_id = delivery_id(source, delivery_id_)
        if not isinstance(event, str) or not event:
            raise InvalidArgument(f"delivery {doc_id}: event must be a non-empty string")
        if isinstance(payload, str | bytes) and len(payload) > MAX_PAYLOAD_BYTES:
            raise InvalidArgument(
                f"delivery {doc_id}: payload of {len(payload)} bytes is too large for a "
                "document; store it elsewhere and pass payload_ref"
            )
        now = self._clock()
        data = {
            "source": source,
            "delivery_id": delivery_id_,
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
        try:
            self.collection().document(doc_id).create(data, timeout=self._commits.timeout_s)
        except gexc.AlreadyExists:
            existing = self.get(source, delivery_id_)
            if existing is None:  # expired by TTL between create and read
                raise ContentionError(f"delivery {doc_id} vanished while recording") from None
            return Recorded(False, existing)
        except gexc.GoogleAPIError as exc:
            raise StoreUnavailable(f"delivery {doc_id}: record failed: {exc}") from exc
        return Recorded(True, delivery_from(data, doc_id))

    def mark(
        self, source: str, delivery_id_: str, status: str, error: str | None = None
    ) -> Delivery:
        """Set the status, add one attempt, keep `error` as `last_error` when given."""
        doc_id = delivery_id(source, delivery_id_)
        if status not in DELIVERY_STATUSES:
            raise InvalidArgument(
                f"delivery {doc_id}: status must be one of {sorted(DELIVERY_STATUSES)}, "
                f"got {status!r}"
            )
        if error is not None and not isinstance(error, str):
            raise InvalidArgument(f"delivery {doc_id}: error must be a string")
        ref = self.collection().document(doc_id)

        def attempt() -> Delivery:
            snapshot = self._commits.read(ref, doc_id)
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
                update["last_error"] = clip_error(error)
            self._commits.update_if_unchanged(ref, snapshot, update)
            return delivery_from({**data, **update}, doc_id)

        return self._commits.retrying(doc_id, attempt)

    def get(self, source: str, delivery_id_: str) -> Delivery | None:
        doc_id = delivery_id(source, delivery_id_)
        snapshot = self._commits.read(self.collection().document(doc_id), doc_id)
        return delivery_from(snapshot.to_dict() or {}, doc_id) if snapshot.exists else None

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
