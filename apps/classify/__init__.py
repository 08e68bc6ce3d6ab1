"""The classify app: a user's items sorted into labels by one Gemini batch, exactly once.

    hookledger submit --app classify --input items.jsonl [--id SUBMISSION_ID] [--json]

Each item (`{"id": str, "text": str}`) is one request of one Gemini batch (key = the
item's id), asked for one label of `CLASSIFY_LABELS` with a confidence, as structured
output. The batch is submitted exactly once per submission id (display name
`hookledger:classify:{submission_id}`); a Gemini webhook or reconcile settles it, and
the settling commit writes one `classifications/{doc_id(submission, item)}` document
per item: `submission`, `item`, `label`, `confidence`, `status` ("ok" or "error") and
`error`. One item's bad answer never blocks the others. A batch whose creator died
before registering it is adopted by reconcile from its tag.

Built on the public API only (shared/api). This module stays light: the kind's
functions and the submission import their modules when first called.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from shared import api

if TYPE_CHECKING:
    from apps.classify.submit import Submitted
    from shared.api.gemini import BatchStatus, BatchSummary, GeminiGateway
    from shared.api.ledger import Operation

KIND_NAME = "batch-review-classify"
TAG = "classify"
COLLECTION = "classifications"
DEFAULT_LABELS = ("bug", "feature", "question", "other")
MAX_LABEL_CHARS = 100


def _labels_problem(labels: tuple[str, ...]) -> str | None:
    """A problem with the labels setting, or None: at least one, distinct, short."""
    if not labels:
        return "needs at least one label"
    if len(set(labels)) != len(labels):
        return f"labels must be distinct, got {list(labels)}"
    long = [label for label in labels if len(label) > MAX_LABEL_CHARS]
    if long:
        return f"a label may have at most {MAX_LABEL_CHARS} characters, got {long[0][:40]!r}…"
    return None


app = api.App(
    "classify",
    settings=[
        api.Setting("CLASSIFY_MODEL", default="models/gemini-2.5-flash", help="Gemini model"),
        api.Setting(
            "CLASSIFY_LABELS",
            type="list",
            default=DEFAULT_LABELS,
            help="the labels an item may get (comma-separated)",
            check=_labels_problem,
        ),
    ],
    collections=[COLLECTION],
    description="items sorted into labels by one Gemini batch, one document per item",
)


def _writeback(writes: Any, record: Operation, batch: BatchStatus) -> None:
    from apps.classify.kind import write_classifications

    write_classifications(writes, record, batch)


def _adopt(key: str, batch: BatchSummary, gemini: GeminiGateway) -> dict[str, Any]:
    from apps.classify.kind import adopt

    return adopt(key, batch, gemini)


KIND = app.kind(
    api.OperationKind(
        name=KIND_NAME,
        tag=TAG,
        writeback=_writeback,
        adopt=_adopt,
        request_keys=api.context_keys("keys"),
        needs=("keys",),  # the items asked: rows may echo no key
        description="items classified into labels by one Gemini batch",
    )
)


def classify_tag(submission_id: str) -> str:
    """The display name marking a classify batch as ours: `hookledger:classify:{id}`."""
    return KIND.make_tag(submission_id)


def validate_items(items: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """(id, text) of every item, in order; `ItemError` naming the first bad item."""
    from apps.classify.submit import validate_items as validate

    return validate(items)


def submit_items(
    ctx: api.Context,
    items: Sequence[Mapping[str, Any]],
    *,
    submission_id: str,
    event: api.Event | None = None,
) -> Submitted:
    """Submit `items` as one batch, exactly once per `submission_id` (submit.py)."""
    from apps.classify.submit import submit_items as submit

    return submit(ctx, items, submission_id=submission_id, event=event)
