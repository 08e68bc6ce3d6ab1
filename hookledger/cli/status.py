"""`status`: counts by status, the oldest pending operation, dead deliveries, stuck alerts.

Every figure comes from the ledger's read-only queries: counts are count aggregations
(one per status), never a scan of a collection.
"""

from __future__ import annotations

import argparse
from typing import Any

from hookledger.cli.output import Output, age, rfc3339, table
from shared.clock import Clock, system_clock
from shared.entrypoints import runtime
from shared.ledger import DELIVERY_STATUSES, OPERATION_STATUSES, STUCK_ALERTED_AT, Ledger
from shared.statuses import DeliveryStatus

STUCK_SHOWN = 10
STUCK_FIELDS = ("name", "kind", "status", "submitted_at", STUCK_ALERTED_AT)


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    status = sub.add_parser("status", parents=[common], help="counts, oldest pending, alerts")
    status.set_defaults(func=cmd_status)


def collect(ledger: Ledger | None = None, clock: Clock = system_clock) -> dict[str, Any]:
    """The figures `status` prints, JSON-ready apart from datetimes."""
    ledger = ledger if ledger is not None else runtime.ledger()
    now = clock()
    # Both in the ledger's display order (shared/ledger/records.py).
    operations = {
        status: ledger.queries.count_operations(status=status) for status in OPERATION_STATUSES
    }
    deliveries = {status: ledger.deliveries.count(status) for status in DELIVERY_STATUSES}
    first = ledger.queries.oldest_pending()
    oldest = None
    if first is not None:
        oldest = {
            "name": first.name,
            "kind": first.kind,
            "submitted_at": first.submitted_at,
            "age_s": int((now - first.submitted_at).total_seconds()),
        }
    # Still pending and alerted on: a settled operation keeps its old alert time.
    stuck = [
        {key: fields[key] for key in STUCK_FIELDS}
        for fields in (record.to_dict() for record in ledger.queries.stuck_alerted(STUCK_SHOWN))
    ]
    return {
        "operations": operations,
        "deliveries": deliveries,
        "dead_deliveries": deliveries.get(DeliveryStatus.DEAD, 0),
        "oldest_pending": oldest,
        "stuck_alerts": ledger.queries.count_stuck_alerted(),
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
