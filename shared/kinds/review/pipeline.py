"""The reference pipeline: a push to the default branch becomes one Gemini batch of reviews.

Creating a batch is not idempotent, and the push delivery may be retried (a file that
failed to fetch, a crash). A submission (`ledger.claim_submission`, keyed by the batch's
tag) is claimed before the batch is created and holds its name afterwards:

    attempt 1: claim submission ─ create batch ─✗ crash before recording the name
    attempt 2: claim exists, no name ─ look for a batch tagged review:{repo}@{sha} ─ adopt it

so a retry never creates a second batch. The batch's `display_name` carries the tag,
which is also how reconcile recognises an orphan.

Inputs are checked before anything is fetched: a malformed repository or commit makes the
delivery dead, a repository outside `GITHUB_REPOSITORIES` is ignored, and a path GitHub
would refuse (`check_path`: '..', empty segments, over-long names) is not fetched. Such a
path, and one the Contents API refuses (4xx), is recorded in the operation's context
(`refused`) and gets an error review at settlement: one file never kills the push.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from shared import logs
from shared.clock import Clock, system_clock
from shared.gemini import GeminiGateway
from shared.github import (
    ContentsClient,
    GitHubRejected,
    GitHubUnavailable,
    check_path,
    check_repo,
    check_sha,
    parse_push,
    repository_allowed,
    reviewable,
)
from shared.handlers import Done, Ignored, PermanentError, RetryableError
from shared.kinds.review import KIND, review_tag
from shared.ledger import Ledger

log = logs.get_logger("review")

# How long another delivery's claim on a push is honoured before this one takes over.
CLAIM_FRESH_FOR = timedelta(minutes=10)
# A refused path is stored and logged up to this length (github.MAX_PATH_BYTES is 4096).
MAX_SHOWN_PATH = 4096
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
    # `GITHUB_REPOSITORIES`: globs of the repositories to review; empty reviews every one.
    repositories: tuple[str, ...] = ()


def review_push(payload: dict[str, Any], delivery_id: str, deps: ReviewDeps) -> Done | Ignored:
    """Submit one batch for the push's reviewable files; safe to call again for the same push.

    Nothing is fetched before the repository, commit and every path are checked. Raises
    `PermanentError` for a malformed push or when every file was refused, and
    `RetryableError` when any file could not be fetched for a transient reason.
    """
    try:
        push = parse_push(payload)
        check_repo(push.repo)
        check_sha(push.sha)
    except (ValueError, GitHubRejected) as exc:
        raise PermanentError(f"delivery {delivery_id}: {exc}") from exc
    if push.deleted or not push.to_default_branch:
        return Ignored(f"{push.ref} is not a push to {push.default_branch}")
    if not repository_allowed(push.repo, deps.repositories):
        return Ignored(f"{push.repo} is not in GITHUB_REPOSITORIES")
    paths = reviewable(push.changed, deps.review_path)
    if not paths:
        return Ignored(f"{push.repo}@{push.sha[:12]}: no Markdown files to review")

    files, refused = _fetch_all(push.repo, push.sha, paths, deps.github, delivery_id)
    if not files:
        reasons = "; ".join(f"{path}: {error}" for path, error in refused.items())
        raise PermanentError(f"{push.repo}@{push.sha[:12]}: every file was refused ({reasons})")
    submitted = [path for path in paths if path in files]
    context = {
        "repo": push.repo,
        "sha": push.sha,
        "paths": submitted,
        "refused": [{"path": _storable(p), "error": _clip(e)} for p, e in refused.items()],
    }
    tag = review_tag(push.repo, push.sha)
    name = _existing_batch(deps.ledger, tag, deps.gemini, delivery_id, deps.clock())
    if name is None:
        requests = [(path, PROMPT.format(path=path, text=files[path])) for path in submitted]
        name = deps.gemini.create_batch(deps.model, requests, display_name=tag)
        # Register at once: from here on reconcile can find it even if we crash.
        deps.ledger.register(name, KIND, context)
        deps.ledger.update_submission(tag, operation=name)
        logs.event(
            log,
            logging.INFO,
            "review batch submitted",
            operation=name,
            delivery_id=delivery_id,
            repo=push.repo,
            files=len(submitted),
            refused=len(refused),
        )
        return Done(f"submitted {name} for {len(submitted)} file(s), {len(refused)} refused")
    deps.ledger.register(name, KIND, context)
    return Done(f"already submitted as {name}")


def _fetch_all(
    repo: str, sha: str, paths: list[str], github: ContentsClient, delivery_id: str
) -> tuple[dict[str, str], dict[str, str]]:
    """(text by path, refusal reason by path); `RetryableError` if any fetch was transient.

    A path `check_path` refuses is never fetched; a 4xx refuses only its own file.
    """
    files: dict[str, str] = {}
    refused: dict[str, str] = {}
    transient: list[str] = []
    for path in paths:
        try:
            check_path(path)
            files[path] = github.fetch(repo, path, sha).decode("utf-8", errors="replace")
        except GitHubUnavailable as exc:
            _log_fetch(logging.ERROR, "fetch failed", repo, sha, path, delivery_id, exc)
            transient.append(path)
        except GitHubRejected as exc:
            _log_fetch(logging.WARNING, "fetch refused", repo, sha, path, delivery_id, exc)
            refused[path] = str(exc)
    if transient:
        raise RetryableError(f"{repo}@{sha[:12]}: could not fetch {', '.join(transient)}")
    return files, refused


def _log_fetch(
    level: int, what: str, repo: str, sha: str, path: str, delivery_id: str, exc: Exception
) -> None:
    shown = _storable(path)
    logs.event(
        log,
        level,
        f"{what} for {shown}",
        path=shown,
        repo=repo,
        sha=sha,
        delivery_id=delivery_id,
        reason=str(exc),
    )


def _clip(reason: str, limit: int = 1000) -> str:
    return reason if len(reason) <= limit else reason[:limit] + "…"


def _storable(path: str) -> str:
    """`path` as Firestore and logs can hold it: valid UTF-8, at most MAX_SHOWN_PATH chars."""
    text = path.encode("utf-8", errors="backslashreplace").decode("utf-8")
    return text if len(text) <= MAX_SHOWN_PATH else text[:MAX_SHOWN_PATH] + "…"


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
