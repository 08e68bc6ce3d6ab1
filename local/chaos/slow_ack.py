"""A loopback proxy in front of the ingress's `/github`, where GitHub's webhooks go.

It passes every request through. For the deliveries it is told to slow (by
`X-GitHub-Delivery`), it holds the ingress's answer back for `hold_s` after the ingress
gave it: the hand-off has happened, yet GitHub (waiting 10 s) records the delivery as
failed. That is the `slow-ack` chaos scenario's fault; everything else sees the ingress,
and while the ingress is down the proxy drops the connection unanswered, as its address
would.
"""

from __future__ import annotations

import threading

import requests

from local import loopback

FORWARD_TIMEOUT_S = 60.0


class SlowAckProxy:
    """`url` forwards to `target`; `slow(guids, hold_s)` delays those answers."""

    def __init__(self, target: str) -> None:
        self.target = target.rstrip("/")
        self._slow: set[str] = set()
        self._hold_s = 0.0
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self.held = 0  # answers held back so far
        proxy = self

        class Handler(loopback.QuietHandler):
            def do_POST(self) -> None:
                proxy._forward(self)

        self._server = loopback.serve(Handler, name="slow-ack-proxy")
        self.url = self._server.url

    def slow(self, guids: set[str], hold_s: float) -> None:
        with self._lock:
            self._slow, self._hold_s = set(guids), hold_s

    def close(self) -> None:
        self._closing.set()  # let held answers go
        self._server.close()

    def _forward(self, handler: loopback.QuietHandler) -> None:
        body = handler.rfile.read(int(handler.headers.get("content-length") or 0))
        headers = {k: v for k, v in handler.headers.items() if k.lower() != "host"}
        try:
            answer = requests.post(
                f"{self.target}{handler.path}",
                data=body,
                headers=headers,
                timeout=FORWARD_TIMEOUT_S,
            )
            status, content = answer.status_code, answer.content
        except requests.RequestException:
            handler.close_connection = True  # the ingress is down: so is its address
            return
        with self._lock:
            hold = self._hold_s if handler.headers.get("X-GitHub-Delivery") in self._slow else 0
            self.held += 1 if hold else 0
        if hold:
            self._closing.wait(hold)  # the fault: the answer comes after GitHub gave up
        try:
            handler.send_response(status)
            handler.send_header("content-type", "application/json")
            handler.send_header("content-length", str(len(content)))
            handler.end_headers()
            handler.wfile.write(content)
        except OSError:
            pass  # GitHub closed the connection at its timeout: expected
