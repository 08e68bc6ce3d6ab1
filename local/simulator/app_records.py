"""GitHub Apps' records (`apps.py` keeps them and applies GitHub's rules): an App, an
installation with its repositories and permissions, an issued installation token, and
the caller a repository request comes from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicKey

LEVELS = {"read": 1, "write": 2, "admin": 3}


@dataclass(frozen=True)
class App:
    id: int
    client_id: str
    slug: str
    public_key: RSAPublicKey = field(repr=False)


@dataclass(frozen=True)
class Installation:
    id: int
    app_id: int
    account: str
    repositories: tuple[str, ...] | None  # None: every repository of `account`
    permissions: dict[str, str]
    suspended: bool = False
    deleted: bool = False

    def covers(self, owner: str, repo: str) -> bool:
        if self.repositories is None:
            return owner.lower() == self.account.lower()
        return f"{owner}/{repo}".lower() in {r.lower() for r in self.repositories}

    def grants(self, permission: str, level: str) -> bool:
        held = self.permissions.get(permission)
        return held is not None and LEVELS.get(held, 0) >= LEVELS[level]

    def json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "app_id": self.app_id,
            "account": {"login": self.account},
            "repository_selection": "all" if self.repositories is None else "selected",
            "repositories": None if self.repositories is None else list(self.repositories),
            "permissions": dict(self.permissions),
            "suspended": self.suspended,
            "deleted": self.deleted,
        }


@dataclass(frozen=True)
class IssuedToken:
    token: str = field(repr=False)
    installation_id: int
    expires_at: datetime
    permissions: dict[str, str]


@dataclass(frozen=True)
class Caller:
    """Who a repository request comes from: an installation, or a personal/no token."""

    installation_id: int | None = None
    permissions: dict[str, str] = field(default_factory=dict)  # the token's own

    @property
    def rate_limit_subject(self) -> str:
        if self.installation_id is None:
            return "user ID 4242"
        return f"installation ID {self.installation_id}"
