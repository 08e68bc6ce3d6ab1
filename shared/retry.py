"""The one retry policy: what may be retried, how long to wait, and when to stop.

    RETRYABLE_STATUSES / retryable_status(code)  the HTTP answers a later attempt may get past
    parse_retry_after(value, now)                 a `Retry-After` header, in seconds
    Backoff                                       the one jittered-exponential formula
    RetryPolicy                                   statuses + backoff + attempts + the longest
                                                  server-asked wait; GitHub, Gemini (our calls
                                                  and the SDK's options) and Cloud Tasks use it
    retrying(attempt, classify, backoff)          the loop (Firestore transactions)

Whether an *exception* is worth a retry is `shared.errors.retryable` (the one error
tree); a client maps the answers it gets onto that tree with `RetryPolicy.retryable`.
A rule a service documents differently is a parameter named after that document
(`RetryPolicy.rate_limited`, e.g. GitHub's "Rate limits for the REST API": 403 with
`retry-after` or `x-ratelimit-remaining: 0`), never a second status set.

Firestore transactions: the official emulator (and Firestore Standard edition) lock
pessimistically: a losing transaction waits for the lock (~2 s on the emulator) and then
fails with ABORTED. The stock client retries at once, which only queues it behind the
winner again; `retrying` instead waits a jittered, growing delay, and gives up after a
fixed number of attempts.
"""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import TypeVar

from shared.errors import TransientError

T = TypeVar("T")

# Past this many doublings every sane cap has been reached.
_MAX_DOUBLINGS = 64

# Answers a later attempt may get past (RFC 9110): 408 Request Timeout, 429 Too Many
# Requests, and any 5xx (the server's trouble, not the request's). Defined here only.
RETRYABLE_STATUSES: frozenset[int] = frozenset({408, 429, *range(500, 600)})


def retryable_status(code: int) -> bool:
    """Whether an HTTP answer `code` is worth another attempt (`RETRYABLE_STATUSES`)."""
    return code in RETRYABLE_STATUSES


def server_error(code: int) -> bool:
    """A 5xx: the server failed to answer (what marks a request's span an error)."""
    return 500 <= code <= 599


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait per a `Retry-After` value (RFC 9110 section 10.2.3: delay-seconds or
    an HTTP-date, counted from `now`, a Unix time); None when absent or unreadable, or a
    date with no `now` to count from. Never negative."""
    if value is None:
        return None
    text = value.strip()
    if text.isdigit():
        return float(text)
    if now is None:
        return None
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # an HTTP-date is always GMT
        return None
    return max(0.0, when.timestamp() - now)


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


def _never(code: int, headers: Mapping[str, str]) -> bool:
    return False


@dataclass(frozen=True)
class RetryPolicy:
    """One client's retries: which answers, how many attempts, how long between them.

    `backoff.attempts` bounds the attempts of one call (the first included); the wait
    before retry n is `backoff.delay(n)` (jittered), or the server's own delay
    (`Retry-After`, `RetryInfo.retryDelay`) when it asked for longer. A server asking for
    more than `max_wait_s` is not waited for: the call ends transient, and the caller's
    own schedule (a queue, reconcile) comes back later. A caller with a deadline also
    stops when a wait and one more attempt no longer fit (`fits`).

    `rate_limited(code, headers)` is a service's documented rule for answers outside
    `statuses` that still mean "slow down" (named after its document where it is built).
    """

    backoff: Backoff = field(
        default_factory=lambda: Backoff(attempts=3, first_s=0.5, cap_s=4.0, jitter=0.5)
    )
    statuses: frozenset[int] = RETRYABLE_STATUSES
    max_wait_s: float = 30.0
    rate_limited: Callable[[int, Mapping[str, str]], bool] = _never

    @property
    def attempts(self) -> int:
        return self.backoff.attempts

    def retryable(self, code: int, headers: Mapping[str, str] | None = None) -> bool:
        """Whether answer `code` (with its `headers`) is worth another attempt."""
        return code in self.statuses or self.rate_limited(code, headers or {})

    def wait_s(
        self,
        retry: int,
        asked_s: float | None = None,
        rand: Callable[[], float] = random.random,
    ) -> float | None:
        """Seconds to wait before retry number `retry` (0-based): the backoff's delay, or
        the server's `asked_s` when longer; None when that is over `max_wait_s`."""
        delay = self.backoff.delay(retry, rand)
        if asked_s is None:
            return delay
        if asked_s > self.max_wait_s:
            return None
        return max(delay, asked_s)

    def fits(self, wait_s: float, attempt_s: float, left_s: float | None) -> bool:
        """Whether waiting `wait_s` and one attempt of `attempt_s` fit in `left_s`."""
        return left_s is None or wait_s + attempt_s <= left_s


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
