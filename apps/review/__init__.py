"""The review app: a push's Markdown files reviewed by Gemini's Batch API, shown on GitHub.

A push to the default branch → the changed Markdown files under `REVIEW_PATH` fetched at
the pushed commit → one request per file (key = path), joined to a shared batch with
other pushes' (`REVIEW_GROUP_*`; docs/architecture.md, "Shared batches") or, with
`REVIEW_GROUP_REQUESTS=0`, a batch of the push's own, submitted exactly once → settled
by Gemini's webhook or reconcile → one `reviews` document per file in the push's
settling commit → the check run "hookledger review" and, with
`GITHUB_COMMENTS`, one commit comment. "Re-run" on the check run reviews the commit
again (reruns.py). Built on the public API only (shared/api); see docs/apps.md.

This module stays light (the ingress imports it): the handlers, the kind's functions
and the deliverers import their modules when first called.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from shared import api

if TYPE_CHECKING:
    from shared.api.gemini import BatchStatus, BatchSummary, GeminiGateway
    from shared.api.ledger import Operation, OutboxItem


SETTINGS = (
    api.Setting("REVIEW_PATH", help="folder whose Markdown files are reviewed ('' = all)"),
    api.Setting("REVIEW_MODEL", default="models/gemini-2.5-flash", help="Gemini model"),
    api.Setting(
        "GITHUB_REPOSITORIES",
        type="list",
        default=(),
        help="owner/name globs of the repositories reviewed (empty: all)",
        check=api.owner_name_globs,
    ),
    api.Setting(
        "GITHUB_COMMENTS", type="bool", default=False, help="publish one commit comment per push"
    ),
    api.Setting(
        "GITHUB_CHECK_RUNS",
        type="bool",
        default=None,
        help="show the review as a check run (unset: on with a GitHub App)",
    ),
    api.Setting(
        "REVIEW_GROUP_REQUESTS",
        type="int",
        default=1000,
        help="a shared batch is sealed at this many files' requests (0: a batch per push)",
        check=lambda n: None if n >= 0 else "must be 0 or more",
    ),
    api.Setting(
        "REVIEW_GROUP_WINDOW_S",
        type="float",
        default=60.0,
        help="a shared batch is also sealed this many seconds after its first push joined",
        check=lambda s: None if s >= 0 else "must be 0 or more",
    ),
    api.Setting(
        "REVIEW_GROUP_SHARDS",
        type="int",
        default=16,
        help="shared batches open at once (each join writes one lane of its group)",
        check=lambda n: None if n >= 1 else "must be 1 or more",
    ),
    api.Setting(
        "REVIEW_FAIR_BY",
        default="installation",
        choices=("installation", "repository", "off"),
        help="whose turn a shared batch takes while batches wait for Gemini's quota "
        "(off: every push in the same groups, oldest first)",
    ),
    api.Setting(
        "CONSOLE_URL",
        default="http://127.0.0.1:8099",
        help="the console's URL: a check run's Details link",
    ),
)

app = api.App(
    "review",
    settings=SETTINGS,
    collections=["reviews"],
    description="a push's Markdown files reviewed by Gemini batches, shown on GitHub",
)

KIND = "github-review"
TAG = "review"
# A re-run's tag key is the push's `repo@sha` and this mark with its delivery id (reruns.py).
RERUN_MARK = "~rerun:"
# The check run the review publishes (checks.py; a unit test pins them equal).
CHECK_NAME = "hookledger review"
# (event, action) pairs that start a re-run. `check_suite` `requested` comes with every push
# to an App subscribed to it: the push already starts the review, so it is ignored.
RERUN_ACTIONS = frozenset({("check_run", "rerequested"), ("check_suite", "rerequested")})


def _adopt(key: str, batch: BatchSummary, gemini: GeminiGateway) -> dict[str, Any]:
    from apps.review.kind import adopt

    return adopt(key, batch, gemini)


def _writeback(writes: Any, record: Operation, batch: BatchStatus) -> None:
    from apps.review.kind import write_reviews

    write_reviews(writes, record, batch)


def _outbox(
    record: Operation, batch: BatchStatus, options: Any = None
) -> Sequence[Mapping[str, Any]]:
    from apps.review.kind import outbox

    return outbox(record, batch, options)  # options: a test's; None reads the settings


def _generation_of(key: str) -> str | None:
    """A re-run's key (`repo@sha~rerun:id`) names the push whose check run it takes over."""
    push, mark, _ = key.partition(RERUN_MARK)
    return REVIEW.make_tag(push) if mark and push else None


REVIEW = app.kind(
    api.OperationKind(
        name=KIND,
        tag=TAG,
        adopt=_adopt,
        writeback=_writeback,
        outbox=_outbox,
        request_keys=api.context_keys("paths"),
        generation_of=_generation_of,
        needs=("repo", "sha", "paths"),  # the files reviewed: rows may echo no key
        description="a push's Markdown files reviewed (its own batch, or its share of one)",
    )
)


def review_tag(repo: str, sha: str) -> str:
    """The display name that marks a review batch as ours: `hookledger:review:{repo}@{sha}`."""
    return REVIEW.make_tag(f"{repo}@{sha}")


@app.deliverer("github-check-run")
def _publish_check_run(item: OutboxItem, services: api.DeliveryServices) -> None:
    from apps.review.check_runs import publish_check_run

    publish_check_run(item, services)


@app.deliverer("github-comment")
def _publish_comment(item: OutboxItem, services: api.DeliveryServices) -> None:
    from apps.review.comments import publish_reviews

    publish_reviews(item, services)


def push_submission(body: bytes, ctx: api.Context) -> api.ClaimRequest | None:
    """The submission a push's run claims, claimed by the worker with its record."""
    from apps.review.pipeline import submission_for

    settings = ctx.settings
    return submission_for(body, settings["REVIEW_PATH"], settings["GITHUB_REPOSITORIES"])


@app.handler("github", "push", claims=push_submission)
def review_push(event: api.Event, ctx: api.Context) -> api.Outcome:
    """A push to the default branch: one Gemini batch reviewing its Markdown files."""
    from apps.review.pipeline import review_push as run

    payload = event.json()
    if not isinstance(payload, dict):
        raise api.PermanentError(f"delivery {event.delivery_id}: push body is not an object")
    return run(
        payload, event.delivery_id, deps(ctx), event.run, claimed=event.claimed, end=event.end
    )


def rerun_refusal(event: str, payload: Mapping[str, Any]) -> str | None:
    """Why the ingress ignores a `check_run`/`check_suite` delivery, or None to accept it:
    only `rerequested`, and for a run only ours (an App gets only its own runs' events, but
    a run of another name starts nothing)."""
    action = payload.get("action")
    if (event, action) not in RERUN_ACTIONS:
        return f"{event} action {action!r} starts nothing"
    if event == "check_run":
        run = payload.get("check_run")
        name = run.get("name") if isinstance(run, Mapping) else None
        if name != CHECK_NAME:
            return f"check run {name!r} is not {CHECK_NAME!r}"
    return None


@app.handler("github", "check_run", "check_suite", refuses=rerun_refusal)
def rerun_review(event: api.Event, ctx: api.Context) -> api.Outcome:
    """ "Re-run" pressed on our check run: a new batch for the commit, one per delivery, that
    the check run then shows (reruns.py)."""
    from apps.review.reruns import rerun_review as run

    payload = event.json()
    if not isinstance(payload, dict):
        raise api.PermanentError(
            f"delivery {event.delivery_id}: {event.type} body is not an object"
        )
    return run(
        event.type, payload, event.delivery_id, deps(ctx), None, event.run,
        end=event.end, pressed_at=event.received_at,
    )  # fmt: skip


def deps(ctx: api.Context) -> Any:
    """The pipeline's dependencies from the app's context and settings."""
    from apps.review.kind import ReviewOptions
    from apps.review.pipeline import ReviewDeps

    settings = ctx.settings
    return ReviewDeps(
        ledger=ctx.ledger,
        gemini=ctx.gemini,
        github=ctx.github,
        review_path=settings["REVIEW_PATH"].strip("/"),
        repositories=settings["GITHUB_REPOSITORIES"],
        model=settings["REVIEW_MODEL"],
        clock=ctx.clock,
        create_budget=timedelta(seconds=ctx.config.create_budget_s),
        options=ReviewOptions.from_settings(settings),
        deliver=ctx.deliver,
        sharing=sharing(settings),
    )


def sharing(settings: Mapping[str, Any]) -> api.Sharing | None:
    """How pushes share batches, from the settings; None for one batch per push."""
    size = settings["REVIEW_GROUP_REQUESTS"]
    if not size:
        return None
    window, shards = settings["REVIEW_GROUP_WINDOW_S"], settings["REVIEW_GROUP_SHARDS"]
    fair_by = settings["REVIEW_FAIR_BY"]
    return api.Sharing(size, window, shards=shards, fair_by="" if fair_by == "off" else fair_by)
