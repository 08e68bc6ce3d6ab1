"""A bounded log of the API requests the simulator received (GitHub and Gemini, not `/_sim`).

Tests read it through `GET /_sim/requests` to assert what was, or was not, fetched. A
GitHub GraphQL query (`POST /graphql`) also carries `files`: the "REF:PATH" expressions of
its variables, in order, so a test sees which files one request read.
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
        self._entries: deque[dict[str, Any]] = deque(maxlen=limit)

    def reset(self) -> None:
        with self._lock:
            self._entries.clear()

    def record(self, method: str, path: str, query: str, files: list[str] | None = None) -> None:
        entry: dict[str, Any] = {"method": method, "path": path, "query": query}
        if files is not None:
            entry["files"] = files
        with self._lock:
            self._entries.append(entry)

    def entries(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._entries)
