"""What one event costs: Firestore reads/writes/deletes, Cloud Tasks calls, Gemini and GitHub calls.

    python -m bench.cost [--events 20]

Starts the Firestore emulator, the Cloud Tasks emulator and the simulator on free loopback
ports, and serves ingress, worker and reconcile (the real `functions/main.py` entry points)
from this process, so every client call they make is counted here (bench/_counting.py:
the Firestore and Cloud Tasks GAPIC methods, google-genai's request, requests to GitHub
paths). The bench's own set-up and waiting run on the main thread and are not counted.
Each figure is counted over `--events` events, one at a time, each window closed only once
the work it started is finished (delivery `done`, operation settled and written back):

- `accepted_push`: a signed GitHub push (2 Markdown files) accepted by the ingress and
  handled by the worker (files fetched, one batch submitted and registered);
- `settled_by_webhook`: the batch completed with its completion webhook sent: ingress,
  worker, settlement with its 2 reviews;
- `settled_by_reconcile`: `--events` batches completed with webhooks dropped, then ONE
  reconcile run; per operation = (that run - a run with nothing due) / events;
- `redelivered_push`: GitHub redelivers an accepted push (same delivery id);
- `replayed_delivery`: `hookledger deliveries replay` of a finished push delivery;
- `reconcile_nothing_due`: one reconcile run with every operation settled.

Each figure is printed next to the minimum the design needs (MINIMUM below, and
docs/performance.md "What it costs" for why). Progress goes to stderr; one JSON object to
stdout. Exit status 1 if an event did not finish.

It measures the review with a batch of each push's own (REVIEW_GROUP_REQUESTS=0,
bench/_inprocess.py), not the shared batches the review defaults to in production; the
JSON's `mode` says both (bench.e2e runs shared batches beside it).
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import sys
import threading
import time
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from bench._counting import Counts, OperationCounter
from bench._inprocess import InProcessStack
from bench._loadgen import stop_on_sigterm

FIGURES = ("firestore_reads", "firestore_writes", "firestore_deletes", "tasks_create_task")
# The fewest operations each event can take and keep the design's promises
# (docs/performance.md "What it costs" says why each is needed); Gemini/GitHub calls are
# per push of 2 files.
MINIMUM: dict[str, dict[str, int]] = {
    "accepted_push": {
        "firestore_commits": 2,  # delivery + claim before the batch; winner + done after it
        "firestore_reads": 1,  # the delivery: Cloud Tasks delivers at least once
        "firestore_writes": 3,  # submission claim before the batch, operation, delivery done
        "firestore_deletes": 0,
        "firestore_refused_writes": 0,
        "tasks_create_task": 1,  # the durable hand-off before the 202
        "gemini_calls": 1,  # one batch for the push
        "github_calls": 1,  # one GraphQL query reads up to 50 Markdown files
    },
    "settled_by_webhook": {
        "firestore_commits": 1,  # settlement, write-back, outbox and the delivery's done
        "firestore_reads": 2,  # the delivery (dedupe; the done mark's condition), the operation
        "firestore_writes": 4,  # delivery done; the operation flipped; 2 reviews
        "firestore_deletes": 0,
        "firestore_refused_writes": 0,
        "tasks_create_task": 1,
        "gemini_calls": 1,  # re-fetch: the webhook body is only a hint
    },
    "settled_by_reconcile": {
        "firestore_commits": 1,  # settlement and write-back together
        "firestore_reads": 1,  # its row of the due query (the settle commit is conditional)
        "firestore_writes": 3,  # the operation flipped; 2 reviews
        "firestore_deletes": 0,
        "firestore_refused_writes": 0,
        "tasks_create_task": 0,
        "gemini_calls": 1,  # the poll
    },
    "redelivered_push": {
        "firestore_reads": 0,
        "firestore_writes": 0,
        "firestore_deletes": 0,
        "firestore_refused_writes": 0,
        "tasks_create_task": 1,  # refused by name: the dedupe costs one call, no Firestore
    },
    "replayed_delivery": {
        "firestore_reads": 3,  # the stored delivery; the worker's dedupe; the earlier submission
        "firestore_writes": 2,  # back to queued; done again
        "firestore_deletes": 0,
        "firestore_refused_writes": 0,
        "tasks_create_task": 1,
    },
    "reconcile_nothing_due": {
        "firestore_reads": 1,  # one empty due query is billed one read
        "firestore_writes": 1,  # the run record (console)
        "firestore_deletes": 0,
        "firestore_refused_writes": 0,
        "tasks_create_task": 0,
    },
}
# Each operation above the minimum, and the failure it prevents (docs/performance.md,
# "What it costs").
ABOVE_MINIMUM_BECAUSE: dict[str, dict[str, str]] = {
    "accepted_push": {
        "firestore_reads": "the winner's commit reads the submission (no winner set yet: "
        "one batch per push), the operation (a superseded batch never wins) and the "
        "delivery (the done mark only while this attempt holds the lease)",
        "firestore_writes": "the delivery is recorded before any work (its lease: two runs "
        "of one delivery never overlap) and the submission takes its winner (a later run "
        "of the push finds the batch instead of making another)",
    },
    "settled_by_webhook": {
        "firestore_reads": "the event names the batch by its tag, found through the "
        "push's submission",
        "firestore_writes": "the push's submission gets the operation's expiry in the "
        "same commit (both leave together by TTL)",
    },
    "settled_by_reconcile": {
        "firestore_writes": "the push's submission gets the operation's expiry",
    },
    "replayed_delivery": {
        "firestore_reads": "the reopen's update is conditional on a read of its own (a "
        "lease taken since the CLI's read is not overwritten); the decided submission's "
        "operation is read (an expired record is never revived); the done mark reads the "
        "delivery (only while this attempt holds the lease)",
        "firestore_writes": "the worker takes the delivery's lease (two runs of one "
        "delivery never overlap)",
        "firestore_refused_writes": "the worker runs a push as its first run does, paying "
        "no read for it: the one commit of delivery, claim and body marker, then the "
        "delivery with its marker, then the claim, each refused as already there",
    },
    "reconcile_nothing_due": {
        "firestore_reads": "each of the run's other queries answers empty, billed one read "
        "each: open claims (orphan adoption), groups due (shared batches), outboxes due; "
        "a process's first run also reads the old adoption watermark once",
    },
}
WAIT_S = 60.0


def progress(message: str) -> None:
    print(f"[bench.cost] {message}", file=sys.stderr, flush=True)


def wait_for(what: str, condition: Callable[[], bool], deadline_s: float = WAIT_S) -> None:
    give_up = time.monotonic() + deadline_s
    while not condition():
        if time.monotonic() > give_up:
            raise RuntimeError(f"timed out after {deadline_s:.0f} s waiting for {what}")
        time.sleep(0.02)


class CostRun:
    """The scenarios, over one in-process stack; every wait and set-up uncounted."""

    def __init__(self, stack: InProcessStack, counter: OperationCounter, events: int) -> None:
        from local.chaos.load import LoadDriver
        from shared.entrypoints import runtime

        self.stack, self.counter, self.events = stack, counter, events
        self.load = LoadDriver(
            f"http://127.0.0.1:{stack.ports.ingress}", stack.sim, random.Random(7)
        )
        self.ledger = runtime.ledger()
        self.windows: dict[str, list[Counts]] = {}

    def window(self, name: str, action: Callable[[], object], done: Callable[[], bool]) -> None:
        before = self.counter.snapshot()
        action()
        wait_for(name, done)
        self.windows.setdefault(name, []).append(self.counter.snapshot() - before)

    def settled(self, sha: str) -> bool:
        op = self.ledger.queries.find_operation("context.sha", sha)
        return bool(op and not op.pending and op.writeback_done and not op.outbox)

    def settled_and_quiet(self, sha: str) -> bool:
        return self.settled(sha) and self.nothing_queued()

    def nothing_queued(self) -> bool:
        return self.ledger.deliveries.count(status="queued") == 0

    def accepted(self, label: str) -> list[tuple[Any, str]]:
        """`events` pushes, each accepted and handled in its own window."""
        pushes = []
        for push in self.load.new_pushes(self.events, label):
            delivery = str(uuid.uuid4())

            def handled(sha: str = push.sha, delivery: str = delivery) -> bool:
                stored = self.ledger.deliveries.get("github", delivery)
                return bool(stored and stored.status == "done") and bool(
                    self.ledger.queries.find_operation("context.sha", sha)
                )

            self.window(
                f"accepted_{label}",
                partial(self._push, push.payload(), delivery, 202),
                handled,
            )
            pushes.append((push, delivery))
        return pushes

    def _push(self, payload: bytes, delivery: str, expect: int) -> None:
        answer = self.stack.post_push(payload, delivery)
        if answer.status_code != expect:
            raise RuntimeError(f"push {delivery}: {answer.status_code}, expected {expect}")

    def complete(self, sha: str, webhook: str) -> None:
        op = self.ledger.queries.find_operation("context.sha", sha)
        assert op is not None, f"no operation for {sha}"
        self.stack.sim.complete(op.name, "succeeded", webhook=webhook)

    def run(self) -> None:
        pushes = self.accepted("push")
        for push, _ in pushes:
            self.window(
                "settled_by_webhook",
                partial(self.complete, push.sha, "send"),
                partial(self.settled_and_quiet, push.sha),
            )
        for push, delivery in pushes:
            self.window(
                "redelivered_push",
                partial(self._push, push.payload(), delivery, 200),
                self.nothing_queued,
            )
        for _, delivery in pushes:
            self.window("replayed_delivery", partial(self._replay, delivery), self.nothing_queued)
        self.window("reconcile_nothing_due", self.stack.post_reconcile, lambda: True)
        later = self.accepted("late")
        for push, _ in later:
            self.complete(push.sha, "drop")
        self.window(
            "reconcile_with_due",
            self.stack.post_reconcile,
            lambda: all(self.settled(p.sha) for p, _ in later) and self.nothing_queued(),
        )
        self.window("reconcile_nothing_due", self.stack.post_reconcile, lambda: True)

    def _replay(self, delivery_id: str) -> None:
        """`hookledger deliveries replay`, on a thread of its own so its calls are counted."""
        from hookledger.cli.deliveries import replay

        stored = self.ledger.deliveries.get("github", delivery_id)
        assert stored is not None
        failure: list[BaseException] = []

        def call() -> None:
            try:
                replay(stored)
            except BaseException as exc:  # re-raised on the main thread below
                failure.append(exc)

        thread = threading.Thread(target=call, name="cli-replay")
        thread.start()
        thread.join(30)
        if failure:
            raise failure[0]


def per_event(windows: list[Counts], divide_by: int = 1) -> dict[str, Any]:
    keys = sorted({key for window in windows for key in window})
    out: dict[str, Any] = {"by_collection": {}}
    for key in keys:
        values = [window[key] / divide_by for window in windows]
        mean = round(sum(values) / len(values), 3)
        if ":" in key:
            out["by_collection"][key] = mean
        else:
            out[key] = mean
    out["varies"] = sorted(k for k in keys if len({w[k] for w in windows}) > 1)
    out["samples"] = len(windows)
    return out


def figures(run: CostRun) -> dict[str, Any]:
    w = run.windows
    result = {
        "accepted_push": per_event(w["accepted_push"]),
        "settled_by_webhook": per_event(w["settled_by_webhook"]),
        "redelivered_push": per_event(w["redelivered_push"]),
        "replayed_delivery": per_event(w["replayed_delivery"]),
        "reconcile_nothing_due": per_event(w["reconcile_nothing_due"]),
    }
    # The empty run after it: a process's first run reads the old adoption watermark once
    # (shared/reconcile/adoption.py), which the run with due operations does not.
    empty = w["reconcile_nothing_due"][-1]
    with_due = w["reconcile_with_due"][0]
    # An empty due query bills 1 read, a non-empty one its rows: add that read back.
    empty_due_query = Counts({"firestore_reads": 1, "reads:operations": 1})
    result["settled_by_reconcile"] = per_event(
        [with_due - (empty - empty_due_query)], divide_by=run.events
    )
    result["reconcile_run_with_due"] = {**per_event([with_due]), "due": run.events}
    for name, minimum in MINIMUM.items():
        got = result[name]
        result[name]["minimum"] = minimum
        result[name]["above_minimum"] = {
            key: round(got.get(key, 0) - want, 3)
            for key, want in minimum.items()
            if got.get(key, 0) != want
        }
        reasons = ABOVE_MINIMUM_BECAUSE.get(name, {})
        result[name]["because"] = {
            key: reasons.get(key, "not named: a regression to explain")
            for key in result[name]["above_minimum"]
        }
    return result


def measure(counter: OperationCounter, events: int, profile: tuple[str, ...]) -> dict[str, Any]:
    with counter.uncounted(), InProcessStack.started(profile=profile) as stack:
        progress(f"stack up on {stack.ports}; counting {events} events per figure")
        run = CostRun(stack, counter, events)
        run.run()
        for target, stats in stack.profiles.items():
            progress(f"profile of {target} (cumulative, top 25):")
            stats.stream = sys.stderr
            stats.sort_stats("cumulative").print_stats(25)
        return {"mode": mode(stack.env), **figures(run)}


def mode(env: dict[str, str]) -> dict[str, Any]:
    """The review's batching as measured here, and as Terraform deploys it by default (the
    app's defaults under var.app_settings: bench/_capacity.py `review_sharing`)."""
    from bench._capacity import SHARING_SETTINGS, review_sharing
    from bench._terraform import variable_defaults

    measured = {name: env[name] for name in SHARING_SETTINGS if name in env}
    variables = variable_defaults(Path(__file__).resolve().parents[1] / "terraform/variables.tf")
    shared = str(measured.get("REVIEW_GROUP_REQUESTS", "0")) != "0"
    return {
        "measured": "shared batches" if shared else "a batch per push",
        "settings": measured,
        "production_default": review_sharing(variables.get("app_settings") or {}),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.cost", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--events", type=int, default=20, help="events counted per figure")
    parser.add_argument("--quick", action="store_true", help="3 events per figure (the test)")
    parser.add_argument(
        "--profile",
        choices=("ingress", "worker", "reconcile"),
        action="append",
        default=[],
        help="cProfile this function's requests; the top functions go to stderr",
    )
    args = parser.parse_args(argv)
    events = 3 if args.quick else args.events
    if events < 1:
        parser.error("--events must be positive")
    stop_on_sigterm()  # run the `finally` that stops every child
    counter = OperationCounter()
    counter.install()
    started = time.monotonic()
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request
    out, sys.stdout = sys.stdout, sys.stderr  # the functions log to stdout: keep it for JSON
    try:
        result = measure(counter, events, tuple(args.profile))
    finally:
        sys.stdout = out
    ok = all(not result[name]["above_minimum"] for name in MINIMUM)
    print(
        json.dumps(
            {
                "benchmark": "cost",
                "events_per_figure": events,
                "wall_s": round(time.monotonic() - started, 1),
                "counted": "in-process: Firestore/Cloud Tasks GAPIC calls, google-genai "
                "requests, requests to GitHub paths (bench/_counting.py)",
                **result,
                "all_at_minimum": ok,
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
