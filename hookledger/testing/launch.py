"""Start the kit's stack: every process of the pipeline on free loopback ports.

The official Firestore emulator, the local Cloud Tasks emulator (faithful timing and
tombstones), the Gemini + GitHub simulator (its completion webhooks and GitHub App
webhooks go to the ingress), and ingress, worker and reconcile under functions-framework,
served from local/crashing_main.py (functions/main.py with the crash plan's hook). The
functions run as a GitHub App registered in the simulator (local/github_app.py), installed
on the accounts of `INSTALLATIONS` (hookledger/testing/accounts.py) with those ids: the demo
accounts `hookledger` and `octo-org`, and `Codertocat`, the account of GitHub's example
payloads, as installation 1, the id those payloads carry.

The functions get the session's environment as it is when they start, with the apps'
settings a test chose (`launch(settings=...)`) over it and `KIT_SETTINGS` over both.

The two emulators start once per session (`start_stores`); the simulator and the functions
start for one set of apps (`launch`, with local/stack.py's launcher) and start again when a
test names other apps. Each process is stopped by PID (`Stores.stop`, `Launched.stop`), also
when a later one fails to start.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hookledger.testing.accounts import INSTALLATIONS
from local.cloudtasks_emulator.launch import start_cloudtasks
from local.crash_plan import CRASH_PLAN_VARIABLE
from local.firestore_emulator import start_firestore
from local.functions_server import REPO
from local.github_app import LocalApp
from local.inflight import INFLIGHT_VARIABLE
from local.processes import Service, ServiceError, start_on_free_ports
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
from shared.config import LOCAL_GEMINI_SECRET, LOCAL_GITHUB_SECRET

PROJECT = "demo-hookledger"
QUEUE_ID = "hookledger-kit"
CRASH_PLAN_FILE = "crash-plan.json"  # in the session's work directory
INFLIGHT_DIR = "inflight"  # likewise: the requests the functions serve now
CRASHING_MAIN = REPO / "local" / "crashing_main.py"
# Test-friendly behaviour, explicit: the session's environment cannot change these.
KIT_SETTINGS = {
    "GOOGLE_CLOUD_PROJECT": PROJECT,
    "TASKS_QUEUE": QUEUE_ID,
    "GITHUB_WEBHOOK_SECRETS": LOCAL_GITHUB_SECRET,
    "GEMINI_WEBHOOK_SECRETS": LOCAL_GEMINI_SECRET,
    "GEMINI_API_KEY": "local-simulator-key",  # never a real key, even if the shell has one
    "GITHUB_TOKEN": "",
    "HTTP_TIMEOUT_S": "5",
    # A crashed attempt's delivery lease (timeout + its margin over the deadline) ends in
    # 21 s rather than 10 min, so the retry after a `crash_at` runs within a test.
    "WORKER_TIMEOUT_S": "18",
    "TASK_DISPATCH_DEADLINE_S": "15",
    # A crashed deliverer's lease on an outbox item ends in 15 s (3 GitHub calls of
    # HTTP_TIMEOUT_S) rather than 5 min, so the sweep takes it over within a test.
    "OUTBOX_LEASE_S": "15",
    "RECONCILE_GRACE_S": "0",  # `reconcile()` looks at an operation however young
    "TRACING": "off",
}


@dataclass
class Stores:
    """The Firestore and Cloud Tasks emulators: started once per session, whatever apps run."""

    firestore_host: str
    tasks_host: str
    jwks_port: int
    services: list[Service] = field(default_factory=list)

    def stop(self) -> None:
        for service in reversed(self.services):
            service.stop()
        self.services.clear()


@dataclass
class Launched:
    """The simulator and the three functions running one set of apps: their URLs, the
    environment the functions got, and the processes (stopped by `stop`)."""

    apps: tuple[str, ...]
    firestore_host: str
    tasks_host: str
    sim: SimulatorClient
    app: LocalApp
    ingress_url: str
    worker_url: str
    reconcile_url: str
    env: dict[str, str]
    services: list[Service] = field(default_factory=list)

    @property
    def queue_path(self) -> str:
        return f"projects/{PROJECT}/locations/us-central1/queues/{QUEUE_ID}"

    def drop_queue(self, client: Any) -> None:
        """Delete the queue: nothing more is dispatched, no task name is remembered."""
        from google.api_core import exceptions

        with contextlib.suppress(exceptions.NotFound):
            client.delete_queue(name=self.queue_path, timeout=10)

    def create_queue(self, client: Any) -> None:
        """Create the queue (after `drop_queue`: no task, no remembered task name)."""
        from google.cloud.tasks_v2 import types
        from google.protobuf import duration_pb2

        from shared.handoff.tasks import ensure_queue

        # Retries at most 2 s apart: a retry waiting on a crashed attempt's lease comes soon
        # after the lease ends.
        retry = types.RetryConfig(
            max_attempts=-1,
            min_backoff=duration_pb2.Duration(nanos=100_000_000),
            max_backoff=duration_pb2.Duration(seconds=2),
        )
        ensure_queue(client, self.queue_path, retry_config=retry)

    def stop(self) -> None:
        for service in reversed(self.services):
            service.stop()
        self.services.clear()


@dataclass(frozen=True)
class Registered:
    """What a set of apps registers: `handlers` `{"source:event": [app, …]}`, and the
    names of the settings they declare (what a test may set for them)."""

    handlers: dict[str, list[str]]
    settings: tuple[str, ...]


def registrations(apps: Sequence[str], root: Path) -> Registered:
    """What `apps` register, learnt in a child process so the test session's own handler
    registry is left alone."""
    code = (
        "import json\n"
        "from shared import apps, handlers\n"
        "loaded = apps.load()\n"
        "print(json.dumps({'handlers': {f'{s}:{e}': [r.app for r in handlers.registrations(s, e)]"
        " for s, e in handlers.registered()},"
        " 'settings': [s.name for r in loaded for s in r.settings]}))\n"
    )
    env = {**os.environ, "HOOKLEDGER_APPS": ",".join(apps), "PYTHONPATH": _pythonpath(root)}
    done = subprocess.run(  # noqa: S603 (this interpreter, fixed code)
        [sys.executable, "-c", code],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if done.returncode != 0:
        raise ServiceError(f"the apps {list(apps)} cannot be loaded:\n{done.stderr.strip()}")
    found = json.loads(done.stdout.strip().splitlines()[-1])
    return Registered(dict(found["handlers"]), tuple(found["settings"]))


def _pythonpath(root: Path) -> str:
    """The user's project first (its apps import), then hookledger's own tree."""
    parts = [str(root), str(REPO), os.environ.get("PYTHONPATH", "")]
    return os.pathsep.join(dict.fromkeys(p for p in parts if p))


def start_stores() -> Stores:
    """The Firestore emulator and the Cloud Tasks emulator on free ports; ServiceError
    naming what failed to start (nothing is left running then)."""
    stores = Stores("", "", 0)
    try:
        firestore, (fs_port,) = start_on_free_ports(start_firestore)
        stores.services.append(firestore)
        tasks, (tasks_port, jwks_port) = start_on_free_ports(start_cloudtasks, count=2)
        stores.services.append(tasks)
    except BaseException:
        stores.stop()
        raise
    stores.firestore_host = f"127.0.0.1:{fs_port}"
    stores.tasks_host = f"127.0.0.1:{tasks_port}"
    stores.jwks_port = jwks_port
    return stores


def launch(
    stores: Stores,
    apps: Sequence[str],
    *,
    root: Path,
    workdir: Path,
    settings: Mapping[str, str | None] | None = None,
) -> Launched:
    """Start the simulator and the three functions running `apps` (module names) beside
    `stores`; `root` is the project whose apps load, `workdir` holds the crash plan;
    `settings` over the session's environment (None: unset). Raises ServiceError naming
    what failed to start (nothing of it is left running)."""
    chosen = dict(settings or {})
    environ = {k: v for k, v in os.environ.items() if chosen.get(k, v) is not None}
    base = {
        **environ,
        **{k: v for k, v in chosen.items() if v is not None},
        **KIT_SETTINGS,
        "HOOKLEDGER_APPS": ",".join(apps),
        "PYTHONPATH": _pythonpath(root),
        CRASH_PLAN_VARIABLE: str(workdir / CRASH_PLAN_FILE),
        INFLIGHT_VARIABLE: str(workdir / INFLIGHT_DIR),
    }
    (workdir / INFLIGHT_DIR).mkdir(exist_ok=True)
    stored = {
        "firestore": int(stores.firestore_host.rsplit(":", 1)[1]),
        "tasks": int(stores.tasks_host.rsplit(":", 1)[1]),
        "jwks": stores.jwks_port,
        "console": 0,  # no console: only the check runs' Details link names it
    }
    return start_on_fresh_ports(
        lambda services: _start_functions(tuple(apps), fresh_ports(**stored), base, services)
    )


def _start_functions(
    apps: tuple[str, ...], ports: Ports, base: Mapping[str, str], services: list[Service]
) -> Launched:
    """The simulator, the App, then the three functions on `ports` (appended to `services`);
    the App is registered before the functions start, to hand them its credentials."""
    ingress = f"http://127.0.0.1:{ports.ingress}"
    simulator = start_pipeline_simulator(ports, base, github_webhook_url=f"{ingress}/github")
    services.append(simulator)
    sim = SimulatorClient(f"http://127.0.0.1:{ports.simulator}")
    app = register_app(sim)
    env = function_env(ports, base, app=app)
    for target in FUNCTIONS:  # the kit calls reconcile directly, without a token
        services.append(start_pipeline_function(target, ports, env, source=CRASHING_MAIN))
    return Launched(
        apps=apps,
        firestore_host=env["FIRESTORE_EMULATOR_HOST"],
        tasks_host=env["CLOUD_TASKS_EMULATOR_HOST"],
        sim=sim,
        app=app,
        ingress_url=ingress,
        worker_url=env["WORKER_URL"].rstrip("/"),
        reconcile_url=env["RECONCILE_URL"].rstrip("/"),
        env=env,
        services=services,
    )


def register_app(sim: SimulatorClient) -> LocalApp:
    """The functions' App, installed on every account of `INSTALLATIONS` with its id."""
    registered = LocalApp.register(sim, ())
    for account, number in INSTALLATIONS.items():
        sim.install_github_app(registered.app_id, account, id=number)
    installations = tuple(INSTALLATIONS.items())
    return LocalApp(registered.app_id, registered.client_id, registered.private_key, installations)
