"""Shared batches in the ledger: many items (e.g. pushes) in one Gemini batch, each once.

One batch per push caps throughput at Gemini's batch jobs in flight per project divided by
a batch's lifetime. A kind that shares lets its items join the open GROUP of its kind and
model; the group is sealed when it holds enough requests or its window ends, and exactly
one sealer creates its batch (docs/architecture.md, "Shared batches"). Its collections:

- `batch_groups/{gid}`: one group: `kind` (its items' operation kind), `model`,
  `generation_config`, `tag` (the batch's display name `hookledger:group:{gid}`),
  `status` (`open` → `sealed`; `failed` when its whole batch never can be made), `opened_at`,
  `seal_at` (the window's end), `count` (its items), `requests`, `bytes`, `key_bytes`
  (its item names' and request keys' bytes, which its batch's context carries): lane 0's
  while open, the sum once sealed; `lanes`, `lane_counts` (each lane's items, sealed),
  `due_at` (when somebody must seal it, see its batches registered or settle its failed
  items; cleared once nothing is left), `operation` (its batch, once registered whole),
  `parts` (`lo`, `hi`, `operation`, `failed`: the batches it is made as, group_records.py),
  `refused` (item index → Gemini's reason), `fail_cursor` (failures settled before it),
  `held_since`, `holds`, `hold_reason` (Gemini refusing the deployment);
- `group_heads/{kind}~{model, config and fair key's hash}~{shard}`: the group joined now;
- `group_lanes/{gid}~{lane}`: lane l > 0 of a busy group (shared/ledger/group_lanes.py):
  its `status`, `count`, `requests`, `bytes`, `key_bytes`, written instead of the group's;
- `group_members/{gid}~{index}`: one item: `group`, `tag` (its submission), `operation`,
  `requests` (its count) and `pages` (its stored requests), created by its join;
- `group_requests/{…}`: one page of one item's requests (key, prompt), written before it
  joins, read by the sealer, expired with the group;
- `group_alerts/{name}~{window}`: created by the first alert of its kind in a window.

An item joins exactly once: its join is ONE commit that creates the item's operation
(pending, `group` = gid, its outbox's start items), decides the item's submission with it,
adds it to the group, and may carry the delivery's `done`; a retried or overlapping run
of the item finds the submission decided and joins nothing. A sealed group takes no
item: a joiner that finds the head's group sealed or full opens the next one::

    join:  read submission (ours, undecided), head, group, a lane ─ commit on "all unchanged":
             lane open & fits → its count += 1, item created │ else → new group, head → it
             operation created, submission decided, delivery done (when given)
    seal:  group and its lanes open → sealed (conditional) ─ the group's submission claimed
             (shared/submission.py, keyed by the group's tag) ─ create ─ register
"""

from __future__ import annotations

import hashlib
import itertools
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from google.api_core import exceptions as gexc

from shared.clock import Clock
from shared.kinds import Sharing
from shared.ledger.commits import Commits, Conflict
from shared.ledger.deliveries import Deliveries
from shared.ledger.errors import ContentionError, InvalidArgument, StoreUnavailable
from shared.ledger.group_lanes import (
    HEAD_LOCK_WAIT_S,
    first_lane,
    head_of,
    join_lock,
    lanes_for,
    pick_lane,
    saw_lanes,
)
from shared.ledger.group_records import (
    FAILED,
    GROUP_TAG,
    MEMBER_PREFIX,
    OPEN,
    SEALED,
    Group,
    Member,
    Part,
    group_from,
    group_tag,
    member_from,
    member_key,
    member_name,
    split_member_key,
)
from shared.ledger.group_states import GROUPS, GroupStates
from shared.ledger.ids import submission_id
from shared.ledger.operations import Operations
from shared.ledger.records import GROUP, SUBMISSIONS, DeliveryEnd
from shared.ledger.submissions import closed_marks

__all__ = [
    "FAILED",
    "GROUP_TAG",
    "MEMBER_PREFIX",
    "OPEN",
    "SEALED",
    "Group",
    "Groups",
    "JoinRequest",
    "Joined",
    "Member",
    "Part",
    "group_from",
    "group_tag",
    "member_key",
    "member_name",
    "split_member_key",
]

HEADS = "group_heads"
REQUESTS = "group_requests"
MEMBERS = "group_members"
# Item documents read in one call (`get_all`).
MEMBERS_PER_READ = 300
# A group's item names and request keys travel in its batch's context (its operation and
# its claim, one document each): it is sealed before they may pass 1 MiB, with room.
MAX_KEY_BYTES = 400_000
# One page of an item's stored requests stays under Firestore's 1 MiB document limit.
PAGE_BYTES = 900_000
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
    its stored request `pages` with their `requests` count and `bytes`, its operation's
    `kind` and `context`, the `model` and `generation_config` its batch needs, the kind's
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


class Groups(GroupStates):
    """The groups, their heads, items and requests; see the module docstring. How a
    group goes on once open (seal, parts, refusals, holds) is `GroupStates`'."""

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

    # -- requests -------------------------------------------------------------------------

    def store_requests(
        self, tag: str, attempt: str, requests: Sequence[tuple[str, str]]
    ) -> tuple[tuple[str, ...], int]:
        """Store an item's requests in pages named for this attempt, before it joins;
        (page ids, bytes). Idempotent: a rerun of the attempt writes the same pages."""
        if not requests:
            raise InvalidArgument(f"item {tag}: no requests to store")
        stem = hashlib.sha256(f"{tag}\x00{attempt}".encode("utf-8", "surrogatepass")).hexdigest()
        pages: list[list[list[str]]] = [[]]
        size = total = 0
        for key, prompt in requests:
            if not isinstance(key, str) or not key or not isinstance(prompt, str):
                raise InvalidArgument(f"item {tag}: a request needs a key and a prompt")
            cost = len(key.encode("utf-8", "surrogatepass")) + len(
                prompt.encode("utf-8", "surrogatepass")
            )
            if pages[-1] and size + cost > PAGE_BYTES:
                pages.append([])
                size = 0
            pages[-1].append([key, prompt])
            size += cost
            total += cost
        expire_at = self._clock() + self._retention
        ids = tuple(f"{stem[:40]}~{n}" for n in range(len(pages)))
        try:
            for page_id, page in zip(ids, pages, strict=True):
                self._commits.collection(REQUESTS).document(page_id).set(
                    {
                        "tag": tag,
                        "requests": [{"key": k, "prompt": p} for k, p in page],
                        "expire_at": expire_at,
                    },
                    timeout=self._commits.timeout_s,
                )
        except gexc.GoogleAPIError as exc:
            raise StoreUnavailable(f"item {tag}: storing its requests failed: {exc}") from exc
        return ids, total

    def members(self, group: Group, indices: Sequence[int] | None = None) -> list[Member]:
        """The group's items at `indices` (default all), in that order, from their own
        documents (a group written with its items inline: from it)."""
        chosen = list(group.indices if indices is None else indices)
        if group.legacy_members:
            return [group.legacy_members[i] for i in chosen]
        ids = [_member_id(group.gid, i) for i in chosen]
        found = self._read_all(MEMBERS, ids, f"group {group.gid}: its items")
        return [member_from(found[doc_id]) for doc_id in ids]

    def requests(self, group: Group, indices: Sequence[int] | None = None) -> list[tuple[str, str]]:
        """Every request of the group's items (those at `indices`, default all) in join
        order, keyed `member_key(i, key)`."""
        chosen = list(group.indices if indices is None else indices)
        members = self.members(group, chosen)
        ids = [page for member in members for page in member.pages]
        pages = self._read_all(REQUESTS, ids, f"group {group.gid}: its requests")
        out: list[tuple[str, str]] = []
        for index, member in zip(chosen, members, strict=True):
            for page_id in member.pages:
                for request in pages[page_id].get("requests") or []:
                    out.append((member_key(index, request["key"]), request["prompt"]))
        return out

    def _read_all(self, collection: str, ids: Sequence[str], what: str) -> dict[str, Any]:
        """Each document `ids` names, read MEMBERS_PER_READ a call; StoreUnavailable naming
        the first one missing."""
        found: dict[str, Any] = {}
        refs = [self._commits.collection(collection).document(doc_id) for doc_id in ids]
        try:
            for first in range(0, len(refs), MEMBERS_PER_READ):
                page = refs[first : first + MEMBERS_PER_READ]
                for snapshot in self._commits.client.get_all(page, timeout=self._commits.timeout_s):
                    if snapshot.exists:
                        found[snapshot.id] = snapshot.to_dict() or {}
        except gexc.GoogleAPIError as exc:
            raise StoreUnavailable(f"{what}: read failed: {exc}") from exc
        missing = next((doc_id for doc_id in ids if doc_id not in found), None)
        if missing is not None:
            raise StoreUnavailable(f"{what}: {collection}/{missing} is missing")
        return found

    # -- join -----------------------------------------------------------------------------

    def join(self, request: JoinRequest) -> Joined:
        """Add the item to its kind's open group, in ONE commit with its operation, its
        submission's decision and (when given) the delivery's `done`; see the module
        docstring. Raises `Conflict`-free errors only: `ContentionError` after many
        contended attempts, `StoreUnavailable`, or `InvalidArgument`."""
        sub_ref = self._commits.collection(SUBMISSIONS).document(submission_id(request.tag))
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
                return join_at(self._commits.collection(HEADS).document(head_id), pick)
            finally:
                lock.release()

        def join_at(head_ref: Any, pick: int) -> Joined:
            sub = self._commits.read(sub_ref, f"submission {request.tag}")
            stored = (sub.to_dict() or {}) if sub.exists else None
            if stored is not None and stored.get("operation"):
                return Joined(str(stored["operation"]), None)
            if stored is None or stored.get("attempt") != request.attempt:
                raise ContentionError(
                    f"item {request.tag}: attempt {request.attempt} no longer holds its claim"
                )
            now = self._clock()
            head = self._commits.read(head_ref, f"group head {head_ref.id}")
            current = (head.to_dict() or {}).get("group") if head.exists else None
            snapshot = None
            if current:
                snapshot = self._commits.read(
                    self._commits.collection(GROUPS).document(current), f"group {current}"
                )
            group = group_from(snapshot) if snapshot is not None and snapshot.exists else None
            opened = True
            if group is not None and group.status == OPEN:
                saw_lanes(head_ref.id, group.lanes)
                lane = self.lanes.read_lane(group, pick % group.lanes)
                fits = (request.requests, request.bytes, request.sharing, group.lanes)
                opened = not lane.takes(*fits)
            if opened:
                group = self._new_group(request, now, lanes_for(group, now, room(request)))
                lane = first_lane(group)
            assert group is not None
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
            member_ref = self._commits.collection(MEMBERS).document(_member_id(group.gid, index))
            op_id, op = self._operations.pending_fields(
                name,
                request.kind,
                request.context,
                submission=request.tag,
                outbox=request.start_items(name),
            )
            op[GROUP] = group.gid
            op["next_check_at"] = group.seal_at + MEMBER_BACKSTOP
            # The delivery ends here unless it must still see the group sealed: the item
            # that opened the group (its window) or filled it (shared/sharing/join.py).
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

            def body(txn: Any) -> None:
                if opened:
                    fields = _group_fields(group, request, self._retention)
                    txn.create(group_ref, {**fields, **grown})
                    if head.exists:
                        txn.update(
                            head_ref,
                            {"group": group.gid},
                            option=self._commits.unchanged_since(head),
                        )
                    else:
                        txn.create(head_ref, {"group": group.gid, "kind": request.kind})
                elif lane.number:
                    self.lanes.grow(txn, group, lane, grown)
                else:
                    txn.update(group_ref, grown, option=self._commits.unchanged_since(snapshot))
                txn.create(member_ref, member)
                txn.create(self._operations.collection().document(op_id), op)
                decided = {
                    "operation": name,
                    "lease_until": None,
                    "decided_at": now,
                    GROUP: group.gid,
                    **closed_marks(stored),  # adoption looks no more (submissions.py)
                }
                txn.update(sub_ref, decided, option=self._commits.unchanged_since(sub))
                if staged is not None:
                    if staged.create:
                        txn.create(staged.ref, dict(staged.update))
                    else:
                        txn.update(
                            staged.ref,
                            dict(staged.update),
                            option=self._commits.unchanged_since(staged.seen),
                        )

            self._commit(body, f"group {group.gid}")
            if request.end is not None:
                request.end.applied = staged is not None
            self._operations.log_registered(name, request.kind)
            return Joined(name, group, full=full, opened=opened)

        return self._retrying(request.tag, attempt)

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
        # With its items' request pages, whatever the retention (store_requests).
        "expire_at": group.opened_at + retention,
    }


def _member_id(gid: str, index: int) -> str:
    return f"{gid}~{index}"
