"""The review's results: one `reviews/{doc_id(repo, sha, path)}` document per file.

Fields: `repo`, `sha`, `path`, `operation` (set by the ledger: the settlement that wrote
it), and `status` "ok" with `text` (and `findings`) or "error" with `error` (kind.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shared import api

REVIEWS = "reviews"
# Fields a review document always carries, set here, never by the write-back's fields.
REVIEW_KEYS = frozenset({"repo", "sha", "path", "operation"})


def review_doc_id(repo: str, sha: str, path: str) -> str:
    """The `reviews` document id of one file at one commit (sha256 of the three)."""
    for what, value in (("repo", repo), ("sha", sha), ("path", path)):
        if not isinstance(value, str) or not value:
            raise api.PermanentError(f"review {what} must be a non-empty string, got {value!r}")
    try:
        return api.doc_id(repo, sha, path)
    except ValueError as exc:
        raise api.PermanentError(f"review {repo}@{sha}:{path!r}: {exc}") from exc


def put_review(
    writes: Any, repo: str, sha: str, path: str, fields: Mapping[str, Any], *, replace: bool = True
) -> str:
    """Stage the review of (repo, sha, path) on a settlement's writes; returns its id.
    Fields the ledger would refuse raise a `PermanentError` and stage nothing."""
    doc = review_doc_id(repo, sha, path)
    if not isinstance(fields, Mapping):  # the ledger names what is wrong with them
        return str(writes.put(REVIEWS, doc, fields, replace=replace))
    clash = REVIEW_KEYS.intersection(k for k in fields if isinstance(k, str))
    if clash:
        raise api.PermanentError(
            f"review {repo}@{sha}:{path!r}: fields may not set {sorted(clash)}"
        )
    body = {"repo": repo, "sha": sha, "path": path, **fields}
    return str(writes.put(REVIEWS, doc, body, replace=replace))


class Reviews:
    """Reads of the `reviews` collection through any ledger's results."""

    def __init__(self, ledger: Any) -> None:
        self._results = ledger.results

    def get_review(self, repo: str, sha: str, path: str) -> dict[str, Any] | None:
        return self._results.get(REVIEWS, review_doc_id(repo, sha, path))  # type: ignore[no-any-return]

    def reviews_for(self, operation_name: str, limit: int = 1000) -> list[dict[str, Any]]:
        """Up to `limit` reviews written by the settlement of `operation_name`, by path."""
        if not isinstance(operation_name, str) or not operation_name:
            raise api.PermanentError(
                f"operation name must be a non-empty string: {operation_name!r}"
            )
        return self._results.find(REVIEWS, limit, order_by="path", operation=operation_name)  # type: ignore[no-any-return]

    def reviews_for_push(self, repo: str, sha: str, limit: int = 1000) -> list[dict[str, Any]]:
        """Up to `limit` reviews of the push `repo@sha`, by path (equality filters only)."""
        _check_push(repo, sha)
        return self._results.find(REVIEWS, limit, order_by="path", repo=repo, sha=sha)  # type: ignore[no-any-return]

    def count_for_push(self, repo: str, sha: str) -> int:
        _check_push(repo, sha)
        return int(self._results.count(REVIEWS, repo=repo, sha=sha))


def reviews_for_push(ledger: Any, repo: str, sha: str, limit: int = 1000) -> list[dict[str, Any]]:
    return Reviews(ledger).reviews_for_push(repo, sha, limit)


def _check_push(repo: str, sha: str) -> None:
    if not all(isinstance(v, str) and v for v in (repo, sha)):
        raise api.PermanentError(f"repo and sha must be non-empty strings: {repo!r}, {sha!r}")
