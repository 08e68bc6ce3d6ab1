"""Outbox claims, backoff and alerts: exactly one call per item, even with racing sweepers."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter

import pytest
from google.cloud import firestore

from local.fakes import FakeClock
from shared.ledger import Ledger, OutboxPolicy, Settlement, StoreUnavailable, opnames


def stored(client, name):
    return client.collection("operations").document(opnames.encode(name)).get().to_dict()


class ExternalApi:
    """Records every call; applies a key once, as an idempotent deliverer does."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: Counter[str] = Counter()
        self.applied: dict[str, object] = {}

    def deliver(self, item) -> None:
        with self.lock:
            self.calls[item.idempotency_key] += 1
            self.applied.setdefault(item.idempotency_key, item.payload)


@pytest.mark.slow
def test_two_sweepers_at_once_call_deliver_once_per_item(firestore_client):
    clock = FakeClock()
    clients = [firestore.Client(project=firestore_client.project) for _ in range(2)]
    ledgers = [Ledger(client, clock=clock) for client in clients]
    api = ExternalApi()
    names = [f"batches/sweep-{n}" for n in range(4)]
    for name in names:
        ledgers[0].operations.register(name, "k")
        ledgers[0].settle(name, "succeeded", "webhook", outbox=[{"n": 1}, {"n": 2}])
    clock.advance(120)
    start = threading.Barrier(2, timeout=30)
    reports = [None, None]

    def slow_deliver(item):
        api.deliver(item)
        time.sleep(0.02)  # an external call's latency widens the window for a race

    def sweep(index):
        start.wait()
        reports[index] = ledgers[index].outbox.sweep(slow_deliver)

    try:
        threads = [threading.Thread(target=sweep, args=(n,)) for n in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
    finally:
        for client in clients:
            client.close()

    keys = [f"{opnames.encode(name)}:{index}" for name in names for index in range(2)]
    assert api.calls == dict.fromkeys(keys, 1)
    assert all(stored(firestore_client, name)["writeback_done"] for name in names)
    assert [r.failed for r in reports] == [[], []]
    # Each sweeper finished an operation or left it to the other's lease: never an error.
    assert [sorted(r.completed + r.skipped) for r in reports] == [names, names]


def test_a_failing_delivery_backs_off_and_alerts_after_repeated_failures(firestore_client, caplog):
    caplog.set_level(logging.ERROR, logger="hookledger")
    clock = FakeClock()
    policy = OutboxPolicy(alert_after=3, rand=lambda: 1.0)  # no jitter: delays 30, 60, 120 s
    ledger = Ledger(firestore_client, clock=clock, outbox_policy=policy)
    ledger.operations.register("batches/down", "k")
    ledger.settle("batches/down", "succeeded", "webhook", outbox=[{"n": 1}])
    clock.advance(60)
    calls = []

    def down(item):
        calls.append(item.idempotency_key)
        raise TimeoutError("GitHub timed out")

    waits = []
    for _ in range(3):
        assert ledger.outbox.sweep(down).failed == ["batches/down"]
        item = stored(firestore_client, "batches/down")["outbox"][0]
        waits.append((item["next_attempt_at"] - clock.now).total_seconds())
        early = ledger.outbox.sweep(down)
        assert (early.completed, early.failed, early.skipped) == ([], [], [])  # not due: not read
        clock.advance(waits[-1])

    item = stored(firestore_client, "batches/down")["outbox"][0]
    assert waits == [30.0, 60.0, 120.0]
    assert calls == ["batches%2Fdown:0"] * 3
    assert (item["attempts"], item["leased_until"], item["delivered_at"]) == (3, None, None)
    assert "GitHub timed out" in item["last_error"]
    alerts = [
        getattr(r, "hookledger_fields", {})
        for r in caplog.records
        if getattr(r, "hookledger_fields", {}).get("alert") == "outbox_item_failing"
    ]
    assert [(a["operation"], a["idempotency_key"], a["attempts"]) for a in alerts] == [
        ("batches/down", "batches%2Fdown:0", 3)
    ]


def test_a_crash_between_deliver_and_mark_repeats_the_call_with_the_same_key(
    firestore_client,
):
    clock = FakeClock()
    ledger = Ledger(firestore_client, clock=clock)
    api = ExternalApi()
    real_mark = ledger.outbox._mark_delivered
    crashes = [StoreUnavailable("process killed before marking")]

    def mark_or_crash(record, index):
        if crashes:
            raise crashes.pop()
        real_mark(record, index)

    ledger.outbox._mark_delivered = mark_or_crash
    ledger.operations.register("batches/crash", "k")

    outcome = ledger.settle(
        "batches/crash", "succeeded", "webhook", outbox=[{"n": 1}], deliver=api.deliver
    )
    clock.advance(120)
    while_leased = ledger.outbox.sweep(api.deliver)
    clock.advance(OutboxPolicy().lease.total_seconds())
    after_lease = ledger.outbox.sweep(api.deliver)

    assert outcome is Settlement.SETTLED
    assert (while_leased.completed, while_leased.skipped) == ([], [])  # due when the lease ends
    assert after_lease.completed == ["batches/crash"]
    assert api.calls == {"batches%2Fcrash:0": 2}  # the same key both times
    assert api.applied == {"batches%2Fcrash:0": {"n": 1}}
    assert stored(firestore_client, "batches/crash")["writeback_done"] is True
