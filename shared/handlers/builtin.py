"""The core's own handlers (app `hookledger`): Gemini terminal events settle; GitHub App
`installation` / `installation_repositories` events are recorded; reconcile's fan-out
pages are checked. Every other event is an app's (shared/apps.py).

Importing this module registers them. It stays light (the ingress imports it at cold
start): the Gemini, GitHub and Firestore work is imported inside the handlers.

Errors from Gemini, GitHub and the ledger pass through as raised: each already says in
the error tree (shared/errors.py) whether a retry may help, and the worker reads that.
"""

from __future__ import annotations

import logging
import re
from datetime import timedelta
from typing import TYPE_CHECKING

from shared import logs
from shared.events import (
    Done,
    Event,
    Ignored,
    PermanentError,
    RetryableError,
    Unresolved,
    handler,
)
from shared.handlers.context import HandlerContext
from shared.kinds import TAG_PREFIX, Deliverers

if TYPE_CHECKING:
    from shared.ledger import Ledger, Operation

log = logs.get_logger("handlers")

# The webhooks API reference (ai.google.dev/api/webhooks, CreateWebhook `subscribed_events`)
# lists these seven; the Webhooks guide also names `batch.cancelled` and
# `interaction.cancelled`, but google-genai's enums dropped them. We follow the SDK: never
# subscribe to them by default, never rely on them (a cancellation settles through
# reconcile), and settle from them only if one arrives anyway.
DOCUMENTED_EVENTS = (
    "batch.succeeded",
    "batch.expired",
    "batch.failed",
    "interaction.requires_action",
    "interaction.completed",
    "interaction.failed",
    "video.generated",
)
UNRELIABLE_EVENTS = ("batch.cancelled", "interaction.cancelled")

BATCH_EVENTS = ("batch.succeeded", "batch.failed", "batch.cancelled", "batch.expired")
# `interaction.requires_action` is not terminal: no handler, so the ingress ignores it and
# reconcile alerts on the interaction once it has waited past STUCK_AFTER_S.
OPERATION_EVENTS = (
    "video.generated",
    "interaction.completed",
    "interaction.failed",
    "interaction.cancelled",
)

# The collection a bare id of each event family lives under.
_ID_PREFIX = {"batch": "batches/", "interaction": "interactions/"}
# The Webhooks guide's example `data.id` is `batch_123456`: a kind word, "_", then an id.
_KIND_WORD_ID = re.compile(r"(?:batch|interaction|video|operation)_(?P<id>[^/]+)")


def candidate_names(data_id: str, event_type: str) -> list[str]:
    """The ledger names `data.id` may stand for, most specific first.

    `batches/abc` (a full resource name) is itself; `abc` (a bare id) is the name under the
    event family's collection, then any operation whose last path segment is `abc`
    (video operations live under `models/…/operations/`); `batch_123456` (the Webhooks
    guide's example form) is tried as written and then as the bare id `123456`.
    """
    if "/" in data_id:
        return [data_id]
    ids = [data_id]
    match = _KIND_WORD_ID.fullmatch(data_id)
    if match:
        ids.append(match.group("id"))
    prefix = _ID_PREFIX.get(event_type.split(".", 1)[0])
    names: list[str] = []
    for bare in ids:
        for name in ((prefix + bare) if prefix else None, bare):
            if name and name not in names:
                names.append(name)
    return names


def resolve_operation(ledger: Ledger, data_id: str, event_type: str) -> Operation | None:
    """The ledger's operation `data.id` names, in any form Gemini sends; None if none.

    A bare id matching several operations (AmbiguousId) resolves to none of them.
    """
    from shared.ledger import AmbiguousId

    for name in candidate_names(data_id, event_type):
        try:
            record = ledger.operations.get(name)
        except AmbiguousId:
            continue
        if record is not None:
            return record
    return None


def echoed_id(payload: object) -> str | None:
    """The hookledger id a job's events echo (`webhook_config.user_metadata`, set at create
    by shared/gemini/client.py): `data.user_metadata.hookledger_id`, or the same at the top
    level; None unless it is one of hookledger's tags (`hookledger:{kind}:{key}`)."""
    from shared.gemini import HOOKLEDGER_ID

    if not isinstance(payload, dict):
        return None
    data = payload.get("data")
    for holder in (data if isinstance(data, dict) else {}, payload):
        metadata = holder.get("user_metadata")
        value = metadata.get(HOOKLEDGER_ID) if isinstance(metadata, dict) else None
        if isinstance(value, str) and value.startswith(TAG_PREFIX) and len(value) <= MAX_TAG:
            return value
    return None


# A display name is at most 512 characters (Gemini's limit is lower); longer is not ours.
MAX_TAG = 512


def _same_operation(name: str, data_id: str, event_type: str) -> bool:
    """True when `data.id`, in any form `candidate_names` knows, names `name`."""
    bare = name.rsplit("/", 1)[-1]
    return any(
        c == name or c.rsplit("/", 1)[-1] == bare for c in candidate_names(data_id, event_type)
    )


def event_operation(
    ledger: Ledger, data_id: str, echoed: str | None, event_type: str
) -> Operation | None:
    """The ledger's operation an event is about: by the echoed hookledger id first, then by
    `data.id`; None if neither names one.

    The echoed id (the job's tag) names the operation hookledger registered for it. Every
    batch created under one tag echoes it, so when `data.id` names a different operation
    in the ledger (a superseded duplicate) that one is meant; when `data.id` names none,
    the tag's operation is, whatever form Gemini gave its id in. Either way the settler
    re-fetches the operation by its own name: the event only picks which one.
    """
    tagged = ledger.operation_for_tag(echoed) if echoed else None
    if tagged is not None and _same_operation(tagged.name, data_id, event_type):
        return tagged
    return resolve_operation(ledger, data_id, event_type) or tagged


# Unleased: the settlement's conditional commit makes a second run harmless, and records
# the delivery `done` in that same commit (shared/handlers/__init__.py, `leased`).
@handler("gemini", *BATCH_EVENTS, *OPERATION_EVENTS, leased=False)
def settle_operation(event: Event, ctx: HandlerContext) -> Done | Ignored | Unresolved:
    """Re-fetch the operation named in the event (a hint only) and settle it in the ledger.

    The operation is found by the hookledger id the job's events echo (its tag, in
    `user_metadata`), then by `data.id` (`event_operation`). An event naming no operation
    in the ledger marks the delivery `unresolved` (WARNING naming it); if the operation is
    ours, reconcile settles it.
    """
    from shared.ledger import Settlement
    from shared.settlement.settler import RUNNING, Settler

    payload = event.json()
    data = payload.get("data") if isinstance(payload, dict) else None
    data_id = data.get("id") if isinstance(data, dict) else None
    if not isinstance(data_id, str) or not data_id:
        raise PermanentError(f"delivery {event.delivery_id}: event has no data.id")
    echoed = echoed_id(payload)
    record = event_operation(ctx.ledger, data_id, echoed, event.type)
    if record is None:
        tagged = f" (user_metadata {echoed!r} neither)" if echoed else ""
        reason = f"data.id {data_id!r} names no operation in the ledger{tagged}; left to reconcile"
        logs.event(
            log,
            logging.WARNING,
            f"gemini event {event.type} unresolved: {reason}",
            delivery_id=event.delivery_id,
            event=event.type,
            operation=data_id,
            submission=echoed,
        )
        return Unresolved(reason)
    name = record.name
    settler = Settler(
        ctx.ledger,
        ctx.gemini,
        Deliverers(ctx),
        clock=ctx.clock,
        gone_after=timedelta(seconds=ctx.config.reconcile_backoff_first_s),
    )
    outcome = settler.settle(name, "webhook", record=record, end=event.end)
    if outcome.result == Settlement.UNKNOWN:
        return Ignored(f"{name} is not in the ledger")
    if outcome.result == RUNNING:
        # The event ran ahead of what Gemini reports: retry later rather than settle wrongly.
        raise RetryableError(f"{name}: {event.type} received but Gemini still reports it running")
    return Done(f"{name}: {outcome.result} ({outcome.status})")


# Unleased, like a settlement: the ledger's conditional commit makes a second run harmless
# (a duplicate or an older event changes nothing) and records the delivery `done` with it.
@handler("github", "installation", "installation_repositories", leased=False)
def record_installation(event: Event, ctx: HandlerContext) -> Done | Ignored:
    """Record where the GitHub App is installed (`ledger.installations`): a push from an
    installation deleted or suspended, or from a repository it left, is then ignored."""
    from shared.github.installations import parse_installation_event

    payload = event.json()
    try:
        facts = parse_installation_event(event.type, payload)
    except ValueError as exc:
        raise PermanentError(f"delivery {event.delivery_id}: {exc}") from exc
    if facts is None:
        action = payload.get("action") if isinstance(payload, dict) else None
        return Ignored(f"{event.type} action {action!r} is not one hookledger records")
    applied = ctx.ledger.installations.apply(
        facts, received_at=event.received_at, delivery_id=event.delivery_id, end=event.end
    )
    stored = applied.installation
    if not applied.changed:
        return Done(
            f"installation {stored.installation_id}: {event.type}.{facts.action} changed "
            "nothing (a duplicate, an event older than the one recorded, or after deletion)"
        )
    return Done(
        f"installation {stored.installation_id} ({stored.account}): {stored.status}, "
        f"{stored.repository_selection or 'unknown'} repositories after {event.type}.{facts.action}"
    )


@handler("hookledger", "check-page")
def check_page(event: Event, ctx: HandlerContext) -> Done:
    """Poll and settle one page of due operations that reconcile fanned out to the worker."""
    from shared.reconcile import Reconciler, page_names

    try:
        names = page_names(event.body)
    except ValueError as exc:
        raise PermanentError(f"delivery {event.delivery_id}: {exc}") from exc
    reconciler = Reconciler.from_config(
        ctx.config, ctx.ledger, ctx.gemini, adopt_orphans=False, deliver=Deliverers(ctx)
    )
    report = reconciler.check_names(names)
    if report.examined == 0 and report.errors:
        raise RetryableError(f"delivery {event.delivery_id}: no operation could be read")
    # Operations left pending are already deferred: the next reconcile run picks them up.
    return Done(
        f"page of {len(names)}: {report.settled} settled, "
        f"{report.still_running} running, {report.errors} errors"
    )
