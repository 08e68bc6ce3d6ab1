"""The GitHub delivery sweep (shared/recovery) against the simulator's GitHub, which sends
the App's webhooks and records each attempt as GitHub does, and the Firestore emulator.

The App webhook's receiver is a loopback server each test scripts (an answer, or down);
a delivery the ledger records is what the worker would record. The sweep's clock is a
`FakeClock` started now (GitHub's `delivered_at` is the simulator's real time) and moved
by the tests; the 3-day window is the simulator's control call that ages its log. A
run's budget is counted on a fake monotonic clock that ticks once per look, so where a
run stops never depends on how fast the machine is.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from local.fakes import FakeClock
from shared import apps
from shared.config import Config
from shared.github.hook_deliveries import HookDeliveriesClient
from shared.github.transport import github_policy
from shared.handoff.envelope import EnvelopeSealer
from shared.handoff.tasks import TaskQueue, ensure_queue, make_client
from shared.ledger import Ledger
from shared.ledger.recoveries import Checkpoint, ScanPosition
from shared.logs import _FIELDS_ATTR as FIELDS_ATTR
from shared.recovery import (
    ALERT,
    BEHIND_ALERT,
    DeliverySweep,
    Recovered,
    SweepSettings,
    WorkerHandOff,
)
from shared.recovery.act import RecoveryActions, RunContext
from shared.recovery.handoff import recovered_task_id
from shared.recovery.report import SweepReport
from tests.ports import refusing_port

GRACE = timedelta(seconds=30)
DAY_S = 86400
ENVELOPE_KEY = "sweep-test-envelope-key"
QUEUE = "projects/demo-hookledger/locations/us-central1/queues/sweep-test"


class Ticks:
    """A monotonic clock that moves one second each time it is read."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


class Setup:
    """The simulator's App, its receiver, the ledger and a sweep factory."""

    def __init__(self, simulator: Any, target: Any, ledger: Ledger, clock: FakeClock) -> None:
        self.sim = simulator.control
        self.target = target
        self.ledger = ledger
        self.clock = clock
        app = self.sim.register_github_app()
        self.client = HookDeliveriesClient(
            simulator.url,
            _credentials(app),
            timeout_s=5.0,
            policy=github_policy(attempts=1),
        )
        self.handed: list[Any] = []
        self.url = f"{target.url}/github"
        self.down = ""

    def sweep(
        self,
        *,
        list_budget_s: float = 1000.0,
        act_budget_s: float = 1000.0,
        hand_off: Any = None,
        **settings: Any,
    ) -> Any:
        budgets = dict(list_budget_s=list_budget_s, act_budget_s=act_budget_s)
        return DeliverySweep(
            self.ledger,
            self.client,
            hand_off or self.handed.append,
            self.clock,
            SweepSettings(grace=GRACE, **budgets, **settings),
            monotonic=Ticks(),
        )

    def push(self, n: int, *, url: str | None = None, event: str = "push") -> dict[str, Any]:
        """GitHub sends push `n` (one attempt, no retry); its recorded delivery."""
        payload = {
            "ref": "refs/heads/main",
            "after": f"{n:040x}",
            "repository": {"id": 8150, "full_name": "octo/docs", "default_branch": "main"},
            "installation": {"id": 4711},
            "commits": [],
        }
        return dict(
            self.sim.send_github_webhook(event, payload, url=url or self.url, guid=f"guid-{n}")
        )

    def pass_grace(self) -> None:
        """Move the sweep's clock past the grace of every delivery sent so far (sent after
        the clock started, by a few real milliseconds)."""
        self.clock.advance(GRACE.total_seconds() + 5)

    def worker_records(self, guid: str) -> None:
        """The delivery reached the worker (the ingress handed it off, or a redelivery)."""
        self.ledger.deliveries.record("github", guid, "push", payload="{}")

    def attempts(self, guid: str) -> list[dict[str, Any]]:
        return list(self.sim.github_hook_deliveries(guid=guid))


def _credentials(app: dict[str, Any]) -> Any:
    from shared.github.app import AppCredentials

    return AppCredentials.from_pem(app["client_id"], app["private_key"])


@pytest.fixture
def setup(simulator: Any, task_target: Any, firestore_client: Any) -> Iterator[Setup]:
    apps.load(("apps.review",))  # the review takes `push`: a failed push is worth recovering
    clock = FakeClock(datetime.now(UTC))
    with refusing_port() as port:
        found = Setup(simulator, task_target, Ledger(firestore_client, clock=clock), clock)
        found.down = f"http://127.0.0.1:{port}/github"  # where nothing answers
        yield found


def test_a_failed_push_is_opened_once_and_a_success_is_not(setup: Setup) -> None:
    setup.target.respond(503)
    failed = setup.push(1)
    setup.target.respond(200)
    setup.push(2)
    assert (failed["status_code"], failed["status"].startswith("Invalid HTTP Response")) == (
        503,
        True,
    )

    report = setup.sweep().run()

    assert (report.listed, report.failed, report.opened, report.pages) == (2, 1, 1, 1)
    [recovery] = setup.ledger.recoveries.recent()
    assert (recovery.guid, recovery.status, recovery.event) == ("guid-1", "open", "push")
    assert recovery.github_delivery_id == failed["id"]
    again = setup.sweep().run()  # within the overlap: listed again, opened no second time
    assert (again.failed, again.opened) == (1, 0)


def test_every_open_recovery_is_looked_at_a_page_at_a_time(setup: Setup) -> None:
    for n in range(5):
        setup.push(n, url=setup.down)

    report = setup.sweep(open_page=2).run()

    assert (report.opened, report.open, report.waiting) == (5, 5, 5)
    assert report.firestore_reads == 1 + 5 + 5  # the checkpoint; 5 documents, 5 ledger reads


def test_the_checkpoint_leaves_no_gap_and_scans_nothing_twice(setup: Setup) -> None:
    down = setup.down
    for n in range(3):
        setup.push(n, url=down)
    first = setup.sweep().run()
    assert (first.listed, first.opened) == (3, 3)
    checkpoint = setup.ledger.recoveries.checkpoint()
    assert checkpoint.scan is None and checkpoint.covered_to is not None

    # Those three are now older than the overlap: the next listing stops before them.
    setup.sim.age_github_hook_deliveries(120)
    setup.push(10, url=down)
    setup.push(11, url=down)
    second = setup.sweep().run()
    assert (second.listed, second.opened, second.pages) == (2, 2, 1)

    # A delivery GitHub records late, older than the last listing's newest but within the
    # overlap, is still listed: no gap between two runs.
    late = setup.push(12, url=down)
    setup.sim.age_github_hook_deliveries(20, ids=[late["id"]])
    setup.sim.age_github_hook_deliveries(120, ids=[d["id"] for d in _all(setup, 10, 11)])
    third = setup.sweep().run()
    assert (third.listed, third.opened) == (1, 1)
    assert {r.guid for r in setup.ledger.recoveries.recent()} == {
        "guid-0",
        "guid-1",
        "guid-2",
        "guid-10",
        "guid-11",
        "guid-12",
    }


def _all(setup: Setup, *numbers: int) -> list[dict[str, Any]]:
    return [d for n in numbers for d in setup.attempts(f"guid-{n}")]


def test_a_run_stops_at_its_budget_and_the_next_resumes_where_it_stopped(setup: Setup) -> None:
    down = setup.down
    for n in range(230):  # three pages of 100
        setup.push(n, url=down)

    # One tick at the run's start, one at each look before a page: 1.5 s lets one page in.
    first = setup.sweep(list_budget_s=1.5).run()
    assert (first.pages, first.listed, first.stopped_at) == (1, 100, "list")
    assert setup.ledger.recoveries.checkpoint().scan is not None

    # Out of the overlap now: the fresh listing after the resumed one re-reads none of them.
    setup.sim.age_github_hook_deliveries(120)
    second = setup.sweep().run()
    assert second.resumed and second.stopped_early is False
    # The rest of the stopped listing (2 pages), then a fresh one whose first page starts
    # below its floor (the stopped listing's newest less the overlap).
    assert (second.pages, second.listed, second.opened) == (3, 130, 130)
    assert setup.ledger.recoveries.count() == 230
    assert setup.ledger.recoveries.checkpoint().scan is None


def test_a_delivery_the_ingress_took_after_githubs_timeout_is_not_redelivered(
    setup: Setup,
) -> None:
    setup.target.respond(503)
    setup.push(1)
    setup.worker_records("guid-1")  # GitHub counted it failed; the worker has it
    setup.pass_grace()

    report = setup.sweep().run()

    assert (report.accepted, report.redelivered, report.handed_off) == (1, 0, 0)
    assert len(setup.attempts("guid-1")) == 1
    [recovery] = setup.ledger.recoveries.recent()
    assert (recovery.status, recovery.via) == ("accepted", None)


def test_a_failed_push_is_redelivered_once_after_its_grace_then_closed(setup: Setup) -> None:
    setup.target.respond(503)
    setup.push(1)
    waiting = setup.sweep().run()
    assert (waiting.opened, waiting.waiting, waiting.redelivered) == (1, 1, 0)

    setup.target.respond(200)  # the ingress is back
    setup.pass_grace()
    asked = setup.sweep().run()
    assert asked.redelivered == 1
    attempts = setup.sim.wait_for_github_hook_deliveries("guid-1", count=2)
    assert [a["redelivery"] for a in attempts] == [True, False]  # newest first
    assert attempts[0]["status"] == "OK"
    setup.worker_records("guid-1")

    closed = setup.sweep().run()
    assert (closed.recovered, closed.redelivered) == (1, 0)
    [recovery] = setup.ledger.recoveries.recent()
    assert (recovery.status, recovery.via, recovery.sweep_run) == (
        "recovered",
        "redelivery",
        asked.run_id,
    )
    assert recovery.after_s is not None and recovery.after_s >= GRACE.total_seconds()
    assert len(setup.attempts("guid-1")) == 2  # one redelivery, never a second


def test_an_overlapping_run_does_not_redeliver_a_second_time(setup: Setup) -> None:
    setup.target.respond(503)
    setup.push(1)
    setup.sweep().run()
    setup.pass_grace()
    [stale] = setup.ledger.recoveries.open_page()  # what a slower run read

    setup.sweep().run()  # the faster run redelivers
    late = RecoveryActions(
        setup.ledger, setup.client, setup.handed.append, setup.clock, SweepSettings(grace=GRACE)
    )
    report = SweepReport()
    late.step(stale, report, RunContext("late", None, spent=lambda: False))

    assert report.redelivered == 0
    setup.sim.wait_for_github_hook_deliveries("guid-1", count=2)
    assert len(setup.attempts("guid-1")) == 2


def test_when_the_redelivery_does_not_arrive_the_sweep_hands_the_push_to_the_worker(
    setup: Setup, cloudtasks_emulator: Any
) -> None:
    queue = TaskQueue(make_client(cloudtasks_emulator.host), QUEUE, timeout_s=10.0)
    ensure_queue(make_client(cloudtasks_emulator.host), QUEUE)
    config = Config(worker_url=f"{setup.target.url}/worker", queue="sweep-test")
    sealer = EnvelopeSealer((ENVELOPE_KEY,))
    hand_off = WorkerHandOff(config, sealer, lambda: queue, setup.clock)
    setup.target.respond(503)  # the ingress stays down: the redelivery fails too
    sent = setup.push(1)
    setup.pass_grace()
    assert setup.sweep(hand_off=hand_off).run().redelivered == 1
    setup.sim.wait_for_github_hook_deliveries("guid-1", count=2)

    setup.pass_grace()
    report = setup.sweep(hand_off=hand_off).run()

    assert (report.handed_off, report.redelivered) == (1, 0)
    [task] = [r for r in setup.target.wait_for(3) if r.path == "/worker"]
    envelope = sealer.open(task.body)
    assert (envelope.source, envelope.event, envelope.delivery_id) == ("github", "push", "guid-1")
    assert envelope.body is not None
    assert json.loads(envelope.body)["after"] == sent["request"]["payload"]["after"]
    # Stamped with when GitHub first sent it, not when the sweep read it back.
    first_sent = datetime.fromisoformat(sent["delivered_at"].replace("Z", "+00:00"))
    assert envelope.received_at == first_sent < setup.clock()
    again = Recovered(setup.client.get(sent["id"]), first_sent, recovered_task_id("guid-1"))
    assert hand_off(again).status == "duplicate"  # one task per guid
    assert recovered_task_id("guid-1") in hand_off(again).task_name

    setup.worker_records("guid-1")
    closed = setup.sweep(hand_off=hand_off).run()
    [recovery] = setup.ledger.recoveries.recent()
    assert closed.recovered == 1
    assert (recovery.status, recovery.via) == ("recovered", "handoff")


def test_an_unrecovered_delivery_alerts_once_before_githubs_3_days_then_closes(
    setup: Setup, caplog: pytest.LogCaptureFixture
) -> None:
    down = setup.down
    setup.push(1, url=down)
    setup.sim.age_github_hook_deliveries(3 * DAY_S - 3600)  # an hour left at GitHub
    handed: list[Any] = []

    def refused(request: Any) -> Any:
        handed.append(request)
        raise ValueError("the worker's queue refuses it")  # so it stays unrecovered

    caplog.set_level(logging.ERROR, logger="hookledger.reconcile.github")
    setup.sweep(hand_off=refused).run()  # opens it, alerts, asks a redelivery
    setup.pass_grace()
    setup.sweep(hand_off=refused).run()  # the hand-off fails: still open, no new alert

    alerts = [r for r in caplog.records if _fields(r).get("alert") == ALERT]
    assert len(alerts) == 1, [r.getMessage() for r in alerts]
    fields = _fields(alerts[0])
    assert (fields["guid"], fields["delivery_event"], fields["repository_id"]) == (
        "guid-1",
        "push",
        8150,
    )
    assert len(handed) == 1
    setup.clock.advance(3600)
    closing = setup.sweep(hand_off=refused).run()
    [recovery] = setup.ledger.recoveries.recent()
    assert (closing.unrecoverable, closing.alerts, recovery.status) == (1, 0, "unrecoverable")


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    return dict(getattr(record, FIELDS_ATTR, None) or {})


def test_events_no_app_takes_are_not_recovered_and_throttled_ones_are(setup: Setup) -> None:
    setup.target.respond(503)
    setup.push(1, event="issues")  # no app loaded here takes issues
    setup.sim.throttle_github_webhooks(count=1)
    setup.target.respond(200)
    throttled = setup.push(2)
    assert throttled["throttled_at"] is not None

    report = setup.sweep().run()

    assert (report.skipped, report.opened) == (1, 1)
    assert [r.guid for r in setup.ledger.recoveries.recent()] == ["guid-2"]


def test_githubs_retry_after_stops_the_listing_until_it_passes(setup: Setup) -> None:
    setup.target.respond(503)
    setup.push(1)
    limit = {"count": 1, "status": 429, "retry_after_s": 120}
    setup.sim.set_fault_model(github_secondary_limit=limit)

    limited = setup.sweep().run()
    assert (limited.stopped_at, limited.retry_after_s, limited.listed) == ("rate_limited", 120, 0)
    resume_after = setup.ledger.recoveries.checkpoint().resume_after
    assert resume_after == setup.clock() + timedelta(seconds=120)

    setup.clock.advance(60)
    waiting = setup.sweep().run()  # GitHub's wait has not passed: not one call
    assert (waiting.github_calls, waiting.stopped_at) == (0, "rate_limited")

    setup.clock.advance(61)
    resumed = setup.sweep().run()
    assert (resumed.listed, resumed.opened, resumed.stopped_early) == (1, 1, False)


def test_one_recovery_that_fails_stops_no_other(setup: Setup) -> None:
    setup.push(1, url=setup.down)
    setup.push(2, url=setup.down)
    setup.sweep().run()
    setup.pass_grace()
    setup.sweep().run()  # both redelivered (to the same dead address)
    setup.pass_grace()
    handed: list[str] = []

    def hand_off(recovered: Any) -> Any:
        if recovered.request.delivery.guid == "guid-1":
            raise RuntimeError("a fault of this one delivery")
        handed.append(recovered.request.delivery.guid)

    report = setup.sweep(hand_off=hand_off).run()

    assert (handed, report.handed_off, report.errors) == (["guid-2"], 1, 1)
    assert not report.stopped_early


def test_a_position_github_refuses_is_listed_afresh_down_to_the_same_floor(
    setup: Setup, caplog: pytest.LogCaptureFixture
) -> None:
    setup.push(1, url=setup.down)
    stale = ScanPosition(
        f"{setup.client._api_url}/app/hook/deliveries?cursor=not-a-cursor",
        setup.clock() - timedelta(hours=1),
        setup.clock(),
    )
    long_ago = setup.clock() - timedelta(hours=7)  # no listing finished since
    setup.ledger.recoveries.save_checkpoint(Checkpoint(scan=stale, listed_at=long_ago))
    caplog.set_level(logging.ERROR, logger="hookledger.reconcile.github")

    refused = setup.sweep().run()
    assert (refused.stopped_at, refused.errors, refused.opened) == ("github", 1, 0)
    behind = [r for r in caplog.records if _fields(r).get("alert") == BEHIND_ALERT]
    assert len(behind) == 1 and _fields(behind[0])["listed_at"] == long_ago.isoformat()
    position = setup.ledger.recoveries.checkpoint().scan
    assert position is not None and position.next_url is None
    assert position.floor_at == stale.floor_at

    caplog.clear()
    fresh = setup.sweep().run()
    assert (fresh.listed, fresh.opened, fresh.stopped_early) == (1, 1, False)
    assert not [r for r in caplog.records if _fields(r).get("alert") == BEHIND_ALERT]


def test_a_wait_github_asks_of_the_listing_holds_every_call_of_the_run(setup: Setup) -> None:
    setup.push(1, url=setup.down)
    setup.sweep().run()  # opened, within its grace
    setup.pass_grace()
    setup.sim.set_fault_model(github_secondary_limit={"count": 1, "retry_after_s": 60})

    paused = setup.sweep().run()

    assert (paused.stopped_at, paused.github_calls, paused.redelivered) == ("rate_limited", 1, 0)
    assert paused.waiting == 1
    setup.clock.advance(61)
    assert setup.sweep().run().redelivered == 1


def test_a_delivery_recorded_before_the_sweep_acted_is_accepted_not_recovered(
    setup: Setup,
) -> None:
    setup.push(1, url=setup.down)
    setup.sweep().run()
    [opened] = setup.ledger.recoveries.open_page()
    acted_at = setup.clock() + timedelta(seconds=60)
    setup.ledger.recoveries.change(opened, via="redelivery", redelivered_at=acted_at)
    setup.worker_records("guid-1")  # at the clock's now: before the redelivery was asked

    report = setup.sweep().run()

    [closed] = setup.ledger.recoveries.recent()
    assert (report.accepted, report.recovered, closed.status) == (1, 0, "accepted")


def test_a_change_returns_the_version_it_wrote_and_refuses_a_stale_one(setup: Setup) -> None:
    setup.push(1, url=setup.down)
    setup.sweep().run()
    [read] = setup.ledger.recoveries.open_page()

    written = setup.ledger.recoveries.change(read, last_error="first")

    assert written is not None and written.last_error == "first"
    assert written.update_time != read.update_time
    assert setup.ledger.recoveries.change(read, last_error="stale") is None
    again = setup.ledger.recoveries.change(written, last_error="second")  # no read between
    assert again is not None
    assert setup.ledger.recoveries.get_many(["guid-1"])["guid-1"].last_error == "second"


def test_an_installation_event_is_handed_off_as_github_first_sent_it_never_redelivered(
    setup: Setup,
) -> None:
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "github"
    payload = json.loads((fixture / "installation_repositories-removed.payload.json").read_text())
    sent = setup.sim.send_github_webhook(
        "installation_repositories", payload, url=setup.down, guid="guid-i"
    )
    setup.pass_grace()

    report = setup.sweep().run()

    # A redelivery would reach the ingress, which stamps its own clock: it would be ordered
    # after every installation event taken since (shared/ledger/installations.py).
    assert (report.handed_off, report.redelivered) == (1, 0)
    assert len(setup.attempts("guid-i")) == 1
    [recovered] = setup.handed
    first_sent = datetime.fromisoformat(sent["delivered_at"].replace("Z", "+00:00"))
    assert (recovered.sent_at, recovered.task_id) == (first_sent, recovered_task_id("guid-i"))


def test_past_its_full_pages_a_listing_reads_only_the_deliveries_github_counts_failed(
    setup: Setup,
) -> None:
    setup.target.respond(503)
    for n in range(3):  # the oldest: answered 503, in GitHub's `status=failure`
        setup.push(n)
    setup.target.respond(200)
    for n in range(3, 153):  # 150 answered 200: a page and a half
        setup.push(n)

    every = setup.sweep(full_pages=1).run()
    # The newest 100 of every delivery, then GitHub's failed ones (one page), each once.
    assert (every.pages, every.listed, every.opened, every.failed_only) == (2, 103, 3, True)
    assert {r.guid for r in setup.ledger.recoveries.recent()} == {"guid-0", "guid-1", "guid-2"}

    setup.ledger.recoveries.save_checkpoint(Checkpoint(), run_id="reset", at=setup.clock())
    failed = setup.sweep(full_pages=0).run()
    # Failed deliveries only: one page for 153 deliveries; their recoveries open already.
    assert (failed.pages, failed.listed, failed.failed, failed.opened) == (1, 3, 3, 0)


def test_a_delivery_that_got_no_answer_is_listed_only_within_the_full_pages(
    setup: Setup,
) -> None:
    """GitHub documents `status=failure` as a `status_code` of 400-599 and nothing of an
    attempt that got no answer (the simulator's `status_code` 0): past the full pages,
    the sweep does not see it (docs/performance.md, "Scale")."""
    setup.push(0, url=setup.down)
    setup.target.respond(200)
    for n in range(1, 101):
        setup.push(n)

    narrow = setup.sweep(full_pages=1).run()
    assert (narrow.listed, narrow.opened) == (100, 0)

    setup.ledger.recoveries.save_checkpoint(Checkpoint(), run_id="reset", at=setup.clock())
    wide = setup.sweep(full_pages=2).run()
    assert (wide.listed, wide.opened) == (101, 1)
    assert [r.guid for r in setup.ledger.recoveries.recent()] == ["guid-0"]
