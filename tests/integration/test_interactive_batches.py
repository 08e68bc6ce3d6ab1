"""A batch a person waits for goes ahead (issue 47, point 5): an interactive kind's
`ctx.submit` creates its own batch at once with Gemini's `batch.priority`
INTERACTIVE_PRIORITY, never in a shared batch; every other kind's is created as before,
with Gemini's default; the review's "Re-run" batch is interactive; and the simulator,
given slots, runs it before the pushes queued ahead of it. Real parts: the Firestore
emulator, the simulator through the real google-genai client, the review pipeline."""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from apps.review.kind import ReviewOptions, review_tag
from apps.review.pipeline import ReviewDeps, review_push
from apps.review.reruns import rerun_review, rerun_tag
from shared import api, apps, handlers, kinds
from shared.config import Config
from shared.gemini import GeminiGateway, make_client
from shared.github import ContentsClient
from shared.handlers import Attempt, Done
from shared.handlers.context import ClientFactories, HandlerContext
from shared.ledger import Ledger
from tests.unit.test_app_routes import ISSUE

INTERACTIVE = api.OperationKind(
    "labeller-pressed-probe", "labeller-pressed-probe", interactive=True
)


@pytest.fixture(scope="module")
def labeller() -> Iterator[Any]:
    saved = handlers.snapshot()
    apps.load(["apps.labeller"])
    yield importlib.import_module("apps.labeller")
    handlers.restore(saved)


@pytest.fixture
def pressed_kind(labeller: Any) -> Iterator[api.OperationKind]:
    kind = kinds.register(INTERACTIVE, app="labeller")
    yield kind
    kinds._KINDS.pop(kind.name, None)
    kinds._BY_TAG.pop(kind.tag, None)


@pytest.fixture
def ctx(firestore_client: Any, simulator: Any, labeller: Any) -> HandlerContext:
    ledger = Ledger(firestore_client, grace=timedelta(0))
    gateway = GeminiGateway(simulator.genai())
    clients = ClientFactories.from_lookup(ledger, {"gemini": gateway}.__getitem__)
    return HandlerContext(Config(), clients).for_app("labeller")


def event(delivery_id: str) -> api.Event:
    issue = {**ISSUE, "issue": {**ISSUE["issue"], "title": "Crash on save", "body": "…"}}
    body = json.dumps(issue).encode()
    return api.Event("github", "issues", delivery_id, datetime.now(UTC), body)


def batch_named(simulator: Any, name: str) -> dict[str, Any]:
    [batch] = [b for b in simulator.control.batches() if b["name"] == name]
    return batch


def test_an_interactive_kind_gets_its_own_batch_at_once_ahead_of_background_work(
    ctx: HandlerContext, simulator: Any, pressed_kind: api.OperationKind, labeller: Any
) -> None:
    pressed = ctx.for_event(event("d-pressed")).submit(
        pressed_kind, "k", [("x", "1")], model="models/m"
    )
    background = labeller.label_issue(event("d-bg"), ctx.for_event(event("d-bg")))

    assert pressed.created and str(pressed.operation).startswith("batches/")
    assert batch_named(simulator, str(pressed.operation))["priority"] == api.INTERACTIVE_PRIORITY
    assert batch_named(simulator, str(background.operation))["priority"] == api.BACKGROUND_PRIORITY


def test_an_interactive_submission_never_joins_a_shared_batch(
    ctx: HandlerContext, simulator: Any, pressed_kind: api.OperationKind
) -> None:
    run = ctx.for_event(event("d-1")).submission(pressed_kind, "k")
    sharing = api.Sharing(max_requests=10, window_s=3600)

    # No window to wait for (no Deferred): a batch of its own, created now.
    done = run.submit([("x", "1")], {}, model="models/m", sharing=sharing)

    assert done.created and str(done.operation).startswith("batches/")
    assert batch_named(simulator, str(done.operation))["priority"] == api.INTERACTIVE_PRIORITY
    with pytest.raises(ValueError, match="never shared"):
        run.join([("x", "1")], {}, model="models/m", sharing=sharing)


def test_an_interactive_kind_that_shares_is_refused_when_registered(labeller: Any) -> None:
    both = api.OperationKind(
        "labeller-both-probe",
        "labeller-both-probe",
        interactive=True,
        sharing=api.Sharing(max_requests=10, window_s=60),
    )
    with pytest.raises(api.AppError, match=r"interactive.*takes no sharing"):
        labeller.app.kind(both)
    assert "labeller-both-probe" not in {k.name for k in kinds.registered()}


# --- the review's "Re-run" ---------------------------------------------------------------

REPO, SHA = "octo-org/handbook", "e" * 40
OWNER, NAME = REPO.split("/")
PUSH = {
    "ref": "refs/heads/main",
    "after": SHA,
    "repository": {"full_name": REPO, "default_branch": "main"},
    "commits": [{"added": ["docs/a.md"], "modified": [], "removed": []}],
}
RERUN = {
    "action": "rerequested",
    "check_run": {"name": "hookledger review", "head_sha": SHA},
    "repository": {"full_name": REPO},
}


@pytest.fixture
def review(simulator: Any, firestore_client: Any) -> ReviewDeps:
    simulator.control.reset()
    simulator.control.put_file(OWNER, NAME, "docs/a.md", SHA, b"# a\n")
    return ReviewDeps(
        ledger=Ledger(firestore_client),
        gemini=GeminiGateway(make_client("sim-key", simulator.url, timeout_s=5, attempts=1)),
        github=ContentsClient(simulator.url, timeout_s=5, attempts=2, sleep=lambda s: None),
        review_path="docs",
        model="models/gemini-2.5-flash",
        options=ReviewOptions(github_check_runs=False),
    )


def test_a_rerun_batch_is_created_with_the_interactive_priority_and_runs_first(
    review: ReviewDeps, simulator: Any
) -> None:
    assert isinstance(review_push(PUSH, "push-1", review), Done)
    pushed = review.ledger.submissions.get(review_tag(REPO, SHA)).operation
    simulator.control.set_processing(slots=1)  # the push's batch holds the one slot
    backlog = [
        review.gemini.create_batch("models/m", [("k", "p")], f"hookledger:backlog:{n}")
        for n in range(3)
    ]

    outcome = rerun_review("check_run", RERUN, "rerun-1", review, None, Attempt("r-1"))

    assert isinstance(outcome, Done), outcome
    name = review.ledger.submissions.get(rerun_tag(REPO, SHA, "rerun-1")).operation
    assert batch_named(simulator, name)["priority"] == api.INTERACTIVE_PRIORITY
    simulator.control.complete(pushed)  # its slot goes to the re-run, not the older backlog
    assert batch_named(simulator, name)["state"] == "BATCH_STATE_RUNNING"
    assert {batch_named(simulator, b)["state"] for b in backlog} == {"BATCH_STATE_PENDING"}
