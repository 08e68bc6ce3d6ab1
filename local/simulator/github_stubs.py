"""Answers a test sets for one GitHub route: a stub takes precedence over the simulated
route (and over the 501 of a route not simulated), until used up or the simulator reset.

`POST /_sim/github/stubs` `{"method", "path", "status"?: 200, "body"?: null, "headers"?:
{}, "times"?: null}`: `path` is exact (`/repos/o/r/issues/1/lock`) or a template whose
`{name}` segments match any one segment (`/repos/{owner}/{repo}/issues/{n}/lock`); the
query string is not looked at. `times` N answers the next N matching requests, null every
one until reset. The stub added last wins when several match. A stubbed request is in the
request log like any other; only the `github_errors` fault answers before a stub.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass
from typing import Any

from flask import Response

from local.simulator.errors import BadRequest

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD")
_SEGMENT = re.compile(r"\{[^/{}]+\}")


@dataclass
class Stub:
    id: int
    method: str
    path: str
    status: int
    body: Any
    headers: dict[str, str]
    times: int | None  # answers left; None: until reset
    used: int = 0

    def matches(self, method: str, path: str) -> bool:
        if method != self.method and not (method == "HEAD" and self.method == "GET"):
            return False
        parts = [re.escape(p) for p in _SEGMENT.split(self.path)]
        return re.fullmatch("[^/]+".join(parts), path.rstrip("/") or "/") is not None

    def json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "method": self.method,
            "path": self.path,
            "status": self.status,
            "body": self.body,
            "headers": self.headers,
            "times": self.times,
            "used": self.used,
        }

    def response(self) -> Response:
        data = b"" if self.body is None else json.dumps(self.body).encode()
        answer = Response(data, status=self.status, mimetype="application/json")
        answer.headers.update(self.headers)
        return answer


def _checked(spec: dict[str, Any]) -> tuple[str, str, int, Any, dict[str, str], int | None]:
    method, path = spec.get("method"), spec.get("path")
    if not isinstance(method, str) or method.upper() not in METHODS:
        raise BadRequest(f"method must be one of {list(METHODS)}, got {method!r}.")
    if not isinstance(path, str) or not path.startswith("/"):
        raise BadRequest(f"path must start with '/', got {path!r}.")
    status = spec.get("status", 200)
    if not isinstance(status, int) or isinstance(status, bool) or not 100 <= status <= 599:
        raise BadRequest(f"status must be an HTTP status 100..599, got {status!r}.")
    headers = spec.get("headers") or {}
    if not isinstance(headers, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
    ):
        raise BadRequest("headers must map header names to strings.")
    times = spec.get("times")
    if times is not None and (not isinstance(times, int) or isinstance(times, bool) or times < 1):
        raise BadRequest(f"times must be null (until reset) or a whole number >= 1, got {times!r}.")
    unknown = sorted(set(spec) - {"method", "path", "status", "body", "headers", "times"})
    if unknown:
        raise BadRequest(f"Unknown stub keys {unknown}.")
    return method.upper(), path.rstrip("/") or "/", status, spec.get("body"), headers, times


class GitHubStubs:
    """The stubs set since the last reset; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self._stubs: list[Stub] = []
            self._next_id = 1

    def add(self, spec: dict[str, Any]) -> Stub:
        """A new stub from its control-API spec (BadRequest naming a bad field)."""
        method, path, status, body, headers, times = _checked(spec)
        with self._lock:
            stub = Stub(self._next_id, method, path, status, body, headers, times)
            self._next_id += 1
            self._stubs.append(stub)
            return stub

    def take(self, method: str, path: str) -> Response | None:
        """The answer of the newest stub matching this request, using one of its times."""
        with self._lock:
            for stub in reversed(self._stubs):
                if stub.times == 0 or not stub.matches(method, path):
                    continue
                stub.used += 1
                if stub.times is not None:
                    stub.times -= 1
                return stub.response()
        return None

    def every(self) -> list[dict[str, Any]]:
        with self._lock:
            return [stub.json() for stub in self._stubs]
