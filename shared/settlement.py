"""Settle a Gemini operation from what Gemini says now: the one path for webhook and reconcile.

A webhook is only a hint. Whoever learns that an operation may be done (the worker on a
`batch.*` event, reconcile on a poll) calls `settle_from_gemini`, which re-fetches the
batch, and when it is terminal settles it through the ledger with the write-back
registered for the operation's kind, so the result is written exactly once, whoever
arrives first.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from shared import logs
from shared.gemini import BatchStatus, GeminiGateway
from shared.ledger import Ledger, Operation, ResultWrites, Settlement
from shared.ledger import review_doc_id as review_doc_id  # re-exported: one definition

log = logs.get_logger("settlement")

WritebackFn = Callable[[Any, ResultWrites, Operation, BatchStatus], None]
"""`fn(client, writes, record, batch)`: stage a settled batch's results through `writes`.

`client` is kept for existing write-backs; new ones use only `writes` (the ledger names
the collections)."""

_WRITEBACKS: dict[str, WritebackFn] = {}


def writeback(kind: str) -> Callable[[WritebackFn], WritebackFn]:
    """Register the write-back for operations of `kind` (one per kind)."""

    def register(fn: WritebackFn) -> WritebackFn:
        if kind in _WRITEBACKS and _WRITEBACKS[kind] is not fn:
            raise ValueError(f"a write-back for kind {kind!r} is already registered")
        _WRITEBACKS[kind] = fn
        return fn

    return register


@dataclass(frozen=True)
class Outcome:
    """`settled`, `already_settled`, `unknown` (not in the ledger) or `running`."""

    result: str
    status: str | None = None


RUNNING = "running"


def settle_from_gemini(
    ledger: Ledger,
    gemini: GeminiGateway,
    client: Any,
    name: str,
    by: str,
    record: Operation | None = None,
) -> Outcome:
    """Re-fetch `name` from Gemini and settle it if terminal. Gemini errors propagate.

    `record` saves a read when the caller already holds the operation (reconcile's query).
    Either way the settlement commits only if the operation is unchanged since that read;
    a stale record costs a re-read, never a second settlement.
    """
    record = record if record is not None else ledger.get(name)
    if record is None:
        return Outcome(Settlement.UNKNOWN.value)
    if not record.pending:
        return Outcome(Settlement.ALREADY_SETTLED.value, record.status)
    batch = gemini.fetch(record.name)
    status = batch.terminal_status
    if status is None:
        return Outcome(RUNNING)
    if batch.all_rows_failed:
        logs.event(
            log,
            logging.WARNING,
            "batch succeeded but every row failed",
            operation=record.name,
            rows=len(batch.rows),
        )
    fn = _WRITEBACKS.get(record.kind)

    def stage(writes: ResultWrites, current: Operation) -> None:
        if fn is not None:
            fn(client, writes, current, batch)

    error = batch.error if status != "succeeded" else None
    if error is None and status != "succeeded":
        error = {"message": f"batch ended {batch.state}"}
    result = ledger.settle(record.name, status, by, error=error, writeback=stage, expected=record)
    return Outcome(result.value, status)


@writeback("github-review")
def write_reviews(client: Any, writes: ResultWrites, record: Operation, batch: BatchStatus) -> None:
    """One `reviews` document per file: the model's text, the row's error, or the batch's."""
    context = record.context
    repo, sha = context.get("repo", ""), context.get("sha", "")
    rows = {row.key: row for row in batch.rows}
    batch_error = (
        (batch.error or {}).get("message") if batch.terminal_status != "succeeded" else None
    )
    # An orphan adopted while still running was registered without its paths: use the rows.
    for path in context.get("paths") or [row.key for row in batch.rows]:
        row = rows.get(path)
        if row is not None and row.error is None:
            fields: dict[str, Any] = {"text": row.text or ""}
        elif row is not None:
            fields = {"error": row.error}
        else:
            fields = {"error": batch_error or f"no result for {path} in {record.name}"}
        writes.put_review(repo, sha, path, fields)
