"""How a GitHub request is authenticated: the protocol every REST client takes, and the
personal-token provider (`GITHUB_TOKEN`, or none for public repositories).

    GitHubAuth                  headers(installation_id) / invalidate(installation_id, used)
    ├── TokenAuth               one personal token for every repository (here)
    └── AppAuth                 a GitHub App's installation tokens (`shared/github/app.py`)

`installation_id` is the App installation a webhook came from (`installation.id` of a
push); a provider that has no use for it ignores it. The REST client sends `headers(...)`
and, when GitHub answers 401, calls `invalidate` with the headers it sent: True means a
fresh `headers(...)` may succeed, and the request is sent once more (never twice).

This module imports nothing heavy: a deployment without an App never loads the JWT code.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol


class GitHubAuth(Protocol):
    """Authorization for GitHub REST calls; implementations are thread-safe."""

    def headers(self, installation_id: int | None) -> dict[str, str]:
        """The headers that authenticate a request for `installation_id` (may be empty).

        Raises `GitHubUnavailable` when a credential could not be had right now (worth a
        retry) and `GitHubRejected` when it never will (a refused key, a suspended
        installation)."""
        ...

    def invalidate(self, installation_id: int | None, used: Mapping[str, str]) -> bool:
        """GitHub answered 401 to a request sent with `used`: forget that credential.

        True when the next `headers(installation_id)` is a different credential worth one
        more try; False when there is nothing to renew (a personal token)."""
        ...


class TokenAuth:
    """A personal token (or none): the same header for every repository and installation."""

    def __init__(self, token: str = "") -> None:
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}

    def headers(self, installation_id: int | None = None) -> dict[str, str]:
        return dict(self._headers)

    def invalidate(self, installation_id: int | None, used: Mapping[str, str]) -> bool:
        return False  # a personal token cannot be renewed: the 401 stands

    def __repr__(self) -> str:  # never the token itself
        return f"TokenAuth({'token' if self._headers else 'anonymous'})"
