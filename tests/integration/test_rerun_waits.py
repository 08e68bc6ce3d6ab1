"""A "Re-run" pressed while the previous run is still being written waits without failing.

The previous generation's check-run item can back off for hours through a GitHub outage
(up to `OutboxPolicy.give_up_after` tries). The re-run must wait for it without spending
its delivery's retries (it raises `Deferred`: the worker hands it back to the queue as a
new task, docs/architecture.md "Worker"), and go on once the item is closed, delivered or
given up. Real parts: the Firestore emulator, the simulator through the real
google-genai client, the review pipeline.
"""

from __future__ import annotations

from typing import Any

import pytest

from apps.review.kind import ReviewOptions, review_tag
from apps.review.pipeline import ReviewDeps, review_push
from apps.review.reruns import rerun_review, rerun_tag
from shared.errors import Deferred, PermanentError, retryable
from shared.gemini import GeminiGateway, make_client
from shared.github import ContentsClient
from shared.handlers import Attempt, Done
from shared.ledger import Ledger

REPO, SHA = "octo-org/handbook", "f" * 40
OWNER, NAME = REPO.split("/")
FILES = ["docs/a.md"]
PUSH_TAG = review_tag(REPO, SHA)
RERUN = {
    "action": "rerequested",
    "check_run": {"name": "hookledger review", "head_sha": SHA},
    "repository": {"full_name": REPO},
    "installation": {"id": 4242},
}


@pytest.fixture
def deps(simulator: Any, firestore_client: Any) -> ReviewDeps:
    simulator.control.reset()
    simulator.control.put_file(OWNER, NAME, FILES[0], SHA, b"# a\n")
    return ReviewDeps(
        ledger=Ledger(firestore_client),
        gemini=GeminiGateway(make_client("sim-key", simulator.url, timeout_s=5, attempts=1)),
        github=ContentsClient(simulator.url, timeout_s=5, attempts=2, sleep=lambda s: None),
        review_path="docs",
        model="models/gemini-2.5-flash",
        options=ReviewOptions(github_check_runs=True),  # deliver=None: the start item stays open
    )


def pushed(deps: ReviewDeps) -> str:
    payload = {
        "ref": "refs/heads/main",
        "after": SHA,
        "repository": {"full_name": REPO, "default_branch": "main"},
        "commits": [{"added": FILES, "modified": [], "removed": []}],
        "installation": {"id": 4242},
    }
    assert isinstance(review_push(payload, "push-1", deps), Done)
    winner = deps.ledger.submissions.get(PUSH_TAG).operation
    record = deps.ledger.operations.get(winner)
    assert [i.open for i in record.outbox] == [True], record.outbox  # its check run's start
    return winner


def test_a_rerun_behind_an_open_check_run_item_is_deferred_not_retried(deps):
    pushed(deps)

    with pytest.raises(Deferred, match="still being written") as raised:
        rerun_review("check_run", RERUN, "rerun-1", deps, None, Attempt("r-1"))

    assert retryable(raised.value) and raised.value.after_s > 0
    assert deps.ledger.submissions.get(rerun_tag(REPO, SHA, "rerun-1")) is None  # nothing claimed


def test_the_rerun_goes_on_once_the_item_is_given_up(deps):
    winner = pushed(deps)

    def refuse(item: Any) -> None:
        raise PermanentError("GitHub refused the run: 422")

    # Given up at once, a permanent failure: nothing is left for the sweep.
    assert deps.ledger.outbox.deliver(winner, refuse) == 0
    assert not any(i.open for i in deps.ledger.operations.get(winner).outbox)

    outcome = rerun_review("check_run", RERUN, "rerun-1", deps, None, Attempt("r-1"))

    assert isinstance(outcome, Done), outcome
    stored = deps.ledger.submissions.get(PUSH_TAG)
    assert (
        stored.current_operation
        == deps.ledger.submissions.get(rerun_tag(REPO, SHA, "rerun-1")).operation
    )
