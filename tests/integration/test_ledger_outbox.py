"""Side effects outside Firestore: recorded with the settlement, delivered exactly once."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest

from shared.ledger import OutboxDeliveryFailed, Settlement, opnames


class ExternalApi:
    """A recording fake of an external API that dedupes on the idempotency key, as real ones do."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.applied: dict[str, object] = {}

    def post(self, idempotency_key: str, payload: object) -> None:
        self.calls[idempotency_key] += 1
        self.applied.setdefault(idempotency_key, payload)


@pytest.fixture
def api():
    return ExternalApi()


def deliver_to(api):
    return lambda item: api.post(item.idempotency_key, item.payload)


def stored(client, name):
    return client.collection("operations").document(opnames.encode(name)).get().to_dict()


ITEMS = [{"comment": "LGTM", "path": "README.md"}, {"status": "success", "sha": "abc123"}]
KEYS = ["batches%2Fabc:0", "batches%2Fabc:1"]


def test_settle_delivers_the_outbox_right_after_the_commit(ledger, firestore_client, api):
    ledger.operations.register("batches/abc", "k")

    outcome = ledger.settle(
        "batches/abc", "succeeded", "webhook", outbox=ITEMS, deliver=deliver_to(api)
    )

    assert outcome is Settlement.SETTLED
    assert api.calls == dict.fromkeys(KEYS, 1)
    assert api.applied == dict(zip(KEYS, ITEMS, strict=True))
    doc = stored(firestore_client, "batches/abc")
    assert doc["writeback_done"] is True
    assert all(item["delivered_at"] is not None for item in doc["outbox"])


def test_a_crash_right_after_the_transaction_is_finished_by_the_sweep_once(
    ledger, firestore_client, clock, api
):
    ledger.operations.register("batches/abc", "k")
    # No `deliver`: the process died between the commit and the first call.
    ledger.settle("batches/abc", "succeeded", "webhook", outbox=ITEMS)
    assert stored(firestore_client, "batches/abc")["writeback_done"] is False

    too_soon = ledger.outbox.sweep(deliver_to(api), older_than=timedelta(seconds=60))
    clock.advance(61)
    report = ledger.outbox.sweep(deliver_to(api), older_than=timedelta(seconds=60))
    again = ledger.outbox.sweep(deliver_to(api), older_than=timedelta(seconds=60))

    assert (too_soon.completed, report.completed, again.completed) == ([], ["batches/abc"], [])
    assert api.calls == dict.fromkeys(KEYS, 1)
    assert stored(firestore_client, "batches/abc")["writeback_done"] is True


def test_a_crash_between_the_call_and_its_mark_repeats_the_call_with_the_same_key(
    ledger, firestore_client, clock, api
):
    ledger.operations.register("batches/abc", "k")
    crashes = {"batches%2Fabc:1"}

    def call_then_crash(item):
        api.post(item.idempotency_key, item.payload)
        if item.idempotency_key in crashes:
            crashes.discard(item.idempotency_key)
            raise ConnectionResetError("worker killed before marking")

    outcome = ledger.settle(
        "batches/abc", "succeeded", "webhook", outbox=ITEMS, deliver=call_then_crash
    )
    doc = stored(firestore_client, "batches/abc")
    assert outcome is Settlement.SETTLED  # the settlement stands; the sweep finishes the rest
    assert doc["writeback_done"] is False
    assert doc["outbox"][0]["delivered_at"] is not None
    assert doc["outbox"][1]["delivered_at"] is None

    clock.advance(120)
    report = ledger.outbox.sweep(call_then_crash)

    assert report.completed == ["batches/abc"]
    assert api.calls == {"batches%2Fabc:0": 1, "batches%2Fabc:1": 2}  # same key twice
    assert api.applied == dict(zip(KEYS, ITEMS, strict=True))  # but applied once
    assert stored(firestore_client, "batches/abc")["writeback_done"] is True


def test_the_sweep_retries_a_failing_delivery_on_its_next_run_and_skips_pending_ones(
    ledger, firestore_client, clock, api
):
    for name in ["batches/old", "batches/new", "batches/pending"]:
        ledger.operations.register(name, "k")
    ledger.settle("batches/old", "failed", "reconcile", outbox=[{"n": 1}])
    clock.advance(10)
    ledger.settle("batches/new", "succeeded", "webhook", outbox=[{"n": 2}])
    clock.advance(120)
    down = {"up": False}

    def flaky(item):
        if not down["up"] and item.operation == "batches/old":
            raise TimeoutError("external API timed out")
        api.post(item.idempotency_key, item.payload)

    first = ledger.outbox.sweep(flaky)
    down["up"] = True
    not_yet_due = ledger.outbox.sweep(flaky)
    clock.advance(30)  # the first retry waits at most 30 s
    second = ledger.outbox.sweep(flaky)

    assert (first.completed, first.failed) == (["batches/new"], ["batches/old"])
    # Not due yet: its `outbox_due_at` is later, so the sweep does not even select it.
    assert (not_yet_due.completed, not_yet_due.skipped, not_yet_due.failed) == ([], [], [])
    assert (second.completed, second.failed) == (["batches/old"], [])
    assert api.calls == {"batches%2Fold:0": 1, "batches%2Fnew:0": 1}
    assert stored(firestore_client, "batches/pending")["writeback_done"] is False


def test_sweep_takes_the_oldest_first_up_to_the_limit(ledger, clock, api):
    for index in range(3):
        ledger.operations.register(f"batches/{index}", "k")
        ledger.settle(f"batches/{index}", "succeeded", "webhook", outbox=[{"i": index}])
        clock.advance(1)
    clock.advance(120)

    report = ledger.outbox.sweep(deliver_to(api), limit=2)

    assert report.completed == ["batches/0", "batches/1"]


def test_deliver_outbox_names_the_operation_and_key_when_it_fails(ledger, api):
    ledger.operations.register("batches/abc", "k")
    ledger.settle("batches/abc", "succeeded", "webhook", outbox=[{"n": 1}])

    def broken(item):
        raise RuntimeError("HTTP 500")

    with pytest.raises(OutboxDeliveryFailed, match=r"batches/abc.*batches%2Fabc:0"):
        ledger.outbox.deliver("batches/abc", broken)
    assert ledger.outbox.deliver("abc", deliver_to(api)) == 1
    assert ledger.outbox.deliver("abc", deliver_to(api)) == 0
    assert api.calls == {"batches%2Fabc:0": 1}
