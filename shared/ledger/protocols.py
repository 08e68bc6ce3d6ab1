"""What the ledger's callers call: one small protocol per caller, no Firestore in sight.

`Settler` (shared/settlement/), the reconcile phases (shared/reconcile/) and the kinds
(shared/kinds.py) depend on these, not on `Ledger`. A phase that uses one part
of the ledger takes that part (`ledger.operations`, `ledger.outbox`, `ledger.runs`) typed
by its part protocol; a caller that spans parts takes the ledger typed by a protocol whose
members are those parts. `Ledger` and its parts satisfy them structurally (mypy checks it
where reconcile and the runtime wire them). A test double implements only the protocol its
subject needs (tests/memory_ledger.py: the settle side). The exactly-once contract these
methods promise is one suite every implementation must pass
(tests/integration/test_ledger_contract.py).

    protocol          satisfied by   caller                         calls
    SettleLedger      Ledger         Settler                        settle, clock,
                                                                    operations: OperationMarks
    DeferLedger       Operations     reconcile.check                defer
    AlertLedger       Operations     reconcile.stuck                mark_*_alerted
    DueLedger         Operations     reconcile.selection            due_pending
    SweepLedger       Outbox         reconcile.outbox_sweep         sweep
    RunRecords        Runs           reconcile.run                  record
    SupersedeLedger   Ledger         settlement.cancel.supersede    operations.record_superseded,
                                                                    outbox.deliver
    PushLedger        Ledger         submission.Submitter           + operations.get, submissions,
                                                                    installations.get
    AdoptionLedger    Ledger         reconcile.adoption             + submissions.open_claims,
                                                                    close_open, watermark
    DeliveryLedger    Ledger         kinds.DeliveryServices         results.find,
                                                                    submissions.get (re-runs)
    ReconcileLedger   Ledger         reconcile.run.Reconciler       all of the reconcile ones
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol

from shared.clock import Clock
from shared.ledger.group_rows import GroupRows
from shared.ledger.groups import Groups
from shared.ledger.installations import Installation
from shared.ledger.records import (
    Deliver,
    DeliveryEnd,
    Operation,
    Settlement,
    Submission,
    SweepReport,
)
from shared.ledger.results import Writeback, Writes
from shared.ledger.submissions import Claimed, OpenClaim, Winner

__all__ = [
    "AdoptionLedger",
    "AdoptionSubmissions",
    "AlertLedger",
    "DeferLedger",
    "DeliveryLedger",
    "DueLedger",
    "InstallationReads",
    "OperationMarks",
    "OperationReads",
    "OutboxDelivery",
    "PushLedger",
    "PushOperations",
    "ReconcileLedger",
    "ReconcileOperations",
    "ReconcileOutbox",
    "ResultReads",
    "ResultWrites",
    "RunRecords",
    "SettleLedger",
    "SubmissionStore",
    "SupersedeLedger",
    "SupersedeOperations",
    "SweepLedger",
    "WatermarkStore",
    "Writeback",
]


class OperationReads(Protocol):
    def get(self, name: str) -> Operation | None:
        """The operation named `name` (or by its bare id), None when unknown."""
        ...


class OperationMarks(OperationReads, Protocol):
    """The 404 marks settlement keeps on a pending operation."""

    def mark_not_found(self, name: str, now: datetime) -> datetime | None:
        """The first of the consecutive 404s (`now` on a first one); None once settled."""
        ...

    def clear_not_found(self, name: str) -> bool: ...


class SettleLedger(Protocol):
    """What `Settler` calls: the conditional settle, the 404 marks, the ledger's clock."""

    @property
    def clock(self) -> Clock: ...

    @property
    def operations(self) -> OperationMarks: ...

    @property
    def submissions(self) -> SubmissionReads:  # an item of a shared batch: its group's batch
        ...

    @property
    def groups(self) -> Groups: ...  # an item of a shared batch: its group's parts

    @property
    def group_rows(self) -> GroupRows: ...  # a group batch's rows, kept per item

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
        end: DeliveryEnd | None = None,
    ) -> Settlement:
        """Pending → `status` once, with the write-back, the outbox items and `end` (the
        delivery's mark, when its attempt holds the lease) in that commit;
        `ALREADY_SETTLED` for every later call, `UNKNOWN` for an unknown name."""
        ...


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


class OutboxDelivery(Protocol):
    def deliver(self, name: str, deliver: Deliver) -> int:
        """Claim and deliver each undelivered item of `name`; how many were delivered now."""
        ...


class SweepLedger(Protocol):
    def sweep(
        self,
        deliver: Deliver,
        older_than: timedelta = ...,
        limit: int = ...,
        stop: Callable[[], bool] | None = None,
    ) -> SweepReport: ...


class RunRecords(Protocol):
    def record(
        self,
        started_at: datetime,
        finished_at: datetime,
        counts: Mapping[str, Any],
        examined_ops: Sequence[str] = (),
        budget_s: float | None = None,
    ) -> str: ...


class WatermarkStore(Protocol):
    """The old adoption's watermark: read for its last listing, then cleared."""

    def get(self) -> datetime | None: ...

    def clear(self) -> None: ...


class SubmissionReads(Protocol):
    def get(self, tag: str) -> Submission | None: ...


class SubmissionStore(SubmissionReads, Protocol):
    """One winning batch per push (shared/ledger/submissions.py)."""

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

    def store_context(
        self, tag: str, context: Mapping[str, Any], *, attempt: str, now: datetime
    ) -> Claimed: ...

    def release(
        self, tag: str, *, attempt: str, now: datetime, created_nothing: bool = False
    ) -> bool: ...

    def register_winner(
        self,
        tag: str,
        name: str,
        kind: str,
        context: Mapping[str, Any] | None,
        *,
        fallback_context: Mapping[str, Any] | None = None,
        end: DeliveryEnd | None = None,
        outbox: Sequence[Mapping[str, Any]] = (),
        generation_of: str | None = None,
        superseded_outbox: Callable[[str], Sequence[Mapping[str, Any]]] = ...,
    ) -> Winner:
        """Register `name` as the push's batch unless another won first: exactly one wins.
        `outbox`: items recorded on the pending operation in the same commit;
        `generation_of`: a re-run of that push's check run (ledger/generations.py)."""
        ...


class SupersedeOperations(Protocol):
    def record_superseded(
        self,
        name: str,
        kind: str,
        context: Mapping[str, Any] | None,
        *,
        winner: str,
        outbox: Sequence[Any],
    ) -> Operation: ...


class SupersedeLedger(Protocol):
    @property
    def operations(self) -> SupersedeOperations: ...

    @property
    def outbox(self) -> OutboxDelivery: ...


class PushOperations(SupersedeOperations, OperationReads, Protocol):
    pass


class InstallationReads(Protocol):
    """GitHub App installations as recorded (shared/ledger/installations.py)."""

    def get(self, installation_id: int) -> Installation | None:
        """None when no event about the installation was recorded."""
        ...


class PushLedger(SupersedeLedger, Protocol):
    @property
    def operations(self) -> PushOperations: ...

    @property
    def submissions(self) -> SubmissionStore: ...

    @property
    def installations(self) -> InstallationReads: ...

    @property
    def groups(self) -> Groups: ...  # shared batches (shared/sharing/join.py)


class AdoptionSubmissions(SubmissionStore, Protocol):
    def open_claims(self, before: datetime, limit: int) -> list[OpenClaim]:
        """Claims whose batch the ledger may not know, lease ended before `before`."""
        ...

    def close_open(self, claim: OpenClaim) -> bool:
        """Nothing is missing for `claim` (a complete listing found none): stop looking."""
        ...


class AdoptionLedger(PushLedger, Protocol):
    @property
    def submissions(self) -> AdoptionSubmissions: ...

    @property
    def watermark(self) -> WatermarkStore: ...


ResultWrites = Writes


class ResultReads(Protocol):
    def get(self, collection: str, document: str) -> dict[str, Any] | None: ...

    def find(
        self, collection: str, limit: int = 1000, order_by: str | None = None, **equals: Any
    ) -> list[dict[str, Any]]: ...


class DeliveryLedger(Protocol):
    @property
    def results(self) -> ResultReads: ...

    @property
    def operations(self) -> OperationReads: ...

    @property
    def submissions(self) -> SubmissionReads: ...


class ReconcileOperations(
    OperationMarks, DeferLedger, AlertLedger, DueLedger, PushOperations, Protocol
):
    pass


class ReconcileOutbox(OutboxDelivery, SweepLedger, Protocol):
    pass


class ReconcileLedger(SettleLedger, AdoptionLedger, Protocol):
    """Everything one reconcile run calls (`Reconciler` hands each phase its part)."""

    @property
    def operations(self) -> ReconcileOperations: ...

    @property
    def submissions(self) -> AdoptionSubmissions: ...

    @property
    def outbox(self) -> ReconcileOutbox: ...

    @property
    def runs(self) -> RunRecords: ...
