"""hookledger's public API: everything an app may import, and nothing else.

An app is a Python package that builds one `App` at import and registers through it. A
deployment names its apps in `HOOKLEDGER_APPS` (comma-separated module names; the
functions and the CLI default to the repository's reference app); each is imported once
per process, before the first request. Keep the module light: the ingress imports it to
learn which events are handled, so import heavy libraries inside handlers. Guide and
examples: docs/apps.md; the first, apps/labeller:

    app = api.App("labeller", settings=[api.Setting("LABELLER_MODEL", default=...)],
                  collections=["labelled"])
    LABEL = app.kind(api.OperationKind("issue-label", "label", writeback=write_back,
                                       outbox=outbox))

    @app.on("issues.opened", "issues.reopened")
    def label_issue(event: api.Event, ctx: api.Context) -> api.Outcome:
        ...
        return ctx.submit(LABEL, key, [("issue", prompt)], context, model=model)

    @app.deliverer("add-label")
    def add_label(item, services) -> None:
        services.github_api.call("issues/add-labels", json={"labels": [label]})

HANDLERS. `@app.on(*events, claims=None, refuses=None)`: GitHub events by name
(`"issues"`, every action) or name and action (`"issues.opened"`); the ingress answers any
other action 200 `ignored`. `@app.handler(source, *events, claims=None, leased=True,
refuses=None)`: "github" (`X-GitHub-Event`) or "gemini" (its `type`). The function gets
the verified `Event` (`source`, `type`, `action`, `delivery_id`, `received_at`, `body`,
`headers`, `json()`, `subject`, `run`: this attempt, with its lease's end) and the app's
`Context`, bound to the event. It returns an outcome (`Done`, `Ignored`, `Unresolved`)
or raises `TransientError` (retried with backoff), `PermanentError` (recorded `dead`,
never retried) or `Deferred(reason, after_s)` (run again later, spending no retry). Any
other exception is retried until the retry limit, then dead. `refuses(event, payload)`: a
reason means this app does not want the delivery. Several apps may handle one event, each
once, with its own record, lease, outcome and retries. A handler may run more than once
for one delivery: make its effects idempotent.

SUBJECT. `event.subject` (`Subject`: `installation_id`, `repository`, `number`) is what a
GitHub event is about. The context's GitHub calls default to it (the installation,
`owner`, `repo`, `issue_number`, `pull_number`), and `ctx.submit` keeps it with the
operation, so its outbox items' deliverers get the same defaults.

CONTEXT. `ctx.submit(...)` (below), `ctx.settings` (this app's settings), `ctx.results`
(this app's collections), `ctx.github_api` (`call(operation_id, json=, **params)` by
GitHub's documented operation, checked before sending: `InvalidCall`; `request(method,
path, …)` by raw path), `ctx.gemini` (create, fetch, list and cancel batches),
`ctx.clock`, `ctx.ledger` (reads), `ctx.subject`, `ctx.for_event(event)`,
`ctx.submission(kind, key)` (the step-by-step submission), and the GitHub clients
`ctx.github` (file contents), `ctx.comments`, `ctx.checks`.

SETTINGS. `Setting(name, type="str"|"int"|"float"|"bool"|"list", default, help, choices,
check, secret)`, declared once on the `App`: read from the environment, checked when a
function starts (a bad value stops it, naming the variable), listed by `hookledger
config`, passed by Terraform from `var.app_settings`.

RESULTS. An app declares its collections (`App(collections=[...])`); no other app, and
none of the ledger's own, may be written through it. `ctx.results.update(collection, id,
change)` reads, calls `change(stored | None)` and writes what it returns (new fields,
`DELETE`, or None to leave it) in one transaction; `get`, `find(**equals)` and `count`
read. `doc_id(*parts)` makes an id from any key.

EXACTLY-ONCE GEMINI JOBS. `ctx.submit(kind, key, requests, context, *, model,
generation_config=None) -> Submitted` (a `Done`: `detail`, `operation`, `created`):
claims the submission (kind, key), creates the batch (or joins the kind's shared one),
releases the claim if the create fails and registers it with the delivery's end in one
commit. Register each `OperationKind(name, tag, writeback=, outbox=, sharing=,
start_items=, request_keys=, adopt=, needs=, interactive=)` with `app.kind(...)`. When
the job ends, a Gemini webhook or reconcile settles it exactly once: `writeback(writes,
record, result)` stages documents with `writes.put(collection, id, fields)` in the same
commit as the status; `outbox(record, result)` returns items (`{"kind": ..., ...}`)
delivered after it by the deliverer the app registered with `@app.deliverer(kind)` (at
least once: look before acting). A batch whose creator died before registering it is
adopted by reconcile with the context its claim stored (`adopt` only for batches created
outside a handler).
`crash_point(name)` marks a point a test may crash the process at (shared/crashpoints.py
lists the names); the core crashes around every create and every deliverer call.

SHARED BATCHES. `OperationKind(sharing=Sharing(max_requests, window_s, shards=,
fair_by=))` (or a function of the app's settings giving one): `ctx.submit` joins the
kind's open group, one batch for many events; each event's operation (`groups/{group}.{n}`)
settles on its own from its own rows. Groups are kept per `fair_by` ("installation", the
default, or "repository" of the event's subject; "" mixes all), and while Gemini's quota
makes groups wait they are created in turns, one per installation a round, else oldest
first. The opener's run raises `Deferred` and seals the group at its window's
end. An event's neighbours never fail it: one whose request Gemini refuses settles
`failed` alone, `result.error` `{"reason": REQUEST_REFUSED, "message": Gemini's words}`;
while Gemini refuses the deployment the group waits, and after 24 h its events fail,
reason `DEPLOYMENT_REFUSED`.

INTERACTIVE BATCHES. `OperationKind(interactive=True)`: a person waits for the kind's
batches (a button pressed), so `ctx.submit` creates each at once, never in a shared batch
(`sharing=` is refused with it), with Gemini's `batch.priority` `INTERACTIVE_PRIORITY`
(100): Gemini processes it before batches of a lower priority, every other kind's being
`BACKGROUND_PRIORITY` (0, Gemini's default). A batch made by hand takes one too:
`ctx.gemini.create_batch(..., priority=INTERACTIVE_PRIORITY)` (any int64; a value Gemini
refuses with a 400 naming it is dropped, the batch created without it, with a WARNING), or
`SubmitDeps(priority=)` for a `Submitter`.

THE STEP-BY-STEP SUBMISSION, for the rare handler that needs another order:
`ctx.submission(kind, key)` or `ctx.submitter(event, tag, kind=...)` gives a `Submitter`:
`decided_before_fetch()`, `claim(context)`, `submit(...)`, `register(name, context,
end)`, `release()`, `join(...)`; `SubmitDeps`, `ClaimRequest` and `Claims` serve it.

Everything else in `shared/` is private and may change; tests/unit/test_app_imports.py
fails when an app imports it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from typing import Any

from shared.apps import AppError, AppRecord, Setting, Settings, declare, owner_name_globs
from shared.clock import Clock, system_clock
from shared.crashpoints import crash_point
from shared.documents import CORE_COLLECTIONS, DELETE, doc_id
from shared.errors import ConfigError, Deferred, HookledgerError, PermanentError, TransientError
from shared.events.subject import Subject
from shared.handlers import (
    Attempt,
    ClaimRequest,
    Claims,
    Done,
    Event,
    Handler,
    Ignored,
    Outcome,
    Refusal,
    Unresolved,
    handler,
)
from shared.handlers.context import HandlerContext as Context
from shared.handlers.routes import Routes, for_its_event
from shared.kinds import (
    BACKGROUND_PRIORITY,
    INTERACTIVE_PRIORITY,
    TAG_PREFIX,
    DeliverWith,
    DeliveryServices,
    OperationKind,
    context_keys,
    register,
    register_deliverer,
)
from shared.logs import event as log_event
from shared.logs import get_logger
from shared.sharing import DEPLOYMENT_REFUSED, REQUEST_REFUSED, Sharing
from shared.sharing.submitter import Submitter
from shared.submission import SubmitDeps, Submitted

__all__ = [
    "BACKGROUND_PRIORITY",
    "DELETE",
    "DEPLOYMENT_REFUSED",
    "INTERACTIVE_PRIORITY",
    "REQUEST_REFUSED",
    "TAG_PREFIX",
    "App",
    "AppError",
    "Attempt",
    "ClaimRequest",
    "Claims",
    "Clock",
    "ConfigError",
    "Context",
    "Deferred",
    "DeliverWith",
    "DeliveryServices",
    "Done",
    "Event",
    "Handler",
    "HookledgerError",
    "Ignored",
    "OperationKind",
    "Outcome",
    "PermanentError",
    "Refusal",
    "Setting",
    "Settings",
    "Sharing",
    "Subject",
    "SubmitDeps",
    "Submitted",
    "Submitter",
    "TransientError",
    "Unresolved",
    "context_keys",
    "crash_point",
    "doc_id",
    "get_logger",
    "log_event",
    "owner_name_globs",
    "system_clock",
]


class App:
    """One app: its name, settings and collections, and what it registers.

    `name` ([a-z][a-z0-9_-]*) names the app in records, logs and `deliveries/…#{name}`;
    `settings` its environment settings; `collections` the Firestore collections its
    results live in; `requires` the pip requirements it adds to the functions'
    (tools/requirements.py). Build it once, at the top level of the app's module, as `app`.
    """

    def __init__(
        self,
        name: str,
        *,
        settings: Iterable[Setting] = (),
        collections: Iterable[str] = (),
        description: str = "",
        requires: Iterable[str] = (),
        module: str | None = None,
    ) -> None:
        self.record = declare(
            AppRecord(
                name=name,
                module=module or _caller_module(),
                settings=tuple(settings),
                collections=frozenset(_collections(name, collections)),
                description=description,
                requires=tuple(requires),
            )
        )
        self.name = name
        self._routes = Routes(name)

    def on(
        self,
        *events: str,
        claims: Claims | None = None,
        refuses: Refusal | None = None,
    ) -> Callable[[Handler], Handler]:
        """Register the decorated function for GitHub `events`, each `"name"` (every
        action) or `"name.action"` (`"issues.opened"`): the ingress answers any other
        action `ignored` without queueing it. One app may route the actions of one event
        to several functions. `claims` and `refuses` as for `handler`."""
        if not events:
            raise AppError(f"app {self.name!r}: on() needs at least one event")

        def register(fn: Handler) -> Handler:
            try:
                for name in events:
                    self._routes.add(name, fn, claims=claims, refuses=refuses)
            except ValueError as exc:
                raise AppError(str(exc)) from exc
            return fn

        return register

    def handler(
        self,
        source: str,
        *events: str,
        claims: Claims | None = None,
        leased: bool = True,
        refuses: Refusal | None = None,
    ) -> Callable[[Handler], Handler]:
        """Register the decorated function for (`source`, each of `events`); see the module
        docstring. `claims(body, ctx)`: a submission taken with the delivery's record;
        `leased=False`: the handler's own conditional commit makes a rerun harmless."""
        register = handler(
            source, *events, claims=claims, leased=leased, refuses=refuses, app=self.name
        )

        def decorate(fn: Handler) -> Handler:
            try:
                register(for_its_event(fn))
            except ValueError as exc:
                raise AppError(f"app {self.name!r}: {exc}") from exc
            return fn

        return decorate

    def kind(self, kind: OperationKind) -> OperationKind:
        """Register an operation kind of this app (its name and tag must be unique)."""
        try:
            return register(kind, app=self.name)
        except ValueError as exc:
            raise AppError(f"app {self.name!r}: {exc}") from exc

    def deliverer(self, payload_kind: str) -> Callable[[DeliverWith], DeliverWith]:
        """Register how this app's outbox items `{"kind": payload_kind, ...}` are delivered."""
        register = register_deliverer(payload_kind, app=self.name)

        def decorate(fn: DeliverWith) -> DeliverWith:
            try:
                return register(fn)
            except ValueError as exc:
                raise AppError(f"app {self.name!r}: {exc}") from exc

        return decorate

    def settings(self) -> Settings:
        """This app's settings as the environment sets them now."""
        return self.record.read_settings()

    @property
    def collections(self) -> frozenset[str]:
        return self.record.collections

    def logger(self) -> Any:
        """The app's logger (structured JSON lines, as the core's)."""
        return get_logger(self.name)


def _collections(app: str, names: Iterable[str]) -> list[str]:
    found = list(names)
    for name in found:
        if not isinstance(name, str) or not name or "/" in name:
            raise AppError(f"app {app!r}: collection {name!r} is not a collection name")
        if name in CORE_COLLECTIONS:
            raise AppError(f"app {app!r}: collection {name!r} is the ledger's own")
    return found


def _caller_module() -> str:
    """The module building the App (the caller of `App.__init__`): one frame lookup, not
    `inspect.stack()`, which reads the source of every frame (over 100 ms at a cold start)."""
    return str(sys._getframe(2).f_globals.get("__name__", "?"))
