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

Timeline (docs/architecture.md, "Re-run")::

    push:  winner B1 ── current B1 (gen 0) ── check run #7 completed from B1
    rerun: claim R ─ create B2 ─ ONE commit: B2 pending, R decided, current B2 (gen 1),
                                             B1 superseded if still pending
    B1's late finish: not current → publishes nothing;  B2's start: #7 → in_progress
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from shared.ledger.commits import Commits
from shared.ledger.errors import InvalidArgument
from shared.ledger.ids import operation_id, submission_id
from shared.ledger.records import OUTBOX_DUE_AT, PENDING, SUBMISSIONS, SUPERSEDED, submission_from


@dataclass(frozen=True)
class NextGeneration:
    """The writes that make `name` the check run's current operation, as read just now."""

    ref: Any
    snapshot: Any
    generation: int
    previous: str
    previous_ref: Any = None
    previous_snapshot: Any = None  # set only when the previous operation is pending

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
        added = [{"payload": dict(item), "delivered_at": None} for item in superseded_outbox]
        outbox = [*(raw.get("outbox") or []), *added]
        txn.update(
            self.previous_ref,
            {
                "status": SUPERSEDED,
                "superseded_by": name,
                "settled_at": now,
                "next_check_at": None,
                "writeback_done": False,
                "outbox": outbox,
                OUTBOX_DUE_AT: now,
            },
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


def next_generation(commits: Commits, push_tag: str, operations: Any) -> NextGeneration:
    """Read the push's submission and its current operation: what a re-run's commit writes.

    `InvalidArgument` when the push has no winner yet (nothing to re-run)."""
    ref = commits.collection(SUBMISSIONS).document(submission_id(push_tag))
    snapshot = commits.read(ref, f"submission {push_tag}")
    stored = submission_from(snapshot.to_dict() or {}, push_tag) if snapshot.exists else None
    if stored is None or not stored.operation:
        raise InvalidArgument(f"submission {push_tag}: no review to re-run")
    data = snapshot.to_dict() or {}
    previous = data.get("current") or stored.operation
    generation = int(data.get("generation") or 0) + 1
    previous_ref = operations.collection().document(operation_id(previous))
    previous_snapshot = commits.read(previous_ref, previous)
    status = (previous_snapshot.to_dict() or {}).get("status") if previous_snapshot.exists else None
    return NextGeneration(
        ref,
        snapshot,
        generation,
        previous,
        previous_ref,
        previous_snapshot if status == PENDING else None,
    )
