"""Fewer commits, same guarantees (issue 23): a push's delivery record takes its submission
claim in the same commit, the winner's commit marks the delivery done, and an unleased
handler (the settlement) records its delivery `done` in its own commit."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from shared import handlers
from shared.config import LOCAL_ENVELOPE_KEY, Config
from shared.entrypoints.worker import Worker
from shared.handlers import ClaimRequest, Done, RetryableError, handler
from shared.handoff.envelope import Envelope, EnvelopeSealer
from shared.ledger import Ledger
from shared.ledger.submissions import Claim

TAG = "hookledger:test:o/r@abc"
LEASE = timedelta(minutes=10)


# Events of their own: the built-in handlers (github/push, gemini/batch.*) may be loaded.
@pytest.fixture
def worker(firestore_client: Any) -> Iterator[tuple[Worker, Ledger]]:
    saved = handlers.snapshot()
    ledger = Ledger(firestore_client)
    sealer = EnvelopeSealer([LOCAL_ENVELOPE_KEY])
    yield Worker(Config(), sealer=sealer, ledger=ledger, services=lambda name: None), ledger
    handlers.restore(saved)


@pytest.fixture
def commits(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The Firestore Commit RPCs made while the test runs (a transaction's or a batch's)."""
    from google.cloud.firestore_v1.services.firestore.client import FirestoreClient

    made: list[str] = []
    real = FirestoreClient.commit

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        made.append("commit")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(FirestoreClient, "commit", counted)
    return made


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The documents read while the test runs (`collection/id` per document a get asked for)."""
    from google.cloud.firestore_v1.services.firestore.client import FirestoreClient

    made: list[str] = []
    real = FirestoreClient.batch_get_documents

    def counted(self: Any, request: Any = None, *args: Any, **kwargs: Any) -> Any:
        documents = request["documents"] if isinstance(request, dict) else request.documents
        made.extend("/".join(str(path).split("/")[-2:]) for path in documents)
        return real(self, request, *args, **kwargs)

    monkeypatch.setattr(FirestoreClient, "batch_get_documents", counted)
    return made


def post(worker: Worker, source: str, event: str, delivery_id: str, body: bytes = b"{}") -> Any:
    envelope = Envelope(source, event, delivery_id, datetime.now(UTC), {}, body)
    sealed = EnvelopeSealer([LOCAL_ENVELOPE_KEY]).seal(envelope)
    return worker.handle("POST", "/", {"X-CloudTasks-TaskRetryCount": "0"}, sealed)


def record_and_claim(ledger: Ledger, delivery: str, attempt: str) -> Any:
    """Each delivery id with a body of its own: one body under two ids is a replay."""
    body = b'{"delivery": "%s"}' % delivery.encode()
    return ledger.record_and_claim(
        "github", delivery, "push", body, attempt=attempt, lease_for=LEASE, tag=TAG
    )


def test_a_first_run_records_and_claims_in_one_write_both_new(ledger: Ledger, commits) -> None:
    recorded = record_and_claim(ledger, "d-1", "a1")

    assert commits == ["commit"]  # both documents in one commit, no read
    assert recorded.new and recorded.claimed.state is Claim.OWNED
    stored = ledger.submissions.get(TAG)
    delivery = ledger.deliveries.get("github", "d-1")
    assert (stored.attempt, stored.claimed_by) == ("a1", "d-1")
    assert delivery.lease.attempt == "a1" and stored.lease_until == delivery.lease.until


def test_a_second_delivery_of_the_push_is_recorded_and_finds_the_claim_busy(ledger) -> None:
    record_and_claim(ledger, "d-1", "a1")

    second = record_and_claim(ledger, "d-2", "a2")

    assert second.new and second.claimed.state is Claim.BUSY
    assert second.claimed.submission.attempt == "a1"
    assert ledger.deliveries.get("github", "d-2").lease.attempt == "a2"


def test_a_run_that_may_not_run_the_delivery_claims_nothing(ledger, clock) -> None:
    record_and_claim(ledger, "d-1", "a1")
    busy = record_and_claim(ledger, "d-1", "a2")  # the first run's lease is live
    ledger.deliveries.end_attempt("github", "d-1", "a1", "done")
    finished = record_and_claim(ledger, "d-1", "a3")

    assert busy.busy and busy.claimed is None
    assert finished.delivery.finished and finished.claimed is None
    assert ledger.submissions.get(TAG).attempt == "a1"  # nobody else took the claim


def test_a_retry_of_the_delivery_takes_its_lease_and_finds_its_claim_stale(ledger, clock):
    record_and_claim(ledger, "d-1", "a1")
    clock.advance(LEASE.total_seconds() + 1)

    retry = record_and_claim(ledger, "d-1", "a2")

    assert not retry.new and retry.delivery.lease.attempt == "a2"
    assert retry.claimed.state is Claim.STALE  # it lists before it may take over


def test_a_push_handler_runs_with_its_claim_and_its_winner_commit_marks_done(worker, commits):
    worker, ledger = worker
    seen: list[Any] = []

    def claims(body: bytes, ctx: Any) -> ClaimRequest:
        return ClaimRequest(TAG, {"repo": "o/r", "sha": "abc"})

    @handler("github", "test-push", claims=claims)
    def on_push(event, ctx):
        seen.append(event.claimed.state)
        ctx.ledger.submissions.register_winner(TAG, "batches/b1", "test", {}, end=event.end)
        return Done("submitted")

    answer = post(worker, "github", "test-push", "p-1")

    assert len(commits) == 2  # record + claim; winner + done
    assert (answer.status, answer.body["status"]) == (200, "done")
    assert seen == [Claim.OWNED]
    assert ledger.submissions.get(TAG).operation == "batches/b1"
    delivery = ledger.deliveries.get("github", "p-1")
    assert (delivery.status, delivery.attempts) == ("done", 1)
    assert delivery.lease.until <= datetime.now(UTC)  # the winner's commit ended the lease


def test_an_unleased_settlement_creates_its_delivery_done_in_the_settling_commit(worker, commits):
    worker, ledger = worker
    ledger.operations.register("batches/s1", "test")
    commits.clear()  # the registration's own
    calls: list[str] = []

    @handler("gemini", "test.succeeded", leased=False)
    def settle(event, ctx):
        calls.append(event.delivery_id)
        assert ctx.ledger.deliveries.get("gemini", event.delivery_id) is None  # not yet
        result = ctx.ledger.settle("batches/s1", "succeeded", "webhook", end=event.end)
        return Done(result.value)

    first = post(worker, "gemini", "test.succeeded", "g-1", b'{"data": {"id": "s1"}}')
    again = post(worker, "gemini", "test.succeeded", "g-1", b'{"data": {"id": "s1"}}')

    assert (first.status, first.body["status"]) == (200, "done")
    assert (again.status, again.body["status"]) == (200, "duplicate")
    assert len(commits) == 1  # the settlement, with its delivery; the duplicate wrote nothing
    assert calls == ["g-1"]  # the duplicate ran nothing
    delivery = ledger.deliveries.get("gemini", "g-1")
    assert (delivery.status, delivery.attempts, delivery.lease) == ("done", 1, None)
    assert delivery.payload == b'{"data": {"id": "s1"}}'  # kept for a replay
    assert ledger.operations.get("batches/s1").status == "succeeded"


def test_a_webhook_settlement_reads_its_delivery_once(worker, commits, reads):
    worker, ledger = worker
    ledger.operations.register("batches/s3", "test")
    commits.clear()

    @handler("gemini", "test.cancelled", leased=False)
    def settle(event, ctx):
        result = ctx.ledger.settle("batches/s3", "cancelled", "webhook", end=event.end)
        return Done(result.value)

    answer = post(worker, "gemini", "test.cancelled", "g-4")

    assert (answer.status, answer.body["status"]) == (200, "done")
    assert len(commits) == 1
    # One read each: the settling commit's done mark is conditional on the worker's read.
    assert [read.split("/")[0] for read in reads] == ["deliveries", "operations"], reads
    assert ledger.deliveries.get("gemini", "g-4").status == "done"


def test_a_delivery_recorded_after_the_workers_read_refuses_the_stale_create(worker):
    worker, ledger = worker
    ledger.operations.register("batches/s5", "test")
    ends: list[Any] = []

    @handler("gemini", "test.expired", leased=False)
    def settle(event, ctx):
        # Another run records the delivery between this run's read and its commit.
        ctx.ledger.deliveries.record("gemini", event.delivery_id, event.type, b"recorded")
        ends.append(event.end)
        result = ctx.ledger.settle("batches/s5", "expired", "webhook", end=event.end)
        return Done(result.value)

    answer = post(worker, "gemini", "test.expired", "g-5", b'{"data": {"id": "s5"}}')

    assert (answer.status, answer.body["status"]) == (200, "done")
    assert ledger.counts()["conflicts"] == 1  # the create on the stale read was refused
    assert ends[0].applied  # the retry read the record and marked it in the settling commit
    delivery = ledger.deliveries.get("gemini", "g-5")
    assert (delivery.status, delivery.attempts, delivery.payload) == ("done", 1, b"recorded")
    assert ledger.operations.get("batches/s5").status == "expired"


def test_an_unleased_run_that_settles_nothing_is_recorded_and_marked_by_the_worker(worker):
    worker, ledger = worker
    ledger.operations.register("batches/s2", "test")
    ledger.settle("batches/s2", "failed", "reconcile")  # settled before the webhook came

    @handler("gemini", "test.failed", leased=False)
    def settle(event, ctx):
        result = ctx.ledger.settle("batches/s2", "failed", "webhook", end=event.end)
        return Done(result.value)

    answer = post(worker, "gemini", "test.failed", "g-2")

    assert (answer.status, answer.body["detail"]) == (200, "already_settled")
    delivery = ledger.deliveries.get("gemini", "g-2")
    assert (delivery.status, delivery.attempts) == ("done", 1)


def test_an_unleased_run_that_fails_leaves_a_queued_record_with_its_reason(worker):
    worker, ledger = worker

    @handler("gemini", "test.expired", leased=False)
    def settle(event, ctx):
        raise RetryableError("Gemini 503")

    answer = post(worker, "gemini", "test.expired", "g-3")

    assert (answer.status, answer.body["status"]) == (503, "retry")
    delivery = ledger.deliveries.get("gemini", "g-3")
    assert delivery.status == "queued" and "Gemini 503" in delivery.last_error
