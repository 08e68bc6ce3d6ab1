"""Standard Webhooks signatures: `v1` HMAC-SHA256 (Gemini project webhooks) and `v1a` Ed25519.

A message carries the headers ``webhook-id``, ``webhook-timestamp`` and
``webhook-signature``; the last holds one or more space-separated ``<version>,<base64>``
entries over ``<id>.<timestamp>.<body>``:

- ``v1``: HMAC-SHA256; secrets are ``whsec_<base64>`` and the decoded bytes are the key
  (at least `MIN_KEY_BYTES` of them);
- ``v1a``: Ed25519 over the same string, as the Standard Webhooks spec defines it: the
  verifier holds the sender's public keys, given as ``whpk_<base64 of the 32 key bytes>``
  in the same list as the ``whsec_`` secrets. An entry names no key, so each entry is
  tried against each public key; at most `MAX_V1A_ENTRIES_TRIED` (2: one rotation)
  entries per request, the rest ignored, so a hostile header costs two verifications
  per key, not sixteen.

Parsing is shared by both: any malformed entry rejects the whole header, and the
timestamp must lie within the tolerance of the injected clock. An entry of a version
the verifier holds no key for is ignored (the spec's rule for unknown versions).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from shared.clock import Clock, system_clock
from shared.signatures._common import (
    DEFAULT_TOLERANCE_S,
    MIN_KEY_BYTES,
    WEBHOOK_ID_HEADER,
    WEBHOOK_SIGNATURE_HEADER,
    WEBHOOK_TIMESTAMP_HEADER,
    _b64decode,
    _check_fresh,
    _check_secrets,
    _check_tolerance,
    _required,
)
from shared.signatures.errors import SecretError, VerificationError

_WHSEC_PREFIX = "whsec_"
_WHPK_PREFIX = "whpk_"
MAX_V1A_ENTRIES_TRIED = 2
_HMAC_VERSION = "v1"
_ED25519_VERSION = "v1a"
_SIGNATURE_LENGTHS = {_HMAC_VERSION: 32, _ED25519_VERSION: 64}
# Bounds that keep a hostile header from costing more than a few microseconds.
_MAX_SIGNATURE_ENTRIES = 16
_MAX_ID_CHARS = 256
_MAX_TIMESTAMP_DIGITS = 12


def _signed_prefix(msg_id: str, timestamp: str) -> bytes:
    return f"{msg_id}.{timestamp}.".encode("ascii")


def _standard_webhook_digest(key: bytes, msg_id: str, timestamp: str, body: bytes) -> bytes:
    """The one computation behind both signing and verifying `v1` signatures."""
    mac = hmac.new(key, _signed_prefix(msg_id, timestamp), hashlib.sha256)
    mac.update(body)
    return mac.digest()


def _ed25519_content(msg_id: str, timestamp: str, body: bytes) -> bytes:
    """The bytes a `v1a` signature covers: the same string as `v1`."""
    return _signed_prefix(msg_id, timestamp) + body


def decode_whsec(secret: str, position: int = 1) -> bytes:
    """The key bytes of a `whsec_<base64>` secret; `SecretError` if unusable."""
    if not isinstance(secret, str) or not secret.startswith(_WHSEC_PREFIX):
        raise SecretError(f"Standard Webhooks secret #{position} must start with whsec_")
    try:
        key = _b64decode(secret[len(_WHSEC_PREFIX) :])
    except ValueError:
        raise SecretError(
            f"Standard Webhooks secret #{position} is not valid base64 after whsec_"
        ) from None
    if len(key) < MIN_KEY_BYTES:
        raise SecretError(
            f"Standard Webhooks secret #{position} decodes to fewer than {MIN_KEY_BYTES} bytes"
        )
    return key


def decode_whpk(public_key: str, position: int = 1) -> Ed25519PublicKey:
    """The Ed25519 key of a `whpk_<base64>` public key; `SecretError` if unusable."""
    try:
        raw = _b64decode(public_key[len(_WHPK_PREFIX) :])
        return Ed25519PublicKey.from_public_bytes(raw)
    except ValueError:
        raise SecretError(
            f"Standard Webhooks public key #{position} is not 32 base64 bytes after whpk_"
        ) from None


def _check_id(msg_id: str) -> str:
    if not msg_id or len(msg_id) > _MAX_ID_CHARS or any(c.isspace() for c in msg_id):
        raise VerificationError("webhook-id is malformed")
    return msg_id


def _check_timestamp_text(text: str) -> str:
    # int() would also accept '+1', ' 1', '1_0' and non-ASCII digits: allow plain digits only.
    if not (text.isascii() and text.isdigit() and len(text) <= _MAX_TIMESTAMP_DIGITS):
        raise VerificationError("webhook-timestamp is not a whole number of seconds")
    return text


def sign_standard_webhook(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """The `webhook-signature` value (`v1,<base64>`) for one message."""
    digest = _standard_webhook_digest(decode_whsec(secret), msg_id, str(int(timestamp)), body)
    return f"{_HMAC_VERSION},{base64.b64encode(digest).decode('ascii')}"


def sign_standard_webhook_ed25519(
    private_key: Ed25519PrivateKey, msg_id: str, timestamp: int, body: bytes
) -> str:
    """The `webhook-signature` value (`v1a,<base64 Ed25519>`) for one message."""
    signature = private_key.sign(_ed25519_content(msg_id, str(int(timestamp)), body))
    return f"{_ED25519_VERSION},{base64.b64encode(signature).decode('ascii')}"


@dataclass(frozen=True)
class _SignatureEntry:
    version: str
    signature: bytes


def _parse_signature_entries(value: str) -> list[_SignatureEntry]:
    """Parse `webhook-signature`; any malformed entry rejects the whole header."""
    parts = value.split()
    if not parts:
        raise VerificationError("webhook-signature is empty")
    if len(parts) > _MAX_SIGNATURE_ENTRIES:
        raise VerificationError("webhook-signature has too many entries")
    entries = []
    for part in parts:
        version, comma, encoded = part.partition(",")
        if not comma or not version or not encoded:
            raise VerificationError("webhook-signature entry is not <version>,<base64>")
        try:
            signature = _b64decode(encoded)
        except ValueError:
            raise VerificationError("webhook-signature entry is not valid base64") from None
        expected_length = _SIGNATURE_LENGTHS.get(version)
        if expected_length is not None and len(signature) != expected_length:
            raise VerificationError(f"webhook-signature {version} entry has the wrong length")
        entries.append(_SignatureEntry(version, signature))
    return entries


@dataclass(frozen=True)
class _StandardHeaders:
    msg_id: str
    timestamp: str
    entries: list[_SignatureEntry]


def _read_standard_headers(
    headers: Mapping[str, str], clock: Clock, tolerance_s: int
) -> _StandardHeaders:
    msg_id = _check_id(_required(headers, WEBHOOK_ID_HEADER))
    timestamp = _check_timestamp_text(_required(headers, WEBHOOK_TIMESTAMP_HEADER))
    entries = _parse_signature_entries(_required(headers, WEBHOOK_SIGNATURE_HEADER))
    _check_fresh(int(timestamp), clock, tolerance_s, "webhook-timestamp")
    return _StandardHeaders(msg_id, timestamp, entries)


class StandardWebhookVerifier:
    """Checks Standard Webhooks signatures: `v1` HMAC-SHA256 (Gemini project webhooks),
    and `v1a` Ed25519 when `whpk_` public keys are configured (module docstring)."""

    def __init__(
        self,
        secrets: Sequence[str],
        tolerance_s: int = DEFAULT_TOLERANCE_S,
        clock: Clock = system_clock,
    ) -> None:
        values = _check_secrets(secrets, "Standard Webhooks secrets")
        keys: list[bytes] = []
        public_keys: list[Ed25519PublicKey] = []
        for position, value in enumerate(values, start=1):
            if value.startswith(_WHPK_PREFIX):
                public_keys.append(decode_whpk(value, position))
            else:
                keys.append(decode_whsec(value, position))
        self._keys = tuple(keys)
        self._public_keys = tuple(public_keys)
        self._signing_secret = next((v for v in values if v.startswith(_WHSEC_PREFIX)), None)
        self._tolerance_s = _check_tolerance(tolerance_s)
        self._clock = clock

    def sign(self, msg_id: str, timestamp: int, body: bytes) -> str:
        """The `webhook-signature` value, signed with the first `whsec_` secret."""
        if self._signing_secret is None:
            raise SecretError("Standard Webhooks: no whsec_ secret to sign with")
        return sign_standard_webhook(self._signing_secret, msg_id, timestamp, body)

    def verify(self, headers: Mapping[str, str], body: bytes) -> str:
        """Return the `webhook-id` if a configured key signed this message within tolerance."""
        parsed = _read_standard_headers(headers, self._clock, self._tolerance_s)
        if not (self._hmac_matches(parsed, body) or self._ed25519_matches(parsed, body)):
            raise VerificationError("no webhook-signature entry matches")
        return parsed.msg_id

    def _hmac_matches(self, parsed: _StandardHeaders, body: bytes) -> bool:
        given = [e.signature for e in parsed.entries if e.version == _HMAC_VERSION]
        if not given:
            return False
        matched = False
        for key in self._keys:
            expected = _standard_webhook_digest(key, parsed.msg_id, parsed.timestamp, body)
            for signature in given:
                matched |= hmac.compare_digest(expected, signature)
        return matched

    def _ed25519_matches(self, parsed: _StandardHeaders, body: bytes) -> bool:
        if not self._public_keys:
            return False
        given = [e.signature for e in parsed.entries if e.version == _ED25519_VERSION]
        content = _ed25519_content(parsed.msg_id, parsed.timestamp, body)
        for signature in given[:MAX_V1A_ENTRIES_TRIED]:
            for key in self._public_keys:
                try:
                    key.verify(signature, content)
                except InvalidSignature:
                    continue
                return True
        return False
