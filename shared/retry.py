"""Bounded retries with jittered exponential backoff (Firestore transactions, reconcile).

The official emulator (and Firestore Standard edition) lock pessimistically: a losing
transaction waits for the lock (~2 s on the emulator) and then fails with ABORTED. The
stock client retries at once, which only queues it behind the winner again; `retrying`
instead waits a jittered, growing delay, and gives up after a fixed number of attempts.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import TypeVar

from shared.errors import TransientError

T = TypeVar("T")

# Past this many doublings every sane cap has been reached.
_MAX_DOUBLINGS = 64


class Retry(Enum):
    """How `classify` says an exception may be retried."""

    NOW = "now"  # the data changed under us: re-read at once
    LATER = "later"  # contention: back off first


@dataclass(frozen=True)
class Backoff:
    """Capped exponential backoff with jitter; the one formula every retry here uses.

    The n-th wait (0-based) has ceiling c = min(cap_s, first_s · 2ⁿ) and is drawn from
    [c · (1 - jitter), c]: `jitter` is the fraction of the delay that is random (0: none,
    0.5: the classic "half fixed, half random", 1: full jitter). `attempts` bounds
    `retrying`; callers that only ask for `delay` (reconcile's per-operation backoff)
    never read it.
    """

    attempts: int = 8
    first_s: float = 0.05
    cap_s: float = 2.0
    jitter: float = 0.5

    def __post_init__(self) -> None:
        if self.attempts < 1 or self.first_s < 0 or self.cap_s < self.first_s:
            raise ValueError(f"bad backoff {self!r}: need attempts ≥ 1 and 0 ≤ first_s ≤ cap_s")
        if not 0.0 <= self.jitter <= 1.0:
            raise ValueError(f"bad backoff {self!r}: jitter must be a fraction in 0..1")

    def ceiling(self, retry: int) -> float:
        """The longest wait before retry number `retry` (0-based): min(cap, first · 2ⁿ)."""
        # Capping the exponent keeps 2ⁿ a float-sized number however large `retry` grows.
        return min(self.cap_s, self.first_s * 2 ** min(max(retry, 0), _MAX_DOUBLINGS))

    def delay(self, retry: int, rand: Callable[[], float] = random.random) -> float:
        """Seconds to wait before retry number `retry` (0-based), in [c · (1 - jitter), c]."""
        ceiling = self.ceiling(retry)
        return ceiling * (1.0 - self.jitter) + ceiling * self.jitter * rand()


class RetriesExhausted(TransientError):
    """Every attempt failed with a retryable error; `__cause__` is the last one.

    Transient: the budget of this call ran out, and a later call may still succeed."""

    def __init__(self, attempts: int) -> None:
        super().__init__(f"gave up after {attempts} attempts")
        self.attempts = attempts


def find_cause(
    exc: BaseException, kind: type[BaseException] | tuple[type[BaseException], ...]
) -> BaseException | None:
    """The first exception of type(s) `kind` in `exc`'s cause/context chain, or None."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, kind):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def retrying(
    attempt: Callable[[], T],
    *,
    classify: Callable[[Exception], Retry | None],
    backoff: Backoff,
    sleep: Callable[[float], None] = time.sleep,
    rand: Callable[[], float] = random.random,
    on_retry: Callable[[int, Retry, float, Exception], None] | None = None,
) -> T:
    """Call `attempt` until it returns; re-raise what `classify` maps to None.

    `on_retry(attempt_number, kind, delay_s, exc)` runs before each retry (for logs and
    counters). After `backoff.attempts` retryable failures raises `RetriesExhausted`.
    """
    retries_later = 0
    for number in range(1, backoff.attempts + 1):
        try:
            return attempt()
        except Exception as exc:
            kind = classify(exc)
            if kind is None:
                raise
            if number == backoff.attempts:
                raise RetriesExhausted(number) from exc
            delay = 0.0
            if kind is Retry.LATER:
                delay = backoff.delay(retries_later, rand)
                retries_later += 1
            if on_retry is not None:
                on_retry(number, kind, delay, exc)
            if delay:
                sleep(delay)
    raise AssertionError("unreachable: the loop returns or raises")  # pragma: no cover
