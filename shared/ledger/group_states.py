"""A group once open: sealed, made as parts, items refused, held, finished (the writes a
sealer makes after the joins; shared/ledger/groups.py has the group's collections and
joins, group_records.py what a group holds). Every change is conditional on the group
being unchanged since read, retried with jitter when contended.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from google.api_core import exceptions as gexc
from google.cloud import firestore

from shared.clock import Clock
from shared.ledger.commits import REFUSED, Commits, Conflict
from shared.ledger.errors import ContentionError, InvalidArgument, StoreUnavailable
from shared.ledger.group_lanes import GroupLanes, LaneSnapshots
from shared.ledger.group_queue import GroupQueue
from shared.ledger.group_records import (
    FAILED,
    GROUPS,
    OPEN,
    SEALED,
    Group,
    Part,
    group_from,
    part_fields,
)
from shared.ledger.ids import check_time
from shared.retry import Backoff, RetriesExhausted, Retry, find_cause, retrying

ALERTS = "group_alerts"
# Joins of one kind contend on one document: retried with jitter, many times, briefly.
JOIN_BACKOFF = Backoff(attempts=40, first_s=0.01, cap_s=0.4, jitter=1.0)


class GroupStates:
    """The `batch_groups` documents past their joins, and the deployment's group alerts."""

    def __init__(self, commits: Commits, clock: Clock, *, retention: timedelta) -> None:
        self._commits = commits
        self._clock = clock
        self._retention = retention
        self.queue = GroupQueue(commits, clock, commit=self._commit, retrying=self._retrying)
        self.lanes = GroupLanes(commits, retention=retention)

    # -- seal -----------------------------------------------------------------------------

    def get(self, gid: str) -> Group | None:
        ref = self._commits.collection(GROUPS).document(_check_gid(gid))
        snapshot = self._commits.read(ref, f"group {gid}")
        return group_from(snapshot) if snapshot.exists else None

    def seal(self, gid: str) -> Group:
        """Close the group to new items (once; a sealed group is returned as it is), with
        every lane it has in the same commit, recording each lane's count."""
        read: list[LaneSnapshots] = []

        def change(group: Group) -> dict[str, Any] | None:
            if group.status != OPEN:
                return None
            now = self._clock()
            read[:] = [self.lanes.read(group)]
            return {"status": SEALED, "sealed_at": now, "due_at": now, **read[0].totals()}

        return self._change(gid, change, also=lambda txn: read[0].seal(txn))

    def registered(self, gid: str, part: Part, operation: str) -> Group:
        """Record a part's batch (idempotent); the group is no longer held."""

        def change(group: Group) -> dict[str, Any] | None:
            parts = _with(group, part, operation=operation)
            if parts is None:
                return None
            fields: dict[str, Any] = {"parts": parts, "held_since": None, "holds": 0}
            if group.whole(part):
                fields["operation"] = operation
            return fields

        return self._change(gid, change)

    def part_failed(self, gid: str, part: Part, reason: str) -> Group:
        """Record that a part's batch can never be made: its items fail with `reason`."""

        def change(group: Group) -> dict[str, Any] | None:
            parts = _with(group, part, failed=reason[:4000])
            if parts is None:
                return None
            whole = group.whole(part)
            return {
                "parts": parts,
                "fail_cursor": min(group.fail_cursor, part.lo),
                **({"status": FAILED, "error": reason[:4000]} if whole else {}),
            }

        return self._change(gid, change)

    def split(self, gid: str, part: Part) -> Group:
        """Replace a pending part of two or more items by its two halves."""

        def change(group: Group) -> dict[str, Any] | None:
            items = group.items_of(part)
            if part not in group.parts or not part.pending or len(items) < 2:
                return None
            middle = items[len(items) // 2]  # half its items each (lanes leave gaps)
            halves = [Part(part.lo, middle), Part(middle, part.hi)]
            parts: list[Part] = []
            for current in group.parts:
                parts.extend(halves if current == part else [current])
            return {"parts": [part_fields(p) for p in parts]}

        return self._change(gid, change)

    def refuse(self, gid: str, reasons: Mapping[int, str]) -> Group:
        """Record items whose requests Gemini refused: each fails alone with its reason."""

        def change(group: Group) -> dict[str, Any] | None:
            fresh = {i: r for i, r in reasons.items() if i not in group.refused}
            if not fresh:
                return None
            refused = {str(i): r[:2000] for i, r in {**group.refused, **fresh}.items()}
            return {"refused": refused, "fail_cursor": min(group.fail_cursor, *fresh)}

        return self._change(gid, change)

    def failed_through(self, gid: str, cursor: int) -> None:
        """Every item before `cursor` whose failure was recorded has settled it."""
        self._update(gid, {"fail_cursor": cursor}, "recording its failed items")

    def finished(self, gid: str) -> None:
        """Nobody need look at the group again: every part decided, every failure settled."""
        self._update(gid, {"due_at": None}, "recording it finished")

    def defer(self, gid: str, until: datetime) -> None:
        """Look at the group again at `until` (a sealer that must wait: Gemini's quota)."""
        check_time(until, "until")
        self._update(gid, {"due_at": until}, "deferring")

    def hold(self, gid: str, until: datetime, reason: str) -> Group:
        """Gemini refuses the deployment: look again at `until`; `held_since` is kept from
        the first refusal until a create is accepted."""
        check_time(until, "until")

        def change(group: Group) -> dict[str, Any]:
            return {
                "due_at": until,
                "held_since": group.held_since or self._clock(),
                "holds": group.holds + 1,
                "hold_reason": reason[:2000],
            }

        return self._change(gid, change)

    def first_alert(self, name: str, now: datetime, window: timedelta) -> bool:
        """True for the first caller in each `window` for `name` (one document created per
        window): an alert about the deployment fires once, not once per group."""
        check_time(now, "now")
        bucket = int(now.timestamp() // window.total_seconds())
        ref = self._commits.collection(ALERTS).document(f"{name}~{bucket}")
        try:
            ref.create({"name": name, "at": now, "expire_at": now + self._retention})
        except gexc.AlreadyExists:
            return False
        except gexc.GoogleAPIError as exc:
            raise StoreUnavailable(f"alert {name}: recording it failed: {exc}") from exc
        return True

    def _update(self, gid: str, fields: dict[str, Any], what: str) -> None:
        ref = self._commits.collection(GROUPS).document(_check_gid(gid))
        try:
            ref.update(fields, timeout=self._commits.timeout_s)
        except gexc.GoogleAPIError as exc:
            raise StoreUnavailable(f"group {gid}: {what} failed: {exc}") from exc

    def _change(
        self,
        gid: str,
        change: Callable[[Group], dict[str, Any] | None],
        also: Callable[[Any], None] | None = None,
    ) -> Group:
        """Read the group, apply `change(group)` on condition it is unchanged since (and
        `also(txn)`'s writes in the same commit); the group as it stands after (unchanged
        when `change` says None)."""
        ref = self._commits.collection(GROUPS).document(_check_gid(gid))

        def attempt() -> Group:
            snapshot = self._commits.read(ref, f"group {gid}")
            if not snapshot.exists:
                raise InvalidArgument(f"group {gid} does not exist")
            group = group_from(snapshot)
            fields = change(group)
            if fields is None:
                return group

            def body(txn: Any) -> None:
                txn.update(ref, fields, option=self._commits.unchanged_since(snapshot))
                if also is not None:
                    also(txn)

            self._commit(body, f"group {gid}")
            return group_from(self._commits.read(ref, f"group {gid}"))

        return self._retrying(gid, attempt)

    def due(self, now: datetime, limit: int) -> list[Group]:
        """Groups somebody must seal or see registered by `now`, earliest first."""
        check_time(now, "now")
        query = (
            self._commits.collection(GROUPS)
            .where(filter=firestore.FieldFilter("due_at", "<=", now))
            .order_by("due_at")
            .limit(limit)
        )
        return [group_from(s) for s in self._commits.stream(query, "due groups")]

    # -- commits --------------------------------------------------------------------------

    def _commit(self, body: Callable[[Any], None], subject: str) -> None:
        try:
            firestore.transactional(body)(self._commits.client.transaction(max_attempts=1))
        except Exception as exc:
            if find_cause(exc, REFUSED) and not find_cause(exc, gexc.Aborted):
                raise Conflict(f"{subject}: changed since read") from exc
            raise

    def _retrying(self, subject: str, attempt: Callable[[], Any]) -> Any:
        """Retry a contended join or seal with jitter: many joiners of one kind meet on
        its open group, so a conflict waits a little rather than re-reading at once."""

        def classify(exc: Exception) -> Retry | None:
            if isinstance(exc, Conflict) or find_cause(exc, gexc.Aborted):
                return Retry.LATER
            return None

        try:
            return retrying(attempt, classify=classify, backoff=JOIN_BACKOFF)
        except RetriesExhausted as exc:
            raise ContentionError(
                f"{subject}: still contended after {exc.attempts} attempts"
            ) from exc.__cause__
        except (InvalidArgument, StoreUnavailable, ContentionError):
            raise
        except gexc.GoogleAPIError as exc:
            raise StoreUnavailable(f"{subject}: commit failed: {exc}") from exc


def _with(group: Group, part: Part, **changes: Any) -> list[dict[str, Any]] | None:
    """The group's parts with `part` changed (None when it is decided already, or gone)."""
    parts = group.parts  # one tuple: an unsplit group's is made anew at each read
    found = next((p for p in parts if (p.lo, p.hi) == (part.lo, part.hi)), None)
    if found is None or not found.pending:
        return None
    return [part_fields(replace(p, **changes) if p is found else p) for p in parts]


def _check_gid(gid: str) -> str:
    if not isinstance(gid, str) or not gid or "/" in gid:
        raise InvalidArgument(f"group id must be a non-empty string without '/', got {gid!r}")
    return gid
