"""Generations of a push's check run: a "Re-run" makes a new batch that replaces the shown one.

The push's submission (`submissions/{push tag}`, whose id is the check run's `external_id`)
names the check run's current operation: `current` (absent: the push's own winner,
`operation`) and `generation` (0 for the push, +1 per re-run). A re-run registers its
batch through `Submissions.register_winner(generation_of=push tag)`, and this module
stages, into that ONE commit, the two writes that make it the current one:

- the push's submission: `current` = the new batch, `generation` + 1, on condition it is
  unchanged since read (two re-runs registering at once: the second re-reads and replaces
  the first, so the newest registered is shown);
- the previous current operation, if still pending: recorded `superseded` by the new
  batch, with the item that cancels its batch at Gemini, on condition it is unchanged
  since read (its settlement racing us: whichever commits first wins, the other re-reads;
  a settled previous operation stays as it is, in history).

Generations are ordered by the press, not by registration: a re-run's context carries
its `generation_order` (`order_of`: when its delivery reached the ingress, then its id),
and a batch whose press is OLDER than the current operation's (an orphan adopted after a
newer re-run registered) never becomes current: it is registered `superseded` by the
current one, with the item that cancels it, in that same commit (`NextGeneration.newer`).

Timeline (docs/architecture.md, "Re-run")::

    push:  winner B1 ── current B1 (gen 0) ── check run #7 completed from B1
    rerun: claim R ─ create B2 ─ ONE commit: B2 pending, R decided, current B2 (gen 1),
                                             B1 superseded if still pending
    B1's late finish: not current → publishes nothing;  B2's start: #7 → in_progress
    older press R0's orphan B0 adopted now: order(R0) < order(R) → B0 superseded by B2
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from shared.ledger.commits import Commits
from shared.ledger.errors import InvalidArgument
from shared.ledger.ids import operation_id, submission_id
from shared.ledger.records import OUTBOX_DUE_AT, PENDING, SUBMISSIONS, SUPERSEDED, submission_from

# The context field that orders a push's generations by press (`order_of`); the push's own
# operation has none and sorts first.
ORDER = "generation_order"


def order_of(pressed_at: datetime, delivery_id: str) -> str:
    """A generation's order as a string that sorts like (pressed_at, delivery_id)."""
    stamp = pressed_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return f"{stamp} {delivery_id}"


def superseded_fields(
    winner: str, now: datetime, outbox: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """The fields that record an operation `superseded` by `winner`, with `outbox` (what
    cancels its batch) due now."""
    return {
        "status": SUPERSEDED,
        "superseded_by": winner,
        "settled_at": now,
        "next_check_at": None,
        "writeback_done": False,
        "outbox": [{"payload": dict(item), "delivered_at": None} for item in outbox],
        OUTBOX_DUE_AT: now,
    }


@dataclass(frozen=True)
class NextGeneration:
    """The writes that make `name` the check run's current operation, as read just now."""

    ref: Any
    snapshot: Any
    generation: int
    previous: str
    previous_ref: Any = None
    previous_snapshot: Any = None  # set only when the previous operation is pending
    # The current operation when its press is newer than this batch's: this batch is then
    # superseded by it, and nothing else is written (`write` must not be called).
    newer: str | None = None

    def write(
        self,
        commits: Commits,
        txn: Any,
        name: str,
        now: datetime,
        superseded_outbox: Sequence[Mapping[str, Any]],
    ) -> None:
        """Stage both writes into `txn`; `superseded_outbox`: the items recorded on a
        pending previous operation (what cancels its batch)."""
        txn.update(
            self.ref,
            {"current": name, "generation": self.generation},
            option=commits.unchanged_since(self.snapshot),
        )
        if self.previous_snapshot is None:
            return
        raw = self.previous_snapshot.to_dict() or {}
        fields = superseded_fields(name, now, superseded_outbox)
        fields["outbox"] = [*(raw.get("outbox") or []), *fields["outbox"]]
        txn.update(
            self.previous_ref,
            fields,
            option=commits.unchanged_since(self.previous_snapshot),
        )

    def changed(self, commits: Commits) -> bool:
        """Whether a document this read since changed (a refused commit: re-read)."""
        if commits.read(self.ref, self.ref.id).update_time != self.snapshot.update_time:
            return True
        if self.previous_snapshot is None:
            return False
        seen = self.previous_snapshot.update_time
        return bool(commits.read(self.previous_ref, self.previous_ref.id).update_time != seen)


def next_generation(
    commits: Commits, push_tag: str, operations: Any, order: str | None = None
) -> NextGeneration:
    """Read the push's submission and its current operation: what a re-run's commit writes.

    `order`: the re-run's press (`order_of`); when the current operation's press is newer,
    the answer's `newer` names it. `InvalidArgument` when the push has no winner yet."""
    ref = commits.collection(SUBMISSIONS).document(submission_id(push_tag))
    snapshot = commits.read(ref, f"submission {push_tag}")
    stored = submission_from(snapshot.to_dict() or {}, push_tag) if snapshot.exists else None
    if stored is None or not stored.operation:
        raise InvalidArgument(f"submission {push_tag}: no submission to re-run")
    data = snapshot.to_dict() or {}
    previous = data.get("current") or stored.operation
    generation = int(data.get("generation") or 0) + 1
    previous_ref = operations.collection().document(operation_id(previous))
    previous_snapshot = commits.read(previous_ref, previous)
    fields = (previous_snapshot.to_dict() or {}) if previous_snapshot.exists else {}
    status = fields.get("status")
    shown = (fields.get("context") or {}).get(ORDER)
    if order and isinstance(shown, str) and shown > order:  # a later press shows already
        return NextGeneration(ref, snapshot, generation - 1, previous, newer=previous)
    return NextGeneration(
        ref,
        snapshot,
        generation,
        previous,
        previous_ref,
        previous_snapshot if status == PENDING else None,
    )
