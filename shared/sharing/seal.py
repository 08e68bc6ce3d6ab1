"""Sealing a group: closing it to new items and creating its one batch, exactly once.

Whoever finds a group due seals it: the item that filled it, the item that opened it when
its window ends (its delivery waits for that, `Deferred`), or reconcile, for a group
nobody sealed. Sealing is idempotent: the group goes `open` → `sealed` once (a
conditional write), then the group's batch goes through the one-winner submission keyed
by the group's tag (shared/submission.py): a live claim makes a second sealer wait, a
stale one lists Gemini for a batch already made, and of two batches exactly one is
registered, the other superseded and cancelled. A sealer that dies is taken over; a batch
it created but never registered is adopted by reconcile like any orphan.

Gemini's quota on batches in flight answers 429: the group is deferred to the time the
answer names and the sealer's delivery waits as long (`Deferred`), spending no retry.
A batch Gemini refuses for good (a 400, or a 404 for its model) fails every item of the
group with the reason.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from shared import logs
from shared.clock import Clock, system_clock
from shared.crashpoints import crash_point
from shared.errors import Deferred, PermanentError
from shared.handlers import Attempt

if TYPE_CHECKING:
    from shared.gemini import GeminiGateway
    from shared.ledger.groups import Group

log = logs.get_logger("sharing")

# Without a RetryInfo on Gemini's 429, look again this much later.
QUOTA_WAIT = timedelta(seconds=60)


@dataclass(frozen=True)
class SealDeps:
    """What a sealer needs: the ledger, Gemini, the clock, the create's lease margin, and
    how to deliver outbox items (the failed items' own, when Gemini refuses the batch)."""

    ledger: Any
    gemini: GeminiGateway
    clock: Clock = system_clock
    create_budget: timedelta = timedelta(seconds=35)
    deliver: Any = None


def seal(deps: SealDeps, gid: str, *, delivery_id: str, attempt: Attempt) -> str:
    """Seal the group `gid` and see its batch registered; what happened. Raises
    `Deferred` while its window is open or Gemini's quota is full, `TransientError`
    while another sealer holds it (retry)."""
    from shared.gemini import GeminiRateLimited
    from shared.sharing.kind import GROUP_KIND
    from shared.submission import SubmitDeps, Submitter

    groups = deps.ledger.groups
    group = groups.get(gid)
    if group is None:
        raise PermanentError(f"group {gid} does not exist")
    if group.operation:
        if group.due_at is not None:  # a late deferral after its registration
            groups.registered(gid, group.operation)
        return f"group {gid} is {group.operation}"
    if group.status == "failed":
        return f"group {gid} failed"
    now = deps.clock()
    if group.status == "open" and not _due(group, now):
        wait = (group.seal_at - now).total_seconds()
        raise Deferred(f"group {gid} takes items until {group.seal_at.isoformat()}", after_s=wait)
    group = groups.seal(gid)
    crash_point("group.sealed")
    submit = SubmitDeps(
        ledger=deps.ledger,
        gemini=deps.gemini,
        kind=GROUP_KIND,
        clock=deps.clock,
        create_budget=deps.create_budget,
    )
    run = Submitter(submit, group.tag, delivery_id, attempt)
    requests = groups.requests(group)
    context = {
        "group": gid,
        "kind": group.kind,
        "members": group.member_names,
        "keys": [key for key, _ in requests],
    }
    decided = run.claim(context)
    if decided is not None:
        return _registered(deps, group, decided)
    try:
        crash_point("group.before_create")
        name = deps.gemini.create_batch(
            group.model,
            requests,
            display_name=group.tag,
            generation_config=group.generation_config,
        )
    except GeminiRateLimited as exc:
        wait = exc.retry_after_s or QUOTA_WAIT.total_seconds()
        groups.defer(gid, deps.clock() + timedelta(seconds=wait))  # while the claim is ours
        run.release()
        raise Deferred(f"group {gid}: Gemini's batch quota is full ({exc})", after_s=wait) from exc
    except PermanentError as exc:  # refused (400), or a model Gemini does not know (404)
        try:
            return _fail(deps, group, f"Gemini refused the group's batch: {exc}")
        finally:
            run.release()
    except Exception:
        run.release()  # the next sealer lists before it creates: a made batch is found
        raise
    crash_point("group.batch_created")
    outcome = run.register(name, context)
    logs.event(
        log,
        logging.INFO,
        "group batch submitted",
        operation=name,
        group=gid,
        items=len(group.members),
        requests=len(requests),
    )
    return _registered(deps, group, outcome or f"submitted {name}")


def _due(group: Group, now: datetime) -> bool:
    """Full (its filler set `due_at` to its join) or past its window."""
    return now >= group.seal_at or (group.due_at is not None and group.due_at < group.seal_at)


def _registered(deps: SealDeps, group: Group, outcome: str) -> str:
    stored = deps.ledger.submissions.get(group.tag)
    if stored is not None and stored.operation:
        deps.ledger.groups.registered(group.gid, stored.operation)
        return f"group {group.gid}: {outcome}"
    return f"group {group.gid}: {outcome} (not registered yet)"


def _fail(deps: SealDeps, group: Group, reason: str) -> str:
    """Settle every item of a group whose batch can never be made `failed` with `reason`."""
    from shared.gemini import BatchStatus
    from shared.settlement import Settler

    logs.event(
        log,
        logging.ERROR,
        f"group {group.gid}: {reason}",
        alert="group_failed",
        group=group.gid,
        items=len(group.members),
        reason=reason,
    )
    deps.ledger.groups.failed(group.gid, reason)  # first, while the claim is ours
    settler = Settler(deps.ledger, deps.gemini, deps.deliver, clock=deps.clock)
    error = {"message": reason, "reason": "group_refused"}
    for name in group.member_names:
        failed = BatchStatus(name=name, state="JOB_STATE_FAILED", error=error)
        settler.settle(name, "reconcile", batch=failed)
    return f"group {group.gid} failed: {reason}"
