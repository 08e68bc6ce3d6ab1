"""How much the ingress adds to "answer a webhook": overhead over HTTP + one CreateTask.

    python -m bench.ack [--clients 32] [--requests 4000] [--warmup 400] [--phase-limit-s 45]
                        [--cold-repeats 7] [--compare REV]

Starts, on free loopback ports, the local Cloud Tasks emulator (its queues PAUSED, so
created tasks pile up instead of dispatching: the emulator does no dispatch work during
the run) and two functions-framework servers run the same way (`functions-framework
--target=... --source=...`, so the same gunicorn gthread server with the same WORKERS and
THREADS). Then, with `--clients` closed-loop client threads (own keep-alive connection
each) and a warm-up phase that is not counted, it measures:

(a) `bare`:    POST of the push fixture to a handler that reads the body and answers 200;
(b) `enqueue`: `shared.handoff.tasks.TaskQueue.enqueue` of an envelope-sized body, one named
               task per call, straight to the emulator (one shared client, as the
               ingress has);
(c) `ingress`: POST /github of the signed push fixture, a unique X-GitHub-Delivery each,
               so every request verifies, seals and creates a task (202), with an OIDC
               token and the dispatch deadline as deployed (`TASKS_SERVICE_ACCOUNT` set);
(d) `bare_enqueue`: the same POST to a functions-framework handler that reads the body,
               creates one named task with it through `TaskQueue.enqueue` and answers
               202: the CPU baseline;
(d') `floor`:  the same POST to the least an ingress can do: read the body, one plain
               CreateTask of it with the stock client (no name, no OIDC token, no
               dispatch deadline), answer 202;
(d'') `floor_direct`: the floor with its CreateTask sent as the ingress sends one (on the
               client's channel, not through the client's per-call wrappers): the ingress
               over it is what its checks cost, the call being the same;
(e) `ingress_file_all`, `ingress_sampled_out`: (c) against two more ingress servers that
               trace in-process as deployed (`runtime.check_startup` -> `tracing.configure`
               at import), with `TRACING=file` to a temporary `TRACE_DIR` (cloudtrace
               would call Google): `TRACE_SAMPLE_RATIO=1`, every span recorded and
               written (the worst case), and `0`, every span recorded and none exported
               (what the requests sampled out at production's 0.1 cost);
(f) with `--compare REV`: (c) against REV's ingress (a temporary git worktree of REV,
               served by the same interpreter with its tree first on PYTHONPATH), e.g.
               the revision before tracing, for "with tracing off nothing changes".

CPU is read from each process group's own counters (/proc, user + system) around every
measured round, after the warm-up: `cpu` reports the ingress server's CPU seconds per
1,000 accepted deliveries against the floor's (`vs_floor`, goal <= 1.15x) and
`bare_enqueue`'s (`vs_baseline`, goal <= 1.3x), and `floor_direct`'s (`vs_floor_direct`,
no goal: what the checks cost), measured the same way, pooled over the
rounds, with each round's own ratio beside it (`round_ratios`: the CPU scenarios run
back to back, their order rotated each round, so the spread shows what load elsewhere on
the machine did).
`tracing`: (e)'s server CPU per accepted delivery against (c)'s (tracing off), pooled and
per round; the spans each traced request wrote (the run fails if the file case wrote
none) and the `traceparent` a task of each traced ingress carries (its sampled flag set
for the file case, clear for the sampled-out one). `before` (with `--compare`): (c)
against (f), pooled and per round.
`memory`: a fresh ingress (claim store on a Firestore emulator: bodies over 512 KiB are
claim-checked) warmed up, then `--clients` clients each sending `--burst-per-client`
signed 1 MiB pushes at once: peak RSS of its process group over its idle RSS (goal
<= 2 x clients x 1 MiB).

and, in fresh interpreters (median of `--cold-repeats`, run alternately), the cold-start
import: `import functions_framework, google.cloud.tasks_v2` against that plus loading
functions/main.py with functions-framework's own loader.

Progress goes to stderr; one JSON object to stdout. Everything started is stopped by
PID, on error too. Exit status 1 if a phase had errors (goals missed are reported, not
failures).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench._ackparts import (
    BARE_ENQUEUE_SOURCE,
    BARE_SOURCE,
    BURST_BODY_BYTES,
    CPU_GOAL,
    FLOOR_DIRECT_SOURCE,
    FLOOR_GOAL,
    FLOOR_SOURCE,
    LOCATION,
    MEMORY_GOAL,
    OVERHEAD_GOAL,
    PROJECT,
    PUSH_FIXTURE,
    REPO,
    SERVER_THREADS,
    SERVER_WORKERS,
    TASKS_ACCOUNT,
    Scenario,
    enqueue_scenario,
    http_scenario,
    paused_queue,
    sealed_push,
    serve_function,
    spans_written,
    start_emulator,
    task_traceparent,
)
from bench._cold import IMPORT_GOAL, cold_start
from bench._loadgen import stop_on_sigterm, summary
from bench._memory import MIB, numbered, push_template, rss_under_burst
from bench._revision import CompareError, check_served_tree, revision_worktree
from local.firestore_emulator import start_firestore
from local.processes import Service, free_port


def progress(message: str) -> None:
    print(f"[bench.ack] {message}", file=sys.stderr, flush=True)


# ---- CPU and memory ----------------------------------------------------------------------


def cpu_figures(results: dict[str, Any], round_ratios: dict[str, list[float]]) -> dict[str, Any]:
    """Server CPU seconds per 1,000 accepted deliveries: the ingress against the floor and
    against the baseline.

    Each ratio pools every round; `round_ratios` are each round's own (the scenarios
    measured back to back), so one run shows how much load elsewhere moved the figure.
    """

    def versus(name: str, goal: float | None) -> dict[str, Any]:
        ratio = cpu_ratio(results, "ingress", name)
        rounds = round_ratios[name]
        return {
            "ratio": ratio,
            "round_ratios": rounds,
            "round_spread": spread(rounds),
            "round_median": median(rounds),
            "goal": goal,
            "met": None if goal is None else ratio <= goal,
        }

    return {
        "ingress_server_s_per_1000": server_cpu_ms(results, "ingress"),  # ms/request = s/1,000
        "floor_server_s_per_1000": server_cpu_ms(results, "floor"),
        "floor_direct_server_s_per_1000": server_cpu_ms(results, "floor_direct"),
        "baseline_server_s_per_1000": server_cpu_ms(results, "bare_enqueue"),
        "ingress_emulator_s_per_1000": results["ingress"]["cpu_ms_per_request"].get("emulator"),
        "floor_emulator_s_per_1000": results["floor"]["cpu_ms_per_request"].get("emulator"),
        "vs_floor": versus("floor", FLOOR_GOAL),
        "vs_floor_direct": versus("floor_direct", None),
        "vs_baseline": versus("bare_enqueue", CPU_GOAL),
        "what": "user+system CPU of the server's process group over the measured rounds "
        "(after warm-up), per 1,000 accepted requests, same server settings for all; "
        "floor = read the body + one plain CreateTask of it with the stock client (no "
        "name, OIDC token or deadline); floor_direct = the same CreateTask sent as the "
        "ingress sends it (the client's channel, not its per-call wrappers); baseline = "
        "the same through TaskQueue.enqueue, named; the ingress as deployed: verified, "
        "sealed, named, OIDC token, deadline",
    }


def round_cpu_ratio(scenarios: list[Scenario], name: str, baseline_name: str) -> float:
    """The last round's server CPU per request of `name` over `baseline_name`'s."""
    by_name = {scenario.name: scenario.round_cpu_ms[-1]["server"] for scenario in scenarios}
    baseline = by_name[baseline_name]
    return round(by_name[name] / baseline, 3) if baseline else float("nan")


def server_cpu_ms(results: dict[str, Any], name: str) -> float:
    return float(results[name]["cpu_ms_per_request"]["server"])


def cpu_ratio(results: dict[str, Any], name: str, baseline_name: str) -> float:
    baseline = server_cpu_ms(results, baseline_name)
    return round(server_cpu_ms(results, name) / baseline, 3) if baseline else float("nan")


def spread(ratios: list[float]) -> list[float]:
    return [min(ratios), max(ratios)] if ratios else []


def median(ratios: list[float]) -> float:
    """The middle round's ratio: what a round's load elsewhere moves least."""
    return round(statistics.median(ratios), 3) if ratios else float("nan")


# The ingress servers that trace (scenario (e)): the settings each is started with.
TRACED = {
    "ingress_file_all": {"TRACING": "file", "TRACE_SAMPLE_RATIO": "1"},
    "ingress_sampled_out": {"TRACING": "file", "TRACE_SAMPLE_RATIO": "0"},
}


def tracing_figures(
    results: dict[str, Any],
    round_ratios: dict[str, list[float]],
    accepted: dict[str, int],
    spans: dict[str, dict[str, int]],
    traceparents: dict[str, str | None],
) -> dict[str, Any]:
    """The traced ingresses' server CPU per accepted delivery against the untraced one."""
    written = {name: sum(spans[name].values()) for name in TRACED}
    return {
        "off_cpu_ms": server_cpu_ms(results, "ingress"),
        "file_all_cpu_ms": server_cpu_ms(results, "ingress_file_all"),
        "sampled_out_cpu_ms": server_cpu_ms(results, "ingress_sampled_out"),
        "overhead_all": cpu_ratio(results, "ingress_file_all", "ingress"),
        "overhead_sampled_out": cpu_ratio(results, "ingress_sampled_out", "ingress"),
        "round_overhead_all": round_ratios["ingress_file_all"],
        "round_overhead_sampled_out": round_ratios["ingress_sampled_out"],
        "round_spread_all": spread(round_ratios["ingress_file_all"]),
        "round_spread_sampled_out": spread(round_ratios["ingress_sampled_out"]),
        "round_median_all": median(round_ratios["ingress_file_all"]),
        "round_median_sampled_out": median(round_ratios["ingress_sampled_out"]),
        "accepted": accepted,
        "spans_per_request_file_all": round(
            written["ingress_file_all"] / max(accepted["ingress_file_all"], 1), 3
        ),
        "spans_written_sampled_out": written["ingress_sampled_out"],
        "spans_by_name_file_all": spans["ingress_file_all"],
        "task_traceparent": traceparents,
        "what": "user+system CPU ms of the ingress server's process group per accepted "
        "delivery (= s per 1,000), measured as `cpu`; file_all: TRACING=file, "
        "TRACE_SAMPLE_RATIO=1 (every span written as a JSON line); sampled_out: ratio 0 "
        "(spans recorded, none exported); off: TRACING=off; overhead = traced / off; "
        "spans counted over warm-up and measured requests",
    }


def before_figures(results: dict[str, Any], round_ratios: list[float], sha: str) -> dict[str, Any]:
    """This tree's untraced ingress against REV's (`--compare REV`)."""
    return {
        "rev": sha,
        "before_cpu_ms": server_cpu_ms(results, "ingress_before"),
        "off_cpu_ms": server_cpu_ms(results, "ingress"),
        "ratio": cpu_ratio(results, "ingress", "ingress_before"),
        "round_ratios": round_ratios,
        "round_spread": spread(round_ratios),
        "round_median": median(round_ratios),
        "what": "server CPU ms per accepted delivery: this tree's ingress (TRACING=off) "
        "over REV's, same rounds (order rotated each round)",
    }


def memory_burst(
    args: argparse.Namespace,
    emulator_host: str,
    run_id: str,
    services: list[Service],
    servers: set[str],
) -> dict[str, Any]:
    """A fresh ingress, warmed up, then `clients` clients sending 1 MiB pushes at once."""
    from hookledger.sending import github_headers
    from shared.config import LOCAL_GITHUB_SECRET

    fs_port = free_port()
    progress(f"memory: starting the Firestore emulator (claim store) on {fs_port}")
    services.append(start_firestore(fs_port))
    queue_id = f"bench-memory-{run_id}"
    paused_queue(emulator_host, queue_id)
    ingress, port = serve_function(
        "ingress-memory",
        "ingress",
        REPO / "functions" / "main.py",
        {
            "GOOGLE_CLOUD_PROJECT": PROJECT,
            "CLOUD_TASKS_EMULATOR_HOST": emulator_host,
            "FIRESTORE_EMULATOR_HOST": f"127.0.0.1:{fs_port}",
            "TASKS_LOCATION": LOCATION,
            "TASKS_QUEUE": queue_id,
            "WORKER_URL": "http://127.0.0.1:9/worker",
        },
    )
    services.append(ingress)
    template = push_template(PUSH_FIXTURE.read_bytes(), BURST_BODY_BYTES)

    def big(tag: str) -> Callable[[int], tuple[str, str, dict[str, str], bytes]]:
        def request(seq: int) -> tuple[str, str, dict[str, str], bytes]:
            body = numbered(template, tag, seq)  # deduped on the body: each one differs
            headers = github_headers("push", body, LOCAL_GITHUB_SECRET, f"{run_id}-{tag}-{seq}")
            return "POST", "/github", headers, body

        return request

    # Warm-up: every thread has built what it builds (clients, claim store) before idle.
    warm = rss_under_burst(ingress.pid, port, big("w"), 202, args.clients, 1)
    progress(f"memory: warm-up {warm}")
    burst = rss_under_burst(ingress.pid, port, big("m"), 202, args.clients, args.burst_per_client)
    in_flight_mib = args.clients * BURST_BODY_BYTES / MIB
    ratio = burst["peak_over_idle_mib"] / in_flight_mib
    progress(f"memory: burst {burst}")
    return {
        **burst,
        "body_bytes": len(template),
        "per_client": args.burst_per_client,
        "ratio_to_bodies_in_flight": round(ratio, 3),
        "goal": MEMORY_GOAL,
        "met": ratio <= MEMORY_GOAL,
        "warmup_errors": warm["errors"],
        "what": "VmRSS summed over the ingress's process group, sampled every 10 ms; "
        "idle = after a warm-up burst of the same bodies; bodies over 512 KiB are "
        "claim-checked to Firestore",
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
    parser.add_argument("--burst-per-client", type=int, default=4, help="1 MiB bodies each")
    parser.add_argument("--quick", action="store_true", help="small sizes (the test)")
    parser.add_argument(
        "--compare",
        metavar="REV",
        help="also measure REV's ingress in the same rounds (a temporary git worktree)",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.requests, args.rounds, args.warmup, args.cold_repeats = 200, 2, 40, 1
        args.burst_per_client = 1
    if min(args.clients, args.requests, args.rounds, args.cold_repeats) < 1 or args.warmup < 0:
        parser.error("--clients, --requests, --rounds and --cold-repeats must be positive")

    stop_on_sigterm()  # run the `finally` that stops every child
    from hookledger.sending import github_headers
    from shared.config import LOCAL_GITHUB_SECRET

    push = push_template(PUSH_FIXTURE.read_bytes())
    run_id = uuid.uuid4().hex[:8]

    def github_request(seq: int) -> tuple[str, str, dict[str, str], bytes]:
        body = numbered(push, "a", seq)  # the ingress dedupes on the body: each one differs
        # The delivery id is unique: every call creates a task.
        headers = github_headers("push", body, LOCAL_GITHUB_SECRET, f"{run_id}-{seq}")
        return "POST", "/github", headers, body

    services: list[Service] = []
    servers: set[str] = set()
    tmp = tempfile.TemporaryDirectory(prefix="bench-ack-")
    revisions = contextlib.ExitStack()
    try:
        before: tuple[Path, str] | None = None
        if args.compare is not None:
            progress(f"checking out {args.compare} in a temporary worktree")
            try:
                before = revisions.enter_context(revision_worktree(args.compare))
                check_served_tree(before[0])
            except CompareError as exc:
                progress(f"--compare: {exc}")
                return 2
        progress("starting the Cloud Tasks emulator")
        emulator, emulator_host = start_emulator()
        services.append(emulator)
        enqueue_queue = paused_queue(emulator_host, f"bench-enqueue-{run_id}")

        bare_source = Path(tmp.name) / "main.py"
        bare_source.write_text(BARE_SOURCE)
        progress("starting the bare functions-framework handler")
        bare, bare_port = serve_function("bare", "bare", bare_source, {})
        services.append(bare)

        queues: dict[str, str] = {}

        def start_ingress(name: str, env: dict[str, str], root: Path = REPO) -> Scenario:
            """An ingress server with its own paused queue, and its scenario (c)."""
            queue = paused_queue(emulator_host, f"bench-{name.replace('_', '-')}-{run_id}")
            queues[name] = queue
            progress(f"starting {name}")
            server, port = serve_function(
                name,
                "ingress",
                root / "functions" / "main.py",
                {
                    "GOOGLE_CLOUD_PROJECT": PROJECT,
                    "CLOUD_TASKS_EMULATOR_HOST": emulator_host,
                    "TASKS_LOCATION": LOCATION,
                    "TASKS_QUEUE": queue.rsplit("/", 1)[1],
                    "WORKER_URL": "http://127.0.0.1:9/worker",
                    # As deployed: every task carries an OIDC token (never fetched: paused).
                    "TASKS_SERVICE_ACCOUNT": TASKS_ACCOUNT,
                    **env,
                },
                root,
            )
            services.append(server)
            groups = {"server": server.pid, "emulator": emulator.pid}
            return http_scenario(name, port, args.clients, groups, github_request, 202, servers)

        trace_dirs = {name: Path(tmp.name) / "traces" / name for name in TRACED}
        ingress = start_ingress("ingress", {"TRACING": "off"})
        traced = [
            start_ingress(name, {**env, "TRACE_DIR": str(trace_dirs[name])})
            for name, env in TRACED.items()
        ]
        ingress_before = (
            [start_ingress("ingress_before", {"TRACING": "off"}, before[0])] if before else []
        )

        def reference(name: str, queue: str, source: str, what: str) -> tuple[Any, int]:
            """A bare handler (`source`) creating its tasks in its own paused queue."""
            path = Path(tmp.name) / name / "main.py"
            path.parent.mkdir()
            path.write_text(source)
            progress(f"starting {what}")
            env = {
                "CLOUD_TASKS_EMULATOR_HOST": emulator_host,
                "BENCH_QUEUE": paused_queue(emulator_host, f"bench-{queue}-{run_id}"),
            }
            server, port = serve_function(name, name, path, env)
            services.append(server)
            return server, port

        baseline, baseline_port = reference(
            "bare_enqueue", "baseline", BARE_ENQUEUE_SOURCE, "the bare handler + one CreateTask"
        )
        floor, floor_port = reference(
            "floor", "floor", FLOOR_SOURCE, "the floor: bare handler + one plain CreateTask"
        )
        floor_direct, floor_direct_port = reference(
            "floor_direct",
            "floor-direct",
            FLOOR_DIRECT_SOURCE,
            "the floor with the ingress's CreateTask call",
        )

        sealed = sealed_push()
        latency = [
            http_scenario(
                "bare", bare_port, args.clients, {"server": bare.pid}, github_request, 200, servers
            ),
            enqueue_scenario(
                emulator_host, enqueue_queue, args.clients, {"emulator": emulator.pid}, sealed
            ),
        ]
        cpu_scenarios = [
            ingress,
            http_scenario(
                "bare_enqueue",
                baseline_port,
                args.clients,
                {"server": baseline.pid, "emulator": emulator.pid},
                github_request,
                202,
                servers,
            ),
            http_scenario(
                "floor",
                floor_port,
                args.clients,
                {"server": floor.pid, "emulator": emulator.pid},
                github_request,
                202,
                servers,
            ),
            http_scenario(
                "floor_direct",
                floor_direct_port,
                args.clients,
                {"server": floor_direct.pid, "emulator": emulator.pid},
                github_request,
                202,
                servers,
            ),
            *traced,
            *ingress_before,
        ]
        scenarios = [*latency, *cpu_scenarios]
        accepted: dict[str, int] = {}
        for scenario in scenarios:
            progress(f"{scenario.name}: {args.warmup} warm-up calls")
            accepted[scenario.name] = len(
                scenario.gen.run(args.warmup, args.phase_limit_s).latencies_ms
            )
        per_round = -(-args.requests // args.rounds)
        round_ratios = []
        # Each round's server CPU ratios: figure -> (scenario, the scenario it is over).
        round_pairs = {
            "floor": ("ingress", "floor"),
            "floor_direct": ("ingress", "floor_direct"),
            "bare_enqueue": ("ingress", "bare_enqueue"),
            **{name: (name, "ingress") for name in TRACED},
            **({"before": ("ingress", "ingress_before")} if before else {}),
        }
        cpu_round_ratios: dict[str, list[float]] = {name: [] for name in round_pairs}
        # Interleaved rounds: load from elsewhere on the machine falls on every scenario alike.
        # The CPU scenarios rotate every round, so none is always the one that follows
        # `enqueue`'s burst on the emulator they share, or the last of a round.
        for number in range(1, args.rounds + 1):
            shift = (number - 1) % len(cpu_scenarios)
            p99 = {}
            for scenario in [*latency, *cpu_scenarios[shift:], *cpu_scenarios[:shift]]:
                p99[scenario.name] = summary(scenario.round(per_round, args.phase_limit_s))[
                    "p99_ms"
                ]
            round_ratios.append(round(p99["ingress"] / (p99["bare"] + p99["enqueue"]), 3))
            for figure, (name, baseline_name) in round_pairs.items():
                cpu_round_ratios[figure].append(round_cpu_ratio(cpu_scenarios, name, baseline_name))
            progress(
                f"round {number}/{args.rounds}: p99 {p99}, ratio {round_ratios[-1]}, "
                f"CPU ratios { {name: r[-1] for name, r in cpu_round_ratios.items()} }"
            )
        results = {scenario.name: scenario.result() for scenario in scenarios}
        for scenario in scenarios:
            accepted[scenario.name] += results[scenario.name]["requests"]
        spans = {name: dict(spans_written(trace_dirs[name])) for name in TRACED}
        traceparents = {name: task_traceparent(emulator_host, queues[name]) for name in TRACED}
        memory = memory_burst(args, emulator_host, run_id, services, servers)
    finally:
        progress("stopping " + ", ".join(f"{s.name} (pid {s.pid})" for s in services))
        for service in reversed(services):
            service.stop()
        tmp.cleanup()
        revisions.close()

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
        progress(f"the HTTP scenarios ran under different servers: {sorted(servers)}")
        ok = False

    traced_figures = tracing_figures(results, cpu_round_ratios, accepted, spans, traceparents)
    progress(f"tracing: {json.dumps(traced_figures)}")
    if not traced_figures["spans_per_request_file_all"]:
        progress(f"ingress_file_all wrote no span under {trace_dirs['ingress_file_all']}")
        ok = False
    if not all(traceparents.values()):
        progress(f"a traced ingress's task carries no traceparent: {traceparents}")
        ok = False

    progress(f"cold start: {args.cold_repeats} fresh interpreters each")
    cold = cold_start("ingress", args.cold_repeats)
    ok = ok and memory["errors"] == 0
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
                "cpu": cpu_figures(results, cpu_round_ratios),
                "tracing": traced_figures,
                **(
                    {"before": before_figures(results, cpu_round_ratios["before"], before[1])}
                    if before
                    else {}
                ),
                "memory": memory,
                "cold_start": cold,
            }
        )
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
