"""The sweep watches what it hands off (issue 44, 8): a handed-off delivery the ledger has
not recorded `unrecorded_after` later is handed off once more, as a task of its own name,
and `unrecorded_after` after that raises one `github_recovery_unrecorded` alert.

GitHub, the ledger and the queue are in memory (tests/unit/recovery_fakes.py); the hand-off
is the real `WorkerHandOff`, so the queue sees the task names Cloud Tasks would.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from local.fakes import FakeClock
from shared.config import Config
from shared.github.errors import GitHubRejected
from shared.handoff.envelope import EnvelopeSealer
from shared.logs import _FIELDS_ATTR as FIELDS_ATTR
from shared.recovery import (
    UNRECORDED_ALERT,
    DeliverySweep,
    SweepSettings,
    WorkerHandOff,
    recovered_task_id,
    rehanded_task_id,
)
from shared.recovery.report import SweepReport
from tests.unit.recovery_fakes import FakeGitHub, FakeLedger, FakeQueue, Moments

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
GRACE = timedelta(seconds=120)
BOUND = timedelta(minutes=15)
GUID = "guid-1"


class World:
    """An installation event GitHub failed to deliver at T0, and the sweep's parts."""

    def __init__(self) -> None:
        self.clock = FakeClock(T0)
        self.github = FakeGitHub()
        self.ledger = FakeLedger()
        self.queue = FakeQueue()
        sealer = EnvelopeSealer(("recovery-rehand-envelope-key",))
        self.hand_off = WorkerHandOff(Config(), sealer, lambda: self.queue, self.clock)
        self.sent = self.github.send(GUID, "installation", T0, ok=False)

    def run(self, *, at: timedelta) -> SweepReport:
        """One sweep run at T0 + `at`."""
        self.clock.now = T0 + at
        sweep = DeliverySweep(
            self.ledger,  # type: ignore[arg-type]
            self.github,  # type: ignore[arg-type]
            self.hand_off,
            self.clock,
            SweepSettings(grace=GRACE, unrecorded_after=BOUND),
            monotonic=Moments(),
        )
        return sweep.run()

    def handed_off(self) -> timedelta:
        """Hand the delivery off (an installation event goes at once, past its grace)."""
        at = GRACE + timedelta(seconds=1)
        assert self.run(at=at).handed_off == 1
        return at

    def task_ids(self) -> list[str]:
        return [task.task_id for task in self.queue.tasks]


def alerts(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    fields = [getattr(r, FIELDS_ATTR, None) or {} for r in caplog.records]
    return [f for f in fields if f.get("alert") == UNRECORDED_ALERT]


def test_a_handed_off_delivery_never_recorded_is_handed_again_once_then_alerted_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, logger="hookledger.reconcile.github")
    world = World()
    handed = world.handed_off()

    early = world.run(at=handed + BOUND - timedelta(seconds=1))
    assert (early.rehanded, early.waiting, world.task_ids()) == (0, 1, [recovered_task_id(GUID)])

    rehanded = world.run(at=handed + BOUND)
    # A name of its own: Cloud Tasks keeps the first task's name about an hour after it ran.
    assert world.task_ids() == [recovered_task_id(GUID), rehanded_task_id(GUID)]
    assert (rehanded.rehanded, rehanded.unrecorded) == (1, 0)
    assert world.ledger.recoveries.docs[GUID].rehanded_at == T0 + handed + BOUND

    quiet = world.run(at=handed + 2 * BOUND - timedelta(seconds=1))
    assert (quiet.rehanded, quiet.unrecorded, alerts(caplog)) == (0, 0, [])

    alerted = world.run(at=handed + 2 * BOUND)
    later = world.run(at=handed + 3 * BOUND)

    assert (alerted.unrecorded, later.unrecorded, later.rehanded) == (1, 0, 0)
    [alert] = alerts(caplog)
    assert (alert["guid"], alert["github_delivery_id"], alert["delivery_event"]) == (
        GUID,
        world.sent.id,
        "installation",
    )
    assert len(world.task_ids()) == 2  # handed off twice in all, never a third time
    assert world.ledger.recoveries.docs[GUID].open  # still waiting for the worker


def test_a_delivery_recorded_after_its_re_hand_is_closed_recovered(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, logger="hookledger.reconcile.github")
    world = World()
    handed = world.handed_off()
    world.run(at=handed + BOUND)
    world.ledger.deliveries.record(GUID, T0 + handed + BOUND + timedelta(seconds=3))

    closed = world.run(at=handed + 2 * BOUND)

    assert (closed.recovered, closed.unrecorded, alerts(caplog)) == (1, 0, [])
    assert world.ledger.recoveries.docs[GUID].status == "recovered"


def test_when_github_cannot_give_the_delivery_again_the_alert_still_comes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, logger="hookledger.reconcile.github")
    world = World()
    handed = world.handed_off()
    world.github.fail_get = GitHubRejected("GitHub App webhook delivery 1: 404", status=404)

    failed = world.run(at=handed + BOUND)
    assert (failed.rehanded, failed.errors, len(world.task_ids())) == (0, 1, 1)
    assert "404" in (world.ledger.recoveries.docs[GUID].last_error or "")

    alerted = world.run(at=handed + 2 * BOUND)

    assert alerted.unrecorded == 1
    [alert] = alerts(caplog)
    assert (alert["guid"], alert["rehanded_at"]) == (GUID, None)


def test_overlapping_runs_raise_the_alert_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger="hookledger.reconcile.github")
    world = World()
    handed = world.handed_off()
    world.run(at=handed + BOUND)
    world.clock.now = T0 + handed + 2 * BOUND
    [stale] = world.ledger.recoveries.open_page()  # what a slower run read

    world.run(at=handed + 2 * BOUND)  # the faster run alerts
    from shared.recovery.act import RecoveryActions, RunContext

    late = RecoveryActions(
        world.ledger,  # type: ignore[arg-type]
        world.github,  # type: ignore[arg-type]
        world.hand_off,
        world.clock,
        SweepSettings(grace=GRACE, unrecorded_after=BOUND),
    )
    report = SweepReport()
    late.step(stale, report, RunContext("late", None, spent=lambda: False))

    assert (report.unrecorded, len(alerts(caplog))) == (0, 1)


def test_unrecorded_after_must_not_be_negative() -> None:
    with pytest.raises(ValueError, match=r"SweepSettings\.unrecorded_after must not be negative"):
        SweepSettings(unrecorded_after=timedelta(seconds=-1))
