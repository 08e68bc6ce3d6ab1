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

from shared import logs, opnames
from shared.gemini import BatchStatus, GeminiGateway
from shared.ledger import Ledger, Operation, Settlement

log = logs.get_logger("settlement")

WritebackFn = Callable[[Any, Any, Operation, BatchStatus], None]
"""`fn(client, txn, record, batch)`: stage Firestore writes for a settled batch on `txn`."""

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

    def stage(txn: Any, current: Operation) -> None:
        if fn is not None:
            fn(client, txn, current, batch)

    error = batch.error if status != "succeeded" else None
    if error is None and status != "succeeded":
        error = {"message": f"batch ended {batch.state}"}
    result = ledger.settle(record.name, status, by, error=error, writeback=stage, expected=record)
    return Outcome(result.value, status)


def review_doc_id(repo: str, sha: str, path: str) -> str:
    """One `reviews` document per (repository, commit, file); Firestore-safe and reversible."""
    return opnames.encode(f"{repo}@{sha}:{path}")


@writeback("github-review")
def write_reviews(client: Any, txn: Any, record: Operation, batch: BatchStatus) -> None:
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
        doc: dict[str, Any] = {"repo": repo, "sha": sha, "path": path, "operation": record.name}
        if row is not None and row.error is None:
            doc["text"] = row.text or ""
        elif row is not None:
            doc["error"] = row.error
        else:
            doc["error"] = batch_error or f"no result for {path} in {record.name}"
        ref = client.collection("reviews").document(review_doc_id(repo, sha, path))
        txn.set(ref, doc)
