"""The crash-point sweep: die at every named point, recover, and nothing is lost or doubled.

For each point in `shared.crashpoints.POINTS`, one push (two Markdown files, comments on,
and a stray second batch for the same push, as a run that lost its claim leaves) goes
through the real worker, ledger (Firestore emulator), settler, reconcile and outbox, with
the process "dying" (`Crashed`) the first time it reaches the point. Then Cloud Tasks'
retries, Gemini's completion webhook and reconcile runs go on until nothing changes, the
clock moving past every lease a dead attempt left. The invariants (docs/architecture.md,
"Crash points"):

- one winning batch per push, registered as the submission's operation; every other
  batch for the push superseded and cancelled at Gemini;
- each review written once, by the winner's one settling commit;
- exactly one GitHub commit comment for the push;
- nothing pending, no delivery queued, no outbox item undelivered.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from shared import builtin_handlers, crashpoints, handlers
from shared.clock import FakeClock
from shared.config import LOCAL_ENVELOPE_KEY, Config
from shared.crashpoints import POINTS, Crashed, crashing_at
from shared.entrypoints.worker import Worker
from shared.envelope import Envelope, EnvelopeSealer
from shared.github import CommentsClient
from shared.kinds import Deliverers, KindOptions
from shared.kinds.review import review_tag
from shared.ledger import Ledger
from shared.reconcile import Reconciler, ReconcileSettings
from tests.standins import RacingGemini, StandInContents

REPO, FILES = "octo-org/handbook", ["docs/a.md", "docs/b.md"]
ROUNDS = 12
ROUND = timedelta(minutes=15)  # longer than any lease: a dead attempt's lease has ended

pytestmark = pytest.mark.slow
assert builtin_handlers  # registers the push and Gemini handlers the worker runs


class World:
    """One push's world: the worker in this process, the stand-in Gemini, real GitHub comments."""

    def __init__(self, firestore_client: Any, simulator: Any) -> None:
        self.clock = FakeClock(datetime.now(UTC))
        self.sha = uuid.uuid4().hex + "0" * 8
        self.tag = review_tag(REPO, self.sha)
        self.ledger = Ledger(firestore_client, clock=self.clock, grace=timedelta(0))
        self.gemini = RacingGemini(clock=self.clock)
        self.simulator = simulator
        self.config = Config(github_comments=True, worker_max_retries=1000)
        comments = CommentsClient(simulator.url, timeout_s=5, attempts=2, sleep=lambda s: None)
        clients = {"gemini": self.gemini, "github": StandInContents(), "comments": comments}
        self.worker = Worker(
            self.config,
            sealer=EnvelopeSealer([LOCAL_ENVELOPE_KEY]),
            ledger=self.ledger,
            services=clients.__getitem__,
            clock=self.clock,
        )
        self.services = self.worker._context  # what the outbox deliverers use
        self.crashes: list[str] = []
        # A stray batch for this push, made long ago by a run that lost its claim.
        self.stray = self.gemini.create_batch(
            "m", [(p, "") for p in FILES], self.tag, created_at=self.clock() - timedelta(hours=1)
        )

    def deliver(self, source: str, event: str, delivery_id: str, body: dict[str, Any]) -> None:
        envelope = Envelope(source, event, delivery_id, self.clock(), {}, json.dumps(body).encode())
        sealed = EnvelopeSealer([LOCAL_ENVELOPE_KEY]).seal(envelope)
        self.survive(lambda: self.worker.handle("POST", "/", {}, sealed))

    def push(self) -> None:
        body = {
            "ref": "refs/heads/main",
            "after": self.sha,
            "repository": {"full_name": REPO, "default_branch": "main"},
            "commits": [{"added": FILES, "modified": [], "removed": []}],
        }
        self.deliver("github", "push", "push-1", body)

    def webhooks(self) -> None:
        """Gemini finishes every live batch and sends its completion webhook."""
        for name in self.gemini.live(self.tag):
            self.gemini.succeed(name)
            event = {"type": "batch.succeeded", "data": {"id": name}}
            self.deliver("gemini", "batch.succeeded", f"wh-{name}", event)

    def reconcile(self) -> None:
        settings = ReconcileSettings(grace_s=0, concurrency=1, budget_s=60, page_size=50)
        reconciler = Reconciler(
            self.ledger,
            self.gemini,  # type: ignore[arg-type]
            self.clock,
            settings,
            deliver=Deliverers(self.services),
            options=KindOptions(github_comments=True),
        )
        self.survive(reconciler.run)

    def survive(self, step: Callable[[], Any]) -> None:
        """Run one step of one process; a crash ends that process, not the world."""
        try:
            step()
        except Crashed as crash:
            self.crashes.append(str(crash))

    def names(self) -> list[str]:
        return [n for n in self.gemini.created if self.gemini.batches[n].display_name == self.tag]

    def quiet(self) -> bool:
        delivery = self.ledger.deliveries.get("github", "push-1")
        records = [self.ledger.operations.get(name) for name in self.names()]
        return (
            delivery is not None
            and delivery.status == "done"
            and self.ledger.deliveries.count("queued") == 0
            and all(r is not None and not r.pending and r.writeback_done for r in records)
        )

    def comments(self) -> list[dict[str, Any]]:
        seen = self.simulator.control.github_comments()
        return [c for c in seen["comments"] if self.sha[:12] in c["body"]]


@pytest.mark.parametrize("point", sorted(POINTS))
def test_a_crash_at_each_point_ends_with_one_batch_one_review_one_comment(
    point, firestore_client, simulator, registry
):
    simulator.control.reset()
    world = World(firestore_client, simulator)

    with crashing_at(point) as reached:
        for _ in range(ROUNDS):
            world.push()  # the first delivery, then Cloud Tasks' retries
            world.webhooks()
            world.reconcile()
            if world.quiet():
                break
            world.clock.advance(ROUND.total_seconds())

    assert world.crashes == [point], f"{point}: the sweep never crashed there ({set(reached)})"
    assert world.quiet(), f"{point}: not quiet after {ROUNDS} rounds"
    winner = world.ledger.submissions.get(world.tag).operation
    assert winner is not None and world.gemini.live(world.tag) == [winner], point
    records = {name: world.ledger.operations.get(name) for name in world.names()}
    statuses = sorted((r.status for r in records.values()), key=str)
    assert records[winner].status == "succeeded", point
    assert statuses.count("succeeded") == 1 and set(statuses) <= {"succeeded", "superseded"}, (
        point,
        statuses,
    )
    for path in FILES:
        review = world.ledger.reviews.get_review(REPO, world.sha, path)
        assert review is not None and review["operation"] == winner and review.get("text"), point
    assert len(world.comments()) == 1, (point, world.comments())


def test_every_crash_point_is_reached_on_the_way_through(firestore_client, simulator, registry):
    """Without a crash, one push passes every named point: the sweep crashes at real places."""
    simulator.control.reset()
    world = World(firestore_client, simulator)
    reached: list[str] = []
    crashpoints.install(reached.append)
    try:
        for _ in range(3):
            world.push()
            world.webhooks()
            world.reconcile()
            world.clock.advance(ROUND.total_seconds())
    finally:
        crashpoints.install(None)

    assert set(POINTS) - set(reached) == set()
    assert world.quiet() and len(world.comments()) == 1


@pytest.fixture
def registry():
    saved = handlers.snapshot()
    yield
    handlers.restore(saved)
    crashpoints.install(None)
