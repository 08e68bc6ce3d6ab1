"""Generations are ordered by the press, not by registration (docs/architecture.md, "Re-run").

Two "Re-run" presses of one commit, R1 then R2. When R1's batch reaches the ledger after
R2's (its worker died after the create and reconcile adopted it, or its registration was
simply slower), R1 must not become the check run's current operation: its batch is
registered superseded by R2's and cancelled at Gemini, and R2 stays current.

Real parts: the Firestore emulator, the simulator through the real google-genai client,
the re-run path and adoption.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from apps.review.kind import review_tag
from apps.review.pipeline import ReviewDeps, review_push
from apps.review.reruns import rerun_review, rerun_tag
from shared.gemini import GeminiGateway, make_client
from shared.github import ContentsClient
from shared.handlers import Attempt, Done
from shared.kinds import Deliverers
from shared.ledger import Ledger
from shared.ledger.generations import ORDER, order_of
from shared.reconcile.adoption import register_orphan
from tests.waiting import wait_until

REPO, SHA = "octo-org/handbook", "e" * 40
OWNER, NAME = REPO.split("/")
FILES = ["docs/a.md", "docs/b.md"]
PUSH_TAG = review_tag(REPO, SHA)
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


class CancelOnly:
    """The deliverers' services for a cancel item: the ledger and the gateway."""

    def __init__(self, ledger: Ledger, gemini: GeminiGateway) -> None:
        self.ledger, self.gemini = ledger, gemini


@pytest.fixture
def deps(simulator: Any, firestore_client: Any) -> ReviewDeps:
    simulator.control.reset()
    for path in FILES:
        simulator.control.put_file(OWNER, NAME, path, SHA, f"# {path}\n".encode())
    ledger = Ledger(firestore_client)
    gateway = GeminiGateway(make_client("sim-key", simulator.url, timeout_s=5, attempts=1))
    return ReviewDeps(
        ledger=ledger,
        gemini=gateway,
        github=ContentsClient(simulator.url, timeout_s=5, attempts=2, sleep=lambda s: None),
        review_path="docs",
        model="models/gemini-2.5-flash",
        deliver=Deliverers(CancelOnly(ledger, gateway)),  # type: ignore[arg-type]
    )


def pushed(deps: ReviewDeps) -> str:
    payload = {
        "ref": "refs/heads/main",
        "after": SHA,
        "repository": {"full_name": REPO, "default_branch": "main"},
        "commits": [{"added": FILES, "modified": [], "removed": []}],
    }
    assert isinstance(review_push(payload, "push-1", deps), Done)
    winner = deps.ledger.submissions.get(PUSH_TAG).operation
    assert winner
    return winner


def press(deps: ReviewDeps, delivery_id: str, at: datetime) -> Done:
    payload = {
        "action": "rerequested",
        "check_run": {"name": "hookledger review", "head_sha": SHA},
        "repository": {"full_name": REPO},
    }
    outcome = rerun_review(
        "check_run", payload, delivery_id, deps, None, Attempt(f"{delivery_id}-run"), pressed_at=at
    )
    assert isinstance(outcome, Done), outcome
    return outcome


def operation_of(deps: ReviewDeps, delivery_id: str) -> str:
    stored = deps.ledger.submissions.get(rerun_tag(REPO, SHA, delivery_id))
    assert stored is not None and stored.operation, stored
    return stored.operation


def cancelled_at_gemini(simulator: Any, name: str) -> bool:
    [batch] = [b for b in simulator.control.batches() if b["name"] == name]
    return bool(batch["state"] == "BATCH_STATE_CANCELLED")


def test_an_older_press_registered_after_a_newer_one_is_superseded_not_shown(deps, simulator):
    pushed(deps)
    press(deps, "r2", T0 + timedelta(seconds=5))
    r2 = operation_of(deps, "r2")

    late = press(deps, "r1", T0)  # pressed first, registered last

    r1 = operation_of(deps, "r1")
    stored = deps.ledger.submissions.get(PUSH_TAG)
    assert (stored.current_operation, stored.generation) == (r2, 1), stored
    record = deps.ledger.operations.get(r1)
    assert (record.status, record.superseded_by) == ("superseded", r2), record
    assert "newer re-run" in late.detail
    wait_until(lambda: cancelled_at_gemini(simulator, r1), 30, f"{r1} cancelled at Gemini")
    assert deps.ledger.operations.get(r2).status == "pending"


def test_an_orphan_of_an_older_press_adopted_after_a_newer_one_is_superseded(deps, simulator):
    pushed(deps)
    press(deps, "r2", T0 + timedelta(seconds=5))
    r2 = operation_of(deps, "r2")
    # R1's worker claimed and created, then died before registering; its lease is over.
    tag = rerun_tag(REPO, SHA, "r1")
    now = datetime.now(UTC)
    context = {
        "repo": REPO,
        "sha": SHA,
        "paths": FILES,
        "refused": [],
        "check_submission": PUSH_TAG,
        ORDER: order_of(T0, "r1"),
    }
    deps.ledger.submissions.claim(
        tag, delivery_id="r1", attempt="r1-run", lease_until=now, now=now, context=context
    )
    orphan_name = deps.gemini.create_batch("models/m", [(p, "x") for p in FILES], tag)
    [orphan] = [b for b in deps.gemini.list_batches() if b.display_name == tag]

    register_orphan(deps.ledger, deps.gemini, orphan)

    stored = deps.ledger.submissions.get(PUSH_TAG)
    assert stored.current_operation == r2, stored
    record = deps.ledger.operations.get(orphan_name)
    assert (record.status, record.superseded_by) == ("superseded", r2), record
    assert [i.payload.get("kind") for i in record.outbox] == ["gemini-cancel"], record.outbox


def test_a_newer_press_registered_after_an_older_one_supersedes_it(deps, simulator):
    first = pushed(deps)
    press(deps, "r1", T0)
    r1 = operation_of(deps, "r1")

    press(deps, "r2", T0 + timedelta(seconds=5))

    r2 = operation_of(deps, "r2")
    stored = deps.ledger.submissions.get(PUSH_TAG)
    assert (stored.current_operation, stored.generation) == (r2, 2), stored
    assert deps.ledger.operations.get(r1).superseded_by == r2
    assert deps.ledger.operations.get(first).superseded_by == r1
