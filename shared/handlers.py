"""The handler registry: plain functions registered per (source, event).

    from shared.handlers import handler, Event, Done, HandlerContext

    @handler("github", "issues")
    def on_issue(event: Event, ctx: HandlerContext) -> Done:
        ...
        return Done("labelled")

The ingress enqueues an event only when a handler is registered for it (anything else
is answered 200 `ignored`); the worker runs the handler with the verified event and a
`HandlerContext` (config, ledger, clients, clock). A handler reports its outcome by
returning `Done` / `Ignored` / `Unresolved` or by raising from the one error tree
(shared/errors.py); the worker reads `errors.retryable(exc)`:

    HandlerError        (= errors.HookledgerError) what a handler raises on purpose
    ├── RetryableError  (= errors.TransientError) timeout, 429/5xx upstream: 5xx, retried
    ├── PermanentError  (errors.PermanentError) never succeeds: recorded `dead`, answered 2xx
    └── Deferred        (errors.Deferred) not yet, not a failure: `Deferred(reason,
                        after_s=60)` runs the delivery again as a new task about `after_s`
                        later (1 s .. 1 h), spending none of its retries

Every module's errors sit in that tree (GeminiUnavailable is transient, GeminiNotFound
permanent, …), so a handler lets them through as they are. Any exception from outside
the tree is treated as retryable until the retry limit, then dead.
This module imports nothing heavy: the ingress loads it at cold start.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from shared.errors import Deferred as Deferred  # re-exported for handlers
from shared.errors import HookledgerError, PermanentError, TransientError
from shared.handler_context import HandlerContext

# A handler raises from the one error tree (shared/errors.py): a `PermanentError` (or any
# error whose `retryable` is False) records the delivery `dead` and answers 2xx; a
# `TransientError` answers 5xx and Cloud Tasks retries with backoff; a `Deferred` is
# re-enqueued `after_s` later as a new task: waiting spends no retry and never ends `dead`.
HandlerError = HookledgerError
RetryableError = TransientError


@dataclass(frozen=True)
class Attempt:
    """One run of a delivery, as the worker's lease on it names it.

    `id` is new for every run (two overlapping runs of one delivery never share it);
    `expires_at` is when the worker's lease on the delivery ends: past it another run
    may take the delivery over, so anything this run owns must be done before then.
    None when no lease bounds the run (a direct call from a test or the CLI).
    """

    id: str
    expires_at: datetime | None = None


@dataclass(frozen=True)
class Event:
    """A verified event as the worker hands it to a handler."""

    source: str
    type: str
    delivery_id: str
    received_at: datetime
    body: bytes
    headers: Mapping[str, str] = field(default_factory=dict)
    # The worker's attempt; defaults to one unbounded run named after the delivery.
    attempt: Attempt | None = None
    # Where the submission the handler's `Claims` named stands for this attempt, claimed
    # with the delivery's record (a `shared.ledger.submissions.Claimed`); None: not asked.
    claimed: Any = None
    # The delivery's `done` (a `shared.ledger.DeliveryEnd`) for the handler to commit with
    # its own write (the push's winner, a settlement): the worker then writes nothing
    # more (`end.applied`). None when the worker marks the delivery itself.
    end: Any = None

    @property
    def run(self) -> Attempt:
        return self.attempt or Attempt(f"{self.delivery_id}:direct")

    def json(self) -> Any:
        """The body parsed as JSON; a body that is not JSON is a `PermanentError`."""
        try:
            return json.loads(self.body)
        except (ValueError, UnicodeDecodeError) as exc:
            raise PermanentError(f"delivery {self.delivery_id}: body is not JSON: {exc}") from exc


@dataclass(frozen=True)
class Done:
    """The event was handled; `detail` is a short summary for logs and the delivery record."""

    detail: str = ""


@dataclass(frozen=True)
class Ignored:
    """The event needs no work (e.g. a push that touches no reviewed file)."""

    detail: str = ""


@dataclass(frozen=True)
class Unresolved:
    """The event names nothing we know (e.g. a Gemini `data.id` not in the ledger): recorded
    `unresolved` with `detail` as its reason, left to reconcile, not retried."""

    detail: str = ""


Outcome = Done | Ignored | Unresolved


class Handler(Protocol):
    def __call__(self, event: Event, ctx: HandlerContext) -> Outcome: ...


@dataclass(frozen=True)
class ClaimRequest:
    """A submission the worker claims for the handler in the delivery's own commit."""

    tag: str
    context: Mapping[str, Any] = field(default_factory=dict)


# What a handler will claim for an event's body, read before the handler runs (pure, no
# I/O; None: nothing to claim, and the handler decides as usual). Lets a push's first run
# record its delivery and claim its submission in one commit (shared/ledger/__init__.py).
Claims = Callable[[bytes, HandlerContext], ClaimRequest | None]

_REGISTRY: dict[tuple[str, str], Handler] = {}
# Keyed like the registry and kept with their handler: a handler registered in its place
# (a test's) claims nothing and is leased.
_CLAIMS: dict[tuple[str, str], tuple[Handler, Claims]] = {}
_UNLEASED: dict[tuple[str, str], Handler] = {}
# What the ingress asks before enqueueing (pure, from the parsed body): a reason to answer
# 200 `ignored` (e.g. an action that starts nothing), or None to hand the event off.
Refusal = Callable[[str, Mapping[str, Any]], str | None]
_REFUSALS: dict[tuple[str, str], tuple[Handler, Refusal]] = {}


def handler(
    source: str,
    *events: str,
    claims: Claims | None = None,
    leased: bool = True,
    refuses: Refusal | None = None,
) -> Callable[[Handler], Handler]:
    """Register the decorated function for `source` and each of `events`.

    `claims`: what the handler claims, taken with the delivery's record (see `Claims`).
    `leased=False`: the handler's own conditional commit makes a second run harmless (a
    settlement), so the worker takes no lease and records the delivery in that commit
    (`Event.end`): one commit per event. `refuses(event, payload)`: asked by the ingress,
    a reason makes the delivery 200 `ignored`, nothing enqueued. Registering a second
    handler for the same pair is an error: one event, one owner.
    """
    if not events:
        raise ValueError("handler() needs at least one event type")

    def register(fn: Handler) -> Handler:
        for name in events:
            key = (source, name)
            existing = _REGISTRY.get(key)
            if existing is not None and existing is not fn:
                raise ValueError(f"a handler for {source}/{name} is already registered")
            _REGISTRY[key] = fn
            if claims is not None:
                _CLAIMS[key] = (fn, claims)
            if not leased:
                _UNLEASED[key] = fn
            if refuses is not None:
                _REFUSALS[key] = (fn, refuses)
        return fn

    return register


def lookup(source: str, event: str) -> Handler | None:
    return _REGISTRY.get((source, event))


def claims_for(source: str, event: str) -> Claims | None:
    """What the handler registered for (`source`, `event`) claims, if it said so."""
    key = (source, event)
    owner, claims = _CLAIMS.get(key, (None, None))
    return claims if owner is not None and owner is _REGISTRY.get(key) else None


def refusal(source: str, event: str, payload: Mapping[str, Any]) -> str | None:
    """Why the ingress should ignore this delivery of a handled event; None: hand it off."""
    key = (source, event)
    owner, refuses = _REFUSALS.get(key, (None, None))
    if refuses is None or owner is not _REGISTRY.get(key):
        return None
    return refuses(event, payload)


def leased(source: str, event: str) -> bool:
    """False when the handler for (`source`, `event`) was registered `leased=False`."""
    key = (source, event)
    owner = _UNLEASED.get(key)
    return owner is None or owner is not _REGISTRY.get(key)


def registered() -> Iterable[tuple[str, str]]:
    return sorted(_REGISTRY)


def unregister(source: str, event: str) -> None:
    """Remove a registration (tests restore the registry with this)."""
    _REGISTRY.pop((source, event), None)


def snapshot() -> dict[tuple[str, str], Handler]:
    """A copy of the registry, to restore after a test with `restore`."""
    return dict(_REGISTRY)


def restore(saved: Mapping[tuple[str, str], Handler]) -> None:
    _REGISTRY.clear()
    _REGISTRY.update(saved)
