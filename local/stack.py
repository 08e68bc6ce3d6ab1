"""`make run`: the whole pipeline on this machine, in the foreground.

Starts the official Firestore emulator, the local Cloud Tasks emulator (queue created),
the Gemini + GitHub simulator (GitHub's sending side too: its App webhooks go to the
ingress's /github and are recorded as deliveries), the three functions under
functions-framework, and a scheduler loop calling reconcile and the GitHub delivery sweep
(reconcile's /github-deliveries) every `RECONCILE_EVERY_S` seconds. Prints one line
containing `hookledger ready` with the URLs, then one compact line per thing that
happens. Ctrl-C / SIGTERM stops every child by PID.

The pipeline's processes are started here for every stack: `make run`, the test kit
(hookledger/testing/launch.py), the suite's pipeline (tests/plugins/pipeline.py) and the
chaos stack (local/chaos/stack.py) call `start_pipeline` (or `start_pipeline_simulator` and
`start_pipeline_function` one child at a time), on ports from `fresh_ports`, again on new
ports after a clash (`start_on_fresh_ports`).

Ports (each overridable): FIRESTORE_EMULATOR_HOST (127.0.0.1:8686),
CLOUD_TASKS_EMULATOR_HOST (127.0.0.1:8123), CLOUD_TASKS_JWKS_PORT (8124),
GEMINI_BASE_URL (http://127.0.0.1:8090), INGRESS_PORT (8080), WORKER_PORT (8081),
RECONCILE_PORT (8082), CONSOLE_PORT (8099; the web console, `hookledger console`: when
the variable is unset and 8099 is taken, a free port is used and the ready line says which).

The functions run as a GitHub App (local/github_app.py): once the simulator is up, an App is
registered there with a generated key and installed on the demo accounts, and the worker
and reconcile get GITHUB_APP_ID / GITHUB_APP_PRIVATE_KEY and CONSOLE_URL (the check run's
Details link). `LOCAL_GITHUB_AUTH=token` keeps the personal-token path (no check runs).
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlparse

import requests

from local.cloudtasks_emulator.launch import start_cloudtasks
from local.firestore_emulator import start_firestore
from local.functions_server import start_function
from local.github_app import LocalApp, app_mode
from local.processes import (
    Service,
    ServiceError,
    free_port,
    listening_on,
    port_is_free,
    port_was_taken,
    start,
)
from local.simulator.client import SimulatorClient, start_simulator
from shared.config import LOCAL_GEMINI_SECRET, LOCAL_TASKS_SERVICE_ACCOUNT
from shared.handoff.tasks import ensure_queue, make_client
from shared.tracing.store import prune as prune_spans

REPO = Path(__file__).resolve().parents[1]
CONSOLE_PORT = 8099
FUNCTIONS = ("ingress", "worker", "reconcile")
Echo = Callable[[str, str], None]
T = TypeVar("T")
_SHOWN_FIELDS = ("source", "event", "delivery_id", "operation", "status", "by", "reason", "path")


@dataclass(frozen=True)
class Ports:
    firestore: int
    tasks: int
    jwks: int
    simulator: int
    ingress: int
    worker: int
    reconcile: int
    console: int

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> tuple[Ports, dict[int, str]]:
        """The ports, and which variable sets each (for the "port in use" message)."""

        def host_port(name: str, default: int) -> int:
            value = env.get(name, "")
            return int(value.rsplit(":", 1)[1]) if ":" in value else default

        def number(name: str, default: int) -> int:
            return int(env.get(name) or default)

        sim = urlparse(env.get("GEMINI_BASE_URL") or "http://127.0.0.1:8090").port or 8090
        ports = cls(
            firestore=host_port("FIRESTORE_EMULATOR_HOST", 8686),
            tasks=host_port("CLOUD_TASKS_EMULATOR_HOST", 8123),
            jwks=number("CLOUD_TASKS_JWKS_PORT", 8124),
            simulator=sim,
            ingress=number("INGRESS_PORT", 8080),
            worker=number("WORKER_PORT", 8081),
            reconcile=number("RECONCILE_PORT", 8082),
            console=number("CONSOLE_PORT", CONSOLE_PORT),
        )
        if not env.get("CONSOLE_PORT") and not port_is_free(ports.console):
            # Only a convenience: another console (or stack) holds the default.
            ports = dataclasses.replace(ports, console=free_port())
        names = {
            ports.firestore: "FIRESTORE_EMULATOR_HOST",
            ports.tasks: "CLOUD_TASKS_EMULATOR_HOST",
            ports.jwks: "CLOUD_TASKS_JWKS_PORT",
            ports.simulator: "GEMINI_BASE_URL",
            ports.ingress: "INGRESS_PORT",
            ports.worker: "WORKER_PORT",
            ports.reconcile: "RECONCILE_PORT",
            ports.console: "CONSOLE_PORT",
        }
        return ports, names


def compact(name: str, line: str) -> str | None:
    """One readable line for what a child printed, or None for noise."""
    line = line.strip()
    if not line:
        return None
    if line.startswith("{"):
        try:
            entry = json.loads(line)
        except ValueError:
            return f"{name:<10} {line}"
        if str(entry.get("message", "")).startswith("reconcile run"):
            # One line per run that did something; quiet runs stay quiet.
            counts = {k: v for k, v in entry.items() if type(v) is int and v and k != "pages"}
            if not counts:
                return None
            entry["message"] += " " + " ".join(f"{k}={v}" for k, v in counts.items())
        fields = " ".join(f"{k}={entry[k]}" for k in _SHOWN_FIELDS if entry.get(k) is not None)
        level = entry.get("severity", "INFO")
        marker = "" if level in ("INFO", "DEBUG") else f"{level} "
        return f"{name:<10} {marker}{entry.get('message', '')}  {fields}".rstrip()
    if name == "cloudtasks" and line.startswith("dispatch "):
        return f"{name:<10} {line}"
    if name in ("ingress", "worker", "reconcile", "console") and (
        "Traceback" in line or "Error" in line
    ):
        return f"{name:<10} {line}"
    return None


def _echo(name: str, line: str) -> None:
    text = compact(name, line)
    if text is not None:
        print(f"{time.strftime('%H:%M:%S')} {text}", flush=True)


# What `make run` traces with, unless the environment says otherwise: every trace, to a file.
LOCAL_TRACING = {"TRACING": "file", "TRACE_SAMPLE_RATIO": "1"}
KEEP_SPANS_S = 7 * 24 * 3600


def function_env(
    ports: Ports, base: Mapping[str, str], *, app: LocalApp | None = None
) -> dict[str, str]:
    """The environment every function process gets; with `app`, the credentials to act as
    that GitHub App. CONSOLE_URL (the check run's Details link) defaults to the console."""
    sim = f"http://127.0.0.1:{ports.simulator}"
    worker_url = f"http://127.0.0.1:{ports.worker}/"
    env = {
        **base,
        "PYTHONUNBUFFERED": "1",
        "GOOGLE_CLOUD_PROJECT": base.get("GOOGLE_CLOUD_PROJECT", "demo-hookledger"),
        "FIRESTORE_EMULATOR_HOST": f"127.0.0.1:{ports.firestore}",
        "CLOUD_TASKS_EMULATOR_HOST": f"127.0.0.1:{ports.tasks}",
        "WORKER_URL": worker_url,
        "RECONCILE_URL": f"http://127.0.0.1:{ports.reconcile}/",
        "TASKS_SERVICE_ACCOUNT": LOCAL_TASKS_SERVICE_ACCOUNT,
        "OIDC_CERTS_URL": f"http://127.0.0.1:{ports.jwks}/jwks.json",
        "GEMINI_BASE_URL": sim,
        "GEMINI_API_KEY": base.get("GEMINI_API_KEY") or "local-simulator-key",
        "GITHUB_API_URL": sim,
        "RECONCILE_GRACE_S": base.get("RECONCILE_GRACE_S", "10"),
        # A failed GitHub delivery is recovered within a minute or so, not GitHub's 2.
        "GITHUB_SWEEP_GRACE_S": base.get("GITHUB_SWEEP_GRACE_S", "20"),
        "CONSOLE_URL": base.get("CONSOLE_URL") or f"http://127.0.0.1:{ports.console}",
        # Pushes share batches as deployed, sealed within seconds rather than a minute.
        "REVIEW_GROUP_WINDOW_S": base.get("REVIEW_GROUP_WINDOW_S", "5"),
    }
    if app is not None:
        env.update(app.env())
    return env


def fresh_ports(**given: int) -> Ports:
    """`Ports` with the `given` ones as they are and a distinct free port for every other."""
    taken = set(given.values())
    chosen = dict(given)
    for name in (f.name for f in dataclasses.fields(Ports)):
        while name not in chosen:
            port = free_port()
            if port not in taken:
                chosen[name] = port
                taken.add(port)
    return Ports(**chosen)


def start_on_fresh_ports(start: Callable[[list[Service]], T], *, attempts: int = 3) -> T:
    """`start(services)`, again after a port clash: `start` picks its ports (`fresh_ports`)
    and appends each child to `services` as it comes up.

    `free_port()` only says a port was free a moment ago: a parallel run may bind it first.
    On any failure the children started are stopped by PID; an error that is not a port
    clash, or the last attempt's, propagates.
    """
    for attempt in range(1, attempts + 1):
        services: list[Service] = []
        try:
            return start(services)
        except BaseException as exc:
            for service in reversed(services):
                service.stop()
            clash = isinstance(exc, ServiceError) and port_was_taken(exc)
            if attempt == attempts or not clash:
                raise
    raise AssertionError("unreachable: the last attempt returns or raises")


def start_pipeline_simulator(
    ports: Ports, env: Mapping[str, str], *, github_webhook_url: str = "", echo: Echo | None = None
) -> Service:
    """The Gemini + GitHub simulator on `ports.simulator`: its completion webhooks go to the
    ingress, signed with the first secret the functions verify; GitHub's App webhooks go to
    `github_webhook_url` (none when empty)."""
    secret = env.get("GEMINI_WEBHOOK_SECRETS", LOCAL_GEMINI_SECRET).split(",")[0]
    return start_simulator(
        ports.simulator,
        webhook_url=f"http://127.0.0.1:{ports.ingress}/gemini",
        webhook_secret=secret,
        github_webhook_url=github_webhook_url,
        echo=echo,
    )


def start_pipeline_function(
    target: str, ports: Ports, env: Mapping[str, str], **options: Any
) -> Service:
    """Function `target` on its port of `ports`, with `env` and the OIDC audience it checks;
    `options` go to `start_function` (`source`, `root`, `echo`)."""
    audience = {
        "worker": {"OIDC_AUDIENCE": env["WORKER_URL"]},  # the queue's token names the worker
        "reconcile": {"OIDC_AUDIENCE": ""},  # called without a token, as locally scheduled
    }
    extra = audience.get(target, {})
    return start_function(target, getattr(ports, target), {**env, **extra}, **options)


def start_pipeline(
    ports: Ports,
    env: Mapping[str, str],
    services: list[Service],
    *,
    functions: Sequence[str] = FUNCTIONS,
    github_webhook_url: str = "",
    echo: Echo | None = None,
    **options: Any,
) -> None:
    """The simulator, then `functions` (each with `env`), on `ports`; each child is
    appended to `services` as it comes up (the caller stops them). The emulators are the
    caller's: they outlive a pipeline in the test kit and the suite."""
    services.append(
        start_pipeline_simulator(ports, env, github_webhook_url=github_webhook_url, echo=echo)
    )
    for target in functions:
        services.append(start_pipeline_function(target, ports, env, echo=echo, **options))


# `make run` loads the three apps that ship with hookledger (Terraform deploys the review).
MAKE_RUN_APPS = "apps.review,apps.articles,apps.classify"


class Stack:
    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = dict(env)
        self.env.setdefault("HOOKLEDGER_APPS", MAKE_RUN_APPS)
        self.ports, self.port_names = Ports.from_env(self.env)
        self.children: list[Service] = []
        self.stopping = threading.Event()
        self.app_mode = app_mode(self.env)
        self.app: LocalApp | None = None

    def check_ports(self) -> None:
        for port, name in self.port_names.items():
            if not port_is_free(port):
                raise ServiceError(
                    f"port {port} is in use; stop what holds it or set {name} to another port"
                )

    def start(self) -> None:
        p = self.ports
        # Spans go to the local store the console draws waterfalls from (shared/tracing);
        # what earlier runs wrote is kept a week.
        self.env = {**LOCAL_TRACING, "TRACE_DIR": str(REPO / ".local" / "traces"), **self.env}
        prune_spans(self.env["TRACE_DIR"], older_than_s=KEEP_SPANS_S, now=time.time())
        env = function_env(p, self.env)
        self.children.append(start_firestore(p.firestore, echo=_echo))
        # Durable like the real queue: a restart of `make run` loses no queued task
        # (state in the git-ignored .local/cloudtasks/; delete it to start empty).
        self.children.append(
            start_cloudtasks(p.tasks, p.jwks, data_dir=REPO / ".local" / "cloudtasks", echo=_echo)
        )
        queue = self.queue_path(env)
        ensure_queue(make_client(env["CLOUD_TASKS_EMULATOR_HOST"]), queue)
        # GitHub's sending side too: the App's webhooks, recorded as deliveries.
        self.children.append(
            start_pipeline_simulator(
                p, self.env, github_webhook_url=f"http://127.0.0.1:{p.ingress}/github", echo=_echo
            )
        )
        if self.app_mode:
            self.app = LocalApp.register(SimulatorClient(f"http://127.0.0.1:{p.simulator}"))
            env = function_env(p, self.env, app=self.app)
        for target in FUNCTIONS:
            self.children.append(start_pipeline_function(target, p, env, echo=_echo))
        self.children.append(
            start(
                "console",
                [sys.executable, "-m", "hookledger.console", "--port", str(p.console)],
                env=env,
                cwd=REPO,
                ready=listening_on(p.console),
                echo=_echo,
            )
        )

    @staticmethod
    def queue_path(env: Mapping[str, str]) -> str:
        return (
            f"projects/{env['GOOGLE_CLOUD_PROJECT']}/locations/"
            f"{env.get('TASKS_LOCATION', 'us-central1')}/queues/"
            f"{env.get('TASKS_QUEUE', 'hookledger-deliveries')}"
        )

    def ready_line(self) -> str:
        p = self.ports
        return (
            f"hookledger ready  ingress http://127.0.0.1:{p.ingress}  "
            f"worker http://127.0.0.1:{p.worker}  reconcile http://127.0.0.1:{p.reconcile}  "
            f"simulator http://127.0.0.1:{p.simulator}  firestore 127.0.0.1:{p.firestore}  "
            f"cloudtasks 127.0.0.1:{p.tasks}  console http://127.0.0.1:{p.console}/"
        )

    def github_line(self) -> str:
        """How the stack talks to GitHub, and where a push's check run shows."""
        p = self.ports
        if self.app is None:
            return "github     personal-token mode (LOCAL_GITHUB_AUTH=token): no check runs"
        installed = ", ".join(f"{a} #{n}" for a, n in self.app.installations)
        return (
            f"github     as App {self.app.client_id} (installed on {installed}); each push's "
            f"check run: console http://127.0.0.1:{p.console}/operations/<name>, "
            f"or http://127.0.0.1:{p.simulator}/_sim/github/check-runs?repo=OWNER/NAME"
        )

    def schedule_reconcile(self, every_s: float) -> None:
        """Call reconcile and the GitHub delivery sweep every `every_s` seconds, as Cloud
        Scheduler does in production.

        What a run did is in reconcile's own log; only a failed call is reported here.
        """
        base = f"http://127.0.0.1:{self.ports.reconcile}/"
        # Reconcile, then the GitHub delivery sweep (its own job in production).
        calls = (("reconcile", base), ("github delivery sweep", f"{base}github-deliveries"))
        while not self.stopping.wait(every_s):
            for what, url in calls:
                try:
                    response = requests.post(url, json={}, timeout=max(every_s, 30))
                    ok = response.status_code == 200
                    failure = None if ok else f"HTTP {response.status_code}"
                except requests.RequestException as exc:
                    failure = f"{type(exc).__name__}: {exc}"
                if failure is not None and not self.stopping.is_set():
                    message = f"{what} call failed: {failure}"
                    _echo("scheduler", json.dumps({"severity": "WARNING", "message": message}))

    def stop(self) -> None:
        self.stopping.set()
        for child in reversed(self.children):
            child.stop()
        self.children.clear()


def main() -> int:
    try:
        stack = Stack(os.environ)
        every_s = float(os.environ.get("RECONCILE_EVERY_S", "15"))
        stack.check_ports()
    except (ServiceError, ValueError) as exc:
        print(f"make run: {exc}", file=sys.stderr)
        return 2

    def on_signal(signum: int, frame: Any) -> None:
        # A second Ctrl-C or a SIGTERM sent to the whole group must not cut the clean-up short.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        stack.start()
        print(stack.ready_line(), flush=True)
        print(stack.github_line(), flush=True)
        threading.Thread(target=stack.schedule_reconcile, args=(every_s,), daemon=True).start()
        while all(child.alive() for child in stack.children):
            time.sleep(0.5)
        dead = [c.name for c in stack.children if not c.alive()]
        print(f"make run: {', '.join(dead)} exited; stopping everything", file=sys.stderr)
        return 1
    except ServiceError as exc:
        print(f"make run: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("stopping…", flush=True)
        return 0
    finally:
        stack.stop()
        print("hookledger stopped", flush=True)


if __name__ == "__main__":
    sys.exit(main())
