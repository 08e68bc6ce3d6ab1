"""GitHub server errors on any endpoint: the `github_errors` fault (`POST /_sim/faults`).

`{"count", "status"?: 503}`: the next `count` GitHub API requests, whatever the route
(repository routes, GraphQL, the App's own JWT calls), answer `status` (500..599) with
GitHub's body for it, before any rate limit or authorization is looked at; then GitHub
answers as usual. `POST /_sim/reset` turns it off. Counted in `github_errors.injected`.
"""

from __future__ import annotations

import threading
from typing import Any

from local.simulator.errors import BadRequest

KEY = "github_errors"
# GitHub's bodies for its own failures, as clients quote them.
MESSAGES = {
    500: "Server Error",
    502: "Server Error",
    503: "Service Unavailable",
    504: "We couldn't respond to your request in time. Sorry about that.",
}


def _parse(value: Any) -> tuple[int, int]:
    """(count, status) from the fault's value; BadRequest naming the bad field."""
    if not isinstance(value, dict):
        raise BadRequest(f"{KEY} must be an object {{count, status?}}.")
    unknown = sorted(set(value) - {"count", "status"})
    if unknown:
        raise BadRequest(f"{KEY} has unknown keys {unknown}.")
    count, status = value.get("count", 1), value.get("status", 503)
    if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= 10**6:
        raise BadRequest(f"{KEY}.count must be a whole number 0..1000000, got {count!r}.")
    if isinstance(status, bool) or not isinstance(status, int) or not 500 <= status <= 599:
        raise BadRequest(f"{KEY}.status must be a server error 500..599, got {status!r}.")
    return count, status


class GitHubErrors:
    """How many more GitHub requests fail, and with which status; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self._left, self._status, self._injected = 0, 503, 0

    @staticmethod
    def check(value: Any) -> None:
        """Validate a `github_errors` value without applying it (BadRequest)."""
        _parse(value)

    def set(self, value: Any) -> None:
        count, status = _parse(value)
        with self._lock:
            self._left, self._status = count, status

    def take(self) -> tuple[int, dict[str, Any]] | None:
        """(status, body) when this request is one of the failing ones, else None."""
        with self._lock:
            if self._left <= 0:
                return None
            self._left -= 1
            self._injected += 1
            status = self._status
        message = MESSAGES.get(status, "Server Error")
        return status, {"message": message, "documentation_url": "https://docs.github.com/rest"}

    def report(self) -> dict[str, Any]:
        with self._lock:
            return {"count": self._left, "status": self._status, "injected": self._injected}
