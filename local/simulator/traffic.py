"""A bounded log of the API requests the simulator received (GitHub and Gemini, not `/_sim`).

Tests read it through `GET /_sim/requests` to assert what was, or was not, fetched. A
GitHub GraphQL query (`POST /graphql`) also carries `files`: the "REF:PATH" expressions of
its variables, in order, so a test sees which files one request read.

A GitHub request is also kept with what it sent and who sent it, for `GET
/_sim/github/requests` (`github()`): `body` (the parsed JSON, None when there is none or
it is not JSON), `installation_id` (of an installation token the simulator issued, else
None), `auth` ("installation", "app" for an App JWT, "token" for any other token, or
None without one) and `api_version` (its `X-GitHub-Api-Version` header, None without one).
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

MAX_ENTRIES = 1000


class RequestLog:
    """The last `MAX_ENTRIES` requests as `{"method", "path", "query"}` (plus `files` for a
    GraphQL query), oldest first."""

    def __init__(self, limit: int = MAX_ENTRIES) -> None:
        self._lock = threading.Lock()
        self._entries: deque[tuple[dict[str, Any], dict[str, Any] | None]] = deque(maxlen=limit)

    def reset(self) -> None:
        with self._lock:
            self._entries.clear()

    def record(
        self,
        method: str,
        path: str,
        query: str,
        files: list[str] | None = None,
        github: dict[str, Any] | None = None,
    ) -> None:
        """One request; `github`: its `body`, `installation_id`, `auth` and `api_version`
        (GitHub only)."""
        entry: dict[str, Any] = {"method": method, "path": path, "query": query}
        if files is not None:
            entry["files"] = files
        with self._lock:
            self._entries.append((entry, github))

    def entries(self) -> list[dict[str, Any]]:
        """Every request `{method, path, query}` (and `files`), oldest first."""
        with self._lock:
            return [dict(entry) for entry, _github in self._entries]

    def github(self, method: str | None = None, path_prefix: str = "") -> list[dict[str, Any]]:
        """The GitHub requests (of `method`, under `path_prefix`), oldest first, each with
        `body`, `installation_id`, `auth` and `api_version` besides `method`, `path`,
        `query`."""
        with self._lock:
            kept = list(self._entries)
        return [
            {**entry, **github}
            for entry, github in kept
            if github is not None
            and method in (None, entry["method"])
            and entry["path"].startswith(path_prefix)
        ]
