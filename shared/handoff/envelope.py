"""The signed envelope the ingress hands to the worker through Cloud Tasks.

The worker's URL is reachable from outside, so it trusts nothing it did not seal itself:
`EnvelopeSealer.seal` signs an envelope with the first of ``ENVELOPE_KEYS`` and `open`
accepts a signature by any of them (rotation: add the new key first, drop the old one
after the longest retry window).

Wire format (version 2, what `seal` writes): one line of compact ASCII JSON, a newline,
then the body's raw bytes (nothing after the newline for a stored body)::

    {"v": 2, "payload": "<canonical JSON of the fields>", "sig": "<base64url HMAC>"}\n<body>

The HMAC-SHA256 covers the exact bytes of the ``payload`` string (behind a domain tag),
so re-serializing the line (on one line) can never break it. The payload holds `source`, `event`,
`delivery_id`, `received_at`, `sealed_at` (whole Unix seconds), the kept headers, the
stored payload's reference (`payload_ref`; `claim` on the wire, which every worker reads:
null for an inline body) and ``body_sha256``, the SHA-256 of the body;
an envelope the worker hands to one app of several (docs/architecture.md, "Apps") also
names that `app`. `open` recomputes the body's digest, so the body is sealed without
being copied into the signed text: no base64, no JSON escaping, a task ~1/3 smaller, and
a MAC over a few hundred bytes instead of the whole body (bench/ack.py).

Version 1 (sealed before version 2; `open` still accepts it, so tasks queued across a
deploy are delivered): ``{"v": 1, "payload": "...", "sig": "..."}`` alone, the body
inside the payload in base64, the MAC over the payload behind its own domain tag.

Age: `open` rejects envelopes sealed more than `max_age_s` ago (default 7 days, longer
than the queue's retry window must be: keep the Cloud Tasks ``max_retry_duration`` below
it) and envelopes sealed more than `future_skew_s` (default 300 s) in the future.

A large body: a body over `payload_threshold_bytes` (default 512 KiB, i.e. ~683 KiB once in
base64, leaving headroom under Cloud Tasks' 1 MB task limit) is stored in a `PayloadStore`
first, under a key derived from source and delivery id, up to 25 MiB. `resolve_body`
fetches it back and checks the sha256 sealed into the envelope.

Exceptions: `EnvelopeError` (a `shared.signatures.VerificationError`) for anything wrong
with sealed bytes, and nothing else from `open`; `ValueError` from `seal` and `Envelope`
for a caller's mistake (`EnvelopeTooLarge` when a body cannot fit); `shared.handoff.payloads`
errors from `seal`/`resolve_body` when the payload store fails.

This module must stay light: it imports neither google.cloud.firestore nor google.genai.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import orjson

from shared.clock import Clock, system_clock
from shared.errors import PermanentError
from shared.handoff.payloads import (
    MAX_PAYLOAD_BYTES,
    PayloadCorrupt,
    PayloadError,
    PayloadStore,
    payload_key,
)
from shared.signatures import MIN_KEY_BYTES, RequestHeaders, SecretError, VerificationError
from shared.tracing import TRACEPARENT

# "hookledger" is internal (reconcile fan-out pages); the ingress has no route for it.
SOURCES = ("github", "gemini", "hookledger")
VERSION = 2  # what `seal` writes
LEGACY_VERSION = 1  # what `open` still accepts (module docstring)
DEFAULT_MAX_AGE_S = 7 * 24 * 3600
DEFAULT_FUTURE_SKEW_S = 300
DEFAULT_PAYLOAD_THRESHOLD_BYTES = 512 * 1024
# Cloud Tasks allows 1 MB per task; keep room for the URL, headers and OIDC metadata.
MAX_SEALED_BYTES = 1_000_000 - 32 * 1024
_MAX_OPEN_BYTES = 1_048_576
_DOMAIN = b"hookledger-envelope-v1\n"
_DOMAIN_V2 = b"hookledger-envelope-v2\n"

# The only request headers an envelope may carry: never a signature or a credential.
KEPT_HEADERS = frozenset(
    {
        "content-type",
        "user-agent",
        "x-github-event",
        "x-github-delivery",
        "x-github-hook-id",
        "x-github-hook-installation-target-id",
        "x-github-hook-installation-target-type",
        "webhook-id",
        "webhook-timestamp",
    }
)
_KEPT_IN_ORDER = sorted(KEPT_HEADERS)
# `traceparent` is allowed too, but set by the ingress itself, never copied from the
# request: the span that handed the delivery off, whose trace the worker's run continues
# (shared/tracing). Only a traced ingress writes it: untraced, an envelope is as before.
_MAX_HEADER_VALUE = 1024
_MAX_EVENT = 128
_MAX_DELIVERY_ID = 256
# A payload's fields: version 2's, and version 1's with the body among them.
_FIELDS_V2 = frozenset({"v", "source", "event", "delivery_id", "received_at", "sealed_at"})
_FIELDS_V2 |= {"headers", "claim", "body_sha256"}
_FIELDS = _FIELDS_V2 | {"body"}


class EnvelopeError(VerificationError):
    """Sealed bytes are not a valid, current envelope; `reason` is safe to log."""


class EnvelopeTooLarge(PermanentError, ValueError):
    """The body cannot travel in a task and no payload store can take it."""


def select_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The request headers worth keeping, names lower-cased; signatures never pass."""
    kept: dict[str, str] = {}
    # Headers read once answer a name at once: look up the few kept, walk none.
    named = headers.pick(_KEPT_IN_ORDER) if isinstance(headers, RequestHeaders) else headers.items()
    for name, value in named:
        lowered = name.lower()
        if lowered in KEPT_HEADERS and isinstance(value, str) and value:
            kept[lowered] = value[:_MAX_HEADER_VALUE]
    return kept


def _text(value: object, name: str, limit: int) -> str:
    if not isinstance(value, str) or not value or len(value) > limit:
        raise ValueError(f"envelope {name} must be a non-empty string of at most {limit} chars")
    return value


@dataclass(frozen=True)
class Envelope:
    """One verified delivery. Exactly one of `body` and `payload_ref` is set.

    `body_sha256` is set with a `payload_ref` (and checked by `resolve_body`); `sealed_at` is
    set on envelopes returned by `EnvelopeSealer.open`.
    """

    source: str
    event: str
    delivery_id: str
    received_at: datetime
    headers: Mapping[str, str]
    body: bytes | None
    payload_ref: str | None = None
    body_sha256: str | None = None
    sealed_at: datetime | None = field(default=None, compare=False)
    # The one app this envelope is for (the worker's fan-out); None: every app that takes it.
    app: str | None = None

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"envelope source must be one of {SOURCES}, got {self.source!r}")
        _text(self.event, "event", _MAX_EVENT)
        _text(self.delivery_id, "delivery_id", _MAX_DELIVERY_ID)
        if not isinstance(self.received_at, datetime) or self.received_at.tzinfo is None:
            raise ValueError("envelope received_at must be an aware datetime")
        headers = dict(self.headers)
        for name, value in headers.items():
            if name not in KEPT_HEADERS and name != TRACEPARENT:
                raise ValueError(f"envelope may not carry header {name!r}")
            _text(value, f"header {name}", _MAX_HEADER_VALUE)
        object.__setattr__(self, "headers", headers)
        if (self.body is None) == (self.payload_ref is None):
            raise ValueError("envelope needs exactly one of body and payload_ref")
        if self.body is not None and not isinstance(self.body, bytes):
            raise ValueError("envelope body must be bytes")
        if self.payload_ref is not None:
            _text(self.payload_ref, "payload_ref", 1500)
            sha = self.body_sha256
            if not (isinstance(sha, str) and len(sha) == 64 and _is_hex(sha)):
                raise ValueError("an envelope with a stored body needs the body's sha256")
        if self.app is not None:
            _text(self.app, "app", _MAX_EVENT)


def _is_hex(text: str) -> bool:
    return all(c in "0123456789abcdef" for c in text)


def _key_bytes(keys: Sequence[str]) -> tuple[bytes, ...]:
    if isinstance(keys, str) or not keys:
        raise SecretError("ENVELOPE_KEYS: pass a non-empty list of keys")
    result = []
    for position, key in enumerate(keys, start=1):
        if not isinstance(key, str) or len(key.encode("utf-8")) < MIN_KEY_BYTES:
            raise SecretError(
                f"ENVELOPE_KEYS: key #{position} is shorter than {MIN_KEY_BYTES} bytes"
            )
        result.append(key.encode("utf-8"))
    return tuple(result)


def _mac(key: bytes, payload: bytes, domain: bytes = _DOMAIN) -> bytes:
    """The one computation behind both sealing and opening (`domain`: the version's tag)."""
    return hmac.digest(key, domain + payload, "sha256")


def _unb64url(text: str) -> bytes:
    if not text.isascii() or any(c in text for c in "+/="):
        raise ValueError("not base64url")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _canonical(fields: Mapping[str, Any]) -> bytes:
    """The signed text: sorted compact ASCII JSON. orjson's bytes when nothing needed an
    escape (then they are `json`'s), else `json`'s escapes, as the format always had."""
    fast = orjson.dumps(fields, option=orjson.OPT_SORT_KEYS)
    if fast.isascii() and b"\\" not in fast and b"\x7f" not in fast:
        return fast
    return json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode(
        "ascii"
    )


def _json_string(text: bytes) -> bytes:
    """`json.dumps` of printable ASCII `text` (what `_canonical` writes), without decoding it."""
    return b'"' + text.replace(b"\\", b"\\\\").replace(b'"', b'\\"') + b'"'


def _json_or_none(data: bytes) -> Any:
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        return None


class EnvelopeSealer:
    """Seals envelopes for the worker and opens them there. Thread-safe."""

    def __init__(
        self,
        keys: Sequence[str],
        clock: Clock = system_clock,
        max_age_s: int = DEFAULT_MAX_AGE_S,
        future_skew_s: int = DEFAULT_FUTURE_SKEW_S,
        payloads: PayloadStore | None = None,
        payload_threshold_bytes: int = DEFAULT_PAYLOAD_THRESHOLD_BYTES,
    ) -> None:
        self._keys = _key_bytes(keys)
        if max_age_s < 1 or future_skew_s < 0:
            raise ValueError("max_age_s must be positive and future_skew_s not negative")
        if not 1 <= payload_threshold_bytes <= DEFAULT_PAYLOAD_THRESHOLD_BYTES:
            raise ValueError(
                f"payload_threshold_bytes must be between 1 and {DEFAULT_PAYLOAD_THRESHOLD_BYTES}"
            )
        self._clock = clock
        self._max_age_s = max_age_s
        self._future_skew_s = future_skew_s
        self._payloads = payloads
        self._threshold = payload_threshold_bytes

    def seal(
        self, envelope: Envelope, *, store_as: str | None = None, body_sha256: str | None = None
    ) -> bytes:
        """Compact signed bytes for `envelope`, storing a large body first (stored
        under its delivery id, or `store_as` when another body may hold that key).
        `body_sha256`: the body's hex SHA-256 when the caller has it (sealed as given: a
        wrong one seals an envelope `open` refuses), so the body is hashed once."""
        if envelope.body is not None and len(envelope.body) > self._threshold:
            envelope = self._store(envelope, store_as, body_sha256)
        body = envelope.body
        if body is None:
            digest = envelope.body_sha256
        else:
            digest = body_sha256 or hashlib.sha256(body).hexdigest()
        fields = {
            "v": VERSION,
            "source": envelope.source,
            "event": envelope.event,
            "delivery_id": envelope.delivery_id,
            "received_at": envelope.received_at.astimezone(UTC).isoformat(),
            "sealed_at": int(self._clock().timestamp()),
            "headers": dict(envelope.headers),
            "claim": envelope.payload_ref,
            "body_sha256": digest,
        }
        if envelope.app is not None:  # only then: an envelope for every app is as before
            fields["app"] = envelope.app
        payload = _canonical(fields)
        sealed = b"".join(
            (
                b'{"v":%d,"payload":' % VERSION,
                _json_string(payload),
                b',"sig":"',
                base64.urlsafe_b64encode(_mac(self._keys[0], payload, _DOMAIN_V2)).rstrip(b"="),
                b'"}\n',
                body or b"",
            )
        )
        if len(sealed) > MAX_SEALED_BYTES:
            raise EnvelopeTooLarge(
                f"sealed envelope for delivery {envelope.delivery_id} is {len(sealed)} bytes"
            )
        return sealed

    def _store(
        self, envelope: Envelope, store_as: str | None = None, body_sha256: str | None = None
    ) -> Envelope:
        body = envelope.body or b""
        if len(body) > MAX_PAYLOAD_BYTES:
            raise EnvelopeTooLarge(
                f"body of delivery {envelope.delivery_id} exceeds {MAX_PAYLOAD_BYTES} bytes"
            )
        if self._payloads is None:
            raise EnvelopeTooLarge(
                f"body of delivery {envelope.delivery_id} must be stored apart; no payload store"
            )
        key = payload_key(envelope.source, store_as or envelope.delivery_id)
        ref = self._payloads.put(key, body)
        digest = body_sha256 or hashlib.sha256(body).hexdigest()
        return replace(envelope, body=None, payload_ref=ref, body_sha256=digest)

    def open(self, data: bytes | str) -> Envelope:
        """The envelope sealed in `data`; `EnvelopeError` for anything wrong with it."""
        try:
            return self._open(data)
        except EnvelopeError:
            raise
        except (
            ValueError,
            TypeError,
            KeyError,
            AttributeError,
            RecursionError,
            OverflowError,
        ) as exc:
            # Reached only after the signature verified: our own format is off.
            raise EnvelopeError(f"envelope fields are invalid: {exc.__class__.__name__}") from exc

    def _open(self, data: bytes | str) -> Envelope:
        if isinstance(data, str):
            data = data.encode("utf-8", errors="replace")
        if not isinstance(data, bytes | bytearray):
            raise EnvelopeError("envelope is not bytes")
        if len(data) > _MAX_OPEN_BYTES:
            raise EnvelopeError("envelope is too large")
        # Version 2 is a JSON line, then the body; version 1 is JSON alone (module docstring).
        line, newline, body = bytes(data).partition(b"\n")
        if newline:
            outer = _json_or_none(line)
            if isinstance(outer, dict) and outer.get("v") == VERSION:
                return self._open_v2(outer, body)
        return self._open_v1(data)

    def _open_v2(self, outer: dict[str, Any], body: bytes) -> Envelope:
        """A version 2 envelope: its signed line (`outer`), then the body it must match."""
        fields = self._verified_fields(outer, VERSION, _DOMAIN_V2, _FIELDS_V2)
        sealed_sha = fields["body_sha256"]
        if not isinstance(sealed_sha, str):
            raise EnvelopeError("envelope body_sha256 is not text")
        if fields["claim"] is not None:
            if body:
                raise EnvelopeError("an envelope with a stored body carries a body too")
            return self._envelope(fields, None, sealed_sha)
        if not hmac.compare_digest(hashlib.sha256(body).hexdigest(), sealed_sha):
            raise EnvelopeError("envelope body does not match its sealed sha256")
        return self._envelope(fields, body, None)

    def _open_v1(self, data: bytes | bytearray) -> Envelope:
        """A version 1 envelope (sealed before version 2): the body in the payload."""
        try:
            outer = json.loads(data)
        except (ValueError, RecursionError):
            raise EnvelopeError("envelope is not JSON") from None
        fields = self._verified_fields(outer, LEGACY_VERSION, _DOMAIN, _FIELDS)
        body = fields["body"]
        return self._envelope(
            fields,
            None if body is None else base64.b64decode(body, validate=True),
            fields["body_sha256"],
        )

    def _verified_fields(
        self, outer: object, version: int, domain: bytes, expected: frozenset[str]
    ) -> dict[str, Any]:
        """The signed fields of `outer` (version `version`), current and signed by a key."""
        if not isinstance(outer, dict) or set(outer) != {"v", "payload", "sig"}:
            raise EnvelopeError("envelope does not have the v/payload/sig fields")
        if outer["v"] != version:
            raise EnvelopeError("envelope version is not supported")
        payload_text, sig_text = outer["payload"], outer["sig"]
        if not isinstance(payload_text, str) or not isinstance(sig_text, str):
            raise EnvelopeError("envelope payload and sig must be strings")
        try:
            given = _unb64url(sig_text)
        except ValueError:
            raise EnvelopeError("envelope sig is not base64url") from None
        payload = payload_text.encode("utf-8", errors="surrogatepass")
        matched = False
        for key in self._keys:
            matched |= hmac.compare_digest(_mac(key, payload, domain), given)
        if not matched:
            raise EnvelopeError("envelope signature does not match any key")
        fields = json.loads(payload)
        if not isinstance(fields, dict) or set(fields) - {"app"} != expected:
            raise EnvelopeError("envelope payload fields are wrong")
        if fields["v"] != version:
            raise EnvelopeError("envelope payload fields are wrong")
        sealed_at = fields["sealed_at"]
        if isinstance(sealed_at, bool) or not isinstance(sealed_at, int):
            raise EnvelopeError("envelope sealed_at is not whole seconds")
        now = self._clock().timestamp()
        if now - sealed_at > self._max_age_s:
            raise EnvelopeError("envelope has expired")
        if sealed_at - now > self._future_skew_s:
            raise EnvelopeError("envelope is sealed in the future")
        return fields

    @staticmethod
    def _envelope(fields: Mapping[str, Any], body: bytes | None, sha: str | None) -> Envelope:
        return Envelope(
            source=fields["source"],
            event=fields["event"],
            delivery_id=fields["delivery_id"],
            received_at=datetime.fromisoformat(fields["received_at"]),
            headers=fields["headers"],
            body=body,
            payload_ref=fields["claim"],
            body_sha256=sha,
            sealed_at=datetime.fromtimestamp(fields["sealed_at"], UTC),
            app=fields.get("app"),
        )


def resolve_body(envelope: Envelope, payloads: PayloadStore | None) -> bytes:
    """The delivery's body: inline, or fetched from `claims` and checked against its sha256.

    Raises `PayloadError` (see `shared.handoff.payloads`) when the payload cannot be fetched or its
    bytes are not the ones sealed.
    """
    if envelope.body is not None:
        return envelope.body
    if payloads is None:
        raise PayloadError(
            f"delivery {envelope.delivery_id} is stored apart and no payload store is set"
        )
    assert envelope.payload_ref is not None  # guaranteed by Envelope
    data = payloads.get(envelope.payload_ref)
    if hashlib.sha256(data).hexdigest() != envelope.body_sha256:
        raise PayloadCorrupt(
            f"payload {envelope.payload_ref} of delivery {envelope.delivery_id} "
            "is not the sealed body"
        )
    return data
