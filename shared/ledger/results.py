"""Write-backs: what a settlement writes besides the operation, in the same transaction.

A write-back never touches Firestore itself: it receives `ResultWrites`, which stages
documents on the settling transaction, so they commit with the status flip or not at all
(docs/architecture.md, "Settlement"). The read side (`Reviews`) serves the CLI and console.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from google.cloud import firestore

from shared.ledger.commits import Commits
from shared.ledger.errors import InvalidArgument
from shared.ledger.ids import check_limit, review_doc_id
from shared.ledger.records import REVIEWS, Operation

# Fields a review document always carries, set by the ledger, never by the caller.
REVIEW_KEYS = frozenset({"repo", "sha", "path", "operation"})
# Below Firestore's 1 MiB document limit, with room for the field names and overhead.
MAX_REVIEW_BYTES = 1_000_000


class ResultWrites:
    """Stages result documents on one settlement's transaction.

    Called again on each retry, so a write-back must have no effect outside it. Result
    documents go through named methods (`put_review`), so only the ledger names
    collections; `transaction` is the raw transaction, for tests and benchmarks.
    """

    def __init__(self, transaction: Any, client: Any, record: Operation) -> None:
        self.transaction = transaction
        self._client = client
        self._record = record

    def put_review(
        self, repo: str, sha: str, path: str, fields: Mapping[str, Any], *, replace: bool = True
    ) -> str:
        """Stage the `reviews` document of (repo, sha, path); returns its id.

        The document holds `repo`, `sha`, `path`, `operation` (this settlement's) and
        `fields`, replacing any earlier one; with `replace=False` it is created, so the
        commit fails if it exists (a benchmark's proof that a write-back ran once). Input
        Firestore would refuse (not a str-keyed mapping, a reserved key, text that is not
        UTF-8, over `MAX_REVIEW_BYTES`) raises InvalidArgument and stages nothing, so a
        write-back can record that file's error instead of failing the whole commit.
        """
        subject = f"review {repo}@{sha}:{path!r}"
        try:
            doc_id = review_doc_id(repo, sha, path)
        except UnicodeEncodeError as exc:
            raise InvalidArgument(f"{subject}: not valid UTF-8: {exc}") from exc
        if not isinstance(fields, Mapping) or not all(isinstance(k, str) for k in fields):
            raise InvalidArgument(f"{subject}: fields must be a str-keyed mapping")
        clash = REVIEW_KEYS.intersection(fields)
        if clash:
            raise InvalidArgument(f"{subject}: fields may not set {sorted(clash)}")
        doc = {"repo": repo, "sha": sha, "path": path, "operation": self._record.name, **fields}
        size = _approx_bytes(doc)
        if size > MAX_REVIEW_BYTES:
            raise InvalidArgument(f"{subject}: {size} bytes, over {MAX_REVIEW_BYTES}")
        try:
            ref = self._client.collection(REVIEWS).document(doc_id)
            if replace:
                self.transaction.set(ref, doc)
            else:
                self.transaction.create(ref, doc)
        except (TypeError, ValueError) as exc:  # the client could not encode a value
            raise InvalidArgument(f"{subject}: Firestore cannot store these fields: {exc}") from exc
        return doc_id


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


class ReviewWrites(Protocol):
    """What a write-back may call on the writes it is given (`ResultWrites` in Firestore)."""

    def put_review(
        self, repo: str, sha: str, path: str, fields: Mapping[str, Any], *, replace: bool = True
    ) -> str: ...


Writeback = Callable[[ReviewWrites, Operation], None]
"""`writeback(writes, record)`: stage result documents through `writes` (reads first, if any).

Called again on each retry, so it must not have effects outside `writes`."""


class Reviews:
    """Read-only access to `reviews` documents."""

    def __init__(self, commits: Commits) -> None:
        self._commits = commits

    def get_review(self, repo: str, sha: str, path: str) -> dict[str, Any] | None:
        """The stored review of `path` at `sha` in `repo`, or None."""
        doc_id = review_doc_id(repo, sha, path)
        ref = self._commits.collection(REVIEWS).document(doc_id)
        snapshot = self._commits.read(ref, f"review {repo}@{sha}:{path}")
        return (snapshot.to_dict() or {}) if snapshot.exists else None

    def reviews_for(self, operation_name: str, limit: int = 1000) -> list[dict[str, Any]]:
        """Up to `limit` reviews written by the settlement of `operation_name`, by path."""
        if not isinstance(operation_name, str) or not operation_name:
            raise InvalidArgument(f"operation name must be a non-empty string: {operation_name!r}")
        check_limit(limit)
        query = (
            self._commits.collection(REVIEWS)
            .where(filter=firestore.FieldFilter("operation", "==", operation_name))
            .limit(limit)
        )
        found = [s.to_dict() or {} for s in self._commits.stream(query, "reviews_for")]
        return sorted(found, key=lambda doc: str(doc.get("path", "")))

    def reviews_for_push(self, repo: str, sha: str, limit: int = 1000) -> list[dict[str, Any]]:
        """Up to `limit` reviews of the push `repo@sha`, by path (equality filters only)."""
        query = self._push(repo, sha)
        check_limit(limit)
        query = query.limit(limit)
        found = [s.to_dict() or {} for s in self._commits.stream(query, "reviews_for_push")]
        return sorted(found, key=lambda doc: str(doc.get("path", "")))

    def count_for_push(self, repo: str, sha: str) -> int:
        """How many reviews the push `repo@sha` has (a server-side count)."""
        return self._commits.count(self._push(repo, sha), "count_reviews_for_push")

    def _push(self, repo: str, sha: str) -> Any:
        if not all(isinstance(v, str) and v for v in (repo, sha)):
            raise InvalidArgument(f"repo and sha must be non-empty strings: {repo!r}, {sha!r}")
        return (
            self._commits.collection(REVIEWS)
            .where(filter=firestore.FieldFilter("repo", "==", repo))
            .where(filter=firestore.FieldFilter("sha", "==", sha))
        )
