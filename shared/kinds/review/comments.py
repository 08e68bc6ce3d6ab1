"""Publishing a push's reviews as ONE GitHub commit comment, however often delivery runs.

The settling commit records an outbox item `{"kind": "github-comment", repo, sha,
operation}` (and `installation_id` when the push came through a GitHub App: the comment
is posted with that installation's token); the ledger delivers it after the commit
(and reconcile's sweep retries it), under a claim with an owner token and a lease
(`item.lease`). The comment carries the PUSH's marker (`push_marker(repo, sha)`: one
comment per push, whichever operation delivers it), and `publish_once` looks for it
before posting:

    attempt 1: no marker → POST → GitHub creates it, the answer is lost (502) → item failed
    attempt 2: marker found → no POST → item delivered      (exactly one comment)

The lease is passed on as the publish's `ownership`: every request fits in what is left
of it, ownership is re-read right before the POST, and newer duplicates are deleted
after it (docs/architecture.md, "Outbox"). A comment carrying the per-operation marker
of earlier releases (`review_marker(operation)`) counts as already there.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from shared import logs
from shared.errors import PermanentError
from shared.kinds import DeliveryServices, register_deliverer

if TYPE_CHECKING:
    from shared.ledger import OutboxItem

log = logs.get_logger("review")

COMMENT = "github-comment"  # the outbox payload kind delivered here
MAX_COMMENT_CHARS = 60_000  # GitHub refuses comment bodies over 65,536 characters
MAX_FILE_CHARS = 4_000


def item(repo: str, sha: str, operation: str, installation_id: int | None = None) -> dict[str, Any]:
    """The outbox payload; small, because the body is built from the ledger at delivery."""
    payload: dict[str, Any] = {"kind": COMMENT, "repo": repo, "sha": sha, "operation": operation}
    if installation_id is not None:
        payload["installation_id"] = installation_id
    return payload


@register_deliverer(COMMENT)
def publish_reviews(item: OutboxItem, services: DeliveryServices) -> None:
    """Post the push's reviews as one commit comment unless its marker is already there."""
    from shared.github import push_marker, review_marker

    payload = item.payload if isinstance(item.payload, Mapping) else {}
    repo, sha, operation = payload.get("repo"), payload.get("sha"), payload.get("operation")
    if not (isinstance(repo, str) and isinstance(sha, str) and isinstance(operation, str)):
        raise PermanentError(f"outbox item {item.idempotency_key}: not a github-comment payload")
    installation_id = payload.get("installation_id")
    if installation_id is not None and (
        isinstance(installation_id, bool) or not isinstance(installation_id, int)
    ):
        raise PermanentError(f"outbox item {item.idempotency_key}: malformed installation_id")
    reviews = services.ledger.reviews.reviews_for_push(repo, sha)
    result = services.comments.publish_once(
        repo,
        sha,
        push_marker(repo, sha),
        comment_body(sha, reviews),
        ownership=item.lease,
        also=_older_markers(operation, review_marker),
        installation_id=installation_id,
    )
    logs.event(
        log,
        logging.INFO,
        "review comment published" if result.created else "review comment was already there",
        operation=operation,
        repo=repo,
        sha=sha,
        comment_id=result.comment_id,
        deleted_duplicates=list(result.deleted),
        idempotency_key=item.idempotency_key,
    )


def _older_markers(operation: str, review_marker: Callable[[str], str]) -> tuple[str, ...]:
    """The per-operation marker of earlier releases, when the name can carry one."""
    try:
        return (review_marker(operation),)
    except PermanentError:
        return ()


def comment_body(sha: str, reviews: Sequence[Mapping[str, Any]]) -> str:
    """Markdown, one section per file (its summary, then its findings as a list), each
    clipped, the whole under GitHub's limit."""
    parts = [f"**hookledger review** of `{sha[:12]}`", ""]
    for review in sorted(reviews, key=lambda r: str(r.get("path", ""))):
        error = review.get("error")
        if error is not None:
            text = f"_error_: {error}"
        else:
            text = "\n".join([str(review.get("text") or ""), *_finding_lines(review)]).strip()
        if len(text) > MAX_FILE_CHARS:
            text = text[:MAX_FILE_CHARS] + "…"
        parts += [f"### `{review.get('path')}`", "", text, ""]
    body = "\n".join(parts)
    return body if len(body) <= MAX_COMMENT_CHARS else body[:MAX_COMMENT_CHARS] + "\n\n…"


def _finding_lines(review: Mapping[str, Any]) -> list[str]:
    """`- **warning** lines 3-5: title — message`, one per finding ("" before the first)."""
    findings = review.get("findings")
    if not isinstance(findings, list) or not findings:
        return []
    lines = [""]
    for finding in findings:
        if not isinstance(finding, Mapping):
            continue
        start, end = finding.get("start_line"), finding.get("end_line")
        where = f"line {start}" if end in (None, start) else f"lines {start}-{end}"
        title = str(finding.get("title") or "").strip()
        message = " ".join(str(finding.get("message") or "").split())
        said = f"{title} — {message}" if title else message
        lines.append(f"- **{finding.get('severity', 'warning')}** {where}: {said}")
    return lines
