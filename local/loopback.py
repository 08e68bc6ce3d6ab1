"""A loopback HTTP server on a free port, answered from a daemon thread: for tests and benches.

    with serve(Handler) as server:      # Handler: a BaseHTTPRequestHandler subclass
        server.url                      # http://127.0.0.1:<port>
        server.port

Handlers that subclass `QuietHandler` log nothing per request.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class QuietHandler(BaseHTTPRequestHandler):
    """A request handler that keeps test and bench output free of access-log lines."""

    def log_message(self, format: str, *args: object) -> None:
        return


class Loopback:
    """One running server; `close()` (or leaving the `with`) stops it and waits for its thread."""

    def __init__(self, handler: type[BaseHTTPRequestHandler], name: str | None = None) -> None:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.port = int(self.httpd.server_address[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, name=name, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> Loopback:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def serve(handler: type[BaseHTTPRequestHandler], name: str | None = None) -> Loopback:
    """Serve `handler` on a free 127.0.0.1 port until the returned server is closed."""
    return Loopback(handler, name)
