"""A check run's `finish` meets its `start` still open: it waits, re-reading, while another
deliverer holds the `start`, and is retried later when nobody does or it stays open."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest

from shared.clock import system_clock
from shared.kinds.review import check_runs
from shared.kinds.review.check_runs import CHECK_RUN, START_WAIT, StartStillOpen
from shared.ledger import Operation, OutboxItem

NAME = "batches/raced"


def _record(*, start_held_for: timedelta | None, start_open: bool = True) -> Operation:
    now = system_clock()
    start = OutboxItem(
        operation=NAME,
        index=0,
        idempotency_key="op:0",
        payload={"kind": CHECK_RUN, "role": "start"},
        delivered_at=None if start_open else now,
        claimed_until=now + start_held_for if start_held_for is not None else None,
    )
    finish = replace(
        start, index=1, idempotency_key="op:1", payload={"kind": CHECK_RUN, "role": "finish"}
    )
    return Operation(
        name=NAME,
        doc_id="op",
        kind="github-review",
        status="succeeded",
        submitted_at=datetime(2026, 12, 1, tzinfo=UTC),
        attempts=0,
        next_check_at=None,
        writeback_done=True,
        context={},
        outbox=(start, finish),
    )


class Reads:
    """`services.ledger.operations.get`, answering each read with the next record."""

    def __init__(self, *answers: Operation) -> None:
        self.answers = list(answers)
        self.reads = 0

    def get(self, name: str) -> Operation:
        assert name == NAME
        self.reads += 1
        return self.answers.pop(0)


def _services(reads: Reads) -> SimpleNamespace:
    return SimpleNamespace(ledger=SimpleNamespace(operations=reads))


@pytest.fixture
def slept(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    waits: list[float] = []
    monkeypatch.setattr(check_runs, "_sleep", waits.append)
    return waits


def test_the_finish_waits_while_another_deliverer_publishes_the_start(slept) -> None:
    held = _record(start_held_for=timedelta(seconds=30))
    closed = _record(start_held_for=None, start_open=False)
    reads = Reads(held, closed)  # the start is published during the second wait

    assert check_runs._after_start(held, _services(reads)) is closed
    assert slept == [0.25, 0.5] and reads.reads == 2


def test_a_start_nobody_holds_is_not_waited_for(slept) -> None:
    # Its deliverer failed and backs off: waiting would only hold the finish's claim.
    with pytest.raises(StartStillOpen, match="waits for its in_progress item"):
        check_runs._after_start(_record(start_held_for=None), _services(Reads()))
    with pytest.raises(StartStillOpen):
        check_runs._after_start(_record(start_held_for=-timedelta(seconds=1)), _services(Reads()))
    assert slept == []


def test_a_start_held_past_the_wait_leaves_the_finish_to_its_retry(slept) -> None:
    held = _record(start_held_for=timedelta(seconds=30))
    reads = Reads(*[held] * START_WAIT.attempts)

    with pytest.raises(StartStillOpen):
        check_runs._after_start(held, _services(reads))
    assert slept == [0.25, 0.5, 1.0, 2.0, 2.0, 2.0] and reads.reads == START_WAIT.attempts


def test_a_closed_start_needs_no_read(slept) -> None:
    closed = _record(start_held_for=None, start_open=False)
    assert check_runs._after_start(closed, _services(Reads())) is closed
    assert slept == []
