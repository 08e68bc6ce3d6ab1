"""The parts bench.ack is made of: the servers it starts, its scenarios, the CPU reading.

Kept apart from bench/ack.py (the orchestration and the JSON) so each stays small; see
bench/ack.py for what is measured and why.
"""

from __future__ import annotations

import os
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench._loadgen import LoadGenerator, Phase, http_caller, merge, summary
from local.cloudtasks_emulator.launch import start_cloudtasks
from local.functions_server import start_function
from local.processes import Service, start_on_free_ports

REPO = Path(__file__).resolve().parents[1]
PROJECT = "demo-hookledger"
LOCATION = "us-central1"
PUSH_FIXTURE = REPO / "tests" / "fixtures" / "github" / "push-with-new-branch.payload.json"
SERVER_THREADS = "8"  # functions-framework's default on 2 cores (cpu_count * 4), made explicit
SERVER_WORKERS = "1"
OVERHEAD_GOAL = 1.25
CPU_GOAL = 1.3  # ingress CPU per accepted delivery / (bare handler + one CreateTask)
FLOOR_GOAL = 1.15  # ingress CPU per accepted delivery / the floor's (issue 36, point 7)
MEMORY_GOAL = 2.0  # peak RSS over idle / (clients x body) under the large-body burst
BURST_BODY_BYTES = 1 << 20
# The account the bench's ingresses name in each task's OIDC token, as Terraform sets one.
TASKS_ACCOUNT = "hookledger-tasks@demo-hookledger.iam.gserviceaccount.com"

BARE_SOURCE = '''\
"""The baseline: functions-framework, read the body, answer 200 with a small JSON body."""

import flask
import functions_framework


@functions_framework.http
def bare(request: flask.Request) -> flask.Response:
    request.get_data(cache=False)
    return flask.jsonify({"status": "ok"})
'''


BARE_ENQUEUE_SOURCE = '''\
"""The CPU baseline: functions-framework, read the body, one CreateTask with it, answer 202."""

import os
import uuid

import flask
import functions_framework

from shared.handoff.tasks import TaskQueue, make_client, task_id_for

_queue = TaskQueue(
    make_client(os.environ["CLOUD_TASKS_EMULATOR_HOST"]), os.environ["BENCH_QUEUE"], timeout_s=5.0
)


@functions_framework.http
def bare_enqueue(request: flask.Request) -> tuple[flask.Response, int]:
    body = request.get_data(cache=False)
    _queue.enqueue(
        "http://127.0.0.1:9/worker",
        body,
        {"Content-Type": "application/json"},
        task_id=task_id_for("github", uuid.uuid4().hex),
    )
    return flask.jsonify({"status": "accepted"}), 202
'''


FLOOR_SOURCE = '''\
"""The floor: the least an ingress can do. Read the body, one plain CreateTask, answer 202.

The stock google-cloud-tasks client on a plain insecure channel to the emulator; the
request built on the raw protobuf (the cheapest way the client takes it), carrying the
body as is: no task name, no OIDC token, no dispatch deadline, no wrapper, no tracing.
"""

import os

import flask
import functions_framework
import grpc
from google.cloud.tasks_v2 import CloudTasksClient, HttpMethod, types
from google.cloud.tasks_v2.services.cloud_tasks.transports import CloudTasksGrpcTransport

_channel = grpc.insecure_channel(os.environ["CLOUD_TASKS_EMULATOR_HOST"])
_client = CloudTasksClient(transport=CloudTasksGrpcTransport(channel=_channel))
_queue = os.environ["BENCH_QUEUE"]


@functions_framework.http
def floor(request: flask.Request) -> tuple[flask.Response, int]:
    raw = types.CreateTaskRequest.pb()(parent=_queue)
    http = raw.task.http_request
    http.url = "http://127.0.0.1:9/worker"
    http.http_method = HttpMethod.POST
    http.body = request.get_data(cache=False)
    _client.create_task(request=types.CreateTaskRequest.wrap(raw), timeout=5.0)
    return flask.jsonify({"status": "accepted"}), 202
'''


FLOOR_DIRECT_SOURCE = '''\
"""The floor, its CreateTask sent as the ingress sends one: on the client's channel with the
client's metadata, straight to the gRPC method (shared/handoff/tasks.py, `TaskQueue._send`),
not through the client's per-call wrappers. Still no task name, OIDC token or deadline: the
ingress over this is what its checks cost, the call being the same.
"""

import os

import flask
import functions_framework
from google.api_core.gapic_v1 import routing_header
from google.cloud.tasks_v2 import HttpMethod, types
from google.cloud.tasks_v2.services.cloud_tasks.transports.base import DEFAULT_CLIENT_INFO

from shared.handoff.tasks import make_client

_queue = os.environ["BENCH_QUEUE"]
_channel = make_client(os.environ["CLOUD_TASKS_EMULATOR_HOST"]).transport.grpc_channel
_create = _channel.unary_unary(
    "/google.cloud.tasks.v2.CloudTasks/CreateTask",
    request_serializer=types.CreateTaskRequest.pb().SerializeToString,
    response_deserializer=None,
)
_metadata = (
    routing_header.to_grpc_metadata((("parent", _queue),)),
    DEFAULT_CLIENT_INFO.to_grpc_metadata(),
)


@functions_framework.http
def floor_direct(request: flask.Request) -> tuple[flask.Response, int]:
    raw = types.CreateTaskRequest.pb()(parent=_queue)
    http = raw.task.http_request
    http.url = "http://127.0.0.1:9/worker"
    http.http_method = HttpMethod.POST
    http.body = request.get_data(cache=False)
    _create(raw, timeout=5.0, metadata=_metadata)
    return flask.jsonify({"status": "accepted"}), 202
'''


def start_emulator() -> tuple[Service, str]:
    service, (port, _) = start_on_free_ports(start_cloudtasks, count=2)
    return service, f"127.0.0.1:{port}"


def paused_queue(emulator_host: str, queue_id: str) -> str:
    from shared.handoff.tasks import ensure_queue, make_client

    client = make_client(emulator_host)
    path = f"projects/{PROJECT}/locations/{LOCATION}/queues/{queue_id}"
    ensure_queue(client, path)
    client.pause_queue(name=path, timeout=5)
    return path


def serve_function(
    name: str, target: str, source: Path, env: dict[str, str], root: Path = REPO
) -> tuple[Service, int]:
    """`target` from `source` under functions-framework; `root` is the tree it imports
    `shared/` from (another revision's worktree: bench.ack --compare)."""
    service, (port,) = start_on_free_ports(
        lambda port: start_function(
            target,
            port,
            {**os.environ, **env, "THREADS": SERVER_THREADS, "WORKERS": SERVER_WORKERS},
            source=source,
            root=root,
            name=name,
        )
    )
    return service, port


def spans_written(directory: Path) -> Counter[str]:
    """How many spans of each name the local span store under `directory` holds."""
    from shared.tracing.store import read_spans

    return Counter(span.name for span in read_spans(directory))


def task_traceparent(emulator_host: str, queue_path: str) -> str | None:
    """The `traceparent` header of a task waiting in the (paused) queue, or None."""
    from google.cloud import tasks_v2

    from shared.handoff.tasks import make_client

    tasks = make_client(emulator_host).list_tasks(
        request={"parent": queue_path, "page_size": 1, "response_view": tasks_v2.Task.View.FULL},
        timeout=10,
    )
    for task in tasks:
        return dict(task.http_request.headers).get("traceparent")
    return None


def group_cpu_s(pgid: int) -> float:
    """CPU seconds (user + system) used so far by the live processes of process group `pgid`."""
    ticks = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the process ended while we looked
        if int(fields[2]) == pgid:  # fields after "(comm)": state, ppid, pgrp, ... utime, stime
            ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


@dataclass
class Scenario:
    """One measured thing: its load generator and the process groups whose CPU it costs."""

    name: str
    gen: LoadGenerator
    groups: dict[str, int]  # role -> process group id
    phases: list[Phase] = field(default_factory=list)
    cpu_s: dict[str, float] = field(default_factory=dict)
    # Per round: CPU ms per request of each role, so a run shows its own spread.
    round_cpu_ms: list[dict[str, float]] = field(default_factory=list)

    def round(self, count: int, limit_s: float) -> Phase:
        before = self._cpu()
        phase = self.gen.run(count, limit_s)
        after = self._cpu()
        done = len(phase.latencies_ms) or 1
        spent = {role: after[role] - before[role] for role in after}
        for role, seconds in spent.items():
            self.cpu_s[role] = self.cpu_s.get(role, 0.0) + seconds
        self.round_cpu_ms.append({role: seconds * 1000 / done for role, seconds in spent.items()})
        self.phases.append(phase)
        return phase

    def _cpu(self) -> dict[str, float]:
        cpu = {role: group_cpu_s(pgid) for role, pgid in self.groups.items()}
        cpu["load generator"] = time.process_time()
        return cpu

    def result(self) -> dict[str, Any]:
        pooled = summary(merge(self.phases))
        done = pooled["requests"] or 1
        pooled["cpu_ms_per_request"] = {
            role: round(seconds * 1000 / done, 3) for role, seconds in sorted(self.cpu_s.items())
        }
        return pooled


def http_scenario(
    name: str,
    port: int,
    clients: int,
    groups: dict[str, int],
    make_request: Callable[[int], tuple[str, str, dict[str, str], bytes]],
    expect: int,
    servers: set[str],
) -> Scenario:
    callers = [
        http_caller(
            "127.0.0.1",
            port,
            make_request,
            expect,
            on_response=lambda r: servers.add(f"{name}: {r.getheader('Server') or '?'}"),
        )
        for _ in range(clients)
    ]
    return Scenario(name, LoadGenerator(callers), groups)


def sealed_push() -> bytes:
    """A sealed envelope of the push fixture: the exact size the ingress enqueues."""
    from shared.config import LOCAL_ENVELOPE_KEY
    from shared.handoff.envelope import Envelope, EnvelopeSealer

    return EnvelopeSealer([LOCAL_ENVELOPE_KEY]).seal(
        Envelope(
            source="github",
            event="push",
            delivery_id=str(uuid.uuid4()),
            received_at=_now(),
            headers={"x-github-event": "push", "x-github-delivery": str(uuid.uuid4())},
            body=PUSH_FIXTURE.read_bytes(),
        )
    )


def enqueue_scenario(
    emulator_host: str, queue_path: str, clients: int, groups: dict[str, int], sealed: bytes
) -> Scenario:
    from shared.handoff.tasks import TaskQueue, make_client, task_id_for

    queue = TaskQueue(make_client(emulator_host), queue_path, timeout_s=5.0)
    run_id = uuid.uuid4().hex[:8]

    def call(seq: int) -> None:
        result = queue.enqueue(
            "http://127.0.0.1:9/worker",
            sealed,
            {"Content-Type": "application/json"},
            task_id=task_id_for("github", f"bench-{run_id}-{seq}"),
        )
        if result.status != "created":
            raise RuntimeError(f"task {result.task_name} was {result.status}, expected created")

    return Scenario("enqueue", LoadGenerator([call] * clients), groups)


def _now() -> Any:
    from shared.clock import system_clock

    return system_clock()
