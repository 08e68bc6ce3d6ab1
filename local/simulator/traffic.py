"""A bounded log of the API requests the simulator received (GitHub and Gemini, not `/_sim`).

Tests read it through `GET /_sim/requests` to assert what was, or was not, fetched.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

MAX_ENTRIES = 1000


class RequestLog:
    """The last `MAX_ENTRIES` requests as `{"method", "path", "query"}`, oldest first."""

    def __init__(self, limit: int = MAX_ENTRIES) -> None:
        self._lock = threading.Lock()
        self._entries: deque[dict[str, Any]] = deque(maxlen=limit)

    def reset(self) -> None:
        with self._lock:
            self._entries.clear()

    def record(self, method: str, path: str, query: str) -> None:
        with self._lock:
            self._entries.append({"method": method, "path": path, "query": query})

    def entries(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._entries)
