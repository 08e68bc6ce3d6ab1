"""Publishing a push's reviews as ONE GitHub commit comment, however often delivery runs.

The settling commit records an outbox item `{"kind": "github-comment", repo, sha,
operation}` (and `installation_id` when the push came through a GitHub App: the comment
is posted with that installation's token); the ledger delivers it after the commit
(and reconcile's sweep retries it), under a claim with an owner token and a lease
(`item.lease`). The comment carries the PUSH's marker (`push_marker(repo, sha)`: one
comment per push, whichever operation, push or "Re-run", delivers it), and
`publish_once` looks for it before posting:

    attempt 1: no marker → POST → GitHub creates it, the answer is lost (502) → item failed
    attempt 2: marker found → no POST → item delivered      (exactly one comment)

The comment follows the check run's generation (docs/architecture.md, "Re-run"): only the
push's CURRENT operation (`Submission.current_operation`) publishes, and its body comes
from the push's reviews at delivery, so after a re-run settles the one comment is
edited in place to show the newest review. An older generation's item, however late, is
done without a write. Should a re-run become current while an item of the one before
it writes, that write may land after the re-run's own and show the older review: the
item then reads the ledger again and publishes once more (`MAX_GENERATIONS`).

    item of B1 (current)          re-run                              GitHub
    read current: B1
    read reviews (B1's)
                                  B2 registered, current, settles
                                  item of B2: PATCH #7 with B2's ──▶  #7 shows B2
    PATCH #7 with B1's ─────────────────────────────────────────────▶ #7 shows B1
    read current: B2, changed → reviews (B2's) → PATCH #7 ──────────▶ #7 shows B2

The lease is passed on as the publish's `ownership`: every request fits in what is left
of it, ownership is re-read right before the POST or an edit, and newer duplicates are
deleted (docs/architecture.md, "Outbox"). A comment carrying the per-operation marker of
earlier releases (`review_marker(operation)`) counts as already there.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from apps.review.check_runs import left_to_newer, shown_by  # the check run's rule
from apps.review.results import reviews_for_push
from shared import api
from shared.api import DeliveryServices, PermanentError, github

if TYPE_CHECKING:
    from shared.api.github import PublishResult
    from shared.api.ledger import OutboxItem

log = api.get_logger("review")

COMMENT = "github-comment"  # the outbox payload kind delivered here
MAX_COMMENT_CHARS = 60_000  # GitHub refuses comment bodies over 65,536 characters
MAX_FILE_CHARS = 4_000
# How many times one delivery publishes again because a newer generation became current
# while it wrote; each time takes a re-run registered during one publish.
MAX_GENERATIONS = 4


def item(repo: str, sha: str, operation: str, installation_id: int | None = None) -> dict[str, Any]:
    """The outbox payload; small, because the body is built from the ledger at delivery."""
    payload: dict[str, Any] = {"kind": COMMENT, "repo": repo, "sha": sha, "operation": operation}
    if installation_id is not None:
        payload["installation_id"] = installation_id
    return payload


def publish_reviews(item: OutboxItem, services: DeliveryServices) -> None:
    """Make the push's one commit comment show its reviews, when `operation` is the push's
    current generation; an older generation's item writes nothing (module docstring)."""

    payload = item.payload if isinstance(item.payload, Mapping) else {}
    repo, sha, operation = payload.get("repo"), payload.get("sha"), payload.get("operation")
    if not (isinstance(repo, str) and isinstance(sha, str) and isinstance(operation, str)):
        raise PermanentError(f"outbox item {item.idempotency_key}: not a github-comment payload")
    installation_id = payload.get("installation_id")
    if installation_id is not None and (
        isinstance(installation_id, bool) or not isinstance(installation_id, int)
    ):
        raise PermanentError(f"outbox item {item.idempotency_key}: malformed installation_id")
    record = services.ledger.operations.get(operation)
    if record is None:
        raise PermanentError(f"outbox item {item.idempotency_key}: {operation} is not recorded")
    if left_to_newer("review comment", record, services, item):
        return
    shown: str | None = operation
    for _ in range(MAX_GENERATIONS):
        reviews = reviews_for_push(services.ledger, repo, sha)
        result = services.comments.publish_once(
            repo,
            sha,
            push_marker(repo, sha),
            comment_body(sha, reviews),
            ownership=item.lease,
            also=_older_markers(operation, review_marker),
            installation_id=installation_id,
        )
        api.log_event(
            log,
            logging.INFO,
            _outcome(result),
            operation=operation,
            repo=repo,
            sha=sha,
            comment_id=result.comment_id,
            deleted_duplicates=list(result.deleted),
            idempotency_key=item.idempotency_key,
        )
        now = shown_by(record, services)
        if now == shown:
            return
        # A re-run became current while we wrote: ours may have landed after its comment.
        shown = now
    api.log_event(
        log,
        logging.WARNING,
        "review comment: the push's generation kept changing while it was published",
        operation=operation,
        current=shown,
        repo=repo,
        sha=sha,
        idempotency_key=item.idempotency_key,
    )


def review_marker(operation: str) -> str:
    """The per-operation marker of earlier releases (HTML comment); still recognised."""
    if not operation or "--" in operation or ">" in operation or "\n" in operation:
        raise github.GitHubRejected(
            f"operation {operation!r} cannot be put in an HTML comment marker"
        )
    return f"<!-- hookledger:review:{operation} -->"


def push_marker(repo: str, sha: str) -> str:
    """The hidden marker of the ONE review comment of a push (`repo@sha`, HTML comment).

    Lower-cased (GitHub compares names case-insensitively); a name holding `--`, which
    would end an HTML comment, has its dashes escaped as `%2D`.
    """
    github.check_repo(repo)
    name = repo.lower()
    if "--" in name:
        name = name.replace("-", "%2D")
    return f"<!-- hookledger:review:{name}@{github.check_sha(sha).lower()} -->"


def _outcome(result: PublishResult) -> str:
    if result.created:
        return "review comment published"
    if result.updated:
        return "review comment edited to show the current review"
    return "review comment was already there"


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
