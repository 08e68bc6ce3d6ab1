"""The ledger's record types that name none of its words (no collection, field or status).

Settlement's answer (`Settlement`, `Settled`), an outbox item and the lease a deliverer holds
on it (`OutboxItem`, `ItemLease`, `Deliver`, `SweepReport`), a delivery's lease
(`DeliveryLease`) and a push's submission (`Submission`). records.py builds on them and
re-exports each: import them from `shared.ledger.records`, as everyone does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, NamedTuple


class Settlement(StrEnum):
    """What `settle` did."""

    SETTLED = "settled"
    ALREADY_SETTLED = "already_settled"
    UNKNOWN = "unknown"


class Settled(NamedTuple):
    """`Operations.settle`'s answer: what it did, and whether the write its `also` staged
    went into the settling commit (only ever with `SETTLED`)."""

    result: Settlement
    also_applied: bool = False


@dataclass(frozen=True)
class ItemLease:
    """The claim a deliverer holds on one outbox item while it delivers it.

    `seconds_left()` is measured on the ledger's clock up to `expires_at`; `still_owner()`
    reads the operation and is True while the item is still claimed by `token`, unexpired,
    and neither delivered nor given up. A deliverer asks it right before its external call.
    """

    token: str
    expires_at: datetime
    clock: Callable[[], datetime] = field(repr=False)
    check: Callable[[], bool] = field(repr=False)

    def seconds_left(self) -> float:
        return (self.expires_at - self.clock()).total_seconds()

    def still_owner(self) -> bool:
        return self.seconds_left() > 0 and self.check()


@dataclass(frozen=True)
class OutboxItem:
    """One side effect to deliver; `idempotency_key` is stable across retries and crashes.

    `attempts` counts failed deliveries; `next_attempt_at` is when the sweep may try again;
    `leased_by` (a token new per lease) and `leased_until` are the lease of whoever is
    delivering it now (`claimed_by` and `claimed_until`, their former names, still read);
    `given_up_at` and `given_up_reason` are set once it failed for good.
    `lease` is set on the item handed to a deliverer (never stored).
    """

    operation: str
    index: int
    idempotency_key: str
    payload: Any
    delivered_at: datetime | None = None
    attempts: int = 0
    last_error: str | None = None
    next_attempt_at: datetime | None = None
    leased_until: datetime | None = None
    leased_by: str | None = None
    given_up_at: datetime | None = None
    given_up_reason: str | None = None
    lease: ItemLease | None = field(default=None, repr=False, compare=False)

    @property
    def open(self) -> bool:
        """Neither delivered nor given up: the sweep still owes it an attempt."""
        return self.delivered_at is None and self.given_up_at is None

    @property
    def claimed_until(self) -> datetime | None:
        """`leased_until`'s former name, kept for apps that read it."""
        return self.leased_until

    @property
    def claimed_by(self) -> str | None:
        """`leased_by`'s former name, kept for apps that read it."""
        return self.leased_by

    def to_dict(self) -> dict[str, Any]:
        return {
            "idempotency_key": self.idempotency_key,
            "payload": self.payload,
            "delivered_at": self.delivered_at,
            "attempts": self.attempts,
            "last_error": self.last_error,
            "next_attempt_at": self.next_attempt_at,
            "leased_until": self.leased_until,
            "leased_by": self.leased_by,
            "given_up_at": self.given_up_at,
            "given_up_reason": self.given_up_reason,
        }


@dataclass(frozen=True)
class DeliveryLease:
    """One attempt's hold on a delivery: until `until`, no other attempt may run it.

    Expired is derived (`live(now)`), never stored; a finished mark sets `until` to the
    mark's time, so the attempt that ran last stays on record.
    """

    attempt: str
    until: datetime

    def live(self, now: datetime) -> bool:
        return now < self.until

    def to_dict(self) -> dict[str, Any]:
        return {"attempt": self.attempt, "until": self.until}


@dataclass(frozen=True)
class Submission:
    """A `submissions` document: who holds a push's create-once action, and what won.

    `claimed_by` is the delivery, `attempt` the run that holds the claim until
    `lease_until`; `operation` is the winning batch, set once; `context` is the push's
    own context (paths, refused files), so whoever registers the winner uses it.
    `current` and `generation`: the operation its check run shows, after "Re-run"s
    (generations.py); `current_operation` is the one to show either way. `open_since`:
    when the claims that may have left a batch the ledger does not know began (None once
    nothing can be missing, or on a document from before it existed; submissions.py).
    `vacant`: no batch exists for it and none is being made (its last holder's create was
    refused outright), so the next holder needs no listing before it creates.
    """

    tag: str
    operation: str | None
    claimed_by: str | None
    claimed_at: datetime | None
    attempt: str | None = None
    lease_until: datetime | None = None
    context: dict[str, Any] = field(default_factory=dict)
    expire_at: datetime | None = None
    update_time: datetime | None = field(default=None, repr=False, compare=False)
    current: str | None = None
    generation: int = 0
    open_since: datetime | None = None
    vacant: bool = False

    @property
    def current_operation(self) -> str | None:
        """The operation the push's check run shows: the latest re-run's, else the winner."""
        return self.current or self.operation

    def leased(self, now: datetime) -> bool:
        """True while the holder's lease runs (an unleased claim is never live)."""
        return isinstance(self.lease_until, datetime) and self.lease_until > now


@dataclass
class SweepReport:
    """What one outbox sweep did, by operation name.

    `completed`: every item delivered (or given up); `failed`: an item's delivery raised
    (retried later, with backoff, unless it was given up); `skipped`: an item was not yet
    due or under another caller's lease; `stopped`: the caller's budget ran out before
    these due operations were tried (the next sweep takes them first).
    """

    completed: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    stopped: list[str] = field(default_factory=list)


Deliver = Callable[[OutboxItem], None]
"""`deliver(item)`: perform one side effect, passing `item.idempotency_key` along."""
