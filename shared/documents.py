"""Names for result documents, light enough for the ingress: ids, the delete mark, and
the collections that are the core's own (docs/architecture.md, "Data model")."""

from __future__ import annotations

import hashlib

# Every collection the core writes: no app may declare or write one of these.
CORE_COLLECTIONS = frozenset(
    {
        "operations",
        "deliveries",
        "submissions",
        "installations",
        "bodies",
        "reconcile_runs",
        "reconcile_state",
        "payloads",
        "traces",
        "batch_groups",
        "group_heads",
        "group_requests",
        "group_members",
        "group_lanes",
        "group_rows",
        "group_alerts",
        "group_queue",
    }
)


class _Delete:
    def __repr__(self) -> str:
        return "DELETE"


# What `Results.update`'s change returns to delete the document.
DELETE = _Delete()


def doc_id(*parts: str) -> str:
    """A document id for any key, whatever its length or characters: the sha256 hex of the
    parts joined by newlines (Firestore ids are limited to 1,500 bytes and some forms).
    ValueError for a part that is not a non-empty string, or not valid UTF-8."""
    for part in parts:
        if not isinstance(part, str) or not part:
            raise ValueError(f"document id parts must be non-empty strings, got {part!r}")
    if not parts:
        raise ValueError("doc_id needs at least one part")
    try:
        return hashlib.sha256("\n".join(parts).encode("utf-8")).hexdigest()
    except UnicodeEncodeError as exc:
        raise ValueError(f"document id parts are not valid UTF-8: {exc}") from exc
