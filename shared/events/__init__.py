"""Events and the handler registry: plain functions registered per (source, event).

    from shared.events import handler, Event, Done

    @handler("github", "issues")
    def on_issue(event: Event, ctx: HandlerContext) -> Done:
        ...
        return Done("labelled")

The ingress enqueues an event only when a handler is registered for it (anything else
is answered 200 `ignored`); the worker runs the handler with the verified event and a
`HandlerContext` (config, ledger, clients, clock: shared/handlers/context.py, a layer
above: this package imports nothing of it at run time). A handler reports its outcome by
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
from typing import TYPE_CHECKING, Any, Protocol

from shared.errors import Deferred as Deferred  # re-exported for handlers
from shared.errors import HookledgerError, PermanentError, TransientError
from shared.events.subject import Subject

if TYPE_CHECKING:
    from shared.handlers.context import HandlerContext

_UNPARSED = object()

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

    @property
    def action(self) -> str | None:
        """The payload's `action` (GitHub's `issues` `opened`, …); None without one."""
        payload = self._parsed()
        action = payload.get("action") if isinstance(payload, dict) else None
        return action if isinstance(action, str) else None

    @property
    def subject(self) -> Subject:
        """The installation, repository and issue or pull a GitHub event is about (none
        for a body that is not JSON, or a Gemini event)."""
        return Subject.of_payload(self._parsed()) if self.source == "github" else Subject()

    def _parsed(self) -> Any:
        cached = self.__dict__.get("_payload", _UNPARSED)
        if cached is _UNPARSED:
            try:
                cached = json.loads(self.body)
            except (ValueError, UnicodeDecodeError, RecursionError):
                cached = None
            object.__setattr__(self, "_payload", cached)  # frozen: parsed once, kept
        return cached

    def json(self) -> Any:
        """The body parsed as JSON; a body that is not JSON is a `PermanentError`, as is one
        nested deeper than `json` reads (the ingress's parsers take 1,024 levels)."""
        try:
            return json.loads(self.body)
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            raise PermanentError(f"delivery {self.delivery_id}: body is not JSON: {exc}") from exc


@dataclass(frozen=True)
class Done:
    """The event was handled; `detail` is a short summary for logs and the delivery record."""

    detail: str = ""


@dataclass(frozen=True)
class Ignored:
    """The event needs no work (e.g. a push that touches no file an app wants)."""

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
Claims = Callable[[bytes, "HandlerContext"], ClaimRequest | None]
# What the ingress asks before enqueueing (pure, from the parsed body): a reason to answer
# 200 `ignored` (e.g. an action that starts nothing), or None to hand the event off.
Refusal = Callable[[str, Mapping[str, Any]], str | None]

# The app name of the core's own handlers (Gemini settlement, installations, check pages).
CORE_APP = "hookledger"


@dataclass(frozen=True)
class Registration:
    """One app's handler for one (source, event) pair, with how the worker runs it."""

    app: str
    fn: Handler
    claims: Claims | None = None
    leased: bool = True
    refuses: Refusal | None = None


# (source, event) -> app -> its registration: several apps may handle one event, each
# once, with its own outcome, lease and retries (docs/architecture.md, "Apps").
_REGISTRY: dict[tuple[str, str], dict[str, Registration]] = {}


def handler(
    source: str,
    *events: str,
    claims: Claims | None = None,
    leased: bool = True,
    refuses: Refusal | None = None,
    app: str = CORE_APP,
) -> Callable[[Handler], Handler]:
    """Register the decorated function for `source` and each of `events`, as `app`'s.

    `claims`: what the handler claims, taken with the delivery's record (see `Claims`).
    `leased=False`: the handler's own conditional commit makes a second run harmless (a
    settlement), so the worker takes no lease and records the delivery in that commit
    (`Event.end`): one commit per event. `refuses(event, payload)`: asked by the ingress
    for a GitHub delivery (when every app refuses it: 200 `ignored`, nothing enqueued) and
    by the worker's fan-out (a refusing app gets no task). One app registers at most one
    handler per pair.
    """
    if not events:
        raise ValueError("handler() needs at least one event type")

    def register(fn: Handler) -> Handler:
        for name in events:
            apps = _REGISTRY.setdefault((source, name), {})
            existing = apps.get(app)
            if existing is not None and existing.fn is not fn:
                raise ValueError(f"app {app!r} already has a handler for {source}/{name}")
            apps[app] = Registration(app, fn, claims, leased, refuses)
        return fn

    return register


def registrations(source: str, event: str) -> list[Registration]:
    """Every app's handler for (`source`, `event`), by app name."""
    apps = _REGISTRY.get((source, event), {})
    return [apps[name] for name in sorted(apps)]


def registration(source: str, event: str, app: str) -> Registration | None:
    return _REGISTRY.get((source, event), {}).get(app)


def wanted_by(source: str, event: str, payload: Mapping[str, Any]) -> list[Registration]:
    """The apps that take this delivery: registered for it, and not refusing it."""
    return [
        r
        for r in registrations(source, event)
        if r.refuses is None or r.refuses(event, payload) is None
    ]


def refusal(source: str, event: str, payload: Mapping[str, Any]) -> str | None:
    """Why the ingress should ignore this delivery of a handled event (every app that
    handles it refuses it); None: at least one app takes it, hand it off."""
    reasons: list[str] = []
    for reg in registrations(source, event):
        reason = reg.refuses(event, payload) if reg.refuses is not None else None
        if reason is None:
            return None
        reasons.append(reason if len(_REGISTRY[(source, event)]) == 1 else f"{reg.app}: {reason}")
    return "; ".join(reasons) or None


def lookup(source: str, event: str) -> Handler | None:
    """The handler of (`source`, `event`) when exactly one app handles it, else None."""
    regs = registrations(source, event)
    return regs[0].fn if len(regs) == 1 else None


def handled(source: str, event: str) -> bool:
    """True when at least one app handles (`source`, `event`)."""
    return bool(_REGISTRY.get((source, event)))


def registered() -> Iterable[tuple[str, str]]:
    return sorted(key for key, apps in _REGISTRY.items() if apps)


def snapshot() -> dict[tuple[str, str], dict[str, Registration]]:
    """A copy of the registry, to restore after a test with `restore`."""
    return {key: dict(apps) for key, apps in _REGISTRY.items()}


def restore(saved: Mapping[tuple[str, str], Mapping[str, Registration]]) -> None:
    _REGISTRY.clear()
    _REGISTRY.update({key: dict(apps) for key, apps in saved.items()})
