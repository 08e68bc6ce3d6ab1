"""`deliveries list|show|replay`: what the worker recorded, and GitHub's "Redeliver" button.

A replay seals the stored payload into a fresh envelope and enqueues it for the worker
exactly as the ingress does, under a new task name (the original one is tombstoned). The
delivery is reopened (`queued`) first, because the worker answers a finished delivery
`duplicate` without running its handler; the handlers are idempotent, so replaying a
delivery whose work is already done changes nothing (a settled operation stays settled).
A replay with `--force` of a delivery still queued goes through the worker's lease like
any retry: while another attempt holds it, the replayed run answers 503 and comes back
later, never running beside it (docs/architecture.md, "Delivery lease").
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from typing import Any

from hookledger.cli.ops import limit_arg
from hookledger.cli.output import CliError, Output, fields_block, payload_value, table
from shared.clock import system_clock
from shared.entrypoints import runtime
from shared.handoff.envelope import SOURCES, Envelope
from shared.handoff.tasks import task_id_for
from shared.handoff.to_worker import hand_to_worker
from shared.ledger import DELIVERY_STATUSES, Delivery, Ledger, Recovery
from shared.statuses import DeliveryStatus, RecoveryStatus

LIST_COLUMNS = [
    ("SOURCE", "source"),
    ("DELIVERY", "delivery_id"),
    ("EVENT", "event"),
    ("STATUS", "status"),
    ("ATTEMPTS", "attempts"),
    ("RECEIVED", "received_at"),
    ("RECOVERED", "recovered"),
    ("LAST ERROR", "last_error"),
]
RECOVERY_COLUMNS = [
    ("GUID", "guid"),
    ("EVENT", "event"),
    ("STATUS", "status"),
    ("VIA", "via"),
    ("FAILED AT", "failed_at"),
    ("RECOVERED AT", "recovered_at"),
    ("AFTER S", "after_s"),
    ("SWEEP RUN", "sweep_run"),
]


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    deliveries = sub.add_parser("deliveries", help="webhook deliveries the worker recorded")
    dsub = deliveries.add_subparsers(
        dest="deliveries_command", required=True, metavar="{list,show,replay,recovered}"
    )
    listing = dsub.add_parser("list", parents=[common], help="deliveries, newest first")
    listing.add_argument("--status", choices=sorted(DELIVERY_STATUSES))
    listing.add_argument("--limit", type=limit_arg, default=50)
    listing.set_defaults(func=cmd_list)
    recovered = dsub.add_parser(
        "recovered",
        parents=[common],
        help="GitHub deliveries the sweep found failed, and how each came back",
    )
    recovered.add_argument("--limit", type=limit_arg, default=50)
    recovered.set_defaults(func=cmd_recovered)
    for name, func, text in (
        ("show", cmd_show, "every stored field of one delivery"),
        ("replay", cmd_replay, "re-enqueue the stored payload"),
    ):
        parser = dsub.add_parser(name, parents=[common], help=text)
        parser.add_argument("id", help="SOURCE:DELIVERY_ID, or the delivery id if unambiguous")
        parser.set_defaults(func=func)
        if name == "replay":
            parser.add_argument(
                "--force", action="store_true", help="replay even while the delivery is queued"
            )


def find(ident: str) -> Delivery:
    """The delivery named `source:id`, or the one delivery whose id is `ident`."""
    ledger = runtime.ledger()
    source, sep, rest = ident.partition(":")
    if sep and source in SOURCES and rest:
        found = ledger.deliveries.get(source, rest)
        if found is None:
            raise CliError(f"delivery {ident} not found")
        return found
    matches = ledger.deliveries.find(ident, limit=2)
    if not matches:
        raise CliError(f"delivery {ident} not found")
    if len(matches) > 1:
        choices = " or ".join(f"{m.source}:{ident}" for m in matches)
        raise CliError(f"delivery id {ident} is ambiguous: use {choices}")
    return matches[0]


def shown(delivery: Delivery) -> dict[str, Any]:
    data = delivery.to_dict()
    data["id"] = f"{delivery.source}:{delivery.delivery_id}"
    if delivery.payload is not None:
        data["payload"] = payload_value(delivery.payload)
    return data


def recovery_summary(recovery: Recovery | None) -> str | None:
    """How a GitHub delivery came back, in a few words (None: it never failed)."""
    if recovery is None:
        return None
    if recovery.status == RecoveryStatus.RECOVERED:
        return f"by {recovery.via} after {recovery.after_s or 0:.0f} s"
    if recovery.status == RecoveryStatus.ACCEPTED:
        return "GitHub timed out; the ingress had it"
    if recovery.status == RecoveryStatus.OPEN and recovery.via:
        return f"open ({recovery.via} sent)"
    return recovery.status


def recoveries_of(ledger: Ledger, deliveries: Iterable[Delivery]) -> dict[str, Recovery]:
    """The recovery of each GitHub delivery that has one, by the delivery's `doc_id` (an
    app's record, `{guid}#{app}`, shares its delivery's); one batched read."""
    github = {d.doc_id: d.delivery_id.partition("#")[0] for d in deliveries if d.source == "github"}
    found = ledger.recoveries.get_many(github.values())
    return {doc_id: found[guid] for doc_id, guid in github.items() if guid in found}


def cmd_list(args: argparse.Namespace, out: Output) -> int:
    ledger = runtime.ledger()
    found = ledger.deliveries.listing(args.status, args.limit)
    recoveries = recoveries_of(ledger, found)
    rows = [shown(d) for d in found]
    for row, delivery in zip(rows, found, strict=True):
        row.pop("payload", None)  # a list is for scanning; `show` prints the payload
        row["recovered"] = recovery_summary(recoveries.get(delivery.doc_id))
    out.emit(rows, lambda: table(rows, LIST_COLUMNS) if rows else "no deliveries")
    return 0


def cmd_show(args: argparse.Namespace, out: Output) -> int:
    delivery = find(args.id)
    data = shown(delivery)
    if delivery.source == "github":
        recovery = recoveries_of(runtime.ledger(), [delivery]).get(delivery.doc_id)
        data["recovery"] = recovery.to_dict() if recovery is not None else None
    out.emit(data, lambda: fields_block(data))
    return 0


def cmd_recovered(args: argparse.Namespace, out: Output) -> int:
    rows = [r.to_dict() for r in runtime.ledger().recoveries.recent(args.limit)]
    out.emit(
        rows,
        lambda: table(rows, RECOVERY_COLUMNS) if rows else "no GitHub delivery has failed",
    )
    return 0


def replay_headers(delivery: Delivery) -> dict[str, str]:
    """The headers the ingress would have kept for this delivery (never a signature)."""
    headers = {"content-type": "application/json"}
    if delivery.source == "github":
        headers.update(
            {"x-github-event": delivery.event, "x-github-delivery": delivery.delivery_id}
        )
    elif delivery.source == "gemini":
        headers["webhook-id"] = delivery.delivery_id
    return headers


def cmd_replay(args: argparse.Namespace, out: Output) -> int:
    delivery = find(args.id)
    data = replay(delivery, force=args.force)
    out.emit(
        data,
        lambda: (
            f"replaying {data['id']} ({delivery.event}, was {delivery.status}) "
            f"as task {data['task']}"
        ),
    )
    return 0


def replay(delivery: Delivery, *, force: bool = False) -> dict[str, Any]:
    """Re-seal `delivery`'s stored payload and enqueue it for the worker; the CLI and console.

    Raises `CliError` (nothing changed) when it is still queued without `force`, has no
    stored payload, or the enqueue fails (its status is put back). Returns `id`, `task`,
    `status`, `previous_status` and `worker_url`.

    Several apps (docs/architecture.md, "Apps"): one app's record (`{id}#{app}`) replays
    the delivery's payload to that app alone; the delivery itself replays to each app that
    has a record of it (`apps`: each one's answer), and is reopened to be marked done when
    they are.
    """
    label = f"{delivery.source}:{delivery.delivery_id}"
    if delivery.status == DeliveryStatus.QUEUED and not force:
        # Its task may still be retrying: the replay would only wait for it (lease).
        raise CliError(
            f"delivery {label} is still queued (its task may be retrying); "
            "use --force to replay it anyway"
        )
    ledger = runtime.ledger()
    parent_id, own, app = delivery.delivery_id.partition("#")
    if own:
        parent = ledger.deliveries.get(delivery.source, parent_id)
        if parent is None:
            raise CliError(f"delivery {label}: its delivery {parent_id} is not recorded")
        return _replay_one(delivery, parent, app)
    apps_records = _app_records(delivery)
    if not apps_records:
        return _replay_one(delivery, delivery, None)
    body = _stored_body(delivery, delivery)  # refused before anything is reopened
    # Every record reopened before any is handed over: the last app to finish marks the
    # delivery done again (app_fanout `complete`), and an app finishing early must not
    # find another's record still done from the last run.
    ledger.deliveries.reopen(delivery.source, delivery.delivery_id)
    for _, record in apps_records:
        ledger.deliveries.reopen(record.source, record.delivery_id)
    answers: list[dict[str, Any]] = []
    try:
        for name, record in apps_records:
            answers.append(_hand_over(record, delivery, name, body))
    except CliError:  # the record that failed put its status back; the rest and the delivery
        for _, record in apps_records[len(answers) + 1 :]:
            ledger.deliveries.mark(record.source, record.delivery_id, record.status)
        ledger.deliveries.mark(delivery.source, delivery.delivery_id, delivery.status)
        raise
    return {
        "id": label,
        "task": ", ".join(str(a["task"]) for a in answers),
        "status": "replayed to " + ", ".join(name for name, _ in apps_records),
        "previous_status": delivery.status,
        "worker_url": runtime.config().worker_url,
        "apps": answers,
    }


def _app_records(delivery: Delivery) -> list[tuple[str, Delivery]]:
    """(app, its record) for each app with a record of `delivery` (a fan-out's)."""
    from shared import handlers

    handlers.load_apps()  # the core's handlers and the deployment's apps
    found = []
    for reg in handlers.registrations(delivery.source, delivery.event):
        record = runtime.ledger().deliveries.get(
            delivery.source, f"{delivery.delivery_id}#{reg.app}"
        )
        if record is not None:
            found.append((reg.app, record))
    return found


def _replay_one(delivery: Delivery, holder: Delivery, app: str | None) -> dict[str, Any]:
    """Replay `delivery` with the payload `holder` stored (itself, or the delivery an app's
    record belongs to), sealed for `app` when it is one app's record."""
    body = _stored_body(delivery, holder)
    # Queued first: the worker skips a delivery already done/ignored/dead as a duplicate.
    # Reopening keeps a live lease, so the replayed run waits for the attempt holding it.
    runtime.ledger().deliveries.reopen(delivery.source, delivery.delivery_id)
    return _hand_over(delivery, holder, app, body)


def _stored_body(delivery: Delivery, holder: Delivery) -> bytes:
    """The payload `holder` stored, as the body to replay `delivery` with; CliError when
    it keeps none."""
    if holder.payload is None:
        ref = holder.payload_ref
        where = f" (only a claim reference {ref})" if ref else ""
        label = f"{delivery.source}:{delivery.delivery_id}"
        raise CliError(f"delivery {label} has no stored payload{where}; nothing to replay")
    return holder.payload if isinstance(holder.payload, bytes) else str(holder.payload).encode()


def _hand_over(
    delivery: Delivery, holder: Delivery, app: str | None, body: bytes
) -> dict[str, Any]:
    """Enqueue the reopened `delivery` for the worker with `body`; its status put back and
    CliError when the enqueue fails."""
    label = f"{delivery.source}:{delivery.delivery_id}"
    cfg = runtime.config()
    envelope = Envelope(
        source=holder.source,
        event=holder.event,
        delivery_id=holder.delivery_id,
        received_at=system_clock(),
        headers=replay_headers(holder),
        body=body,
        app=app,
    )
    # Named after the state replayed (every replay moves `attempts`), never the original task.
    task_id = task_id_for(
        delivery.source, delivery.delivery_id, "replay", str(delivery.attempts), delivery.status
    )
    try:
        result = hand_to_worker(
            cfg, runtime.build_sealer(cfg), runtime.task_queue(), envelope, task_id
        )
    except Exception as exc:
        # Put the status back, so the record does not claim a replay is on its way.
        runtime.ledger().deliveries.mark(delivery.source, delivery.delivery_id, delivery.status)
        raise CliError(f"delivery {label}: enqueueing the replay failed: {exc}") from exc
    return {
        "id": label,
        "task": result.task_name,
        "status": result.status,
        "previous_status": delivery.status,
        "worker_url": cfg.worker_url,
    }
