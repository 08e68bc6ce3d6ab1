"""An outbox item given up is closed and said so once (shared/ledger/outbox.py): no caller
says the sweep will retry it, and the operation's next item is still delivered; and a
deliverer crashed around its call is delivered once afterwards.

The ledger is the Firestore emulator; time is a FakeClock, so "the lease expired" is a
clock advance.
"""

from __future__ import annotations

import logging

import pytest

from local.fakes import FakeClock
from shared.crashpoints import Crashed, crashing_at
from shared.errors import PermanentError
from shared.ledger import Ledger, OutboxDeliveryFailed, OutboxItem, OutboxPolicy, Settlement


def refuse_first(item: OutboxItem) -> None:
    if item.index == 0:
        raise PermanentError("GitHub answered 422: no commit found")


def messages(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    return [(r.levelno, r.getMessage()) for r in caplog.records]


def test_settling_with_an_item_given_up_never_says_the_sweep_will_retry(
    firestore_client, caplog
) -> None:
    ledger = Ledger(firestore_client, clock=FakeClock())
    ledger.operations.register("batches/gu-1", "k")
    caplog.set_level(logging.INFO)

    settled = ledger.settle(
        "batches/gu-1", "succeeded", "webhook", outbox=[{"n": 0}, {"n": 1}], deliver=refuse_first
    )

    said = messages(caplog)
    assert [m for _, m in said if "retr" in m] == []  # neither "will retry" nor "retries"
    assert [m for level, m in said if level == logging.ERROR and "given up" in m], said
    record = ledger.operations.get("batches/gu-1")
    assert settled is Settlement.SETTLED
    assert record.outbox[0].given_up_at is not None and record.outbox[1].delivered_at is not None
    assert record.writeback_done


def test_deliver_raises_only_for_a_failure_left_to_the_sweep(firestore_client) -> None:
    ledger = Ledger(firestore_client, clock=FakeClock())
    for name in ("batches/gu-2", "batches/gu-3"):
        ledger.operations.register(name, "k")
        ledger.settle(name, "succeeded", "webhook", outbox=[{"n": 0}, {"n": 1}])

    def down(item: OutboxItem) -> None:
        raise TimeoutError("GitHub timed out")

    assert ledger.outbox.deliver("batches/gu-2", refuse_first) == 1  # item 1 delivered
    with pytest.raises(OutboxDeliveryFailed, match="GitHub timed out"):
        ledger.outbox.deliver("batches/gu-3", down)
    backing_off = ledger.operations.get("batches/gu-3").outbox[0]
    assert backing_off.given_up_at is None and backing_off.next_attempt_at is not None


def test_the_sweep_reports_an_operation_with_an_item_given_up_as_failed(firestore_client) -> None:
    clock = FakeClock()
    ledger = Ledger(firestore_client, clock=clock)
    ledger.operations.register("batches/gu-4", "k")
    ledger.settle("batches/gu-4", "succeeded", "webhook", outbox=[{"n": 0}, {"n": 1}])
    clock.advance(120)

    report = ledger.outbox.sweep(refuse_first)

    assert (report.failed, report.completed) == (["batches/gu-4"], [])
    assert ledger.operations.get("batches/gu-4").writeback_done


@pytest.mark.parametrize("point", ["outbox.before_deliver", "outbox.delivered"])
def test_a_deliverer_crashed_around_its_call_is_delivered_once(firestore_client, point) -> None:
    clock = FakeClock()
    policy = OutboxPolicy()
    ledger = Ledger(firestore_client, clock=clock, outbox_policy=policy)
    name = f"batches/crash-{point.split('.')[1]}"
    ledger.operations.register(name, "k")
    ledger.settle(name, "succeeded", "webhook", outbox=[{"n": 0}])
    posted: list[str] = []

    def post_once(item: OutboxItem) -> None:  # looks before acting, as a deliverer must
        if item.idempotency_key not in posted:
            posted.append(item.idempotency_key)

    with crashing_at(point) as reached, pytest.raises(Crashed):
        ledger.outbox.deliver(name, post_once)
    clock.advance(policy.lease.total_seconds() + 1)  # the dead holder's lease ends
    report = ledger.outbox.sweep(post_once)

    assert point in reached
    assert report.completed == [name]
    assert len(posted) == 1
    assert ledger.operations.get(name).outbox[0].delivered_at is not None
