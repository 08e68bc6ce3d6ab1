"""Results: the documents apps write into the collections they declared.

Two ways in, both checked (a collection must be an app's, never one of the ledger's own;
an id must be a valid Firestore id; fields must be storable):
- a settlement's write-back receives `ResultWrites`, which stages documents on the
  settling transaction, so they commit with the status flip or not at all
  (docs/architecture.md, "Settlement");
- a handler uses `Results` (`get`, `find`, `count`, and `update`: a read-modify-write in
  one transaction, retried on contention), for results that need no Gemini job.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any, Protocol

from google.cloud import firestore

from shared.documents import CORE_COLLECTIONS, DELETE, doc_id
from shared.ledger.commits import Commits
from shared.ledger.errors import InvalidArgument
from shared.ledger.ids import check_limit
from shared.ledger.records import Operation

__all__ = ["DELETE", "ResultWrites", "Results", "Writeback", "Writes", "doc_id"]

# Below Firestore's 1 MiB document limit, with room for the field names and overhead.
MAX_RESULT_BYTES = 1_000_000
# The field every written-back document carries: the operation whose settlement wrote it.
OPERATION_FIELD = "operation"


def check_target(collection: str, document: str, allowed: Collection[str] | None) -> str:
    """The subject of a write to `collection/document` for messages; InvalidArgument when
    the collection is the ledger's, not in `allowed`, or the id is unusable."""
    if not isinstance(collection, str) or not collection or "/" in collection:
        raise InvalidArgument(f"collection must be a name, got {collection!r}")
    if collection in CORE_COLLECTIONS:
        raise InvalidArgument(f"collection {collection!r} is the ledger's own")
    if allowed is not None and collection not in allowed:
        raise InvalidArgument(
            f"collection {collection!r} is not one this app declared ({sorted(allowed)})"
        )
    if (
        not isinstance(document, str)
        or not document
        or "/" in document
        or document in (".", "..")
        or len(document.encode("utf-8", errors="surrogatepass")) > 1500
        or (document.startswith("__") and document.endswith("__"))
    ):
        raise InvalidArgument(f"{collection}: {document!r} is not a usable document id")
    return f"{collection}/{document}"


def check_fields(subject: str, fields: Any, reserved: Collection[str] = ()) -> dict[str, Any]:
    if not isinstance(fields, Mapping) or not all(isinstance(k, str) for k in fields):
        raise InvalidArgument(f"{subject}: fields must be a str-keyed mapping")
    clash = set(reserved).intersection(fields)
    if clash:
        raise InvalidArgument(f"{subject}: fields may not set {sorted(clash)}")
    size = _approx_bytes(fields)
    if size > MAX_RESULT_BYTES:
        raise InvalidArgument(f"{subject}: {size} bytes, over {MAX_RESULT_BYTES}")
    return dict(fields)


class ResultWrites:
    """Stages result documents on one settlement's transaction.

    Called again on each retry, so a write-back must have no effect outside it. Every
    document gets `operation` (this settlement's name). `allowed`: the collections the
    kind's app declared (None: any app collection, for tests and benchmarks);
    `transaction` is the raw transaction, for tests and benchmarks.
    """

    def __init__(
        self,
        transaction: Any,
        client: Any,
        record: Operation,
        allowed: Collection[str] | None = None,
    ) -> None:
        self.transaction = transaction
        self._client = client
        self._record = record
        self._allowed = allowed

    def scoped(self, allowed: Collection[str]) -> ResultWrites:
        """These writes, limited to `allowed` (an app's collections)."""
        return ResultWrites(self.transaction, self._client, self._record, frozenset(allowed))

    def put(
        self, collection: str, document: str, fields: Mapping[str, Any], *, replace: bool = True
    ) -> str:
        """Stage `collection/document` holding `fields` and `operation`; returns the id.

        With `replace=False` it is created, so the commit fails if it exists (a benchmark's
        proof that a write-back ran once). Input Firestore would refuse (not a str-keyed
        mapping, `operation` set, text that is not UTF-8, over `MAX_RESULT_BYTES`, a
        collection not the app's) raises InvalidArgument and stages nothing, so a write-back
        can record that item's error instead of failing the whole commit.
        """
        subject = check_target(collection, document, self._allowed)
        doc = check_fields(subject, fields, (OPERATION_FIELD,))
        doc[OPERATION_FIELD] = self._record.name
        try:
            ref = self._client.collection(collection).document(document)
            if replace:
                self.transaction.set(ref, doc)
            else:
                self.transaction.create(ref, doc)
        except (TypeError, ValueError) as exc:  # the client could not encode a value
            raise InvalidArgument(f"{subject}: Firestore cannot store these fields: {exc}") from exc
        return document


class RecordedWrites:
    """What a write-back staged, recorded, so a write-back too large for one commit can be
    committed in pages (ledger/settling.py)."""

    def __init__(self) -> None:
        self.writes: list[tuple[str, Any, dict[str, Any]]] = []

    def set(self, ref: Any, doc: dict[str, Any]) -> None:
        self.writes.append(("set", ref, doc))

    def create(self, ref: Any, doc: dict[str, Any]) -> None:
        self.writes.append(("create", ref, doc))

    def pages(self, most: int, most_bytes: int) -> list[list[tuple[str, Any, dict[str, Any]]]]:
        """The writes in order, in pages of at most `most` writes and about `most_bytes`."""
        pages: list[list[tuple[str, Any, dict[str, Any]]]] = [[]]
        size = 0
        for write in self.writes:
            cost = _approx_bytes(write[2])
            if pages[-1] and (len(pages[-1]) >= most or size + cost > most_bytes):
                pages.append([])
                size = 0
            pages[-1].append(write)
            size += cost
        return pages

    @staticmethod
    def write(transaction: Any, page: Any) -> None:
        """Stage `page` on a real transaction (a page written again sets, never creates)."""
        for _, ref, doc in page:
            transaction.set(ref, doc)

    def replay(self, writes: Any, page: Any) -> None:
        """Stage `page` through a settlement's `ResultWrites` (its raw transaction)."""
        self.write(writes.transaction, page)


class PagingTransaction:
    """The settle transaction as a write-back sees it: writes go to it while they fit one
    page, and are all recorded; past the page, `overflowed`, and the settle writes them in
    pages instead (ledger/settling.py). Reads and anything else go to the transaction."""

    def __init__(self, transaction: Any, most: int, most_bytes: int) -> None:
        self._transaction = transaction
        self._most, self._most_bytes = most, most_bytes
        self._bytes = 0
        self.recorded = RecordedWrites()
        self.overflowed = False

    def set(self, ref: Any, doc: dict[str, Any]) -> None:
        self._write("set", ref, doc)

    def create(self, ref: Any, doc: dict[str, Any]) -> None:
        self._write("create", ref, doc)

    def _write(self, how: str, ref: Any, doc: dict[str, Any]) -> None:
        self.recorded.writes.append((how, ref, doc))
        self._bytes += _approx_bytes(doc)
        if len(self.recorded.writes) > self._most or self._bytes > self._most_bytes:
            self.overflowed = True
        if not self.overflowed:
            getattr(self._transaction, how)(ref, doc)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transaction, name)


def _approx_bytes(value: Any) -> int:
    """Roughly Firestore's size of `value`: UTF-8 text, 8 bytes a scalar, keys counted."""
    if isinstance(value, str):
        return len(value.encode("utf-8", errors="surrogatepass")) + 1
    if isinstance(value, bytes):
        return len(value)
    if isinstance(value, Mapping):
        return sum(_approx_bytes(str(k)) + _approx_bytes(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return sum(_approx_bytes(v) for v in value)
    return 8


class Writes(Protocol):
    """What a write-back may call on the writes it is given (`ResultWrites` in Firestore)."""

    def put(
        self, collection: str, document: str, fields: Mapping[str, Any], *, replace: bool = True
    ) -> str: ...


Writeback = Callable[[Writes, Operation], None]
"""`writeback(writes, record)`: stage result documents through `writes` (reads first, if any).

Called again on each retry, so it must not have effects outside `writes`."""


class Results:
    """Result documents outside a settlement: reads, and one-document read-modify-writes.

    `allowed`: the collections of the app using it (None: any app collection, for the CLI,
    the console and tests). See `scoped`.
    """

    def __init__(self, commits: Commits, allowed: Collection[str] | None = None) -> None:
        self._commits = commits
        self._allowed = None if allowed is None else frozenset(allowed)

    def scoped(self, allowed: Collection[str]) -> Results:
        return Results(self._commits, allowed)

    def get(self, collection: str, document: str) -> dict[str, Any] | None:
        """The document's fields, or None."""
        subject = check_target(collection, document, None)
        ref = self._commits.collection(collection).document(document)
        snapshot = self._commits.read(ref, subject)
        return (snapshot.to_dict() or {}) if snapshot.exists else None

    def find(
        self, collection: str, limit: int = 1000, order_by: str | None = None, **equals: Any
    ) -> list[dict[str, Any]]:
        """Up to `limit` documents whose fields equal `equals` (equality filters only: no
        composite index needed), sorted by `order_by` in memory when given."""
        query = self._query(collection, equals)
        check_limit(limit)
        found = [
            s.to_dict() or {}
            for s in self._commits.stream(query.limit(limit), f"results {collection}")
        ]
        if order_by is not None:
            found.sort(key=lambda doc: str(doc.get(order_by, "")))
        return found

    def count(self, collection: str, **equals: Any) -> int:
        """How many documents match (a server-side count)."""
        return self._commits.count(self._query(collection, equals), f"results {collection}")

    def update(
        self,
        collection: str,
        document: str,
        change: Callable[[dict[str, Any] | None], Mapping[str, Any] | object | None],
    ) -> dict[str, Any] | None:
        """Read `collection/document`, call `change(stored or None)` and write what it
        returns, in one transaction: `change` returns the new fields (replacing the
        document), `DELETE`, or None to leave it. Retried on contention, so `change` must
        have no other effect. Returns what is stored after."""
        subject = check_target(collection, document, self._allowed)
        ref = self._commits.collection(collection).document(document)

        def once() -> dict[str, Any] | None:
            transaction = self._commits.client.transaction(max_attempts=1)
            return firestore.transactional(in_transaction)(transaction)

        def in_transaction(txn: Any) -> dict[str, Any] | None:
            # Read inside the transaction: Firestore holds it until the commit.
            snapshot = ref.get(transaction=txn, timeout=self._commits.timeout_s)
            stored = (snapshot.to_dict() or {}) if snapshot.exists else None
            wanted = change(None if stored is None else dict(stored))
            if wanted is None:
                return stored
            if wanted is DELETE:
                if stored is not None:
                    txn.delete(ref)
                return None
            fields = check_fields(subject, wanted)
            txn.set(ref, fields)
            return fields

        return self._commits.retrying(subject, once)

    def _query(self, collection: str, equals: Mapping[str, Any]) -> Any:
        check_target(collection, "x", None)
        query = self._commits.collection(collection)
        for name, value in equals.items():
            query = query.where(filter=firestore.FieldFilter(name, "==", value))
        return query
