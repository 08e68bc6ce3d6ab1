"""End to end: N pushes through the whole local stack, settled by webhook, then by reconcile.

    python -m bench.e2e [--pushes 1000] [--senders 16] [--quick]

Starts the whole stack on free loopback ports (local/chaos/stack.py: Firestore emulator,
Cloud Tasks emulator, simulator, ingress, worker and reconcile under functions-framework)
and runs two rounds of `--pushes` signed pushes (2 Markdown files each) sent by
`--senders` threads:
- `webhook`: each batch is completed through the simulator as soon as it exists, with its
  completion webhook sent (ingress -> Cloud Tasks -> worker -> settlement);
- `reconcile`: every completion webhook dropped; reconcile, called every 2 s, settles them.
Per round: accepted/s (pushes / time until the last 202), settled/s (pushes / time until
the last settlement), and p50/p99 of push sent -> settled, push sent -> batch submitted,
and batch completed -> settled. The round asserts, over the whole database, that every
push ends with exactly one operation and its two reviews (local/chaos/invariants.py), and
reports CPU seconds used by each child process (where the time goes).
Progress goes to stderr; one JSON object to stdout. Exit status 1 if an invariant fails.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import requests

from bench._loadgen import percentile, stop_on_sigterm
from local.chaos.drivers import ReconcileDriver
from local.chaos.invariants import all_operations, check, wait_quiet
from local.chaos.load import LoadDriver, Push
from local.chaos.stack import ChaosStack
from local.stack import Ports
from shared.ledger import LedgerError

QUICK_PUSHES = 6
QUIET_DEADLINE_S = 900.0


def progress(message: str) -> None:
    print(f"[bench.e2e] {message}", file=sys.stderr, flush=True)


def process_cpu_s(pgid: int) -> float:
    """CPU seconds (user + system) of the live processes of process group `pgid`."""
    from bench._ackparts import group_cpu_s

    return group_cpu_s(pgid)


class Completer:
    """Completes each push's batch once it is registered; remembers when (epoch s).

    Only registered batches: a real batch runs for minutes, so its webhook never beats
    the registration; completing it at once could (the webhook is then ignored and only
    reconcile, absent from the webhook round, would settle it).
    """

    def __init__(self, stack: ChaosStack, ledger: Any, pushes: list[Push], webhook: str) -> None:
        self.sim = stack.sim
        self.ledger = ledger
        self.pending = {push.tag: push for push in pushes}
        self.completed_at: dict[str, float] = {}
        self.webhook = webhook
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="completer", daemon=True)

    def __enter__(self) -> Completer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _loop(self) -> None:
        while self.pending and not self._stop.is_set():
            try:
                batches = self.sim.batches()
            except requests.RequestException:
                batches = []  # asked again on the next round
            for batch in batches:
                push = self.pending.get(str(batch.get("display_name")))
                if push is None or batch.get("state") != "BATCH_STATE_PENDING":
                    continue
                name = str(batch["name"])
                name = name if name.startswith("batches/") else f"batches/{name}"
                try:
                    if self.ledger.operations.get(name) is None:
                        continue  # not registered yet
                    self.sim.complete(name, "succeeded", self.webhook)
                except (requests.RequestException, LedgerError):
                    continue  # tried again on the next round
                del self.pending[push.tag]
                self.completed_at[push.sha] = time.time()
            self._stop.wait(0.2)


def send_all(stack: ChaosStack, pushes: list[Push], senders: int) -> dict[str, float]:
    """Send every push (redelivered on 5xx, as GitHub's operator would); sent times by sha."""
    sent: dict[str, float] = {}
    local = threading.local()

    def one(push: Push) -> None:
        if not hasattr(local, "driver"):
            local.driver = LoadDriver(stack.ingress_url, stack.sim, random.Random())
        sent[push.sha] = time.time()
        local.driver.send(push)

    with ThreadPoolExecutor(senders) as pool:
        list(pool.map(one, pushes))
    return sent


def round_figures(
    stack: ChaosStack,
    count: int,
    mode: str,
    senders: int,
    rng: random.Random,
    quiet_deadline_s: float = QUIET_DEADLINE_S,
) -> tuple[dict[str, Any], list[str]]:
    from local.chaos.runner import _client
    from shared.ledger import Ledger

    stack.reset_data()  # the simulator too: the round's files are stored after this
    stack.clear_lines()
    pushes = LoadDriver(stack.ingress_url, stack.sim, rng).new_pushes(count, f"e2e-{mode}")
    client = _client(stack.env["FIRESTORE_EMULATOR_HOST"])
    ledger = Ledger(client, grace=timedelta(seconds=1), timeout_s=30.0)
    cpu_before = {name: process_cpu_s(child.pid) for name, child in stack.children.items()}
    webhook = "send" if mode == "webhook" else "drop"
    began = time.time()
    reconciling = ReconcileDriver(stack.reconcile_url) if mode == "reconcile" else None
    with Completer(stack, ledger, pushes, webhook) as completer:
        if reconciling is not None:
            reconciling.__enter__()
        try:
            sent = send_all(stack, pushes, senders)
            accepted_s = time.time() - began
            progress(f"{mode}: {len(pushes)} pushes accepted in {accepted_s:.1f} s")
            quiet = wait_quiet(ledger, pushes, quiet_deadline_s)
        finally:
            if reconciling is not None:
                reconciling.__exit__(None, None, None)
    cpu = {
        name: round(process_cpu_s(child.pid) - cpu_before.get(name, 0.0), 2)
        for name, child in stack.children.items()
    }
    lines = stack.lines("worker") + stack.lines("reconcile")
    problems, census = check(ledger, client, pushes, lines)
    if not quiet:
        problems.insert(0, f"not quiet after {quiet_deadline_s:.0f} s")
    ops = {str(op.context.get("sha")): op for op in all_operations(ledger)}
    to_settled, to_submitted, completion_to_settled, settled_at = [], [], [], []
    by = {"webhook": 0, "reconcile": 0}
    for sha, at in sent.items():
        op = ops.get(sha)
        if op is None or op.settled_at is None:
            continue
        done = op.settled_at.timestamp()
        settled_at.append(done)
        by[str(op.settled_by)] = by.get(str(op.settled_by), 0) + 1
        to_settled.append((done - at) * 1000)
        to_submitted.append((op.submitted_at.timestamp() - at) * 1000)
        if sha in completer.completed_at:
            completion_to_settled.append((done - completer.completed_at[sha]) * 1000)
    settle_s = (max(settled_at) - began) if settled_at else None
    return {
        "pushes": len(pushes),
        "accepted_per_s": round(len(pushes) / accepted_s, 1),
        "settled_per_s": round(len(pushes) / settle_s, 1) if settle_s else None,
        "wall_s": round(time.time() - began, 1),
        "settled_by": by,
        "push_to_settled_ms": _p(to_settled),
        "push_to_submitted_ms": _p(to_submitted),
        "completed_to_settled_ms": _p(completion_to_settled),
        "census": {
            "operations": census.operations,
            "reviews": census.reviews,
            "deliveries": census.deliveries,
        },
        "cpu_s_by_process": dict(sorted(cpu.items(), key=lambda kv: -kv[1])),
        "violations": problems[:20],
    }, problems


def _p(values: list[float]) -> dict[str, float]:
    return {"p50": round(percentile(values, 50), 1), "p99": round(percentile(values, 99), 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.e2e", description=__doc__.split("\n")[0])
    parser.add_argument("--pushes", type=int, default=1000)
    parser.add_argument("--senders", type=int, default=16, help="concurrent GitHub senders")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_PUSHES} pushes (the test)")
    args = parser.parse_args(argv)
    pushes_n = QUICK_PUSHES if args.quick else args.pushes
    if pushes_n < 1 or args.senders < 1:
        parser.error("--pushes and --senders must be positive")
    stop_on_sigterm()  # run the `finally` that stops every child
    started = time.monotonic()
    rounds: dict[str, Any] = {}
    ok = True
    data_dir = tempfile.mkdtemp(prefix="hookledger-bench-e2e-")
    # 8 ports (local.stack.Ports has a console port too); ChaosStack.started picks 7.
    from bench._inprocess import distinct_free_ports

    stack = ChaosStack(Ports(*distinct_free_ports(8)), os.environ, data_dir)
    try:
        progress("starting the whole stack")
        stack.start_all()
        rng = random.Random(15)
        for mode in ("webhook", "reconcile"):
            progress(f"{mode}: {pushes_n} pushes, {args.senders} senders")
            deadline = 180.0 if args.quick else QUIET_DEADLINE_S
            figures, problems = round_figures(stack, pushes_n, mode, args.senders, rng, deadline)
            rounds[mode] = figures
            ok = ok and not problems
            progress(f"{mode}: {json.dumps(figures)}")
    finally:
        stack.stop_all()
    print(
        json.dumps(
            {
                "benchmark": "e2e",
                "ok": ok,
                "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
                "setup": {
                    "pushes": pushes_n,
                    "files_per_push": 2,
                    "senders": args.senders,
                    "reconcile_every_s": 2,
                    "functions": "functions-framework, 1 process each (local/chaos/stack.py)",
                },
                "webhook": rounds.get("webhook"),
                "reconcile": rounds.get("reconcile"),
                "wall_s": round(time.monotonic() - started, 1),
            }
        )
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
