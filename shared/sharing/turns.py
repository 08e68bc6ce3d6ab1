"""Whose turn it is to create a batch while sealed groups wait for Gemini's quota.

Gemini refuses a create beyond the project's batches in flight with a 429. A group so
refused, and every group sealed while one waits, joins the ledger's queue
(shared/ledger/group_queue.py): fair by key, then oldest first. Only its head is created;
a sealer whose group is not the head creates the head's batch instead (any sealer may
seal any group), and after a 429 nobody creates before the time Gemini named. So a push
never waits behind fresher ones, one installation's flood takes one turn a round, and a
refused create is one per quota wait, not one per waiting group:

    nobody queued, no pause      → create now (the common case: two reads)
    Gemini's quota said "later"  → queue this group; `Deferred` to that time (later still
                                   for a group behind the head: `behind_wait`)
    this group is the head       → create it
    another group is the head    → queue this group; create the head's batch; look again
                                   after `behind_wait`
    the head is held, or fails   → it is passed over: this group goes on
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple

from shared.errors import Deferred

if TYPE_CHECKING:
    from shared.ledger.group_queue import GroupQueue, QueueState
    from shared.ledger.groups import Group

# Queued groups read at once to find the head that still waits (one made or failed since
# its turn is taken out of the queue on the way).
HEADS_READ = 5
# A sealer whose group is not the head makes at most this many heads' batches a step,
# then lets its delivery come back (`Deferred`) rather than run past its deadline.
HEADS_PER_STEP = 3
# A sealer still behind others comes back this much later for each round ahead of it,
# to drive the queue again, and at least once this often.
BEHIND_WAIT_S = 2.0
BEHIND_WAIT_CAP_S = 60.0


class QuotaWait(Deferred):
    """Gemini's quota said when to ask again: no group is created before then, so a caller
    going through many groups (reconcile) stops at the first."""


class Turn(NamedTuple):
    """`go`: create this group's batch now. Else `head` is the group whose turn it is
    (None: nobody may create before `wait_s`, Gemini's quota said so)."""

    go: bool
    head: Group | None = None
    wait_s: float = 0.0


def take_turn(queue: GroupQueue, group: Group, now: datetime) -> Turn:
    """Whether `group` (sealed, a part pending) may create its batch now; see the module."""
    state = queue.state()
    paused = state.retry_at is not None and state.retry_at > now
    head = waiting_head(queue, now)
    if head is None and not paused:
        return Turn(True)
    if group.queue_place is None:
        group = queue.enqueue(group.gid) or group
    first = (
        head is None
        or head.gid == group.gid
        or (group.queue_place or "") < (head.queue_place or "")
    )
    if paused:
        assert state.retry_at is not None
        wait = (state.retry_at - now).total_seconds()
        return Turn(False, None, wait if first else max(wait, behind_wait(group, state)))
    if first:
        return Turn(True)
    return Turn(False, head, behind_wait(group, state))


def behind_wait(group: Group, state: QueueState) -> float:
    """How long a group behind the head waits before it looks again: BEHIND_WAIT_S a round
    ahead of it, up to BEHIND_WAIT_CAP_S, so a long queue's tail does not poll it as
    often as its head does."""
    rounds = max(1, group.queue_turn - state.served)
    return min(BEHIND_WAIT_S * rounds, BEHIND_WAIT_CAP_S)


def waiting_head(queue: GroupQueue, now: datetime) -> Group | None:
    """The queue's first group still waiting for a batch and not held (a group Gemini
    refuses the deployment or model of waits out its hold without holding up the rest);
    one that waits no more (made, failed, finished by another sealer) is taken out of the
    queue on the way."""
    while True:
        queued = queue.waiting(HEADS_READ)
        for group in queued:
            if group.due_at is None or group.settled_parts:
                queue.served(group.gid)
            elif group.held_since is None or group.due_at <= now:
                return group
        if len(queued) < HEADS_READ:
            return None
        if all(group.held_since is not None for group in queued):
            return None  # a long run of held groups: read no further this time


def left_queue(queue: GroupQueue, group: Group) -> None:
    """After a step: a queued group whose every part is decided waits no more."""
    if group.queue_place is not None and group.settled_parts:
        queue.served(group.gid)


def said_behind(gid: str, head: Any) -> str:
    return f"group {gid} waits its turn for Gemini's quota behind group {head}"
