"""How the outbox treats its items: how long a delivery's lease holds, how a failed item
backs off, when it alerts and when it is given up (outbox.py applies it)."""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

from shared.ledger.errors import InvalidArgument
from shared.retry import Backoff

CALLS_PER_LEASE = 3  # a lease holds at least this many of a deliverer's longest calls


@dataclass(frozen=True)
class OutboxPolicy:
    """How long a lease holds, how failed items back off, when one alerts and is given up.

    `call_timeout` is the longest single external call a deliverer makes (its HTTP
    timeout); the lease must hold at least `CALLS_PER_LEASE` of them: look, post, clean up.
    """

    lease: timedelta = timedelta(minutes=5)
    backoff: Backoff = field(default_factory=lambda: Backoff(attempts=1, first_s=30, cap_s=1800))
    alert_after: int = 5
    give_up_after: int = 48  # about a day of failures at the 30 min cap
    call_timeout: timedelta = timedelta(seconds=30)
    rand: Callable[[], float] = random.random
    new_token: Callable[[], str] = field(default=lambda: uuid.uuid4().hex, repr=False)

    def __post_init__(self) -> None:
        if self.alert_after < 1 or self.give_up_after < 1 or self.call_timeout <= timedelta(0):
            raise InvalidArgument(
                f"bad outbox policy: need alert_after ≥ 1, give_up_after ≥ 1, call_timeout > 0: "
                f"{self}"
            )
        if self.lease < CALLS_PER_LEASE * self.call_timeout:
            raise InvalidArgument(
                f"bad outbox policy: lease {self.lease} must hold at least {CALLS_PER_LEASE} "
                f"calls of {self.call_timeout} (the deliverer's HTTP timeout)"
            )
