"""The `serve` fixture: loopback HTTP servers for one test, every one closed at teardown.

    def test_x(serve):
        server = serve(Handler)     # a BaseHTTPRequestHandler subclass; server.url, .port

Classes that outlive a fixture (tests/jwks_server.py) call `local.loopback.serve` directly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler

import pytest

from local.loopback import Loopback, QuietHandler
from local.loopback import serve as start

__all__ = ["QuietHandler", "Serve", "serve"]

Serve = Callable[[type[BaseHTTPRequestHandler]], Loopback]


@pytest.fixture
def serve() -> Iterator[Serve]:
    started: list[Loopback] = []

    def serve(handler: type[BaseHTTPRequestHandler]) -> Loopback:
        started.append(start(handler))
        return started[-1]

    yield serve
    for server in reversed(started):
        server.close()
