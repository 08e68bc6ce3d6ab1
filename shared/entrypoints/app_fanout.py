"""Several apps on one event: the worker's fan-out (docs/architecture.md, "Apps").

An event one app handles runs in the attempt that brought it, under the delivery's own
record. An event several apps take is handed to each by its own task (the same envelope,
sealed for that app: `Envelope.app`), which runs under its own record
`deliveries/{source}:{id}#{app}` with its own lease, outcome and retries; the delivery's
record is marked done once every app's record is finished, by the app that finishes last
(`complete`), or by the fan-out's next look (a `Deferred`) if that mark was lost.
"""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from typing import TYPE_CHECKING

from shared import handlers, logs
from shared.crashpoints import crash_point
from shared.errors import Deferred
from shared.handlers import Done, Event
from shared.handoff.tasks import task_id_for
from shared.ledger import LedgerError

if TYPE_CHECKING:
    from shared.config import Config
    from shared.handlers.context import HandlerContext
    from shared.handoff.envelope import Envelope, EnvelopeSealer
    from shared.ledger import Ledger

log = logs.get_logger("worker")

# The fan-out's registration name, and how often it looks whether every app has finished
# (each app's end also looks: the delivery is usually done without waiting for this).
FANOUT_APP = "hookledger-fanout"
FANOUT_CHECK_S = 60.0


class AppFanOut:
    """Who runs a delivery, and the fan-out's handler when several apps take it."""

    def __init__(
        self, config: Config, sealer: EnvelopeSealer, ledger: Ledger, context: HandlerContext
    ) -> None:
        self._config = config
        self._sealer = sealer
        self._ledger = ledger
        self._context = context

    def registration(
        self, envelope: Envelope, raw: bytes
    ) -> tuple[handlers.Registration | None, str]:
        """Who runs this delivery, and the id of its record: the one app that handles it;
        for an envelope naming its app, that app's own record `{id}#{app}`; for an event
        several apps take, the fan-out (docs/architecture.md, "Apps")."""
        source, event_type = envelope.source, envelope.event
        if envelope.app is not None:
            reg = handlers.registration(source, event_type, envelope.app)
            return reg, app_delivery_id(envelope.delivery_id, envelope.app)
        regs = handlers.registrations(source, event_type)
        if len(regs) <= 1:
            return (regs[0] if regs else None), envelope.delivery_id
        fan_out = handlers.Registration(FANOUT_APP, self._handler(envelope, raw))
        return fan_out, envelope.delivery_id

    def _handler(self, envelope: Envelope, raw: bytes) -> handlers.Handler:
        """The handler of a delivery several apps take: one task per app that wants it,
        each sealed for that app alone, then done once every app's record is finished
        (else a `Deferred` looks again later; each app's end also looks: `complete`)."""

        def fan_out(event: Event, ctx: HandlerContext) -> handlers.Outcome:
            wanted = _wanted(envelope, raw)
            cfg = self._config
            for reg in wanted:
                sealed = self._sealer.seal(replace(envelope, app=reg.app))
                task_id = task_id_for(envelope.source, envelope.delivery_id, "app", reg.app)
                self._context.tasks.enqueue(
                    cfg.worker_url,
                    sealed,
                    {"Content-Type": "application/json"},
                    task_id=task_id,
                    oidc_service_account=cfg.tasks_service_account or None,
                    oidc_audience=cfg.worker_url,
                    dispatch_deadline_s=cfg.task_dispatch_deadline_s,
                )
            crash_point("apps.fanned_out")
            ends = self._app_ends(envelope, wanted)
            if ends is None:
                names = ", ".join(reg.app for reg in wanted)
                raise Deferred(f"waiting for the apps ({names}) to finish", after_s=FANOUT_CHECK_S)
            return Done(ends)

        return fan_out

    def _app_ends(self, envelope: Envelope, wanted: list[handlers.Registration]) -> str | None:
        """ "app: status; …" once every app's record of the delivery is finished; else None."""
        parts = []
        for reg in wanted:
            key = app_delivery_id(envelope.delivery_id, reg.app)
            stored = self._ledger.deliveries.get(envelope.source, key)
            if stored is None or not stored.finished:
                return None
            parts.append(f"{reg.app}: {stored.status}")
        return "; ".join(parts) or "no app wants this delivery"

    def complete(self, envelope: Envelope, raw: bytes) -> None:
        """After an app's end: mark the delivery done when every app's record is finished,
        so it need not wait for the fan-out's next look. A failure is left to that look."""
        crash_point("apps.app_done")
        try:
            parent = self._ledger.deliveries.get(envelope.source, envelope.delivery_id)
            if parent is None or parent.finished:
                return
            ends = self._app_ends(envelope, _wanted(envelope, raw))
            if ends is not None:
                self._ledger.deliveries.end_attempt(
                    envelope.source, envelope.delivery_id, None, "done"
                )
                logs.event(
                    log,
                    logging.INFO,
                    f"delivery done: {ends}",
                    source=envelope.source,
                    delivery_id=envelope.delivery_id,
                    event=envelope.event,
                )
        except LedgerError as exc:
            logs.event(
                log,
                logging.WARNING,
                f"delivery {envelope.delivery_id}: marking it done after its apps failed; "
                "the fan-out looks again",
                delivery_id=envelope.delivery_id,
                reason=str(exc),
            )


def app_delivery_id(delivery_id: str, app: str) -> str:
    """The id of one app's record of a delivery several apps take: `{id}#{app}`."""
    return f"{delivery_id}#{app}"


def _wanted(envelope: Envelope, raw: bytes) -> list[handlers.Registration]:
    """The apps that take this delivery (registered, and not refusing its payload)."""
    try:
        payload = json.loads(raw)
    except (ValueError, RecursionError):  # a body nested deeper than json reads
        payload = None
    if not isinstance(payload, dict):  # each app's handler refuses it with its own error
        return handlers.registrations(envelope.source, envelope.event)
    return handlers.wanted_by(envelope.source, envelope.event, payload)
