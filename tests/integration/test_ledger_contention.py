"""Racing settles on the emulator: exactly one winner, exactly one write-back."""

from __future__ import annotations

import random
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest
from google.cloud import firestore

from shared.ledger import Ledger, Settlement, opnames

pytestmark = pytest.mark.slow
THREADS = 8


def writeback(writes, record):

    txn = writes.transaction  # the raw transaction, for writes the ledger has no method for
    """Create (never overwrite) one result per operation, so a second write-back would fail."""
    ref = txn._client.collection("results").document(record.doc_id)
    txn.create(ref, {"operation": record.name})


def test_eight_threads_settling_one_operation_yield_one_winner_ten_times(firestore_client):
    clients = [firestore.Client(project=firestore_client.project) for _ in range(THREADS)]
    ledgers = [Ledger(client) for client in clients]
    try:
        for round_number in range(10):
            name = f"batches/race-{round_number}"
            ledgers[0].operations.register(name, "k")
            start = threading.Barrier(THREADS, timeout=30)
            statuses = ["succeeded", "failed", "cancelled", "expired"]

            def settle(index, name=name, start=start, statuses=statuses):
                start.wait()
                by = "webhook" if index % 2 else "reconcile"
                return ledgers[index].settle(name, statuses[index % 4], by, writeback=writeback)

            with ThreadPoolExecutor(THREADS) as pool:
                outcomes = list(pool.map(settle, range(THREADS)))

            assert Counter(outcomes) == {
                Settlement.SETTLED: 1,
                Settlement.ALREADY_SETTLED: THREADS - 1,
            }, f"round {round_number}"
            winner = outcomes.index(Settlement.SETTLED)
            doc = (
                firestore_client.collection("operations")
                .document(opnames.encode(name))
                .get()
                .to_dict()
            )
            assert doc["status"] == statuses[winner % 4], f"round {round_number}"
            results = list(firestore_client.collection("results").stream())
            assert sorted(r.id for r in results) == sorted(
                opnames.encode(f"batches/race-{n}") for n in range(round_number + 1)
            ), f"round {round_number}"
        # The threads really raced: some commits were refused and re-read.
        assert sum(ledger.counts()["conflicts"] for ledger in ledgers) > 0
    finally:
        for client in clients:
            client.close()


def test_two_hundred_operations_settled_three_times_each_across_eight_threads(firestore_client):
    names = [f"batches/op-{index:03d}" for index in range(200)]
    setup = Ledger(firestore_client)
    with ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(lambda name: setup.operations.register(name, "k"), names))
    local = threading.local()
    clients: list[firestore.Client] = []
    clients_lock = threading.Lock()

    def thread_ledger() -> Ledger:
        if not hasattr(local, "ledger"):
            client = firestore.Client(project=firestore_client.project)
            with clients_lock:
                clients.append(client)
            local.ledger = Ledger(client)
        return local.ledger

    # Duplicates of one operation sit next to each other, so they really race.
    calls = [name for name in names for _ in range(3)]
    random.Random(7).shuffle(calls[:60])
    try:
        with ThreadPoolExecutor(THREADS) as pool:
            outcomes = list(
                pool.map(
                    lambda name: (
                        name,
                        thread_ledger().settle(name, "succeeded", "webhook", writeback=writeback),
                    ),
                    calls,
                )
            )
    finally:
        for client in clients:
            client.close()

    winners = Counter(name for name, outcome in outcomes if outcome is Settlement.SETTLED)
    assert winners == dict.fromkeys(names, 1)
    assert Counter(outcome for _, outcome in outcomes)[Settlement.ALREADY_SETTLED] == 400
    assert len(list(firestore_client.collection("results").stream())) == 200
    pending = firestore_client.collection("operations").where(
        filter=firestore.FieldFilter("status", "==", "pending")
    )
    assert list(pending.stream()) == []
