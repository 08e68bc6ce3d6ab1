"""A realistic stored trace for the console's waterfall tests: one push whose webhook
was dropped, its first worker attempt failing, settled by a reconcile check 3 minutes
later (span names and attributes as docs/architecture.md "Tracing" lists them)."""

from __future__ import annotations

from typing import Any

from shared.tracing.store import StoredSpan

MS = 1_000_000
T0_NS = 1_780_000_000_000 * MS  # 2026-05-28, any fixed instant will do
RECONCILE_AFTER_MS = 182_000  # after the second attempt ends: "3 min 2 s"

# (key, parent key, name, service, start ms, end ms, status, attributes) in start order.
_PUSH: list[tuple[str, str | None, str, str, int, int, str, dict[str, Any]]] = [
    ("request", None, "ingress.request", "ingress", 0, 42, "ok",
     {"hookledger.source": "github", "hookledger.event": "push",
      "hookledger.delivery_id": "{delivery}", "http.response.status_code": 202}),
    ("verify", "request", "ingress.verify", "ingress", 2, 5, "ok", {}),
    ("hand_off", "request", "ingress.hand_off", "ingress", 6, 38, "ok",
     {"hookledger.task_id": "tasks/push-1"}),
    ("create", "hand_off", "tasks.create_task", "ingress", 8, 36, "ok", {}),
    ("attempt1", "create", "worker.attempt", "worker", 120, 420, "error",
     {"hookledger.delivery_id": "{delivery}", "cloudtasks.retry_count": 0,
      "cloudtasks.execution_count": 1, "http.response.status_code": 503,
      "hookledger.outcome": "retry"}),
    ("commit1", "attempt1", "firestore.commit", "worker", 125, 140, "ok",
     {"hookledger.subject": "delivery"}),
    ("fetch1", "attempt1", "github.request", "worker", 145, 410, "error",
     {"http.request.method": "GET", "url.path": "/repos/o/r/contents/docs/intro.md",
      "http.response.status_code": 502}),
    ("attempt2", "create", "worker.attempt", "worker", 2520, 3400, "ok",
     {"hookledger.delivery_id": "{delivery}", "cloudtasks.retry_count": 1,
      "cloudtasks.execution_count": 2, "cloudtasks.retry_reason": "HTTP 503",
      "http.response.status_code": 200, "hookledger.outcome": "done"}),
    ("commit2", "attempt2", "firestore.commit", "worker", 2530, 2550, "ok",
     {"hookledger.subject": "delivery"}),
    ("fetch2", "attempt2", "github.request", "worker", 2560, 2700, "ok",
     {"http.request.method": "GET", "url.path": "/repos/o/r/contents/docs/intro.md",
      "http.response.status_code": 200}),
    ("create_batch", "attempt2", "gemini.batches.create", "worker", 2710, 3300, "ok",
     {"hookledger.operation": "{operation}"}),
    ("commit3", "attempt2", "firestore.commit", "worker", 3310, 3390, "ok",
     {"hookledger.subject": "operation"}),
    ("check", "attempt2", "reconcile.check", "reconcile", 3400 + RECONCILE_AFTER_MS,
     3900 + RECONCILE_AFTER_MS, "ok", {"hookledger.operation": "{operation}"}),
    ("get", "check", "gemini.batches.get", "reconcile", 3420 + RECONCILE_AFTER_MS,
     3600 + RECONCILE_AFTER_MS, "ok", {}),
    ("settle", "check", "settle", "reconcile", 3610 + RECONCILE_AFTER_MS,
     3700 + RECONCILE_AFTER_MS, "ok",
     {"hookledger.operation": "{operation}", "hookledger.settled_by": "reconcile"}),
    ("commit4", "settle", "firestore.commit", "reconcile", 3620 + RECONCILE_AFTER_MS,
     3690 + RECONCILE_AFTER_MS, "ok", {"hookledger.subject": "operation"}),
    ("outbox", "check", "outbox.deliver", "reconcile", 3710 + RECONCILE_AFTER_MS,
     3880 + RECONCILE_AFTER_MS, "ok", {"hookledger.outbox_kind": "check_run"}),
    ("post", "outbox", "github.request", "reconcile", 3720 + RECONCILE_AFTER_MS,
     3870 + RECONCILE_AFTER_MS, "ok",
     {"http.request.method": "PATCH", "url.path": "/repos/o/r/check-runs/7",
      "http.response.status_code": 200}),
]  # fmt: skip

# The rows a waterfall of `push_trace` shows, in tree order, with their depth.
PUSH_ROWS = [
    ("ingress.request", 0),
    ("ingress.verify", 1),
    ("ingress.hand_off", 1),
    ("tasks.create_task", 2),
    ("worker.attempt", 3),
    ("firestore.commit", 4),
    ("github.request", 4),
    ("worker.attempt", 3),
    ("firestore.commit", 4),
    ("github.request", 4),
    ("gemini.batches.create", 4),
    ("firestore.commit", 4),
    ("reconcile.check", 4),
    ("gemini.batches.get", 5),
    ("settle", 5),
    ("firestore.commit", 6),
    ("outbox.deliver", 5),
    ("github.request", 6),
]


# The reconcile run's own trace: a check is a child of the push's stored span, linked to it
# and to the run (shared.tracing.span_in); a settlement or delivery inside it, to the push.
RUN_TRACE, RUN_SPAN = "5b8aa5a2d2c872e8321cf37308d69df2", "051581bf3cb55c13"
_LINKED = {"check": True, "settle": False, "outbox": False}


def _links(trace_id: str, key: str) -> tuple[tuple[str, str], ...]:
    if key not in _LINKED:
        return ()
    home = (trace_id, span_id(trace_id, "attempt2"))
    return (home, (RUN_TRACE, RUN_SPAN)) if _LINKED[key] else (home,)


def span_id(trace_id: str, key: str) -> str:
    """The span id `push_trace` gives the span `key` (e.g. "attempt2")."""
    index = [row[0] for row in _PUSH].index(key)
    return f"{int(trace_id[:8], 16) ^ (index + 1):016x}"


def push_trace(
    trace_id: str, delivery: str, operation: str, t0_ns: int = T0_NS
) -> list[StoredSpan]:
    """The stored spans of one push, `delivery`, registering `operation` (module docstring)."""
    spans = []
    for key, parent, name, service, start, end, status, attributes in _PUSH:
        spans.append(
            StoredSpan(
                trace_id=trace_id,
                span_id=span_id(trace_id, key),
                parent_id=span_id(trace_id, parent) if parent else None,
                name=name,
                service=f"hookledger-{service}",
                kind="server" if name in ("ingress.request", "worker.attempt") else "internal",
                start_ns=t0_ns + start * MS,
                end_ns=t0_ns + end * MS,
                status=status,
                error="GitHub answered 502 three times" if status == "error" else None,
                attributes={
                    k: v.format(delivery=delivery, operation=operation) if isinstance(v, str) else v
                    for k, v in attributes.items()
                },
                links=_links(trace_id, key),
            )
        )
    return spans
