"""The review as ONE check run per push, through the outbox (docs/architecture.md, "Check
runs"): shown `in_progress` right after the winner's commit, completed by the settlement
with its annotations 50 a request, across an installation token that expires mid-run, a
crash between the winner's commit and the first publish, and two overlapping deliveries.

The stack tests run the real ingress and worker processes against the simulator as the
App's GitHub (tests/integration/test_github_app_pipeline.py sets it up the same way); the
crash test runs the worker in this process so the crash point can be driven.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from apps.review.checks import CHECK_NAME
from apps.review.kind import review_tag
from local.fakes import FakeClock
from shared import crashpoints, handlers
from shared.config import LOCAL_ENVELOPE_KEY, Config
from shared.crashpoints import Crashed, crashing_at
from shared.entrypoints.worker import Worker
from shared.handlers import builtin
from shared.handoff.envelope import Envelope, EnvelopeSealer
from shared.kinds import Deliverers
from shared.ledger import Ledger, Operation
from shared.ledger.ids import submission_id
from tests.integration.test_github_app_pipeline import CLIENT_ID, INSTALLATION, PEM, PUBLIC
from tests.plugins.pipeline import FILES, OWNER_REPO, SHA, PipelineStack, pipeline_stack
from tests.plugins.pipeline import push_payload as plain_push
from tests.standins import RacingGemini, StandInContents
from tests.waiting import wait_until

pytestmark = pytest.mark.slow
assert builtin  # registers the Gemini handlers the in-process worker runs

MANY = "docs/many.md"  # the simulated Gemini finds 120 problems in it
MANY_BODY = b"# Many\n\n<!-- sim:findings=120 level=warning -->\n" + b"A line.\n" * 130


@pytest.fixture(scope="module")
def stack(firestore_emulator, cloudtasks_emulator_fast) -> Iterator[PipelineStack]:
    # GITHUB_CHECK_RUNS unset: on, because a GitHub App is configured.
    env = {"GITHUB_APP_ID": CLIENT_ID, "GITHUB_APP_PRIVATE_KEY": PEM}
    with pipeline_stack(firestore_emulator, cloudtasks_emulator_fast, env) as started:
        yield started


@pytest.fixture
def fresh(stack: PipelineStack, firestore_client) -> PipelineStack:
    stack.install_app(CLIENT_ID, PUBLIC, INSTALLATION, files={**FILES, MANY: MANY_BODY})
    return stack


def app_push(pusher: str) -> bytes:
    payload = json.loads(plain_push(files=[*FILES, MANY]))
    payload["installation"] = {"id": INSTALLATION}
    payload["pusher"]["name"] = pusher  # a distinct body per delivery
    return json.dumps(payload).encode()


def registered(ledger: Ledger) -> Operation:
    def one() -> Operation | None:
        found = ledger.queries.list_operations(limit=2)
        return found[0] if len(found) == 1 else None

    return wait_until(one, 90, "the review batch to be registered", every=0.1)


def runs(sim: Any, sha: str = SHA) -> list[dict[str, Any]]:
    return [r for r in sim.check_runs(repo=OWNER_REPO, sha=sha) if r["name"] == CHECK_NAME]


def finished(ledger: Ledger, name: str) -> bool:
    record = ledger.operations.get(name)
    return record is not None and not record.pending and record.writeback_done


def test_a_push_shows_one_check_run_in_progress_then_completed_with_120_annotations(
    fresh, firestore_client
):
    ledger = Ledger(firestore_client, grace=timedelta(0))
    assert fresh.push(app_push("checks-1"), delivery="checks-1").status_code == 202
    op = registered(ledger)
    [started] = wait_until(
        lambda: runs(fresh.sim) or None, 60, "the run shown in progress", every=0.1
    )
    assert started["status"] == "in_progress"
    assert started["external_id"] == submission_id(review_tag(OWNER_REPO, SHA))
    assert started["details_url"] == f"http://127.0.0.1:8099/operations/{op.name}"
    wait_until(lambda: not ledger.operations.get(op.name).outbox[0].open, 30, "start delivered")
    pending = ledger.operations.get(op.name)
    assert pending.pending and not pending.writeback_done and pending.expire_at is None

    assert fresh.sim.github_tokens(expire=True)["expired"] == 1  # mid-run: before settlement
    fresh.sim.complete(op.name, state="succeeded", webhook="send")
    wait_until(lambda: finished(ledger, op.name), 60, "the settlement and its check run")

    [run] = runs(fresh.sim)
    assert run["id"] == started["id"]
    assert (run["status"], run["conclusion"]) == ("completed", "neutral")  # 120 warnings
    assert run["output"]["annotations_count"] == 120
    # Created in progress with none, then appended 50 + 50 + 20, completed by the last.
    assert [(w["method"], w["annotations"], w["status"]) for w in run["writes"]] == [
        ("POST", 0, "in_progress"),
        ("PATCH", 50, "in_progress"),
        ("PATCH", 50, "in_progress"),
        ("PATCH", 20, "completed"),
    ]
    assert fresh.sim.github_apps()["tokens_issued"] == 2  # the expired one renewed once
    logs = fresh.worker.output()
    assert "check run completed" in logs
    assert "ghs_" not in logs


def test_two_overlapping_deliveries_of_one_push_make_one_check_run(fresh, firestore_client):
    ledger = Ledger(firestore_client, grace=timedelta(0))
    answers: list[int] = []
    bodies = [(app_push(f"overlap-{n}"), f"overlap-{n}") for n in (1, 2)]
    pushers = [
        threading.Thread(target=lambda b=b, d=d: answers.append(fresh.push(b, d).status_code))
        for b, d in bodies
    ]
    for pusher in pushers:
        pusher.start()
    for pusher in pushers:
        pusher.join()
    assert answers == [202, 202]

    def both_done() -> bool:
        found = ledger.deliveries.listing(source="github", limit=5)
        return len(found) == 2 and all(d.status == "done" for d in found)

    wait_until(both_done, 90, "both deliveries of the push to be done", every=0.1)
    op = registered(ledger)
    fresh.sim.complete(op.name, state="succeeded", webhook="send")
    wait_until(lambda: finished(ledger, op.name), 60, "the settlement and its check run")

    [run] = runs(fresh.sim)
    assert (run["status"], run["output"]["annotations_count"]) == ("completed", 120)
    assert [w["method"] for w in run["writes"]].count("POST") == 1


# --- a crash between the winner's commit and the first publish (in this process) --------


class World:
    """One App push through the worker in this process; GitHub is the simulator."""

    def __init__(self, firestore_client: Any, simulator: Any) -> None:
        from shared.github.app import AppAuth, AppCredentials
        from shared.github.checks import ChecksClient

        self.clock = FakeClock(datetime.now(UTC))
        self.sha = uuid.uuid4().hex + "0" * 8
        self.ledger = Ledger(firestore_client, clock=self.clock, grace=timedelta(0))
        self.gemini = RacingGemini(clock=self.clock)
        app = simulator.control.register_github_app()
        self.installation = simulator.control.install_github_app(
            app["id"], "octo-org", repositories=[OWNER_REPO]
        )["id"]
        auth = AppAuth(
            AppCredentials.from_pem(app["client_id"], app["private_key"]),
            simulator.url,
            timeout_s=5,
        )
        checks = ChecksClient(simulator.url, auth=auth, timeout_s=5, attempts=2)
        self.config = Config(worker_max_retries=1000)
        clients = {"gemini": self.gemini, "github": StandInContents(), "checks": checks}
        self.worker = Worker(
            self.config,
            sealer=EnvelopeSealer([LOCAL_ENVELOPE_KEY]),
            ledger=self.ledger,
            services=clients.__getitem__,
            clock=self.clock,
        )

    def deliver(self, source: str, event: str, delivery_id: str, body: dict[str, Any]) -> None:
        envelope = Envelope(source, event, delivery_id, self.clock(), {}, json.dumps(body).encode())
        self.worker.handle("POST", "/", {}, EnvelopeSealer([LOCAL_ENVELOPE_KEY]).seal(envelope))

    def push(self) -> None:
        body = {
            "ref": "refs/heads/main",
            "after": self.sha,
            "repository": {"full_name": OWNER_REPO, "default_branch": "main"},
            "commits": [{"added": ["docs/a.md"], "modified": [], "removed": []}],
            "installation": {"id": self.installation},
        }
        self.deliver("github", "push", "push-1", body)


@pytest.fixture
def registry(monkeypatch):
    monkeypatch.setenv("GITHUB_CHECK_RUNS", "true")  # the review app's setting
    saved = handlers.snapshot()
    yield
    handlers.restore(saved)
    crashpoints.install(None)


def test_a_crash_after_the_winner_commit_is_finished_by_the_outbox_sweep(
    firestore_client, simulator, registry
):
    simulator.control.reset()
    world = World(firestore_client, simulator)
    with crashing_at("push.registered"), pytest.raises(Crashed):
        world.push()
    [name] = world.gemini.created
    record = world.ledger.operations.get(name)
    assert record.pending and [i.open for i in record.outbox] == [True]
    assert runs(simulator.control, world.sha) == []  # died before the first publish

    world.clock.advance(120)  # past the sweep's grace for a caller still delivering
    report = world.ledger.outbox.sweep(Deliverers(world.worker._context))
    assert report.completed == [name]
    [run] = runs(simulator.control, world.sha)
    assert run["status"] == "in_progress"
    record = world.ledger.operations.get(name)
    assert record.pending and not record.writeback_done and record.expire_at is None

    world.gemini.succeed(name)
    world.deliver(
        "gemini", "batch.succeeded", "wh-1", {"type": "batch.succeeded", "data": {"id": name}}
    )
    record = world.ledger.operations.get(name)
    assert record.status == "succeeded" and record.writeback_done
    assert [i.payload["role"] for i in record.outbox] == ["start", "finish"]
    [run] = runs(simulator.control, world.sha)
    assert (run["status"], [w["method"] for w in run["writes"]]) == (
        "completed",
        ["POST", "PATCH"],
    )
