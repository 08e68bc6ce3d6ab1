"""Authenticating as a GitHub App: the App JWT and per-installation access tokens.

GitHub's documents ("Generating a JSON Web Token (JWT) for a GitHub App", "Generating an
installation access token for a GitHub App", "Authenticating as a GitHub App installation"):

- the App JWT is signed RS256 with the App's private key; `iat` 60 s in the past (clock
  drift), `exp` no more than 10 minutes ahead (we take `JWT_LIFETIME`, 9), `iss` the
  App's client id (recommended) or app id;
- `POST {api}/app/installations/{installation_id}/access_tokens` with that JWT answers 201
  `{"token": "ghs_…", "expires_at": "…Z", "permissions", "repository_selection"}`; the
  token lasts one hour, and using an expired one answers 401.

`AppAuth` keeps one token per installation and mints a new one when less than
`REFRESH_BEFORE` is left (or half the token's life, if that is shorter). Minting is
serialized per installation, so concurrent requests for one installation mint once. A
401 on a call made with a token (expired early, revoked) drops that token, and the REST
client sends the request once more (`GitHubAuth.invalidate`); a 401 that another thread
already answered with a fresh token leaves that fresh token alone:

    thread A                          thread B                       cache[42]
    headers(42) → t1                  headers(42) → t1               t1
    GET → 401                         GET → 401
    invalidate(42, t1): drops t1                                     -
    headers(42) → mints t2                                           t2
                                      invalidate(42, t1): t1 ≠ t2, kept
                                      headers(42) → t2 (no 2nd mint)  t2

The private key and the tokens live only in this object and in Authorization headers:
no message, log field or repr built here carries them. A push that carries no
installation (a repository webhook, not the App's) is served by `fallback`
(`GITHUB_TOKEN`, or anonymous), as before Apps.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import jwt
import requests
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey
from cryptography.hazmat.primitives.serialization import load_pem_private_key

from shared import tracing
from shared.clock import Clock, system_clock
from shared.errors import ConfigError
from shared.github.auth import GitHubAuth, TokenAuth
from shared.github.errors import GitHubRejected, GitHubUnavailable
from shared.github.transport import github_policy, rest_headers

JWT_BACKDATE = timedelta(seconds=60)
JWT_LIFETIME = timedelta(minutes=9)  # GitHub refuses an `exp` more than 10 minutes ahead
REFRESH_BEFORE = timedelta(minutes=5)
MAX_SHOWN_MESSAGE = 300


class AppKeyError(ConfigError):
    """The App's private key is not an RSA private key in PEM (never quotes the key)."""


@dataclass(frozen=True)
class AppCredentials:
    """An App's identity: `app_id` (client id or app id: the JWT's `iss`) and its key."""

    app_id: str
    private_key: RSAPrivateKey = field(repr=False)

    @classmethod
    def from_pem(cls, app_id: str, pem: str | bytes) -> AppCredentials:
        """Checked at once (a deployment with a bad key fails to start): `AppKeyError`."""
        if not str(app_id).strip():
            raise AppKeyError("the App id is empty")
        data = pem.encode() if isinstance(pem, str) else pem
        try:
            key = load_pem_private_key(data, password=None)
        except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
            raise AppKeyError(
                f"not a PEM private key without a password ({type(exc).__name__})"
            ) from None
        if not isinstance(key, RSAPrivateKey):
            raise AppKeyError(f"a {type(key).__name__}, not an RSA key (GitHub signs with RS256)")
        return cls(str(app_id).strip(), key)


def app_claims(app_id: str, now: datetime) -> dict[str, int | str]:
    """The App JWT's claims at `now`: iat 60 s back, exp 9 min ahead, iss the App."""
    return {
        "iat": int((now - JWT_BACKDATE).timestamp()),
        "exp": int((now + JWT_LIFETIME).timestamp()),
        "iss": app_id,
    }


def app_jwt(credentials: AppCredentials, now: datetime) -> str:
    """The App JWT (RS256) GitHub takes on `/app/...` endpoints."""
    return jwt.encode(app_claims(credentials.app_id, now), credentials.private_key, "RS256")


@dataclass(frozen=True)
class InstallationToken:
    token: str = field(repr=False)
    expires_at: datetime
    renew_at: datetime  # when to mint the next one (before `expires_at`)


class AppAuth:
    """`GitHubAuth` as a GitHub App: per installation, a cached installation token."""

    def __init__(
        self,
        credentials: AppCredentials,
        api_url: str,
        *,
        session: requests.Session | None = None,
        timeout_s: float = 30.0,
        clock: Clock = system_clock,
        refresh_before: timedelta = REFRESH_BEFORE,
        fallback: GitHubAuth | None = None,
        api_version: str | None = None,
    ) -> None:
        self._credentials = credentials
        self._api_version = api_version  # None or empty: the transport's API_VERSION
        self._api_url = api_url.rstrip("/")
        self._session = session or requests.Session()
        self._timeout_s = timeout_s
        self._clock = clock
        self._refresh_before = refresh_before
        self._fallback = fallback or TokenAuth()
        self._policy = github_policy()
        self._guard = threading.Lock()
        self._locks: dict[int, threading.Lock] = {}
        self._tokens: dict[int, InstallationToken] = {}
        self.minted = 0  # tokens minted by this object (tests, logs)

    @property
    def app_id(self) -> str:
        return self._credentials.app_id

    def headers(self, installation_id: int | None) -> dict[str, str]:
        if installation_id is None:
            return self._fallback.headers(None)
        return {"Authorization": f"Bearer {self._token(installation_id)}"}

    def invalidate(self, installation_id: int | None, used: Mapping[str, str]) -> bool:
        if installation_id is None:
            return self._fallback.invalidate(None, used)
        with self._lock_for(installation_id):
            cached = self._tokens.get(installation_id)
            if cached is not None and used.get("Authorization") == f"Bearer {cached.token}":
                del self._tokens[installation_id]
        return True

    def _lock_for(self, installation_id: int) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(installation_id, threading.Lock())

    def _token(self, installation_id: int) -> str:
        with self._lock_for(installation_id):
            cached = self._tokens.get(installation_id)
            if cached is not None and self._clock() < cached.renew_at:
                return cached.token
            minted = self._mint(installation_id)
            self._tokens[installation_id] = minted
            with self._guard:
                self.minted += 1
            return minted.token

    def _mint(self, installation_id: int) -> InstallationToken:
        """A new installation token; `GitHubUnavailable` (worth a retry) or `GitHubRejected`
        naming the App, the installation and GitHub's message (never a credential)."""
        where = f"GitHub App {self.app_id}: installation {installation_id}"
        if isinstance(installation_id, bool) or not isinstance(installation_id, int):
            raise GitHubRejected(f"{where}: not an installation id")
        now = self._clock()
        url = f"{self._api_url}/app/installations/{installation_id}/access_tokens"
        headers = {
            **rest_headers(self._api_version),
            "Authorization": f"Bearer {app_jwt(self._credentials, now)}",
        }
        try:
            with tracing.span(
                "github.installation_token", kind="client", installation=installation_id
            ):
                response = self._session.post(url, headers=headers, timeout=self._timeout_s)
        except requests.RequestException as exc:
            failed = f"{where}: token request failed: {type(exc).__name__}"
            raise GitHubUnavailable(failed) from None
        code = response.status_code
        if self._policy.retryable(code, response.headers):
            raise GitHubUnavailable(f"{where}: token request answered {code}", status=code)
        if code not in (200, 201):
            raise GitHubRejected(
                f"{where}: token request answered {code}: {_message(response)}", status=code
            )
        try:
            body = response.json()
            token = body["token"]
            expires_at = datetime.fromisoformat(str(body["expires_at"]).replace("Z", "+00:00"))
        except (ValueError, KeyError, TypeError):
            raise GitHubRejected(f"{where}: the token answer had no token or expiry") from None
        if not isinstance(token, str) or not token or expires_at.tzinfo is None:
            raise GitHubRejected(f"{where}: the token answer had no token or expiry")
        margin = min(self._refresh_before, max(expires_at - now, timedelta(0)) / 2)
        return InstallationToken(token, expires_at, expires_at - margin)

    def __repr__(self) -> str:
        return f"AppAuth(app={self.app_id!r}, installations={len(self._tokens)})"


def _message(response: requests.Response) -> str:
    """GitHub's `message` from an error answer (its words, e.g. "'Expiration time' claim
    ('exp') is too far in the future"), clipped; never the body of a success."""
    try:
        message = response.json().get("message")
    except (ValueError, AttributeError):
        message = None
    text = str(message) if message else "(no message)"
    return text if len(text) <= MAX_SHOWN_MESSAGE else text[:MAX_SHOWN_MESSAGE] + "…"
