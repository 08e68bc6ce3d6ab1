"""The reference pipeline: a push to the default branch becomes one Gemini batch of reviews.

Creating a batch is not idempotent, Gemini takes no request id, and one push can be run
by overlapping attempts (Cloud Tasks' at-least-once delivery, a timed-out attempt still
running, a replay, two hooks for one repository). The push's submission
(`ledger.submissions`, keyed by the batch's tag) makes a second batch rare, and the winner
rule makes one that slips through harmless (docs/architecture.md, "One winner per push"):

    claim ─ (held by a live lease: retry) ─ (stale: list; a tagged batch → it wins;
          none → take over, conditionally) ─ (too little lease left: release, retry)
          ─ create ─ register_winner: ONE commit, the operation and the winner together
                      └ lost (another batch won): recorded `superseded`, cancelled

The batch's `display_name` carries the tag, which is also how reconcile adopts an orphan.

Inputs are checked before anything is fetched: a malformed repository or commit makes the
delivery dead, a repository outside `GITHUB_REPOSITORIES` is ignored, then so is a push its
GitHub App installation no longer wants (`installations.py`), and a path GitHub
would refuse (`check_path`: '..', empty segments, over-long names) is not fetched. Such a
path, and one the Contents API refuses (4xx), is recorded in the operation's context
(`refused`) and gets an error review at settlement: one file never kills the push.

A push that came through a GitHub App carries `installation.id`: the files are fetched
with that installation's token, and the id is kept in the operation's context (and the
submission's, so an adopted orphan has it too), where the review comment finds it. With
check runs on, the winner's commit also records the check run's `in_progress` item, which
the run delivers right after it (`check_runs.py`; docs/architecture.md, "Check runs").
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from apps.review.findings import GENERATION_CONFIG
from apps.review.installations import installation_refusal
from apps.review.kind import KIND, ReviewOptions, review_tag, start_items
from shared import api
from shared.api import (
    Attempt,
    ClaimRequest,
    Clock,
    Done,
    Ignored,
    PermanentError,
    TransientError,
    system_clock,
)
from shared.api.gemini import GeminiGateway
from shared.api.github import (
    MARKDOWN_SUFFIXES,
    ContentsClient,
    GitHubRejected,
    Push,
    check_path,
    check_repo,
    check_sha,
    parse_push,
    repository_allowed,
    select_paths,
)
from shared.api.ledger import Claimed, DeliveryEnd, OutboxItem, PushLedger

log = api.get_logger("review")

# A run with no worker lease (a direct call) holds the push's claim this long.
UNLEASED_CLAIM = timedelta(minutes=10)
# The create is sent only with at least this much lease left: the call's own timeout
# and a margin (`Config.create_budget_s`, 35 s by default), so it ends before anyone may
# take over.
CREATE_BUDGET = timedelta(seconds=35)
# A refused path is stored and logged up to this length (github.MAX_PATH_BYTES is 4096).
MAX_SHOWN_PATH = 4096
PROMPT = (
    "You review Markdown documentation. Point out unclear sentences, broken structure and "
    "factual slips. Answer in JSON: a short `summary` of the file, and one finding per "
    "problem with the lines it spans (`start_line`, `end_line`, as numbered below), its "
    "`severity` (`failure` for a factual error or broken content, `warning` for what "
    "misleads or confuses, `notice` for style), a `title` of a few words and a `message`."
    "\n\nFile: {path}\n\n{text}"
)


def prompt(path: str, text: str) -> str:
    """The review prompt of one file, its lines numbered ("  12| …") so that the model's
    findings can name them."""
    lines = text.splitlines() or [""]
    width = len(str(len(lines)))
    numbered = "\n".join(f"{n:>{width}}| {line}" for n, line in enumerate(lines, start=1))
    return PROMPT.format(path=path, text=numbered)


@dataclass(frozen=True)
class ReviewDeps:
    ledger: PushLedger
    gemini: GeminiGateway
    github: ContentsClient
    review_path: str
    model: str
    clock: Clock = system_clock
    # `GITHUB_REPOSITORIES`: globs of the repositories to review; empty reviews every one.
    repositories: tuple[str, ...] = ()
    create_budget: timedelta = CREATE_BUDGET
    # Check runs and the console link (`KindOptions`); `deliver` delivers the items
    # recorded with the winner right after its commit (None: left to the outbox sweep).
    options: ReviewOptions = field(default_factory=ReviewOptions)
    deliver: Callable[[OutboxItem], None] | None = None
    # Shared batches (`REVIEW_GROUP_REQUESTS`, `REVIEW_GROUP_WINDOW_S`); None: one per push.
    sharing: api.Sharing | None = None


def review_push(
    payload: dict[str, Any],
    delivery_id: str,
    deps: ReviewDeps,
    attempt: Attempt | None = None,
    *,
    claimed: Claimed | None = None,
    end: DeliveryEnd | None = None,
) -> Done | Ignored:
    """Submit one batch for the push's reviewable files; safe to run again, even at once.

    `attempt` is this run (the worker's lease); overlapping runs of one push, of one
    delivery or of several, end with one batch registered (see the module docstring).
    `claimed`: the push's submission as the worker claimed it with the delivery's record
    (`submission_for`); without it the run claims after fetching. `end`, the delivery's
    `done`, is committed with the winner: two commits per push in all.

    Nothing is fetched before the repository, commit and every path are checked. Raises
    `PermanentError` for a malformed push or when every file was refused, and
    `TransientError` when any file could not be fetched for a transient reason.
    """
    checked = _checked(payload, delivery_id, deps.review_path, deps.repositories)
    if isinstance(checked, Ignored):
        return checked
    push, paths = checked
    tag = review_tag(push.repo, push.sha)
    run = Submitter(deps, tag, delivery_id, attempt or Attempt(f"{delivery_id}:direct"), claimed)
    unwanted = installation_refusal(payload, push.repo, deps.ledger.installations, delivery_id)
    if unwanted is not None:  # a deleted or suspended installation, or a repo it left
        run.release(created_nothing=True)
        return unwanted
    decided = run.decided_before_fetch()
    if decided is not None:
        return Done(decided)
    try:
        files, refused = _fetch_all(push, paths, deps.github, delivery_id)
        if not files:
            reasons = "; ".join(f"{path}: {error}" for path, error in refused.items())
            raise PermanentError(f"{push.repo}@{push.sha[:12]}: every file was refused ({reasons})")
    except Exception:  # a claim taken with the record: the next attempt claims at once
        run.release(created_nothing=True)  # and, no create sent, without a listing
        raise
    submitted = [path for path in paths if path in files]
    context = _context(push, submitted, refused)
    requests = [(path, prompt(path, files[path])) for path in submitted]
    submitted_as = run.submit(
        requests,
        context,
        model=deps.model,
        generation_config=GENERATION_CONFIG,
        sharing=deps.sharing,  # the push's files join the open group: one batch for many
        end=end,
    )
    if not submitted_as.created:  # decided before, or another batch won
        return submitted_as
    if deps.sharing is None:
        api.log_event(
            log,
            logging.INFO,
            "review batch submitted",
            operation=submitted_as.operation,
            delivery_id=delivery_id,
            repo=push.repo,
            files=len(submitted),
            refused=len(refused),
        )
        name = submitted_as.operation
        return Done(f"submitted {name} for {len(submitted)} file(s), {len(refused)} refused")
    return Done(f"{submitted_as.detail}; {len(refused)} refused")


def reviewable(paths: tuple[str, ...], review_path: str) -> list[str]:
    """The Markdown files among `paths` under `review_path` ('' = the whole repository)."""
    return select_paths(paths, review_path, MARKDOWN_SUFFIXES)


def submission_for(
    body: bytes, review_path: str, repositories: tuple[str, ...]
) -> ClaimRequest | None:
    """The submission a push's run will claim, read from its body alone (no I/O): the
    worker claims it with the delivery's record. None for a push the run would ignore or
    refuse, or a body that is not one: the run then decides as usual."""
    try:
        payload = json.loads(body)
        checked = _checked(payload, "-", review_path, repositories)
    except Exception:  # anything the run itself refuses, with a clear error, later
        return None
    if isinstance(checked, Ignored):
        return None
    push, paths = checked
    # The files the run will submit, as far as the body tells: an orphan adopted from this
    # claim knows them (rows that echo no key are placed by them). A file the Contents API
    # refuses changes them; the run then stores its own context before it creates.
    refused: dict[str, str] = {}
    for path in paths:
        try:
            check_path(path)
        except GitHubRejected as exc:
            refused[path] = str(exc)
    submitted = [path for path in paths if path not in refused]
    return ClaimRequest(review_tag(push.repo, push.sha), _context(push, submitted, refused))


def _context(push: Push, submitted: list[str], refused: dict[str, str]) -> dict[str, Any]:
    """The operation's context: the push, the files submitted in request order, and the
    refused ones with their reasons (each gets an error review at settlement)."""
    return {
        "repo": push.repo,
        "sha": push.sha,
        "paths": submitted,
        "refused": [{"path": _storable(p), "error": _clip(e)} for p, e in refused.items()],
        **_installation(push),
        # Whose turn its shared batch takes while groups wait for Gemini (Sharing.fair_by).
        "subject": api.Subject(push.installation_id, push.repo).stored(),
    }


def _installation(push: Push) -> dict[str, int]:
    """The context field naming the push's App installation; nothing without one."""
    return {} if push.installation_id is None else {"installation_id": push.installation_id}


def _checked(
    payload: Any, delivery_id: str, review_path: str, repositories: tuple[str, ...]
) -> tuple[Push, list[str]] | Ignored:
    """The push and its reviewable paths, or why it needs no review; `PermanentError`
    for a push that is malformed."""
    try:
        push = parse_push(payload)
        check_repo(push.repo)
        check_sha(push.sha)
    except (ValueError, GitHubRejected) as exc:
        raise PermanentError(f"delivery {delivery_id}: {exc}") from exc
    if push.deleted or not push.to_default_branch:
        return Ignored(f"{push.ref} is not a push to {push.default_branch}")
    if not repository_allowed(push.repo, repositories):
        return Ignored(f"{push.repo} is not in GITHUB_REPOSITORIES")
    paths = reviewable(push.changed, review_path)
    if not paths:
        return Ignored(f"{push.repo}@{push.sha[:12]}: no Markdown files to review")
    return push, paths


def _fetch_all(
    push: Push, paths: list[str], github: ContentsClient, delivery_id: str
) -> tuple[dict[str, str], dict[str, str]]:
    """(text by path, refusal reason by path); `TransientError` if any fetch was transient.

    One request per 50 files (`ContentsClient.fetch_many`: GraphQL, the Contents API for a
    file over ~500 kB). A path `check_path` refuses is never fetched; a missing, binary or
    otherwise unreadable file refuses only itself. Each request uses the push's
    installation token (GITHUB_TOKEN without one).
    """
    repo, sha = push.repo, push.sha
    fetched = github.fetch_many(repo, paths, sha, installation_id=push.installation_id)
    refused: dict[str, str] = {}
    for path, rejected in fetched.refused.items():
        _log_fetch(logging.WARNING, "fetch refused", repo, sha, path, delivery_id, rejected)
        refused[path] = str(rejected)
    for path, failed in fetched.unavailable.items():
        _log_fetch(logging.ERROR, "fetch failed", repo, sha, path, delivery_id, failed)
    if fetched.unavailable:
        names = ", ".join(_storable(path) for path in fetched.unavailable)
        raise TransientError(f"{repo}@{sha[:12]}: could not fetch {names}")
    return dict(fetched.texts), refused


def _log_fetch(
    level: int, what: str, repo: str, sha: str, path: str, delivery_id: str, exc: Exception
) -> None:
    shown = _storable(path)
    api.log_event(
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


def Submitter(  # the core's Submitter, with the review's kind and items
    deps: ReviewDeps,
    tag: str,
    delivery_id: str,
    attempt: Attempt,
    claimed: Claimed | None = None,
    generation_of: str | None = None,
) -> api.Submitter:
    """The exactly-once submission (shared/submission.py) of a review batch tagged `tag`."""
    options = deps.options

    def items(context: Mapping[str, Any], name: str, tag: str) -> list[dict[str, Any]]:
        return start_items(context, name, tag, options)

    submit = api.SubmitDeps(
        ledger=deps.ledger,
        gemini=deps.gemini,
        kind=KIND,
        clock=deps.clock,
        create_budget=deps.create_budget,
        start_items=items,
        deliver=deps.deliver,
    )
    return api.Submitter(submit, tag, delivery_id, attempt, claimed, generation_of)
