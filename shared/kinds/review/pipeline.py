"""The reference pipeline: a push to the default branch becomes one Gemini batch of reviews.

Creating a batch is not idempotent, and the push delivery may be retried (a file that
failed to fetch, a crash). A submission (`ledger.claim_submission`, keyed by the batch's
tag) is claimed before the batch is created and holds its name afterwards:

    attempt 1: claim submission ─ create batch ─✗ crash before recording the name
    attempt 2: claim exists, no name ─ look for a batch tagged review:{repo}@{sha} ─ adopt it

so a retry never creates a second batch. The batch's `display_name` carries the tag,
which is also how reconcile recognises an orphan.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from shared import logs
from shared.clock import Clock, system_clock
from shared.gemini import GeminiGateway
from shared.github import ContentsClient, GitHubRejected, GitHubUnavailable, parse_push, reviewable
from shared.handlers import Done, Ignored, PermanentError, RetryableError
from shared.kinds.review import KIND, review_tag
from shared.ledger import Ledger

log = logs.get_logger("review")

# How long another delivery's claim on a push is honoured before this one takes over.
CLAIM_FRESH_FOR = timedelta(minutes=10)
PROMPT = (
    "You review Markdown documentation. Point out unclear sentences, broken structure and "
    "factual slips, briefly, as a bulleted list.\n\nFile: {path}\n\n{text}"
)


@dataclass(frozen=True)
class ReviewDeps:
    ledger: Ledger
    gemini: GeminiGateway
    github: ContentsClient
    review_path: str
    model: str
    clock: Clock = system_clock


def review_push(payload: dict[str, Any], delivery_id: str, deps: ReviewDeps) -> Done | Ignored:
    """Submit one batch for the push's reviewable files; safe to call again for the same push."""
    try:
        push = parse_push(payload)
    except ValueError as exc:
        raise PermanentError(f"delivery {delivery_id}: {exc}") from exc
    if push.deleted or not push.to_default_branch:
        return Ignored(f"{push.ref} is not a push to {push.default_branch}")
    paths = reviewable(push.changed, deps.review_path)
    if not paths:
        return Ignored(f"{push.repo}@{push.sha[:12]}: no Markdown files to review")

    files = _fetch_all(push.repo, push.sha, paths, deps.github, delivery_id)
    tag = review_tag(push.repo, push.sha)
    name = _existing_batch(deps.ledger, tag, deps.gemini, delivery_id, deps.clock())
    if name is None:
        requests = [(path, PROMPT.format(path=path, text=files[path])) for path in paths]
        name = deps.gemini.create_batch(deps.model, requests, display_name=tag)
        # Register at once: from here on reconcile can find it even if we crash.
        deps.ledger.register(name, KIND, {"repo": push.repo, "sha": push.sha, "paths": paths})
        deps.ledger.update_submission(tag, operation=name)
        logs.event(
            log,
            logging.INFO,
            "review batch submitted",
            operation=name,
            delivery_id=delivery_id,
            repo=push.repo,
            files=len(paths),
        )
        return Done(f"submitted {name} for {len(paths)} file(s)")
    deps.ledger.register(name, KIND, {"repo": push.repo, "sha": push.sha, "paths": paths})
    return Done(f"already submitted as {name}")


def _fetch_all(
    repo: str, sha: str, paths: list[str], github: ContentsClient, delivery_id: str
) -> dict[str, str]:
    """Every file's text, or an error naming each file that failed."""
    files: dict[str, str] = {}
    transient: list[str] = []
    for path in paths:
        try:
            files[path] = github.fetch(repo, path, sha).decode("utf-8", errors="replace")
        except GitHubUnavailable as exc:
            logs.event(
                log,
                logging.ERROR,
                f"fetch failed for {path}",
                path=path,
                repo=repo,
                sha=sha,
                delivery_id=delivery_id,
                reason=str(exc),
            )
            transient.append(path)
        except GitHubRejected as exc:
            logs.event(
                log,
                logging.ERROR,
                f"fetch rejected for {path}",
                path=path,
                repo=repo,
                sha=sha,
                delivery_id=delivery_id,
                reason=str(exc),
            )
            raise PermanentError(f"{repo}@{sha[:12]}: {path}: {exc}") from exc
    if transient:
        raise RetryableError(f"{repo}@{sha[:12]}: could not fetch {', '.join(transient)}")
    return files


def _existing_batch(
    ledger: Ledger, tag: str, gemini: GeminiGateway, delivery_id: str, now: datetime
) -> str | None:
    """The batch already created for `tag`; None when this delivery may create it.

    Two deliveries of one push (a repository and an organisation hook) may race: the
    first claims the submission, the other waits for it (a retry) while the claim is fresh.
    """
    stored = ledger.claim_submission(tag, delivery_id, now)
    if stored is None:
        return None  # first attempt: we own the submission
    if stored.operation:
        return stored.operation
    # An earlier attempt claimed the submission but crashed around the create call.
    for batch in gemini.list_batches():
        if batch.display_name == tag:
            ledger.update_submission(tag, operation=batch.name)
            return batch.name
    claimed_at = stored.claimed_at
    fresh = isinstance(claimed_at, datetime) and now - claimed_at < CLAIM_FRESH_FOR
    if stored.claimed_by not in (None, delivery_id) and fresh:
        raise RetryableError(f"{tag}: delivery {stored.claimed_by} is submitting this push")
    ledger.update_submission(tag, claimed_by=delivery_id, claimed_at=now)
    return None
