"""Sealing a group: closing it to new items and creating its batch, exactly once.

Whoever finds a group due seals it: the item that filled it, the item that opened it when
its window ends (its delivery waits for that, `Deferred`), or reconcile, for a group
nobody sealed. Sealing is idempotent: the group goes `open` → `sealed` once (a
conditional write), then each of its parts (the whole group, unless split) goes through
the one-winner submission keyed by the part's tag (shared/submission.py): a live claim
makes a second sealer wait, a stale one lists Gemini for a batch already made, and of two
batches exactly one is registered, the other superseded and cancelled. A sealer that dies
is taken over; a batch it created but never registered is adopted by reconcile.

A refused create never fails more than it must (docs/reliability.md, "Shared batches"):

    429 (quota)                → the group waits the time Gemini names; the claim is left
                                 vacant (nothing was made), so the next sealer lists nothing
    401, 403, 400 API_KEY_*    → the deployment is refused, not the request: the group is
    404 (its model)              held with backoff under one alert per deployment, and made
                                 once Gemini accepts; past HOLD_LIMIT its items fail
    400 naming requests[i]     → those items fail alone, with the reason; the rest are made
    400 naming none            → the part is split in halves, each made on its own, down to
                                 the one item Gemini refuses

Items that fail are settled page by page (FAIL_PAGE per step, each in its own commit),
from a cursor kept on the group: a step cut anywhere is resumed by the next, and the group
stays due until every part is decided and every failure settled.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, NamedTuple

from shared import logs
from shared.clock import Clock, system_clock
from shared.crashpoints import crash_point
from shared.errors import Deferred, PermanentError
from shared.events import Attempt
from shared.gemini import (
    BatchStatus,
    GeminiNotFound,
    GeminiRateLimited,
    GeminiRefusedDeployment,
    GeminiRejected,
)
from shared.kinds import DEPLOYMENT_REFUSED, REQUEST_REFUSED
from shared.ledger.group_records import OPEN
from shared.ledger.groups import split_member_key
from shared.settlement.groups import GROUP_KIND
from shared.settlement.settler import Settler
from shared.sharing.turns import (
    HEADS_PER_STEP,
    QuotaWait,
    left_queue,
    said_behind,
    take_turn,
)
from shared.submission import ClaimBusy, SubmitDeps, Submitter

if TYPE_CHECKING:
    from shared.gemini import GeminiGateway
    from shared.ledger.groups import Group, Part
    from shared.submission import Submitter

log = logs.get_logger("sharing")

# Without a RetryInfo on Gemini's 429, look again this much later.
QUOTA_WAIT = timedelta(seconds=60)
# A refused deployment is looked at again after 30 s, doubling up to 10 minutes.
HOLD_FIRST = timedelta(seconds=30)
HOLD_CAP = timedelta(minutes=10)
# Held this long, a group's items fail: Gemini's own target for a batch, and well inside
# the orphan adoption window (shared/reconcile/adoption.py, 72 h).
HOLD_LIMIT = timedelta(hours=24)
# One alert a deployment per window while Gemini refuses it, however many groups wait.
HOLD_ALERT_WINDOW = timedelta(minutes=30)
HOLD_ALERT = "gemini_refused_deployment"
# Creates one step may send (narrowing a refused part by halves takes two per level).
CREATES_PER_STEP = 8
# Failed items one step settles, each in its own commit with its outbox delivered (a
# check run each): a step stays well inside a worker's or reconcile's deadline.
FAIL_PAGE = 50


@dataclass(frozen=True)
class SealDeps:
    """What a sealer needs: the ledger, Gemini, the clock, the create's lease margin, and
    how to deliver outbox items (the failed items' own)."""

    ledger: Any
    gemini: GeminiGateway
    clock: Clock = system_clock
    create_budget: timedelta = timedelta(seconds=35)
    deliver: Any = None


class Step(NamedTuple):
    """One sealing step: what happened, and whether the group needs another step now."""

    said: str
    more: bool


def seal(deps: SealDeps, gid: str, *, delivery_id: str, attempt: Attempt) -> str:
    """Seal the group `gid` and see its batches registered; what happened. Raises
    `Deferred` while its window is open or groups ahead of it in the quota queue are being
    made, `QuotaWait` (a `Deferred`) while Gemini's quota is full, `TransientError` while
    another sealer holds it (retry). What one step leaves (a large group's failed items,
    a hold) stays due for reconcile."""
    return seal_step(deps, gid, delivery_id=delivery_id, attempt=attempt).said


def seal_step(deps: SealDeps, gid: str, *, delivery_id: str, attempt: Attempt) -> Step:
    """`seal`, saying whether the group needs another step at once (`Step.more`)."""
    groups = deps.ledger.groups
    group = groups.get(gid)
    if group is None:
        raise PermanentError(f"group {gid} does not exist")
    if group.due_at is None and group.status != OPEN:
        return Step(f"group {gid} is settled ({_parts_said(group)})", False)
    now = deps.clock()
    if group.status != OPEN and group.due_at is not None and group.due_at > now:
        # Held or deferred (a refusal, the quota): reconcile looks again at `due_at`.
        return Step(f"group {gid} waits until {group.due_at.isoformat()}", False)
    if group.status == OPEN:
        if not _due(group, now):
            wait = (group.seal_at - now).total_seconds()
            raise Deferred(
                f"group {gid} takes items until {group.seal_at.isoformat()}", after_s=wait
            )
        group = groups.seal(gid)
        crash_point("group.sealed")
    said: list[str] = []
    if not group.settled_parts:
        _turn(deps, group, delivery_id, attempt, said)
        group = groups.get(gid)
    for _ in range(CREATES_PER_STEP):
        part = next((p for p in group.parts if p.pending), None)
        if part is None:
            break
        outcome, go_on = _make(deps, group, part, delivery_id, attempt)
        said.append(outcome)
        group = groups.get(gid)
        if not go_on:
            break
    failed, group = _fail_page(deps, group)
    if failed:
        said.append(f"{failed} item(s) settled failed")
    left_queue(groups.queue, group)
    told = f"group {gid}: " + "; ".join(said) if said else f"group {gid} is {_parts_said(group)}"
    if group.settled_parts and group.unfailed_from is None:
        groups.finished(gid)
        return Step(told, False)
    if group.due_at is not None and group.due_at > deps.clock():
        return Step(told, False)  # held: it says when to look again
    groups.defer(gid, deps.clock())  # still due: the next step goes on from here
    return Step(told, True)


def _turn(
    deps: SealDeps, group: Group, delivery_id: str, attempt: Attempt, said: list[str]
) -> None:
    """Wait for this group's turn at Gemini's quota (turns.py), making the batches of the
    groups ahead of it meanwhile (what happened to them goes to `said`); returns once it
    may create. Raises `QuotaWait` while Gemini's quota says to wait, `Deferred` while
    the groups ahead are still being made. A head held by a refusal, or whose step fails
    for its own reasons, is passed over: this group goes on."""
    groups = deps.ledger.groups
    for _ in range(HEADS_PER_STEP):
        turn = take_turn(groups.queue, group, deps.clock())
        if turn.go:
            return
        if turn.head is None:
            raise QuotaWait(f"group {group.gid} waits for Gemini's quota, queued",
                            after_s=turn.wait_s)  # fmt: skip
        behind = said_behind(group.gid, turn.head.gid)
        try:
            step = seal_step(deps, turn.head.gid, delivery_id=delivery_id, attempt=attempt)
        except (ClaimBusy, Deferred) as exc:  # another sealer has the head, or the quota
            wait = max(turn.wait_s, getattr(exc, "after_s", 0.0))  # this group's own wait
            wait_as = QuotaWait if isinstance(exc, QuotaWait) else Deferred
            raise wait_as(f"{behind}: {exc}", after_s=wait) from exc
        except Exception as exc:  # the head's own fault: it must not hold up the rest
            logs.event(log, logging.WARNING, f"{behind} passes it over: it failed",
                       group=group.gid, head=turn.head.gid,
                       reason=f"{type(exc).__name__}: {exc}")  # fmt: skip
            return
        said.append(f"{behind}: {step.said}")
        head = groups.get(turn.head.gid)
        held = head is not None and head.held_since is not None
        if not held and (step.more or (head is not None and head.queue_place is not None)):
            raise Deferred("; ".join(said), after_s=turn.wait_s)  # the head goes on next
        refreshed = groups.get(group.gid)
        if refreshed is None:
            raise PermanentError(f"group {group.gid} does not exist")
        group = refreshed
    raise Deferred("; ".join(said), after_s=turn.wait_s)


def _due(group: Group, now: datetime) -> bool:
    """Full (its filler set `due_at` to its join) or past its window."""
    return now >= group.seal_at or (group.due_at is not None and group.due_at < group.seal_at)


def _parts_said(group: Group) -> str:
    return ", ".join(p.operation or f"failed: {p.failed}" for p in group.parts if not p.pending)


def _make(
    deps: SealDeps, group: Group, part: Part, delivery_id: str, attempt: Attempt
) -> tuple[str, bool]:
    """Claim, create and register one part's batch, or decide what its refusal means;
    (what happened, whether the step may go on to the next part)."""
    groups = deps.ledger.groups
    tag = group.part_tag(part)
    live = group.live(part)
    if not live:
        groups.part_failed(group.gid, part, "every item's request was refused")
        return f"items {part.lo}..{part.hi - 1}: every request refused", True
    submit = SubmitDeps(
        ledger=deps.ledger,
        gemini=deps.gemini,
        kind=GROUP_KIND,
        clock=deps.clock,
        create_budget=deps.create_budget,
    )
    run = Submitter(submit, tag, delivery_id, attempt)
    requests = groups.requests(group, live)
    context = {
        "group": group.gid,
        "kind": group.kind,
        "members": [group.member(i) for i in live],
        "keys": [key for key, _ in requests],
        "part": [part.lo, part.hi],
    }
    decided = run.claim(context)
    if decided is not None:
        return _registered(deps, group, part, tag, decided), True
    now_group = groups.get(group.gid)
    if part not in now_group.parts or now_group.live(part) != live:  # split or narrowed since
        run.release(created_nothing=True)
        return f"{tag} changed while claimed", True
    try:
        crash_point("group.before_create")
        name = deps.gemini.create_batch(
            group.model,
            requests,
            display_name=tag,
            generation_config=group.generation_config,
        )
    except GeminiRateLimited as exc:
        wait = exc.retry_after_s or QUOTA_WAIT.total_seconds()
        retry_at = deps.clock() + timedelta(seconds=wait)
        try:
            groups.defer(group.gid, retry_at)  # while the claim is ours
            groups.queue.pause(retry_at)  # nobody creates before it (turns.py)
            groups.queue.enqueue(group.gid)  # it waits first in its key's turn
        finally:
            run.release(created_nothing=True)
        raise QuotaWait(
            f"group {group.gid}: Gemini's batch quota is full ({exc})", after_s=wait
        ) from exc
    except (GeminiRefusedDeployment, GeminiNotFound) as exc:  # a key, billing, the model
        return _held(deps, group, part, run, exc), False
    except GeminiRejected as exc:  # about the requests: narrow it down to them
        keys = [key for key, _ in requests]
        return _narrowed(deps, group, part, live, keys, run, exc), True
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
        group=group.gid,
        items=len(live),
        requests=len(requests),
    )
    return _registered(deps, group, part, tag, outcome or f"submitted {name}"), True


def _registered(deps: SealDeps, group: Group, part: Part, tag: str, outcome: str) -> str:
    stored = deps.ledger.submissions.get(tag)
    if stored is not None and stored.operation:
        deps.ledger.groups.registered(group.gid, part, stored.operation)
        return outcome
    return f"{outcome} (not registered yet)"


def _narrowed(
    deps: SealDeps,
    group: Group,
    part: Part,
    live: list[int],
    keys: list[str],
    run: Submitter,
    exc: Any,
) -> str:
    """A 400 about the requests: fail the items it names, or split the part to find them.
    Nothing was made, so the part's claim is left vacant for its next create."""
    groups = deps.ledger.groups
    reason = f"Gemini refused this item's request: {exc}"
    named = _items_named(keys, exc.request_indices)
    try:
        if named:
            groups.refuse(group.gid, dict.fromkeys(named, reason))
            said = f"items {', '.join(map(str, named))} refused by Gemini"
        elif len(live) > 1 and part.hi - part.lo > 1:
            groups.split(group.gid, part)
            said = f"items {part.lo}..{part.hi - 1} split in halves to find a refused request"
        else:
            groups.refuse(group.gid, dict.fromkeys(live, reason))
            said = f"item {live[0]} refused by Gemini"
    finally:
        run.release(created_nothing=True)
    logs.event(
        log,
        logging.WARNING,
        f"group {group.gid}: {said}",
        group=group.gid,
        items=len(live),
        reason=str(exc),
    )
    return said


def _items_named(keys: list[str], indices: tuple[int, ...]) -> list[int]:
    """The items whose requests are at `indices` of the create's requests (`keys`)."""
    split = [split_member_key(keys[i]) for i in indices if 0 <= i < len(keys)]
    return sorted({found[0] for found in split if found is not None})


def _held(deps: SealDeps, group: Group, part: Part, run: Submitter, exc: Exception) -> str:
    """Gemini refuses the deployment: hold the group with backoff under one alert a
    deployment, and fail its part only once held past HOLD_LIMIT."""
    groups = deps.ledger.groups
    now = deps.clock()
    try:
        if group.held_since is not None and now - group.held_since >= HOLD_LIMIT:
            reason = (
                f"Gemini refused this deployment's batches for {HOLD_LIMIT} (an API key, "
                f"billing or permission problem of the deployment); the last answer: {exc}"
            )
            groups.part_failed(group.gid, part, reason)
            logs.event(
                log,
                logging.ERROR,
                f"group {group.gid}: held past {HOLD_LIMIT}; its items fail",
                alert=HOLD_ALERT,
                group=group.gid,
                items=len(group.items_of(part)),
                reason=str(exc),
            )
            return f"items {part.lo}..{part.hi - 1} failed: held past {HOLD_LIMIT}"
        wait = min(HOLD_FIRST * 2 ** min(group.holds, 16), HOLD_CAP)
        held = groups.hold(group.gid, now + wait, str(exc))
    finally:
        run.release(created_nothing=True)
    loud = groups.first_alert(HOLD_ALERT, now, HOLD_ALERT_WINDOW)
    alert: dict[str, Any] = {"alert": HOLD_ALERT} if loud else {}
    logs.event(
        log,
        logging.ERROR if loud else logging.WARNING,
        "Gemini refuses this deployment's batches; shared batches wait until it accepts",
        **alert,
        group=group.gid,
        held_since=held.held_since,
        next_try_s=wait.total_seconds(),
        reason=str(exc),
    )
    # Reconcile tries again when the hold ends: no delivery waits on it.
    return f"held: Gemini refuses the deployment ({exc}); tried again in {wait}"


def _fail_page(deps: SealDeps, group: Group) -> tuple[int, Group]:
    """Settle up to FAIL_PAGE of the group's failed items from its cursor, each in its own
    commit, then move the cursor; (how many settled now, the group after)."""
    start = group.unfailed_from
    if start is None:
        return 0, group
    settler = Settler(deps.ledger, deps.gemini, deps.deliver, clock=deps.clock)
    settled = 0
    cursor = group.end
    for index in (i for i in group.indices if i >= start):
        if settled >= FAIL_PAGE:
            cursor = index
            break
        reason = group.failure_of(index)
        if reason is not None:
            name = group.member(index)
            refused = index in group.refused
            error = {
                "message": reason,
                "reason": REQUEST_REFUSED if refused else DEPLOYMENT_REFUSED,
            }
            failed = BatchStatus(name=name, state="JOB_STATE_FAILED", error=error)
            settler.settle(name, "reconcile", batch=failed)
            crash_point("group.item_failed")
            settled += 1
    deps.ledger.groups.failed_through(group.gid, cursor)
    return settled, deps.ledger.groups.get(group.gid)
