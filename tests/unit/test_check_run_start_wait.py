"""A check run's `finish` meets its `start` still open: it waits, re-reading, while another
deliverer holds the `start`, and is retried later when nobody does or it stays open.

"Holds" is judged on the ledger's clock, the one that stamped the start's `leased_until`,
which the deliverer reads from its own item's lease: these tests run it on a `FakeClock`
decades away from the wall clock, so a comparison with the wall clock would decide the
other way.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from apps.review import check_runs
from apps.review.check_runs import CHECK_RUN, START_WAIT, StartStillOpen
from local.fakes import FakeClock
from shared.ledger import Operation, OutboxItem
from shared.ledger.records import ItemLease

NAME = "batches/raced"
SHA = "6dcb09b5b57875f334f61aebed695e2e4193db5e"
PAST = datetime(2001, 1, 1, tzinfo=UTC)  # the injected clock, far before the wall clock
FUTURE = datetime(2101, 1, 1, tzinfo=UTC)  # and far after it
PAYLOAD = {
    "kind": CHECK_RUN,
    "repo": "octo/docs",
    "sha": SHA,
    "operation": NAME,
    "external_id": "sub-1",
    "installation_id": 42,
}


def _record(
    clock: FakeClock, *, start_held_for: timedelta | None, start_open: bool = True
) -> Operation:
    now = clock()
    start = OutboxItem(
        operation=NAME,
        index=0,
        idempotency_key="op:0",
        payload={**PAYLOAD, "role": "start"},
        delivered_at=None if start_open else now,
        leased_until=now + start_held_for if start_held_for is not None else None,
    )
    finish = replace(start, index=1, idempotency_key="op:1", payload={**PAYLOAD, "role": "finish"})
    return Operation(
        name=NAME,
        doc_id="op",
        kind="github-review",
        status="succeeded",
        submitted_at=now,
        settled_at=now,
        attempts=0,
        next_check_at=None,
        writeback_done=True,
        context={},
        outbox=(start, finish),
    )


def _finish(record: Operation, clock: FakeClock) -> OutboxItem:
    """The finish item as the outbox hands it to its deliverer: with a lease on `clock`."""
    lease = ItemLease("token-f", clock() + timedelta(minutes=5), clock, lambda: True)
    return replace(record.outbox[1], lease=lease)


class Reads:
    """`services.ledger.operations.get`, answering each read with the next record."""

    def __init__(self, *answers: Operation) -> None:
        self.answers = list(answers)
        self.reads = 0

    def get(self, name: str) -> Operation:
        assert name == NAME
        self.reads += 1
        return self.answers.pop(0)


class Checks:
    """`services.checks`: records each publish."""

    def __init__(self) -> None:
        self.published: list[Any] = []

    def publish(self, repo: str, sha: str, state: Any, **kwargs: Any) -> Any:
        self.published.append(state)
        return SimpleNamespace(
            check_run_id=7, created=False, annotations_sent=0, writes=1, duplicates=()
        )


def _services(reads: Reads, checks: Checks | None = None) -> SimpleNamespace:
    ledger = SimpleNamespace(
        operations=reads,
        submissions=SimpleNamespace(get=lambda tag: None),  # the record's own run
        results=SimpleNamespace(find=lambda collection, *args, **equals: []),
    )
    return SimpleNamespace(ledger=ledger, checks=checks or Checks())


@pytest.fixture
def slept(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    waits: list[float] = []
    monkeypatch.setattr(check_runs, "_sleep", waits.append)
    return waits


def test_the_finish_waits_while_another_deliverer_publishes_the_start(slept) -> None:
    clock = FakeClock(PAST)
    held = _record(clock, start_held_for=timedelta(seconds=30))
    closed = _record(clock, start_held_for=None, start_open=False)
    checks = Checks()
    reads = Reads(held, held, closed)  # the start is published during the second wait

    check_runs.publish_check_run(_finish(held, clock), _services(reads, checks))

    assert slept == [0.25, 0.5] and reads.reads == 3
    assert [state.status for state in checks.published] == ["completed"]


def test_a_start_nobody_holds_is_not_waited_for(slept) -> None:
    # Its deliverer failed and backs off: waiting would only hold the finish's claim.
    for name, clock, held_for in (
        ("never claimed", FakeClock(PAST), None),
        ("its lease ran out on the ledger's clock", FakeClock(FUTURE), -timedelta(seconds=1)),
    ):
        record = _record(clock, start_held_for=held_for)
        with pytest.raises(StartStillOpen, match="waits for its in_progress item"):
            check_runs.publish_check_run(_finish(record, clock), _services(Reads(record)))
        assert slept == [], name


def test_a_start_held_past_the_wait_leaves_the_finish_to_its_retry(slept) -> None:
    clock = FakeClock(PAST)
    held = _record(clock, start_held_for=timedelta(seconds=30))
    reads = Reads(*[held] * (START_WAIT.attempts + 1))

    with pytest.raises(StartStillOpen):
        check_runs.publish_check_run(_finish(held, clock), _services(reads))
    assert slept == [0.25, 0.5, 1.0, 2.0, 2.0, 2.0] and reads.reads == START_WAIT.attempts + 1


def test_a_closed_start_needs_no_wait(slept) -> None:
    clock = FakeClock(PAST)
    closed = _record(clock, start_held_for=None, start_open=False)
    checks = Checks()
    check_runs.publish_check_run(_finish(closed, clock), _services(Reads(closed), checks))
    assert slept == [] and len(checks.published) == 1


def test_without_a_lease_there_is_no_clock_to_wait_on(slept) -> None:
    # A finish handed over without a claim (no ledger behind it) is retried, never waits.
    clock = FakeClock(PAST)
    held = _record(clock, start_held_for=timedelta(seconds=30))
    with pytest.raises(StartStillOpen):
        check_runs.publish_check_run(held.outbox[1], _services(Reads(held)))
    assert slept == []
