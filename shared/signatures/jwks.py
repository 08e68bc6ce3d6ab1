"""Public signing keys in JWKS form: parsing a document and the JWK form of a key.

`shared.signatures.oidc` reads the Cloud Tasks / Scheduler token keys with `parse_jwks` and
`http_fetch`; tests publish keys with `public_jwk`. (Gemini dynamic webhooks fetch their
keys through PyJWT's `PyJWKClient`: `shared.signatures.dynamic`.) Only signing keys are
kept: RSA keys of at least 2048 bits for RS256, and Ed25519 (``OKP``) keys; anything
else, and any single malformed key, is skipped rather than failing the whole document.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicKey, RSAPublicNumbers

from shared.signatures._common import _b64decode, _b64url

PublicKey = RSAPublicKey | Ed25519PublicKey
Fetch = Callable[[str, float], bytes]
_MAX_JWKS_BYTES = 256 * 1024
_MAX_JWKS_KEYS = 32
_MIN_RSA_BITS = 2048


def http_fetch(url: str, timeout_s: float) -> bytes:
    """GET `url` with a timeout; the default JWKS transport."""
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
