"""The built-in handlers: Gemini terminal events settle; a GitHub push starts the review pipeline.

Importing this module registers them. It stays light (the ingress imports it at cold
start): the Gemini, GitHub and Firestore work is imported inside the handlers.

Errors from Gemini, GitHub and the ledger pass through as raised: each already says in
the error tree (shared/errors.py) whether a retry may help, and the worker reads that.
"""

from __future__ import annotations

from shared.handlers import (
    Done,
    Event,
    HandlerContext,
    Ignored,
    PermanentError,
    RetryableError,
    handler,
)

BATCH_EVENTS = ("batch.succeeded", "batch.failed", "batch.cancelled", "batch.expired")
# `interaction.requires_action` is not terminal: no handler, so the ingress ignores it.
OPERATION_EVENTS = (
    "video.generated",
    "interaction.completed",
    "interaction.failed",
    "interaction.cancelled",
)


@handler("gemini", *BATCH_EVENTS, *OPERATION_EVENTS)
def settle_operation(event: Event, ctx: HandlerContext) -> Done | Ignored:
    """Re-fetch the operation named in the event (a hint only) and settle it in the ledger."""
    from shared.kinds import Deliverers, KindOptions
    from shared.ledger import Settlement
    from shared.settlement import RUNNING, Settler

    payload = event.json()
    data = payload.get("data") if isinstance(payload, dict) else None
    name = data.get("id") if isinstance(data, dict) else None
    if not isinstance(name, str) or not name:
        raise PermanentError(f"delivery {event.delivery_id}: event has no data.id")
    settler = Settler(ctx.ledger, ctx.gemini, KindOptions.from_config(ctx.config), Deliverers(ctx))
    outcome = settler.settle(name, "webhook")
    if outcome.result == Settlement.UNKNOWN:
        return Ignored(f"{name} is not in the ledger")
    if outcome.result == RUNNING:
        # The event ran ahead of what Gemini reports: retry later rather than settle wrongly.
        raise RetryableError(f"{name}: {event.type} received but Gemini still reports it running")
    return Done(f"{name}: {outcome.result} ({outcome.status})")


@handler("github", "push")
def review_push(event: Event, ctx: HandlerContext) -> Done | Ignored:
    """A push to the default branch: one Gemini batch reviewing its Markdown files."""
    from shared.kinds.review.pipeline import ReviewDeps
    from shared.kinds.review.pipeline import review_push as run

    payload = event.json()
    if not isinstance(payload, dict):
        raise PermanentError(f"delivery {event.delivery_id}: push body is not an object")
    deps = ReviewDeps(
        ledger=ctx.ledger,
        gemini=ctx.gemini,
        github=ctx.github,
        review_path=ctx.config.review_path,
        repositories=ctx.config.github_repositories,
        model=ctx.config.review_model,
        clock=ctx.clock,
    )
    return run(payload, event.delivery_id, deps)


@handler("hookledger", "check-page")
def check_page(event: Event, ctx: HandlerContext) -> Done:
    """Poll and settle one page of due operations that reconcile fanned out to the worker."""
    from shared.kinds import Deliverers
    from shared.reconcile import Reconciler, page_names

    try:
        names = page_names(event.body)
    except ValueError as exc:
        raise PermanentError(f"delivery {event.delivery_id}: {exc}") from exc
    reconciler = Reconciler.from_config(
        ctx.config, ctx.ledger, ctx.gemini, adopt_orphans=False, deliver=Deliverers(ctx)
    )
    report = reconciler.check_names(names)
    if report.examined == 0 and report.errors:
        raise RetryableError(f"delivery {event.delivery_id}: no operation could be read")
    # Operations left pending are already deferred: the next reconcile run picks them up.
    return Done(
        f"page of {len(names)}: {report.settled} settled, "
        f"{report.still_running} running, {report.errors} errors"
    )
