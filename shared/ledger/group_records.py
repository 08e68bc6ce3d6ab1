"""A shared batch's group as read from `batch_groups/{gid}`: its items, parts and faults.

A busy group takes its joins in LANES (shared/ledger/group_lanes.py): item `i` of lane `l`
has index `l * LANE_STRIDE + i`, so a group's indices are dense within each lane, and the
seal records each lane's count (`lane_counts`); a group of one lane has indices 0..count-1.

A sealed group's batch is made per PART, a range of its items' indices: one part, the whole group,
unless Gemini refused a create without naming a request, which splits the refused part in
halves until the bad request is alone (docs/architecture.md, "Shared batches"). An item is
`refused` when Gemini named its request as invalid: it fails alone, with the reason, and
its part is made without it. A group held by a refusal of the deployment (a key, billing
or permission) keeps `held_since` until a create is accepted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from shared.statuses import GroupStatus

OPEN, SEALED, FAILED = GroupStatus.OPEN, GroupStatus.SEALED, GroupStatus.FAILED
GROUPS = "batch_groups"  # the groups' collection
HEADS = "group_heads"  # per kind, model, config, fair key and shard: the group joined now
MEMBERS = "group_members"  # one document an item
REQUESTS = "group_requests"  # one page of one item's requests
GROUP_TAG = "group"  # the token of a group batch's display name, `hookledger:group:{gid}`
# An item's operation name: `groups/{gid}.{index}` (never a Gemini name: settled through its
# group's batch, shared/settlement).
MEMBER_PREFIX = "groups/"
# The index of item `i` of lane `l` is `l * LANE_STRIDE + i`; no lane holds this many.
LANE_STRIDE = 1_000_000


def group_tag(gid: str) -> str:
    return f"hookledger:{GROUP_TAG}:{gid}"


def member_name(gid: str, index: int) -> str:
    return f"{MEMBER_PREFIX}{gid}.{index}"


def member_id(gid: str, index: int) -> str:
    """An item's document id in `group_members`."""
    return f"{gid}~{index}"


def member_key(index: int, key: str) -> str:
    """A request's key in the group's batch: the item's index, then its own key."""
    return f"{index}/{key}"


def split_member_key(key: str) -> tuple[int, str] | None:
    """(item index, the item's own key) of a group batch's row key; None when not one."""
    index, sep, own = key.partition("/")
    return (int(index), own) if sep and index.isdigit() else None


@dataclass(frozen=True)
class Member:
    tag: str
    operation: str
    requests: int
    pages: tuple[str, ...]


@dataclass(frozen=True)
class Part:
    """Items `lo` ≤ i < `hi` of a group, made as one batch: `operation` once registered,
    `failed` (the reason) when it never can be."""

    lo: int
    hi: int
    operation: str | None = None
    failed: str | None = None

    @property
    def pending(self) -> bool:
        return self.operation is None and self.failed is None

    def holds(self, index: int) -> bool:
        return self.lo <= index < self.hi


@dataclass(frozen=True)
class Group:
    """A group as its document holds it. Its items are documents of their own
    (`Groups.members`), so a join writes a few bytes here or on one of its `lanes`, not
    the list of every item; an item's operation is `member_name(gid, index)`. `count`,
    `requests` and `bytes` are lane 0's while the group is open, every lane's once sealed."""

    gid: str
    kind: str
    model: str
    generation_config: dict[str, Any] | None
    status: str
    opened_at: datetime
    seal_at: datetime
    count: int
    requests: int
    bytes: int
    due_at: datetime | None = None
    operation: str | None = None
    update_time: Any = None
    stored_parts: tuple[Part, ...] = ()
    refused: Mapping[int, str] = field(default_factory=dict)
    fail_cursor: int = 0
    error: str | None = None
    held_since: datetime | None = None
    holds: int = 0
    key_bytes: int = 0
    legacy_members: tuple[Member, ...] = ()  # a group written with its items inline
    fair_key: str = ""  # whose turn it takes when it waits for Gemini's quota
    queue_place: str | None = None  # set while it waits (shared/ledger/group_queue.py)
    lanes: int = 1  # the lane documents its joins write (shared/ledger/group_lanes.py)
    lane_counts: tuple[int, ...] = ()  # each lane's items, recorded by the seal

    @property
    def indices(self) -> list[int]:
        """Its items' indices in order: lane by lane once sealed with lanes, else 0..count-1."""
        if not self.lane_counts:
            return list(range(self.count))
        return [lane * LANE_STRIDE + i for lane, n in enumerate(self.lane_counts) for i in range(n)]

    @property
    def end(self) -> int:
        """One past its last index: the whole group is the part 0..end."""
        indices = self.indices
        return indices[-1] + 1 if indices else 0

    def items_of(self, part: Part) -> list[int]:
        """The indices of the items a part holds."""
        return [i for i in self.indices if part.holds(i)]

    @property
    def queue_turn(self) -> int:
        """The turn it waits for: the first part of its `queue_place` (0 when not queued)."""
        return int(self.queue_place.partition("~")[0]) if self.queue_place else 0

    @property
    def tag(self) -> str:
        return group_tag(self.gid)

    def member(self, index: int) -> str:
        """The operation of item `index`."""
        return member_name(self.gid, index)

    @property
    def parts(self) -> tuple[Part, ...]:
        """The group's parts: as split, else one, the whole group (its `operation`)."""
        if self.stored_parts:
            return self.stored_parts
        failed = (self.error or "refused") if self.status == FAILED else None
        return (Part(0, self.end, self.operation, failed),)

    def part_tag(self, part: Part) -> str:
        """The submission tag of a part's batch: the group's own for the whole group."""
        if self.whole(part):
            return self.tag
        return group_tag(f"{self.gid}~{part.lo}-{part.hi}")

    def whole(self, part: Part) -> bool:
        return (part.lo, part.hi) == (0, self.end)

    def part_of(self, index: int) -> Part | None:
        return next((part for part in self.parts if part.holds(index)), None)

    def live(self, part: Part) -> list[int]:
        """The indices of a part's items that go into its batch (none refused)."""
        return [i for i in self.items_of(part) if i not in self.refused]

    def failure_of(self, index: int) -> str | None:
        """Why item `index` fails without a batch: its request refused, or its part; None
        while its batch may still be made or was."""
        if index in self.refused:
            return self.refused[index]
        part = self.part_of(index)
        return part.failed if part is not None else None

    @property
    def settled_parts(self) -> bool:
        """Every part has its batch registered or failed."""
        return not any(part.pending for part in self.parts)

    @property
    def unfailed_from(self) -> int | None:
        """The first item at or past the fail cursor whose failure is still to settle."""
        for index in self.indices:
            if index >= self.fail_cursor and self.failure_of(index) is not None:
                return index
        return None


def _part(data: Mapping[str, Any]) -> Part:
    return Part(
        lo=int(data.get("lo", 0)),
        hi=int(data.get("hi", 0)),
        operation=data.get("operation") or None,
        failed=data.get("failed") or None,
    )


def part_fields(part: Part) -> dict[str, Any]:
    return {"lo": part.lo, "hi": part.hi, "operation": part.operation, "failed": part.failed}


def member_from(data: Mapping[str, Any]) -> Member:
    return Member(
        tag=str(data.get("tag", "")),
        operation=str(data.get("operation", "")),
        requests=int(data.get("requests", 0)),
        pages=tuple(str(p) for p in data.get("pages") or ()),
    )


def group_from(snapshot: Any) -> Group:
    data = snapshot.to_dict() or {}
    refused = data.get("refused") or {}
    inline = tuple(member_from(m) for m in data.get("members") or ())
    return Group(
        gid=snapshot.id,
        kind=str(data.get("kind", "")),
        model=str(data.get("model", "")),
        generation_config=data.get("generation_config"),
        status=str(data.get("status", OPEN)),
        opened_at=data["opened_at"],
        seal_at=data["seal_at"],
        count=int(data.get("count") or len(inline)),
        requests=int(data.get("requests", 0)),
        bytes=int(data.get("bytes", 0)),
        due_at=data.get("due_at"),
        operation=data.get("operation"),
        update_time=snapshot.update_time,
        stored_parts=tuple(_part(p) for p in data.get("parts") or ()),
        refused={int(k): str(v) for k, v in refused.items() if str(k).isdigit()},
        fail_cursor=int(data.get("fail_cursor") or 0),
        error=data.get("error") or None,
        held_since=data.get("held_since"),
        holds=int(data.get("holds") or 0),
        key_bytes=int(data.get("key_bytes") or 0),
        legacy_members=inline,
        fair_key=str(data.get("fair_key") or ""),
        queue_place=data.get("queue_place") or None,
        lanes=int(data.get("lanes") or 1),
        lane_counts=tuple(int(n) for n in data.get("lane_counts") or ()),
    )
