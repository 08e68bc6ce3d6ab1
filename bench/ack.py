"""How much the ingress adds to "answer a webhook": overhead over HTTP + one CreateTask.

    python -m bench.ack [--clients 32] [--requests 4000] [--warmup 400] [--phase-limit-s 45]
                        [--cold-repeats 7]

Starts, on free loopback ports, the local Cloud Tasks emulator (its queues PAUSED, so
created tasks pile up instead of dispatching: the emulator does no dispatch work during
the run) and two functions-framework servers run the same way (`functions-framework
--target=... --source=...`, so the same gunicorn gthread server with the same WORKERS and
THREADS). Then, with `--clients` closed-loop client threads (own keep-alive connection
each) and a warm-up phase that is not counted, it measures:

(a) `bare`:    POST of the push fixture to a handler that reads the body and answers 200;
(b) `enqueue`: `shared.tasks.TaskQueue.enqueue` of an envelope-sized body, one named
               task per call, straight to the emulator (one shared client, as the
               ingress has);
(c) `ingress`: POST /github of the signed push fixture, a unique X-GitHub-Delivery each,
               so every request verifies, seals and creates a task (202).

and, in fresh interpreters (median of `--cold-repeats`, run alternately), the cold-start
import: `import functions_framework, google.cloud.tasks_v2` against that plus loading
functions/main.py with functions-framework's own loader.

Progress goes to stderr; one JSON object to stdout. Everything started is stopped by
PID, on error too. Exit status 1 if a phase had errors (goals missed are reported, not
failures).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench._loadgen import LoadGenerator, Phase, http_caller, merge, summary
from local.cloudtasks_emulator.launch import start_cloudtasks
from local.functions_server import start_function
from local.processes import Service, free_port

REPO = Path(__file__).resolve().parents[1]
PROJECT = "demo-hookledger"
LOCATION = "us-central1"
PUSH_FIXTURE = REPO / "tests" / "fixtures" / "github" / "push-with-new-branch.payload.json"
SERVER_THREADS = "8"  # functions-framework's default on 2 cores (cpu_count * 4), made explicit
SERVER_WORKERS = "1"
OVERHEAD_GOAL = 1.25
IMPORT_GOAL = 1.15

BARE_SOURCE = '''\
"""The baseline: functions-framework, read the body, answer 200 with a small JSON body."""

import flask
import functions_framework


@functions_framework.http
def bare(request: flask.Request) -> flask.Response:
    request.get_data(cache=False)
    return flask.jsonify({"status": "ok"})
'''


def progress(message: str) -> None:
    print(f"[bench.ack] {message}", file=sys.stderr, flush=True)


def start_emulator() -> tuple[Service, str]:
    port, http_port = free_port(), free_port()
    service = start_cloudtasks(port, http_port)
    return service, f"127.0.0.1:{port}"


def paused_queue(emulator_host: str, queue_id: str) -> str:
    from shared.tasks import ensure_queue, make_client

    client = make_client(emulator_host)
    path = f"projects/{PROJECT}/locations/{LOCATION}/queues/{queue_id}"
    ensure_queue(client, path)
    client.pause_queue(name=path, timeout=5)
    return path


def serve_function(
    name: str, target: str, source: Path, env: dict[str, str]
) -> tuple[Service, int]:
    port = free_port()
    service = start_function(
        target,
        port,
        {**os.environ, **env, "THREADS": SERVER_THREADS, "WORKERS": SERVER_WORKERS},
        source=source,
        name=name,
    )
    return service, port


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

    def round(self, count: int, limit_s: float) -> Phase:
        before = self._cpu()
        phase = self.gen.run(count, limit_s)
        after = self._cpu()
        for role in after:
            self.cpu_s[role] = self.cpu_s.get(role, 0.0) + after[role] - before[role]
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
    from shared.envelope import Envelope, EnvelopeSealer

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
    from shared.tasks import TaskQueue, make_client, task_id_for

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


# ---- cold start ---------------------------------------------------------------------------

_IMPORT_BASE = "import functions_framework, google.cloud.tasks_v2"
# functions-framework's own loader (what create_app does), then touch the lazy factory.
_LOAD_INGRESS = (
    "from functions_framework import _function_registry as r; "
    "m, s = r.load_function_module('functions/main.py'); s.loader.exec_module(m); "
    "import shared.runtime; shared.runtime.ingress"
)
_BUILD_INGRESS = "shared.runtime.ingress()"


def _timed_code(*steps: str) -> str:
    lines = ["import time, json", "t0 = time.perf_counter()"]
    marks = []
    for i, step in enumerate(steps):
        lines.append(step)
        lines.append(f"t{i + 1} = time.perf_counter()")
        marks.append(f"(t{i + 1} - t0) * 1000")
    lines.append(f"print(json.dumps([{', '.join(marks)}]))")
    return "\n".join(lines)


def _run_timed(code: str, env: dict[str, str]) -> tuple[float, list[float]]:
    began = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    wall = (time.perf_counter() - began) * 1000
    if done.returncode != 0:
        raise RuntimeError(f"cold-start probe failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return wall, json.loads(done.stdout.strip().splitlines()[-1])


def cold_start(repeats: int) -> dict[str, Any]:
    env = {
        **os.environ,
        "GOOGLE_CLOUD_PROJECT": PROJECT,
        "CLOUD_TASKS_EMULATOR_HOST": "127.0.0.1:9",  # building the client never connects
    }
    for name in ("FIRESTORE_EMULATOR_HOST", "PYTHONPROFILEIMPORTTIME", "PYTHONDONTWRITEBYTECODE"):
        env.pop(name, None)
    base_code = _timed_code(_IMPORT_BASE)
    ingress_code = _timed_code(_IMPORT_BASE, _LOAD_INGRESS, _BUILD_INGRESS)
    # One unmeasured run each, so both start from warm bytecode and OS caches.
    _run_timed(base_code, env)
    _run_timed(ingress_code, env)
    base_import, base_wall, ing_import, ing_wall, ing_build = [], [], [], [], []
    for _ in range(repeats):
        wall, marks = _run_timed(base_code, env)
        base_wall.append(wall)
        base_import.append(marks[0])
        wall, marks = _run_timed(ingress_code, env)
        ing_wall.append(wall)
        ing_import.append(marks[1])
        ing_build.append(marks[2])
    med = statistics.median
    ratio = med(ing_import) / med(base_import)
    return {
        "repeats": repeats,
        "base_import_ms": round(med(base_import), 1),
        "ingress_import_ms": round(med(ing_import), 1),
        "ingress_import_and_build_ms": round(med(ing_build), 1),
        "base_process_wall_ms": round(med(base_wall), 1),
        "ingress_process_wall_ms": round(med(ing_wall), 1),
        "ratio": round(ratio, 3),
        "ratio_process_wall": round(med(ing_wall) / med(base_wall), 3),
        "goal": IMPORT_GOAL,
        "met": ratio <= IMPORT_GOAL,
        "what": "in-process import time, median; base = import functions_framework, "
        "google.cloud.tasks_v2; ingress = that + functions/main.py via functions-framework's "
        "loader; build = + shared.runtime.ingress() (first request)",
    }


# ---- main ---------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.ack",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--requests", type=int, default=4000, help="measured calls per scenario")
    parser.add_argument("--rounds", type=int, default=4, help="a-b-c rounds the calls are split in")
    parser.add_argument("--warmup", type=int, default=400, help="uncounted calls per scenario")
    parser.add_argument("--phase-limit-s", type=float, default=30.0, help="cap on each round")
    parser.add_argument("--cold-repeats", type=int, default=7)
    args = parser.parse_args(argv)
    if min(args.clients, args.requests, args.rounds, args.cold_repeats) < 1 or args.warmup < 0:
        parser.error("--clients, --requests, --rounds and --cold-repeats must be positive")

    from shared.config import LOCAL_GITHUB_SECRET
    from shared.signatures import sign_github

    push = PUSH_FIXTURE.read_bytes()
    signature = sign_github(LOCAL_GITHUB_SECRET, push)  # one body: one signature for all
    run_id = uuid.uuid4().hex[:8]

    def github_request(seq: int) -> tuple[str, str, dict[str, str], bytes]:
        return (
            "POST",
            "/github",
            {
                "Content-Type": "application/json",
                "X-GitHub-Event": "push",
                "X-GitHub-Delivery": f"{run_id}-{seq}",  # unique: every call creates a task
                "X-Hub-Signature-256": signature,
            },
            push,
        )

    services: list[Service] = []
    servers: set[str] = set()
    tmp = tempfile.TemporaryDirectory(prefix="bench-ack-")
    try:
        progress("starting the Cloud Tasks emulator")
        emulator, emulator_host = start_emulator()
        services.append(emulator)
        enqueue_queue = paused_queue(emulator_host, f"bench-enqueue-{run_id}")
        ingress_queue_id = f"bench-ingress-{run_id}"
        paused_queue(emulator_host, ingress_queue_id)

        bare_source = Path(tmp.name) / "main.py"
        bare_source.write_text(BARE_SOURCE)
        progress("starting the bare functions-framework handler")
        bare, bare_port = serve_function("bare", "bare", bare_source, {})
        services.append(bare)
        progress("starting the ingress")
        ingress, ingress_port = serve_function(
            "ingress",
            "ingress",
            REPO / "functions" / "main.py",
            {
                "GOOGLE_CLOUD_PROJECT": PROJECT,
                "CLOUD_TASKS_EMULATOR_HOST": emulator_host,
                "TASKS_LOCATION": LOCATION,
                "TASKS_QUEUE": ingress_queue_id,
                "WORKER_URL": "http://127.0.0.1:9/worker",
            },
        )
        services.append(ingress)

        sealed = sealed_push()
        scenarios = [
            http_scenario(
                "bare", bare_port, args.clients, {"server": bare.pid}, github_request, 200, servers
            ),
            enqueue_scenario(
                emulator_host, enqueue_queue, args.clients, {"emulator": emulator.pid}, sealed
            ),
            http_scenario(
                "ingress",
                ingress_port,
                args.clients,
                {"server": ingress.pid, "emulator": emulator.pid},
                github_request,
                202,
                servers,
            ),
        ]
        for scenario in scenarios:
            progress(f"{scenario.name}: {args.warmup} warm-up calls")
            scenario.gen.run(args.warmup, args.phase_limit_s)
        per_round = -(-args.requests // args.rounds)
        round_ratios = []
        # Interleaved rounds: load from elsewhere on the machine falls on every scenario alike.
        for number in range(1, args.rounds + 1):
            p99 = {}
            for scenario in scenarios:
                p99[scenario.name] = summary(scenario.round(per_round, args.phase_limit_s))[
                    "p99_ms"
                ]
            round_ratios.append(round(p99["ingress"] / (p99["bare"] + p99["enqueue"]), 3))
            progress(f"round {number}/{args.rounds}: p99 {p99}, ratio {round_ratios[-1]}")
        results = {scenario.name: scenario.result() for scenario in scenarios}
    finally:
        progress("stopping " + ", ".join(f"{s.name} (pid {s.pid})" for s in services))
        for service in reversed(services):
            service.stop()
        tmp.cleanup()

    ok = True
    for name, result in results.items():
        progress(
            f"{name}: p50 {result['p50_ms']} ms, p99 {result['p99_ms']} ms, "
            f"{result['throughput_rps']} req/s, {result['errors']} errors, "
            f"CPU ms/request {result['cpu_ms_per_request']}"
        )
        ok = ok and result["errors"] == 0 and not result["timed_out"]
    server_names = {entry.split(": ", 1)[1] for entry in servers}
    if len(server_names) != 1:
        progress(f"the two HTTP scenarios ran under different servers: {sorted(servers)}")
        ok = False

    progress(f"cold start: {args.cold_repeats} fresh interpreters each")
    cold = cold_start(args.cold_repeats)
    progress(f"cold start: ratio {cold['ratio']} (goal {IMPORT_GOAL})")

    p99 = {name: results[name]["p99_ms"] for name in results}
    ratio = p99["ingress"] / (p99["bare"] + p99["enqueue"])
    print(
        json.dumps(
            {
                "benchmark": "ack",
                "ok": ok,
                "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
                "setup": {
                    "clients": args.clients,
                    "requests_per_scenario": per_round * args.rounds,
                    "rounds": args.rounds,
                    "warmup_per_scenario": args.warmup,
                    "server": f"{'/'.join(sorted(server_names))} via functions-framework "
                    f"(workers={SERVER_WORKERS}, threads={SERVER_THREADS}) for bare and ingress",
                    "queue": "paused (tasks pile up; no dispatch during the run)",
                    "body_bytes": len(push),
                    "sealed_envelope_bytes": len(sealed),
                },
                **results,
                "overhead": {
                    "ratio": round(ratio, 3),
                    "formula": "ingress_p99 / (bare_p99 + enqueue_p99), all rounds pooled",
                    "round_ratios": round_ratios,
                    "p50_ratio": round(
                        results["ingress"]["p50_ms"]
                        / (results["bare"]["p50_ms"] + results["enqueue"]["p50_ms"]),
                        3,
                    ),
                    "goal": OVERHEAD_GOAL,
                    "met": ratio <= OVERHEAD_GOAL,
                },
                "cold_start": cold,
            }
        )
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
