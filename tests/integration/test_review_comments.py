"""The review kind's outbox end to end: each reviewed push ends with exactly ONE GitHub commit
comment, whatever races — duplicate webhooks, a reconcile run settling at the same moment,
a post whose answer is lost after GitHub created the comment, two sweeps at once."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest

from apps.review.comments import push_marker
from apps.review.results import Reviews
from local.fakes import FakeClock
from shared.clock import system_clock
from shared.gemini import GeminiGateway, make_client
from shared.github import CommentsClient
from shared.kinds import Deliverers
from shared.ledger import Ledger, Operation, SweepReport
from shared.reconcile import Reconciler, ReconcileSettings
from tests.plugins.pipeline import (
    FILES,
    OWNER_REPO,
    SHA,
    PipelineStack,
    pipeline_stack,
    push_payload,
)
from tests.waiting import wait_until

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Services:
    """What the comment deliverer uses, built in the test process against the same stack."""

    ledger: Ledger
    comments: CommentsClient


@pytest.fixture(scope="module")
def stack(firestore_emulator, cloudtasks_emulator_fast) -> Iterator[PipelineStack]:
    with pipeline_stack(
        firestore_emulator, cloudtasks_emulator_fast, {"GITHUB_COMMENTS": "true"}
    ) as started:
        yield started


@pytest.fixture
def fresh(stack: PipelineStack, firestore_client) -> PipelineStack:
    stack.sim.reset()
    stack.put_files()
    return stack


def registered(ledger: Ledger) -> Operation:
    def one() -> Operation | None:
        found = ledger.queries.list_operations(limit=2)
        return found[0] if len(found) == 1 else None

    # Generous: the first push of a module also warms the worker's imports on a loaded machine.
    return wait_until(one, 90, "the review batch to be registered", every=0.1)


def commit_comments(stack: PipelineStack) -> dict[str, Any]:
    """The simulator's record for the pushed commit: posts and stored comments."""
    seen = stack.sim.github_comments()
    [commit] = [c for c in seen["commits"] if (c["repo"], c["sha"]) == (OWNER_REPO, SHA)]
    return {**commit, "bodies": [c["body"] for c in seen["comments"]]}


def gemini_deliveries_finished(ledger: Ledger) -> bool:
    found = ledger.deliveries.listing(source="gemini", limit=50)
    return bool(found) and all(d.status in ("done", "ignored") for d in found)


def sweep_twice_at_once(ledger: Ledger, deliver: Deliverers) -> list[SweepReport]:
    start = threading.Barrier(2)
    reports: list[SweepReport] = []

    def sweep() -> None:
        start.wait(timeout=10)
        reports.append(ledger.outbox.sweep(deliver, older_than=timedelta(0)))

    threads = [threading.Thread(target=sweep) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return reports


def test_duplicate_webhooks_racing_reconcile_publish_one_comment(
    fresh, firestore_client, monkeypatch
):
    monkeypatch.setenv("GITHUB_COMMENTS", "true")  # the review app's setting
    ledger = Ledger(firestore_client, grace=timedelta(0))
    services = Services(ledger, CommentsClient(fresh.sim_url, timeout_s=5))
    reconciler = Reconciler(
        ledger,
        GeminiGateway(make_client("sim-key", fresh.sim_url, timeout_s=5)),
        system_clock,
        ReconcileSettings(grace_s=0, budget_s=60, adopt_orphans=False),
        deliver=Deliverers(services),
    )
    assert fresh.push(push_payload(), delivery="comment-push-1").status_code == 202
    op = registered(ledger)

    fresh.sim.complete(op.name, state="succeeded", webhook="duplicate")
    report = reconciler.run()  # races the two webhook deliveries for the same settlement

    settled = wait_until(
        lambda: (r := ledger.operations.get(op.name)) is not None and r.writeback_done and r,
        30,
        "the settlement and its outbox",
        every=0.1,
    )
    wait_until(lambda: gemini_deliveries_finished(ledger), 30, "the webhook deliveries")
    sweep_twice_at_once(ledger, Deliverers(services))

    assert settled.status == "succeeded" and report.errors == 0
    assert len(Reviews(ledger).reviews_for(op.name)) == len(FILES)
    seen = commit_comments(fresh)
    assert (seen["posts"], seen["comments"]) == (1, 1), seen
    [body] = seen["bodies"]
    assert push_marker(OWNER_REPO, SHA) in body  # one comment per push
    assert all(path in body for path in FILES)


def test_a_502_after_github_created_the_comment_and_two_sweeps_still_end_with_one(
    fresh, firestore_client
):
    fresh.sim.set_comment_post_fault(fail=1, status=502, after_create=True)
    ledger = Ledger(firestore_client, grace=timedelta(0))
    assert fresh.push(push_payload(), delivery="comment-push-2").status_code == 202
    op = registered(ledger)

    fresh.sim.complete(op.name, state="succeeded", webhook="send")
    failed = wait_until(
        lambda: (
            (r := ledger.operations.get(op.name)) is not None
            and r.outbox
            and r.outbox[0].attempts
            and r
        ),
        30,
        "the worker's first delivery to fail on the 502",
        every=0.1,
    )
    assert failed.status == "succeeded" and not failed.writeback_done
    assert commit_comments(fresh)["comments"] == 1  # GitHub kept it; the answer was lost

    # Later, past the item's backoff: two reconcile sweeps at the same moment.
    later = Ledger(firestore_client, clock=FakeClock(system_clock() + timedelta(hours=1)))
    services = Services(later, CommentsClient(fresh.sim_url, timeout_s=5))
    reports = sweep_twice_at_once(later, Deliverers(services))

    done = later.operations.get(op.name)
    assert done is not None and done.writeback_done, reports
    assert [r.completed for r in reports].count([op.name]) >= 1, reports
    seen = commit_comments(fresh)
    assert (seen["posts"], seen["comments"]) == (1, 1), seen
