"""Read-only listings and counts of operations, for the CLI and a future web console.

Every one is a Firestore query with a limit (a count aggregation for counts), never a
scan; each composite index they need is declared in terraform/firestore_indexes.json.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from google.cloud import firestore

from shared.ledger.commits import Commits
from shared.ledger.errors import InvalidArgument
from shared.ledger.ids import check_limit
from shared.ledger.operations import Operations
from shared.ledger.records import (
    DELIVERIES,
    OPERATION_STATUSES,
    PENDING,
    SETTLED_BY,
    STUCK_ALERTED_AT,
    Operation,
    operation_from_snapshot,
)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_CONTEXT_KEY = re.compile(r"context(\.[A-Za-z_][A-Za-z0-9_]{0,99}){1,5}")


class Queries:
    """Read-only views of the `operations` collection."""

    def __init__(self, commits: Commits, operations: Operations) -> None:
        self._commits = commits
        self._operations = operations

    def count_operations(self, status: str | None = None, kind: str | None = None) -> int:
        """How many operations match (equality filters only), by a count aggregation."""
        return self._commits.count(self._filtered(status, kind, None), "count_operations")

    def oldest_pending(self) -> Operation | None:
        """The pending operation submitted first, or None."""
        query = self._filtered(PENDING, None, None).order_by("submitted_at").limit(1)
        found = self._commits.stream(query, "oldest_pending")
        return operation_from_snapshot(found[0]) if found else None

    def stuck_alerted(self, limit: int = 10) -> list[Operation]:
        """Pending operations with a stuck alert, most recently alerted first."""
        check_limit(limit)
        query = self._stuck().limit(limit)
        return [operation_from_snapshot(s) for s in self._commits.stream(query, "stuck_alerted")]

    def count_stuck_alerted(self) -> int:
        """How many pending operations carry a stuck alert (a settled one keeps its old one)."""
        return self._commits.count(self._stuck(), "count_stuck_alerted")

    def list_operations(
        self,
        status: str | None = None,
        kind: str | None = None,
        settled_by: str | None = None,
        limit: int = 50,
        start_after: Operation | None = None,
    ) -> list[Operation]:
        """Operations, newest submitted first, one page; `start_after` = last of a page."""
        after = (start_after.submitted_at, start_after.doc_id) if start_after else None
        return self.operations_page(status, kind, settled_by, limit=limit, after=after)

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
        """Like `list_operations`, plus an age filter; `after` = (submitted_at, doc_id).

        The range on `submitted_at` uses the same index as its order, so every filter
        combination is served by the `list_operations` indexes.
        """
        check_limit(limit)
        descending = firestore.Query.DESCENDING
        query = self._filtered(status, kind, settled_by)
        if submitted_since is not None:
            query = query.where(filter=firestore.FieldFilter("submitted_at", ">=", submitted_since))
        query = query.order_by("submitted_at", direction=descending).order_by(
            "__name__",
            direction=descending,  # a total order for the cursor
        )
        if after is not None:
            query = query.start_after(
                {
                    "submitted_at": after[0],
                    "__name__": self._operations.collection().document(after[1]),
                }
            )
        snapshots = self._commits.stream(query.limit(limit), "list_operations")
        return [operation_from_snapshot(s) for s in snapshots]

    def find_operation(self, context_key: str, value: str) -> Operation | None:
        """One operation whose `context_key` (e.g. `context.sha`) equals `value`, or None."""
        if not isinstance(context_key, str) or not _CONTEXT_KEY.fullmatch(context_key):
            raise InvalidArgument(
                f"context key must look like context.<field>, got {context_key!r}"
            )
        query = self._operations.collection().where(
            filter=firestore.FieldFilter(context_key, "==", value)
        )
        found = self._commits.stream(query.limit(1), "find_operation")
        return operation_from_snapshot(found[0]) if found else None

    def stored_fields(self, name: str) -> dict[str, Any] | None:
        """Every stored field of the operation `name` (full name or bare id), raw; or None."""
        ref = self._operations.resolve(name)
        if ref is None:
            return None
        snapshot = self._commits.read(ref, name)
        return (snapshot.to_dict() or {}) if snapshot.exists else None

    def _filtered(self, status: str | None, kind: str | None, settled_by: str | None) -> Any:
        if status is not None and status not in OPERATION_STATUSES:
            raise InvalidArgument(
                f"status must be one of {sorted(OPERATION_STATUSES)}, got {status!r}"
            )
        if settled_by is not None and settled_by not in SETTLED_BY:
            raise InvalidArgument(
                f"settled_by must be one of {sorted(SETTLED_BY)}, got {settled_by!r}"
            )
        if kind is not None and (not isinstance(kind, str) or not kind):
            raise InvalidArgument(f"kind must be a non-empty string, got {kind!r}")
        query: Any = self._operations.collection()
        for field, value in (("status", status), ("kind", kind), ("settled_by", settled_by)):
            if value is not None:
                query = query.where(filter=firestore.FieldFilter(field, "==", value))
        return query

    def _stuck(self) -> Any:
        # Ordered by the inequality field, so counting and listing share one index.
        return (
            self._filtered(PENDING, None, None)
            .where(filter=firestore.FieldFilter(STUCK_ALERTED_AT, ">", _EPOCH))
            .order_by(STUCK_ALERTED_AT, direction=firestore.Query.DESCENDING)
        )


class ConsoleQueries:
    """Bounded reads for the web console (hookledger/console): pages by cursor, counts.

    Added beside `Queries` rather than into it so the console's needs stay in one place;
    each query carries a limit or is a count aggregation, and each composite index it
    needs is declared in terraform/firestore_indexes.json.
    """

    def __init__(self, commits: Commits, operations: Operations) -> None:
        self._commits = commits
        self._operations = operations

    def count_settled(self, by: str, start: datetime, end: datetime) -> int:
        """How many operations were settled by `by` in [start, end), by a count aggregation."""
        if by not in SETTLED_BY:
            raise InvalidArgument(f"settled_by must be one of {sorted(SETTLED_BY)}, got {by!r}")
        query = (
            self._operations.collection()
            .where(filter=firestore.FieldFilter("settled_by", "==", by))
            .where(filter=firestore.FieldFilter("settled_at", ">=", start))
            .where(filter=firestore.FieldFilter("settled_at", "<", end))
            .order_by("settled_at")
        )
        return self._commits.count(query, "count_settled")

    def webhook_deliveries_since(self, source: str, since: datetime, limit: int) -> list[Any]:
        """Raw fields of up to `limit` deliveries from `source` received since `since`.

        Newest first (the `source, received_at DESC` index). Each dict carries
        `received_at`, `updated_at` and `status` for latency figures, and no payload.
        """
        check_limit(limit)
        query = (
            self._commits.collection(DELIVERIES)
            .where(filter=firestore.FieldFilter("source", "==", source))
            .where(filter=firestore.FieldFilter("received_at", ">=", since))
            .order_by("received_at", direction=firestore.Query.DESCENDING)
            .select(["received_at", "updated_at", "status"])
        )
        snapshots = self._commits.stream(query.limit(limit), "webhook_deliveries_since")
        return [s.to_dict() or {} for s in snapshots]
