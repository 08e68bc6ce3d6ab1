"""The queue of sealed groups waiting for Gemini's batch quota: created in turn, fair by key.

A group whose create Gemini refused with a 429 (its batches in flight are full), or that
found others already waiting, is QUEUED; only the queue's head is created, so the oldest
waiting group goes first and no group waits for ever behind fresher ones (shared/sharing/
turns.py drives it). Its order is start-time fair queueing by the group's `fair_key` (an
installation, a repository, or "" for none, `Sharing.fair_by`): a queued group's `turn`
is one past the later of the turn last served and its key's last queued turn, so a key
with many groups waiting takes one turn in each round, and a key arriving fresh takes
the next round's (docs/architecture.md, "Shared batches"). Of one turn, the group queued
first goes first. Its documents:

- `batch_groups/{gid}`: `queue_place` (`{turn:012d}~{n:012d}`, its turn then its order
  of queueing: the one field the queue is read by, ascending) and `queued_at`; both
  removed once served;
- `group_queue/turns`: `served` (the turn of the last group served), `queued` (groups
  ever queued: the next one's `n`), `keys` (each key still waiting → its last queued
  turn) and `retry_at` (no create before it: Gemini's quota said when to ask again).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, NamedTuple

from google.api_core import exceptions as gexc
from google.cloud import firestore

from shared.clock import Clock
from shared.ledger.commits import Commits
from shared.ledger.errors import StoreUnavailable
from shared.ledger.group_records import GROUPS, Group, group_from
from shared.ledger.ids import check_time

QUEUE = "group_queue"
TURNS = "turns"


class QueueState(NamedTuple):
    """`group_queue/turns` as read: the turn last served, each waiting key's last turn,
    and when a create may next be tried (None: now)."""

    served: int
    keys: Mapping[str, int]
    retry_at: datetime | None
    queued: int = 0


def key_id(fair_key: str) -> str:
    """A key as the state's `keys` map holds it (a map key has no dots or slashes)."""
    return hashlib.sha256(fair_key.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def place(turn: int, queued: int) -> str:
    """The sort key of a queued group: its turn, then its order of queueing."""
    return f"{turn:012d}~{queued:012d}"


class GroupQueue:
    """The waiting groups, in turn; see the module."""

    def __init__(
        self,
        commits: Commits,
        clock: Clock,
        *,
        commit: Callable[[Callable[[Any], None], str], None],
        retrying: Callable[[str, Callable[[], Any]], Any],
    ) -> None:
        self._commits = commits
        self._clock = clock
        # The groups' conditional commit and its jittered retry when contended.
        self._commit = commit
        self._retrying = retrying
        self._state_ref = commits.collection(QUEUE).document(TURNS)

    def state(self) -> QueueState:
        return _state_from(self._commits.read(self._state_ref, "group queue"))

    def waiting(self, limit: int) -> list[Group]:
        """The queued groups, head first."""
        query = self._commits.collection(GROUPS).order_by("queue_place").limit(limit)
        return [group_from(s) for s in self._commits.stream(query, "queued groups")]

    def enqueue(self, gid: str) -> Group | None:
        """Queue the group in its key's next turn (once: a queued group keeps its place; a
        group made or finished meanwhile is left out); the group after, None if gone."""
        ref = self._commits.collection(GROUPS).document(gid)

        def attempt() -> Group | None:
            snapshot = self._commits.read(ref, f"group {gid}")
            if not snapshot.exists:
                return None
            group = group_from(snapshot)
            if group.queue_place is not None or group.due_at is None or group.settled_parts:
                return group  # queued already, or made since it was read: nothing waits
            state_snapshot = self._commits.read(self._state_ref, "group queue")
            state = _state_from(state_snapshot)
            key = key_id(group.fair_key)
            turn = max(state.served, state.keys.get(key, state.served)) + 1
            queued = state.queued + 1
            fields = {"queue_place": place(turn, queued), "queued_at": self._clock()}
            keys = {**state.keys, key: turn}

            def body(txn: Any) -> None:
                txn.update(ref, fields, option=self._commits.unchanged_since(snapshot))
                self._write_state(txn, state_snapshot, {"keys": keys, "queued": queued})

            self._commit(body, f"group {gid}: queueing it")
            return group_from(self._commits.read(ref, f"group {gid}"))

        return self._retrying(gid, attempt)

    def served(self, gid: str) -> None:
        """The group no longer waits (its batch made, or it needs none): out of the queue,
        its turn the one served."""
        ref = self._commits.collection(GROUPS).document(gid)

        def attempt() -> None:
            snapshot = self._commits.read(ref, f"group {gid}")
            group = group_from(snapshot) if snapshot.exists else None
            if group is None or group.queue_place is None:
                return
            state_snapshot = self._commits.read(self._state_ref, "group queue")
            state = _state_from(state_snapshot)
            served = max(state.served, group.queue_turn)
            keys = {key: turn for key, turn in state.keys.items() if turn > served}
            gone = {"queue_place": firestore.DELETE_FIELD, "queued_at": firestore.DELETE_FIELD}

            def body(txn: Any) -> None:
                txn.update(ref, gone, option=self._commits.unchanged_since(snapshot))
                self._write_state(txn, state_snapshot, {"served": served, "keys": keys})

            self._commit(body, f"group {gid}: taking it out of the queue")

        self._retrying(gid, attempt)

    def pause(self, until: datetime) -> None:
        """No create before `until` (Gemini's quota refused one and said when); a pause
        that already lasts longer is kept."""
        check_time(until, "until")
        current = self.state().retry_at
        if current is not None and current >= until:
            return
        try:
            self._state_ref.set({"retry_at": until}, merge=True, timeout=self._commits.timeout_s)
        except gexc.GoogleAPIError as exc:
            raise StoreUnavailable(f"group queue: pausing it failed: {exc}") from exc

    def _write_state(self, txn: Any, seen: Any, fields: dict[str, Any]) -> None:
        if seen.exists:
            txn.update(self._state_ref, fields, option=self._commits.unchanged_since(seen))
        else:
            blank = {"served": 0, "queued": 0, "keys": {}, "retry_at": None}
            txn.create(self._state_ref, {**blank, **fields})


def _state_from(snapshot: Any) -> QueueState:
    data = (snapshot.to_dict() or {}) if snapshot.exists else {}
    keys = data.get("keys") or {}
    return QueueState(
        served=int(data.get("served") or 0),
        keys={str(k): int(v) for k, v in keys.items()},
        retry_at=data.get("retry_at"),
        queued=int(data.get("queued") or 0),
    )
