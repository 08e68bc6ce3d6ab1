"""Document ids and input checks: every id the ledger writes stays within Firestore's limits.

- `operations/{opnames.encode(name)}`: reversible, so a listing can show the name;
- `deliveries/{source}:{opnames.encode(delivery_id)}`;
- `submissions/{opnames.encode(tag)}`, or `%sha256-{hex}` when the encoding would not fit
  (`encode` never writes `%s`, so the two forms cannot collide);
- `reconcile_runs/{random hex}-{finished_at}`: random first, never in time order;
- `installations/{id}`: GitHub's installation id in decimal.

The ids minted here are never sequential: ids in increasing order concentrate writes on one
key range, a hotspot (https://cloud.google.com/firestore/docs/best-practices#document_ids).
Operation and delivery ids keep the sender's id (reversibly), so they follow its order; so
do installation ids, written a few times per installation in its lifetime (nowhere near a
hotspot), and kept readable so an operator finds `installations/957387` by the id GitHub shows.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from datetime import datetime
from typing import Any

from shared.ledger import opnames as opnames  # the sibling module, not the package
from shared.ledger.errors import InvalidArgument

SOURCE = re.compile(r"[a-z][a-z0-9_-]{0,39}")
MAX_ERROR_CHARS = 4000


def operation_id(name: str) -> str:
    if not isinstance(name, str) or not name or any(part == "" for part in name.split("/")):
        raise InvalidArgument(f"operation name must be non-empty path segments, got {name!r}")
    try:
        return opnames.encode(name)
    except ValueError as exc:
        raise InvalidArgument(str(exc)) from exc


def delivery_id(source: str, delivery_id: str) -> str:
    if not isinstance(source, str) or not SOURCE.fullmatch(source):
        raise InvalidArgument(f"delivery source must match {SOURCE.pattern}, got {source!r}")
    if not isinstance(delivery_id, str) or not delivery_id:
        raise InvalidArgument(f"delivery id from {source} must be a non-empty string")
    try:
        return f"{source}:{opnames.encode(delivery_id)}"
    except ValueError as exc:
        raise InvalidArgument(f"delivery id from {source}: {exc}") from exc


def submission_id(tag: str) -> str:
    """The `submissions` document id of `tag`: readable when it fits, else a hash."""
    if not isinstance(tag, str) or not tag:
        raise InvalidArgument(f"submission tag must be a non-empty string, got {tag!r}")
    try:
        return opnames.encode(tag)
    except ValueError:
        digest = hashlib.sha256(tag.encode("utf-8", errors="surrogatepass")).hexdigest()
        return f"%sha256-{digest}"


def installation_doc_id(installation_id: int) -> str:
    """The `installations` document id of GitHub's installation id (a positive integer)."""
    if (
        not isinstance(installation_id, int)
        or isinstance(installation_id, bool)
        or installation_id <= 0
    ):
        raise InvalidArgument(
            f"installation id must be a positive integer, got {installation_id!r}"
        )
    return str(installation_id)


def run_doc_id(finished_at: datetime) -> str:
    """A `reconcile_runs` document id: 12 random hex digits, then the finish time to read."""
    return f"{uuid.uuid4().hex[:12]}-{finished_at:%Y%m%dT%H%M%S}"


def check_time(value: Any, what: str) -> None:
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise InvalidArgument(f"{what} must be an aware datetime, got {value!r}")


def check_limit(limit: Any) -> None:
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= 1000:
        raise InvalidArgument(f"limit must be an integer in 1..1000, got {limit!r}")


def clip_error(error: str) -> str:
    return error if len(error) <= MAX_ERROR_CHARS else error[:MAX_ERROR_CHARS] + "…"
