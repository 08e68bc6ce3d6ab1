"""The ledger's records as apps see them: read-only types, and the names a kind uses.

`Operation` (a settled or pending job: `name`, `kind`, `status`, `context`, `submission`
(its tag), …) is what a write-back and an outbox function receive; `OutboxItem` is what a
deliverer receives (`payload`, `lease`: `seconds_left()`, `still_owner()`); `DeliveryEnd`
is the delivery's `done` a handler passes to `Submitter.register` (`event.end`).

Generations: a job that supersedes an earlier one for the same submission (a re-run)
passes `generation_of=<that tag>` to `ctx.submitter`; `ORDER` in its context, set with
`order_of(pressed_at, delivery_id)`, orders presses, so an older one never becomes current.
"""

from __future__ import annotations

from shared.ledger import DeliveryEnd, LedgerError, Operation, OutboxItem
from shared.ledger.generations import ORDER, order_of
from shared.ledger.ids import submission_id
from shared.ledger.protocols import InstallationReads, PushLedger
from shared.ledger.submissions import Claim, Claimed
from shared.retry import Backoff

__all__ = [
    "ORDER",
    "Backoff",
    "Claim",
    "Claimed",
    "DeliveryEnd",
    "InstallationReads",
    "LedgerError",
    "Operation",
    "OutboxItem",
    "PushLedger",
    "order_of",
    "submission_id",
]
