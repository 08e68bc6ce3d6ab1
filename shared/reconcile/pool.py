"""Bounded concurrency for a run's checks, within its budget and drain time."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

from shared import tracing
from shared.ledger import Operation
from shared.reconcile.report import Budget, Progress, RunReport

Check = Callable[[Operation, RunReport], None]
"""`check(record, report)`: one operation's check; must not raise (it logs its failures)."""


def check_all(
    records: Sequence[Operation],
    check: Check,
    *,
    concurrency: int,
    report: RunReport,
    budget: Budget,
    phase: str,
    progress: Progress | None = None,
) -> None:
    """Run `check` on `records` with at most `concurrency` in flight.

    No check starts once `budget` is spent (the report says where it stopped); checks
    already running get the drain time, and any still running after it are counted as
    `abandoned` and left to finish on their own threads.
    """
    if not records:
        return
    check = tracing.carry(check)  # each check's span links to the run's
    total, done, lock = len(records), [0], threading.Lock()

    def tick(_: Future[None]) -> None:
        with lock:
            done[0] += 1
            count = done[0]
        if progress is not None:
            progress(phase, count, total)

    if progress is not None:
        progress(phase, 0, total)
    pool = ThreadPoolExecutor(concurrency, thread_name_prefix="reconcile")
    in_flight: set[Future[None]] = set()
    try:
        for record in records:
            if budget.spent():
                report.stop(phase, record.name)
                break
            while len(in_flight) >= concurrency:
                _, in_flight = wait(in_flight, timeout=budget.left_s(), return_when=FIRST_COMPLETED)
                if budget.spent():
                    break  # no new check starts past the budget
            else:
                report.last_examined = record.name
                future = pool.submit(check, record, report)
                future.add_done_callback(tick)
                in_flight.add(future)
                continue
            report.stop(phase, record.name)
            break
        _, in_flight = wait(in_flight, timeout=budget.drain_left_s())
    finally:
        # A check stuck past the drain time is left to finish on its own: its commit is
        # atomic, and the function must answer before its platform timeout.
        report.add(abandoned=len(in_flight))
        pool.shutdown(wait=not in_flight, cancel_futures=True)
