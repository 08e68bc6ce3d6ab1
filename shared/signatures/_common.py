"""Helpers every scheme shares: header lookup, strict base64, secret and clock checks.

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
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence

from shared.clock import Clock
from shared.signatures.errors import SecretError, VerificationError

MIN_KEY_BYTES = 16
DEFAULT_TOLERANCE_S = 300

GITHUB_SIGNATURE_HEADER = "x-hub-signature-256"
WEBHOOK_ID_HEADER = "webhook-id"
WEBHOOK_TIMESTAMP_HEADER = "webhook-timestamp"
WEBHOOK_SIGNATURE_HEADER = "webhook-signature"
AUTHORIZATION_HEADER = "authorization"

# Bounds that keep a hostile header from costing more than a few microseconds.
_MAX_HEADER_CHARS = 8192


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
    """Unpadded base64url, as JWKs and envelope signatures carry it."""
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
