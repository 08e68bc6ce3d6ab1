"""Groups nobody sealed: reconcile seals each shared batch's group that is past its due time.

The item that opens a group seals it when its window ends (its delivery waits for that),
and the item that fills it seals it at once; either can die or be refused by Gemini's
quota. A group is due (`batch_groups.due_at`) until its batch is registered, so one query
finds every group left behind, and nothing else: O(groups due), never a listing. Sealing
is the same idempotent path as the items' (shared/sharing/seal.py), so a run that races a
late opener ends with one batch.
"""

from __future__ import annotations

import logging
import uuid
from datetime import datetime, timedelta
from typing import Any

from shared import logs
from shared.errors import Deferred
from shared.events import Attempt
from shared.reconcile.report import Budget, RunReport
from shared.sharing.seal import SealDeps, seal_step
from shared.sharing.turns import QuotaWait

log = logs.get_logger("reconcile")

# A sealing run's claim on a group's submission: as long as a worker attempt's lease.
SEAL_LEASE = timedelta(minutes=10)


def seal_due(
    ledger: Any,
    gemini: Any,
    now: datetime,
    *,
    grace: timedelta,
    limit: int,
    report: RunReport,
    budget: Budget,
    deliver: Any = None,
) -> None:
    """Seal (or go on failing the items of) each group due `grace` ago, step by step while
    `budget` lasts; one group's failure is logged and counted, and stops no other. Once
    Gemini's quota refuses one group (`QuotaWait`), the others wait for the next run: each
    create would be refused the same way. A group waiting its turn behind others is
    counted deferred, the run goes on, and it is looked at once more at the end."""
    try:
        due = ledger.groups.due(now - grace, limit)
    except Exception as exc:
        report.add(errors=1)
        logs.event(log, logging.ERROR, "reading due groups failed", reason=str(exc))
        return
    deps = SealDeps(ledger=ledger, gemini=gemini, clock=ledger.clock, deliver=deliver)
    run = f"reconcile:{uuid.uuid4().hex[:12]}"
    waiting = list(due)
    again: set[str] = set()  # groups that waited behind others: looked at once more, last
    while waiting:
        group = waiting.pop(0)
        if budget.spent():
            report.stop("groups", group.gid)
            return
        attempt = Attempt(f"{run}:{group.gid}", ledger.clock() + SEAL_LEASE)
        try:
            more = True
            while more and not budget.spent():
                outcome, more = seal_step(deps, group.gid, delivery_id=run, attempt=attempt)
                logs.event(log, logging.INFO, outcome, group=group.gid)
        except Deferred as exc:  # the quota, or groups ahead of it still being made
            report.add(deferred=1)
            logs.event(
                log, logging.INFO, f"group {group.gid} waits", group=group.gid, reason=str(exc)
            )
            if isinstance(exc, QuotaWait):
                return  # the quota refuses every group alike: the rest wait for the next run
            if group.gid not in again:
                again.add(group.gid)
                waiting.append(group)
            continue
        except Exception as exc:
            report.add(errors=1)
            logs.event(
                log,
                logging.ERROR,
                f"sealing group {group.gid} failed",
                group=group.gid,
                reason=f"{type(exc).__name__}: {exc}",
            )
            continue
        report.add(sealed=1)
