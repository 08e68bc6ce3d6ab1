"""Storage for payloads too large to ride inside a Cloud Task (1 MB limit).

A body is stored first under a key derived from its delivery, and the task carries only
the reference. The store lives in its own Firestore database (``CLAIMS_DATABASE``, its name
kept from the claim-check pattern: a deployed database and variable are not renamed), apart
from the ledger, so the public ingress's account can be granted that database and nothing
else (docs/architecture.md, "Data model"). `FirestorePayloadStore` splits it into chunk
documents under ``payloads/{key}/chunks/{n}`` (a Firestore document holds at most 1 MiB)
and writes the parent ``payloads/{key}`` last, as the commit marker; the parent holds the
sha256, size and chunk count, checked on every read. Both carry ``expire_at`` for a TTL
policy (set on the claims database by terraform/firestore.tf).

What callers may rely on:
- ``put(key, data)`` returns a reference that ``get`` accepts; putting the same bytes
  under the same key again is a no-op returning the same reference (redeliveries);
  different bytes under an existing key raise `PayloadConflict`.
- ``get(ref)`` returns exactly the bytes put, or raises.

Exceptions::

    PayloadError
     ├── PayloadNotFound      no payload under that reference (expired, never stored)
     ├── PayloadCorrupt       stored chunks do not add up to the recorded sha256/size
     ├── PayloadConflict      a different payload already holds that key
     └── PayloadUnavailable   storage failed (network, quota): retry later

google.cloud.firestore is imported only inside `FirestorePayloadStore`, so modules that
merely reference this one (the ingress) do not pay for loading it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from datetime import timedelta
from typing import Any, Protocol
from urllib.parse import quote

from google.api_core import exceptions as api_exceptions

from shared.clock import Clock, system_clock
from shared.config import DEFAULTS, FIRESTORE_TIMEOUT_S
from shared.errors import HookledgerError, PermanentError, TransientError

MAX_PAYLOAD_BYTES = 25 * 1024 * 1024
# Below Firestore's 1 MiB document limit, leaving room for the name and other fields.
CHUNK_BYTES = 900 * 1024
# Firestore documents a 10 MiB request limit, but gRPC messages (the emulator's, and a
# client's default receive size) stop at 4 MiB: 4 chunks (3.6 MiB) per write or read.
CHUNKS_PER_BATCH = 4
# Stored bodies live as long as the ledger keeps what they belong to (RETENTION_DAYS).
DEFAULT_TTL = timedelta(days=DEFAULTS.retention_days)
COLLECTION = "payloads"
CHUNKS = "chunks"
# Firestore allows 1,500 bytes per document id; payload keys stay far below (ASCII).
MAX_PAYLOAD_KEY_CHARS = 256
# A percent-encoded delivery id longer than this is shortened and hashed (see payload_key).
READABLE_ID_CHARS = 128
_HASHED_PREFIX_CHARS = 64


class PayloadError(HookledgerError):
    """A stored payload could not be stored or fetched; the message names it."""


class PayloadNotFound(PayloadError, PermanentError):
    pass


class PayloadCorrupt(PayloadError, PermanentError):
    pass


class PayloadConflict(PayloadError, PermanentError):
    pass


class PayloadUnavailable(PayloadError, TransientError):
    pass


class PayloadStore(Protocol):
    """Where large payloads wait for the worker."""

    def put(self, key: str, data: bytes) -> str: ...

    def get(self, ref: str) -> bytes: ...


def payload_key(source: str, delivery_id: str) -> str:
    """The storage key for one delivery's payload: a valid document id for ANY delivery id.

    The same (source, delivery id) always gives the same key (a redelivery finds its
    payload). A short id is kept readable, percent-encoded: ``github:abc-123``. An id whose
    encoding is longer than `READABLE_ID_CHARS` (a 200-character non-ASCII id encodes to
    over 1,000) keeps a readable prefix and ends in ``+`` and the SHA-256 of the whole id, so
    a key never exceeds `MAX_PAYLOAD_KEY_CHARS` ASCII characters. Percent-encoding never
    emits ``+``, so a hashed key cannot equal any readable one.

    Raises `ValueError` only for an empty source or delivery id.
    """
    if not source or not delivery_id:
        raise ValueError("payload_key needs a source and a delivery id")
    # surrogatepass: an id decoded from JSON may hold a lone surrogate; it still gets a key.
    encoded = quote(delivery_id, safe="", errors="surrogatepass")
    if len(encoded) > READABLE_ID_CHARS:
        digest = hashlib.sha256(delivery_id.encode("utf-8", "surrogatepass")).hexdigest()
        encoded = f"{_cut_encoded(encoded, _HASHED_PREFIX_CHARS)}+{digest}"
    return f"{quote(source, safe='')}:{encoded}"


def _cut_encoded(encoded: str, limit: int) -> str:
    """`encoded` cut to at most `limit` characters, never inside a ``%XX`` escape."""
    cut = encoded[:limit]
    escape = cut.rfind("%", max(0, len(cut) - 2))
    return cut[:escape] if escape != -1 else cut


def check_put(key: str, data: bytes) -> str:
    if (
        not key
        or "/" in key
        or len(key.encode("utf-8", "surrogatepass")) > MAX_PAYLOAD_KEY_CHARS
        or key in (".", "..")
        or (key.startswith("__") and key.endswith("__"))
    ):
        raise ValueError(f"payload key {key[:80]!r} is not a valid document id")
    if not isinstance(data, bytes | bytearray):
        raise TypeError("payload data must be bytes")
    if len(data) > MAX_PAYLOAD_BYTES:
        raise ValueError(f"payload {key} exceeds {MAX_PAYLOAD_BYTES} bytes")
    return hashlib.sha256(data).hexdigest()


def _chunks(data: bytes, size: int) -> Iterator[bytes]:
    for start in range(0, len(data), size):
        yield bytes(data[start : start + size])


class FirestorePayloadStore:
    """A `PayloadStore` on Firestore (see the module docstring for the layout)."""

    def __init__(
        self,
        client: Any,
        clock: Clock = system_clock,
        ttl: timedelta = DEFAULT_TTL,
        chunk_bytes: int = CHUNK_BYTES,
    ) -> None:
        if not 1 <= chunk_bytes <= CHUNK_BYTES:
            raise ValueError(f"chunk_bytes must be between 1 and {CHUNK_BYTES}")
        self._client = client
        self._clock = clock
        self._ttl = ttl
        self._chunk_bytes = chunk_bytes

    def _parent(self, key: str) -> Any:
        return self._client.collection(COLLECTION).document(key)

    def put(self, key: str, data: bytes) -> str:
        digest = check_put(key, data)

        parent = self._parent(key)
        try:
            snapshot = parent.get(timeout=FIRESTORE_TIMEOUT_S)
            if snapshot.exists:
                if snapshot.get("sha256") == digest:
                    return key  # the same payload, stored by an earlier delivery attempt
                raise PayloadConflict(f"payload {key} already holds a different body")
            now = self._clock()
            expire_at = now + self._ttl
            pieces = list(_chunks(data, self._chunk_bytes))
            # Chunks first, parent last: a parent that exists always has all its chunks.
            for first in range(0, len(pieces), CHUNKS_PER_BATCH):
                batch = self._client.batch()
                for n in range(first, min(first + CHUNKS_PER_BATCH, len(pieces))):
                    ref = parent.collection(CHUNKS).document(f"{n:05d}")
                    batch.set(ref, {"data": pieces[n], "expire_at": expire_at})
                batch.commit(timeout=FIRESTORE_TIMEOUT_S)
            parent.set(
                {
                    "sha256": digest,
                    "size": len(data),
                    "chunks": len(pieces),
                    "created_at": now,
                    "expire_at": expire_at,
                },
                timeout=FIRESTORE_TIMEOUT_S,
            )
        except (api_exceptions.GoogleAPICallError, api_exceptions.RetryError) as exc:
            raise PayloadUnavailable(
                f"storing payload {key} failed: {exc.__class__.__name__}"
            ) from exc
        return key

    def get(self, ref: str) -> bytes:
        parent = self._parent(ref)
        try:
            snapshot = parent.get(timeout=FIRESTORE_TIMEOUT_S)
            if not snapshot.exists:
                raise PayloadNotFound(f"no payload under {ref}")
            meta = snapshot.to_dict() or {}
            count = meta.get("chunks")
            if not isinstance(count, int) or count < 0:
                raise PayloadCorrupt(f"payload {ref} has no valid chunk count")
            refs = [parent.collection(CHUNKS).document(f"{n:05d}") for n in range(count)]
            found = {}
            for first in range(0, count, CHUNKS_PER_BATCH):
                group = refs[first : first + CHUNKS_PER_BATCH]
                found.update(
                    {
                        doc.id: doc
                        for doc in self._client.get_all(group, timeout=FIRESTORE_TIMEOUT_S)
                        if doc.exists
                    }
                )
        except (api_exceptions.GoogleAPICallError, api_exceptions.RetryError) as exc:
            raise PayloadUnavailable(
                f"reading payload {ref} failed: {exc.__class__.__name__}"
            ) from exc
        parts = []
        for n in range(count):
            doc = found.get(f"{n:05d}")
            data = doc.get("data") if doc is not None else None
            if not isinstance(data, bytes):
                raise PayloadCorrupt(f"payload {ref} is missing chunk {n}")
            parts.append(data)
        payload = b"".join(parts)
        if len(payload) != meta.get("size") or hashlib.sha256(payload).hexdigest() != meta.get(
            "sha256"
        ):
            raise PayloadCorrupt(f"payload {ref} does not match its recorded sha256")
        return payload
