"""Verify the OIDC bearer token Cloud Tasks and Cloud Scheduler attach to their calls.

google-auth does the verification; this module adds what production needs around it:
the certificate set is fetched with a timeout and cached for a bounded time (google-auth
would fetch it on every call), and the caller's service account can be pinned.

Errors: `Unauthorized` (401: no token, bad signature, expired, wrong audience) and
`Forbidden` (403: a valid token from an account that may not call us), both under
`OidcError`. Their messages never contain the token.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import google.auth.exceptions
import google.auth.transport.requests
import requests
from google.oauth2 import id_token

from shared.errors import PermanentError


class OidcError(PermanentError):
    status = 401


class Unauthorized(OidcError):
    status = 401


class Forbidden(OidcError):
    status = 403


class _CachingRequest(google.auth.transport.requests.Request):
    """A google-auth transport that caches GETs (the certs) for `ttl_s`, with a timeout."""

    def __init__(self, ttl_s: float, timeout_s: float, now: Callable[[], float]) -> None:
        super().__init__(session=requests.Session())
        self._ttl_s = ttl_s
        self._timeout_s = timeout_s
        self._now = now
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[float, Any]] = {}

    def __call__(
        self,
        url: str,
        method: str = "GET",
        body: Any = None,
        headers: Any = None,
        timeout: Any = None,
        **kwargs: Any,
    ) -> Any:
        if method != "GET":
            return super().__call__(url, method, body, headers, self._timeout_s, **kwargs)
        with self._lock:
            hit = self._cache.get(url)
            if hit is not None and self._now() - hit[0] < self._ttl_s:
                return hit[1]
        response = super().__call__(url, method, body, headers, self._timeout_s, **kwargs)
        if response.status == 200:
            with self._lock:
                self._cache[url] = (self._now(), response)
        return response


class OidcVerifier:
    """Checks `Authorization: Bearer <id token>` for `audience`, optionally pinning `email`."""

    def __init__(
        self,
        audience: str,
        certs_url: str,
        allowed_email: str = "",
        *,
        ttl_s: float = 300.0,
        timeout_s: float = 5.0,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        if not audience:
            raise ValueError("OIDC audience is empty")
        self._audience = audience
        self._certs_url = certs_url
        self._allowed_email = allowed_email
        self._request = _CachingRequest(ttl_s, timeout_s, now)

    def verify(self, headers: Mapping[str, str]) -> Mapping[str, Any]:
        """The token's claims; raise `Unauthorized` or `Forbidden`."""
        value = headers.get("Authorization") or ""
        scheme, _, token = value.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthorized("missing bearer token")
        try:
            claims = id_token.verify_token(
                token.strip(),
                self._request,
                audience=self._audience,
                certs_url=self._certs_url,
                clock_skew_in_seconds=10,
            )
        except google.auth.exceptions.TransportError as exc:
            raise Unauthorized(f"cannot fetch signing certificates: {type(exc).__name__}") from exc
        except Exception as exc:  # google-auth and PyJWT raise many types for a bad token
            raise Unauthorized(f"invalid token: {type(exc).__name__}") from exc
        if claims.get("email_verified") is not True:
            raise Forbidden("the token's email is not verified")
        if self._allowed_email and claims.get("email") != self._allowed_email:
            raise Forbidden(f"caller {claims.get('email')!r} may not call this function")
        return claims
