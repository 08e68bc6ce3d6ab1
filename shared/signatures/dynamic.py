"""Webhook signature verification for GitHub and the Gemini API.

Schemes
-------
- GitHub: ``X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the raw body>``.
- Standard Webhooks (Gemini project webhooks): headers ``webhook-id``,
  ``webhook-timestamp`` and ``webhook-signature`` holding one or more space-separated
  ``v1,<base64 HMAC-SHA256>`` entries over ``<id>.<timestamp>.<body>``; secrets are
  ``whsec_<base64>`` and the decoded bytes are the key.
- Gemini per-request (dynamic) webhooks: ``v1a,<base64 Ed25519>`` entries over the same
  ``<id>.<timestamp>.<body>`` string, or an RS256 JWT; both checked against public keys
  from a JWKS URL.

What was assumed about dynamic webhooks (no authoritative Google page was found; the
design card and third-party guides, e.g. Hookdeck's, were the sources):
- the JWT arrives either as the whole ``webhook-signature`` value or as
  ``Authorization: Bearer <jwt>``; its header names the signing key by ``kid``;
- it must carry ``exp`` and ``iat``; ``iat`` must lie within the tolerance of now
  (replay window) and ``exp`` must not have passed; ``aud`` and ``iss`` are checked when
  configured (Gemini is said to set ``aud`` to the endpoint URL);
- the JWT is not known to bind the body, so a JWT-only delivery authenticates the sender
  but not the bytes. That is acceptable here only because Gemini bodies are hints: the
  worker re-fetches the operation before settling (docs/architecture.md#why);
- a ``v1a`` entry names no key, so every Ed25519 key in the JWKS is tried.

Secrets and rotation
--------------------
Every verifier takes a list of secrets: the first signs, every one verifies. Secrets are
checked when the verifier is built; a bad one raises `SecretError` then, never on a
request. The minimum is `MIN_KEY_BYTES` (16) bytes of key material: the UTF-8 bytes of a
GitHub secret or the decoded bytes of a ``whsec_`` secret.

Headers
-------
``headers`` may be any mapping of header names to values (a dict, werkzeug's
``EnvironHeaders``…); names are matched case-insensitively, as HTTP requires. A name that
appears twice (in two spellings, or repeated) is rejected rather than guessed at.

Exceptions
----------
::

    ValueError
     └── SecretError            a secret or key is unusable (raised at construction)
    Exception
     └── VerificationError      the request is not authentic; `.reason` is safe to log
          └── KeysUnavailable   the JWKS could not be fetched: retry later (answer 503)

``verify`` raises nothing but `VerificationError` (or its subclass): every malformed
header, bad base64, unknown version, stale timestamp or mismatch ends there, and the
reason never contains a signature or a secret. (`shared.envelope.EnvelopeError` is the
same class's subclass for the worker's envelopes.)
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import math
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.rsa import (
    RSAPrivateKey,
    RSAPublicKey,
    RSAPublicNumbers,
)

from shared.clock import Clock, system_clock
from shared.errors import PermanentError, TransientError

MIN_KEY_BYTES = 16
DEFAULT_TOLERANCE_S = 300

GITHUB_SIGNATURE_HEADER = "x-hub-signature-256"
WEBHOOK_ID_HEADER = "webhook-id"
WEBHOOK_TIMESTAMP_HEADER = "webhook-timestamp"
WEBHOOK_SIGNATURE_HEADER = "webhook-signature"
AUTHORIZATION_HEADER = "authorization"

_WHSEC_PREFIX = "whsec_"
_HMAC_VERSION = "v1"
_ED25519_VERSION = "v1a"
_SIGNATURE_LENGTHS = {_HMAC_VERSION: 32, _ED25519_VERSION: 64}
# Bounds that keep a hostile header from costing more than a few microseconds.
_MAX_SIGNATURE_ENTRIES = 16
_MAX_HEADER_CHARS = 8192
_MAX_ID_CHARS = 256
_MAX_TIMESTAMP_DIGITS = 12
_MAX_ED25519_KEYS_TRIED = 8
_MIN_RSA_BITS = 2048


class SecretError(PermanentError, ValueError):
    """A configured secret or key is unusable; the message says which (by position)."""


class VerificationError(PermanentError):
    """A request failed verification. `reason` is short and safe to log."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class KeysUnavailable(VerificationError, TransientError):
    """The public keys could not be fetched; the sender should retry (answer 503)."""

    retryable = True  # our fetch failed, not the sender's signature


# ---------------------------------------------------------------------------- helpers


def header(headers: Mapping[str, str], name: str) -> str | None:
    """The value of header `name` (case-insensitive), or None when absent.

    Raises `VerificationError` when the header appears more than once or its value is
    not a printable-ASCII string of reasonable length.
    """
    wanted = name.lower()
    found: list[object] = []
    for key, value in headers.items():
        if isinstance(key, str) and key.lower() == wanted:
            found.append(value)
    if not found:
        return None
    if len(found) > 1:
        raise VerificationError(f"header {name} appears more than once")
    text = found[0]
    if not isinstance(text, str):
        raise VerificationError(f"header {name} is not text")
    if len(text) > _MAX_HEADER_CHARS:
        raise VerificationError(f"header {name} is too long")
    if not text.isascii() or not text.isprintable():
        raise VerificationError(f"header {name} is not printable ASCII")
    return text


def _required(headers: Mapping[str, str], name: str) -> str:
    value = header(headers, name)
    if value is None or not value.strip():
        raise VerificationError(f"missing header {name}")
    return value


def _b64decode(text: str, *, urlsafe: bool = False) -> bytes:
    """Strict base64 (standard or URL alphabet, padding optional); ValueError if invalid."""
    if not text.isascii():
        raise ValueError("not ASCII")
    padded = text + "=" * (-len(text) % 4)
    try:
        if urlsafe:
            if any(c in padded for c in "+/"):
                raise ValueError("wrong alphabet")
            return base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
        return base64.b64decode(padded, validate=True)
    except binascii.Error as exc:
        raise ValueError("invalid base64") from exc


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _check_secrets(secrets: Sequence[str] | str, what: str) -> tuple[str, ...]:
    if isinstance(secrets, str):
        raise SecretError(f"{what}: pass a list of secrets, not one string")
    values = tuple(secrets)
    if not values:
        raise SecretError(f"{what}: at least one secret is required")
    for position, secret in enumerate(values, start=1):
        if not isinstance(secret, str) or not secret:
            raise SecretError(f"{what}: secret #{position} is empty")
        if secret != secret.strip():
            raise SecretError(f"{what}: secret #{position} has surrounding whitespace")
    return values


# ----------------------------------------------------------------------------- GitHub


def _github_digest(key: bytes, body: bytes) -> bytes:
    """The one computation behind both signing and verifying GitHub deliveries."""
    return hmac.new(key, body, hashlib.sha256).digest()


def _github_key(secret: str, position: int = 1) -> bytes:
    key = secret.encode("utf-8")
    if len(key) < MIN_KEY_BYTES:
        raise SecretError(f"GitHub secret #{position} is shorter than {MIN_KEY_BYTES} bytes")
    return key


def sign_github(secret: str, body: bytes) -> str:
    """The `X-Hub-Signature-256` value GitHub sends for `body` signed with `secret`."""
    return "sha256=" + _github_digest(_github_key(secret), body).hex()


class GitHubVerifier:
    """Checks `X-Hub-Signature-256` against every configured secret (rotation)."""

    def __init__(self, secrets: Sequence[str]) -> None:
        values = _check_secrets(secrets, "GitHub webhook secrets")
        self._keys = tuple(_github_key(s, i) for i, s in enumerate(values, start=1))
        self._signing_secret = values[0]

    def sign(self, body: bytes) -> str:
        """The header value for `body`, signed with the first secret."""
        return sign_github(self._signing_secret, body)

    def verify(self, headers: Mapping[str, str], body: bytes) -> None:
        """Return if some secret signed `body`; raise `VerificationError` otherwise."""
        value = _required(headers, GITHUB_SIGNATURE_HEADER)
        scheme, sep, hex_digest = value.partition("=")
        if not sep or scheme != "sha256":
            raise VerificationError("signature is not in the sha256=<hex> form")
        if len(hex_digest) != 64:
            raise VerificationError("signature has the wrong length")
        try:
            given = bytes.fromhex(hex_digest)
        except ValueError:
            raise VerificationError("signature is not hexadecimal") from None
        # Compute every candidate so timing does not reveal which secret matched.
        matched = False
        for key in self._keys:
            matched |= hmac.compare_digest(_github_digest(key, body), given)
        if not matched:
            raise VerificationError("signature does not match")


# -------------------------------------------------------------------- Standard Webhooks


def _signed_prefix(msg_id: str, timestamp: str) -> bytes:
    return f"{msg_id}.{timestamp}.".encode("ascii")


def _standard_webhook_digest(key: bytes, msg_id: str, timestamp: str, body: bytes) -> bytes:
    """The one computation behind both signing and verifying `v1` signatures."""
    mac = hmac.new(key, _signed_prefix(msg_id, timestamp), hashlib.sha256)
    mac.update(body)
    return mac.digest()


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


def _check_fresh(seconds: int, clock: Clock, tolerance_s: int, what: str) -> None:
    now = clock().timestamp()
    if seconds < now - tolerance_s:
        raise VerificationError(f"{what} is too old")
    if seconds > now + tolerance_s:
        raise VerificationError(f"{what} is in the future")


def _check_tolerance(tolerance_s: int) -> int:
    if isinstance(tolerance_s, bool) or not isinstance(tolerance_s, int) or tolerance_s < 1:
        raise ValueError(f"tolerance_s must be a positive whole number, got {tolerance_s!r}")
    return tolerance_s


class StandardWebhookVerifier:
    """Checks Standard Webhooks `v1` (HMAC-SHA256) signatures: Gemini project webhooks."""

    def __init__(
        self,
        secrets: Sequence[str],
        tolerance_s: int = DEFAULT_TOLERANCE_S,
        clock: Clock = system_clock,
    ) -> None:
        values = _check_secrets(secrets, "Standard Webhooks secrets")
        self._keys = tuple(decode_whsec(s, i) for i, s in enumerate(values, start=1))
        self._signing_secret = values[0]
        self._tolerance_s = _check_tolerance(tolerance_s)
        self._clock = clock

    def sign(self, msg_id: str, timestamp: int, body: bytes) -> str:
        """The `webhook-signature` value, signed with the first secret."""
        return sign_standard_webhook(self._signing_secret, msg_id, timestamp, body)

    def verify(self, headers: Mapping[str, str], body: bytes) -> str:
        """Return the `webhook-id` if some secret signed this message within tolerance."""
        parsed = _read_standard_headers(headers, self._clock, self._tolerance_s)
        if not self._matches(parsed, body):
            raise VerificationError("no webhook-signature entry matches")
        return parsed.msg_id

    def _matches(self, parsed: _StandardHeaders, body: bytes) -> bool:
        given = [e.signature for e in parsed.entries if e.version == _HMAC_VERSION]
        if not given:
            return False
        matched = False
        for key in self._keys:
            expected = _standard_webhook_digest(key, parsed.msg_id, parsed.timestamp, body)
            for signature in given:
                matched |= hmac.compare_digest(expected, signature)
        return matched


# ------------------------------------------------------------------ Ed25519 (v1a) + JWT


def _ed25519_content(msg_id: str, timestamp: str, body: bytes) -> bytes:
    """The bytes a `v1a` signature covers: the same string as `v1`."""
    return _signed_prefix(msg_id, timestamp) + body


def sign_standard_webhook_ed25519(
    private_key: Ed25519PrivateKey, msg_id: str, timestamp: int, body: bytes
) -> str:
    """The `webhook-signature` value (`v1a,<base64 Ed25519>`) for one message."""
    signature = private_key.sign(_ed25519_content(msg_id, str(int(timestamp)), body))
    return f"{_ED25519_VERSION},{base64.b64encode(signature).decode('ascii')}"


def _jwt_signing_input(header_b64: str, claims_b64: str) -> bytes:
    return f"{header_b64}.{claims_b64}".encode("ascii")


def _rs256_verify(key: RSAPublicKey, signature: bytes, data: bytes) -> bool:
    try:
        key.verify(signature, data, padding.PKCS1v15(), hashes.SHA256())
    except InvalidSignature:
        return False
    return True


def sign_jwt_rs256(private_key: RSAPrivateKey, kid: str, claims: Mapping[str, Any]) -> str:
    """An RS256 JWT over `claims` naming key `kid` (for tests and the local simulator)."""
    head = _b64url(json.dumps({"alg": "RS256", "typ": "JWT", "kid": kid}).encode())
    body = _b64url(json.dumps(dict(claims), separators=(",", ":")).encode())
    data = _jwt_signing_input(head, body)
    signature = private_key.sign(data, padding.PKCS1v15(), hashes.SHA256())
    return f"{head}.{body}.{_b64url(signature)}"


def public_jwk(public_key: RSAPublicKey | Ed25519PublicKey, kid: str) -> dict[str, str]:
    """The JWK form of a public key, as a JWKS document lists it."""
    if isinstance(public_key, Ed25519PublicKey):
        from cryptography.hazmat.primitives import serialization

        raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        return {"kty": "OKP", "crv": "Ed25519", "x": _b64url(raw), "kid": kid, "use": "sig"}
    numbers = public_key.public_numbers()

    def as_b64(n: int) -> str:
        return _b64url(n.to_bytes((n.bit_length() + 7) // 8, "big"))

    return {
        "kty": "RSA",
        "n": as_b64(numbers.n),
        "e": as_b64(numbers.e),
        "kid": kid,
        "alg": "RS256",
        "use": "sig",
    }


# --------------------------------------------------------------------------- JWKS cache

PublicKey = RSAPublicKey | Ed25519PublicKey
Fetch = Callable[[str, float], bytes]
_MAX_JWKS_BYTES = 256 * 1024
_MAX_JWKS_KEYS = 32


def http_fetch(url: str, timeout_s: float) -> bytes:
    """GET `url` with a timeout; the default JWKS transport (requests, imported lazily)."""
    import requests

    response = requests.get(url, timeout=timeout_s)
    response.raise_for_status()
    return response.content[: _MAX_JWKS_BYTES + 1]


def _parse_jwk(jwk: Mapping[str, Any]) -> PublicKey | None:
    """A public key from one JWK, or None for keys we do not use (encryption, other types)."""
    if jwk.get("use") not in (None, "sig"):
        return None
    kty = jwk.get("kty")
    if kty == "RSA" and jwk.get("alg") in (None, "RS256"):
        n = int.from_bytes(_b64decode(str(jwk["n"]), urlsafe=True), "big")
        e = int.from_bytes(_b64decode(str(jwk["e"]), urlsafe=True), "big")
        if n.bit_length() < _MIN_RSA_BITS:
            return None
        return RSAPublicNumbers(e, n).public_key()
    if kty == "OKP" and jwk.get("crv") == "Ed25519":
        return Ed25519PublicKey.from_public_bytes(_b64decode(str(jwk["x"]), urlsafe=True))
    return None


def parse_jwks(document: bytes) -> dict[str, PublicKey]:
    """Signing keys by `kid` from a JWKS document; ValueError if it is not one."""
    if len(document) > _MAX_JWKS_BYTES:
        raise ValueError("JWKS document is too large")
    data = json.loads(document)
    keys = data.get("keys") if isinstance(data, dict) else None
    if not isinstance(keys, list):
        raise ValueError("JWKS document has no 'keys' list")
    parsed: dict[str, PublicKey] = {}
    for jwk in keys[:_MAX_JWKS_KEYS]:
        if not isinstance(jwk, dict) or not isinstance(jwk.get("kid"), str):
            continue
        try:
            key = _parse_jwk(jwk)
        except (KeyError, ValueError, TypeError):
            continue  # one malformed key must not hide the others
        if key is not None:
            parsed[jwk["kid"]] = key
    return parsed


class JwksCache:
    """Public keys from a JWKS URL, fetched with a timeout and kept for at most `ttl_s`.

    A `kid` that is not cached triggers one refetch, but never more often than every
    `min_refetch_interval_s` (failed fetches count too), so unknown key ids sent by an
    attacker cannot make us fetch on every request. When the keys are older than `ttl_s`
    and cannot be refreshed, lookups raise `KeysUnavailable`. Thread-safe.
    """

    def __init__(
        self,
        url: str,
        fetch: Fetch = http_fetch,
        timeout_s: float = 5.0,
        ttl_s: float = 3600.0,
        min_refetch_interval_s: float = 60.0,
        clock: Clock = system_clock,
    ) -> None:
        if not url:
            raise ValueError("JWKS URL is empty")
        if timeout_s <= 0 or ttl_s <= 0 or min_refetch_interval_s < 0:
            raise ValueError("timeout_s and ttl_s must be positive, min_refetch_interval_s >= 0")
        self.url = url
        self._fetch = fetch
        self._timeout_s = timeout_s
        self._ttl_s = ttl_s
        self._min_interval_s = min_refetch_interval_s
        self._clock = clock
        self._lock = threading.Lock()
        self._keys: dict[str, PublicKey] = {}
        self._fetched_at: float | None = None
        self._attempted_at: float | None = None
        self.fetch_count = 0

    def key(self, kid: str) -> PublicKey:
        """The key named `kid`; `VerificationError` if unknown, `KeysUnavailable` if stale."""
        with self._lock:
            now = self._clock().timestamp()
            self._ensure_fresh(now)
            found = self._keys.get(kid)
            if found is None and self._may_attempt(now):
                self._refresh(now)
                found = self._keys.get(kid)
            if found is None:
                raise VerificationError("token names an unknown key")
            return found

    def ed25519_keys(self) -> list[Ed25519PublicKey]:
        """Every fresh Ed25519 key (a `v1a` signature names none)."""
        with self._lock:
            self._ensure_fresh(self._clock().timestamp())
            keys = [k for k in self._keys.values() if isinstance(k, Ed25519PublicKey)]
            return keys[:_MAX_ED25519_KEYS_TRIED]

    def refresh_for_unknown_signer(self) -> bool:
        """Refetch once (rate-limited) after no cached key verified; True if it fetched."""
        with self._lock:
            now = self._clock().timestamp()
            if not self._may_attempt(now):
                return False
            self._refresh(now)
            return True

    def _ensure_fresh(self, now: float) -> None:
        if self._fetched_at is not None and now - self._fetched_at < self._ttl_s:
            return
        if not self._may_attempt(now):
            raise KeysUnavailable("signing keys are stale and a refetch was just tried")
        self._refresh(now)

    def _may_attempt(self, now: float) -> bool:
        return self._attempted_at is None or now - self._attempted_at >= self._min_interval_s

    def _refresh(self, now: float) -> None:
        self._attempted_at = now
        self.fetch_count += 1
        try:
            keys = parse_jwks(self._fetch(self.url, self._timeout_s))
        except Exception as exc:  # any transport or parse failure means "no fresh keys"
            if self._fetched_at is not None and now - self._fetched_at < self._ttl_s:
                raise KeysUnavailable("signing keys could not be refetched") from exc
            self._keys = {}
            raise KeysUnavailable("signing keys could not be fetched") from exc
        self._keys = keys
        self._fetched_at = now


# ------------------------------------------------------------------ dynamic webhooks

_MAX_JWT_CHARS = 8192


def _looks_like_jwt(value: str) -> bool:
    return "," not in value and value.count(".") == 2 and " " not in value.strip()


def _jwt_from(headers: Mapping[str, str]) -> str | None:
    signature = header(headers, WEBHOOK_SIGNATURE_HEADER)
    if signature is not None and _looks_like_jwt(signature):
        return signature.strip()
    authorization = header(headers, AUTHORIZATION_HEADER)
    if authorization is not None:
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return token.strip()
    return None


def _json_segment(segment: str, what: str) -> dict[str, Any]:
    try:
        value = json.loads(_b64decode(segment, urlsafe=True))
    except (ValueError, RecursionError):
        raise VerificationError(f"token {what} is not base64url JSON") from None
    if not isinstance(value, dict):
        raise VerificationError(f"token {what} is not a JSON object")
    return value


def _whole_seconds(claims: Mapping[str, Any], name: str) -> int:
    value = claims.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise VerificationError(f"token claim {name} is missing or not a number")
    return int(value)


class DynamicWebhookVerifier:
    """Checks Gemini per-request webhooks: `v1a` Ed25519 entries or an RS256 JWT."""

    def __init__(
        self,
        jwks: JwksCache,
        tolerance_s: int = DEFAULT_TOLERANCE_S,
        clock: Clock = system_clock,
        audience: str | None = None,
        issuer: str | None = None,
    ) -> None:
        self._jwks = jwks
        self._tolerance_s = _check_tolerance(tolerance_s)
        self._clock = clock
        self._audience = audience or None
        self._issuer = issuer or None

    @staticmethod
    def applies(headers: Mapping[str, str]) -> bool:
        """True when the request carries a `v1a` entry or a JWT (cheap, never raises)."""
        try:
            if _jwt_from(headers) is not None:
                return True
            value = header(headers, WEBHOOK_SIGNATURE_HEADER) or ""
        except VerificationError:
            return False
        return any(part.startswith(_ED25519_VERSION + ",") for part in value.split())

    def verify(self, headers: Mapping[str, str], body: bytes) -> str:
        """Return the delivery id (`webhook-id`, else the JWT's `jti`) if authentic."""
        token = _jwt_from(headers)
        if token is not None:
            claims = self._verify_jwt(token)
            msg_id = header(headers, WEBHOOK_ID_HEADER) or claims.get("jti")
            if not isinstance(msg_id, str):
                raise VerificationError("missing header webhook-id")
            return _check_id(msg_id)
        parsed = _read_standard_headers(headers, self._clock, self._tolerance_s)
        given = [e.signature for e in parsed.entries if e.version == _ED25519_VERSION]
        if not given:
            raise VerificationError("no v1a entry in webhook-signature")
        content = _ed25519_content(parsed.msg_id, parsed.timestamp, body)
        if self._ed25519_matches(content, given):
            return parsed.msg_id
        # A key rotated in since our last fetch: look once more (rate-limited).
        if self._jwks.refresh_for_unknown_signer() and self._ed25519_matches(content, given):
            return parsed.msg_id
        raise VerificationError("no webhook-signature entry matches")

    def _ed25519_matches(self, content: bytes, signatures: Iterable[bytes]) -> bool:
        keys = self._jwks.ed25519_keys()
        for signature in signatures:
            for key in keys:
                try:
                    key.verify(signature, content)
                except InvalidSignature:
                    continue
                return True
        return False

    def _verify_jwt(self, token: str) -> dict[str, Any]:
        if len(token) > _MAX_JWT_CHARS:
            raise VerificationError("token is too long")
        segments = token.split(".")
        if len(segments) != 3 or not all(segments):
            raise VerificationError("token is not a compact JWT")
        head_b64, claims_b64, signature_b64 = segments
        head = _json_segment(head_b64, "header")
        # Pin the algorithm: never let the token choose 'none' or an HMAC with a public key.
        if head.get("alg") != "RS256":
            raise VerificationError("token algorithm is not RS256")
        kid = head.get("kid")
        if not isinstance(kid, str) or not kid:
            raise VerificationError("token header has no kid")
        try:
            signature = _b64decode(signature_b64, urlsafe=True)
        except ValueError:
            raise VerificationError("token signature is not base64url") from None
        key = self._jwks.key(kid)
        if not isinstance(key, RSAPublicKey):
            raise VerificationError("token names a key that is not RSA")
        if not _rs256_verify(key, signature, _jwt_signing_input(head_b64, claims_b64)):
            raise VerificationError("token signature does not match")
        claims = _json_segment(claims_b64, "claims")
        self._check_claims(claims)
        return claims

    def _check_claims(self, claims: Mapping[str, Any]) -> None:
        now = self._clock().timestamp()
        expires = _whole_seconds(claims, "exp")
        issued = _whole_seconds(claims, "iat")
        if expires <= now - self._tolerance_s:
            raise VerificationError("token has expired")
        _check_fresh(issued, self._clock, self._tolerance_s, "token iat")
        if self._audience is not None:
            audience = claims.get("aud")
            audiences = audience if isinstance(audience, list) else [audience]
            if self._audience not in audiences:
                raise VerificationError("token audience does not match")
        if self._issuer is not None and claims.get("iss") != self._issuer:
            raise VerificationError("token issuer does not match")


# ------------------------------------------------------------------------ Gemini


class GeminiVerifier:
    """Accepts a Gemini delivery signed by any configured scheme.

    Static `v1` HMAC (project webhook secrets) and dynamic `v1a`/JWT (JWKS keys) are
    each optional; at least one must be configured. When several apply, the first that
    verifies wins; if none does, the error raised is `KeysUnavailable` when the keys
    could not be fetched (so the sender retries), else the first scheme's error.
    """

    def __init__(
        self,
        static: StandardWebhookVerifier | None = None,
        dynamic: DynamicWebhookVerifier | None = None,
    ) -> None:
        if static is None and dynamic is None:
            raise ValueError("GeminiVerifier needs a static or a dynamic verifier")
        self._static = static
        self._dynamic = dynamic

    def verify(self, headers: Mapping[str, str], body: bytes) -> str:
        """Return the delivery id if authentic; raise `VerificationError` otherwise."""
        attempts: list[Callable[[], str]] = []
        signature = header(headers, WEBHOOK_SIGNATURE_HEADER) or ""
        has_v1 = any(part.startswith(_HMAC_VERSION + ",") for part in signature.split())
        if self._static is not None and (has_v1 or self._dynamic is None):
            attempts.append(lambda: self._static.verify(headers, body))  # type: ignore[union-attr]
        if self._dynamic is not None and (self._dynamic.applies(headers) or not attempts):
            attempts.append(lambda: self._dynamic.verify(headers, body))  # type: ignore[union-attr]
        errors: list[VerificationError] = []
        for attempt in attempts:
            try:
                return attempt()
            except VerificationError as exc:
                errors.append(exc)
        unavailable = [e for e in errors if isinstance(e, KeysUnavailable)]
        raise (unavailable or errors)[0]
