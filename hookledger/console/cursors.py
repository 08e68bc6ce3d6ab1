"""Opaque page cursors for URLs: (time, document id) of a page's last row, base64url JSON."""

from __future__ import annotations

import base64
import binascii
import json
from datetime import datetime


class BadCursor(ValueError):
    """A `after=` value that this console did not write."""


def encode(at: datetime, doc_id: str) -> str:
    raw = json.dumps([at.isoformat(), doc_id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode(value: str | None) -> tuple[datetime, str] | None:
    if not value:
        return None
    try:
        raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
        at, doc_id = json.loads(raw)
        parsed = datetime.fromisoformat(at)
    except (binascii.Error, ValueError, TypeError) as exc:
        raise BadCursor(f"not a page cursor: {value[:40]!r}") from exc
    if not isinstance(doc_id, str) or not doc_id or parsed.tzinfo is None:
        raise BadCursor(f"not a page cursor: {value[:40]!r}")
    return parsed, doc_id
