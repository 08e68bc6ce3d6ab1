"""Verify the OIDC bearer token Cloud Tasks and Cloud Scheduler attach to their calls.

    OidcVerifier(audience, certs, allowed_email="", *, issuers=GOOGLE_ISSUERS, clock)
        .verify(headers) -> the token's claims
    SigningKeys(url, *, fetch, timeout_s, ttl_s, refresh_min_interval_s, clock)
        .key(kid) -> the RSA public key named `kid`

The signing keys come from a certs URL, in Google's JWKS form (`oauth2/v3/certs`) or its
`{kid: x509 PEM}` form (`oauth2/v1/certs`); the local Cloud Tasks emulator serves both.
They are cached for `ttl_s`, and fetched again at once when a token names a key that is
not cached, so a key rotation heals on the next call rather than on the next expiry. An
unknown `kid` refetches at most once per `refresh_min_interval_s` (failed fetches count;
a routine load does not), so tokens naming made-up keys cannot hammer the certs URL:

    t=0    keys {A} fetched, cached for ttl_s
    t=60   the signer switches to a new key B; a token names kid B
    t=60   B is not cached -> one refetch -> {A, B}: the token verifies
    t=61   tokens naming kid X -> no fetch until t=65 (each answered 401), then one

A token must be RS256, name its key, carry `exp` and `iat` (checked against the injected
clock, 10 s of skew), the expected `aud`, and an `iss` among `issuers` (Google's by
default). Errors (their messages never contain the token):

    OidcError             base (a HookledgerError); `status` is the HTTP answer
    ├── Unauthorized      401  (PermanentError) no or malformed token, bad signature,
    │                          expired, missing exp/iat, wrong audience or issuer, unknown key
    ├── Forbidden         403  (PermanentError) a valid token from an account that may not call us
    └── OidcUnavailable   503  (TransientError) the keys could not be fetched: our problem,
                               the caller retries
"""

from __future__ import annotations

import json
import threading
from collections.abc import Collection, Mapping
from typing import Any, TypeGuard

import jwt
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicKey

from shared.clock import Clock, system_clock
from shared.errors import HookledgerError, PermanentError, TransientError
from shared.signatures.jwks import Fetch, http_fetch, parse_jwks

GOOGLE_ISSUERS: tuple[str, ...] = ("https://accounts.google.com", "accounts.google.com")
CLOCK_SKEW_S = 10
_MAX_TOKEN_CHARS = 16 * 1024
_MAX_ISSUER_SHOWN = 80


class OidcError(HookledgerError):
    """Base of the verifier's errors; `status` is the HTTP answer to give the caller."""

    status = 401


class Unauthorized(OidcError, PermanentError):
    status = 401


class Forbidden(OidcError, PermanentError):
    status = 403


class OidcUnavailable(OidcError, TransientError):
    """The signing keys could not be fetched; answer 503 so the caller tries again."""

    status = 503  # our fetch failed, not the caller's token


def parse_certs(document: bytes) -> dict[str, RSAPublicKey]:
    """RSA signing keys by `kid` from a JWKS or a `{kid: x509 PEM}` document.

    A single malformed key is skipped; ValueError when no usable key is left.
    """
    data = json.loads(document)
    if isinstance(data, dict) and "keys" in data:
        found = parse_jwks(document)
        keys = {kid: key for kid, key in found.items() if isinstance(key, RSAPublicKey)}
    elif isinstance(data, dict):
        keys = {}
        for kid, pem in data.items():
            try:
                key = x509.load_pem_x509_certificate(str(pem).encode("ascii")).public_key()
            except (ValueError, UnicodeEncodeError):
                continue  # one malformed certificate must not hide the others
            if isinstance(key, RSAPublicKey):
                keys[kid] = key
    else:
        raise ValueError("certs document is neither a JWKS nor a {kid: certificate} map")
    if not keys:
        raise ValueError("certs document holds no RSA signing key")
    return keys


class SigningKeys:
    """The RSA keys published at `url`, cached for `ttl_s`; refetched on an unknown kid.

    Raises `Unauthorized` for a kid that is not published (after the one refetch allowed
    per `refresh_min_interval_s`), `OidcUnavailable` when no fresh keys can be had.
    Every fetch carries `timeout_s`. Thread-safe; `fetch_count` counts fetch attempts.
    """

    def __init__(
        self,
        url: str,
        *,
        fetch: Fetch = http_fetch,
        timeout_s: float = 5.0,
        ttl_s: float = 300.0,
        refresh_min_interval_s: float = 5.0,
        clock: Clock = system_clock,
    ) -> None:
        if not url:
            raise ValueError("OIDC certs URL is empty")
        if timeout_s <= 0 or ttl_s <= 0 or refresh_min_interval_s < 0:
            raise ValueError("timeout_s and ttl_s must be positive, refresh_min_interval_s >= 0")
        self.url = url
        self._fetch = fetch
        self._timeout_s = timeout_s
        self._ttl_s = ttl_s
        self._min_interval_s = refresh_min_interval_s
        self._clock = clock
        self._lock = threading.Lock()
        self._keys: dict[str, RSAPublicKey] = {}
        self._fetched_at: float | None = None
        self._attempted_at: float | None = None
        self.fetch_count = 0

    def key(self, kid: str) -> RSAPublicKey:
        """The key named `kid`; see the class docstring for what it raises."""
        with self._lock:
            now = self._clock().timestamp()
            loaded = False
            if self._fetched_at is None or now - self._fetched_at >= self._ttl_s:
                if not self._may_attempt(now):
                    raise OidcUnavailable(f"signing keys from {self.url} are stale; refetch failed")
                self._refresh(now, rate_limited=False)
                loaded = True
            found = self._keys.get(kid)
            if found is None and not loaded and self._may_attempt(now):
                self._refresh(now, rate_limited=True)  # a rotation: a key we have not seen
                found = self._keys.get(kid)
            if found is None:
                raise Unauthorized("token names an unknown signing key")
            return found

    def _may_attempt(self, now: float) -> bool:
        return self._attempted_at is None or now - self._attempted_at >= self._min_interval_s

    def _refresh(self, now: float, *, rate_limited: bool) -> None:
        """Fetch the keys; an unknown-kid refetch or a failure starts the quiet interval.

        A routine load (first use, TTL) does not, so a key rotated in just after it is
        still picked up by the very next token that names it.
        """
        if rate_limited:
            self._attempted_at = now
        self.fetch_count += 1
        try:
            keys = parse_certs(self._fetch(self.url, self._timeout_s))
        except Exception as exc:  # any transport or parse failure means "no fresh keys"
            self._attempted_at = now
            raise OidcUnavailable(
                f"cannot fetch signing keys from {self.url}: {type(exc).__name__}"
            ) from exc
        self._keys = keys
        self._fetched_at = now


class OidcVerifier:
    """Checks `Authorization: Bearer <id token>` for `audience`, optionally pinning `email`.

    `certs` is a certs URL (keys cached with `SigningKeys`' defaults) or a `SigningKeys`.
    """

    def __init__(
        self,
        audience: str,
        certs: str | SigningKeys,
        allowed_email: str = "",
        *,
        issuers: Collection[str] = GOOGLE_ISSUERS,
        clock: Clock = system_clock,
    ) -> None:
        if not audience:
            raise ValueError("OIDC audience is empty")
        if not issuers:
            raise ValueError("OIDC issuers are empty")
        self._audience = audience
        self._keys = certs if isinstance(certs, SigningKeys) else SigningKeys(certs, clock=clock)
        self._allowed_email = allowed_email
        self._issuers = frozenset(issuers)
        self._clock = clock

    def verify(self, headers: Mapping[str, str]) -> Mapping[str, Any]:
        """The token's claims; raise `Unauthorized`, `Forbidden` or `OidcUnavailable`."""
        value = headers.get("Authorization") or ""
        scheme, _, token = value.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise Unauthorized("missing bearer token")
        if len(token) > _MAX_TOKEN_CHARS:
            raise Unauthorized("token is too long")
        claims = self._decode(token)
        self._check_times(claims)
        issuer = claims.get("iss")
        if issuer not in self._issuers:
            raise Unauthorized(f"token issuer {str(issuer)[:_MAX_ISSUER_SHOWN]!r} is not accepted")
        if claims.get("email_verified") is not True:
            raise Forbidden("the token's email is not verified")
        if self._allowed_email and claims.get("email") != self._allowed_email:
            raise Forbidden(f"caller {claims.get('email')!r} may not call this function")
        return claims

    def _decode(self, token: str) -> dict[str, Any]:
        """The claims of a token whose signature and audience verify; times checked apart."""
        try:
            header = jwt.get_unverified_header(token)
        except jwt.InvalidTokenError as exc:
            raise Unauthorized(f"malformed token: {type(exc).__name__}") from exc
        if header.get("alg") != "RS256":
            raise Unauthorized("token is not signed with RS256")
        kid = header.get("kid")
        if not isinstance(kid, str) or not kid:
            raise Unauthorized("token names no signing key")
        key = self._keys.key(kid)
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=["RS256"],
                audience=self._audience,
                # exp and iat are checked against the injected clock in _check_times.
                options={
                    "require": ["exp", "iat", "aud", "iss"],
                    "verify_exp": False,
                    "verify_iat": False,
                    "verify_nbf": False,
                    "verify_iss": False,
                },
            )
        except jwt.InvalidTokenError as exc:  # PyJWT's one root for every bad token
            raise Unauthorized(f"invalid token: {type(exc).__name__}") from exc
        return claims

    def _check_times(self, claims: Mapping[str, Any]) -> None:
        now = self._clock().timestamp()
        exp, iat = claims.get("exp"), claims.get("iat")
        if not _is_number(exp) or not _is_number(iat):
            raise Unauthorized("token exp and iat must be numbers")
        if now > exp + CLOCK_SKEW_S:
            raise Unauthorized("token expired")
        if now < iat - CLOCK_SKEW_S:
            raise Unauthorized("token used before it was issued")


def _is_number(value: Any) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool)
