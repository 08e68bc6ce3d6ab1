""" "Re-run" from GitHub: a new review of a commit that supersedes the one its check run shows.

GitHub sends `check_run` `rerequested` when someone presses "Re-run" on our run, and
`check_suite` `rerequested` for "Re-run all checks" (docs.github.com, "Webhook events and
payloads": check_run, check_suite; REST "Rerequest a check run": the run itself is not
updated, the App decides to reset or update it). Both name the repository and the commit
(`check_run.head_sha`, `check_suite.head_sha`). `check_suite` `requested` (every push) is
ignored: the push itself starts the review.

A re-run is ONE delivery with its own exactly-once guarantee: its submission's tag is the
push's tag with `~rerun:{delivery id}`, so a redelivery or an overlapping attempt of the
same delivery claims the same submission and ends with one batch (pipeline.py's
`Submitter`: claim, list, take over, register). A person waits at the check run, so the
batch is its own, created at once (never in a shared batch), with Gemini's
`batch.priority` `api.INTERACTIVE_PRIORITY`: Gemini processes it before the pushes'.
Its winner is registered with `generation_of` = the push's tag: the same commit makes it
the check run's current operation and supersedes a previous one still pending
(ledger/generations.py). Its items publish on the push's run
(`check_runs.CHECK_SUBMISSION`), reset to `in_progress` then completed, their annotations
marked with their operation and counted on the run at publish time
(`checks.annotation_mark`).

The files re-reviewed are the ones the current operation reviewed (its context's
`paths` and `refused`), fetched again at the same commit. Checks before anything is
fetched, like a push: malformed repo or sha → dead; a run not named "hookledger review",
a repository outside `GITHUB_REPOSITORIES`, an installation that refuses the repository,
a commit we never reviewed → ignored. docs/architecture.md, "Re-run".
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from apps.review import rerun_refusal
from apps.review.check_runs import CHECK_RUN, CHECK_SUBMISSION
from apps.review.findings import GENERATION_CONFIG
from apps.review.installations import installation_refusal
from apps.review.kind import KIND, RERUN_MARK, review_tag
from apps.review.pipeline import (
    ReviewDeps,
    Submitter,
    _fetch_all,
    _installation,
    _storable,
    prompt,
)
from shared import api
from shared.api import Attempt, Deferred, Done, Ignored, PermanentError, crash_point
from shared.api.github import (
    ChecksClient,
    GitHubRejected,
    Push,
    check_repo,
    check_sha,
    repository_allowed,
)
from shared.api.ledger import ORDER, DeliveryEnd, LedgerError, order_of, submission_id

log = api.get_logger("review")

# How long a re-run waits, per deferral, for the previous run's check-run item to close.
RERUN_WAIT_S = 60.0
# A person pressed "Re-run" and watches the check run: Gemini processes its batch ahead of
# the pushes' (background: Gemini's default 0). Never shared: it is created at once below.
RERUN_PRIORITY = api.INTERACTIVE_PRIORITY


@dataclass(frozen=True)
class RerunRequest:
    repo: str
    sha: str
    installation_id: int | None
    external_id: str | None  # the run's, for check_run; None for a whole suite


def rerun_tag(repo: str, sha: str, delivery_id: str) -> str:
    """The re-run's submission tag and batch display name: one per `rerequested` delivery."""
    return f"{review_tag(repo, sha)}{RERUN_MARK}{delivery_id}"


def push_key(key: str) -> str:
    """A review tag's key (`repo@sha`, or a re-run's `repo@sha~rerun:id`) as `repo@sha`."""
    return key.split(RERUN_MARK, 1)[0]


def parse_rerun(event: str, payload: Mapping[str, Any]) -> RerunRequest:
    """The repository, commit and installation a re-run names; `ValueError` if malformed."""
    holder = payload.get(event)
    repository = payload.get("repository")
    if not isinstance(holder, Mapping) or not isinstance(repository, Mapping):
        raise ValueError(f"{event} payload has no {event} or repository object")
    repo, sha = repository.get("full_name"), holder.get("head_sha")
    if not isinstance(repo, str) or not isinstance(sha, str):
        raise ValueError(f"{event} payload has no repository.full_name or head_sha")
    installation = payload.get("installation")
    number = installation.get("id") if isinstance(installation, Mapping) else None
    external = holder.get("external_id") if event == "check_run" else None
    return RerunRequest(
        repo,
        sha,
        number if type(number) is int else None,
        external if isinstance(external, str) and external else None,
    )


def rerun_review(
    event: str,
    payload: dict[str, Any],
    delivery_id: str,
    deps: ReviewDeps,
    checks: ChecksClient | None,
    attempt: Attempt | None = None,
    *,
    end: DeliveryEnd | None = None,
    pressed_at: datetime | None = None,
) -> Done | Ignored:
    """Submit one new batch re-reviewing the commit; safe to run again, even at once.

    `pressed_at`: when the press reached the ingress (the envelope's `received_at`), which
    orders it among the push's re-runs: an older press never replaces a newer one.

    Raises `PermanentError` for a malformed payload, `Deferred` while the current
    operation's check run is still being written (the worker runs it again later without
    spending a retry), `RetryableError` when a fetch failed transiently.
    """
    reason = rerun_refusal(event, payload)
    if reason is not None:
        return Ignored(reason)
    try:
        asked = parse_rerun(event, payload)
        check_repo(asked.repo)
        check_sha(asked.sha)
    except (ValueError, GitHubRejected) as exc:
        raise PermanentError(f"delivery {delivery_id}: {exc}") from exc
    if not repository_allowed(asked.repo, deps.repositories):
        return Ignored(f"{asked.repo} is not in GITHUB_REPOSITORIES")
    unwanted = installation_refusal(payload, asked.repo, deps.ledger.installations, delivery_id)
    if unwanted is not None:
        return unwanted
    push_tag = review_tag(asked.repo, asked.sha)
    where = f"{asked.repo}@{asked.sha[:12]}"
    tag = rerun_tag(asked.repo, asked.sha, delivery_id)
    mine = deps.ledger.submissions.get(tag)
    if mine is not None and mine.operation:  # a redelivery of a re-run already submitted
        return Done(f"already submitted as {mine.operation}")
    if asked.external_id is not None and asked.external_id != submission_id(push_tag):
        return Ignored(f"{where}: check run {asked.external_id!r} is not one hookledger made")
    pushed = deps.ledger.submissions.get(push_tag)
    current = pushed.current_operation if pushed is not None else None
    previous = deps.ledger.operations.get(current) if current else None
    if previous is None:
        return Ignored(f"{where}: no review of this commit to re-run (never reviewed, or expired)")
    if any(_is_check_run(i.payload) and i.open for i in previous.outbox):
        # Its run is still being written (maybe backing off through a GitHub outage for
        # hours): wait, so its completion never lands on top of our reset, without spending
        # the delivery's retries; a given-up item is closed.
        raise Deferred(
            f"{where}: {previous.name}'s check run is still being written", after_s=RERUN_WAIT_S
        )
    paths = _paths(previous.context)
    push = Push(asked.repo, asked.sha, "", "", False, tuple(paths), asked.installation_id)
    run = Submitter(
        deps, tag, delivery_id, attempt or Attempt(f"{delivery_id}:direct"), None, push_tag
    )
    files, refused = _fetch_all(push, paths, deps.github, delivery_id)
    if not files:
        raise PermanentError(f"{where}: every file was refused on re-run")
    submitted = [path for path in paths if path in files]
    context: dict[str, Any] = {
        "repo": asked.repo,
        "sha": asked.sha,
        "paths": submitted,
        "refused": [{"path": _storable(p), "error": e[:1000]} for p, e in refused.items()],
        **_installation(push),
        CHECK_SUBMISSION: push_tag,
        "rerun_of": previous.name,
        "rerun_delivery": delivery_id,
        ORDER: order_of(pressed_at or deps.clock(), delivery_id),
    }
    decided = run.claim(context)
    if decided is not None:
        return Done(decided)
    crash_point("rerun.claimed")
    requests = [(path, prompt(path, files[path])) for path in submitted]
    try:
        name = deps.gemini.create_batch(
            deps.model,
            requests,
            display_name=tag,
            generation_config=GENERATION_CONFIG,
            priority=RERUN_PRIORITY,
        )
    except Exception:
        run.release()
        raise
    crash_point("rerun.created")
    outcome = run.register(name, context, end)
    if outcome is None:  # ours won: the previous one, if it was pending, is now superseded
        crash_point("rerun.registered")
        _cancel_superseded(deps, previous.name, name, delivery_id)
    api.log_event(
        log,
        logging.INFO,
        "re-run batch submitted",
        operation=name,
        previous=previous.name,
        delivery_id=delivery_id,
        repo=asked.repo,
        files=len(submitted),
    )
    return Done(outcome or f"re-run {name} of {previous.name} for {len(submitted)} file(s)")


def _cancel_superseded(deps: ReviewDeps, previous: str, winner: str, delivery_id: str) -> None:
    """Deliver the previous operation's open items now (the cancel of its batch, when the
    re-run's commit superseded it); a failure is left to the outbox sweep."""
    record = deps.ledger.operations.get(previous)
    if deps.deliver is None or record is None or record.superseded_by != winner:
        return
    try:
        deps.ledger.outbox.deliver(previous, deps.deliver)
    except LedgerError as exc:
        api.log_event(
            log,
            logging.WARNING,
            f"cancelling superseded batch {previous} failed; the outbox sweep retries",
            operation=previous,
            winner=winner,
            delivery_id=delivery_id,
            reason=str(exc),
        )


def _paths(context: Mapping[str, Any]) -> list[str]:
    """The files the previous operation reviewed, those refused then included."""
    paths = [p for p in context.get("paths") or [] if isinstance(p, str)]
    for refused in context.get("refused") or []:
        path = refused.get("path") if isinstance(refused, Mapping) else None
        if isinstance(path, str) and path not in paths:
            paths.append(path)
    return paths


def _is_check_run(payload: Any) -> bool:
    return isinstance(payload, Mapping) and payload.get("kind") == CHECK_RUN


__all__ = ["KIND", "RerunRequest", "parse_rerun", "push_key", "rerun_review", "rerun_tag"]
