"""Handlers as an app or the core writes them: the registry and events of shared/events/,
and the `HandlerContext` a handler receives (context.py), with `for_app` and `for_event`.

    from shared.handlers import handler, Event, Done, HandlerContext

    @handler("github", "issues")
    def on_issue(event: Event, ctx: HandlerContext) -> Done:
        ...
        return Done("labelled")

builtin.py holds the core's own handlers (Gemini settlement, GitHub installations,
reconcile's fan-out pages), registered when this package is imported; `load_apps` loads
the apps beside them. routes.py is `App.on`'s routing by action. The registry itself
(shared/events) sits below the ledger; this package sits above settlement and submission,
which the context reaches.
"""

from __future__ import annotations

from collections.abc import Iterable

from shared import apps
from shared.events import (
    CORE_APP,
    Attempt,
    ClaimRequest,
    Claims,
    Deferred,
    Done,
    Event,
    Handler,
    HandlerError,
    Ignored,
    Outcome,
    PermanentError,
    Refusal,
    Registration,
    RetryableError,
    TransientError,
    Unresolved,
    handled,
    handler,
    lookup,
    refusal,
    registered,
    registration,
    registrations,
    restore,
    snapshot,
    wanted_by,
)
from shared.handlers import builtin  # noqa: F401  registers the core's own handlers
from shared.handlers.context import HandlerContext

__all__ = [
    "CORE_APP",
    "Attempt",
    "ClaimRequest",
    "Claims",
    "Deferred",
    "Done",
    "Event",
    "Handler",
    "HandlerContext",
    "HandlerError",
    "Ignored",
    "Outcome",
    "PermanentError",
    "Refusal",
    "Registration",
    "RetryableError",
    "TransientError",
    "Unresolved",
    "handled",
    "handler",
    "load_apps",
    "lookup",
    "refusal",
    "registered",
    "registration",
    "registrations",
    "restore",
    "snapshot",
    "wanted_by",
]


def load_apps(modules: Iterable[str] | None = None) -> list[apps.AppRecord]:
    """The core's own handlers (builtin.py, registered when this package was imported) and
    the apps `modules` names (default: `HOOKLEDGER_APPS`), each imported once: what every
    function and the CLI run with."""
    return apps.load(modules)
