"""A busy group's lanes: its joins spread over lane documents, so that no document takes
more writes a second than Firestore sustains on one (docs/architecture.md, "Shared batches").

A group opens with `lanes` chosen from the rate its head's previous group was joined at
(`lanes_for`): one at a low rate. Lane 0 is the group's own document (its `count`,
`requests`, `bytes`, `key_bytes`), so a quiet group is written as it always was; lane
l > 0 is `group_lanes/{gid}~{l}`, created by its first join. A join writes the one lane
it picked, on condition it is unchanged since read, and its item's index is
`l * LANE_STRIDE + i` (group_records.py). The seal writes every lane sealed in its own
commit (creating those nobody joined), so a join racing it fails its condition and joins
the next group; it records each lane's count on the group (`lane_counts`). Each lane holds
1/lanes of the group's limits, so a group is full when any lane is.

Here too: the head a join tries (`head_of`), this process's lock for a head's lane, and
per head the group this process last saw there (`seen_group`), which a join reads first.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import random
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from shared.kinds import Sharing
from shared.ledger.commits import Commits
from shared.ledger.group_records import LANE_STRIDE, OPEN, SEALED, Group

LANES = "group_lanes"
# One join at a time per head and lane in this process, so its threads do not read the
# lane and send commits Firestore would refuse. A thread that waits past HEAD_LOCK_WAIT_S
# for its stripe counts it as a meeting and tries among more shards.
HEAD_LOCKS = tuple(threading.Lock() for _ in range(64))
HEAD_LOCK_WAIT_S = 2.0
# The most lanes a group opens with.
MAX_LANES = 16
# Joins a second one lane is given: half of Firestore's sustained 1 write/s to a document.
LANE_WRITES_PER_S = 0.5
# A lane's share of the group's limits holds at least this many items like its opener's:
# fewer lanes otherwise, or a group would be full when one small lane is.
LANE_ITEMS = 8
# Per head in this process: the group last seen there with its lanes, and a turn that
# takes them in rotation (joins spread evenly, so no lane fills long before the others).
_SEEN_LIMIT = 4096
_seen: dict[str, Seen] = {}
_seen_lock = threading.Lock()


@dataclass(frozen=True)
class Seen:
    """The group a join of this process last saw at a head: its id and lanes."""

    gid: str
    lanes: int
    turn: itertools.count[int]


@dataclass(frozen=True)
class Lane:
    """One lane of an open group as read: lane 0 is the group's document (`snapshot`
    None: the join's condition is the group's own)."""

    number: int
    snapshot: Any
    count: int = 0
    requests: int = 0
    bytes: int = 0
    key_bytes: int = 0
    sealed: bool = False

    def index(self) -> int:
        """The index the next item of this lane gets."""
        return self.number * LANE_STRIDE + self.count

    def takes(self, requests: int, size: int, sharing: Sharing, lanes: int) -> bool:
        """An open lane takes an item if it is empty (an item larger than its share of
        the group's limits gets a lane of its own) or the item keeps it within its share."""
        if self.sealed:
            return False
        if not self.count:
            return True
        return (
            self.requests + requests <= sharing.max_requests / lanes
            and self.bytes + size <= sharing.max_bytes / lanes
        )


def head_of(
    kind: str,
    model: str,
    generation_config: Mapping[str, Any] | None,
    fair_key: str,
    shards: int,
    tried: int,
) -> str:
    """The head a join tries: one per kind, model, generation config (a batch has one of
    each), fair key and shard. A first try joins shard 0; each contended try doubles the
    shards it picks among, up to `shards`: at a low rate one group a window takes every
    item, and more open only as joins meet."""
    config = json.dumps(generation_config or {}, sort_keys=True, default=str)
    batch = f"{model}\x00{config}\x00{fair_key}"
    digest = hashlib.sha256(batch.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    shard = random.randrange(min(shards, 2 ** min(tried, 16)))
    return f"{kind}~{digest}~{shard}"


def join_lock(head_id: str, pick: int) -> threading.Lock:
    """This process's lock for joins to lane `pick` of `head_id`'s group."""
    return HEAD_LOCKS[hash((head_id, pick)) % len(HEAD_LOCKS)]


def first_lane(group: Group) -> Lane:
    """Lane 0: the group's own document."""
    return Lane(
        0,
        None,
        group.count,
        group.requests,
        group.bytes,
        group.key_bytes,
        sealed=group.status != OPEN,
    )


def lanes_for(previous: Group | None, now: datetime, room: int) -> int:
    """The lanes a new group opens with: its head's previous group's items a second since
    it opened, at LANE_WRITES_PER_S a lane, 1 to MAX_LANES (1 with none before it), and
    no more than `room` (the items like its opener's the group holds) / LANE_ITEMS."""
    if previous is None:
        return 1
    items = sum(previous.lane_counts) or previous.count * previous.lanes
    elapsed = max(1.0, (now - previous.opened_at).total_seconds())
    wanted = math.ceil(items / elapsed / LANE_WRITES_PER_S)
    return max(1, min(MAX_LANES, room // LANE_ITEMS, wanted))


def pick_lane(head_id: str) -> int:
    """The lane this process's next join at `head_id` takes (and locks): the next in
    rotation among the lanes of the group it last saw there (`lane_of` it for another)."""
    with _seen_lock:
        seen = _seen.get(head_id)
        return lane_of(next(seen.turn), seen.lanes) if seen is not None else 0


def lane_of(turn: int, lanes: int) -> int:
    return turn % lanes


def seen_group(head_id: str) -> Seen | None:
    """The group this process last saw at `head_id`, if any."""
    return _seen.get(head_id)


def saw_group(head_id: str, gid: str, lanes: int) -> None:
    """Record the group a join found (or opened) at `head_id`."""
    with _seen_lock:
        seen = _seen.get(head_id)
        if seen is not None and seen.gid == gid:
            return
        if len(_seen) >= _SEEN_LIMIT:
            _seen.clear()
        _seen[head_id] = Seen(gid, lanes, itertools.count(random.randrange(lanes)))


class LaneSnapshots:
    """Lanes 1.. of a group as the seal read them (`GroupLanes.read`)."""

    def __init__(self, commits: Commits, group: Group, snapshots: list[Any], expire_at: Any):
        self._commits = commits
        self._group = group
        self._snapshots = snapshots
        self._expire_at = expire_at

    def totals(self) -> dict[str, Any]:
        """The sealed group's fields for every lane: none for a group of one."""
        if self._group.lanes <= 1:
            return {}
        group = self._group
        lanes = [first_lane(group)] + [_lane(n + 1, s) for n, s in enumerate(self._snapshots)]
        return {
            "lane_counts": [lane.count for lane in lanes],
            "count": sum(lane.count for lane in lanes),
            "requests": sum(lane.requests for lane in lanes),
            "bytes": sum(lane.bytes for lane in lanes),
            "key_bytes": sum(lane.key_bytes for lane in lanes),
        }

    def seal(self, txn: Any) -> None:
        """Every lane sealed in the seal's commit, each on condition it is as read."""
        for snapshot in self._snapshots:
            if snapshot.exists:
                option = self._commits.unchanged_since(snapshot)
                txn.update(snapshot.reference, {"status": SEALED}, option=option)
            else:
                txn.create(snapshot.reference, _lane_fields(SEALED, self._expire_at))


class GroupLanes:
    """The `group_lanes` documents: read for a join and for the seal, written by both."""

    def __init__(self, commits: Commits, *, retention: timedelta) -> None:
        self._commits = commits
        self._retention = retention

    def ref(self, gid: str, number: int) -> Any:
        return self._commits.collection(LANES).document(f"{gid}~{number}")

    def read_lane(self, group: Group, number: int) -> Lane:
        """Lane `number` of an open group (0: the group's document, read already)."""
        if number == 0:
            return first_lane(group)
        snapshot = self._commits.read(self.ref(group.gid, number), f"group {group.gid}: a lane")
        return self.lane(number, snapshot)

    @staticmethod
    def lane(number: int, snapshot: Any) -> Lane:
        """Lane `number` (> 0) as `snapshot` holds it (created by its first join)."""
        return _lane(number, snapshot)

    def read(self, group: Group) -> LaneSnapshots:
        """Lanes 1.. of the group, in one call, for its seal."""
        refs = [self.ref(group.gid, n) for n in range(1, group.lanes)]
        found = self._commits.read_many(refs, f"group {group.gid}: its lanes") if refs else {}
        snapshots = [found[ref.path] for ref in refs]
        return LaneSnapshots(self._commits, group, snapshots, group.opened_at + self._retention)

    def grow(self, txn: Any, group: Group, lane: Lane, grown: dict[str, Any]) -> None:
        """Write a join's `grown` counts on lane `lane` (> 0), on condition it is as read."""
        if lane.snapshot.exists:
            option = self._commits.unchanged_since(lane.snapshot)
            txn.update(lane.snapshot.reference, grown, option=option)
        else:
            fields = _lane_fields(OPEN, group.opened_at + self._retention)
            txn.create(lane.snapshot.reference, {**fields, **grown})


def _lane(number: int, snapshot: Any) -> Lane:
    data = (snapshot.to_dict() or {}) if snapshot.exists else {}
    return Lane(
        number,
        snapshot,
        int(data.get("count") or 0),
        int(data.get("requests") or 0),
        int(data.get("bytes") or 0),
        int(data.get("key_bytes") or 0),
        sealed=data.get("status", OPEN) != OPEN,
    )


def _lane_fields(status: str, expire_at: Any) -> dict[str, Any]:
    return {
        "status": status,
        "count": 0,
        "requests": 0,
        "bytes": 0,
        "key_bytes": 0,
        "expire_at": expire_at,
    }
