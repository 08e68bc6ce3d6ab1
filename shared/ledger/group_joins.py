"""An item's join to its kind's open group: ONE commit with its operation, its
submission's decision, its lane grown and (when given) the delivery's `done`
(shared/ledger/groups.py has the collections; group_lanes.py the lanes).

A join reads in one call its submission, the group this process last saw at its head and
the lane it picks there. Only when that group cannot take the item (unseen, sealed, or its
lane full) does it read the head and the group the head names, and open the next group
when that cannot take it either. An item whose requests fit one page writes that page in
the same commit; a larger one stores its pages first (`Groups.store_requests`).
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from shared.clock import Clock
from shared.kinds import Sharing
from shared.ledger.commits import Commits, Conflict
from shared.ledger.deliveries import Deliveries
from shared.ledger.errors import ContentionError
from shared.ledger.group_lanes import (
    HEAD_LOCK_WAIT_S,
    Lane,
    first_lane,
    head_of,
    join_lock,
    lane_of,
    lanes_for,
    pick_lane,
    saw_group,
    seen_group,
)
from shared.ledger.group_records import (
    GROUPS,
    HEADS,
    MEMBERS,
    OPEN,
    REQUESTS,
    Group,
    group_from,
    member_id,
    member_name,
)
from shared.ledger.group_states import GroupStates
from shared.ledger.ids import submission_id
from shared.ledger.operations import Operations
from shared.ledger.records import GROUP, SUBMISSIONS, DeliveryEnd
from shared.ledger.submissions import closed_marks

# A group's item names and request keys travel in its batch's context (its operation and
# its claim, one document each): it is sealed before they may pass 1 MiB, with room.
MAX_KEY_BYTES = 400_000
# A member is checked on its own this long after its group's window, should its group's
# fan-out never reach it (shared/settlement settles it through the group's batch).
MEMBER_BACKSTOP = timedelta(hours=6)


class Joined(NamedTuple):
    """`join`'s answer: the item's operation; `group` None when it had joined before
    (`operation` is then what its submission decided); `full` when this join filled it."""

    operation: str
    group: Group | None
    full: bool = False
    opened: bool = False


@dataclass(frozen=True)
class JoinRequest:
    """One item's join: `tag` (its submission), `attempt` (the attempt holding its claim),
    its request `pages` with their `requests` count and `bytes` (`page_documents`: their
    documents when the join writes them, else they are stored), its operation's `kind`
    and `context`, the `model` and `generation_config` its batch needs, the kind's
    `sharing`, `start_items(name)` recorded on its operation, and the delivery's `end`."""

    tag: str
    attempt: str
    kind: str
    model: str
    generation_config: Mapping[str, Any] | None
    sharing: Sharing
    pages: tuple[str, ...]
    requests: int
    bytes: int
    context: Mapping[str, Any]
    key_bytes: int = 0
    start_items: Callable[[str], Sequence[Mapping[str, Any]]] = lambda _: ()
    end: DeliveryEnd | None = None
    fair_key: str = ""  # its groups' key (`Sharing.fair_by`): only its key's items join them
    page_documents: tuple[Mapping[str, Any], ...] = ()


class _Place(NamedTuple):
    """Where a join goes: the group (new when `opened`), its lane, and what the commit's
    conditions were read from."""

    group: Group
    lane: Lane
    opened: bool
    snapshot: Any  # the group's, as read (None when opened)
    head: Any  # the head's, as read (None unless opened)


class GroupJoins(GroupStates):
    """The join (see the module docstring); `GroupStates` has how a group goes on."""

    def __init__(
        self,
        commits: Commits,
        operations: Operations,
        deliveries: Deliveries,
        clock: Clock,
        *,
        retention: timedelta,
    ) -> None:
        super().__init__(commits, clock, retention=retention)
        self._operations = operations
        self._deliveries = deliveries

    def join(self, request: JoinRequest) -> Joined:
        """Add the item to its kind's open group, in ONE commit with its operation, its
        submission's decision and (when given) the delivery's `done`; see the module
        docstring. Raises `Conflict`-free errors only: `ContentionError` after many
        contended attempts, `StoreUnavailable`, or `InvalidArgument`."""
        tries = itertools.count()

        def attempt() -> Joined:
            head_id = head_of(
                request.kind,
                request.model,
                request.generation_config,
                request.fair_key,
                request.sharing.shards,
                next(tries),
            )
            pick = pick_lane(head_id)
            lock = join_lock(head_id, pick)
            if not lock.acquire(timeout=HEAD_LOCK_WAIT_S):  # a queue of joins: a meeting
                raise Conflict(f"group head {head_id}: this process's other joins hold it")
            try:
                return self._join_at(request, head_id, pick)
            finally:
                lock.release()

        return self._retrying(request.tag, attempt)

    def _join_at(self, request: JoinRequest, head_id: str, pick: int) -> Joined:
        sub_ref = self._commits.collection(SUBMISSIONS).document(submission_id(request.tag))
        seen = seen_group(head_id)
        place_refs = []
        if seen is not None:
            place_refs.append(self._commits.collection(GROUPS).document(seen.gid))
            if lane_of(pick, seen.lanes):
                place_refs.append(self.lanes.ref(seen.gid, lane_of(pick, seen.lanes)))
        end = request.end
        end_ref = None
        if end is not None and end.seen is None:  # its commit's condition, read with the rest
            end_ref = self._deliveries.ref(end.source, end.delivery_id)
        refs = [sub_ref, *place_refs, *([end_ref] if end_ref is not None else [])]
        read = self._read_many(refs, f"item {request.tag}")
        if end is not None and end_ref is not None:
            end.seen = self._deliveries.read_of(read[end_ref.path])
        sub = read[sub_ref.path]
        stored = (sub.to_dict() or {}) if sub.exists else None
        if stored is not None and stored.get("operation"):
            return Joined(str(stored["operation"]), None)
        if stored is None or stored.get("attempt") != request.attempt:
            raise ContentionError(
                f"item {request.tag}: attempt {request.attempt} no longer holds its claim"
            )
        now = self._clock()
        place = self._seen_place(request, pick, read, place_refs)
        if place is None:
            place = self._head_place(request, head_id, pick, now)
        return self._commit_join(request, place, sub, stored, now)

    def _seen_place(
        self, request: JoinRequest, pick: int, read: Mapping[str, Any], refs: Sequence[Any]
    ) -> _Place | None:
        """The group this process last saw at the head, when it takes the item."""
        if not refs or not read[refs[0].path].exists:
            return None
        snapshot = read[refs[0].path]
        group = group_from(snapshot)
        if group.status != OPEN:
            return None
        number = lane_of(pick, group.lanes)
        if not number:
            lane = first_lane(group)
        elif len(refs) > 1 and refs[1].id == self.lanes.ref(group.gid, number).id:
            lane = self.lanes.lane(number, read[refs[1].path])
        else:
            lane = self.lanes.read_lane(group, number)
        if not lane.takes(request.requests, request.bytes, request.sharing, group.lanes):
            return None
        return _Place(group, lane, False, snapshot, None)

    def _head_place(self, request: JoinRequest, head_id: str, pick: int, now: datetime) -> _Place:
        """The group the head names, when it takes the item; else a new one."""
        head_ref = self._commits.collection(HEADS).document(head_id)
        head = self._commits.read(head_ref, f"group head {head_id}")
        current = (head.to_dict() or {}).get("group") if head.exists else None
        group = None
        if current:
            ref = self._commits.collection(GROUPS).document(current)
            snapshot = self._commits.read(ref, f"group {current}")
            group = group_from(snapshot) if snapshot.exists else None
        if group is not None and group.status == OPEN:
            saw_group(head_id, group.gid, group.lanes)
            lane = self.lanes.read_lane(group, lane_of(pick, group.lanes))
            if lane.takes(request.requests, request.bytes, request.sharing, group.lanes):
                return _Place(group, lane, False, snapshot, None)
        fresh = self._new_group(request, now, lanes_for(group, now, room(request)))
        return _Place(fresh, first_lane(fresh), True, None, head)

    def _commit_join(
        self,
        request: JoinRequest,
        place: _Place,
        sub: Any,
        stored: Mapping[str, Any],
        now: datetime,
    ) -> Joined:
        group, lane, opened = place.group, place.lane, place.opened
        index = lane.index()
        name = member_name(group.gid, index)
        requests = lane.requests + request.requests
        key_bytes = lane.key_bytes + request.key_bytes + len(name)
        share = group.lanes  # each lane holds its share of the group's limits
        full = (
            requests >= request.sharing.max_requests / share
            or lane.bytes + request.bytes >= request.sharing.max_bytes / share
            or key_bytes >= MAX_KEY_BYTES / share
        )
        member = {
            "group": group.gid,
            "tag": request.tag,
            "operation": name,
            "requests": request.requests,
            "pages": list(request.pages),
            "expire_at": group.opened_at + self._retention,
        }
        member_ref = self._commits.collection(MEMBERS).document(member_id(group.gid, index))
        op_id, op = self._operations.pending_fields(
            name,
            request.kind,
            request.context,
            submission=request.tag,
            outbox=request.start_items(name),
        )
        op[GROUP] = group.gid
        op["next_check_at"] = group.seal_at + MEMBER_BACKSTOP
        # The delivery ends here unless it must still see the group sealed: the item that
        # opened the group (its window) or filled it (shared/sharing/join.py).
        end = request.end if not opened and not full else None
        staged = self._deliveries.stage_end(end) if end is not None else None
        group_ref = self._commits.collection(GROUPS).document(group.gid)
        grown = {  # a few bytes, however many items it holds
            "count": lane.count + 1,
            "requests": requests,
            "bytes": lane.bytes + request.bytes,
            "key_bytes": key_bytes,
            **({"due_at": now} if full and not lane.number else {}),
        }
        head = place.head
        unchanged = self._commits.unchanged_since

        def body(txn: Any) -> None:
            if opened:
                fields = _group_fields(group, request, self._retention)
                txn.create(group_ref, {**fields, **grown})
                if head.exists:
                    txn.update(head.reference, {"group": group.gid}, option=unchanged(head))
                else:
                    txn.create(head.reference, {"group": group.gid, "kind": request.kind})
            elif lane.number:
                self.lanes.grow(txn, group, lane, grown)
            else:
                txn.update(group_ref, grown, option=unchanged(place.snapshot))
            for page_id, page in zip(request.pages, request.page_documents, strict=False):
                txn.set(self._commits.collection(REQUESTS).document(page_id), dict(page))
            txn.create(member_ref, member)
            txn.create(self._operations.collection().document(op_id), op)
            decided = {
                "operation": name,
                "lease_until": None,
                "decided_at": now,
                GROUP: group.gid,
                **closed_marks(stored),  # adoption looks no more (submissions.py)
            }
            txn.update(sub.reference, decided, option=unchanged(sub))
            if staged is not None:
                if staged.create:
                    txn.create(staged.ref, dict(staged.update))
                else:
                    txn.update(staged.ref, dict(staged.update), option=unchanged(staged.seen))

        self._commit(body, f"group {group.gid}")
        if opened:
            saw_group(place.head.id, group.gid, group.lanes)
        if request.end is not None:
            request.end.applied = staged is not None
        self._operations.log_registered(name, request.kind)
        return Joined(name, group, full=full, opened=opened)

    def _read_many(self, refs: Sequence[Any], subject: str) -> dict[str, Any]:
        return self._commits.read_many(refs, f"{subject}: its place")

    def _new_group(self, request: JoinRequest, now: datetime, lanes: int) -> Group:
        return Group(
            gid=f"{request.kind}-{uuid.uuid4().hex[:16]}",
            kind=request.kind,
            model=request.model,
            generation_config=dict(request.generation_config or {}) or None,
            status=OPEN,
            fair_key=request.fair_key,
            opened_at=now,
            seal_at=now + timedelta(seconds=request.sharing.window_s),
            count=0,
            requests=0,
            bytes=0,
            lanes=lanes,
        )


def room(request: JoinRequest) -> int:
    """How many items like this one a group holds (its name about 64 bytes)."""
    sharing = request.sharing
    by_requests = sharing.max_requests // max(1, request.requests)
    by_keys = MAX_KEY_BYTES // (request.key_bytes + 64)
    return min(by_requests, sharing.max_bytes // max(1, request.bytes), by_keys)


def _group_fields(group: Group, request: JoinRequest, retention: timedelta) -> dict[str, Any]:
    return {
        "kind": group.kind,
        "model": group.model,
        "generation_config": group.generation_config,
        "tag": group.tag,
        "status": OPEN,
        "opened_at": group.opened_at,
        "seal_at": group.seal_at,
        "due_at": group.seal_at,
        "operation": None,
        "fair_key": request.fair_key,
        "lanes": group.lanes,
        # With its items' request pages, whatever the retention (Groups.request_pages).
        "expire_at": group.opened_at + retention,
    }
