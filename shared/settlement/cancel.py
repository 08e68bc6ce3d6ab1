"""Cancelling a superseded batch: the outbox item that makes a duplicate batch harmless.

A push whose second batch slipped through records that batch `superseded` with one item
`{"kind": "gemini-cancel", "name": …}` (docs/architecture.md, "One winner per push").
Cancelling is idempotent at our end: a batch already finished, cancelled or gone is done.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from shared import logs
from shared.crashpoints import crash_point
from shared.errors import PermanentError
from shared.kinds import DeliveryServices, register_deliverer

if TYPE_CHECKING:
    from shared.gemini import GeminiGateway
    from shared.ledger import OutboxItem
    from shared.ledger.protocols import SupersedeLedger

log = logs.get_logger("kinds")

CANCEL = "gemini-cancel"


def cancel_item(name: str) -> dict[str, Any]:
    return {"kind": CANCEL, "name": name}


def supersede(
    ledger: SupersedeLedger,
    gemini: GeminiGateway,
    name: str,
    kind: str,
    *,
    winner: str,
    context: Mapping[str, Any] | None = None,
) -> None:
    """Record the batch `name` superseded by `winner`, and cancel it now if Gemini answers.

    The cancel is the operation's outbox item: one that fails now is retried by the sweep.
    """
    from shared.ledger import LedgerError

    ledger.operations.record_superseded(
        name, kind, context, winner=winner, outbox=[cancel_item(name)]
    )
    crash_point("push.superseded")
    try:
        ledger.outbox.deliver(name, lambda item: cancel_batch(item, gemini))
    except LedgerError as exc:
        logs.event(
            log,
            logging.WARNING,
            f"cancelling superseded batch {name} failed; the outbox sweep retries",
            operation=name,
            winner=winner,
            reason=str(exc),
        )


def cancel_batch(item: OutboxItem, gemini: GeminiGateway) -> None:
    """Cancel the batch the item names; raises the gateway's error when Gemini failed."""
    payload = item.payload if isinstance(item.payload, Mapping) else {}
    name = payload.get("name")
    if not isinstance(name, str) or not name:
        raise PermanentError(f"outbox item {item.idempotency_key}: not a {CANCEL} payload")
    from shared.ledger.groups import MEMBER_PREFIX

    if name.startswith(MEMBER_PREFIX):
        return  # an item of a shared batch: its group's batch still answers the others
    crash_point("cancel.before_call")
    gemini.cancel_batch(name)
    crash_point("cancel.called")


@register_deliverer(CANCEL)
def deliver_cancel(item: OutboxItem, services: DeliveryServices) -> None:
    cancel_batch(item, services.gemini)
