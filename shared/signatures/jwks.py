"""Public signing keys from a JWKS URL: parsing, caching and the JWK form of a key.

The dynamic-webhook verifier (`shared.signatures.dynamic`) looks RS256 keys up by
``kid`` and tries every Ed25519 key for a ``v1a`` entry. Only signing keys are kept:
RSA keys of at least 2048 bits for RS256, and Ed25519 (``OKP``) keys; anything else, and
any single malformed key, is skipped rather than failing the whole document.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicKey, RSAPublicNumbers

from shared.clock import Clock, system_clock
from shared.signatures._common import _b64decode, _b64url
from shared.signatures.errors import KeysUnavailable, VerificationError

PublicKey = RSAPublicKey | Ed25519PublicKey
Fetch = Callable[[str, float], bytes]
_MAX_JWKS_BYTES = 256 * 1024
_MAX_JWKS_KEYS = 32
# A `v1a` entry names no key: bound how many a hostile request can make us try.
_MAX_ED25519_KEYS_TRIED = 8
_MIN_RSA_BITS = 2048


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


class JwksCache:
    """Public keys from a JWKS URL, fetched with a timeout and kept for at most `ttl_s`.

    A `kid` that is not cached triggers one refetch, but never more often than every
    `min_refetch_interval_s` (failed fetches count too), so a key rotation heals within
    seconds while unknown key ids sent by an attacker cannot make us fetch on every
    request:

        t=0    keys {A} cached             t=30  a JWT names new key B: refetch -> {A, B}
        t=31   JWTs naming kid X: refused, no fetch until t=35, then at most one

    When the keys are older than `ttl_s` and cannot be refreshed, lookups raise
    `KeysUnavailable`. Thread-safe; `fetch_count` counts fetch attempts.
    """

    def __init__(
        self,
        url: str,
        fetch: Fetch = http_fetch,
        timeout_s: float = 5.0,
        ttl_s: float = 3600.0,
        min_refetch_interval_s: float = 5.0,
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
