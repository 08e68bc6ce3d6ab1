"""Gemini dynamic (per-request) webhooks: an RS256 JWT in ``webhook-signature``.

As the Gemini "Webhooks" guide (ai.google.dev/gemini-api/docs/webhooks) documents them:
the whole ``webhook-signature`` value is a compact JWT signed with RS256; its header names
the signing key by ``kid``, published in the JWKS at `GEMINI_JWKS_URL` (default
`DEFAULT_GEMINI_JWKS_URL`); its ``aud`` must be the audience we configured. The guide's
sample decodes the token into the event (``event = jwt.decode(...)``).

What the verifier checks, through PyJWT (``jwt.decode`` and ``PyJWKClient``):

- the algorithm is RS256 and nothing else (never ``none``, never an HMAC keyed with a
  public key), the key is the RSA key the JWKS publishes under the token's ``kid``;
- ``aud`` contains the configured audience (required); ``iss`` equals the configured
  issuer when one is configured;
- ``exp``, ``iat`` and ``nbf`` when present, against the injected clock with
  `CLOCK_SKEW_S` of leeway (PyJWT would read the wall clock).

What the token does NOT cover: the docs do not say it binds the body, ``webhook-id`` or
``webhook-timestamp``. So the delivery's identity comes from the token alone (`jti`,
else a hash of the token, under the ``jwt:`` prefix: `DynamicDelivery.delivery_id`),
and when the claims carry the event (``type`` and ``data``) the caller uses them instead
of the unsigned body (`DynamicDelivery.event`). A body left unsigned is still only a
hint: the worker re-fetches the operation before settling (docs/architecture.md, "Why").

Keys: `PyJWKClient` caches the JWKS for `ttl_s`, refetches at once when a token names a
``kid`` it has not seen (at most once per `refetch_cooldown_s`, so made-up kids cannot
make us fetch on every request), and every fetch carries `timeout_s`. A fetch that fails
raises `KeysUnavailable` (the ingress answers 503 and Gemini retries).
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey, RSAPublicKey

from shared.clock import Clock, system_clock
from shared.config import DEFAULT_GEMINI_JWKS_URL as DEFAULT_GEMINI_JWKS_URL
from shared.signatures._common import WEBHOOK_SIGNATURE_HEADER, header
from shared.signatures.errors import KeysUnavailable, VerificationError

CLOCK_SKEW_S = 30
JWT_ID_PREFIX = "jwt:"
_ALGORITHMS = ["RS256"]
_MAX_JWT_CHARS = 8192
# Registered claims (RFC 7519 §4.1): about the token, not part of the event it carries.
_REGISTERED_CLAIMS = frozenset({"iss", "sub", "aud", "exp", "nbf", "iat", "jti"})
# A jti used as is must keep "jwt:<jti>" a usable delivery id (printable, no spaces, <= 200).
_USABLE_JTI = re.compile(r"[\x21-\x7e]{1,150}")


def sign_jwt_rs256(private_key: RSAPrivateKey, kid: str, claims: Mapping[str, Any]) -> str:
    """An RS256 JWT over `claims` naming key `kid` (for tests and the local simulator)."""
    return jwt.encode(dict(claims), private_key, algorithm="RS256", headers={"kid": kid})


def looks_like_jwt(value: str | None) -> bool:
    """Three dot-separated segments, no comma or space: a JWT, not Standard Webhooks entries."""
    if value is None:
        return False
    text = value.strip()
    return "," not in text and " " not in text and text.count(".") == 2


@dataclass(frozen=True)
class DynamicDelivery:
    """A verified dynamic delivery.

    `delivery_id` is ``jwt:<jti>`` (or ``jwt:sha256:<hex of the token>`` when the token
    has no usable ``jti``): signed, and in a namespace no static ``webhook-id`` uses.
    `event` is the event the signed claims carry (claims without the registered JWT
    claims) when they hold a ``type`` string and a ``data`` object, else None.
    """

    delivery_id: str
    claims: Mapping[str, Any]
    event: Mapping[str, Any] | None


def _delivery_id(token: str, claims: Mapping[str, Any]) -> str:
    jti = claims.get("jti")
    if isinstance(jti, str) and _USABLE_JTI.fullmatch(jti):
        return JWT_ID_PREFIX + jti
    return f"{JWT_ID_PREFIX}sha256:{hashlib.sha256(token.encode('ascii')).hexdigest()}"


def _signed_event(claims: Mapping[str, Any]) -> dict[str, Any] | None:
    if not isinstance(claims.get("type"), str) or not isinstance(claims.get("data"), dict):
        return None
    return {k: v for k, v in claims.items() if k not in _REGISTERED_CLAIMS}


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


class DynamicWebhookVerifier:
    """Checks the RS256 JWT of a Gemini dynamic webhook (module docstring)."""

    def __init__(
        self,
        jwks: str | jwt.PyJWKClient,
        audience: str,
        *,
        issuer: str = "",
        clock: Clock = system_clock,
        timeout_s: float = 5.0,
        ttl_s: float = 3600.0,
        refetch_cooldown_s: float = 30.0,
    ) -> None:
        if not audience or not audience.strip():
            raise ValueError("a dynamic webhook verifier needs an audience")
        if isinstance(jwks, str):
            if not jwks:
                raise ValueError("JWKS URL is empty")
            if timeout_s <= 0:
                raise ValueError(f"timeout_s must be positive, got {timeout_s}")
            jwks = jwt.PyJWKClient(
                jwks, lifespan=ttl_s, timeout=timeout_s, cooldown_duration=refetch_cooldown_s
            )
        self.keys = jwks
        self._audience = audience
        self._issuer = issuer or None
        self._clock = clock

    @staticmethod
    def applies(headers: Mapping[str, str]) -> bool:
        """True when `webhook-signature` holds a JWT (cheap, never raises)."""
        try:
            return looks_like_jwt(header(headers, WEBHOOK_SIGNATURE_HEADER))
        except VerificationError:
            return False

    def verify(self, headers: Mapping[str, str], body: bytes = b"") -> str:
        """The delivery id of an authentic delivery (see `verify_delivery`)."""
        return self.verify_delivery(headers).delivery_id

    def verify_delivery(self, headers: Mapping[str, str]) -> DynamicDelivery:
        """Verify the JWT in `webhook-signature`; `VerificationError` / `KeysUnavailable`."""
        token = (header(headers, WEBHOOK_SIGNATURE_HEADER) or "").strip()
        if not looks_like_jwt(token):
            raise VerificationError("webhook-signature is not a JWT")
        if len(token) > _MAX_JWT_CHARS:
            raise VerificationError("token is too long")
        claims = self._decode(token)
        return DynamicDelivery(_delivery_id(token, claims), claims, _signed_event(claims))

    def _decode(self, token: str) -> dict[str, Any]:
        try:
            head = jwt.get_unverified_header(token)
        except (jwt.InvalidTokenError, RecursionError):
            raise VerificationError("token is not a well-formed JWT") from None
        # Pin the algorithm before any key is fetched: never 'none', never an HMAC.
        if head.get("alg") not in _ALGORITHMS:
            raise VerificationError("token algorithm is not RS256")
        kid = head.get("kid")
        if not isinstance(kid, str) or not kid:
            raise VerificationError("token header has no kid")
        key = self._key(kid)
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=_ALGORITHMS,
                audience=self._audience,
                issuer=self._issuer,
                # Times are checked against the injected clock in _check_times.
                options={
                    "require": ["aud"],
                    "verify_exp": False,
                    "verify_iat": False,
                    "verify_nbf": False,
                },
            )
        except (jwt.InvalidTokenError, RecursionError) as exc:  # PyJWT's root for bad tokens
            raise VerificationError(f"token rejected: {type(exc).__name__}") from None
        self._check_times(claims)
        return claims

    def _key(self, kid: str) -> RSAPublicKey:
        try:
            self.keys.get_signing_keys()  # loads or reuses the cached set
        except jwt.PyJWTError as exc:  # transport failure, or not a usable JWKS document
            reason = type(exc).__name__
            raise KeysUnavailable(f"signing keys could not be fetched: {reason}") from exc
        try:
            found = self.keys.get_signing_key(kid)  # refetches once for a kid not cached
        except jwt.PyJWKClientConnectionError as exc:
            raise KeysUnavailable("signing keys could not be refetched") from exc
        except jwt.PyJWTError:
            raise VerificationError("token names an unknown key") from None
        if not isinstance(found.key, RSAPublicKey):
            raise VerificationError("token names a key that is not RSA")
        return found.key

    def _check_times(self, claims: Mapping[str, Any]) -> None:
        now = self._clock().timestamp()
        for name in ("exp", "iat", "nbf"):
            if name in claims and not _is_number(claims[name]):
                raise VerificationError(f"token claim {name} is not a number")
        if "exp" in claims and now > claims["exp"] + CLOCK_SKEW_S:
            raise VerificationError("token has expired")
        if "iat" in claims and now < claims["iat"] - CLOCK_SKEW_S:
            raise VerificationError("token was issued in the future")
        if "nbf" in claims and now < claims["nbf"] - CLOCK_SKEW_S:
            raise VerificationError("token is not valid yet")
