"""One reconcile adoption pass against 0, 1,000 and 100,000 batches listed at Gemini.

    python -m bench.adoption [--sizes 0,1000,100000] [--open 0,3] [--quick]

Starts its own Firestore emulator on a free port (stopped at the end). Gemini's listing
is in memory (`local.fakes.ListedGateway`: newest first, 100 to a page, as the API and the
simulator list), holding N batches of other pushes, all registered long ago. For each N
and each number K of open claims (submissions whose holder died; each left one batch
newer than every other), on an emptied database: one `OrphanAdopter.adopt` pass, then a
second one. Counted in this process (bench/_counting.py): Firestore reads and writes as
billed; from the fake: list calls (pages) and batches examined; and the pass's time.

What it shows (issue 36, point 3): with no open claim a pass lists nothing; with K open it
lists down to the oldest of them (one page here) and reads O(K) documents, flat across N.
Exit 1 if a pass's reads, writes or list calls grow with N, a pass with nothing open
listed anything, or an orphan was not adopted.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from bench._counting import OperationCounter
from local.fakes import FakeClock, ListedGateway
from local.firestore_emulator import reset, start_firestore
from local.processes import free_port
from shared.gemini import BatchSummary

PROJECT = "demo-hookledger"
LEASE = timedelta(minutes=10)
START = datetime(2026, 1, 1, tzinfo=UTC)


def progress(message: str) -> None:
    print(f"[bench.adoption] {message}", file=sys.stderr, flush=True)


def listed(size: int, before: datetime) -> list[BatchSummary]:
    """`size` batches of other pushes, newest `before`, one every 1.7 s (48 h of them at
    the ~0.6 batches/s the issue's scale point creates)."""
    from shared import kinds

    kind = kinds.generic("bench-listed")
    return [
        BatchSummary(
            f"batches/listed-{i}",
            kind.make_tag(f"{i:012x}"),
            "JOB_STATE_SUCCEEDED",
            before - timedelta(seconds=1.7 * (i + 1)),
        )
        for i in range(size)
    ]


def measure(
    size: int, open_count: int, batches: list[BatchSummary], env: dict[str, Any]
) -> dict[str, Any]:
    from shared import kinds
    from shared.ledger import Ledger
    from shared.reconcile.adoption import CLOCK_SKEW, OrphanAdopter
    from shared.reconcile.report import Budget, RunReport

    counter: OperationCounter = env["counter"]
    kind = kinds.generic("bench-orphan")
    with counter.uncounted():
        reset(env["firestore_host"], PROJECT)
        clock = FakeClock(START)
        ledger = Ledger(env["firestore"], clock=clock)
        gateway = ListedGateway()
        gateway.batches = batches  # newest first already: no sort of 100,000 per case
        orphans = []
        for k in range(open_count):
            tag = kind.make_tag(f"{k:012x}")
            ledger.submissions.claim(
                tag, delivery_id=f"d-{k}", attempt=f"a-{k}", lease_until=clock() + LEASE,
                now=clock(), context={},
            )  # fmt: skip
            orphans.append(BatchSummary(f"batches/orphan-{k}", tag, "JOB_STATE_PENDING", clock()))
        gateway.batches = [*orphans, *batches]
        clock.advance((LEASE + CLOCK_SKEW).total_seconds() + 60)
        adopter = OrphanAdopter(ledger, gateway, clock)
    passes = []
    for _ in range(2):  # the first adopts; the second finds nothing open
        pages, read = gateway.pages, gateway.read
        report = RunReport()
        before = counter.snapshot()
        started = time.perf_counter()
        adopted = adopter.adopt(report, Budget.starting_now(240, 0, time.monotonic), set())
        elapsed = time.perf_counter() - started
        used = counter.snapshot() - before
        passes.append(
            {
                "adopted": len(adopted),
                "errors": report.errors,
                "firestore_reads": used["firestore_reads"],
                "firestore_writes": used["firestore_writes"],
                "gemini_list_calls": gateway.pages - pages,
                "batches_examined": gateway.read - read,
                "elapsed_s": round(elapsed, 4),
            }
        )
    return {"listed_at_gemini": size, "open_claims": open_count, "passes": passes}


def flat(rows: list[dict[str, Any]]) -> bool:
    """For each K, each pass's reads, writes and list calls are the same whatever N."""
    ok = True
    for open_count in {row["open_claims"] for row in rows}:
        same_k = [row for row in rows if row["open_claims"] == open_count]
        for index in (0, 1):
            for key in ("firestore_reads", "firestore_writes", "gemini_list_calls"):
                ok &= len({row["passes"][index][key] for row in same_k}) == 1
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.adoption", description=__doc__)
    parser.add_argument("--sizes", default="0,1000,100000")
    parser.add_argument("--open", default="0,3")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    sizes = [0, 100, 1000] if args.quick else [int(s) for s in args.sizes.split(",")]
    opens = [int(k) for k in args.open.split(",")]
    counter = OperationCounter()
    counter.install()
    port = free_port()
    firestore_service = start_firestore(port)
    try:
        from google.cloud import firestore

        host = f"127.0.0.1:{port}"
        os.environ["FIRESTORE_EMULATOR_HOST"] = host
        env = {"counter": counter, "firestore_host": host}
        env["firestore"] = firestore.Client(project=PROJECT)
        everything = listed(max(sizes), START - timedelta(minutes=5))
        rows = []
        for size in sizes:
            for open_count in opens:
                rows.append(measure(size, open_count, everything[:size], env))
                progress(f"{size} listed, {open_count} open: {rows[-1]['passes'][0]}")
    finally:
        firestore_service.stop()
    adopted_all = all(row["passes"][0]["adopted"] == row["open_claims"] for row in rows)
    quiet = all(
        row["passes"][1]["gemini_list_calls"] == 0
        and (row["open_claims"] or row["passes"][0]["gemini_list_calls"] == 0)
        for row in rows
    )
    ok = adopted_all and quiet and flat(rows)
    print(json.dumps({"bench": "adoption", "ok": ok, "runs": rows}, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
