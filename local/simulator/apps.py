"""GitHub Apps as GitHub serves them: registered Apps, their installations, the App JWT,
installation tokens, and which token may call which repository route.

The App JWT is checked as GitHub checks it ("Generating a JSON Web Token (JWT) for a
GitHub App": RS256, `iat` about 60 s back, `exp` at most 10 minutes ahead, `iss` the
client id or app id) and refused with GitHub's own 401 bodies, as reported verbatim by
clients that met them:

- a signature the App's public key does not verify, a token that is not a JWT:
  "A JSON web token could not be decoded" (octokit/auth-app.js#375: a valid key with
  another App's id; actions/create-github-app-token#153)
- `exp` more than 10 minutes ahead: "'Expiration time' claim ('exp') is too far in the
  future" (octokit/auth-app.js#698, rocq-prover/bot#204, `documentation_url`
  https://docs.github.com/rest)
- `exp` missing or past: "'Expiration time' claim ('exp') must be a numeric value
  representing the future time at which the assertion expires" (github3.py#1050)
- `iat` missing or in the future past `IAT_SKEW`: "'Issued at' claim ('iat') must be an
  Integer representing the time that the assertion was issued" (probot#967,
  tibdex/github-app-token#102)
- an `iss` that names no App: 404 "Integration not found" (actions/create-github-app-token#76,
  octokit/authentication-strategies.js#165; the threads quote the message, the 404 is
  our reading)

`POST /app/installations/{id}/access_tokens` answers 201 with a `ghs_` token valid
`token_lifetime_s` (GitHub: one hour), 404 for an installation that is not this App's
or was deleted, 403 "This installation has been suspended" for a suspended one
(octokit/octokit.rb#1307). On a repository route an installation token must be live
(else 401 "Bad credentials"), cover the repository and hold the route's permission
(else 403 "Resource not accessible by integration", with `X-Accepted-GitHub-Permissions`
naming what was needed; actions/create-github-app-token#258). A request with no token or
a personal token is served as before Apps existed here: the simulator stands in for
GitHub with any personal token.

Route permissions (GitHub's "Permissions required for GitHub Apps"): file contents need
`contents: read`; listing a commit's comments is a metadata endpoint (`metadata: read`);
creating, editing or deleting a commit comment needs `contents: write` (our reading of the
permission tables for commit comments); issues, their labels, comments and reactions need
`issues`, pull requests and their reviews `pull_requests`, commit statuses `statuses`
(read to get and list, write to change). An installation made without `permissions` holds
`DEFAULT_PERMISSIONS`: every one of these, so a test's App may call them all.

`Apps` applies these rules; the records it keeps are in `app_records.py` and the refusal
in `github_refusal.py`, both importable from here.
"""

from __future__ import annotations

import base64
import json
import secrets
import threading
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicKey

from local.simulator.app_records import LEVELS, App, Caller, Installation, IssuedToken
from local.simulator.errors import BadRequest, NotFound
from local.simulator.github_objects import repository
from local.simulator.github_refusal import REST_DOCS, GitHubRefusal
from shared.clock import Clock, system_clock

__all__ = [  # the records live in `app_records`, the refusal in `github_refusal`
    "CREATE_INSTALLATION_ACCESS_DOCS",
    "DEFAULT_PERMISSIONS",
    "EXP_INVALID",
    "EXP_TOO_FAR",
    "IAT_INVALID",
    "IAT_SKEW_S",
    "LEVELS",
    "MAX_EXP_AHEAD_S",
    "NOT_DECODED",
    "NO_ACCESS",
    "REST_DOCS",
    "SUSPENDED",
    "TOKEN_LIFETIME_S",
    "App",
    "Apps",
    "Caller",
    "GitHubRefusal",
    "Installation",
    "IssuedToken",
    "private_key_pem",
]

CREATE_INSTALLATION_ACCESS_DOCS = (
    "https://docs.github.com/rest/apps/apps#create-an-installation-access-token-for-an-app"
)
MAX_EXP_AHEAD_S = 600  # "no more than 10 minutes into the future"
IAT_SKEW_S = 60  # an `iat` this far in the future is still accepted (clock drift)
TOKEN_LIFETIME_S = 3600
DEFAULT_PERMISSIONS = {
    "contents": "write",
    "metadata": "read",
    "checks": "write",
    "issues": "write",
    "pull_requests": "write",
    "statuses": "write",
}

NOT_DECODED = "A JSON web token could not be decoded"
EXP_TOO_FAR = "'Expiration time' claim ('exp') is too far in the future"
EXP_INVALID = (
    "'Expiration time' claim ('exp') must be a numeric value representing the future time "
    "at which the assertion expires"
)
IAT_INVALID = (
    "'Issued at' claim ('iat') must be an Integer representing the time that the assertion "
    "was issued"
)
NO_ACCESS = "Resource not accessible by integration"
SUSPENDED = "This installation has been suspended"


def private_key_pem(key: rsa.RSAPrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,  # "BEGIN RSA PRIVATE KEY", like GitHub's
        serialization.NoEncryption(),
    ).decode()


def _rfc3339(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _segment(token: str, index: int) -> dict[str, Any]:
    part = token.split(".")[index]
    data = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
    decoded = json.loads(data)
    if not isinstance(decoded, dict):
        raise ValueError("not an object")
    return decoded


class Apps:
    """Thread-safe registry of Apps, installations and issued installation tokens."""

    def __init__(self, clock: Clock = system_clock) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self._apps: dict[int, App] = {}
            self._installations: dict[int, Installation] = {}
            self._tokens: dict[str, IssuedToken] = {}
            self._next_app = 1001
            self._next_installation = 5001
            self.token_lifetime_s = TOKEN_LIFETIME_S
            self.tokens_issued = 0

    # --- registration (the control API) ---------------------------------------------

    def register(
        self,
        *,
        app_id: int | None = None,
        client_id: str | None = None,
        public_key_pem: str | None = None,
        slug: str | None = None,
    ) -> tuple[App, str | None]:
        """(the App, its private key PEM when the simulator made the key pair, else None)."""
        private_pem = None
        if public_key_pem is None:
            key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            public_key = key.public_key()
            private_pem = private_key_pem(key)
        else:
            try:
                loaded = serialization.load_pem_public_key(public_key_pem.encode())
            except ValueError:
                raise BadRequest("public_key must be an RSA public key in PEM.") from None
            if not isinstance(loaded, RSAPublicKey):
                raise BadRequest("public_key must be an RSA public key (GitHub signs RS256).")
            public_key = loaded
        with self._lock:
            number = app_id if app_id is not None else self._next_app
            if number in self._apps:
                raise BadRequest(f"app_id {number} is already registered.")
            self._next_app = max(self._next_app, number + 1)
            app = App(
                number,
                client_id or f"Iv23li{secrets.token_hex(6)}",
                slug or f"hookledger-sim-{number}",
                public_key,
            )
            if any(a.client_id == app.client_id for a in self._apps.values()):
                raise BadRequest(f"client_id {app.client_id} is already registered.")
            self._apps[number] = app
        return app, private_pem

    def install(
        self,
        app_id: int,
        account: str,
        repositories: list[str] | None = None,
        permissions: dict[str, str] | None = None,
        installation_id: int | None = None,
    ) -> Installation:
        with self._lock:
            if app_id not in self._apps:
                raise NotFound(f"No App {app_id} is registered.")
            number = installation_id if installation_id is not None else self._next_installation
            if number in self._installations:
                raise BadRequest(f"installation {number} already exists.")
            self._next_installation = max(self._next_installation, number + 1)
            installation = Installation(
                number,
                app_id,
                account,
                None if repositories is None else tuple(repositories),
                dict(permissions or DEFAULT_PERMISSIONS),
            )
            self._installations[number] = installation
            return installation

    def update(self, installation_id: int, **changes: Any) -> Installation:
        """Suspend, delete, or change repositories / permissions of an installation."""
        with self._lock:
            current = self._installation(installation_id)
            if "repositories" in changes and changes["repositories"] is not None:
                changes["repositories"] = tuple(changes["repositories"])
            updated = replace(current, **changes)
            self._installations[installation_id] = updated
            if updated.deleted:  # uninstalling revokes its tokens
                self._tokens = {
                    t: i for t, i in self._tokens.items() if i.installation_id != installation_id
                }
            return updated

    def expire_tokens(self, installation_id: int | None = None) -> int:
        """Make issued tokens (of one installation, or all) expire now; how many."""
        now = self._clock()
        with self._lock:
            hit = [
                t
                for t, issued in self._tokens.items()
                if installation_id is None or issued.installation_id == installation_id
            ]
            for token in hit:
                self._tokens[token] = replace(self._tokens[token], expires_at=now)
            return len(hit)

    def summary(self) -> dict[str, Any]:
        now = self._clock()
        with self._lock:
            return {
                "apps": [
                    {"id": a.id, "client_id": a.client_id, "slug": a.slug}
                    for a in self._apps.values()
                ],
                "installations": [i.json() for i in self._installations.values()],
                "token_lifetime_s": self.token_lifetime_s,
                "tokens_issued": self.tokens_issued,
                "tokens_live": sum(1 for t in self._tokens.values() if t.expires_at > now),
            }

    def _installation(self, installation_id: int) -> Installation:
        found = self._installations.get(installation_id)
        if found is None:
            raise NotFound(f"No installation {installation_id}.")
        return found

    # --- what GitHub does -------------------------------------------------------------

    def app_from_jwt(self, authorization: str | None) -> App:
        """The App whose JWT authorizes this request, checked as GitHub checks it."""
        token = _bearer(authorization)
        if token is None:
            raise GitHubRefusal(401, NOT_DECODED)
        try:
            header, claims = _segment(token, 0), _segment(token, 1)
        except (ValueError, IndexError, UnicodeDecodeError):
            raise GitHubRefusal(401, NOT_DECODED) from None
        if header.get("alg") != "RS256":
            raise GitHubRefusal(401, NOT_DECODED)
        app = self._app_for(claims.get("iss"))
        try:  # the signature only: GitHub's claim rules follow, with GitHub's messages
            jwt.decode(
                token,
                app.public_key,
                algorithms=["RS256"],
                options={"verify_exp": False, "verify_iat": False, "verify_nbf": False},
            )
        except jwt.PyJWTError:
            raise GitHubRefusal(401, NOT_DECODED) from None
        now = int(self._clock().timestamp())
        iat, exp = claims.get("iat"), claims.get("exp")
        if type(iat) is not int or iat > now + IAT_SKEW_S:
            raise GitHubRefusal(401, IAT_INVALID)
        if type(exp) is not int or exp <= now:
            raise GitHubRefusal(401, EXP_INVALID)
        if exp > now + MAX_EXP_AHEAD_S:
            raise GitHubRefusal(401, EXP_TOO_FAR)
        return app

    def _app_for(self, iss: Any) -> App:
        with self._lock:
            for app in self._apps.values():
                if iss in (app.client_id, str(app.id), app.id) and type(iss) is not bool:
                    return app
        raise GitHubRefusal(404, "Integration not found")

    def issue_token(
        self, app: App, installation_id: int, permissions: dict[str, str] | None = None
    ) -> tuple[IssuedToken, Installation]:
        now = self._clock()
        with self._lock:
            installation = self._installations.get(installation_id)
            if installation is None or installation.deleted or installation.app_id != app.id:
                raise GitHubRefusal(404, "Not Found", CREATE_INSTALLATION_ACCESS_DOCS)
            if installation.suspended:
                raise GitHubRefusal(403, SUSPENDED, CREATE_INSTALLATION_ACCESS_DOCS)
            granted = dict(installation.permissions)
            if permissions:
                for name, level in permissions.items():
                    if not installation.grants(name, level):
                        raise GitHubRefusal(
                            422,
                            "The permissions requested are not granted to this installation.",
                            CREATE_INSTALLATION_ACCESS_DOCS,
                        )
                granted = dict(permissions)
            issued = IssuedToken(
                f"ghs_{secrets.token_urlsafe(27)}",
                installation_id,
                now + timedelta(seconds=self.token_lifetime_s),
                granted,
            )
            self._tokens[issued.token] = issued
            self.tokens_issued += 1
            return issued, installation

    def token_json(
        self, issued: IssuedToken, installation: Installation, base_url: str
    ) -> dict[str, Any]:
        """The "Installation Token" answer; an installation on selected repositories lists
        them, each a whole "Repository" (`github_objects.repository`)."""
        body: dict[str, Any] = {
            "token": issued.token,
            "expires_at": _rfc3339(issued.expires_at),
            "permissions": dict(issued.permissions),
            "repository_selection": "all" if installation.repositories is None else "selected",
        }
        if installation.repositories is not None:
            body["repositories"] = [
                repository(base_url, name) for name in installation.repositories
            ]
        return body

    def caller(self, authorization: str | None) -> Caller:
        """Who sends a repository request: 401 for an installation token that is unknown,
        expired or revoked; anyone else (no token, a personal token) as before Apps."""
        token = _bearer(authorization)
        if token is None or not token.startswith("ghs_"):
            return Caller()
        now = self._clock()
        with self._lock:
            issued = self._tokens.get(token)
            if issued is None or issued.expires_at <= now:
                raise GitHubRefusal(401, "Bad credentials")
            return Caller(issued.installation_id, dict(issued.permissions))

    def credential_of(self, authorization: str | None) -> tuple[str | None, int | None]:
        """(kind, installation id) of a request's credential, for the request log, never
        refusing: kind "installation" (a `ghs_` token; its installation when issued here),
        "app" (a JWT), "token" (any other), None without one."""
        token = _bearer(authorization)
        if token is None:
            return None, None
        if token.startswith("ghs_"):
            with self._lock:
                issued = self._tokens.get(token)
            return "installation", None if issued is None else issued.installation_id
        return ("app" if token.count(".") == 2 else "token"), None

    def authorize(self, caller: Caller, owner: str, repo: str, permission: str, level: str) -> None:
        """403 unless `caller`'s installation is live, covers `owner/repo` and holds
        `permission` at `level`; a caller with no installation passes."""
        if caller.installation_id is None:
            return
        wanted = {"X-Accepted-GitHub-Permissions": f"{permission}={level}"}
        with self._lock:
            installation = self._installations.get(caller.installation_id)
        if installation is None or installation.deleted:
            raise GitHubRefusal(401, "Bad credentials")
        if installation.suspended:
            raise GitHubRefusal(403, SUSPENDED)
        held = replace(installation, permissions=caller.permissions)  # the token's, at issue
        allowed = installation.grants(permission, level) and held.grants(permission, level)
        if not installation.covers(owner, repo) or not allowed:
            raise GitHubRefusal(403, NO_ACCESS, headers=wanted)


def _bearer(authorization: str | None) -> str | None:
    """The credential of `Authorization: Bearer X` or `token X` (GitHub takes both)."""
    if not authorization:
        return None
    scheme, _, value = authorization.strip().partition(" ")
    if scheme.lower() not in ("bearer", "token") or not value.strip():
        return None
    return value.strip()
