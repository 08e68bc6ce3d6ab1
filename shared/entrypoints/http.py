"""What every hookledger HTTP function shares: the `Reply`, `/healthz`, and the 405.

Each function (ingress, worker, reconcile) is an `Endpoint`: `handle(method, path,
headers, body) -> Reply`, with no Flask in sight, so tests drive it directly and
`functions/main.py` only reads the body and turns the `Reply` into a response.
The answers every function gives alike (docs/architecture.md, "Contracts"):

    GET|HEAD /healthz          200 {"status": "ok"}       nothing is built or checked
    a route it does not serve  404 {"error": "unknown route '/x'"}   (only with `routes`)
    any method but POST        405 {"error": "GET is not allowed …; use POST"}
    over the body limit        413 {"error": "body over the N-byte limit"}  (`too_large`)

This module imports nothing heavy: the ingress loads it at cold start.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar


@dataclass(frozen=True)
class Reply:
    """An HTTP answer: a status code and a JSON object body."""

    status: int
    body: dict[str, Any]


HEALTHY = Reply(200, {"status": "ok"})


def too_large(limit: int) -> Reply:
    """The 413 answer (also for callers that refuse a body before reading it)."""
    return Reply(413, {"error": f"body over the {limit}-byte limit"})


class Endpoint(ABC):
    """One HTTP function: answers `/healthz` and wrong methods here, and POSTs in `post`.

    `routes` (paths without slashes) restricts which paths exist at all: any other path
    is a 404, checked before the method. Without it, every path takes a POST.
    """

    routes: ClassVar[frozenset[str] | None] = None

    def handle(self, method: str, path: str, headers: Mapping[str, str], body: bytes) -> Reply:
        """Answer one request. `headers` must be case-insensitive (Werkzeug's are)."""
        route = path.strip("/")
        if route == "healthz" and method in ("GET", "HEAD"):
            return HEALTHY
        if self.routes is not None and route not in self.routes:
            return Reply(404, {"error": f"unknown route {path!r}"})
        if method != "POST":
            where = f" on /{route}" if self.routes is not None else ""
            return Reply(405, {"error": f"{method} is not allowed{where}; use POST"})
        return self.post(route, headers, body)

    @abstractmethod
    def post(self, route: str, headers: Mapping[str, str], body: bytes) -> Reply:
        """Answer a POST to `route` (the path without its slashes)."""
