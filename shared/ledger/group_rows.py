"""A shared batch's result rows, kept per item once its batch has ended.

Gemini keeps a batch's results for 48 h; a group's items settle later than that when the
fan-out lags (an outage, a backlog), and each reading its rows from Gemini would download
every row of the batch per item. So the rows of a group's batch are stored before the
commit that settles it, one document per item (more when an item's rows pass PAGE_BYTES),
and its items settle from their own documents: one read each, never Gemini's.

`group_rows/{hash(operation)}~{item}~{page}`: `operation`, `item`, `page`, `pages` (on
page 0: how many there are), `state`, `ended_at`, `rows` (each `Row`'s fields),
`expire_at` (the ledger's retention). Writes are idempotent (`set` by id), so a store cut
part way is simply done again by the next attempt to settle the batch.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import asdict
from datetime import datetime, timedelta
from typing import Any

from google.api_core import exceptions as gexc

from shared.clock import Clock
from shared.ledger.commits import Commits
from shared.ledger.errors import StoreUnavailable

ROWS = "group_rows"
# One document stays under Firestore's 1 MiB limit with room for its other fields.
PAGE_BYTES = 800_000
# Documents per batched write (Firestore takes 500 writes a commit).
WRITES_PER_BATCH = 400


class StoredItem:
    """One item's stored part of its group's batch: the batch's `state`, `ended_at`, and
    the item's rows as `fields(Row)` mappings (the caller builds its own `Row`s)."""

    def __init__(self, state: str, ended_at: datetime | None, rows: list[dict[str, Any]]):
        self.state = state
        self.ended_at = ended_at
        self.rows = rows


class GroupRows:
    """The `group_rows` collection: see the module docstring."""

    def __init__(self, commits: Commits, clock: Clock, *, retention: timedelta) -> None:
        self._commits = commits
        self._clock = clock
        self._retention = retention

    def store(
        self,
        operation: str,
        state: str,
        ended_at: datetime | None,
        rows_by_item: Mapping[int, Iterable[Any]],
    ) -> int:
        """Store each item's rows (dataclass `Row`s) of the ended batch `operation`, every
        item given a document even with no rows; how many documents were written."""
        expire_at = self._clock() + self._retention
        documents: list[tuple[str, dict[str, Any]]] = []
        for item, rows in sorted(rows_by_item.items()):
            pages = _pages([asdict(row) for row in rows])
            for page, chunk in enumerate(pages):
                data: dict[str, Any] = {
                    "operation": operation,
                    "item": item,
                    "page": page,
                    "state": state,
                    "ended_at": ended_at,
                    "rows": chunk,
                    "expire_at": expire_at,
                }
                if page == 0:
                    data["pages"] = len(pages)
                documents.append((_doc_id(operation, item, page), data))
        try:
            for first in range(0, len(documents), WRITES_PER_BATCH):
                batch = self._commits.client.batch()
                for doc_id, data in documents[first : first + WRITES_PER_BATCH]:
                    batch.set(self._commits.collection(ROWS).document(doc_id), data)
                batch.commit(timeout=self._commits.timeout_s)
        except gexc.GoogleAPIError as exc:
            raise StoreUnavailable(f"{operation}: storing its rows failed: {exc}") from exc
        return len(documents)

    def item(self, operation: str, item: int) -> StoredItem | None:
        """Item `item`'s stored rows of `operation`'s batch; None when none were stored."""
        ref = self._commits.collection(ROWS).document(_doc_id(operation, item, 0))
        first = self._commits.read(ref, f"rows of {operation} item {item}")
        if not first.exists:
            return None
        data = first.to_dict() or {}
        rows = list(data.get("rows") or [])
        for page in range(1, int(data.get("pages") or 1)):
            ref = self._commits.collection(ROWS).document(_doc_id(operation, item, page))
            more = self._commits.read(ref, f"rows of {operation} item {item} page {page}")
            if not more.exists:
                raise StoreUnavailable(f"{operation}: page {page} of item {item}'s rows is missing")
            rows.extend((more.to_dict() or {}).get("rows") or [])
        return StoredItem(str(data.get("state", "")), data.get("ended_at"), rows)


def row_fields(stored: Mapping[str, Any], names: Iterable[str]) -> dict[str, Any]:
    """The stored row's values for the fields `names` (a newer or older `Row` reads what
    it knows)."""
    return {name: stored[name] for name in names if name in stored}


def _pages(rows: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    pages: list[list[dict[str, Any]]] = [[]]
    size = 0
    for row in rows:
        cost = sum(len(str(value).encode("utf-8", "surrogatepass")) for value in row.values())
        if pages[-1] and size + cost > PAGE_BYTES:
            pages.append([])
            size = 0
        pages[-1].append(row)
        size += cost
    return pages


def _doc_id(operation: str, item: int, page: int) -> str:
    digest = hashlib.sha256(operation.encode("utf-8", "surrogatepass")).hexdigest()[:40]
    return f"{digest}~{item}~{page}"


__all__ = ["ROWS", "GroupRows", "StoredItem", "row_fields"]
