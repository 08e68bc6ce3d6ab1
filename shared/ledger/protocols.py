"""What the ledger's callers call: one small protocol per caller, no Firestore in sight.

`Settler` (shared/settlement.py), the reconcile phases (shared/reconcile/) and the kinds
(shared/kinds/) depend on these, not on `Ledger`; `Ledger` satisfies every one of them
structurally (mypy checks it wherever a `Ledger` is passed). A test double implements only
the protocol its subject needs (tests/memory_ledger.py: the settle side). The exactly-once
contract these methods promise is one suite every implementation must pass
(tests/integration/test_ledger_contract.py).

    protocol          caller                                   methods
    SettleLedger      Settler                                  get, settle, mark_not_found,
                                                               clear_not_found, clock
    DeferLedger       reconcile.check.OperationCheck           defer
    AlertLedger       reconcile.stuck.StuckAlerts              mark_stuck_alerted,
                                                               mark_waiting_alerted
    DueLedger         reconcile.selection.due_pages            due_pending
    SweepLedger       reconcile.outbox_sweep.sweep             sweep_outbox
    SupersedeLedger   kinds.cancel.supersede                   record_superseded, deliver_outbox
    PushLedger        kinds.review.pipeline (ReviewDeps)       get, submissions + SupersedeLedger
    AdoptionLedger    reconcile.adoption                       PushLedger + the watermark
    ReviewReads       kinds.DeliveryServices (the comment)     reviews_for_push
    ReconcileLedger   reconcile.run.Reconciler                 all of the reconcile ones
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol

from shared.clock import Clock
from shared.ledger.records import Deliver, Operation, Settlement, Submission, SweepReport
from shared.ledger.results import ReviewWrites, Writeback
from shared.ledger.submissions import Claimed, Winner

__all__ = [
    "AdoptionLedger",
    "AlertLedger",
    "DeferLedger",
    "DueLedger",
    "OperationReads",
    "PushLedger",
    "ReconcileLedger",
    "ReviewReads",
    "ReviewWrites",
    "RunRecords",
    "SettleLedger",
    "SubmissionStore",
    "SupersedeLedger",
    "SweepLedger",
    "Writeback",
]


class OperationReads(Protocol):
    def get(self, name: str) -> Operation | None:
        """The operation named `name` (or by its bare id), None when unknown."""
        ...


class SettleLedger(OperationReads, Protocol):
    """What `Settler` calls: the conditional settle, the 404 marks, the ledger's clock."""

    @property
    def clock(self) -> Clock: ...

    def settle(
        self,
        name: str,
        status: str,
        by: str,
        *,
        error: str | Mapping[str, Any] | None = None,
        writeback: Writeback | None = None,
        outbox: Sequence[Any] | None = None,
        deliver: Deliver | None = None,
        expected: Operation | None = None,
        result_counts: Mapping[str, Any] | None = None,
        outcome: Mapping[str, Any] | None = None,
    ) -> Settlement:
        """Pending → `status` once, with the write-back and outbox items in that commit;
        `ALREADY_SETTLED` for every later call, `UNKNOWN` for an unknown name."""
        ...

    def mark_not_found(self, name: str, now: datetime) -> datetime | None:
        """The first of the consecutive 404s (`now` on a first one); None once settled."""
        ...

    def clear_not_found(self, name: str) -> bool: ...


class DeferLedger(Protocol):
    def defer(
        self, name: str, next_check_at: datetime, attempts: int, *, answer: str | None = None
    ) -> bool:
        """Push a pending operation's next check back; False when it is not pending."""
        ...


class AlertLedger(Protocol):
    def mark_stuck_alerted(self, name: str, now: datetime, window: timedelta) -> bool:
        """True exactly when this call recorded a new alert (once per window)."""
        ...

    def mark_waiting_alerted(self, name: str, now: datetime, window: timedelta) -> bool: ...


class DueLedger(Protocol):
    def due_pending(
        self, now: datetime, limit: int, start_after: Operation | None = None
    ) -> list[Operation]: ...


class SweepLedger(Protocol):
    def sweep_outbox(
        self,
        deliver: Deliver,
        older_than: timedelta = ...,
        limit: int = ...,
        stop: Callable[[], bool] | None = None,
    ) -> SweepReport: ...


class RunRecords(Protocol):
    def record_run(
        self,
        started_at: datetime,
        finished_at: datetime,
        counts: Mapping[str, Any],
        examined_ops: Sequence[str] = (),
        budget_s: float | None = None,
    ) -> str: ...


class SubmissionStore(Protocol):
    """One winning batch per push (shared/ledger/submissions.py)."""

    def get(self, tag: str) -> Submission | None: ...

    def claim(
        self,
        tag: str,
        *,
        delivery_id: str,
        attempt: str,
        lease_until: datetime,
        now: datetime,
        context: Mapping[str, Any] | None = None,
    ) -> Claimed: ...

    def take_over(
        self,
        stale: Submission,
        *,
        delivery_id: str,
        attempt: str,
        lease_until: datetime,
        now: datetime,
    ) -> Claimed: ...

    def release(self, tag: str, *, attempt: str, now: datetime) -> bool: ...

    def register_winner(
        self,
        tag: str,
        name: str,
        kind: str,
        context: Mapping[str, Any] | None,
        *,
        fallback_context: Mapping[str, Any] | None = None,
    ) -> Winner:
        """Register `name` as the push's batch unless another won first: exactly one wins."""
        ...


class SupersedeLedger(Protocol):
    def record_superseded(
        self,
        name: str,
        kind: str,
        context: Mapping[str, Any] | None,
        *,
        winner: str,
        outbox: Sequence[Any],
    ) -> Operation: ...

    def deliver_outbox(self, name: str, deliver: Deliver) -> int: ...


class PushLedger(SupersedeLedger, OperationReads, Protocol):
    @property
    def submissions(self) -> SubmissionStore: ...


class AdoptionLedger(PushLedger, Protocol):
    def adoption_watermark(self) -> datetime | None: ...

    def set_adoption_watermark(self, listed_at: datetime) -> None: ...


class ReviewReads(Protocol):
    def reviews_for_push(self, repo: str, sha: str, limit: int = 1000) -> list[dict[str, Any]]: ...


class ReconcileLedger(
    SettleLedger,
    DeferLedger,
    AlertLedger,
    DueLedger,
    SweepLedger,
    RunRecords,
    AdoptionLedger,
    Protocol,
):
    """Everything one reconcile run calls (`Reconciler` hands each phase its part)."""
