"""The Firestore emulator fixture gives a real, transactional, isolated database."""

from __future__ import annotations

import threading

from google.cloud import firestore


def test_a_transaction_that_reads_and_writes_one_document_commits(firestore_client):
    ref = firestore_client.collection("counters").document("one")
    ref.set({"value": 1})

    @firestore.transactional
    def bump(txn):
        snapshot = ref.get(transaction=txn)
        txn.update(ref, {"value": snapshot.get("value") + 1})

    bump(firestore_client.transaction())

    assert ref.get().to_dict() == {"value": 2}


def test_two_concurrent_transactions_on_one_document_both_count(firestore_client):
    ref = firestore_client.collection("counters").document("shared")
    ref.set({"value": 0})
    both_read = threading.Barrier(2, timeout=30)
    errors: list[BaseException] = []

    def bump() -> None:
        client = firestore.Client(project=firestore_client.project)
        first_attempt = [True]

        @firestore.transactional
        def add_one(txn):
            snapshot = ref.get(transaction=txn)
            if first_attempt[0]:
                first_attempt[0] = False
                both_read.wait()  # both hold a read of the same version before either writes
            txn.update(ref, {"value": snapshot.get("value") + 1})

        try:
            add_one(client.transaction(max_attempts=10))
        except BaseException as exc:  # surfaced below, with the assertion
            errors.append(exc)

    threads = [threading.Thread(target=bump) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    assert errors == []
    assert ref.get().to_dict() == {"value": 2}


def test_each_test_starts_with_an_empty_database(firestore_client):
    assert list(firestore_client.collection("counters").stream()) == []
