"""One installation's flood, then one push of another's: how long the lone push waits.

    python -m bench.fairness [--quick] [--flood 2000] [--in-flight 2] [--run-s 10]
                             [--group-requests 100] [--window-s 2] [--senders 16]
                             [--shards 16]

Gemini allows a project so many batches in flight and refuses a create beyond them with
a 429; waiting shared batches are then made in turns from the ledger's queue
(shared/ledger/group_queue.py). On the whole local stack (local/chaos/stack.py, ports of
its own, stopped by PID at the end), with the simulator's in-flight quota at `--in-flight`
and its batches each running `--run-s`:

    flood     `--flood` pushes from one installation (token-mode webhooks: none named,
              the key "" of the fair queue), two files each, in shared groups of
              `--group-requests` requests, a `--window-s` window and up to `--shards`
              open at once; Gemini holds its first batches until all have joined
              and it has refused a create: groups are waiting. Then its batches run
    lone      one push from the GitHub App's installation
    measured  from the lone push's send: accepted by the ingress, its group's batch
              created (registered in the ledger) and its check run completed; and from
              the ledger's times, its group's window (joined -> sealed) and its wait in
              the queue (sealed -> batch); the groups, batches made after the lone
              push's, Gemini's refused creates, and the time until all settled

Twice: `REVIEW_FAIR_BY=installation` (`fair`: the lone push's group takes the next turn)
and `off` (`unfair`: every group oldest first, the lone push behind the whole flood),
side by side. Every push must end reviewed once (local/chaos/invariants.py). Prints one
JSON object; exits 1 when an invariant failed or a step missed its deadline.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, fields
from datetime import timedelta
from typing import Any

from google.cloud import firestore

from bench._inprocess import distinct_free_ports
from bench._loadgen import stop_on_sigterm
from bench._priority import RoundFailed, completed_run, until
from local.chaos.drivers import ReconcileDriver
from local.chaos.invariants import check, wait_quiet
from local.chaos.load import FULL_REPO, LoadDriver, Push
from local.chaos.runner import _client
from local.chaos.stack import ChaosStack
from local.functions_server import REPO
from local.stack import Ports
from shared.ledger import Ledger
from shared.ledger.group_records import group_tag
from shared.ledger.ids import submission_id
from shared.settlement.groups import GROUP_KIND

MODES = {"fair": "installation", "unfair": "off"}
QUICK = {"flood": 40, "in_flight": 1, "run_s": 0.5, "group_requests": 8, "window_s": 1.0}
DEADLINE_S = 900.0
HOLD_S = 86_400  # the simulator's longest run: a batch held until the flood has joined


@dataclass(frozen=True)
class FairnessLoad:
    flood: int = 2000
    in_flight: int = 2
    run_s: float = 10.0
    group_requests: int = 100
    window_s: float = 2.0
    senders: int = 16
    shards: int = 16


def progress(message: str) -> None:
    print(f"[bench.fairness] {message}", file=sys.stderr, flush=True)


def fairness_round(
    stack: ChaosStack, load: FairnessLoad, mode: str, rng: random.Random, deadline_s: float
) -> tuple[dict[str, Any], list[str]]:
    """One round (the module's docstring): its figures and the invariants' violations."""
    installation = stack.installation_for(FULL_REPO)
    if installation is None:
        raise RoundFailed("the stack runs in token mode: no installation for the lone push")
    stack.env.update(
        {
            "REVIEW_GROUP_REQUESTS": str(load.group_requests),
            "REVIEW_GROUP_WINDOW_S": str(load.window_s),
            "REVIEW_GROUP_SHARDS": str(load.shards),
            "REVIEW_FAIR_BY": MODES[mode],
        }
    )
    for name in ("worker", "reconcile"):
        stack.stop_and_start(name)
    stack.reset_data()
    stack.clear_lines()
    client = _client(stack.env["FIRESTORE_EMULATOR_HOST"])
    ledger = Ledger(client, grace=timedelta(seconds=1), timeout_s=30.0)
    sim = stack.sim
    sim.set_quotas(gemini_batches_in_flight=load.in_flight, gemini_batch_retry_delay_s=1)
    # Gemini holds its first batches until the whole flood has joined: the quota binds
    # however fast this machine joins, and the queue is built before the lone push.
    sim.set_processing(slots=load.in_flight, run_s=HOLD_S, honour_priority=True)
    flooder = LoadDriver(stack.ingress_url, sim, rng)
    flood = flooder.new_pushes(load.flood, f"fair-{mode}")
    lone_driver = LoadDriver(stack.ingress_url, sim, rng, installation_id=installation)
    [lone] = lone_driver.new_pushes(1, f"fair-{mode}-lone")
    try:
        with ReconcileDriver(stack.reconcile_url):
            flooder.send_many(flood, workers=load.senders)
            progress(f"{mode}: {len(flood)} pushes sent; waiting for them to join")
            until("every flood push joined", lambda: _joined(client) >= load.flood, deadline_s)
            until("a create refused", lambda: _refused(sim) >= 1, deadline_s)
            waiting = len(ledger.groups.queue.waiting(10_000))
            progress(f"{mode}: {waiting} group(s) waiting; Gemini runs; the lone push goes")
            sim.set_processing(run_s=load.run_s)
            sent = time.monotonic()
            lone_driver.send(lone)
            accepted_ms = (time.monotonic() - sent) * 1000
            made = until("the lone push's batch", lambda: _batch_of(ledger, lone), deadline_s)
            made_ms = (time.monotonic() - sent) * 1000
            completed_run(sim, lone)
            reviewed_ms = (time.monotonic() - sent) * 1000
            progress(f"{mode}: lone push's batch in {made_ms:.0f} ms ({made})")
            quiet = wait_quiet(ledger, [*flood, lone], deadline_s)
            drained_ms = (time.monotonic() - sent) * 1000
    finally:
        sim.set_quotas(gemini_batches_in_flight=None)
        sim.set_processing(slots=None, run_s=None, honour_priority=True)
    lines = stack.lines("worker") + stack.lines("reconcile")
    problems = check(ledger, client, [*flood, lone], lines)[0]
    if not quiet:
        problems.append(f"not quiet after {deadline_s:.0f} s")
    figures = {
        "fair_by": MODES[mode],
        "groups_waiting_at_lone_push": waiting,
        "lone_accepted_ms": round(accepted_ms),
        "lone_to_batch_ms": round(made_ms),
        "lone_group_ms": _group_spans(client, ledger, lone),
        "lone_to_check_run_ms": round(reviewed_ms),
        "lone_to_all_settled_ms": round(drained_ms),
        "groups": _count(client, "batch_groups"),
        "batches_made": len(sim.batches()),
        "creates_refused": _refused(sim),
        "batches_made_after_lone": _made_after(client, made),
        "violations": problems[:20],
    }
    return figures, problems


def _joined(client: Any) -> int:
    return _count(client, "group_members")


def _count(client: Any, collection: str) -> int:
    return int(client.collection(collection).count().get()[0][0].value)


def _made_after(client: Any, name: str) -> int:
    """How many group batches were submitted after batch `name` (each operation's
    `submitted_at` in the ledger)."""
    submitted = {
        snapshot.get("name") or snapshot.id: snapshot.get("submitted_at")
        for snapshot in client.collection("operations")
        .where(filter=firestore.FieldFilter("kind", "==", GROUP_KIND))
        .stream()
    }
    return (
        0 if name not in submitted else sum(1 for at in submitted.values() if at > submitted[name])
    )


def _refused(sim: Any) -> int:
    return int(sim.quotas()["refused"]["gemini_batches_in_flight"])


def _group_spans(client: Any, ledger: Ledger, push: Push) -> dict[str, int]:
    """The lone push's group, from the ledger's own times: joined -> sealed (its window,
    and its opener's deferred run coming back), sealed -> its batch registered (its wait
    in the queue of groups, where fairness acts)."""
    submission = ledger.submissions.get(f"hookledger:review:{FULL_REPO}@{push.sha}")
    assert submission is not None and submission.operation
    gid = submission.operation.removeprefix("groups/").rpartition(".")[0]
    group = client.collection("batch_groups").document(gid).get().to_dict() or {}
    made = client.collection("submissions").document(submission_id(group_tag(gid))).get()
    opened, sealed, decided = group["opened_at"], group["sealed_at"], made.get("decided_at")

    def ms(start: Any, end: Any) -> int:
        return round((end - start).total_seconds() * 1000)

    return {"joined_to_sealed": ms(opened, sealed), "sealed_to_batch": ms(sealed, decided)}


def _batch_of(ledger: Ledger, push: Push) -> str | None:
    """The batch of the lone push's group once registered, else None."""
    submission = ledger.submissions.get(f"hookledger:review:{FULL_REPO}@{push.sha}")
    if submission is None or not submission.operation:
        return None
    gid = submission.operation.removeprefix("groups/").rpartition(".")[0]
    group = ledger.groups.get(gid)
    if group is None:
        return None
    return next((part.operation for part in group.parts if part.operation), None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.fairness", description=__doc__)
    parser.add_argument("--quick", action="store_true", help=f"a small run: {QUICK}")
    for field in fields(FairnessLoad):
        parser.add_argument(
            f"--{field.name.replace('_', '-')}", type=float if field.type == "float" else int
        )
    args = parser.parse_args(argv)
    base = asdict(FairnessLoad())
    if args.quick:
        base.update(QUICK)
    given = {k: v for k, v in vars(args).items() if k != "quick" and v is not None}
    load = FairnessLoad(**{**base, **given})
    if (
        min(load.flood, load.in_flight, load.group_requests, load.senders) < 1
        or min(load.run_s, load.window_s) <= 0
    ):
        parser.error("every option must be above 0")
    stop_on_sigterm()
    started = time.monotonic()
    data_dir = tempfile.mkdtemp(prefix="hookledger-bench-fairness-")
    stack = ChaosStack(Ports(*distinct_free_ports(8)), os.environ, data_dir, root=REPO)
    rounds: dict[str, Any] = {}
    ok = True
    try:
        progress(f"starting the whole stack; {load}")
        stack.start_all()
        for seed, mode in enumerate(MODES, start=31):
            try:
                figures, problems = fairness_round(
                    stack, load, mode, random.Random(seed), DEADLINE_S
                )
            except RoundFailed as exc:
                figures, problems = {"failed": str(exc)}, [str(exc)]
            rounds[mode] = figures
            ok = ok and not problems
            progress(f"{mode}: {json.dumps(figures)}")
    finally:
        stack.stop_all()
        shutil.rmtree(data_dir, ignore_errors=True)
    spans = ("lone_accepted_ms", "lone_to_batch_ms", "lone_to_check_run_ms", "lone_group_ms")
    result = {
        "benchmark": "fairness",
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
        "setup": asdict(load),
        "ok": ok,
        **rounds,
        "side_by_side": {span: {m: rounds[m].get(span) for m in MODES} for span in spans},
        "wall_s": round(time.monotonic() - started, 1),
    }
    print(json.dumps(result))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
