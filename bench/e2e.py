"""End to end: N pushes through the whole local stack, settled by webhook, then by reconcile.

    python -m bench.e2e [--pushes 1000] [--senders 16] [--quick] [--rounds webhook,reconcile]
                        [--worker-concurrency N] [--compare REV [--repeat K]]
                        [--sharing both|off] [--group-requests 100] [--group-window-s 2]
                        [--group-shards 1] [--priority both|off|only] [--flood 200]
                        [--presses 4] [--slots 4] [--run-s 1]

Starts the whole stack on free loopback ports (local/chaos/stack.py: Firestore emulator,
Cloud Tasks emulator, simulator, ingress, worker and reconcile under functions-framework;
the worker with the request concurrency Terraform gives it, `Config.worker_concurrency`,
as gunicorn threads) and runs two rounds of `--pushes` signed pushes (2 Markdown files
each) sent by `--senders` threads:
- `webhook`: each batch is completed through the simulator as soon as it exists, with its
  completion webhook sent (ingress -> Cloud Tasks -> worker -> settlement);
- `reconcile`: every completion webhook dropped; reconcile, called every 2 s, settles them.
Per round: accepted/s (pushes / time until the last 202), settled/s (pushes / time until
the last settlement), and p50/p99 of push sent -> settled, push sent -> batch submitted,
and batch completed -> settled. The round asserts, over the whole database, that every
push ends with exactly one operation and its two reviews (local/chaos/invariants.py), and
reports the CPU each process used (ingress, worker, reconcile, the emulators, the
simulator, this process): seconds, cores (seconds per wall second) and ms per push, the
batches the simulator was asked to create per push, and accepted -> settled (the 202 at
the ingress -> the push's operation settled) p50/p95/max.

Shared batches side by side (`--sharing both`, the default): the rounds above run with one
batch per push (REVIEW_GROUP_REQUESTS=0, their figures at the top level as before), then
the worker and reconcile are restarted with shared batches on and the same rounds run
again with as many pushes of the same shape (`shared`; new shas, since the ingress takes
a body it enqueued within the hour for a duplicate): by default REVIEW_GROUP_REQUESTS=100,
REVIEW_GROUP_WINDOW_S=2, REVIEW_GROUP_SHARDS=1, the review's defaults (1,000 requests,
60 s, 16 shards) scaled down to a run of seconds. There each group's batch is completed
once registered; a push's operation is `groups/{gid}.{n}`, settled by its group's fan-out
(docs/architecture.md, "Shared batches"). `sharing` sets both side by side per round.

A person's Re-run side by side (`--priority both`, the default; `only`: these rounds
alone): on the one-batch-per-push stack, `--presses` pushes are reviewed as the GitHub App
gets them, `--flood` more pushes fill Gemini's queue (the simulator running `--slots`
batches at once, `--run-s` each: local/simulator/processing.py), and mid-flood "Re-run" is
pressed on every target's check run; per press, the time to its batch's creation, start, end and
settlement, with the simulator honouring Gemini's `batch.priority` (`on`) and ignoring it
(`off`), under `priority` (bench/_priority.py; `--compare` leaves them out).

`--compare REV` checks REV out in a temporary git worktree (removed at the end, also on
Ctrl-C or SIGTERM) and runs the same load (the same pushes) against REV's functions and
then this tree's, each on a fresh stack of its own, `--repeat` times alternating; it
prints both side by side on stderr, and the JSON holds every run, the medians (with min
and max) and the ratios current / REV. REV's `functions/` and `shared/` are served by
this tree's harness and virtualenv: a revision whose functions need other packages, other
environment variables or another ledger layout than this tree reads is refused or fails
its invariants, and says so.
Progress goes to stderr; one JSON object to stdout. Exit status 1 if an invariant fails,
2 if REV cannot be checked out or served.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

import requests

from bench._loadgen import percentile, stop_on_sigterm
from bench._priority import (
    FLOOD,
    PRESSES,
    QUICK_FLOOD,
    QUICK_PRESSES,
    QUICK_RUN_S,
    QUICK_SLOTS,
    RUN_S,
    SLOTS,
    PriorityLoad,
    priority_round,
)
from bench._priority import side_by_side as priority_side_by_side
from bench._revision import CompareError, check_served_tree, git, revision_worktree
from hookledger.cli.demo import group_batch
from local.chaos.drivers import ReconcileDriver
from local.chaos.invariants import all_operations, check, wait_quiet
from local.chaos.load import LoadDriver, Push
from local.chaos.stack import ChaosStack
from local.functions_server import REPO
from local.stack import Ports
from shared.config import DEFAULTS
from shared.ledger import LedgerError
from shared.ledger.groups import group_tag
from shared.settlement.groups import GROUP_KIND

QUICK_PUSHES = 6
# Whose CPU per push the side-by-side shows (every process's is in each round's figures).
CPU_SHOWN = ("ingress", "worker", "reconcile", "firestore", "cloudtasks")
QUIET_DEADLINE_S = 900.0
# Shared batches' settings for the side-by-side rounds: the review's defaults (1,000
# requests, 60 s, 16 shards) scaled down to a run of seconds.
GROUP_REQUESTS, GROUP_WINDOW_S, GROUP_SHARDS = 100, 2.0, 1
GROUP_BATCH_PREFIX = group_tag("")


def progress(message: str) -> None:
    print(f"[bench.e2e] {message}", file=sys.stderr, flush=True)


def process_cpu_s(pgid: int) -> float:
    """CPU seconds (user + system) of the live processes of process group `pgid` (/proc)."""
    from bench._ackparts import group_cpu_s

    return group_cpu_s(pgid)


def own_cpu_s() -> float:
    """CPU seconds of this process: the senders, the completer and the ledger polls."""
    times = os.times()
    return times.user + times.system


class Completer:
    """Completes each push's batch once it is registered; remembers when (epoch s), by
    push sha (`completed_at`) and by batch name (`batch_completed_at`). `shared`: the
    batches are groups' (display name `hookledger:group:{gid}`), completed until stopped.

    Only registered batches: a real batch runs for minutes, so its webhook never beats
    the registration; completing it at once could (the webhook is then ignored and only
    reconcile, absent from the webhook round, would settle it).
    """

    def __init__(
        self,
        stack: ChaosStack,
        ledger: Any,
        pushes: list[Push],
        webhook: str,
        shared: bool = False,
    ) -> None:
        self.sim = stack.sim
        self.ledger = ledger
        self.pending = {push.tag: push for push in pushes}
        self.completed_at: dict[str, float] = {}
        self.batch_completed_at: dict[str, float] = {}
        self.webhook = webhook
        self.shared = shared
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="completer", daemon=True)

    def __enter__(self) -> Completer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _loop(self) -> None:
        while (self.pending or self.shared) and not self._stop.is_set():
            try:
                batches = self.sim.batches()
            except requests.RequestException:
                batches = []  # asked again on the next round
            for batch in batches:
                display = str(batch.get("display_name"))
                push = self.pending.get(display)
                ours = push is not None or (self.shared and display.startswith(GROUP_BATCH_PREFIX))
                if not ours or batch.get("state") != "BATCH_STATE_PENDING":
                    continue
                name = str(batch["name"])
                name = name if name.startswith("batches/") else f"batches/{name}"
                if name in self.batch_completed_at:
                    continue  # the simulator may list it pending a moment longer
                try:
                    if self.ledger.operations.get(name) is None:
                        continue  # not registered yet
                    self.sim.complete(name, "succeeded", self.webhook)
                except (requests.RequestException, LedgerError):
                    continue  # tried again on the next round
                self.batch_completed_at[name] = time.time()
                if push is not None:
                    del self.pending[push.tag]
                    self.completed_at[push.sha] = self.batch_completed_at[name]
            self._stop.wait(0.2)


def send_all(
    stack: ChaosStack, pushes: list[Push], senders: int
) -> tuple[dict[str, float], dict[str, float]]:
    """Send every push (redelivered on 5xx, as GitHub's operator would); by sha, when each
    was sent and when the ingress accepted it (its answer came back)."""
    sent: dict[str, float] = {}
    accepted: dict[str, float] = {}
    local = threading.local()

    def one(push: Push) -> None:
        if not hasattr(local, "driver"):
            local.driver = LoadDriver(stack.ingress_url, stack.sim, random.Random())
        sent[push.sha] = time.time()
        local.driver.send(push)
        accepted[push.sha] = time.time()

    with ThreadPoolExecutor(senders) as pool:
        list(pool.map(one, pushes))
    return sent, accepted


def round_figures(
    stack: ChaosStack,
    count: int,
    mode: str,
    senders: int,
    rng: random.Random,
    quiet_deadline_s: float = QUIET_DEADLINE_S,
    label: str = "",
    shared: bool = False,
) -> tuple[dict[str, Any], list[str]]:
    from local.chaos.runner import _client
    from shared.ledger import Ledger

    stack.reset_data()  # the simulator too: the round's files are stored after this
    stack.clear_lines()
    name = f"e2e-shared-{mode}" if shared else f"e2e-{mode}"
    pushes = LoadDriver(stack.ingress_url, stack.sim, rng).new_pushes(count, name)
    client = _client(stack.env["FIRESTORE_EMULATOR_HOST"])
    ledger = Ledger(client, grace=timedelta(seconds=1), timeout_s=30.0)
    cpu_before = {name: process_cpu_s(child.pid) for name, child in stack.children.items()}
    cpu_before["bench"] = own_cpu_s()
    webhook = "send" if mode == "webhook" else "drop"
    began = time.time()
    reconciling = ReconcileDriver(stack.reconcile_url) if mode == "reconcile" else None
    with Completer(stack, ledger, pushes, webhook, shared) as completer:
        if reconciling is not None:
            reconciling.__enter__()
        try:
            sent, accepted = send_all(stack, pushes, senders)
            accepted_s = time.time() - began
            progress(f"{label} {mode}: {len(pushes)} pushes accepted in {accepted_s:.1f} s")
            quiet = wait_quiet(ledger, pushes, quiet_deadline_s)
        finally:
            if reconciling is not None:
                reconciling.__exit__(None, None, None)
    wall_s = time.time() - began
    cpu = {
        name: round(process_cpu_s(child.pid) - cpu_before.get(name, 0.0), 2)
        for name, child in stack.children.items()
    }
    cpu["bench"] = round(own_cpu_s() - cpu_before["bench"], 2)
    batches = len(stack.sim.batches())  # reset with the round: this round's creates
    lines = stack.lines("worker") + stack.lines("reconcile")
    problems, census = check(ledger, client, pushes, lines)
    if not quiet:
        problems.insert(0, f"not quiet after {quiet_deadline_s:.0f} s")
    operations = list(all_operations(ledger))
    ops = {str(op.context.get("sha")): op for op in operations if op.group or not shared}
    to_settled, to_submitted, completion_to_settled, settled_at = [], [], [], []
    accepted_to_settled = []
    by = {"webhook": 0, "reconcile": 0}
    for sha, at in sent.items():
        op = ops.get(sha)
        if op is None or op.settled_at is None:
            continue
        done = op.settled_at.timestamp()
        settled_at.append(done)
        by[str(op.settled_by)] = by.get(str(op.settled_by), 0) + 1
        to_settled.append((done - at) * 1000)
        accepted_to_settled.append((done - accepted[sha]) * 1000)
        to_submitted.append((op.submitted_at.timestamp() - at) * 1000)
        completed = completed_at(completer, ledger, sha, op)
        if completed is not None:
            completion_to_settled.append((done - completed) * 1000)
    settle_s = (max(settled_at) - began) if settled_at else None
    return (
        {
            "pushes": len(pushes),
            "accepted_per_s": round(len(pushes) / accepted_s, 1),
            "settled_per_s": round(len(pushes) / settle_s, 1) if settle_s else None,
            "wall_s": round(wall_s, 1),
            "settled_by": by,
            "push_to_settled_ms": _p(to_settled),
            "push_to_submitted_ms": _p(to_submitted),
            "completed_to_settled_ms": _p(completion_to_settled),
            # The 202 at the ingress -> the push's operation settled (a shared push's includes
            # its wait for the group to seal).
            "accepted_to_settled_ms": _spread(accepted_to_settled),
            "batches_created": batches,
            "batches_per_push": round(batches / len(pushes), 3),
            "census": {
                "operations": census.operations,  # the pushes' (groups apart)
                "groups": sum(1 for op in operations if op.kind == GROUP_KIND),
                "reviews": census.reviews,
                "deliveries": census.deliveries,
            },
            "cpu_s_by_process": dict(sorted(cpu.items(), key=lambda kv: -kv[1])),
            # CPU seconds per wall second: 1.0 is one core busy for the whole round.
            "cores_by_process": {name: round(used / wall_s, 2) for name, used in cpu.items()},
            "cpu_ms_per_push": {
                name: round(1000 * used / len(pushes), 1) for name, used in cpu.items() if used
            },
            "dispatches": dispatch_outcomes(stack.lines("cloudtasks")),
            "violations": problems[:20],
        },
        problems,
    )


def dispatch_outcomes(lines: list[str]) -> dict[str, int]:
    """The round's Cloud Tasks attempts by answer, from the emulator's `dispatch` lines
    (local/cloudtasks_emulator/dispatcher.py): a retried or refused attempt is work done
    twice, e.g. a request left waiting past the dispatch deadline behind a busy worker.
    A lower bound: the last attempts' lines may still be on their way."""
    counts = {"attempts": 0, "retries": 0, "2xx": 0, "503": 0, "deadline_exceeded": 0}
    # finditer: lines printed by two dispatch threads at once can come out joined.
    for found in re.finditer(r"attempt=(\d+) \S+ \S+ -> (.+?) in \d+ ms", "\n".join(lines)):
        counts["attempts"] += 1
        counts["retries"] += int(found.group(1)) > 1
        answer = found.group(2)
        if answer.startswith("2"):
            counts["2xx"] += 1
        elif answer == "503":
            counts["503"] += 1
        elif "deadline" in answer:
            counts["deadline_exceeded"] += 1
    return counts


def _p(values: list[float]) -> dict[str, float]:
    return {"p50": round(percentile(values, 50), 1), "p99": round(percentile(values, 99), 1)}


def _spread(values: list[float]) -> dict[str, float]:
    return {
        "p50": round(percentile(values, 50), 1),
        "p95": round(percentile(values, 95), 1),
        "max": round(max(values), 1) if values else float("nan"),
    }


def completed_at(completer: Completer, ledger: Any, sha: str, op: Any) -> float | None:
    """When the push's batch was completed: its own, or its group's (found through the
    group's submission, hookledger/cli/demo.py `group_batch`)."""
    if op.group is None:
        return completer.completed_at.get(sha)
    batch = group_batch(ledger, op.group)
    return None if batch is None else completer.batch_completed_at.get(batch)


# ----------------------------------------------------------------- one tree, one stack


def run_tree(
    label: str,
    root: Path,
    pushes_n: int,
    senders: int,
    modes: tuple[str, ...],
    worker_threads: int,
    quiet_deadline_s: float,
    dispatch_limit: int | None = None,
    sharing: dict[str, str] | None = None,
    priority: PriorityLoad | None = None,
) -> tuple[dict[str, Any], bool]:
    """Every round of `modes` against the functions of `root`, on a stack of its own (fresh
    emulators on free loopback ports, stopped by PID at the end); figures by mode. With
    `priority`, a Re-run pressed behind a flood of pushes, priority on and off, under
    `priority`. With `sharing` (REVIEW_GROUP_* settings), the same rounds again with shared
    batches on, as many pushes of the same shape, under `shared`."""
    from bench._inprocess import distinct_free_ports

    data_dir = tempfile.mkdtemp(prefix="hookledger-bench-e2e-")
    # 8 ports (local.stack.Ports has a console port too); ChaosStack.started picks 7.
    stack = ChaosStack(
        Ports(*distinct_free_ports(8)),
        os.environ,
        data_dir,
        root=root,
        worker_threads=worker_threads,
        dispatch_limit=dispatch_limit,
    )
    rounds: dict[str, Any] = {}
    ok = True
    try:
        progress(f"{label}: starting the whole stack (functions from {root})")
        stack.start_all()
        for seed, mode in enumerate(modes, start=15):
            # The same pushes (shas, files) for every tree.
            progress(f"{label} {mode}: {pushes_n} pushes, {senders} senders")
            figures, problems = round_figures(
                stack, pushes_n, mode, senders, random.Random(seed), quiet_deadline_s, label
            )
            rounds[mode] = figures
            ok = ok and not problems
            progress(f"{label} {mode}: {json.dumps(figures)}")
        if priority is not None:
            rounds["priority"], fine = priority_rounds(stack, priority, quiet_deadline_s)
            ok = ok and fine
        if sharing:
            share(stack, sharing)
            rounds["shared"] = {"settings": sharing}
            # Pushes of the same shape, not the same bodies: the ingress takes a body it
            # enqueued within the hour (a task name's tombstone) for a duplicate.
            for seed, mode in enumerate(modes, start=115):
                progress(f"{label} shared {mode}: {pushes_n} pushes, {sharing}")
                figures, problems = round_figures(
                    stack,
                    pushes_n,
                    mode,
                    senders,
                    random.Random(seed),
                    quiet_deadline_s,
                    f"{label} shared",
                    shared=True,
                )
                rounds["shared"][mode] = figures
                ok = ok and not problems
                progress(f"{label} shared {mode}: {json.dumps(figures)}")
            rounds["sharing"] = side_by_side_sharing(rounds, modes)
    finally:
        stack.stop_all()
        shutil.rmtree(data_dir, ignore_errors=True)
    return rounds, ok


def priority_rounds(
    stack: ChaosStack, load: PriorityLoad, quiet_deadline_s: float
) -> tuple[dict[str, Any], bool]:
    """The Re-run behind a flood, Gemini's priority honoured (`on`) then not (`off`), side by
    side (bench/_priority.py); whether every invariant held."""
    rounds: dict[str, Any] = {"load": vars(load) | {"reconcile_every_s": 2}}
    ok = True
    for seed, mode in enumerate(("on", "off"), start=215):
        progress(f"priority {mode}: {load}")
        figures, problems = priority_round(
            stack, load, mode == "on", random.Random(seed), quiet_deadline_s, progress
        )
        rounds[mode] = {**figures, "violations": problems[:20]}
        ok = ok and not problems
        progress(f"priority {mode}: {json.dumps(rounds[mode])}")
    rounds["side_by_side"] = priority_side_by_side(rounds)
    return rounds, ok


def share(stack: ChaosStack, sharing: dict[str, str]) -> None:
    """The worker and reconcile restarted with shared batches on (local/chaos/quota.py does
    the same); ChaosStack's environment otherwise makes one batch per push."""
    stack.env.update(sharing)
    for name in ("worker", "reconcile"):
        stack.stop_and_start(name)


def side_by_side_sharing(rounds: dict[str, Any], modes: tuple[str, ...]) -> dict[str, Any]:
    """Per round, one batch per push (`off`) beside shared batches (`on`): batches created
    per push, accepted -> settled, and the functions' CPU."""

    def headline(figures: dict[str, Any]) -> dict[str, Any]:
        cpu = figures["cpu_s_by_process"]
        per_push = figures["cpu_ms_per_push"]
        return {
            "batches_per_push": figures["batches_per_push"],
            "accepted_to_settled_ms": figures["accepted_to_settled_ms"],
            "cpu_s": {name: cpu.get(name, 0.0) for name in ("ingress", "worker")},
            "cpu_ms_per_push": {name: per_push.get(name, 0.0) for name in ("ingress", "worker")},
        }

    return {
        mode: {"off": headline(rounds[mode]), "on": headline(rounds["shared"][mode])}
        for mode in modes
        if mode in rounds and mode in rounds["shared"]
    }


# ----------------------------------------------------------------- --compare REV


def summarize(runs: list[dict[str, Any]], modes: tuple[str, ...]) -> dict[str, Any]:
    """Per mode, the median over repeated runs of the headline figures, with min and max."""
    out: dict[str, Any] = {}
    for mode in modes:
        figures = [run[mode] for run in runs if run.get(mode)]
        headline = {
            "settled_per_s": [f["settled_per_s"] for f in figures if f["settled_per_s"]],
            "push_to_settled_p50_ms": [f["push_to_settled_ms"]["p50"] for f in figures],
            "push_to_settled_p99_ms": [f["push_to_settled_ms"]["p99"] for f in figures],
            "accepted_per_s": [f["accepted_per_s"] for f in figures],
        }
        for process in CPU_SHOWN:
            headline[f"cpu_ms_per_push_{process}"] = [
                f["cpu_ms_per_push"][process]
                for f in figures
                if process in f.get("cpu_ms_per_push", {})
            ]
        out[mode] = {
            name: {
                "median": round(statistics.median(values), 1),
                "min": min(values),
                "max": max(values),
            }
            for name, values in headline.items()
            if values
        }
    return out


def ratios(current: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    """current / other of each median: settled/s above 1 and p50 below 1 are better."""
    out: dict[str, Any] = {}
    for mode, figures in current.items():
        theirs = other.get(mode, {})
        out[mode] = {
            name: round(value["median"] / theirs[name]["median"], 2)
            for name, value in figures.items()
            if theirs.get(name, {}).get("median")
        }
    return out


def side_by_side(labels: tuple[str, str], summaries: tuple[dict[str, Any], dict[str, Any]]) -> str:
    """A small table of both trees' medians and the ratio, for the terminal."""
    rows = [f"{'':40}{labels[0]:>24}{labels[1]:>24}{'ratio':>8}"]
    for mode, figures in summaries[1].items():
        for name, value in figures.items():
            theirs = summaries[0].get(mode, {}).get(name, {}).get("median")
            ours = value["median"]
            ratio = f"{ours / theirs:.2f}" if theirs else "-"
            shown = "-" if theirs is None else f"{theirs:g}"
            rows.append(f"{mode + ' ' + name:40}{shown:>24}{ours:>24g}{ratio:>8}")
    return "\n".join(rows)


# ----------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.e2e", description=__doc__.split("\n")[0])
    parser.add_argument("--pushes", type=int, default=1000)
    parser.add_argument("--senders", type=int, default=16, help="concurrent GitHub senders")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_PUSHES} pushes (the test)")
    parser.add_argument(
        "--rounds",
        default="webhook,reconcile",
        help="which rounds, comma-separated: webhook, reconcile (default both)",
    )
    parser.add_argument(
        "--worker-concurrency",
        type=int,
        default=DEFAULTS.worker_concurrency,
        help="requests the worker serves at once (default: Terraform's worker_function."
        f"concurrency, Config.worker_concurrency = {DEFAULTS.worker_concurrency})",
    )
    parser.add_argument(
        "--dispatch-limit",
        type=int,
        help="the queue's max_concurrent_dispatches (default: the emulator's, 1,000); the "
        "worker's concurrency models Cloud Run, which never sends one instance more",
    )
    parser.add_argument(
        "--compare",
        metavar="REV",
        help="also run the same load against revision REV (a temporary git worktree)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="with --compare: runs of each tree, alternating (medians, min and max reported)",
    )
    parser.add_argument(
        "--sharing",
        choices=("both", "off"),
        default="both",
        help="both: the rounds with one batch per push, then again with shared batches "
        "(`shared`, side by side in `sharing`); off: one batch per push only (--compare: off)",
    )
    parser.add_argument(
        "--group-requests",
        type=int,
        default=GROUP_REQUESTS,
        help="REVIEW_GROUP_REQUESTS of the shared rounds",
    )
    parser.add_argument(
        "--group-window-s",
        type=float,
        default=GROUP_WINDOW_S,
        help="REVIEW_GROUP_WINDOW_S of the shared rounds",
    )
    parser.add_argument(
        "--group-shards",
        type=int,
        default=GROUP_SHARDS,
        help="REVIEW_GROUP_SHARDS of the shared rounds",
    )
    parser.add_argument(
        "--priority",
        choices=("both", "off", "only"),
        default="both",
        help="both: also a Re-run pressed behind a flood of pushes, Gemini's batch.priority "
        "honoured and not, side by side (`priority`); only: those rounds alone; off: none",
    )
    parser.add_argument("--flood", type=int, help=f"pushes flooding the queue ({FLOOD})")
    parser.add_argument("--presses", type=int, help=f"Re-runs pressed at once ({PRESSES})")
    parser.add_argument("--slots", type=int, help=f"batches the simulator runs at once ({SLOTS})")
    parser.add_argument("--run-s", type=float, help=f"how long each batch runs ({RUN_S})")
    args = parser.parse_args(argv)
    pushes_n = QUICK_PUSHES if args.quick else args.pushes
    modes = tuple(m.strip() for m in args.rounds.split(",") if m.strip())
    priority = priority_load(args, parser) if args.priority != "off" else None
    if min(pushes_n, args.senders, args.worker_concurrency, args.repeat) < 1 or (
        args.dispatch_limit is not None and args.dispatch_limit < 1
    ):
        parser.error("--pushes, --senders, --worker-concurrency, --repeat, --dispatch-limit > 0")
    if not modes or set(modes) - {"webhook", "reconcile"}:
        parser.error("--rounds takes webhook and/or reconcile")
    if min(args.group_requests, args.group_shards) < 1 or args.group_window_s <= 0:
        parser.error("--group-requests, --group-shards and --group-window-s > 0")
    # Another revision may not share batches: --compare measures one batch per push.
    sharing = (
        {
            "REVIEW_GROUP_REQUESTS": str(args.group_requests),
            "REVIEW_GROUP_WINDOW_S": str(args.group_window_s),
            "REVIEW_GROUP_SHARDS": str(args.group_shards),
        }
        if args.sharing == "both" and args.compare is None and args.priority != "only"
        else None
    )
    if args.priority == "only":
        modes = ()
    stop_on_sigterm()  # run the `finally` that stops every child and removes the worktree
    started = time.monotonic()
    deadline = 180.0 if args.quick else QUIET_DEADLINE_S

    def run(label: str, root: Path) -> tuple[dict[str, Any], bool]:
        return run_tree(
            label,
            root,
            pushes_n,
            args.senders,
            modes,
            args.worker_concurrency,
            deadline,
            args.dispatch_limit,
            sharing if root == REPO else None,
            priority if root == REPO and args.compare is None else None,
        )

    setup = {
        "pushes": pushes_n,
        "files_per_push": 2,
        "senders": args.senders,
        "reconcile_every_s": 2,
        "worker_concurrency": args.worker_concurrency,
        "max_concurrent_dispatches": args.dispatch_limit or "emulator default (1000)",
        "shared_batches": sharing or "off",
        "priority": vars(priority) if priority is not None else "off",
        "functions": (
            "functions-framework (gunicorn), 1 process each (local/chaos/stack.py); the "
            f"worker with THREADS={args.worker_concurrency}, the others with "
            "functions-framework's default threads"
        ),
    }
    result: dict[str, Any] = {
        "benchmark": "e2e",
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
        "setup": setup,
    }
    if args.compare is None:
        rounds, ok = run("current", REPO)
        result.update({"ok": ok, **rounds})
    else:
        try:
            ok, compare = compare_with(args.compare, args.repeat, run, modes)
        except CompareError as exc:
            print(f"bench.e2e --compare: {exc}", file=sys.stderr)
            return 2
        result.update({"ok": ok, **compare["current"]["runs"][-1], "compare": compare})
    result["wall_s"] = round(time.monotonic() - started, 1)
    print(json.dumps(result))
    return 0 if result["ok"] else 1


def priority_load(args: argparse.Namespace, parser: argparse.ArgumentParser) -> PriorityLoad:
    """The priority rounds' load from the options (the quick one with --quick)."""
    quick = args.quick
    load = PriorityLoad(
        flood=args.flood if args.flood is not None else (QUICK_FLOOD if quick else FLOOD),
        presses=args.presses if args.presses is not None else (QUICK_PRESSES if quick else PRESSES),
        slots=args.slots if args.slots is not None else (QUICK_SLOTS if quick else SLOTS),
        run_s=args.run_s if args.run_s is not None else (QUICK_RUN_S if quick else RUN_S),
        senders=args.senders,
    )
    if min(load.flood, load.presses, load.slots) < 1 or load.run_s <= 0:
        parser.error("--flood, --presses, --slots and --run-s > 0")
    return load


def compare_with(
    rev: str,
    repeat: int,
    run: Callable[[str, Path], tuple[dict[str, Any], bool]],
    modes: tuple[str, ...],
) -> tuple[bool, dict[str, Any]]:
    """Run `rev`'s functions and this tree's under the same load, `repeat` times each,
    alternating (the other revision first); both trees' figures, medians and ratios."""
    head = git("rev-parse", "HEAD")
    dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    ok = True
    runs: dict[str, list[dict[str, Any]]] = {"other": [], "current": []}
    with revision_worktree(rev) as (root, sha):
        check_served_tree(root)
        for attempt in range(1, repeat + 1):
            for key, label, tree in (
                ("other", f"{rev}@{sha[:7]}", root),
                ("current", f"current@{head[:7]}", REPO),
            ):
                progress(f"run {attempt}/{repeat}: {label}")
                rounds, fine = run(label, tree)
                runs[key].append(rounds)
                ok = ok and fine
    other, current = summarize(runs["other"], modes), summarize(runs["current"], modes)
    labels = (f"{rev}@{sha[:7]}", f"current@{head[:7]}{'+dirty' if dirty else ''}")
    progress("side by side (medians):\n" + side_by_side(labels, (other, current)))
    return ok, {
        "revision": {"ref": rev, "commit": sha, "summary": other, "runs": runs["other"]},
        "current": {"commit": head, "dirty": dirty, "summary": current, "runs": runs["current"]},
        # current / revision: settled_per_s above 1, p50/p99 and CPU below 1 are improvements.
        "ratios": ratios(current, other),
        "limits": (
            "the other revision's functions/ and shared/ are served by this tree's harness "
            "(emulators, simulator, load generator, invariant checks read through this "
            "tree's ledger) with this tree's virtualenv"
        ),
    }


if __name__ == "__main__":
    raise SystemExit(main())
