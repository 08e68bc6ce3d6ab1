"""The local worker is served with the request concurrency Terraform gives the deployed one.

`start_function("worker", ...)` (make run, the chaos stack, bench/e2e.py) runs
functions-framework with `THREADS` = `Config.worker_concurrency`, and bench/_inprocess.py
serves it with `PooledWSGIServer` of as many threads. Each test serves a function that
waits on a barrier of that many parties (twice as many requests are sent: two rounds) and
answers how many requests were in flight when the barrier let it through, and the THREADS
it was served with. A server running fewer at once never fills the barrier: it breaks and
the answer is 503. A bounded server sees exactly that many in flight, each round.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import requests

from local.functions_server import PooledWSGIServer, start_function
from local.processes import free_port, start_on_free_ports
from shared.config import DEFAULTS

pytestmark = pytest.mark.slow

# Generous: the barrier fills within milliseconds when the server runs enough requests at
# once; it breaks (and the test fails) only when it never can.
BARRIER_TIMEOUT_S = 60

BARRIER_FUNCTION = '''\
"""A worker that answers once BARRIER_PARTIES requests are being served at once."""

import os
import threading

import flask
import functions_framework

_barrier = threading.Barrier(
    int(os.environ["BARRIER_PARTIES"]), timeout=float(os.environ["BARRIER_TIMEOUT_S"])
)
_lock = threading.Lock()
_in_flight = [0]


@functions_framework.http
def worker(request: flask.Request) -> tuple[flask.Response, int]:
    with _lock:
        _in_flight[0] += 1
    try:
        try:
            _barrier.wait()
        except threading.BrokenBarrierError:
            return flask.jsonify({"in_flight": None}), 503
        with _lock:
            seen = _in_flight[0]
        # Everyone reads the count before anyone leaves: a second barrier round.
        _barrier.wait()
        return flask.jsonify({"in_flight": seen, "threads": os.environ.get("THREADS")}), 200
    finally:
        with _lock:
            _in_flight[0] -= 1
'''


def _answers(url: str, count: int) -> list[tuple[int, Any, Any]]:
    """`count` POSTs to `url`, all sent at once; (status, in_flight, THREADS) of each."""

    def one(_: int) -> tuple[int, Any, Any]:
        answer = requests.post(url, json={}, timeout=BARRIER_TIMEOUT_S * 4)
        body = answer.json()
        return answer.status_code, body.get("in_flight"), body.get("threads")

    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(one, range(count)))


@pytest.fixture
def barrier_source(tmp_path: Path) -> Path:
    source = tmp_path / "main.py"
    source.write_text(BARRIER_FUNCTION)
    return source


def test_the_local_worker_serves_its_terraform_concurrency_at_once(
    barrier_source: Path,
) -> None:
    concurrency = DEFAULTS.worker_concurrency
    env = {
        **{k: v for k, v in os.environ.items() if k != "THREADS"},
        "BARRIER_PARTIES": str(concurrency),
        "BARRIER_TIMEOUT_S": str(BARRIER_TIMEOUT_S),
    }
    service, (port,) = start_on_free_ports(
        lambda port: start_function("worker", port, env, source=barrier_source)
    )
    try:
        # Twice the concurrency: two full rounds, each exactly `concurrency` wide.
        answers = _answers(f"http://127.0.0.1:{port}/", 2 * concurrency)
    finally:
        service.stop()
    expected = (200, concurrency, str(concurrency))
    assert answers == [expected] * (2 * concurrency), service.output()


def test_the_caller_may_set_the_worker_threads(barrier_source: Path) -> None:
    env = {
        **os.environ,
        "THREADS": "3",
        "BARRIER_PARTIES": "3",
        "BARRIER_TIMEOUT_S": str(BARRIER_TIMEOUT_S),
    }
    service, (port,) = start_on_free_ports(
        lambda port: start_function("worker", port, env, source=barrier_source)
    )
    try:
        answers = _answers(f"http://127.0.0.1:{port}/", 6)
    finally:
        service.stop()
    assert answers == [(200, 3, "3")] * 6, service.output()


def _barrier_app(parties: int) -> Callable[..., Any]:
    """The same barrier as a plain WSGI app, for the in-process server."""
    barrier = threading.Barrier(parties, timeout=BARRIER_TIMEOUT_S)
    lock = threading.Lock()
    in_flight = [0]

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        with lock:
            in_flight[0] += 1
        try:
            try:
                barrier.wait()
            except threading.BrokenBarrierError:
                start_response("503 Busy", [("Content-Type", "application/json")])
                return [b'{"in_flight": null}']
            with lock:
                seen = in_flight[0]
            barrier.wait()
            start_response("200 OK", [("Content-Type", "application/json")])
            return [b'{"in_flight": %d}' % seen]
        finally:
            with lock:
                in_flight[0] -= 1

    return app


@pytest.fixture
def pooled_server() -> Iterator[Callable[[int], int]]:
    """Start a `PooledWSGIServer` of N threads around the barrier app; its port."""
    started: list[tuple[PooledWSGIServer, threading.Thread]] = []

    def serve(threads: int) -> int:
        server = PooledWSGIServer("127.0.0.1", free_port(), _barrier_app(threads), threads)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        started.append((server, thread))
        return int(server.server_port)

    yield serve
    for server, thread in started:
        server.shutdown()
        thread.join(timeout=10)
        server.server_close()


def test_the_in_process_pool_serves_its_threads_at_once(
    pooled_server: Callable[[int], int],
) -> None:
    threads = DEFAULTS.worker_concurrency
    port = pooled_server(threads)
    answers = _answers(f"http://127.0.0.1:{port}/", 2 * threads)
    assert answers == [(200, threads, None)] * (2 * threads)
