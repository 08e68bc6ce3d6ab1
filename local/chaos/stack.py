"""The whole local stack on free loopback ports, with every child killable and freezable.

    with ChaosStack.started() as stack:
        stack.kill("worker"); stack.restart("worker")      # SIGKILL, then the same port
        stack.freeze("firestore"); stack.thaw("firestore")  # SIGSTOP / SIGCONT the group

Children: the official Firestore emulator, the Cloud Tasks emulator (persisting to a
temporary directory when the emulator supports `data_dir`), the simulator, and ingress,
worker and reconcile under functions-framework (the worker with its request concurrency,
local/functions_server.py), the last four started one at a time by local/stack.py's
launcher, on its `fresh_ports`. Every line a child prints is kept across
restarts (`lines(name)`), so the invariants can count settlement log lines. Every child is
stopped by PID when the context ends.

The worker makes one batch per push (`REVIEW_GROUP_REQUESTS=0`, what bench/e2e.py's
per-push rounds measure) until `share(settings)` restarts it with shared batches on; the
chaos scenarios all share (local/chaos/sharing.py).

The functions run as a GitHub App (local/github_app.py) unless `LOCAL_GITHUB_AUTH=token`:
the App is registered when the simulator first starts, and registered again with the same
ids and key after each `reset_data` or simulator restart, so every push makes a check run.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

from google.api_core.exceptions import GoogleAPIError
from google.cloud.tasks_v2 import types

from local.chaos.slow_ack import SlowAckProxy
from local.cloudtasks_emulator.launch import start_cloudtasks
from local.firestore_emulator import reset as reset_firestore
from local.firestore_emulator import start_firestore
from local.functions_server import REPO
from local.github_app import LocalApp, app_mode
from local.processes import Service
from local.simulator.client import SimulatorClient
from local.stack import (
    FUNCTIONS,
    Ports,
    fresh_ports,
    function_env,
    start_on_fresh_ports,
    start_pipeline_function,
    start_pipeline_simulator,
)
from shared.handoff.tasks import ensure_queue, make_client

PROJECT = "demo-hookledger"
QUEUE = f"projects/{PROJECT}/locations/us-central1/queues/hookledger-deliveries"
# Short reconcile timing so a lost webhook is found within seconds (see docs/reliability.md).
CHAOS_ENV = {
    "GOOGLE_CLOUD_PROJECT": PROJECT,
    "REVIEW_PATH": "docs",
    "RECONCILE_GRACE_S": "1",
    "RECONCILE_BACKOFF_FIRST_S": "1",
    "RECONCILE_BACKOFF_CAP_S": "4",
    # The sweep acts on a failed GitHub delivery 2 s after it failed (production: 2 min).
    "GITHUB_SWEEP_GRACE_S": "2",
    "HTTP_TIMEOUT_S": "5",
    # The shortest deadline Cloud Tasks takes, and a worker timeout just past it: a killed
    # worker's delivery lease (timeout + the 5 s margin) lets a retry take over in 25 s.
    "TASK_DISPATCH_DEADLINE_S": "15",
    "WORKER_TIMEOUT_S": "20",
    # A worker SIGKILLed mid-publish holds its outbox claim (the check run's item) this
    # long, not production's 5 min (at least 3 GitHub calls of HTTP_TIMEOUT_S).
    "OUTBOX_LEASE_S": "30",
    # One batch per push unless `ChaosStack.share` turns shared batches on (bench/e2e.py
    # measures both; every chaos scenario shares, local/chaos/sharing.py).
    "REVIEW_GROUP_REQUESTS": "0",
}
# Cloud Tasks' default backoff tops out at an hour; a chaos run wants retries within seconds.
RETRY = types.RetryConfig(
    min_backoff=timedelta(seconds=0.1), max_backoff=timedelta(seconds=5), max_doublings=5
)


def tasks_persistence_supported() -> bool:
    """True once `start_cloudtasks` takes a `data_dir` (tasks survive a restart)."""
    return "data_dir" in inspect.signature(start_cloudtasks).parameters


class ChaosStack:
    """Running children by name; see the module docstring. Not thread-safe for restarts."""

    def __init__(
        self,
        ports: Ports,
        env: Mapping[str, str],
        data_dir: str,
        *,
        root: Path = REPO,
        worker_threads: int | None = None,
        dispatch_limit: int | None = None,
        sharing: Mapping[str, str] | None = None,
    ) -> None:
        """`root`: the tree whose functions are served (another revision's worktree for
        bench/e2e.py --compare; the emulators and the simulator are always this tree's).
        `worker_threads`: the worker's request concurrency, else Terraform's
        (`local.functions_server.server_threads`). `dispatch_limit`: the queue's
        max_concurrent_dispatches, else the emulator's default (1,000). `sharing`: the
        `REVIEW_GROUP_*` settings the worker starts with (`share`)."""
        self.ports = ports
        self.env = function_env(ports, {**env, **CHAOS_ENV, **(sharing or {})})
        self.data_dir = data_dir
        self.root = root
        self.worker_threads = worker_threads
        self.dispatch_limit = dispatch_limit
        self.children: dict[str, Service] = {}
        # The Cloud Tasks emulator's time scale (backoff and dispatch deadlines), see
        # `tasks_time_scaled`.
        self.tasks_time_scale = 1.0
        self._lines: dict[str, list[str]] = {}
        self._lock = threading.Lock()
        self.sim = SimulatorClient(f"http://127.0.0.1:{ports.simulator}")
        # GitHub's webhooks reach the ingress through it (local/chaos/slow_ack.py).
        self.github_proxy = SlowAckProxy(self.ingress_url)
        self.app_mode = app_mode(self.env)
        self.app: LocalApp | None = None

    # ----------------------------------------------------------------- lifecycle

    @classmethod
    @contextlib.contextmanager
    def started(
        cls, env: Mapping[str, str] | None = None, *, sharing: Mapping[str, str] | None = None
    ) -> Iterator[ChaosStack]:
        """Start everything on fresh free ports (again on new ports after a clash); the
        worker with `sharing` (`share`), else one batch per push."""
        data_dir = tempfile.mkdtemp(prefix="hookledger-chaos-")
        base = env if env is not None else os.environ

        def start(_services: list[Service]) -> ChaosStack:
            stack = cls(fresh_ports(), base, data_dir, sharing=sharing)
            try:
                stack.start_all()
            except BaseException:
                stack.stop_all()  # its children are by name, not in `_services`
                raise
            return stack

        stack: ChaosStack | None = None
        try:
            stack = start_on_fresh_ports(start)
            yield stack
        finally:
            if stack is not None:
                stack.stop_all()
            shutil.rmtree(data_dir, ignore_errors=True)

    def start_all(self) -> None:
        for name in ("firestore", "cloudtasks", "simulator", *FUNCTIONS):
            self.start(name)

    def stop_all(self) -> None:
        for name in reversed(list(self.children)):
            self.children.pop(name).stop()
        self.github_proxy.close()

    def start(self, name: str) -> Service:
        """Start child `name` on its port; the Cloud Tasks queue is ensured after its start."""
        service = self._launchers()[name]()
        self.children[name] = service
        if name == "simulator" and self.app_mode:
            self._register_app()
        if name == "cloudtasks":
            limits = None
            if self.dispatch_limit is not None:
                limits = types.RateLimits(max_concurrent_dispatches=self.dispatch_limit)
            ensure_queue(
                make_client(self.env["CLOUD_TASKS_EMULATOR_HOST"]),
                QUEUE,
                retry_config=RETRY,
                rate_limits=limits,
            )
        return service

    def kill(self, name: str) -> None:
        """SIGKILL child `name`'s whole process group (no clean shutdown) and reap it."""
        service = self.children.pop(name)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(service.pid, signal.SIGKILL)
        service.stop(timeout=5)

    def restart(self, name: str) -> Service:
        return self.start(name)

    def share(self, settings: Mapping[str, str]) -> bool:
        """Run the worker (where items join groups) with these `REVIEW_GROUP_*` settings,
        restarting it only when they change; whether it was restarted."""
        if all(self.env.get(key) == value for key, value in settings.items()):
            return False
        self.env.update(settings)
        if "worker" in self.children:
            self.stop_and_start("worker")
        return True

    def stop(self, name: str) -> None:
        """Stop child `name` cleanly (SIGTERM), as a deploy takes an instance away."""
        self.children.pop(name).stop()

    def stop_and_start(self, name: str) -> Service:
        """Stop child `name` cleanly (SIGTERM) and start it again on its port."""
        self.children.pop(name).stop()
        return self.start(name)

    @contextlib.contextmanager
    def tasks_time_scaled(self, scale: float) -> Iterator[None]:
        """The Cloud Tasks emulator restarted on its data dir with `scale` (its backoff and
        dispatch deadlines run 1/scale times faster), and back at 1.0 afterwards."""
        self._restart_tasks(scale)
        try:
            yield
        finally:
            self._restart_tasks(1.0)

    def _restart_tasks(self, scale: float) -> None:
        self.children.pop("cloudtasks").stop()
        self.tasks_time_scale = scale
        self.start("cloudtasks")

    def freeze(self, name: str) -> None:
        """SIGSTOP child `name`'s process group (the emulator's JVM included)."""
        os.killpg(self.children[name].pid, signal.SIGSTOP)

    def thaw(self, name: str) -> None:
        os.killpg(self.children[name].pid, signal.SIGCONT)

    def tasks_left(self) -> bool | None:
        """Whether a task is still in the queue (None: the emulator did not answer). A retry
        a SIGKILL left scheduled is work not yet done: the scenario is not quiet."""
        client = make_client(self.env["CLOUD_TASKS_EMULATOR_HOST"])
        try:
            listed = client.list_tasks(request={"parent": QUEUE, "page_size": 1}, timeout=5)
            return next(iter(listed), None) is not None
        except GoogleAPIError:
            return None
        finally:
            client.transport.close()

    def reset_data(self) -> None:
        """Empty the queue, the Firestore database and the simulator (between scenarios, once
        quiet). The queue first: a retry a SIGKILL left scheduled would otherwise run the
        last scenario's push against the next one's empty data (a dead delivery there)."""
        make_client(self.env["CLOUD_TASKS_EMULATOR_HOST"]).purge_queue(name=QUEUE, timeout=10)
        for attempt in range(1, 4):
            try:
                reset_firestore(self.env["FIRESTORE_EMULATOR_HOST"], PROJECT)
                break
            except OSError:
                # A JVM just started on a loaded machine can miss the first 10 s deadline.
                if attempt == 3:
                    raise
        self.sim.reset()
        if self.app is not None:
            self.app.restore(self.sim)

    def _register_app(self) -> None:
        """The App and its installations in a (re)started simulator; the functions started
        after this get its credentials (`self.env`)."""
        if self.app is None:
            self.app = LocalApp.register(self.sim)
            self.env.update(self.app.env())
        else:
            self.app.restore(self.sim)

    def installation_for(self, repo: str) -> int | None:
        """The installation a push to `repo` carries, or None in token mode."""
        return None if self.app is None else self.app.installation_for(repo)

    # ----------------------------------------------------------------- output

    def lines(self, name: str) -> list[str]:
        """Every line child `name` printed since the stack started, restarts included."""
        with self._lock:
            return list(self._lines.get(name, []))

    def clear_lines(self) -> None:
        with self._lock:
            self._lines.clear()

    def _keep(self, name: str, line: str) -> None:
        with self._lock:
            self._lines.setdefault(name, []).append(line)

    # ----------------------------------------------------------------- urls

    @property
    def ingress_url(self) -> str:
        return f"http://127.0.0.1:{self.ports.ingress}"

    @property
    def reconcile_url(self) -> str:
        return f"http://127.0.0.1:{self.ports.reconcile}/"

    def _launchers(self) -> dict[str, Callable[[], Service]]:
        p, keep = self.ports, self._keep
        tasks_extra: dict[str, Any] = {}
        if tasks_persistence_supported():
            tasks_extra["data_dir"] = self.data_dir

        def function(target: str, extra: Mapping[str, str]) -> Callable[[], Service]:
            env = {**self.env, **extra}
            return lambda: start_pipeline_function(target, p, env, root=self.root, echo=keep)

        threads = {} if self.worker_threads is None else {"THREADS": str(self.worker_threads)}

        return {
            "firestore": lambda: start_firestore(p.firestore, echo=keep),
            "cloudtasks": lambda: start_cloudtasks(
                p.tasks, p.jwks, echo=keep, time_scale=self.tasks_time_scale, **tasks_extra
            ),
            # GitHub's sending side: every push goes through the proxy to /github.
            "simulator": lambda: start_pipeline_simulator(
                p, self.env, github_webhook_url=f"{self.github_proxy.url}/github", echo=keep
            ),
            "ingress": function("ingress", {}),
            "worker": function("worker", threads),
            # The reconcile driver calls it without a token, as `make run`'s loop does.
            "reconcile": function("reconcile", {}),
        }
