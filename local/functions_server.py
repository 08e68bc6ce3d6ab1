"""Serve a function from `functions/main.py` under functions-framework, as a child process.

The worker is served with the request concurrency Terraform gives it: functions-framework
runs gunicorn with `THREADS` threads (else 4 per CPU of this machine, whatever the
deployment's setting), so `start_function` sets `THREADS` for the worker to
`Config.worker_concurrency` unless the caller's environment sets it
(shared/config.py; terraform/functions.tf gives the deployed worker the same variable).

`PooledWSGIServer` is the in-process equivalent for benches that serve the functions on
threads of their own process (bench/_inprocess.py): at most `threads` requests at once.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from werkzeug.serving import BaseWSGIServer

from local.processes import Service, listening_on, start
from shared.config import DEFAULTS

REPO = Path(__file__).resolve().parents[1]
MAIN = REPO / "functions" / "main.py"


def server_threads(target: str, env: Mapping[str, str]) -> str | None:
    """The `THREADS` to serve `target` with: the caller's, else the worker's concurrency
    (`Config.worker_concurrency`); None leaves functions-framework's default."""
    if env.get("THREADS"):
        return env["THREADS"]
    if target == "worker":
        return str(DEFAULTS.worker_concurrency)
    return None


def start_function(
    target: str,
    port: int,
    env: Mapping[str, str],
    *,
    source: Path | None = None,
    root: Path = REPO,
    name: str | None = None,
    echo: Callable[[str, str], None] | None = None,
    timeout: float = 60.0,
) -> Service:
    """`functions-framework --target=TARGET` on 127.0.0.1:`port`; ready once it accepts.

    `root` is the tree served (default this repository): `source` defaults to its
    `functions/main.py`, and it is the working directory and first on PYTHONPATH, so the
    function imports that tree's `shared/` (another revision's worktree: bench/e2e.py
    --compare).
    """
    env = dict(env)
    threads = server_threads(target, env)
    if threads is not None:
        env["THREADS"] = threads
    if root != REPO:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(root), env.get("PYTHONPATH"))))
    source = source if source is not None else root / "functions" / "main.py"
    return start(
        name or target,
        [
            sys.executable,
            "-m",
            "functions_framework",
            f"--target={target}",
            f"--source={source}",
            "--host=127.0.0.1",
            f"--port={port}",
        ],
        env=env,
        cwd=root,
        ready=listening_on(port),
        timeout=timeout,
        echo=echo,
    )


class PooledWSGIServer(BaseWSGIServer):
    """werkzeug's WSGI server handing each connection to a pool of `threads` threads: at
    most `threads` requests run at once, the rest wait for a thread (as under gunicorn's
    threaded worker), where werkzeug's own threaded server starts a thread per request.

    One request per connection (HTTP/1.0, as werkzeug answers when not multithreaded), so
    an idle keep-alive connection never holds a thread. `serve_forever` on one thread,
    `shutdown()` then `server_close()` to stop; requests in flight finish first.
    """

    def __init__(self, host: str, port: int, app: Any, threads: int) -> None:
        if threads < 1:
            raise ValueError(f"threads must be at least 1, got {threads}")
        super().__init__(host, port, app)
        self.threads = threads
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix=f"wsgi-{port}")

    def process_request(self, request: Any, client_address: Any) -> None:
        self._pool.submit(self._handle, request, client_address)

    def _handle(self, request: socket.socket, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            self.shutdown_request(request)

    def server_close(self) -> None:
        super().server_close()
        self._pool.shutdown(wait=True)
