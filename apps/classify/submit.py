"""Submitting items to classify: checked, then one Gemini batch, exactly once per id.

    ctx.for_event(event).submit(KIND, submission_id, [(id, prompt), …], context, model=…)
    (claim, create, release on failure, register: one call, shared/handlers/context.py)

The context registered with the batch: `keys` (the item ids in request order: settlement
places rows that echo no key by them), `submission` and `labels` (what the write-back
accepts). Without a webhook event (the CLI) the submission runs under a made-up event
`cli-{submission_id}`, so a second run with the same id finds the first one's batch.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from apps.classify import KIND, app
from shared import api

MAX_ITEMS = 1000
MAX_ID_CHARS = 200
# The submission id is the key of the batch's display name: plain, short characters.
SUBMISSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")

log = api.get_logger("classify")


class ItemError(api.PermanentError):
    """An item that cannot be submitted; `index` is its 0-based position in the input."""

    def __init__(self, index: int, message: str) -> None:
        super().__init__(f"item {index + 1}: {message}")
        self.index = index
        self.detail = message


@dataclass(frozen=True)
class Submitted:
    """What a submission did: `operation` (the batch, when known), `created` (this call
    created it), `detail` (why nothing was created)."""

    operation: str | None
    submission: str
    items: int
    created: bool
    detail: str = ""


def validate_items(items: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """(id, text) of every item, in order. `ItemError` naming the first bad item: each is
    a mapping with a non-empty string `id` (at most MAX_ID_CHARS, unique) and a
    non-empty string `text`; there are 1..MAX_ITEMS of them."""
    if isinstance(items, str | bytes) or not isinstance(items, Sequence):
        raise api.PermanentError(f"items must be a list, got {type(items).__name__}")
    if not items:
        raise api.PermanentError("no items to classify")
    if len(items) > MAX_ITEMS:
        raise api.PermanentError(f"at most {MAX_ITEMS} items per submission, got {len(items)}")
    checked: list[tuple[str, str]] = []
    seen: dict[str, int] = {}
    for index, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise ItemError(index, f"must be an object with id and text, got {type(item).__name__}")
        item_id, text = item.get("id"), item.get("text")
        if not isinstance(item_id, str) or not item_id.strip():
            raise ItemError(index, f'needs a non-empty string "id", got {item_id!r}')
        if len(item_id) > MAX_ID_CHARS:
            raise ItemError(
                index, f"id may have at most {MAX_ID_CHARS} characters, got {len(item_id)}"
            )
        if not isinstance(text, str) or not text.strip():
            raise ItemError(index, f'(id {item_id!r}) needs a non-empty string "text"')
        if item_id in seen:
            raise ItemError(index, f"id {item_id!r} appears twice (first as item {seen[item_id]})")
        seen[item_id] = index + 1
        checked.append((item_id, text))
    return checked


def check_submission_id(submission_id: str) -> str:
    if not isinstance(submission_id, str) or not SUBMISSION_ID.fullmatch(submission_id):
        raise api.PermanentError(
            f"submission id must match {SUBMISSION_ID.pattern}, got {submission_id!r}"
        )
    return submission_id


def prompt(text: str, labels: Sequence[str]) -> str:
    """The request for one item: exactly one of `labels`, and a confidence."""
    choices = ", ".join(labels)
    return (
        "Classify the item below into exactly one of these labels: "
        f"{choices}.\n"
        'Answer as JSON: {"label": one of the labels, "confidence": a number from 0 to 1}.\n'
        "\n--- item ---\n"
        f"{text}\n"
        "--- end of item ---\n"
    )


def generation_config(labels: Sequence[str]) -> dict[str, Any]:
    """The requests' `generationConfig` (REST spelling): JSON with `label` (an enum of
    `labels`) and `confidence` (a number), label first."""
    return {
        "responseMimeType": "application/json",
        "responseSchema": {
            "type": "OBJECT",
            "properties": {
                "label": {"type": "STRING", "enum": list(labels)},
                "confidence": {
                    "type": "NUMBER",
                    "description": "How sure the label is, from 0 to 1.",
                },
            },
            "required": ["label", "confidence"],
            "propertyOrdering": ["label", "confidence"],
        },
    }


def cli_event(submission_id: str, ctx: api.Context) -> api.Event:
    """The event a submission without a webhook runs under (one per submission id)."""
    return api.Event(
        source="hookledger",
        type="classify.submit",
        delivery_id=f"cli-{submission_id}",
        received_at=ctx.clock(),
        body=b"",
    )


def submit_items(
    ctx: api.Context,
    items: Sequence[Mapping[str, Any]],
    *,
    submission_id: str,
    event: api.Event | None = None,
) -> Submitted:
    """Submit `items` as one batch tagged `hookledger:classify:{submission_id}`, once.

    A second call with the same id creates nothing (`created` False, `detail` "already
    submitted as …"). A failed create releases the claim and raises (the next call may
    create). `TransientError` while another run holds the submission's claim.
    """
    checked = validate_items(items)
    check_submission_id(submission_id)
    settings = ctx.settings
    labels = [str(label) for label in settings["CLASSIFY_LABELS"]]
    model = str(settings["CLASSIFY_MODEL"])
    event = event if event is not None else cli_event(submission_id, ctx)
    context: dict[str, Any] = {
        "keys": [item_id for item_id, _ in checked],
        "submission": submission_id,
        "labels": labels,
    }
    requests = [(item_id, prompt(text, labels)) for item_id, text in checked]
    submitted = ctx.for_event(event).submit(
        KIND, submission_id, requests, context, model=model,
        generation_config=generation_config(labels),
    )  # fmt: skip
    if submitted.created:
        api.log_event(
            log,
            logging.INFO,
            f"submitted {len(checked)} items to classify as {submitted.operation}",
            operation=submitted.operation,
            submission=submission_id,
            app=app.name,
        )
    return Submitted(
        submitted.operation,
        submission_id,
        len(checked),
        submitted.created,
        "" if submitted.created else submitted.detail,
    )
