"""Overlapping runs of one push make ONE batch: the real pipeline and ledger, racing.

2 or 3 runs start together (0-100 ms apart), as runs of one delivery (Cloud Tasks'
at-least-once delivery, a retry while a timed-out attempt still runs) or of two deliveries
of one push (a repository hook and an organisation hook). The Gemini stand-in lists a new
batch during its create call or only after it returns. Each trial starts from one of the
states a crash can leave: nothing, a claim whose holder died before the create, or one
whose holder died after it. Over 200 trials per case, no run creates a second batch, and
every trial ends with the push's one winner registered (docs/architecture.md, "One winner
per push").
"""

from __future__ import annotations

import os
import random
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest

from apps.review.kind import review_tag
from apps.review.pipeline import ReviewDeps, review_push
from shared.clock import system_clock
from shared.handlers import Attempt, Done, RetryableError
from shared.ledger import Ledger
from tests.standins import RacingGemini, StandInContents

TRIALS = int(os.environ.get("OVERLAP_TRIALS", "200"))
PUSHES_AT_ONCE = 4
STATES = ["fresh", "died-before-create", "died-after-create"]
REPO = "octo-org/handbook"
LEASE = timedelta(minutes=10)
FILES = ["docs/a.md", "docs/b.md"]

pytestmark = pytest.mark.slow


def push(sha: str) -> dict:
    return {
        "ref": "refs/heads/main",
        "after": sha,
        "repository": {"full_name": REPO, "default_branch": "main"},
        "commits": [{"added": FILES, "modified": [], "removed": []}],
    }


def run_until_settled(
    payload: dict, delivery: str, deps: ReviewDeps, start: threading.Barrier
) -> str:
    """One run and its retries, as Cloud Tasks would make them: a new attempt each time."""
    start.wait()
    time.sleep(random.uniform(0, 0.03))  # started 0-30 ms apart: the race, not a wait
    for _ in range(500):
        attempt = Attempt(uuid.uuid4().hex, system_clock() + LEASE)
        try:
            outcome = review_push(payload, delivery, deps, attempt)
        except RetryableError:
            time.sleep(0.005)  # Cloud Tasks' backoff, shortened
            continue
        assert isinstance(outcome, Done), outcome
        return outcome.detail
    raise AssertionError(f"{delivery}: still busy after 500 attempts")


def dead_holder(deps: ReviewDeps, gemini: RacingGemini, sha: str, state: str) -> None:
    """Leave what a run that died holding the claim leaves: its claim, maybe its batch."""
    if state == "fresh":
        return
    tag = review_tag(REPO, sha)
    now = system_clock()
    deps.ledger.submissions.claim(
        tag, delivery_id="dead", attempt="dead-run", lease_until=now - timedelta(seconds=1), now=now
    )
    if state == "died-after-create":
        gemini.create_batch("m", [(p, "") for p in FILES], display_name=tag)


def trial(
    deps: ReviewDeps, gemini: RacingGemini, number: int, runs: int, deliveries: str, state: str
) -> list[str]:
    """One race; the problems it shows (an extra batch, no registered winner), if any."""
    sha = f"{number:08x}{uuid.uuid4().hex}"
    tag = review_tag(REPO, sha)
    dead_holder(deps, gemini, sha, state)
    before = len([n for n in gemini.created if gemini.batches[n].display_name == tag])
    start = threading.Barrier(runs)
    names = [
        f"d-{number}" if deliveries == "one-delivery" else f"d-{number}-{i}" for i in range(runs)
    ]
    with ThreadPoolExecutor(runs) as pool:
        results = list(pool.map(lambda d: run_until_settled(push(sha), d, deps, start), names))
    created = [n for n in gemini.created if gemini.batches[n].display_name == tag]
    problems = []
    expected = 0 if state == "died-after-create" else 1
    if len(created) - before != expected:
        problems.append(f"trial {number} ({state}): batches {created}")
    winner = deps.ledger.submissions.get(tag).operation
    record = deps.ledger.operations.get(winner) if winner else None
    if len(results) != runs or record is None or not record.pending or winner not in created:
        problems.append(f"trial {number} ({state}): winner {winner}, runs said {results}")
    return problems


@pytest.mark.parametrize("runs", [2, 3])
@pytest.mark.parametrize("deliveries", ["one-delivery", "two-deliveries"])
@pytest.mark.parametrize("visible", ["during", "after"])
def test_overlapping_runs_of_one_push_create_one_batch(firestore_client, runs, deliveries, visible):
    gemini = RacingGemini(visible=visible, create_s=0.01)
    deps = ReviewDeps(
        ledger=Ledger(firestore_client),
        gemini=gemini,
        github=StandInContents(),
        review_path="",
        model="m",
    )
    rng = random.Random(f"{runs}-{deliveries}-{visible}")
    states = [rng.choice(STATES) for _ in range(TRIALS)]
    # Several pushes race at once (each its own tag), as in production, and the suite stays short.
    with ThreadPoolExecutor(PUSHES_AT_ONCE) as pool:
        found = pool.map(
            lambda n: trial(deps, gemini, n, runs, deliveries, states[n]), range(TRIALS)
        )
        problems = [p for ps in found for p in ps]

    assert problems == [], f"{len(problems)} problems in {TRIALS} trials: {problems[:5]}"
    assert sorted(set(states)) == sorted(STATES)  # every starting state was raced
