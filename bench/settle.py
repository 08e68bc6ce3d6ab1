"""Settlement under contention, on the official Firestore emulator.

    python -m bench.settle [--operations 1000] [--callers 3] [--threads 8] [--racers 8]

Starts its own emulator on a free port (and stops it), then measures:
(a) `operations` operations, each settled by `callers` racing callers over `threads`
    threads (each thread with its own client): wall time, settlements/s, aborted and
    conflicting transaction attempts, write-backs performed (must equal `operations`);
(b) `racers` callers released together on one operation: time until all return, and
    winners (must be 1).
Progress goes to stderr; one JSON object to stdout. Exit status 1 if an invariant fails.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from apps.review.results import Reviews, put_review
from local.firestore_emulator import start_firestore
from local.processes import free_port

PROJECT = "demo-hookledger"
# Each operation's write-back creates one review of this push, its path the operation name.
REPO, SHA = "bench/settle", "0" * 40


def progress(message: str) -> None:
    print(f"[bench.settle] {message}", file=sys.stderr, flush=True)


def writeback(writes: Any, record: Any) -> None:
    """One review per operation, created (never overwritten): a second write-back would fail."""
    put_review(writes, REPO, SHA, record.name, {}, replace=False)


class ThreadLedgers:
    """One Firestore client and ledger per thread, as separate workers would have."""

    def __init__(self) -> None:
        self._local = threading.local()
        self._lock = threading.Lock()
        self.ledgers: list[Any] = []
        self.clients: list[Any] = []

    def get(self) -> Any:
        from google.cloud import firestore

        from shared.ledger import Ledger

        if not hasattr(self._local, "ledger"):
            client = firestore.Client(project=PROJECT)
            self._local.ledger = Ledger(client)
            with self._lock:
                self.clients.append(client)
                self.ledgers.append(self._local.ledger)
        return self._local.ledger

    def counts(self) -> Counter[str]:
        total: Counter[str] = Counter()
        for ledger in self.ledgers:
            total.update(ledger.counts())
        return total

    def close(self) -> None:
        for client in self.clients:
            client.close()


def many_operations(operations: int, callers: int, threads: int) -> dict[str, Any]:
    from google.cloud import firestore

    from shared.ledger import Ledger, Settlement

    names = [f"batches/bench-{index:05d}" for index in range(operations)]
    ledgers = ThreadLedgers()
    try:
        progress(f"registering {operations} operations")
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(lambda name: ledgers.get().operations.register(name, "bench"), names))
        setup_counts = ledgers.counts()
        # The callers of one operation are queued next to each other, so they race.
        calls = [name for name in names for _ in range(callers)]
        progress(f"settling: {len(calls)} calls over {threads} threads")
        started = time.monotonic()
        with ThreadPoolExecutor(threads) as pool:
            outcomes = list(
                pool.map(
                    lambda name: ledgers.get().settle(
                        name, "succeeded", "webhook", writeback=writeback
                    ),
                    calls,
                )
            )
        wall = time.monotonic() - started
        counts = ledgers.counts() - setup_counts
    finally:
        ledgers.close()
    client = firestore.Client(project=PROJECT)
    try:
        ledger = Ledger(client)
        writebacks = Reviews(ledger).count_for_push(REPO, SHA)
        pending = ledger.queries.count_operations(status="pending")
    finally:
        client.close()
    tally = Counter(outcomes)
    return {
        "operations": operations,
        "callers_per_operation": callers,
        "threads": threads,
        "wall_s": round(wall, 3),
        "settlements_per_s": round(operations / wall, 1),
        "settle_calls_per_s": round(len(calls) / wall, 1),
        "settled": tally[Settlement.SETTLED],
        "already_settled": tally[Settlement.ALREADY_SETTLED],
        "aborted_transactions": counts["aborted"],
        "conflicting_commits": counts["conflicts"],
        "writebacks_performed": writebacks,
        "left_pending": pending,
    }


def one_operation(racers: int) -> dict[str, Any]:
    from shared.ledger import Settlement

    ledgers = ThreadLedgers()
    name = "batches/bench-race"
    start = threading.Barrier(racers + 1, timeout=60)
    returned: list[float] = []
    try:
        ledgers.get().operations.register(name, "bench")

        def settle(index: int) -> Settlement:
            ledger = ledgers.get()
            start.wait()
            outcome = ledger.settle(name, "succeeded", "webhook", writeback=writeback)
            returned.append(time.monotonic())
            return outcome

        progress(f"racing {racers} callers on one operation")
        with ThreadPoolExecutor(racers) as pool:
            futures = [pool.submit(settle, index) for index in range(racers)]
            start.wait()
            released = time.monotonic()
            outcomes = [future.result() for future in futures]
        counts = ledgers.counts()
    finally:
        ledgers.close()
    return {
        "racers": racers,
        "all_returned_s": round(max(returned) - released, 3),
        "winners": Counter(outcomes)[Settlement.SETTLED],
        "aborted_transactions": counts["aborted"],
        "conflicting_commits": counts["conflicts"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.settle", description=__doc__)
    parser.add_argument("--operations", type=int, default=1000)
    parser.add_argument("--callers", type=int, default=3)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--racers", type=int, default=8)
    args = parser.parse_args(argv)
    port = free_port()
    progress(f"starting the Firestore emulator on 127.0.0.1:{port}")
    service = start_firestore(port)
    os.environ["FIRESTORE_EMULATOR_HOST"] = f"127.0.0.1:{port}"
    try:
        many = many_operations(args.operations, args.callers, args.threads)
        one = one_operation(args.racers)
    finally:
        progress("stopping the emulator")
        service.stop()
    ok = (
        many["writebacks_performed"] == args.operations
        and many["settled"] == args.operations
        and many["left_pending"] == 0
        and one["winners"] == 1
    )
    print(json.dumps({"benchmark": "settle", "ok": ok, "many": many, "one": one}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
