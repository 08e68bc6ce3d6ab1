"""A delivery the GitHub sweep recovers carries when GitHub first sent it (issue 44, 7).

The worker orders installation events by `(installation.updated_at, received_at, delivery
id)` (shared/ledger/installations.py) and GitHub does not move `updated_at` for every
change, so `received_at` decides. These tests recover a delivery through the real
`DeliverySweep` and `WorkerHandOff` (GitHub, the ledger and the queue in memory), open the
sealed envelope, and apply it as the worker's installation handler does: with the
envelope's `received_at`.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from local.fakes import FakeClock
from shared.config import Config
from shared.github.installations import parse_installation_event
from shared.handoff.envelope import Envelope, EnvelopeSealer
from shared.ledger.installations import installation_from, merged
from shared.recovery import DeliverySweep, SweepSettings, WorkerHandOff
from tests.unit.recovery_fakes import FakeGitHub, FakeLedger, FakeQueue, Moments

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "github"
T1 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
GRACE = timedelta(seconds=120)
KEY = "recovery-order-envelope-key"
REPO = "octocat/Hello-World"
EVENT = "installation_repositories"


def repositories_event(action: str) -> dict[str, Any]:
    """GitHub's published `removed` example, or the same change the other way (`added`):
    both carry the installation's same `updated_at`, as GitHub's examples do."""
    payload = json.loads((FIXTURES / "installation_repositories-removed.payload.json").read_bytes())
    if action == "added":
        payload["action"] = "added"
        payload["repositories_added"] = payload.pop("repositories_removed")
        payload["repositories_removed"] = []
    return payload


class World:
    """GitHub's delivery log, the ledger and the queue, in memory; the sweep's clock."""

    def __init__(self, start: datetime) -> None:
        self.clock = FakeClock(start)
        self.github = FakeGitHub()
        self.ledger = FakeLedger()
        self.queue = FakeQueue()
        self.sealer = EnvelopeSealer((KEY,))
        self.hand_off = WorkerHandOff(Config(), self.sealer, lambda: self.queue, self.clock)

    def sweep(self) -> Any:
        return DeliverySweep(
            self.ledger,  # type: ignore[arg-type]
            self.github,  # type: ignore[arg-type]
            self.hand_off,
            self.clock,
            SweepSettings(grace=GRACE),
            monotonic=Moments(),
        )

    def recovered(self, runs: int = 4) -> Envelope:
        """Sweep runs a grace apart until one hands a delivery to the worker; its envelope."""
        for _ in range(runs):
            self.sweep().run()
            if self.queue.tasks:
                return self.sealer.open(self.queue.tasks[0].body)
            self.clock.advance(GRACE.total_seconds() + 1)
        raise AssertionError(f"nothing handed off in {runs} runs: {self.ledger.recoveries.docs}")


def test_a_removed_recovered_after_a_later_added_taken_live_does_not_win() -> None:
    world = World(T1 + timedelta(minutes=10))
    # GitHub sent `removed` at T1 while the ingress was down, then `added` a minute later,
    # which the ingress took at once: the repository is covered, as at GitHub.
    world.github.send("guid-removed", EVENT, T1, ok=False, payload=repositories_event("removed"))
    added_at = T1 + timedelta(minutes=1)
    world.github.send("guid-added", EVENT, added_at, ok=True, payload=repositories_event("added"))
    added = parse_installation_event(EVENT, repositories_event("added"))
    assert added is not None
    live = merged(None, added, received_at=added_at, delivery_id="guid-added")
    assert live is not None and installation_from(live).refusal(REPO) is None

    envelope = world.recovered()

    removed = parse_installation_event(envelope.event, json.loads(envelope.body or b""))
    assert removed is not None and removed.removed == (REPO,)
    after = merged(
        live, removed, received_at=envelope.received_at, delivery_id=envelope.delivery_id
    )
    stored = installation_from(after or live)
    assert stored.refusal(REPO) is None, "the older `removed` won over the later `added`"
    assert (after, stored.covered) == (None, (REPO,))  # an older event changes nothing
    assert (envelope.delivery_id, envelope.received_at) == ("guid-removed", T1)


def test_a_recovered_delivery_carries_its_first_attempts_time_not_a_redeliverys() -> None:
    world = World(T1 + timedelta(minutes=10))
    world.github.per_page = 1  # the original is on the page after its redelivery
    world.github.send("guid-1", EVENT, T1, ok=False, payload=repositories_event("removed"))
    # Someone pressed "Redeliver" at GitHub while the ingress was still down.
    world.github.send("guid-1", EVENT, T1 + timedelta(minutes=5), ok=False, redelivery=True)

    envelope = world.recovered()

    assert (envelope.delivery_id, envelope.received_at) == ("guid-1", T1)
    recovery = world.ledger.recoveries.docs["guid-1"]
    assert (recovery.first_sent_at, recovery.failed_at) == (T1, T1 + timedelta(minutes=5))


def test_installation_events_are_handed_off_and_pushes_still_redelivered_first() -> None:
    world = World(T1 + timedelta(minutes=10))
    install = world.github.send("guid-i", EVENT, T1, ok=False, payload=repositories_event("added"))
    push = world.github.send("guid-p", "push", T1, ok=False, payload={"ref": "refs/heads/main"})

    report = world.sweep().run()

    # A redelivery would reach the ingress, which stamps its own clock on it.
    assert world.github.redelivered == [push.id]
    assert (report.redelivered, report.handed_off) == (1, 1)
    [task] = world.queue.tasks
    envelope = world.sealer.open(task.body)
    assert (envelope.delivery_id, envelope.received_at) == (install.guid, T1)


def test_a_hand_off_never_stamps_a_time_after_now() -> None:
    from shared.recovery import Recovered, recovered_task_id

    world = World(T1)
    # GitHub's clock ahead of ours: its time would sort the delivery after later live ones.
    ahead = T1 + timedelta(seconds=5)
    world.github.send("guid-1", EVENT, ahead, ok=False)

    world.hand_off(Recovered(world.github.get(1), ahead, recovered_task_id("guid-1")))

    [task] = world.queue.tasks
    assert world.sealer.open(task.body).received_at == T1


@pytest.mark.parametrize(
    ("name", "sent_at", "task_id", "error"),
    [
        ("a naive time", datetime(2026, 3, 2, 9, 0), None, "sent_at must be an aware datetime"),
        ("another guid's task", T1, "guid-2", "is not one of its own"),
    ],
)
def test_a_hand_off_refuses_what_is_not_a_delivery_of_its_own(
    name: str, sent_at: datetime, task_id: str | None, error: str
) -> None:
    from shared.recovery import Recovered, recovered_task_id

    github = FakeGitHub()
    github.send("guid-1", EVENT, T1, ok=False)
    request = github.get(1)

    with pytest.raises(ValueError, match=error) as raised:
        Recovered(request, sent_at, recovered_task_id(task_id or "guid-1"))
    assert "guid-1" in str(raised.value), name
