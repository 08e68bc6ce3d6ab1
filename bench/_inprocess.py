"""The three functions served from this process (so their client calls can be counted here).

    with InProcessStack.started(extra_env) as stack:   # emulators + simulator as children
        stack.post_push(payload, delivery_id)            # signed, into the in-process ingress
        stack.post_reconcile()

The Firestore emulator, the Cloud Tasks emulator and the simulator (local/stack.py's
launcher) run as child processes on free loopback ports (`local.stack.fresh_ports`; stopped
by PID at the end); ingress, worker and reconcile are the
real `functions/main.py` entry points, loaded by functions-framework's `create_app` and
served by werkzeug on threads of this process: the worker by a pool of as many threads as
its request concurrency (`local.functions_server.server_threads`), the others by a thread
per request. The process environment is set to what `local.stack.function_env` gives the
functions (this process serves them), and restored.
"""

from __future__ import annotations

import contextlib
import cProfile
import os
import pstats
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import requests

os.environ.setdefault("HOOKLEDGER_APPS", "apps.review")  # as functions/main.py
from google.cloud.tasks_v2 import types

from hookledger.sending import github_headers
from local.cloudtasks_emulator.launch import start_cloudtasks
from local.firestore_emulator import start_firestore
from local.functions_server import MAIN, PooledWSGIServer, server_threads
from local.processes import Service, free_port
from local.simulator.client import SimulatorClient
from local.stack import Ports, fresh_ports, function_env, start_pipeline_simulator
from shared.config import LOCAL_GITHUB_SECRET
from shared.handoff.tasks import ensure_queue, make_client

PROJECT = "demo-hookledger"
QUEUE = f"projects/{PROJECT}/locations/us-central1/queues/hookledger-deliveries"
BASE_ENV = {
    "GOOGLE_CLOUD_PROJECT": PROJECT,
    "REVIEW_PATH": "docs",
    "RECONCILE_GRACE_S": "0",
    "HTTP_TIMEOUT_S": "10",
    # One batch per push, the path these benches count; bench.e2e measures shared batches
    # beside it (docs/architecture.md, "Shared batches").
    "REVIEW_GROUP_REQUESTS": "0",
}
RETRY = types.RetryConfig(
    min_backoff=timedelta(seconds=0.1), max_backoff=timedelta(seconds=2), max_doublings=4
)
FUNCTIONS = ("ingress", "worker", "reconcile")


def distinct_free_ports(count: int) -> list[int]:
    ports: list[int] = []
    while len(ports) < count:
        port = free_port()
        if port not in ports:
            ports.append(port)
    return ports


@dataclass
class InProcessStack:
    ports: Ports
    env: dict[str, str]
    children: list[Service] = field(default_factory=list)
    servers: list[Any] = field(default_factory=list)
    http: requests.Session = field(default_factory=requests.Session)
    profiles: dict[str, Any] = field(default_factory=dict)  # target -> pstats.Stats

    @property
    def sim(self) -> SimulatorClient:
        return SimulatorClient(f"http://127.0.0.1:{self.ports.simulator}")

    @classmethod
    @contextlib.contextmanager
    def started(
        cls, extra_env: Mapping[str, str] | None = None, profile: tuple[str, ...] = ()
    ) -> Iterator[InProcessStack]:
        ports = fresh_ports()
        env = function_env(ports, {**BASE_ENV, **(extra_env or {})})
        saved = dict(os.environ)
        stack = cls(ports, env)
        try:
            os.environ.update(env)
            stack._start(profile)
            yield stack
        finally:
            stack._stop()
            os.environ.clear()
            os.environ.update(saved)

    def _start(self, profile: tuple[str, ...]) -> None:
        p = self.ports
        self.children.append(start_firestore(p.firestore))
        self.children.append(start_cloudtasks(p.tasks, p.jwks))
        ensure_queue(make_client(self.env["CLOUD_TASKS_EMULATOR_HOST"]), QUEUE, retry_config=RETRY)
        self.children.append(start_pipeline_simulator(p, self.env))
        from functions_framework import create_app
        from werkzeug.serving import make_server

        from shared.entrypoints import runtime

        runtime.reset()  # build every client from the environment set above
        for target in FUNCTIONS:
            os.environ["FUNCTION_TARGET"] = target  # what functions-framework sets when serving
            app = create_app(target=target, source=str(MAIN))
            if target in profile:
                app.wsgi_app = self._profiled(target, app.wsgi_app)  # type: ignore[method-assign]
            threads = server_threads(target, self.env)
            server: Any
            if threads is not None:
                # As deployed: at most the concurrency Terraform gives the function at once.
                server = PooledWSGIServer("127.0.0.1", getattr(p, target), app, int(threads))
            else:
                server = make_server("127.0.0.1", getattr(p, target), app, threaded=True)
            thread = threading.Thread(target=server.serve_forever, name=f"fn-{target}")
            thread.daemon = True
            thread.start()
            self.servers.append((server, thread))
        os.environ.pop("FUNCTION_TARGET", None)

    def _profiled(self, target: str, wsgi: Any) -> Any:
        """`wsgi` under cProfile, request by request, pooled into `profiles[target]`."""
        lock = threading.Lock()

        def app(environ: Any, start_response: Any) -> Any:
            profiler = cProfile.Profile()
            try:
                return list(profiler.runcall(wsgi, environ, start_response))
            finally:
                with lock:
                    if target in self.profiles:
                        self.profiles[target].add(profiler)
                    else:
                        self.profiles[target] = pstats.Stats(profiler)

        return app

    def _stop(self) -> None:
        for server, thread in reversed(self.servers):
            server.shutdown()
            thread.join(timeout=10)
            server.server_close()  # the listening socket, and a pool's threads
        for child in reversed(self.children):
            child.stop()

    # ------------------------------------------------------------------ requests

    def post_push(self, payload: bytes, delivery_id: str) -> requests.Response:
        return self.http.post(
            f"http://127.0.0.1:{self.ports.ingress}/github",
            data=payload,
            headers=github_headers("push", payload, LOCAL_GITHUB_SECRET, delivery_id),
            timeout=10,
        )

    def post_reconcile(self) -> dict[str, Any]:
        answer = self.http.post(f"http://127.0.0.1:{self.ports.reconcile}/", json={}, timeout=120)
        answer.raise_for_status()
        return dict(answer.json())
