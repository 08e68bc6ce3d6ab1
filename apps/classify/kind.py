"""The classify kind's behaviour: the answer's label, the write-back, and adoption.

The write-back stages one `classifications/{doc_id(submission, item)}` document per item
the submission asked for, in the settling commit (so exactly once, with the status):

    submission, item   the submission id and the item's id
    label              one of the submission's labels, or None
    confidence         the model's confidence, a number in 0..1, or None
    status             "ok" (a label) or "error" (no usable answer)
    error              why not, or None

An item whose row failed, is missing, or whose answer is no JSON object naming one of the
labels gets an error document; one item's failure never blocks the others' (any
exception from reading a row or staging its document is that item's error; only a
`TransientError` propagates, to retry the whole settlement).
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from apps.classify import COLLECTION, app
from shared import api
from shared.api.gemini import TERMINAL_STATES, GeminiRowsUnread

if TYPE_CHECKING:
    from shared.api.gemini import BatchStatus, BatchSummary, GeminiGateway, Row
    from shared.api.ledger import Operation

log = api.get_logger("classify")

MAX_ERROR_CHARS = 2_000
_FENCE = re.compile(r"^```[a-zA-Z]*\s*\n(.*)\n```\s*$", re.DOTALL)


class LabelError(ValueError):
    """An answer that names no usable label."""


@dataclass(frozen=True)
class Answer:
    label: str
    confidence: float | None


def parse_label(text: str, labels: Sequence[str]) -> Answer:
    """The label (one of `labels`, matched ignoring case and surrounding spaces) and the
    confidence (a finite number, clipped to 0..1; None when absent or not a number) of
    one answer. `LabelError` when the answer is no JSON object with a string `label`
    that is one of `labels`. A Markdown code fence around the JSON is dropped."""
    stripped = (text or "").strip()
    fenced = _FENCE.match(stripped)
    if fenced:
        stripped = fenced.group(1).strip()
    try:
        answer = json.loads(stripped)
    except ValueError:
        raise LabelError(f"the answer is not JSON: {_clip(stripped, 200)!r}") from None
    if not isinstance(answer, dict):
        raise LabelError(f"the answer is not a JSON object: {_clip(stripped, 200)!r}")
    raw = answer.get("label")
    if not isinstance(raw, str) or not raw.strip():
        raise LabelError(f"the answer has no label: {_clip(stripped, 200)!r}")
    by_folded = {label.strip().casefold(): label for label in labels}
    label = by_folded.get(raw.strip().casefold())
    if label is None:
        raise LabelError(f"label {_clip(raw, 100)!r} is not one of {list(labels)}")
    return Answer(label, _confidence(answer.get("confidence")))


def _confidence(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    if not math.isfinite(number):
        return None
    return min(1.0, max(0.0, number))


def adopt(key: str, batch: BatchSummary, gemini: GeminiGateway) -> dict[str, Any]:
    """Context for an orphan classify batch: the submission from its tag, the item ids
    from its rows once it is terminal (a running batch has none yet: adoption then waits,
    `needs` keys). Rows not all read raise `GeminiRowsUnread` (retried): partial keys
    would drop the unread items' documents."""
    if not key:
        raise api.PermanentError(f"batch {batch.name}: tag {batch.display_name!r} names no id")
    keys: list[str] = []
    if batch.state in TERMINAL_STATES:
        fetched = gemini.fetch_batch(batch.name)
        if not fetched.rows_complete:
            raise GeminiRowsUnread(f"{batch.name}: rows unread ({fetched.rows_unread})")
        keys = [row.key for row in fetched.rows if row.key]
    return {"keys": keys, "submission": key}


def write_classifications(writes: Any, record: Operation, batch: BatchStatus) -> None:
    """One `classifications` document per item of the submission, each on its own."""
    submission = str(record.context.get("submission") or "")
    if not submission:
        raise api.PermanentError(f"{record.name}: its context names no submission")
    for item, fields in classification_fields(record, batch):
        try:
            put_classification(writes, submission, item, fields)
        except api.TransientError:
            raise
        except Exception as exc:
            reason = str(exc) if isinstance(exc, api.PermanentError) else _described(exc)
            put_classification(
                writes, submission, item, error(f"classification could not be stored: {reason}")
            )


def put_classification(writes: Any, submission: str, item: str, fields: Mapping[str, Any]) -> str:
    """Stage the document of `item` of `submission`; returns its id."""
    try:
        doc = api.doc_id(submission, item)
    except ValueError as exc:
        raise api.PermanentError(f"classification {submission}/{item!r}: {exc}") from exc
    body = {"submission": submission, "item": item, **fields}
    return str(writes.put(COLLECTION, doc, body))


def classification_fields(
    record: Operation, batch: BatchStatus
) -> list[tuple[str, dict[str, Any]]]:
    """(item, fields) of every item asked for: its row's label, or the reason it has none."""
    rows: dict[str, Row] = {}
    for placed in batch.rows:  # settlement placed them by request key; unplaced answer nothing
        if not placed.unplaced and placed.key:
            rows.setdefault(placed.key, placed)
    failed = batch.terminal_status != "succeeded"
    batch_error = (batch.error or {}).get("message") if failed else None
    batch_reason = batch_error or (f"batch {batch.terminal_status}" if failed else None)
    labels = _labels(record)
    keys = record.context.get("keys")
    items = [str(k) for k in keys] if isinstance(keys, list) and keys else list(rows)
    found: dict[str, dict[str, Any]] = {}
    for item in items:
        if item in found:
            continue
        row = rows.get(item)
        if row is None:
            found[item] = error(batch_reason or f"no result for {item} in {record.name}")
            continue
        try:
            found[item] = from_row(row, labels)
        except Exception as exc:  # this item only: the others still get theirs
            api.log_event(
                log,
                logging.WARNING,
                f"{record.name}: the answer for {item} could not be read; its document is an error",
                operation=record.name,
                item=item,
                reason=_described(exc),
                exc_info=True,
            )
            found[item] = error(f"answer could not be read: {_described(exc)}")
    return list(found.items())


def from_row(row: Row, labels: Sequence[str]) -> dict[str, Any]:
    """The fields of one row: "ok" with its label and confidence, or "error" with why not."""
    if row.error is not None:
        return error(row.error)
    if not row.text:
        return error("empty answer" + (f" ({row.finish_reason})" if row.finish_reason else ""))
    try:
        answer = parse_label(row.text, labels)
    except LabelError as exc:
        reason = str(exc)
        if row.truncated:
            reason += " (the answer was cut short: MAX_TOKENS)"
        return error(reason)
    return {"label": answer.label, "confidence": answer.confidence, "status": "ok", "error": None}


def error(reason: str) -> dict[str, Any]:
    return {"label": None, "confidence": None, "status": "error", "error": _clip(reason)}


def _labels(record: Operation) -> list[str]:
    """The labels the submission offered; an adopted orphan's context may lack them (its
    claim never recorded): then the labels configured now."""
    stored = record.context.get("labels")
    if isinstance(stored, list) and stored and all(isinstance(x, str) for x in stored):
        return list(stored)
    return [str(label) for label in app.settings()["CLASSIFY_LABELS"]]


def _described(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _clip(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    return text if len(text) <= limit else text[:limit] + "…"
