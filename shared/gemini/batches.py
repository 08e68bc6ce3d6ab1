"""What Gemini reports about an operation, as hookledger reads it.

`BatchStatus` (an operation's state, rows, error and counts), `BatchStats` (Gemini's own
request counts), `BatchSummary` (one row of a listing), and the readers that turn the
shapes Gemini answers with into them: inline responses into rows, `batchStats` and the
SDK's `completion_stats` into counts, an interaction's `errors[]` and a video operation
whose samples safety filtering removed into an error. `GeminiGateway`
(shared/gemini/client.py) makes the calls; nothing here calls Gemini.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple

from shared.gemini.rows import (
    OUTCOMES,
    RESPONSE,
    ROW_ERROR,
    Row,
    place,
    row_from_response,
)
from shared.gemini.states import (
    TERMINAL,
    StateMeaning,
    meaning_of,
)

if TYPE_CHECKING:
    from google.genai import types


class BatchSummary(NamedTuple):
    """One row of `list_batches`."""

    name: str
    display_name: str
    state: str
    create_time: datetime | None


@dataclass(frozen=True)
class BatchStats:
    """Gemini's own request counts for a batch: `metadata.batchStats` (Gemini API; the SDK's
    mldev mapping drops it, so it is read from the raw JSON) or the SDK's
    `BatchJob.completion_stats` (filled on Vertex only). See docs/gemini-coverage.md."""

    requests: int | None
    succeeded: int
    failed: int


@dataclass(frozen=True)
class BatchStatus:
    """What Gemini reports about one operation now.

    `state` is the value the SDK reports (a `JobState` for batches and other operations,
    the Interactions API `status` for an interaction); what it means comes from the one
    table in shared/gemini/states.py (`meaning`). `rows_unread` is None when `rows` holds
    every result row Gemini has for it (or it has none to give), else why they could not
    be read; `Settler` refuses to settle a succeeded batch whose rows are not complete
    (until the results file's retention is nearly over: docs/architecture.md,
    "Settlement"). An interaction's output is its one row (key: the interaction's name).
    `ended_at` is the batch's `endTime`; `stats` Gemini's own counts, when it gave them.
    """

    name: str
    state: str
    display_name: str = ""
    error: dict[str, Any] | None = None
    rows: tuple[Row, ...] = field(default_factory=tuple)
    rows_unread: str | None = None
    ended_at: datetime | None = None
    stats: BatchStats | None = None

    @property
    def meaning(self) -> StateMeaning:
        return meaning_of(self.state)

    @property
    def rows_complete(self) -> bool:
        return self.rows_unread is None

    @property
    def terminal_status(self) -> str | None:
        """`succeeded`/`failed`/`cancelled`/`expired`, or None while it is not terminal."""
        meaning = self.meaning
        return meaning.status if meaning.kind == TERMINAL else None

    @property
    def partial(self) -> bool:
        """Settled `succeeded` with some results missing (JOB_STATE_PARTIALLY_SUCCEEDED)."""
        return self.meaning.partial

    @property
    def incomplete(self) -> bool:
        """An interaction that completed with incomplete results (`incomplete`)."""
        return self.meaning.incomplete

    @property
    def waits_for(self) -> str | None:
        """What a waiting operation waits for (an interaction's `requires_action`…)."""
        return self.meaning.waits_for

    @property
    def outcome(self) -> dict[str, Any]:
        """The flags a settlement records beside its status (`partial`, `incomplete`)."""
        flags = {"partial": self.partial, "incomplete": self.incomplete}
        return {key: True for key, value in flags.items() if value}

    def row(self, key: str) -> Row | None:
        """The row answering the request `key`; None when Gemini gave none for it."""
        return next((row for row in self.rows if row.key == key and not row.unplaced), None)

    @property
    def all_rows_failed(self) -> bool:
        return bool(self.rows) and all(row.error is not None for row in self.rows)

    def placed(self, keys: Sequence[str]) -> BatchStatus:
        """This status with every row under the request it answers (`rows.place`)."""
        return replace(self, rows=place(self.rows, keys))

    def result_counts(self) -> dict[str, int]:
        """Rows per outcome: `succeeded`, `failed`, `blocked`, `truncated` (every key present)."""
        counts = dict.fromkeys(OUTCOMES, 0)
        for row in self.rows:
            counts[row.outcome] += 1
        return counts

    def stats_mismatch(self) -> dict[str, Any] | None:
        """How the rows read disagree with Gemini's `stats`, or None (agree, or no stats).

        Gemini counts a request `successful` when it answered, whatever the answer held
        (a blocked prompt too), and `failed` when the row is an error: compared with the
        rows' `origin`. A results-file line that could not be read counts as neither.
        """
        if self.stats is None:
            return None
        answered = sum(1 for row in self.rows if row.origin == RESPONSE)
        failed = sum(1 for row in self.rows if row.origin == ROW_ERROR)
        ours = {"rows": len(self.rows), "succeeded": answered, "failed": failed}
        theirs = {
            "rows": self.stats.requests if self.stats.requests is not None else len(self.rows),
            "succeeded": self.stats.succeeded,
            "failed": self.stats.failed,
        }
        return None if ours == theirs else {"rows_read": ours, "batch_stats": theirs}


def batch_name(name: str) -> str:
    """Accept `batches/abc` or a bare `abc`."""
    return name if name.startswith("batches/") else f"batches/{name}"


def inline_rows(responses: Sequence[types.InlinedResponse]) -> tuple[Row, ...]:
    """The rows of a batch whose results came inline (`dest.inlined_responses`)."""
    rows = []
    for index, item in enumerate(responses):
        key = (item.metadata or {}).get("key") or ""  # "" → placed by its position
        if item.error is not None:
            reason = item.error.message or f"code {item.error.code}"
            rows.append(Row(key=key, error=reason, origin=ROW_ERROR, index=index))
        else:
            body = (
                item.response.model_dump(mode="json", by_alias=True, exclude_none=True)
                if item.response is not None
                else {}
            )
            rows.append(row_from_response(key, body, index=index))
    return tuple(rows)


def raw_batch_stats(metadata: Any) -> BatchStats | None:
    """`metadata.batchStats` of a batch's raw JSON (the SDK drops it); None when Gemini
    gave none or it does not parse."""
    stats = metadata.get("batchStats") if isinstance(metadata, dict) else None
    if not isinstance(stats, dict):
        return None
    try:  # int64 fields arrive as JSON strings
        requests = stats.get("requestCount")
        return BatchStats(
            requests=int(requests) if requests is not None else None,
            succeeded=int(stats.get("successfulRequestCount") or 0),
            failed=int(stats.get("failedRequestCount") or 0),
        )
    except (TypeError, ValueError):
        return None


def completion_stats(job: types.BatchJob) -> BatchStats | None:
    """The SDK's `completion_stats` (Vertex only: its type says "not supported in Gemini API")."""
    stats = job.completion_stats
    if stats is None or stats.successful_count is None:
        return None
    return BatchStats(
        requests=None, succeeded=stats.successful_count, failed=stats.failed_count or 0
    )


def interaction_error(body: dict[str, Any]) -> dict[str, Any] | None:
    """`{"code", "message"}` from an interaction's `errors[]` (every message, in order),
    or from a single `error` as older shapes carry it; None when it has neither."""
    errors = [e for e in body.get("errors") or [] if isinstance(e, dict)]
    if errors:
        messages = [str(e.get("message") or f"code {e.get('code')}") for e in errors]
        return {"code": errors[0].get("code"), "message": "; ".join(messages), "errors": errors}
    error = body.get("error")
    return error if isinstance(error, dict) else None


def safety_filtered(response: Any) -> dict[str, Any] | None:
    """The failure of a video operation whose every sample safety filtering removed: no
    `generatedSamples` and `raiMediaFilteredCount` > 0; None for any other response."""
    if not isinstance(response, dict):
        return None
    video = response.get("generateVideoResponse")
    if not isinstance(video, dict) or video.get("generatedSamples"):
        return None
    try:
        count = int(video.get("raiMediaFilteredCount") or 0)
    except (TypeError, ValueError):
        count = 0
    if count <= 0:
        return None
    reasons = [str(r) for r in video.get("raiMediaFilteredReasons") or []]
    return {
        "message": f"{count} video sample(s) removed by safety filters: "
        + ("; ".join(reasons) or "no reason given"),
        "rai_media_filtered_count": count,
        "rai_media_filtered_reasons": reasons,
    }
