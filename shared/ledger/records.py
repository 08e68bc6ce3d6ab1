"""The ledger's words, its stored records, and snapshot → record converters.

Collections and fields are named here and nowhere else in hookledger (see
docs/architecture.md, "Data model"), and so are the status words; records are
what callers hold. Here: the words, the records that read them (`Operation`, `Delivery` and
a delivery's answers: `Recorded`, `DeliveryRead`, `DeliveryEnd`, `Marked`) and the
converters (`*_from`). The record types that need no word (settlement's answer, outbox
items, leases, submissions) are in recordtypes.py and re-exported here: import every record
type from this module.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from shared.ledger import opnames as opnames  # the sibling module, not the package
from shared.ledger.recordtypes import (
    Deliver,
    DeliveryLease,
    ItemLease,
    OutboxItem,
    Settled,
    Settlement,
    Submission,
    SweepReport,
)
from shared.statuses import DeliveryStatus, InstallationStatus, OperationStatus

__all__ = [
    "ACTIVE",
    "ALL_REPOSITORIES",
    "BODIES",
    "BODY_DEDUPED_SOURCES",
    "CANCELLED",
    "CHECKS",
    "DEAD",
    "DELETED",
    "DELIVERIES",
    "DELIVERY_STATUSES",
    "DONE",
    "EXPIRED",
    "FAILED",
    "FINISHED_DELIVERY_STATUSES",
    "IGNORED",
    "INSTALLATIONS",
    "INSTALLATION_STATUSES",
    "LEASE",
    "LEASED_BY",
    "LEASED_UNTIL",
    "MAX_CHECKS",
    "NOT_FOUND_AT",
    "OLD_LEASED_BY",
    "OLD_LEASED_UNTIL",
    "OPERATIONS",
    "OPERATION_STATUSES",
    "OUTBOX_DUE_AT",
    "OUTCOME",
    "PENDING",
    "QUEUED",
    "SELECTED_REPOSITORIES",
    "SETTLED_BY",
    "STUCK_ALERTED_AT",
    "SUBMISSIONS",
    "SUCCEEDED",
    "SUPERSEDED",
    "SUSPENDED",
    "TERMINAL_STATUSES",
    "TRACE",
    "UNEXPIRING_BODY_EVENTS",
    "UNRESOLVED",
    "WAITING_ALERTED_AT",
    "WRITEBACK_ERROR",
    "Deliver",
    "Delivery",
    "DeliveryEnd",
    "DeliveryLease",
    "DeliveryRead",
    "DeliveryStatus",
    "InstallationStatus",
    "ItemLease",
    "Marked",
    "Operation",
    "OperationStatus",
    "OutboxItem",
    "Recorded",
    "Settled",
    "Settlement",
    "Submission",
    "SweepReport",
    "delivery_from",
    "lease_from",
    "operation_from",
    "operation_from_snapshot",
    "outbox_item_from",
    "submission_from",
]


OPERATIONS = "operations"
DELIVERIES = "deliveries"
SUBMISSIONS = "submissions"
INSTALLATIONS = "installations"
# `bodies/{source}:{sha256}`: which delivery first carried a body, for the sources that
# sign the body but not the delivery id (docs/architecture.md, "Replays").
BODIES = "bodies"
# GitHub signs only the body: its `X-GitHub-Delivery` is anyone's to choose, so a body seen
# before is a duplicate whatever its id. Gemini signs its id with the body.
BODY_DEDUPED_SOURCES = frozenset({"github"})
# Events whose body marker has no TTL: an installation's order cannot be rebuilt from
# GitHub's signed times (it reuses `updated_at`), and the installation itself never expires.
UNEXPIRING_BODY_EVENTS = frozenset({"installation", "installation_repositories"})

# The status words are enums in shared/statuses.py; here, their short names and which of
# them are terminal or finished (tests/unit/test_status_words.py fails on a copy elsewhere).
PENDING = OperationStatus.PENDING
SUCCEEDED, FAILED = OperationStatus.SUCCEEDED, OperationStatus.FAILED
CANCELLED, EXPIRED = OperationStatus.CANCELLED, OperationStatus.EXPIRED
SUPERSEDED = OperationStatus.SUPERSEDED
TERMINAL_STATUSES = frozenset({SUCCEEDED, FAILED, CANCELLED, EXPIRED})
OPERATION_STATUSES = tuple(OperationStatus)
SETTLED_BY = frozenset({"webhook", "reconcile"})
QUEUED, DONE, IGNORED = DeliveryStatus.QUEUED, DeliveryStatus.DONE, DeliveryStatus.IGNORED
UNRESOLVED, DEAD = DeliveryStatus.UNRESOLVED, DeliveryStatus.DEAD
DELIVERY_STATUSES = tuple(DeliveryStatus)
# A delivery in one of these is finished: nothing moves it back but an operator's replay
# (docs/architecture.md, "Delivery lease"). Only `queued` is not.
FINISHED_DELIVERY_STATUSES = frozenset(DELIVERY_STATUSES) - {QUEUED}
ACTIVE, SUSPENDED = InstallationStatus.ACTIVE, InstallationStatus.SUSPENDED
DELETED = InstallationStatus.DELETED
INSTALLATION_STATUSES = tuple(InstallationStatus)
# Which repositories an installation covers: every one of its account's, or a selection.
ALL_REPOSITORIES, SELECTED_REPOSITORIES = "all", "selected"
STUCK_ALERTED_AT = "stuck_alerted_at"
# The last `operation_waiting` alert: an interaction waiting on its caller (requires_action…).
WAITING_ALERTED_AT = "waiting_alerted_at"
# A delivery's worker lease: {attempt, until} (docs/architecture.md, "Delivery lease").
LEASE = "lease"
# An outbox item's lease: its holder's token and when it ends (docs/architecture.md,
# "Outbox"); items stored before these words carry the OLD_ ones, read the same way.
LEASED_BY, LEASED_UNTIL = "leased_by", "leased_until"
OLD_LEASED_BY, OLD_LEASED_UNTIL = "claimed_by", "claimed_until"
# Set instead of the results when the write-back failed for good (docs/architecture.md#settlement):
# the operation is terminal with the reason on it, never retried forever.
WRITEBACK_ERROR = "writeback_error"
# Reconcile's recent checks of a pending operation ({at, attempt, answer}), newest last.
CHECKS = "checks"
MAX_CHECKS = 10
# The first of consecutive 404s from Gemini for a pending operation; cleared when Gemini
# knows it again. A second 404 an interval later settles it `failed`, reason `gone`
# (docs/architecture.md, "Gone operations").
NOT_FOUND_AT = "not_found_at"
# What a settlement records beside its status: `partial`, `incomplete` (docs/architecture.md,
# "Settlement"); absent when there is nothing to say.
OUTCOME = "outcome"
# When the sweep should next look at the operation's outbox: the earliest due time of its
# open items; absent once every item is delivered or given up (docs/architecture.md, "Outbox").
OUTBOX_DUE_AT = "outbox_due_at"
# The traceparent of the span that registered an operation (shared/tracing).
TRACE = "trace"
# An item's group in a shared batch (groups.py); set on the item's operation when it joins.
GROUP = "group"


@dataclass(frozen=True)
class Operation:
    """An `operations` document as stored; times are aware UTC datetimes."""

    name: str
    doc_id: str
    kind: str
    status: str
    submitted_at: datetime
    attempts: int
    next_check_at: datetime | None
    writeback_done: bool
    context: dict[str, Any]
    settled_at: datetime | None = None
    settled_by: str | None = None
    error: Any = None
    expire_at: datetime | None = None
    outbox: tuple[OutboxItem, ...] = ()
    stuck_alerted_at: datetime | None = None
    # Set when a permanent write-back error settled the operation without its results.
    writeback_error: Any = None
    checks: tuple[dict[str, Any], ...] = ()
    # The tag of the push's submission this operation won (None: registered without one).
    submission: str | None = None
    # For a superseded batch: the push's winning operation.
    superseded_by: str | None = None
    outbox_due_at: datetime | None = None
    # A settled batch's rows per outcome (succeeded, failed, blocked, truncated).
    result_counts: dict[str, Any] | None = None
    not_found_at: datetime | None = None
    outcome: dict[str, Any] = field(default_factory=dict)
    waiting_alerted_at: datetime | None = None
    # The W3C traceparent of the span that registered it (shared/tracing), when traced.
    trace: str | None = None
    # An item of a shared batch: its group's id (shared/ledger/groups.py); None otherwise.
    group: str | None = None
    update_time: datetime | None = field(default=None, repr=False, compare=False)

    @property
    def pending(self) -> bool:
        return self.status == PENDING

    def to_dict(self) -> dict[str, Any]:
        """Every stored field (outbox items as dicts), for the CLI and logs."""
        return {
            "name": self.name,
            "doc_id": self.doc_id,
            "kind": self.kind,
            "status": self.status,
            "submitted_at": self.submitted_at,
            "settled_at": self.settled_at,
            "settled_by": self.settled_by,
            "attempts": self.attempts,
            "next_check_at": self.next_check_at,
            "writeback_done": self.writeback_done,
            "error": self.error,
            "context": self.context,
            "expire_at": self.expire_at,
            "stuck_alerted_at": self.stuck_alerted_at,
            "writeback_error": self.writeback_error,
            "checks": list(self.checks),
            "outbox_due_at": self.outbox_due_at,
            "outbox": [item.to_dict() for item in self.outbox],
            "submission": self.submission,
            "superseded_by": self.superseded_by,
            "result_counts": self.result_counts,
            "not_found_at": self.not_found_at,
            "outcome": self.outcome,
            "waiting_alerted_at": self.waiting_alerted_at,
            "trace": self.trace,
            "group": self.group,
        }


@dataclass(frozen=True)
class Delivery:
    """A `deliveries` document as stored."""

    source: str
    delivery_id: str
    doc_id: str
    event: str
    status: str
    attempts: int
    last_error: str | None
    received_at: datetime
    updated_at: datetime | None
    expire_at: datetime | None
    payload: Any = None
    payload_ref: str | None = None
    # The worker attempt that holds (or last held) it; see `DeliveryLease`.
    lease: DeliveryLease | None = None

    @property
    def finished(self) -> bool:
        return self.status in FINISHED_DELIVERY_STATUSES

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "delivery_id": self.delivery_id,
            "doc_id": self.doc_id,
            "event": self.event,
            "status": self.status,
            "attempts": self.attempts,
            "last_error": self.last_error,
            "received_at": self.received_at,
            "updated_at": self.updated_at,
            "expire_at": self.expire_at,
            "payload": self.payload,
            "payload_ref": self.payload_ref,
            "lease": self.lease.to_dict() if self.lease is not None else None,
        }


class Recorded(NamedTuple):
    """`deliveries.record`'s answer: `new` is False for a redelivery of a known id.

    `duplicate_of`: the body was first delivered under that other id; this delivery was
    recorded `ignored` in the same call (a replay, see `Deliveries.record`).

    `busy`: another attempt's lease on it is live, so this attempt took no lease and must
    not run it (`delivery` is the stored one, naming the holder).
    """

    new: bool
    delivery: Delivery
    busy: bool = False
    # With a submission claim asked for (`Ledger.record_and_claim`): where the push's
    # submission stands for this attempt (a `shared.ledger.submissions.Claimed`); None when
    # no claim was asked for or the delivery is not this attempt's to run.
    claimed: Any = None
    # The delivery whose body this one repeats under another id (a replay): this one was
    # recorded finished (`ignored`), never leased, and must not run.
    duplicate_of: str | None = None


class DeliveryRead(NamedTuple):
    """One read of a delivery: the record (None: there was none) and the version read, which
    a write conditional on this read checks (`Deliveries.read`, `DeliveryEnd.seen`)."""

    delivery: Delivery | None
    update_time: Any = None


@dataclass
class DeliveryEnd:
    """A worker attempt's end of its delivery, committed with another part's write (the
    push's winner, an operation's settlement): one commit where there were two.

    `applied` tells whether that commit carried it; False (the mark was refused, or the
    write never reached a commit) leaves the mark to the worker, as without it.
    """

    source: str
    delivery_id: str
    # The attempt holding the delivery's lease; None for an unleased run (its handler's
    # commit is what makes a second run harmless), which may mark any unfinished record.
    attempt: str | None
    status: str = "done"
    # An unleased run's delivery fields (`Deliveries.new_record`): created `status` in the
    # same commit when no record exists yet.
    new: Mapping[str, Any] | None = None
    # The worker's own read of the delivery: the first staging takes it instead of reading
    # again (its write conditional on that read); a retry after a conflict reads afresh.
    seen: DeliveryRead | None = None
    applied: bool = False
    # The body's SHA-256 when `new` holds no body bytes (a stored body: the envelope
    # sealed its digest): the commit that creates the record marks the body with it.
    body_sha256: str | None = None


class Marked(NamedTuple):
    """`mark`'s answer: `applied` is False when the status was left as stored, because the
    delivery is finished or the marking attempt no longer holds its lease."""

    applied: bool
    delivery: Delivery


def operation_from_snapshot(snapshot: Any) -> Operation:
    return operation_from(snapshot.to_dict() or {}, snapshot.id, snapshot.update_time)


def operation_from(data: Mapping[str, Any], doc_id: str, update_time: Any) -> Operation:
    name = data.get("name") or opnames.decode(doc_id)
    return Operation(
        name=name,
        doc_id=doc_id,
        kind=data.get("kind", ""),
        status=data.get("status", PENDING),
        submitted_at=data["submitted_at"],
        attempts=int(data.get("attempts", 0)),
        next_check_at=data.get("next_check_at"),
        writeback_done=bool(data.get("writeback_done", False)),
        context=dict(data.get("context") or {}),
        settled_at=data.get("settled_at"),
        settled_by=data.get("settled_by"),
        error=data.get("error"),
        expire_at=data.get("expire_at"),
        outbox=tuple(
            outbox_item_from(item, name, doc_id, index)
            for index, item in enumerate(data.get("outbox") or [])
        ),
        stuck_alerted_at=data.get(STUCK_ALERTED_AT),
        writeback_error=data.get(WRITEBACK_ERROR),
        result_counts=data.get("result_counts"),
        checks=tuple(dict(c) for c in data.get(CHECKS) or ()),
        submission=data.get("submission"),
        superseded_by=data.get("superseded_by"),
        outbox_due_at=data.get(OUTBOX_DUE_AT),
        trace=data.get(TRACE),
        not_found_at=data.get(NOT_FOUND_AT),
        outcome=dict(data.get(OUTCOME) or {}),
        waiting_alerted_at=data.get(WAITING_ALERTED_AT),
        group=data.get(GROUP),
        update_time=update_time,
    )


def outbox_item_from(item: Mapping[str, Any], name: str, doc_id: str, index: int) -> OutboxItem:
    return OutboxItem(
        operation=name,
        index=index,
        idempotency_key=f"{doc_id}:{index}",
        payload=item.get("payload"),
        delivered_at=item.get("delivered_at"),
        attempts=int(item.get("attempts", 0)),
        last_error=item.get("last_error"),
        next_attempt_at=item.get("next_attempt_at"),
        leased_until=item.get(LEASED_UNTIL, item.get(OLD_LEASED_UNTIL)),
        leased_by=item.get(LEASED_BY, item.get(OLD_LEASED_BY)),
        given_up_at=item.get("given_up_at"),
        given_up_reason=item.get("given_up_reason"),
    )


def delivery_from(data: Mapping[str, Any], doc_id: str) -> Delivery:
    return Delivery(
        source=data.get("source", doc_id.split(":", 1)[0]),
        delivery_id=data.get("delivery_id", ""),
        doc_id=doc_id,
        event=data.get("event", ""),
        status=data.get("status", "queued"),
        attempts=int(data.get("attempts", 0)),
        last_error=data.get("last_error"),
        received_at=data["received_at"],
        updated_at=data.get("updated_at"),
        expire_at=data.get("expire_at"),
        payload=data.get("payload"),
        payload_ref=data.get("payload_ref"),
        lease=lease_from(data.get(LEASE)),
    )


def lease_from(stored: Any) -> DeliveryLease | None:
    if not isinstance(stored, Mapping) or not stored.get("attempt") or stored.get("until") is None:
        return None
    return DeliveryLease(str(stored["attempt"]), stored["until"])


def submission_from(data: Mapping[str, Any], tag: str, update_time: Any = None) -> Submission:
    return Submission(
        tag=data.get("tag") or tag,
        operation=data.get("operation") or None,
        claimed_by=data.get("claimed_by"),
        claimed_at=data.get("claimed_at"),
        attempt=data.get("attempt"),
        lease_until=data.get("lease_until"),
        context=dict(data.get("context") or {}),
        expire_at=data.get("expire_at"),
        update_time=update_time,
        current=data.get("current") or None,
        generation=int(data.get("generation") or 0),
        open_since=data.get("open_since") or None,
        vacant=data.get("vacant") is True,
    )
