"""Loopback ports for tests that need "nothing answers here", safe beside a parallel run."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def refusing_port(host: str = "127.0.0.1") -> Iterator[int]:
    """A port that refuses every connection until the block ends.

    Bound but never listening: connections are refused, and unlike a `free_port()`
    nobody else (a second `make test`) can start listening on it meanwhile.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        yield int(sock.getsockname()[1])


@contextmanager
def silent_port(host: str = "127.0.0.1") -> Iterator[int]:
    """A port that accepts connections and never answers, until the block ends."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        sock.listen(8)
        yield int(sock.getsockname()[1])
