"""`status`: counts by status, the oldest pending operation, dead deliveries, stuck alerts.

Counts are Firestore count aggregations (one per status), never a scan of the collection.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import Any

from hookledger.cli.output import Output, age, rfc3339, table
from shared import runtime
from shared.clock import system_clock
from shared.config import FIRESTORE_TIMEOUT_S
from shared.ledger import DELIVERIES, DELIVERY_STATUSES, OPERATIONS, PENDING, TERMINAL_STATUSES
from shared.reconcile import STUCK_ALERTED_AT

OP_STATUSES = (PENDING, *sorted(TERMINAL_STATUSES))
DELIVERY_ORDER = ("queued", "done", "ignored", "dead")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
STUCK_SHOWN = 10


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    status = sub.add_parser("status", parents=[common], help="counts, oldest pending, alerts")
    status.set_defaults(func=cmd_status)


def _count(query: Any) -> int:
    return int(query.count(alias="n").get(timeout=FIRESTORE_TIMEOUT_S)[0][0].value)


def _by_status(collection: str, statuses: tuple[str, ...]) -> dict[str, int]:
    from google.cloud import firestore

    ref = runtime.firestore_client().collection(collection)
    return {
        status: _count(ref.where(filter=firestore.FieldFilter("status", "==", status)))
        for status in statuses
    }


def collect() -> dict[str, Any]:
    """The figures `status` prints, JSON-ready apart from datetimes."""
    from google.cloud import firestore

    client = runtime.firestore_client()
    now = system_clock()
    operations = _by_status(OPERATIONS, OP_STATUSES)
    deliveries = _by_status(DELIVERIES, tuple(s for s in DELIVERY_ORDER if s in DELIVERY_STATUSES))
    oldest_query = (
        client.collection(OPERATIONS)
        .where(filter=firestore.FieldFilter("status", "==", PENDING))
        .order_by("submitted_at")
        .limit(1)
    )
    oldest = None
    for snapshot in oldest_query.stream(timeout=FIRESTORE_TIMEOUT_S):
        data = snapshot.to_dict() or {}
        oldest = {
            "name": data.get("name"),
            "kind": data.get("kind"),
            "submitted_at": data.get("submitted_at"),
            "age_s": int((now - data["submitted_at"]).total_seconds()),
        }
    # Still pending and alerted on: a settled operation keeps its old alert time.
    alerted = (
        client.collection(OPERATIONS)
        .where(filter=firestore.FieldFilter("status", "==", PENDING))
        .where(filter=firestore.FieldFilter(STUCK_ALERTED_AT, ">", _EPOCH))
    )
    stuck = []
    for snapshot in (
        alerted.order_by(STUCK_ALERTED_AT, direction="DESCENDING")
        .limit(STUCK_SHOWN)
        .stream(timeout=FIRESTORE_TIMEOUT_S)
    ):
        data = snapshot.to_dict() or {}
        stuck.append(
            {
                key: data.get(key)
                for key in ("name", "kind", "status", "submitted_at", STUCK_ALERTED_AT)
            }
        )
    return {
        "operations": operations,
        "deliveries": deliveries,
        "dead_deliveries": deliveries.get("dead", 0),
        "oldest_pending": oldest,
        "stuck_alerts": _count(alerted),
        "stuck": stuck,
        "at": now,
    }


def render(data: dict[str, Any]) -> str:
    lines = [
        "operations  " + "  ".join(f"{k} {v}" for k, v in data["operations"].items()),
        "deliveries  " + "  ".join(f"{k} {v}" for k, v in data["deliveries"].items()),
    ]
    oldest = data["oldest_pending"]
    if oldest:
        lines.append(
            f"oldest pending  {oldest['name']} ({oldest['kind']}), "
            f"submitted {rfc3339(oldest['submitted_at'])}, {age(oldest['age_s'])} ago"
        )
    else:
        lines.append("oldest pending  none")
    lines.append(
        f"dead deliveries  {data['dead_deliveries']}"
        + ("  (hookledger deliveries list --status dead)" if data["dead_deliveries"] else "")
    )
    lines.append(f"stuck alerts  {data['stuck_alerts']}")
    if data["stuck"]:
        columns = [
            ("NAME", "name"),
            ("KIND", "kind"),
            ("STATUS", "status"),
            ("SUBMITTED", "submitted_at"),
            ("ALERTED", STUCK_ALERTED_AT),
        ]
        lines.append(table(data["stuck"], columns))
    return "\n".join(lines)


def cmd_status(args: argparse.Namespace, out: Output) -> int:
    data = collect()
    out.emit(data, lambda: render(data))
    return 0
