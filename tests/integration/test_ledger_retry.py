"""ABORTED handling: jittered, bounded backoff — in isolation and against a real lock timeout."""

from __future__ import annotations

import logging
import threading

import pytest
from google.api_core import exceptions as gexc
from google.cloud import firestore

from shared.ledger import ContentionError, Ledger, Settlement, opnames
from shared.retry import Backoff, RetriesExhausted, Retry, retrying

# ----------------------------------------------------------------------- pure backoff


def test_backoff_grows_from_first_to_cap_with_jitter_in_the_upper_half():
    backoff = Backoff(attempts=8, first_s=0.05, cap_s=2.0)

    lowest = [backoff.delay(n, rand=lambda: 0.0) for n in range(8)]
    highest = [backoff.delay(n, rand=lambda: 1.0) for n in range(8)]

    assert highest == [0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 2.0, 2.0]
    assert lowest == [value / 2 for value in highest]


@pytest.mark.parametrize(
    "kwargs", [{"attempts": 0}, {"first_s": -1.0}, {"first_s": 3.0, "cap_s": 2.0}]
)
def test_backoff_rejects_nonsense(kwargs):
    with pytest.raises(ValueError, match="backoff"):
        Backoff(**kwargs)


def test_retrying_backs_off_on_later_retries_now_and_gives_up_after_the_budget():
    failures = [Retry.LATER, Retry.NOW, Retry.LATER, Retry.LATER]
    slept: list[float] = []
    seen: list[tuple[int, Retry]] = []

    def attempt():
        raise gexc.Aborted("lock timeout")

    def classify(exc):
        return failures.pop(0)

    with pytest.raises(RetriesExhausted) as caught:
        retrying(
            attempt,
            classify=classify,
            backoff=Backoff(attempts=4, first_s=0.1, cap_s=1.0),
            sleep=slept.append,
            rand=lambda: 1.0,
            on_retry=lambda number, kind, delay, exc: seen.append((number, kind)),
        )

    assert isinstance(caught.value.__cause__, gexc.Aborted)
    assert slept == [0.1, 0.2]  # the NOW retry did not sleep, nor count toward the delays
    assert seen == [(1, Retry.LATER), (2, Retry.NOW), (3, Retry.LATER)]


def test_retrying_reraises_what_is_not_retryable_at_once():
    calls = []

    def attempt():
        calls.append(1)
        raise KeyError("bug")

    with pytest.raises(KeyError):
        retrying(attempt, classify=lambda exc: None, backoff=Backoff(), sleep=pytest.fail)
    assert calls == [1]


# ----------------------------------------------------------------------- real lock timeout


def hold_read_lock(project, name, release: threading.Event, held: threading.Event):
    """A thread whose transaction reads the operation (a lock on the emulator) until `release`."""
    client = firestore.Client(project=project)
    ref = client.collection("operations").document(opnames.encode(name))

    @firestore.transactional
    def read_and_wait(txn):
        ref.get(transaction=txn)
        held.set()
        release.wait(30)

    def run():
        try:
            read_and_wait(client.transaction(max_attempts=1))
        finally:
            client.close()

    return threading.Thread(target=run)


def test_an_aborted_commit_is_logged_backed_off_and_retried_until_it_settles(
    firestore_client, caplog
):
    Ledger(firestore_client).operations.register("batches/locked", "k")
    release, held = threading.Event(), threading.Event()
    blocker = hold_read_lock(firestore_client.project, "batches/locked", release, held)
    blocker.start()
    assert held.wait(30)
    slept: list[float] = []

    def sleep_and_unblock(seconds):
        slept.append(seconds)
        release.set()
        blocker.join(30)

    ledger = Ledger(firestore_client, sleep=sleep_and_unblock, rand=lambda: 0.5)
    with caplog.at_level(logging.WARNING, logger="hookledger.ledger"):
        outcome = ledger.settle("batches/locked", "succeeded", "webhook")

    assert outcome is Settlement.SETTLED
    assert slept == [pytest.approx(0.0375)]  # first retry: 50 ms ceiling, jittered to 75 %
    assert ledger.counts()["aborted"] == 1
    retries = [r for r in caplog.records if r.getMessage() == "transaction aborted; backing off"]
    assert [
        (r.hookledger_fields["operation"], r.hookledger_fields["attempt"]) for r in retries
    ] == [("batches/locked", 1)]


def test_a_commit_still_aborted_after_the_last_attempt_raises_contention_error(firestore_client):
    Ledger(firestore_client).operations.register("batches/locked", "k")
    release, held = threading.Event(), threading.Event()
    blocker = hold_read_lock(firestore_client.project, "batches/locked", release, held)
    blocker.start()
    assert held.wait(30)
    ledger = Ledger(firestore_client, backoff=Backoff(attempts=1))
    try:
        with pytest.raises(ContentionError, match="batches/locked") as caught:
            ledger.settle("batches/locked", "succeeded", "webhook")
    finally:
        release.set()
        blocker.join(30)

    assert caught.value.__cause__ is not None
    assert ledger.operations.get("batches/locked").status == "pending"
