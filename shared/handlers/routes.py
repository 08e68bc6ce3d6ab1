"""An app's GitHub routes by event and action (`App.on("issues.opened")`), as one handler
per event for the registry: the ingress refuses an action no route takes (200 `ignored`,
nothing queued), and the worker runs the route whose actions match.

Every app handler runs with its context bound to the event (`HandlerContext.for_event`),
so its GitHub calls and submissions default to the event's installation and subject.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shared.events import (
    Claims,
    Event,
    Handler,
    Ignored,
    Outcome,
    Refusal,
    handler,
)
from shared.handlers.context import HandlerContext

_BOUND = "__hookledger_for_its_event__"


def for_its_event(fn: Handler) -> Handler:
    """`fn` run with its context bound to the event it handles (one wrapper per function,
    so registering a function again is still the same registration)."""
    bound = getattr(fn, _BOUND, None)
    if bound is not None:
        return bound  # type: ignore[no-any-return]

    def run(event: Event, ctx: HandlerContext) -> Outcome:
        return fn(event, ctx.for_event(event))

    run.__name__ = getattr(fn, "__name__", "handler")
    run.__doc__ = fn.__doc__
    # A builtin or a slotted callable keeps no attribute: a wrapper per registration.
    with contextlib.suppress(AttributeError):
        setattr(fn, _BOUND, run)
    return run


@dataclass(frozen=True)
class Route:
    actions: frozenset[str] | None  # None: every action
    fn: Handler
    refuses: Refusal | None


class Routes:
    """One app's routes by GitHub event name."""

    def __init__(self, app: str) -> None:
        self._app = app
        self._by_event: dict[str, list[Route]] = {}
        self._claims: dict[str, Claims] = {}

    def add(
        self, name: str, fn: Handler, *, claims: Claims | None, refuses: Refusal | None
    ) -> None:
        """Route `name` (`event` or `event.action`) to `fn`."""
        event, dot, action = name.partition(".")
        if not event or (dot and not action):
            raise ValueError(f"app {self._app!r}: {name!r} is not an event or event.action")
        actions = frozenset({action}) if action else None
        routes = self._by_event.get(event)
        first = routes is None
        routes = self._by_event.setdefault(event, [])
        for route in routes:
            overlap = route.actions is None or actions is None or route.actions & actions
            if overlap and route.fn is not fn:
                raise ValueError(f"app {self._app!r} routes {name!r} to two functions")
        if claims is not None:
            if self._claims.setdefault(event, claims) is not claims:
                raise ValueError(f"app {self._app!r} gives {event!r} two claims")
            if not first:
                raise ValueError(f"app {self._app!r}: give {event!r}'s claims on its first route")
        routes.append(Route(actions, fn, refuses))
        if first:
            handler(
                "github",
                event,
                claims=claims,
                refuses=lambda event_type, payload: self.refusal(event_type, payload),
                app=self._app,
            )(self._dispatch)

    def refusal(self, event: str, payload: Mapping[str, Any]) -> str | None:
        """None when a route takes this delivery; else why none does."""
        action = payload.get("action")
        matching = [r for r in self._by_event.get(event, []) if _takes(r, action)]
        if not matching:
            return f"{event}.{action} is not handled" if action else f"{event} is not handled"
        reasons = []
        for route in matching:
            reason = route.refuses(event, payload) if route.refuses is not None else None
            if reason is None:
                return None
            reasons.append(reason)
        return "; ".join(reasons)

    def _dispatch(self, event: Event, ctx: HandlerContext) -> Outcome:
        action = event.action
        payload = event.json()
        for route in self._by_event.get(event.type, []):
            if not _takes(route, action):
                continue
            if route.refuses is not None and route.refuses(event.type, payload) is not None:
                continue
            return route.fn(event, ctx.for_event(event))
        return Ignored(self.refusal(event.type, payload) or f"{event.type}: no route")


def _takes(route: Route, action: Any) -> bool:
    return route.actions is None or action in route.actions
