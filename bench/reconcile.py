"""Reconcile's cost: documents read per run against a naive full-scan reconciler.

    python -m bench.reconcile [--settled 20000] [--due 200] [--poll 1000] [--latency-ms 50]
                              [--scale-pending 100000] [--scale-due 5000] [--quick]

Starts its own Firestore emulator and Gemini simulator on free ports (and stops them).
(a) With `settled` settled and `due` due-pending operations (real simulator batches,
    completed with their webhooks dropped), one `Reconciler.run()` and one naive run
    (page through every operation, filter in Python, then the same settle path) over the
    same state: Firestore documents read (counted by wrapping the client's document
    `get` and query `stream`: every snapshot returned, and 1 for an empty query, as
    Firestore bills), reads by the due-selection query alone, and wall time.
(b) Wall time for one run over `poll` pending (still running) operations with
    `latency_ms` of simulated Gemini latency, at concurrency 1 and 8.
(c) At scale: `scale_pending` pending operations (batched writes) of which `scale_due`
    are due (real simulator batches, completed, webhooks dropped), one run fanning them
    out through a Cloud Tasks emulator queue to a loopback check-page endpoint that runs
    `Reconciler.check_names` (what the worker's check-page handler runs): seconds until
    every due one is settled, documents read by the run and by the pages, Gemini calls;
    then runs with nothing due, in a new process (reads the old adoption watermark once)
    and warm: the due query, the open-submissions query (none open: no Gemini listing)
    and the outbox sweep's query.
`--quick` runs every part at test sizes. Progress goes to stderr; one JSON object to
stdout. Exit status 1 if a run missed an operation, or a warm nothing-due run read over 3
documents or called Gemini.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from local.firestore_emulator import reset, start_firestore
from local.loopback import Loopback, QuietHandler, serve
from local.processes import start_on_free_ports
from local.simulator.client import SimulatorClient, start_simulator

PROJECT = "demo-hookledger"
MODEL = "gemini-2.5-flash"
KIND = "bench"  # no write-back registered: the bench measures reads, not result writes
NAIVE_PAGE = 1000  # the ledger's largest listing page


# A run with nothing to do reads one empty answer per query it makes: due operations, open
# claims (adoption), due groups (shared batches) and the outbox sweep's; a new process
# reads the old adoption watermark once more.
NOTHING_DUE_READS = 4


def progress(message: str) -> None:
    print(f"[bench.reconcile] {message}", file=sys.stderr, flush=True)


class ReadCounter:
    """Counts documents returned by `DocumentReference.get` and `Query.stream`, process-wide."""

    def __init__(self) -> None:
        self.reads = 0
        self.lock = threading.Lock()

    def add(self, n: int) -> None:
        with self.lock:
            self.reads += n

    def install(self) -> None:
        from google.cloud.firestore_v1.document import DocumentReference
        from google.cloud.firestore_v1.query import Query

        counter = self
        get, stream = DocumentReference.get, Query.stream

        def counted_get(ref: Any, *args: Any, **kwargs: Any) -> Any:
            snapshot = get(ref, *args, **kwargs)
            counter.add(1)  # a missing document is billed as one read too
            return snapshot

        def counted_stream(query: Any, *args: Any, **kwargs: Any) -> Iterator[Any]:
            returned = 0
            for snapshot in stream(query, *args, **kwargs):
                returned += 1
                yield snapshot
            counter.add(max(returned, 1))  # an empty query is billed one read

        DocumentReference.get = counted_get  # type: ignore[method-assign,assignment]
        Query.stream = counted_stream  # type: ignore[method-assign,assignment]

    def measure(self, fn: Callable[[], Any]) -> tuple[Any, int, float]:
        before = self.reads
        started = time.monotonic()
        result = fn()
        return result, self.reads - before, round(time.monotonic() - started, 3)


def seed_operations(ledger: Any, total: int, prefix: str, fields: dict[str, Any]) -> None:
    """`total` operations `batches/{prefix}{i:06d}` with `fields` (the ledger batches them)."""
    ledger.operations.put_many(
        {"name": f"batches/{prefix}{i:06d}", "short_id": f"{prefix}{i:06d}", "kind": KIND, **fields}
        for i in range(total)
    )


def seed_settled(ledger: Any, total: int, at: datetime) -> None:
    """`total` settled operations."""
    seed_operations(
        ledger,
        total,
        "old",
        {
            "status": "succeeded",
            "submitted_at": at - timedelta(hours=2),
            "attempts": 1,
            "next_check_at": at - timedelta(hours=1),
            "writeback_done": True,
            "context": {},
            "outbox": [],
            "settled_at": at - timedelta(hours=1),
            "settled_by": "webhook",
            "expire_at": at + timedelta(days=14),
        },
    )


def submit(gateway: Any, ledger: Any, sim: SimulatorClient, n: int, finish: bool) -> list[str]:
    """`n` simulator batches registered in the ledger; finished (webhook dropped) if asked."""
    from apps.review.kind import review_tag

    def one(i: int) -> str:
        tag = review_tag("bench/repo", f"{time.monotonic_ns()}-{i}")  # tagged, like real ones
        name = gateway.create_batch(MODEL, [(f"f{i}.md", "text")], display_name=tag)
        ledger.operations.register(name, KIND)
        if finish:
            sim.complete(name, "succeeded", webhook="drop")
        return name

    with ThreadPoolExecutor(8) as pool:
        return list(pool.map(one, range(n)))


def naive_run(ledger: Any, gateway: Any, now: datetime, concurrency: int) -> int:
    """The baseline: read every operation, keep the due pending ones, settle them."""
    from shared.settlement.settler import settle_from_gemini

    due: list[str] = []
    page = ledger.queries.list_operations(limit=NAIVE_PAGE)
    while page:
        due += [op.name for op in page if op.status == "pending" and op.next_check_at <= now]
        last = page[-1] if len(page) == NAIVE_PAGE else None
        page = ledger.queries.list_operations(limit=NAIVE_PAGE, start_after=last) if last else []
    with ThreadPoolExecutor(concurrency) as pool:
        outcomes = list(
            pool.map(lambda name: settle_from_gemini(ledger, gateway, name, "reconcile"), due)
        )
    return sum(1 for outcome in outcomes if outcome.result == "settled")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--settled", type=int, default=20_000)
    parser.add_argument("--due", type=int, default=200)
    parser.add_argument("--poll", type=int, default=1000)
    parser.add_argument("--latency-ms", type=int, default=50)
    parser.add_argument("--scale-pending", type=int, default=100_000)
    parser.add_argument("--scale-due", type=int, default=5_000)
    parser.add_argument("--quick", action="store_true", help="test sizes for every part")
    args = parser.parse_args(argv)
    if args.quick:
        args.settled, args.due, args.poll, args.latency_ms = 300, 5, 10, 1
        args.scale_pending, args.scale_due = 2_000, 100

    progress("starting the Firestore emulator and the simulator on free ports")
    # Each on ports found free as it starts, again on others if one was taken meanwhile
    # (the emulator's JVM opens ports of its own).
    firestore_service, (fs_port,) = start_on_free_ports(start_firestore)
    os.environ["FIRESTORE_EMULATOR_HOST"] = f"127.0.0.1:{fs_port}"
    tasks = scale_sim = sim_service = None
    try:  # whatever fails to start, what did start is stopped
        sim_service, (sim_port,) = start_on_free_ports(start_simulator)
        result, ok = run(args, f"http://127.0.0.1:{sim_port}")
        sim_service.stop()  # part (c) starts with no batches: none left over to adopt
        scale_sim, (scale_port,) = start_on_free_ports(start_simulator)
        tasks = start_tasks_emulator()
        result["scale"], scale_ok = scale(args, f"http://127.0.0.1:{scale_port}", tasks.host)
        ok = ok and scale_ok
    finally:
        for service in (tasks.service if tasks else None, scale_sim, sim_service):
            if service is not None:
                service.stop()
        firestore_service.stop()
    print(json.dumps(result, indent=2))
    return 0 if ok else 1


_COUNTER = ReadCounter()


def run(args: argparse.Namespace, sim_url: str) -> tuple[dict[str, Any], bool]:
    from google.cloud import firestore

    from local.fakes import FakeClock
    from shared.clock import system_clock
    from shared.gemini import GeminiGateway, make_client
    from shared.ledger import Ledger
    from shared.reconcile import BACKOFF_CAP_S, Reconciler, ReconcileSettings

    counter = _COUNTER
    counter.install()
    client = firestore.Client(project=PROJECT)
    sim = SimulatorClient(sim_url)
    gateway = GeminiGateway(make_client("sim", sim_url, timeout_s=10, attempts=1))
    ledger = Ledger(client, grace=timedelta(0))
    now = system_clock()

    started = time.monotonic()
    seed_settled(ledger, args.settled, now)
    progress(f"seeded {args.settled} settled operations in {time.monotonic() - started:.1f} s")
    due = submit(gateway, ledger, sim, args.due, finish=True)
    saved = [ledger.queries.stored_fields(name) for name in due]
    progress(f"{args.due} due-pending operations ready")

    selection = {"reads": 0}
    due_pending = ledger.operations.due_pending

    def counted_due_pending(*a: Any, **kw: Any) -> Any:
        page = due_pending(*a, **kw)
        selection["reads"] += max(len(page), 1)
        return page

    ledger.operations.due_pending = counted_due_pending  # type: ignore[method-assign]
    reconciler = Reconciler(
        ledger,
        gateway,
        system_clock,
        ReconcileSettings(grace_s=0, budget_s=600, page_size=100, fanout_threshold=10_000),
    )
    report, reads, wall = counter.measure(reconciler.run)
    progress(f"reconcile: {reads} reads, {wall} s, {report.settled} settled")

    # The same state for the baseline: the due operations back to pending.
    ledger.operations.put_many(saved)
    naive_settled, naive_reads, naive_wall = counter.measure(
        lambda: naive_run(ledger, gateway, system_clock(), 8)
    )
    progress(f"naive: {naive_reads} reads, {naive_wall} s, {naive_settled} settled")

    # (b) polling still-running operations with Gemini latency.
    clock = FakeClock(system_clock() + timedelta(days=1))
    poll_ledger = Ledger(client, clock=clock, grace=timedelta(0))
    submit(gateway, poll_ledger, sim, args.poll, finish=False)
    sim.set_faults(0.0, latency_ms=args.latency_ms)
    polls: dict[str, Any] = {}
    for concurrency in (1, 8):
        poller = Reconciler(
            poll_ledger,
            gateway,
            clock,
            ReconcileSettings(
                grace_s=0,
                concurrency=concurrency,
                budget_s=600,
                page_size=500,
                fanout_threshold=10_000,
                adopt_orphans=False,
            ),
        )
        poll_report, _, poll_wall = counter.measure(poller.run)
        polls[f"concurrency_{concurrency}"] = {
            "wall_s": poll_wall,
            "examined": poll_report.examined,
            "ops_per_s": round(poll_report.examined / poll_wall, 1) if poll_wall else None,
        }
        progress(f"poll at concurrency {concurrency}: {poll_wall} s")
        clock.advance(BACKOFF_CAP_S + 1)  # every operation due again for the next round
    sim.set_faults(0.0)

    pages = report.pages
    result = {
        "settled_operations": args.settled,
        "due_pending_operations": args.due,
        "reconcile": {
            "documents_read": reads,
            "selection_reads": selection["reads"],
            "pages": pages,
            "wall_s": wall,
            "settled": report.settled,
            "report": report.to_dict(),
        },
        "naive_full_scan": {
            "documents_read": naive_reads,
            "selection_reads": args.settled + args.due,
            "wall_s": naive_wall,
            "settled": naive_settled,
        },
        "read_ratio_total": round(naive_reads / reads, 1) if reads else None,
        "read_ratio_selection": round((args.settled + args.due) / selection["reads"], 1),
        "selection_within_goal": selection["reads"] <= args.due + pages,
        "goal": {
            "reads_per_run_at_most": args.due + pages,  # pending-due operations + pages
            "reads_met": reads <= args.due + pages,
            "ratio_at_least": 90,
            "ratio_met": bool(reads) and naive_reads / reads >= 90,
        },
        "poll": {"operations": args.poll, "latency_ms": args.latency_ms, **polls},
    }
    ok = report.settled == args.due and naive_settled == args.due
    ok = ok and all(p["examined"] == args.poll for p in polls.values())
    return result, ok


@dataclass
class TasksEmulator:
    service: Any
    host: str


def start_tasks_emulator() -> TasksEmulator:
    from local.cloudtasks_emulator.launch import start_cloudtasks

    service, (port, _) = start_on_free_ports(
        lambda port, http_port: start_cloudtasks(port, http_port), count=2
    )
    return TasksEmulator(service, f"127.0.0.1:{port}")


class GeminiCalls:
    """Counts the gateway's Gemini requests: one per fetch, one per page of a listing."""

    def __init__(self, gateway: Any) -> None:
        self.calls = 0
        self.lock = threading.Lock()
        for name in ("fetch", "fetch_batch", "read_results_file"):
            setattr(gateway, name, self._counted(getattr(gateway, name)))
        listing = gateway.list_batches

        def counted_listing(page_size: int = 100) -> Iterator[Any]:
            for i, batch in enumerate(listing(page_size)):
                if i % page_size == 0:
                    self.add()
                yield batch

        gateway.list_batches = counted_listing

    def add(self) -> None:
        with self.lock:
            self.calls += 1

    def _counted(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            self.add()
            return fn(*args, **kwargs)

        return counted


def seed_pending(ledger: Any, total: int, next_check_at: datetime, at: datetime) -> None:
    """`total` pending operations not due before `next_check_at`."""
    seed_operations(
        ledger,
        total,
        "wait",
        {
            "status": "pending",
            "submitted_at": at,
            "attempts": 0,
            "next_check_at": next_check_at,
            "writeback_done": False,
            "context": {},
            "outbox": [],
            "settled_at": None,
            "settled_by": None,
        },
    )


def check_page_server(state: dict[str, Any]) -> Loopback:
    """A loopback check-page endpoint: `state["reconciler"].check_names(page)`, 503 on errors."""
    from shared.reconcile import page_names

    class Handler(QuietHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                report = state["reconciler"].check_names(page_names(body))
                status = 200 if report.errors == 0 else 503
            except Exception:
                status = 503
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

    return serve(Handler)


def scale(args: argparse.Namespace, sim_url: str, tasks_host: str) -> tuple[dict[str, Any], bool]:
    """Part (c); see the module docstring."""
    from google.cloud import firestore

    from local.fakes import FakeClock
    from shared.clock import system_clock
    from shared.gemini import GeminiGateway, make_client
    from shared.handoff.tasks import TaskQueue, ensure_queue
    from shared.handoff.tasks import make_client as make_tasks_client
    from shared.ledger import Ledger
    from shared.reconcile import Reconciler, ReconcileSettings, TaskPageEnqueuer

    counter, client = _COUNTER, firestore.Client(project=PROJECT)
    reset(os.environ["FIRESTORE_EMULATOR_HOST"], PROJECT)  # a clean slate for this part
    sim = SimulatorClient(sim_url)
    gateway = GeminiGateway(make_client("sim", sim_url, timeout_s=10, attempts=1))
    clock = FakeClock(system_clock() + timedelta(minutes=10))  # past the adoption margin
    ledger = Ledger(client, clock=clock, grace=timedelta(0))
    started = time.monotonic()
    waiting = args.scale_pending - args.scale_due
    seed_pending(ledger, waiting, clock() + timedelta(days=1), clock())
    submit(gateway, ledger, sim, args.scale_due, finish=True)
    setup_s = round(time.monotonic() - started, 1)
    progress(f"scale: {args.scale_pending} pending ({args.scale_due} due) ready in {setup_s} s")

    gemini = GeminiCalls(gateway)
    queue_path = f"projects/{PROJECT}/locations/us-central1/queues/reconcile-scale"
    tasks_client = make_tasks_client(tasks_host)
    ensure_queue(tasks_client, queue_path)
    state: dict[str, Any] = {}
    server = check_page_server(state)
    url = f"{server.url}/check-page"
    enqueue = TaskPageEnqueuer(TaskQueue(tasks_client, queue_path), url, lambda _id, body: body)
    # Production page size and fan-out threshold (lowered for small sizes, to fan out).
    threshold = min(500, max(1, args.scale_due // 4))
    settings = ReconcileSettings(grace_s=0, budget_s=600, fanout_threshold=threshold)

    def reconciler(**extra: Any) -> Any:
        return Reconciler(ledger, gateway, clock, settings, **extra)

    state["reconciler"] = reconciler()
    try:
        reads_before, calls_before = counter.reads, gemini.calls
        started = time.monotonic()
        fan = reconciler(enqueue_page=enqueue)
        report, run_reads, run_wall = counter.measure(fan.run)
        run_calls = gemini.calls - calls_before
        give_up = started + max(600.0, args.scale_due / 5)
        while ledger.queries.count_operations(status="succeeded") < args.scale_due:
            if time.monotonic() > give_up:
                break
            time.sleep(0.2)
        settled_s = round(time.monotonic() - started, 1)
        settled = ledger.queries.count_operations(status="succeeded")
        total_reads, total_calls = counter.reads - reads_before, gemini.calls - calls_before
        progress(f"scale: {settled} settled {settled_s} s after the run began")
        clock.advance(300)  # the next scheduled run, five minutes later
        nothing: dict[str, Any] = {}
        fresh = reconciler(enqueue_page=enqueue)  # a new process: reads the watermark once
        for label in ("new_process", "warm_process"):
            calls_before = gemini.calls
            idle, reads, wall = counter.measure(fresh.run)
            nothing[label] = {
                "documents_read": reads,
                "gemini_calls": gemini.calls - calls_before,
                "examined": idle.examined,
                "wall_s": wall,
            }
            clock.advance(300)
    finally:
        server.close()
    result = {
        "pending": args.scale_pending,
        "due": args.scale_due,
        "setup_s": setup_s,
        "fan_out_run": {
            "documents_read": run_reads,
            "gemini_calls": run_calls,
            "wall_s": run_wall,
            "fanned_out_pages": report.fanned_out_pages,
            "fanned_out_ops": report.fanned_out_ops,
        },
        "all_due_settled_s": settled_s,
        "settled": settled,
        "documents_read_run_and_pages": total_reads,
        "gemini_calls_run_and_pages": total_calls,
        "nothing_due": nothing,
        "goal": {
            "nothing_due_reads_at_most": NOTHING_DUE_READS,
            "met_warm": nothing["warm_process"]["documents_read"] <= NOTHING_DUE_READS,
            "met_new_process": nothing["new_process"]["documents_read"] <= NOTHING_DUE_READS + 1,
        },
    }
    warm = nothing["warm_process"]
    ok = (
        settled == args.scale_due
        and warm["documents_read"] <= NOTHING_DUE_READS
        and warm["gemini_calls"] == 0
    )
    return result, ok


if __name__ == "__main__":
    sys.exit(main())
