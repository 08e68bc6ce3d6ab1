"""What every hookledger HTTP function shares: the `Reply`, `/healthz`, and the 405.

Each function (ingress, worker, reconcile) is an `Endpoint`, with no Flask in sight, so
tests drive it directly. A request is judged in two steps, so nothing is read that will
be refused anyway:

    preflight(method, path, headers, ceiling) -> Reply | Limit    before the body is read
    post(route, headers, body)                -> Reply            with at most Limit bytes

`functions/main.py` calls the two and reads the body in between; `handle(method, path,
headers, body)` does all three for a caller that already holds the body (tests).
The answers every function gives alike (docs/architecture.md, "Contracts"):

    GET|HEAD /healthz          200 {"status": "ok"}       nothing is built or checked
    a route it does not serve  404 {"error": "unknown route '/x'"}   (only with `routes`)
    any method but POST        405 {"error": "GET is not allowed …; use POST"}
    headers it refuses         what `check_headers` answers (the ingress: 400/401)
    over the body limit        413 {"error": "body over the N-byte limit"}  (`too_large`),
                               from Content-Length before reading, else once read

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


@dataclass(frozen=True)
class Limit:
    """Preflight passed: read at most `max_bytes` of the body, then `post(route, …)`."""

    route: str
    max_bytes: int


HEALTHY = Reply(200, {"status": "ok"})
# Cloud Functions refuses a request over 32 MiB before any code runs: no endpoint needs more.
REQUEST_LIMIT = 33_554_432


def too_large(limit: int) -> Reply:
    """The 413 answer (also for callers that refuse a body before reading it)."""
    return Reply(413, {"error": f"body over the {limit}-byte limit"})


class Endpoint(ABC):
    """One HTTP function: answers `/healthz` and wrong methods here, and POSTs in `post`.

    `routes` (paths without slashes) restricts which paths exist at all: any other path
    is a 404, checked before the method. Without it, every path takes a POST.
    Subclasses may refuse on headers alone (`check_headers`) and lower the body limit
    per route (`body_limit`); both run before the body is read.
    """

    routes: ClassVar[frozenset[str] | None] = None

    def preflight(
        self, method: str, path: str, headers: Mapping[str, str], ceiling: int = REQUEST_LIMIT
    ) -> Reply | Limit:
        """Judge a request on what precedes its body; `ceiling` is the function's own limit.

        Returns the answer when the request is refused (or is `/healthz`), else the
        `Limit` to read the body within. `headers` must be case-insensitive (Werkzeug's are).
        """
        route = path.strip("/")
        if route == "healthz" and method in ("GET", "HEAD"):
            return HEALTHY
        if self.routes is not None and route not in self.routes:
            return Reply(404, {"error": f"unknown route {path!r}"})
        if method != "POST":
            where = f" on /{route}" if self.routes is not None else ""
            return Reply(405, {"error": f"{method} is not allowed{where}; use POST"})
        refused = self.check_headers(route, headers)
        if refused is not None:
            return refused
        limit = min(ceiling, self.body_limit(route))
        declared = headers.get("Content-Length")
        if declared is not None:
            if not declared.isascii() or not declared.isdigit():
                return Reply(400, {"error": "malformed Content-Length"})
            if int(declared) > limit:
                return too_large(limit)
        return Limit(route, limit)

    def handle(
        self,
        method: str,
        path: str,
        headers: Mapping[str, str],
        body: bytes,
        ceiling: int = REQUEST_LIMIT,
    ) -> Reply:
        """Answer one request whose body is already read: preflight, size, then `post`."""
        decision = self.preflight(method, path, headers, ceiling)
        if isinstance(decision, Reply):
            return decision
        if len(body) > decision.max_bytes:
            return too_large(decision.max_bytes)
        return self.post(decision.route, headers, body)

    def check_headers(self, route: str, headers: Mapping[str, str]) -> Reply | None:
        """The refusal a POST to `route` earns from its headers alone, or None (default)."""
        return None

    def body_limit(self, route: str) -> int:
        """The most body bytes a POST to `route` may carry (default: the function's ceiling)."""
        return REQUEST_LIMIT

    @abstractmethod
    def post(self, route: str, headers: Mapping[str, str], body: bytes) -> Reply:
        """Answer a POST to `route` (the path without its slashes)."""
