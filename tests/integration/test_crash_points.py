"""The crash-point sweep: die at every named point, recover, and nothing is lost or doubled.

For each point in `shared.crashpoints.POINTS`, one push (two Markdown files, through a
GitHub App: check runs and comments on, and a stray second batch for the same push, as a
run that lost its claim leaves) and two "Re-run" presses of its check run (the later
press delivered first, so the earlier one registers after it) go through the real
worker, ledger (Firestore emulator), settler, reconcile, outbox and GitHub (the
simulator), with the process "dying" (`Crashed`) the first time it reaches the point.
Then Cloud Tasks' retries, Gemini's completion webhooks and reconcile runs go on until
nothing changes, the clock moving past every lease a dead attempt left. The invariants
(docs/architecture.md, "Crash points"):

- one winning batch per submission (the push's, each press's), registered as its
  operation; every other batch for the push superseded and cancelled at Gemini;
- every operation's context names the files it reviews;
- no press is lost: both presses' deliveries are done; the later press is the check
  run's current operation, the earlier one never shown (superseded by it);
- each review written by the current operation's one settling commit;
- exactly one check run and one commit comment for the push, both showing the current
  operation;
- nothing pending, no delivery queued, no outbox item open;
- at the fan-out's own points (`apps.*`), with a second app on `push` (a tally): each app
  gets the push through its own task and record, both done, and the push's delivery done
  when both apps are (docs/architecture.md, "Apps"); the worker's tasks are held and
  delivered again each round, as Cloud Tasks does. The other points run with the review
  alone. The stray batch is a lost run's: its claim is an hour old, and its create shows
  at Gemini only once the push's own batch has won, so the push's run takes the claim
  over, and reconcile's adoption (it looks only for claims still open, and a claim taken
  over stays open until a listing past it) finds the stray and supersedes it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from apps.review.checks import CHECK_NAME
from apps.review.kind import review_tag
from apps.review.reruns import rerun_tag
from apps.review.results import Reviews
from local.fakes import FakeClock
from shared import api, crashpoints, handlers
from shared.config import LOCAL_ENVELOPE_KEY, Config
from shared.crashpoints import POINTS, Crashed, crashing_at
from shared.entrypoints.worker import Worker
from shared.github import CommentsClient
from shared.github.app import AppAuth, AppCredentials
from shared.github.checks import ChecksClient
from shared.handlers import builtin
from shared.handoff.envelope import Envelope, EnvelopeSealer
from shared.handoff.tasks import EnqueueResult
from shared.kinds import Deliverers
from shared.ledger import Ledger
from shared.ledger.ids import submission_id
from shared.reconcile import Reconciler, ReconcileSettings
from tests.standins import RacingGemini, StandInContents

REPO, FILES = "octo-org/handbook", ["docs/a.md", "docs/b.md"]
ROUNDS = 12
ROUND = timedelta(minutes=15)  # longer than any lease: a dead attempt's lease has ended
CONSOLE = "http://console.test"
# Two presses of "Re-run": the later one is delivered first each round, so the earlier
# one registers after it (and must never be shown).
PRESSES = (("rerun-2", timedelta(seconds=2)), ("rerun-1", timedelta(seconds=1)))

pytestmark = pytest.mark.slow
assert builtin  # registers the Gemini handlers the worker runs


class HeldTasks:
    """The queue: a task the worker creates (a deferral, one per app of the fan-out) is
    held, and each round delivers every held task again, as Cloud Tasks' retries would."""

    def __init__(self) -> None:
        self.held: dict[str, bytes] = {}

    def enqueue(self, url: str, body: bytes, headers: Any = None, **options: Any) -> EnqueueResult:
        task_id = str(options.get("task_id"))
        status = "duplicate" if task_id in self.held else "created"
        self.held.setdefault(task_id, body)
        return EnqueueResult(status=status, task_name=task_id)


TALLY = api.App("sweep-tally", collections=["sweep_tally"])


def tally_push(event: api.Event, ctx: api.Context) -> api.Outcome:
    """The second app on `push`: one document per push, written idempotently."""
    ctx.results.update("sweep_tally", api.doc_id(event.delivery_id), lambda s: {"seen": True})
    return api.Done("tallied")


class World:
    """One push's world: the worker in this process, the stand-in Gemini, and GitHub (the
    simulator) for the App's check run and commit comment."""

    def __init__(
        self, firestore_client: Any, simulator: Any, fan_out: bool = False, stray: bool = True
    ) -> None:
        self.clock = FakeClock(datetime.now(UTC))
        self.fan_out = fan_out
        self.pressed_at = self.clock()
        self.sha = uuid.uuid4().hex + "0" * 8
        self.tag = review_tag(REPO, self.sha)
        self.ledger = Ledger(firestore_client, clock=self.clock, grace=timedelta(0))
        self.gemini = RacingGemini(clock=self.clock)
        self.simulator = simulator
        self.config = Config(worker_max_retries=1000)
        if fan_out:  # a second app on the push: the worker hands it to each app apart
            TALLY.handler("github", "push")(tally_push)
        registered = simulator.control.register_github_app()
        installed = simulator.control.install_github_app(
            registered["id"], REPO.split("/")[0], repositories=[REPO]
        )
        self.installation = int(installed["id"])
        auth = AppAuth(
            AppCredentials.from_pem(registered["client_id"], registered["private_key"]),
            simulator.url,
            timeout_s=5,
        )
        quick = {"timeout_s": 5, "attempts": 2}
        self.tasks = HeldTasks()
        clients = {
            "gemini": self.gemini,
            "github": StandInContents(),
            "comments": CommentsClient(simulator.url, auth=auth, sleep=lambda s: None, **quick),
            "checks": ChecksClient(simulator.url, auth=auth, sleep=lambda s: None, **quick),
            "tasks": self.tasks,
        }
        self.worker = Worker(
            self.config,
            sealer=EnvelopeSealer([LOCAL_ENVELOPE_KEY]),
            ledger=self.ledger,
            services=clients.__getitem__,
            clock=self.clock,
        )
        self.services = self.worker._context  # what the outbox deliverers use
        self.crashes: list[str] = []
        # A stray batch for this push, made by a run that lost its claim: it claimed an
        # hour ago, its lease ran out, and its create shows at Gemini only after the push's
        # own batch won (shown by the first reconcile run once the push has its winner).
        self.stray: str | None = None
        if stray:
            self._make_stray()

    def _make_stray(self) -> None:
        lost = self.clock() - timedelta(hours=1)
        self.ledger.submissions.claim(
            self.tag,
            delivery_id="lost",
            attempt="lost-run",
            lease_until=lost + timedelta(minutes=10),
            now=lost,
        )
        self.stray = self.gemini.create_batch(
            "m", [(p, "") for p in FILES], self.tag, created_at=lost
        )
        self.gemini.hide(self.stray)

    def deliver(
        self,
        source: str,
        event: str,
        delivery_id: str,
        body: dict[str, Any],
        received_at: datetime | None = None,
    ) -> None:
        at = received_at or self.clock()
        envelope = Envelope(source, event, delivery_id, at, {}, json.dumps(body).encode())
        sealed = EnvelopeSealer([LOCAL_ENVELOPE_KEY]).seal(envelope)
        self.survive(lambda: self.worker.handle("POST", "/", {}, sealed))

    def push(self) -> None:
        body = {
            "ref": "refs/heads/main",
            "after": self.sha,
            "repository": {"full_name": REPO, "default_branch": "main"},
            "commits": [{"added": FILES, "modified": [], "removed": []}],
            "installation": {"id": self.installation},
        }
        self.deliver("github", "push", "push-1", body)
        for sealed in list(self.tasks.held.values()):  # each app's task, and deferrals
            self.survive(lambda sealed=sealed: self.worker.handle("POST", "/", {}, sealed))

    def reruns(self) -> None:
        """Both presses, once the push's check run exists (only then is there a button)."""
        if not self.runs():
            return
        body = {
            "action": "rerequested",
            "check_run": {
                "name": CHECK_NAME,
                "head_sha": self.sha,
                "external_id": submission_id(self.tag),
            },
            "repository": {"full_name": REPO},
            "installation": {"id": self.installation},
        }
        for delivery_id, after in PRESSES:  # two people: two bodies (GitHub signs the body)
            pressed = {**body, "sender": {"login": f"presser-{delivery_id}"}}
            self.deliver("github", "check_run", delivery_id, pressed, self.pressed_at + after)

    def webhooks(self) -> None:
        """Gemini finishes every live batch and sends its completion webhook."""
        for name in self.live():
            self.gemini.succeed(name)
            event = {"type": "batch.succeeded", "data": {"id": name}}
            self.deliver("gemini", "batch.succeeded", f"wh-{name}", event)

    def reconcile(self) -> None:
        if self.stray is not None and self.operation_of(self.tag):
            self.gemini.reveal(self.stray)
        settings = ReconcileSettings(grace_s=0, concurrency=1, budget_s=60, page_size=50)
        reconciler = Reconciler(
            self.ledger,
            self.gemini,  # type: ignore[arg-type]
            self.clock,
            settings,
            deliver=Deliverers(self.services),
        )
        self.survive(reconciler.run)

    def survive(self, step: Callable[[], Any]) -> None:
        """Run one step of one process; a crash ends that process, not the world."""
        try:
            step()
        except Crashed as crash:
            self.crashes.append(str(crash))

    def names(self) -> list[str]:
        """Every batch made for the push or one of its presses."""
        return [
            n
            for n in self.gemini.created
            if self.gemini.batches[n].display_name.startswith(self.tag)
        ]

    def live(self) -> list[str]:
        """The push's batches nobody asked to cancel: what Gemini bills on."""
        return [n for n in self.names() if not self.gemini.batches[n].cancel_requested]

    def operation_of(self, tag: str) -> str | None:
        stored = self.ledger.submissions.get(tag)
        return stored.operation if stored is not None else None

    def quiet(self) -> bool:
        deliveries = [self.ledger.deliveries.get("github", d) for d in ("push-1", *self.pressed())]
        records = [self.ledger.operations.get(name) for name in self.names()]
        return (
            all(d is not None and d.status == "done" for d in deliveries)
            and self.ledger.deliveries.count("queued") == 0
            and all(r is not None and not r.pending and r.writeback_done for r in records)
            and not any(i.open for r in records if r is not None for i in r.outbox)
        )

    def pressed(self) -> list[str]:
        return [delivery_id for delivery_id, _ in PRESSES] if self.runs() else []

    def comments(self) -> list[dict[str, Any]]:
        seen = self.simulator.control.github_comments()
        return [c for c in seen["comments"] if self.sha[:12] in c["body"]]

    def runs(self) -> list[dict[str, Any]]:
        found = self.simulator.control.check_runs(repo=REPO, sha=self.sha)
        return [r for r in found if r["name"] == CHECK_NAME]


def assert_nothing_lost_or_doubled(world: World, point: str) -> None:
    """The invariants in the module docstring, after the world went quiet."""
    push_winner = world.operation_of(world.tag)
    newer, older = (world.operation_of(rerun_tag(REPO, world.sha, d)) for d, _ in PRESSES)
    assert push_winner and newer and older, (point, push_winner, newer, older)
    submission = world.ledger.submissions.get(world.tag)
    assert submission.current_operation == newer, (point, submission, newer)
    records = {name: world.ledger.operations.get(name) for name in world.names()}
    winners = {push_winner, newer, older}
    for name, record in records.items():
        assert record is not None, (point, name)
        if name in winners:  # what it reviews; a duplicate that lost reviews nothing
            assert record.context.get("paths") == FILES, (point, name, record.context)
        else:
            assert record.status == "superseded", (point, name, record.status)
    assert records[newer].status == "succeeded", (point, records[newer])
    assert records[older].status in ("superseded", "succeeded"), (point, records[older])
    if records[older].status == "superseded":
        assert records[older].superseded_by == newer, (point, records[older])
    assert set(world.live()) <= winners, (point, world.live(), winners)
    for delivery_id, _ in PRESSES:  # no press lost
        delivery = world.ledger.deliveries.get("github", delivery_id)
        assert delivery is not None and delivery.status == "done", (point, delivery)
    for path in FILES:
        review = Reviews(world.ledger).get_review(REPO, world.sha, path)
        assert review is not None and review["operation"] == newer, (point, path, review)
    [run] = world.runs()
    assert run["status"] == "completed" and run["details_url"].endswith(newer), (point, run)
    [comment] = world.comments()
    assert newer in comment["body"], (point, comment["body"])
    if not world.fan_out:
        return
    for app in ("review", "sweep-tally"):  # each app's own record of the push, done
        own = world.ledger.deliveries.get("github", f"push-1#{app}")
        assert own is not None and own.status == "done", (point, app, own)
    tally = world.ledger.results.get("sweep_tally", api.doc_id("push-1"))
    assert tally is not None and tally["seen"] is True, (point, tally)


# Shared batches' own points: tests/integration/test_group_crash_points.py.
PUSH_POINTS = sorted(p for p in POINTS if not p.startswith("group."))


@pytest.mark.parametrize("point", PUSH_POINTS)
def test_a_crash_at_each_point_ends_with_one_batch_one_review_one_comment(
    point, firestore_client, simulator, registry
):
    simulator.control.reset()
    # The fan-out's points in a world with a second app on the push; the rest as before.
    world = World(firestore_client, simulator, fan_out=point.startswith("apps."))

    with crashing_at(point) as reached:
        for _ in range(ROUNDS):
            world.push()  # the first delivery, then Cloud Tasks' retries
            world.reruns()
            world.webhooks()
            world.reconcile()
            if world.quiet() and world.pressed():
                break
            world.clock.advance(ROUND.total_seconds())

    assert world.crashes == [point], f"{point}: the sweep never crashed there ({set(reached)})"
    assert world.quiet(), f"{point}: not quiet after {ROUNDS} rounds"
    assert_nothing_lost_or_doubled(world, point)


def test_every_crash_point_is_reached_on_the_way_through(firestore_client, simulator, registry):
    """Without a crash, one push (to two apps) and its presses pass every named point: the
    sweep crashes at real places."""
    simulator.control.reset()
    world = World(firestore_client, simulator, fan_out=True)
    reached: list[str] = []
    crashpoints.install(reached.append)
    try:
        for _ in range(4):
            world.push()
            world.reruns()
            world.webhooks()
            world.reconcile()
            world.clock.advance(ROUND.total_seconds())
    finally:
        crashpoints.install(None)

    assert set(PUSH_POINTS) - set(reached) == set()
    assert world.quiet()
    assert_nothing_lost_or_doubled(world, "none")


@pytest.fixture
def registry(monkeypatch):
    # The review publishes a check run and a comment (its settings, from the environment).
    for name, value in (
        ("GITHUB_COMMENTS", "true"),
        ("GITHUB_CHECK_RUNS", "true"),
        ("CONSOLE_URL", CONSOLE),
    ):
        monkeypatch.setenv(name, value)
    saved = handlers.snapshot()
    yield
    handlers.restore(saved)
    crashpoints.install(None)
