"""Reversible, Firestore-safe document ids for operation names and delivery ids.

Operation names contain `/` (`batches/abc`, `models/x/operations/y`), which a Firestore
document id may not. Firestore also rejects the ids `.` and `..`, ids matching `__.*__`,
and ids over 1,500 bytes. `encode` escapes percent-style:

- `%` → `%25` and `/` → `%2F` everywhere (so every `%` in an id starts an escape);
- a leading `.` → `%2E` (so `.` and `..` cannot occur);
- a leading `_` → `%5F` when the name starts with `__` (so `__.*__` cannot occur).

`decode(encode(name)) == name` for every string; `decode` rejects text `encode` cannot
produce. Both raise `ValueError` (with the offending value) on bad input.
"""

from __future__ import annotations

import re

MAX_ID_BYTES = 1500
_ESCAPE = re.compile(r"%[0-9A-F]{2}")
_ESCAPED_ANYWHERE = {"%": "%25", "/": "%2F"}


def encode(name: str) -> str:
    """The document id for `name`; raises ValueError if empty or too long once encoded."""
    if not isinstance(name, str) or name == "":
        raise ValueError(f"a name must be a non-empty string, got {name!r}")
    body = "".join(_ESCAPED_ANYWHERE.get(char, char) for char in name)
    if body.startswith("."):
        body = "%2E" + body[1:]
    elif body.startswith("__"):
        body = "%5F" + body[1:]
    try:
        size = len(body.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise ValueError(f"name {name[:80]!r} is not valid Unicode text") from exc
    if size > MAX_ID_BYTES:
        raise ValueError(
            f"name {name[:80]!r}… encodes to {size} bytes; Firestore ids hold {MAX_ID_BYTES}"
        )
    return body


def decode(doc_id: str) -> str:
    """The name `doc_id` was encoded from; raises ValueError for ids `encode` never makes."""
    if not isinstance(doc_id, str) or doc_id == "":
        raise ValueError(f"a document id must be a non-empty string, got {doc_id!r}")
    pieces: list[str] = []
    position = 0
    while position < len(doc_id):
        char = doc_id[position]
        if char != "%":
            pieces.append(char)
            position += 1
            continue
        escape = doc_id[position : position + 3]
        if not _ESCAPE.fullmatch(escape):
            raise ValueError(f"document id {doc_id!r} has a bad escape at {position}")
        pieces.append(chr(int(escape[1:], 16)))
        position += 3
    name = "".join(pieces)
    if encode(name) != doc_id:
        raise ValueError(f"document id {doc_id!r} is not in canonical form")
    return name


def short_id(name: str) -> str:
    """The last path segment of `name` (`batches/abc` → `abc`), used for bare-id lookups."""
    return name.rsplit("/", 1)[-1]
