"""The overview's figures, read through the ledger with bounded queries only.

Reads (docs/architecture.md, "Console"): one count aggregation per operation status and
per delivery status, the oldest pending operation (1 document), stuck alerts (count +
at most `STUCK_SHOWN`), dead deliveries (at most `DEAD_SHOWN`), 48 count aggregations
for the settlements chart (24 hours x webhook/reconcile), and at most `LATENCY_SAMPLE`
Gemini webhook deliveries (three fields each, no payload) for the latency chart.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from shared.ledger import DELIVERY_STATUSES, OPERATION_STATUSES, Ledger
from shared.ledger.recoveries import RECOVERY_STATUSES
from shared.statuses import DeliveryStatus

HOURS = 24
STUCK_SHOWN = 10
DEAD_SHOWN = 10
LATENCY_SAMPLE = 500  # newest Gemini webhooks of the last 24 h; the page says when capped


@dataclass(frozen=True)
class Hourly:
    """Per-hour series, oldest hour first; `labels` are "HH:00" in UTC."""

    labels: list[str]
    webhook: list[int]
    reconcile: list[int]
    p50: list[float | None]
    p99: list[float | None]
    latency_samples: int
    latency_capped: bool


def hour_starts(now: datetime) -> list[datetime]:
    """The start of each of the last `HOURS` hours, the current (partial) hour last."""
    current = now.replace(minute=0, second=0, microsecond=0)
    return [current - timedelta(hours=HOURS - 1 - i) for i in range(HOURS)]


def percentile(values: list[float], fraction: float) -> float | None:
    """Nearest-rank percentile; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


def hourly(ledger: Ledger, now: datetime) -> Hourly:
    starts = hour_starts(now)
    ends = [*starts[1:], starts[-1] + timedelta(hours=1)]
    webhook = [
        ledger.console.count_settled("webhook", a, b) for a, b in zip(starts, ends, strict=True)
    ]
    reconcile = [
        ledger.console.count_settled("reconcile", a, b) for a, b in zip(starts, ends, strict=True)
    ]
    sample = ledger.console.webhook_deliveries_since("gemini", starts[0], LATENCY_SAMPLE)
    buckets: list[list[float]] = [[] for _ in starts]
    for fields in sample:
        received, updated = fields.get("received_at"), fields.get("updated_at")
        if fields.get("status") != DeliveryStatus.DONE or received is None or updated is None:
            continue
        index = int((received - starts[0]).total_seconds() // 3600)
        if 0 <= index < HOURS:
            buckets[index].append(max(0.0, (updated - received).total_seconds()))
    return Hourly(
        labels=[f"{s:%H}:00" for s in starts],
        webhook=webhook,
        reconcile=reconcile,
        p50=[percentile(b, 0.50) for b in buckets],
        p99=[percentile(b, 0.99) for b in buckets],
        latency_samples=sum(len(b) for b in buckets),
        latency_capped=len(sample) >= LATENCY_SAMPLE,
    )


def overview(ledger: Ledger, now: datetime) -> dict[str, Any]:
    """Counts, oldest pending, stuck alerts, dead deliveries and the two hourly series."""
    oldest = ledger.queries.oldest_pending()
    return {
        "operations": {s: ledger.queries.count_operations(status=s) for s in OPERATION_STATUSES},
        "deliveries": {s: ledger.deliveries.count(s) for s in DELIVERY_STATUSES},
        "oldest": oldest,
        "oldest_age_s": int((now - oldest.submitted_at).total_seconds()) if oldest else None,
        "stuck_count": ledger.queries.count_stuck_alerted(),
        "stuck": ledger.queries.stuck_alerted(STUCK_SHOWN),
        "dead": ledger.deliveries.listing("dead", DEAD_SHOWN),
        # GitHub deliveries the sweep found failed, by what became of them (shared/recovery).
        "recoveries": {s: ledger.recoveries.count(s) for s in RECOVERY_STATUSES},
        "hourly": hourly(ledger, now),
    }
