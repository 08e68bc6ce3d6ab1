"""The review kind's behaviour: adoption, the write-back and what the settlement publishes.

- `pipeline.py`: a GitHub push becomes one batch (exactly-once submission, tagged
  display name `hookledger:review:{repo}@{sha}`);
- `findings.py`: the structured answer asked of Gemini (summary, findings with lines and
  severity) and its tolerant reader;
- here: the orphan adopter, the write-back (one `reviews` document per file, in the
  settling commit, `status` "ok" or "error" per file: one file's failure never blocks
  the others) and the outbox items that publish the reviews on GitHub: the check run
  "hookledger review" (`check_runs.py`, started with the push's winner, completed by the
  settlement; on with a GitHub App, `GITHUB_CHECK_RUNS`) and one commit comment
  (`comments.py`, only when `GITHUB_COMMENTS=true`).

The kind is registered by the app (apps/review/__init__.py); see docs/apps.md.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from apps.review import KIND, RERUN_MARK, REVIEW, app, check_runs, comments, review_tag
from apps.review.findings import parse_review
from apps.review.results import put_review
from shared import api
from shared.api import PermanentError, TransientError
from shared.api.gemini import TERMINAL_STATES, GeminiRowsUnread

if TYPE_CHECKING:
    from shared.api.gemini import BatchStatus, BatchSummary, GeminiGateway, Row
    from shared.api.ledger import Operation

log = api.get_logger("review")

GEMINI_REFUSED = (api.REQUEST_REFUSED, api.DEPLOYMENT_REFUSED)

__all__ = ["KIND", "RERUN_MARK", "REVIEW", "ReviewOptions", "review_tag", "start_items"]


@dataclass(frozen=True)
class ReviewOptions:
    """The review's publishing switches, from its settings (apps/review/__init__.py)."""

    github_comments: bool = False
    # The review as a GitHub check run (check_runs.py).
    github_check_runs: bool = False
    console_url: str = ""  # a check run's details link: the operation's console page

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any] | None = None) -> ReviewOptions:
        values = app.settings() if settings is None else settings
        check_runs = values["GITHUB_CHECK_RUNS"]
        if check_runs is None:  # unset: on when a GitHub App is configured
            check_runs = bool(os.environ.get("GITHUB_APP_ID", "").strip())
        return cls(
            github_comments=bool(values["GITHUB_COMMENTS"]),
            github_check_runs=bool(check_runs),
            console_url=str(values["CONSOLE_URL"]),
        )


MAX_REVIEW_CHARS = 100_000
MAX_ERROR_CHARS = 4_000


def adopt(key: str, batch: BatchSummary, gemini: GeminiGateway) -> dict[str, Any]:
    """Context for an orphan review batch: repo and sha from its tag, paths from its rows."""
    repo, at, sha = key.split(RERUN_MARK, 1)[0].rpartition("@")
    if not at or not repo or not sha:
        raise PermanentError(f"batch {batch.name}: tag {batch.display_name!r} names no repo@sha")
    paths: list[str] = []
    if batch.state in TERMINAL_STATES:  # a running batch has no rows yet: write-back uses rows
        fetched = gemini.fetch_batch(batch.name)
        if not fetched.rows_complete:  # partial paths would drop the unread files' reviews
            raise GeminiRowsUnread(f"{batch.name}: rows unread ({fetched.rows_unread})")
        paths = [row.key for row in fetched.rows if row.key]  # rows that echo no key: unknown
    return {"repo": repo, "sha": sha, "paths": paths}


def write_reviews(writes: Any, record: Operation, batch: BatchStatus) -> None:
    """One `reviews` document per file, each on its own: `status` "ok" with the model's
    `text` (`truncated` and `finish_reason` "MAX_TOKENS" when Gemini cut it short) — for a
    structured answer (`findings.py`) its summary, with `findings` (a list of
    `{start_line, end_line, severity, title, message}`), the model's `conclusion` when it
    gave one and `findings_dropped` when some were unusable or past the bound — or
    "error" with the reason (a blocked prompt or withheld answer with its block or finish
    reason and safety ratings, an empty answer, the row's error, the batch's, no result,
    or the fetch refused at submission: context `refused`).

    A row that cannot be read (any exception: a bug, or JSON nested past the recursion
    limit) or a review that cannot be stored (Firestore would refuse it) gets an error
    review naming why, so one file never blocks the others (an escaping exception would
    hold back every file's review until the batch is gone). Only a `TransientError` from
    the writes propagates (retry), and a file whose error review cannot be recorded either
    raises (a `PermanentError`: the ledger then settles with the error on the operation).
    """
    repo, sha = record.context.get("repo", ""), record.context.get("sha", "")
    for path, fields in _review_fields(record, batch):
        try:
            put_review(writes, repo, sha, path, fields)
        except TransientError:
            raise
        except Exception as exc:
            reason = str(exc) if isinstance(exc, PermanentError) else f"{type(exc).__name__}: {exc}"
            put_review(writes, repo, sha, path, _error(f"review could not be stored: {reason}"))


def _review_fields(record: Operation, batch: BatchStatus) -> list[tuple[str, dict[str, Any]]]:
    """(path, fields) of every file the push asked for, reviewed or refused; one per path."""
    # Settlement placed the rows (`request_keys`); an unplaced row answers no file.
    rows = {row.key: row for row in batch.rows if not row.unplaced and row.key}
    failed = batch.terminal_status != "succeeded"
    batch_error = (batch.error or {}).get("message") if failed else None
    # Gemini refused this push's request (or the deployment): a failure to act on.
    refused = failed and (batch.error or {}).get("reason") in GEMINI_REFUSED
    reviews: dict[str, dict[str, Any]] = {}
    # An orphan adopted while still running was registered without its paths: use the rows.
    for path in record.context.get("paths") or list(rows):
        row = rows.get(path)
        if row is None:
            fields = _error(batch_error or f"no result for {path} in {record.name}")
            if refused:
                fields["refused"] = True
        else:
            try:
                fields = _from_row(row)
            except Exception as exc:  # this file's answer only: the others still get theirs
                api.log_event(
                    log,
                    logging.WARNING,
                    f"{record.name}: the answer for {path} could not be parsed; "
                    "its review is an error",
                    operation=record.name,
                    path=path,
                    reason=f"{type(exc).__name__}: {exc}",
                    exc_info=True,  # a bug shows where it is
                )
                fields = _error(f"review could not be parsed: {type(exc).__name__}: {exc}")
        reviews.setdefault(path, fields)
    for refused in record.context.get("refused") or []:
        if isinstance(refused, Mapping) and isinstance(refused.get("path"), str):
            reviews.setdefault(refused["path"], _error(str(refused.get("error") or "refused")))
    return list(reviews.items())


def _from_row(row: Row) -> dict[str, Any]:
    if row.error is not None:
        fields = _error(row.error)
        if row.blocked:
            fields["blocked"] = True
    else:
        fields = _text(row.text or "")
        if row.truncated:
            fields["truncated"] = True
    if row.finish_reason and row.finish_reason != "STOP":  # STOP: the usual, not worth a field
        fields["finish_reason"] = row.finish_reason
    if row.block_reason:
        fields["block_reason"] = row.block_reason
    return fields


def _text(text: str) -> dict[str, Any]:
    """An "ok" review: structured (summary as `text`, `findings`) when the answer is one,
    else the answer as `text`, as before structured output."""
    parsed = parse_review(text)
    fields: dict[str, Any] = {"status": "ok"}
    if parsed is not None:
        text = parsed.summary
        fields["findings"] = parsed.findings
        if parsed.conclusion is not None:
            fields["conclusion"] = parsed.conclusion
        if parsed.dropped:
            fields["findings_dropped"] = parsed.dropped
    if len(text) <= MAX_REVIEW_CHARS:
        return {**fields, "text": text}
    return {**fields, "text": text[:MAX_REVIEW_CHARS] + "…", "truncated": True}


def _error(reason: str) -> dict[str, Any]:
    clipped = reason if len(reason) <= MAX_ERROR_CHARS else reason[:MAX_ERROR_CHARS] + "…"
    return {"status": "error", "error": clipped}


def outbox(
    record: Operation, batch: BatchStatus, options: ReviewOptions | None = None
) -> Sequence[Mapping[str, Any]]:
    """What the settlement publishes on GitHub: the check run's completion when the push
    has one (`check_runs.py`), and one commit comment when comments are switched on."""
    options = options or ReviewOptions.from_settings()
    items: list[Mapping[str, Any]] = []
    if check_runs.has_start(record) or options.github_check_runs:
        finish = check_runs.item(
            check_runs.FINISH,
            record.context,
            record.name,
            record.submission or "",
            options.console_url,
        )
        if finish is not None:
            items.append(finish)
    repo, sha = record.context.get("repo"), record.context.get("sha")
    if not options.github_comments or not repo or not sha:
        return items
    installation = record.context.get("installation_id")
    installation_id = installation if type(installation) is int else None
    return [*items, comments.item(repo, sha, record.name, installation_id)]


def start_items(
    context: Mapping[str, Any], name: str, tag: str, options: ReviewOptions
) -> list[dict[str, Any]]:
    """Items recorded with the push's winner `name`: its check run shown `in_progress`,
    when check runs are on and the push came through a GitHub App."""
    if not options.github_check_runs:
        return []
    start = check_runs.item(check_runs.START, context, name, tag, options.console_url)
    return [start] if start is not None else []
