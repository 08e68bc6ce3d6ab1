"""No cheap way to exhaust the ingress: what its headers refuse, it never reads.

The real ingress runs under functions-framework (gunicorn, as deployed) with the default
25 MiB `MAX_BODY_BYTES`; requests go over raw sockets so a test controls exactly which
bytes were sent when the answer arrives. Nothing here reaches Cloud Tasks: every request
is refused, or is an event without a handler (answered `ignored`, nothing enqueued).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from local.functions_server import start_function
from local.processes import Service, start_on_free_ports
from shared.config import LOCAL_GEMINI_SECRET
from shared.signatures import sign_standard_webhook

MAX_BODY = 26_214_400  # the default MAX_BODY_BYTES
GEMINI_LIMIT = 65_536  # the default MAX_GEMINI_BODY_BYTES
HELD = 6
SENT_PER_REQUEST = 8 * 1024 * 1024
# One body's worth: had the server buffered what it was sent, growth would reach
# HELD x SENT_PER_REQUEST = 48 MiB; a refused request costs a thread and a few KiB.
RSS_BOUND = MAX_BODY


@pytest.fixture(scope="module")
def ingress_server() -> Iterator[tuple[Service, int]]:
    env = {
        **os.environ,
        "GOOGLE_CLOUD_PROJECT": "demo-hookledger",
        "CLOUD_TASKS_EMULATOR_HOST": "127.0.0.1:9",  # never reached: nothing is enqueued
        "TASKS_TIMEOUT_S": "2",
    }
    for name in ("MAX_BODY_BYTES", "MAX_GEMINI_BODY_BYTES", "GEMINI_JWKS_URL"):
        env.pop(name, None)
    service, (port,) = start_on_free_ports(lambda port: start_function("ingress", port, env))
    try:
        yield service, port
    finally:
        service.stop()


def head(path: str, headers: dict[str, str], *, length: int | None = None) -> bytes:
    """A POST's request line and headers; chunked when no `length` is given."""
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    lines.append(
        f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked"
    )
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def status_of(sock: socket.socket) -> int:
    """The status code of the answer on `sock` (waits for the status line only)."""
    sock.settimeout(10)
    received = b""
    while b"\r\n" not in received:
        chunk = sock.recv(4096)
        if not chunk:
            raise AssertionError(f"connection closed before an answer: {received!r}")
        received += chunk
    return int(received.split(b" ", 2)[1])


def chunked(body: bytes, size: int = 8192) -> bytes:
    pieces = [body[i : i + size] for i in range(0, len(body), size)]
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"


def rss_kib(root: int) -> int:
    """VmRSS of `root` and every descendant (gunicorn's arbiter and its worker), in KiB."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    tree, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent]
        tree.update(children)
        frontier.extend(children)
    total = 0
    for pid in tree:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
    return total


# (name, path, headers, Content-Length, expected): each answered with only headers sent.
REFUSED_UNREAD = [
    ("unknown route", "/bitbucket", {}, MAX_BODY, 404),
    ("github without signature headers", "/github", {"X-GitHub-Event": "push"}, MAX_BODY, 401),
    ("gemini without signature headers", "/gemini", {"webhook-id": "msg_1"}, MAX_BODY, 401),
    (
        "github, well-formed headers, declared over the limit",
        "/github",
        {
            "X-Hub-Signature-256": "sha256=" + "0" * 64,
            "X-GitHub-Event": "push",
            "X-GitHub-Delivery": "d-1",
        },
        MAX_BODY + 1,
        413,
    ),
    (
        "gemini, well-formed headers, declared over its own limit",
        "/gemini",
        {
            "webhook-id": "msg_1",
            "webhook-timestamp": "{now}",
            "webhook-signature": "v1," + "A" * 44,
        },
        GEMINI_LIMIT + 1,
        413,
    ),
]


@pytest.mark.parametrize(
    ("name", "path", "headers", "length", "status"),
    [pytest.param(*c, id=c[0]) for c in REFUSED_UNREAD],
)
def test_a_refusal_arrives_before_any_body_byte_is_sent(
    ingress_server, name, path, headers, length, status
):
    _, port = ingress_server
    filled = {k: v.format(now=int(time.time())) for k, v in headers.items()}
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(head(path, filled, length=length))
        # Not one byte of the body was sent: an answer now was decided on headers alone.
        assert status_of(sock) == status, name


def test_held_unsigned_bodies_leave_the_ingress_memory_flat(ingress_server):
    """HELD requests declare MAX_BODY_BYTES (25 MiB) each and send 8 MiB of it, held open.

    Before, the ingress read every body before looking at its headers, and
    functions-framework read what was left after every answer: eight such requests took
    it from 53 to 344 MiB. Without the fix these answers never come until the bodies do. Bound: growth under one body (25 MiB),
    against HELD x 8 MiB = 48 MiB sent and HELD x 25 MiB = 150 MiB declared.
    """
    service, port = ingress_server
    with socket.create_connection(("127.0.0.1", port), timeout=30) as warm:
        warm.sendall(head("/github", {}, length=10))  # load the refusal path once
        assert status_of(warm) == 401
    before = rss_kib(service.pid)
    socks = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(HELD)]
    try:
        for i, sock in enumerate(socks):
            path = "/github" if i % 2 else "/gemini"
            sock.sendall(head(path, {"X-GitHub-Event": "push"}, length=MAX_BODY))

        def feed(sock: socket.socket) -> None:
            sock.settimeout(10)
            # The server answered and stopped reading (a reset): exactly the point.
            with contextlib.suppress(OSError):
                sock.sendall(b"x" * SENT_PER_REQUEST)

        feeders = [threading.Thread(target=feed, args=(s,)) for s in socks]
        for thread in feeders:
            thread.start()
        for thread in feeders:
            thread.join(30)
        during = rss_kib(service.pid)  # every request still open
        assert [status_of(sock) for sock in socks] == [401] * HELD
    finally:
        for sock in socks:
            sock.close()

    growth_kib = during - before
    assert growth_kib * 1024 < RSS_BOUND, f"RSS grew by {growth_kib} KiB holding {HELD} bodies"


def _signed_gemini(body: bytes) -> dict[str, str]:
    stamp = int(time.time())
    return {
        "webhook-id": "msg_chunked",
        "webhook-timestamp": str(stamp),
        "webhook-signature": sign_standard_webhook(LOCAL_GEMINI_SECRET, "msg_chunked", stamp, body),
    }


def test_a_chunked_body_is_read_up_to_the_limit_and_refused_past_it(ingress_server):
    _, port = ingress_server
    event = {"type": "interaction.requires_action", "data": {"id": "interactions/i1"}}
    small = json.dumps(event).encode()
    large = json.dumps({**event, "padding": "p" * GEMINI_LIMIT}).encode()
    answers = []
    for body in (small, large):
        with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
            sock.sendall(head("/gemini", _signed_gemini(body)) + chunked(body))
            answers.append(status_of(sock))
    # Read whole and verified (no handler: 200 ignored), then one past the limit: 413.
    assert answers == [200, 413]
