"""Gemini per-request (dynamic) webhooks: `v1a` Ed25519 entries or an RS256 JWT.

Both are checked against the public keys of a JWKS URL (`shared.signatures.jwks`). A
``v1a`` entry covers ``<id>.<timestamp>.<body>`` exactly like a Standard Webhooks ``v1``
entry (`shared.signatures.standard_webhooks`).

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
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey, RSAPublicKey

from shared.clock import Clock, system_clock
from shared.signatures._common import (
    AUTHORIZATION_HEADER,
    DEFAULT_TOLERANCE_S,
    WEBHOOK_ID_HEADER,
    WEBHOOK_SIGNATURE_HEADER,
    _b64decode,
    _b64url,
    _check_fresh,
    _check_tolerance,
    header,
)
from shared.signatures.errors import VerificationError
from shared.signatures.jwks import JwksCache
from shared.signatures.standard_webhooks import (
    _ED25519_VERSION,
    _check_id,
    _ed25519_content,
    _read_standard_headers,
)

_MAX_JWT_CHARS = 8192


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
