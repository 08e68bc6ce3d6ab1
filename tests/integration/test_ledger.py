"""The ledger's API against the official Firestore emulator: what each call stores."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest

from shared.ledger import (
    AmbiguousId,
    DeliveryEnd,
    DeliveryLease,
    InvalidArgument,
    Ledger,
    Settlement,
    UnknownDelivery,
    WritebackFailed,
    opnames,
)


def stored(client, name):
    return client.collection("operations").document(opnames.encode(name)).get().to_dict()


def write_result(writes, record):

    txn = writes.transaction  # the raw transaction, for writes the ledger has no method for
    ref = txn._client.collection("results").document(record.doc_id)
    txn.create(ref, {"operation": record.name, "kind": record.kind})


# ----------------------------------------------------------------------- register


def test_register_stores_a_pending_operation_with_its_grace_period(ledger, firestore_client, clock):
    record = ledger.operations.register("batches/abc", "github-review", {"repo": "o/r", "sha": "1"})

    doc = stored(firestore_client, "batches/abc")
    assert doc["name"] == "batches/abc"
    assert doc["short_id"] == "abc"
    assert doc["kind"] == "github-review"
    assert doc["status"] == "pending"
    assert doc["attempts"] == 0
    assert doc["writeback_done"] is False
    assert doc["context"] == {"repo": "o/r", "sha": "1"}
    assert doc["submitted_at"] == clock.now
    assert doc["next_check_at"] == clock.now + timedelta(seconds=90)
    assert "settled_at" not in doc  # keeps pending operations out of the outbox sweep
    assert record.name == "batches/abc" and record.pending


def test_registering_again_returns_the_existing_record_and_changes_nothing(
    ledger, firestore_client, clock
):
    first = ledger.operations.register("batches/abc", "github-review", {"sha": "1"})
    clock.advance(60)

    again = ledger.operations.register("batches/abc", "other-kind", {"sha": "2"})

    assert again.kind == "github-review"
    assert again.context == {"sha": "1"}
    assert again.submitted_at == first.submitted_at
    assert stored(firestore_client, "batches/abc")["kind"] == "github-review"


@pytest.mark.parametrize(
    ("name", "kind", "context"),
    [
        ("", "k", None),
        ("batches/", "k", None),
        ("/abc", "k", None),
        ("batches//abc", "k", None),
        ("batches/abc", "", None),
        ("batches/abc", "k", ["not", "a", "mapping"]),
        ("b/" * 700 + "x", "k", None),
    ],
    ids=[
        "empty",
        "trailing slash",
        "leading slash",
        "empty segment",
        "no kind",
        "bad context",
        "too long",
    ],
)
def test_register_rejects_bad_input_and_writes_nothing(
    ledger, firestore_client, name, kind, context
):
    with pytest.raises(InvalidArgument):
        ledger.operations.register(name, kind, context)
    assert list(firestore_client.collection("operations").stream()) == []


# ----------------------------------------------------------------------- get


def test_get_accepts_the_name_or_the_bare_id(ledger):
    ledger.operations.register("batches/abc", "k")
    ledger.operations.register("models/x/operations/y", "k")

    assert ledger.operations.get("batches/abc").name == "batches/abc"
    assert ledger.operations.get("abc").name == "batches/abc"
    assert ledger.operations.get("y").name == "models/x/operations/y"
    assert ledger.operations.get("batches/nope") is None
    assert ledger.operations.get("nope") is None


def test_a_bare_id_shared_by_two_operations_is_ambiguous(ledger):
    ledger.operations.register("batches/same", "k")
    ledger.operations.register("models/x/operations/same", "k")

    with pytest.raises(AmbiguousId, match="same"):
        ledger.operations.get("same")


# ----------------------------------------------------------------------- settle


def test_settle_flips_pending_to_terminal_and_commits_the_writeback(
    ledger, firestore_client, clock
):
    ledger.operations.register("batches/abc", "github-review")
    clock.advance(300)

    outcome = ledger.settle("batches/abc", "succeeded", "webhook", writeback=write_result)

    assert outcome is Settlement.SETTLED
    doc = stored(firestore_client, "batches/abc")
    assert doc["status"] == "succeeded"
    assert doc["settled_by"] == "webhook"
    assert doc["settled_at"] == clock.now
    assert doc["expire_at"] == clock.now + timedelta(days=14)
    assert doc["writeback_done"] is True  # no outbox: nothing left to do
    assert "error" not in doc
    result = firestore_client.collection("results").document("batches%2Fabc").get()
    assert result.to_dict() == {"operation": "batches/abc", "kind": "github-review"}


def test_settle_by_bare_id_with_an_error_and_custom_retention(firestore_client, clock):
    ledger = Ledger(firestore_client, clock=clock, retention=timedelta(days=2))
    ledger.operations.register("models/x/operations/y", "k")

    outcome = ledger.settle("y", "failed", "reconcile", error={"code": 3, "message": "bad"})

    assert outcome is Settlement.SETTLED
    doc = stored(firestore_client, "models/x/operations/y")
    assert doc["status"] == "failed"
    assert doc["settled_by"] == "reconcile"
    assert doc["error"] == {"code": 3, "message": "bad"}
    assert doc["expire_at"] == clock.now + timedelta(days=2)


def test_settling_an_unknown_operation_writes_nothing(ledger, firestore_client):
    calls = []

    assert ledger.settle("batches/ghost", "succeeded", "webhook", writeback=calls.append) == (
        Settlement.UNKNOWN
    )
    assert ledger.settle("ghost", "succeeded", "webhook") is Settlement.UNKNOWN
    assert calls == []
    assert list(firestore_client.collection("operations").stream()) == []


def test_settling_a_terminal_operation_again_changes_nothing(ledger, firestore_client, clock):
    ledger.operations.register("batches/abc", "k")
    ledger.settle("batches/abc", "succeeded", "webhook", writeback=write_result)
    before = stored(firestore_client, "batches/abc")
    clock.advance(600)
    calls = []

    outcome = ledger.settle(
        "batches/abc", "failed", "reconcile", error="late", writeback=lambda t, r: calls.append(r)
    )

    assert outcome is Settlement.ALREADY_SETTLED
    assert calls == []
    assert stored(firestore_client, "batches/abc") == before
    assert before["status"] == "succeeded" and before["settled_by"] == "webhook"


@pytest.mark.parametrize(
    ("status", "by"),
    [("pending", "webhook"), ("done", "webhook"), ("succeeded", "cron"), ("", "")],
    ids=["pending is not terminal", "unknown status", "unknown settler", "empty"],
)
def test_settle_rejects_a_bad_status_or_settler_and_writes_nothing(
    ledger, firestore_client, status, by
):
    ledger.operations.register("batches/abc", "k")
    before = stored(firestore_client, "batches/abc")

    with pytest.raises(InvalidArgument, match=r"batches/abc"):
        ledger.settle("batches/abc", status, by)
    assert stored(firestore_client, "batches/abc") == before


def test_a_writeback_that_raises_leaves_the_operation_pending_then_a_later_settle_wins(
    ledger, firestore_client
):
    ledger.operations.register("batches/abc", "k")

    def half_then_crash(writes, record):
        write_result(writes, record)
        raise RuntimeError("model output unparsable")

    with pytest.raises(WritebackFailed, match="batches/abc") as caught:
        ledger.settle("batches/abc", "succeeded", "webhook", writeback=half_then_crash)

    assert isinstance(caught.value.__cause__, RuntimeError)
    doc = stored(firestore_client, "batches/abc")
    assert doc["status"] == "pending" and "settled_at" not in doc
    assert list(firestore_client.collection("results").stream()) == []

    assert ledger.settle("batches/abc", "succeeded", "reconcile", writeback=write_result) == (
        Settlement.SETTLED
    )
    assert stored(firestore_client, "batches/abc")["settled_by"] == "reconcile"
    assert len(list(firestore_client.collection("results").stream())) == 1


def test_a_writeback_whose_own_write_is_refused_fails_and_settles_nothing(ledger, firestore_client):
    ledger.operations.register("batches/abc", "k")
    firestore_client.collection("results").document("batches%2Fabc").set({"stale": True})

    with pytest.raises(WritebackFailed, match="batches/abc"):
        ledger.settle("batches/abc", "succeeded", "webhook", writeback=write_result)

    assert stored(firestore_client, "batches/abc")["status"] == "pending"
    assert firestore_client.collection("results").document("batches%2Fabc").get().to_dict() == {
        "stale": True
    }


def test_a_writeback_may_read_in_the_transaction_before_writing(ledger, firestore_client):
    firestore_client.collection("counters").document("reviews").set({"n": 4})
    ledger.operations.register("batches/abc", "k")

    def count_review(writes, record):
        txn = writes.transaction  # the raw transaction, for writes the ledger has no method for
        ref = firestore_client.collection("counters").document("reviews")
        n = ref.get(transaction=txn).get("n")
        txn.update(ref, {"n": n + 1})

    ledger.settle("batches/abc", "succeeded", "webhook", writeback=count_review)

    assert firestore_client.collection("counters").document("reviews").get().get("n") == 5


def test_settle_carries_a_delivery_end_in_its_commit_only_when_it_settles(ledger):
    for name in ("batches/e1", "batches/e2"):
        ledger.operations.register(name, "k")
    for delivery, attempt in (("g-1", "a"), ("g-2", "b")):
        ledger.deliveries.record("gemini", delivery, "e", attempt=attempt, lease_for=LEASE)
    held, late, foreign = (
        DeliveryEnd("gemini", "g-1", "a"),
        DeliveryEnd("gemini", "g-2", "b"),
        DeliveryEnd("gemini", "g-2", "x"),  # holds no lease on g-2: its mark is refused
    )

    settled = ledger.settle("batches/e1", "succeeded", "webhook", end=held)
    again = ledger.settle("batches/e1", "succeeded", "webhook", end=late)
    refused = ledger.settle("batches/e2", "failed", "webhook", end=foreign)

    assert (settled, held.applied) == (Settlement.SETTLED, True)
    assert (again, late.applied) == (Settlement.ALREADY_SETTLED, False)
    assert (refused, foreign.applied) == (Settlement.SETTLED, False)
    assert ledger.deliveries.get("gemini", "g-1").status == "done"
    assert ledger.deliveries.get("gemini", "g-2").status == "queued"  # left to its worker


# ----------------------------------------------------------------------- reconcile helpers


def test_due_pending_returns_due_operations_earliest_first_in_pages(ledger, clock):
    start = clock.now
    for index, name in enumerate(["batches/a", "batches/b", "batches/c", "batches/d"]):
        clock.now = start + timedelta(seconds=10 * (index // 2))  # a,b tie; c,d tie
        ledger.operations.register(name, "k")
    clock.now = start
    ledger.operations.register("batches/late", "k")
    ledger.operations.defer("batches/late", start + timedelta(hours=1), 1)
    ledger.operations.register("batches/done", "k")
    ledger.settle("batches/done", "succeeded", "webhook")
    now = start + timedelta(seconds=200)

    first = ledger.operations.due_pending(now, limit=3)
    second = ledger.operations.due_pending(now, limit=3, start_after=first[-1])

    assert [op.name for op in first] == ["batches/a", "batches/b", "batches/c"]
    assert [op.name for op in second] == ["batches/d"]
    assert ledger.operations.due_pending(start, limit=10) == []


def test_defer_updates_a_pending_operation_and_is_a_no_op_once_settled(
    ledger, firestore_client, clock
):
    ledger.operations.register("batches/abc", "k")
    later = clock.now + timedelta(minutes=5)

    assert ledger.operations.defer("abc", later, 3) is True
    doc = stored(firestore_client, "batches/abc")
    assert (doc["attempts"], doc["next_check_at"]) == (3, later)

    ledger.settle("batches/abc", "expired", "reconcile")
    settled = stored(firestore_client, "batches/abc")
    assert ledger.operations.defer("batches/abc", later + timedelta(hours=1), 4) is False
    assert stored(firestore_client, "batches/abc") == settled
    assert ledger.operations.defer("batches/ghost", later, 1) is False


def test_defer_with_an_answer_keeps_the_last_checks_for_the_timeline(ledger, clock):
    ledger.operations.register("batches/abc", "k")
    for attempt in range(1, 13):
        clock.advance(60)
        answer = "still running" if attempt % 2 else f"GeminiUnavailable: 503 #{attempt}"
        assert ledger.operations.defer(
            "abc", clock.now + timedelta(minutes=5), attempt, answer=answer
        )

    checks = ledger.operations.get("abc").checks
    assert [c["attempt"] for c in checks] == list(range(3, 13))  # the newest ten, oldest first
    assert checks[-1]["answer"] == "GeminiUnavailable: 503 #12"
    assert checks[-1]["at"] == clock.now
    with pytest.raises(InvalidArgument, match="answer"):
        ledger.operations.defer("abc", clock.now, 13, answer=503)


def test_defer_rejects_a_naive_time_or_negative_attempts(ledger):
    ledger.operations.register("batches/abc", "k")
    with pytest.raises(InvalidArgument, match="aware"):
        ledger.operations.defer(
            "batches/abc", ledger.operations.get("abc").submitted_at.replace(tzinfo=None), 1
        )
    with pytest.raises(InvalidArgument, match="attempts"):
        ledger.operations.defer("batches/abc", ledger.operations.get("abc").submitted_at, -1)


# ----------------------------------------------------------------------- deliveries


def test_record_delivery_creates_once_and_recognises_a_redelivery_days_later(
    ledger, firestore_client, clock
):
    first = ledger.deliveries.record("github", "d-1", "push", payload={"ref": "refs/heads/main"})
    clock.advance(3 * 86400)
    again = ledger.deliveries.record("github", "d-1", "push", payload={"other": True})

    assert first.new is True and again.new is False
    assert again.delivery.payload == {"ref": "refs/heads/main"}
    doc = firestore_client.collection("deliveries").document("github:d-1").get().to_dict()
    assert doc["status"] == "queued" and doc["attempts"] == 0
    assert doc["received_at"] == clock.now - timedelta(days=3)
    assert doc["expire_at"] == doc["received_at"] + timedelta(days=14)


def test_delivery_ids_with_unsafe_characters_are_encoded(ledger, firestore_client):
    ledger.deliveries.record("gemini", "msg/1%2", "batch.succeeded")

    ids = [snap.id for snap in firestore_client.collection("deliveries").stream()]
    assert ids == ["gemini:msg%2F1%252"]
    assert ledger.deliveries.get("gemini", "msg/1%2").delivery_id == "msg/1%2"


def test_mark_delivery_counts_attempts_and_keeps_the_last_error(ledger, firestore_client, clock):
    ledger.deliveries.record("github", "d-1", "push")

    ledger.deliveries.mark("github", "d-1", "queued", error="GitHub API 502")
    clock.advance(30)
    marked = ledger.deliveries.mark("github", "d-1", "done")

    doc = firestore_client.collection("deliveries").document("github:d-1").get().to_dict()
    assert (doc["status"], doc["attempts"], doc["last_error"]) == ("done", 2, "GitHub API 502")
    assert doc["expire_at"] == clock.now + timedelta(days=14)
    assert marked.status == "done" and marked.attempts == 2


def test_mark_delivery_rejects_unknown_deliveries_and_statuses(ledger):
    with pytest.raises(UnknownDelivery, match="github:nope"):
        ledger.deliveries.mark("github", "nope", "done")
    ledger.deliveries.record("github", "d-1", "push")
    with pytest.raises(InvalidArgument, match="github:d-1"):
        ledger.deliveries.mark("github", "d-1", "finished")
    with pytest.raises(InvalidArgument, match="source"):
        ledger.deliveries.record("Git Hub", "d-2", "push")


LEASE = timedelta(seconds=600)


def test_a_lease_is_taken_by_one_attempt_and_refused_to_another_while_live(
    ledger, firestore_client, clock
):
    first = ledger.deliveries.record("github", "d-1", "push", attempt="a", lease_for=LEASE)
    clock.advance(60)
    other = ledger.deliveries.record("github", "d-1", "push", attempt="b", lease_for=LEASE)
    again = ledger.deliveries.record("github", "d-1", "push", attempt="a", lease_for=LEASE)

    assert (first.new, first.busy, first.delivery.lease.attempt) == (True, False, "a")
    assert first.delivery.lease.until == clock.now - timedelta(seconds=60) + LEASE
    assert (other.new, other.busy, other.delivery.lease.attempt) == (False, True, "a")
    assert (again.busy, again.delivery.lease.until) == (False, clock.now + LEASE)  # renewed
    doc = firestore_client.collection("deliveries").document("github:d-1").get().to_dict()
    assert doc["lease"] == {"attempt": "a", "until": clock.now + LEASE}


def test_an_expired_lease_is_taken_over_and_the_old_attempt_can_no_longer_mark(ledger, clock):
    ledger.deliveries.record("github", "d-1", "push", attempt="a", lease_for=LEASE)
    clock.advance(LEASE.total_seconds())  # `until` itself is already past
    taken = ledger.deliveries.record("github", "d-1", "push", attempt="b", lease_for=LEASE)

    late = ledger.deliveries.end_attempt("github", "d-1", "a", "dead", error="late")
    done = ledger.deliveries.end_attempt("github", "d-1", "b", "done")
    later = ledger.deliveries.end_attempt("github", "d-1", "a", "queued", error="late again")

    assert (taken.busy, taken.delivery.lease.attempt) == (False, "b")
    assert (late.applied, late.delivery.status, late.delivery.last_error) == (False, "queued", None)
    assert (done.applied, done.delivery.status) == (True, "done")
    assert done.delivery.lease == DeliveryLease(
        "b", clock.now
    )  # ended by its mark, holder on record
    assert (later.applied, later.delivery.status) == (False, "done")
    assert ledger.deliveries.get("github", "d-1").attempts == 1


def test_a_retryable_end_releases_the_lease_for_the_next_attempt(ledger, clock):
    ledger.deliveries.record("github", "d-1", "push", attempt="a", lease_for=LEASE)
    ended = ledger.deliveries.end_attempt("github", "d-1", "a", "queued", error="GitHub 502")
    clock.advance(1)
    retry = ledger.deliveries.record("github", "d-1", "push", attempt="b", lease_for=LEASE)

    assert ended.applied and ended.delivery.lease.until <= clock.now
    assert (retry.busy, retry.delivery.lease.attempt) == (False, "b")


@pytest.mark.parametrize("finished", ["done", "ignored", "dead", "unresolved"])
def test_a_finished_delivery_never_moves_back(ledger, clock, finished):
    ledger.deliveries.record("github", "d-1", "push", attempt="a", lease_for=LEASE)
    ledger.deliveries.end_attempt("github", "d-1", "a", finished, error="why")
    clock.advance(1)

    for status in ("queued", "dead", "done"):
        assert ledger.deliveries.mark("github", "d-1", status).status == finished, status
        marked = ledger.deliveries.end_attempt("github", "d-1", "a", status)
        assert (marked.applied, marked.delivery.status) == (False, finished), status
    redelivered = ledger.deliveries.record("github", "d-1", "push", attempt="b", lease_for=LEASE)

    assert (redelivered.busy, redelivered.delivery.status) == (False, finished)
    assert redelivered.delivery.lease.attempt == "a"  # a finished delivery takes no lease
    assert ledger.deliveries.get("github", "d-1").attempts == 1


def test_reopen_is_the_one_way_back_and_keeps_a_live_lease(ledger, clock):
    ledger.deliveries.record("github", "d-1", "push", attempt="a", lease_for=LEASE)
    ledger.deliveries.end_attempt("github", "d-1", "a", "done")
    reopened = ledger.deliveries.reopen("github", "d-1")
    replayed = ledger.deliveries.record("github", "d-1", "push", attempt="b", lease_for=LEASE)
    forced = ledger.deliveries.reopen("github", "d-1")  # `replay --force` while b runs
    beside = ledger.deliveries.record("github", "d-1", "push", attempt="c", lease_for=LEASE)

    assert (reopened.status, reopened.attempts) == ("queued", 2)
    assert (replayed.busy, replayed.delivery.lease.attempt) == (False, "b")
    assert (forced.status, forced.lease.attempt) == ("queued", "b")
    assert (beside.busy, beside.delivery.lease.attempt) == (True, "b")
    with pytest.raises(UnknownDelivery):
        ledger.deliveries.reopen("github", "never")


def test_two_attempts_racing_for_one_lease_get_one_each_way(ledger):
    ledger.deliveries.record("github", "d-1", "push")  # recorded before any lease
    barrier = threading.Barrier(2)

    def take(attempt: str) -> bool:
        barrier.wait()
        return ledger.deliveries.record(
            "github", "d-1", "push", attempt=attempt, lease_for=LEASE
        ).busy

    with ThreadPoolExecutor(max_workers=2) as pool:
        busy = list(pool.map(take, ["a", "b"]))

    assert sorted(busy) == [False, True]
    holder = ledger.deliveries.get("github", "d-1").lease.attempt
    assert holder == ["a", "b"][busy.index(False)]


def test_a_lease_needs_an_attempt_and_a_positive_duration(ledger):
    for name, options in [
        ("attempt alone", {"attempt": "a"}),
        ("duration alone", {"lease_for": LEASE}),
        ("no time", {"attempt": "a", "lease_for": timedelta(0)}),
        ("empty attempt", {"attempt": "", "lease_for": LEASE}),
    ]:
        with pytest.raises(InvalidArgument, match="github:d-1"):
            ledger.deliveries.record("github", "d-1", "push", **options)
        assert ledger.deliveries.get("github", "d-1") is None, name


def test_list_deliveries_newest_first_optionally_by_status(ledger, clock):
    for index in range(4):
        ledger.deliveries.record("github", f"d-{index}", "push")
        clock.advance(1)
    ledger.deliveries.mark("github", "d-1", "dead", error="bad payload")
    ledger.deliveries.mark("github", "d-3", "dead", error="bad payload")

    assert [d.delivery_id for d in ledger.deliveries.listing()] == ["d-3", "d-2", "d-1", "d-0"]
    assert [d.delivery_id for d in ledger.deliveries.listing(status="dead")] == ["d-3", "d-1"]
    assert [d.delivery_id for d in ledger.deliveries.listing(limit=1)] == ["d-3"]


def test_settle_with_a_stale_expected_record_rereads_and_does_not_settle_twice(
    ledger, firestore_client
):
    ledger.operations.register("batches/stale", "review")
    seen_before = ledger.operations.get(
        "batches/stale"
    )  # a caller's read, then someone else settles
    assert (
        ledger.settle("batches/stale", "succeeded", "webhook", writeback=write_result)
        == Settlement.SETTLED
    )

    again = ledger.settle(
        "batches/stale", "failed", "reconcile", writeback=write_result, expected=seen_before
    )

    assert again == Settlement.ALREADY_SETTLED
    assert stored(firestore_client, "batches/stale")["status"] == "succeeded"
    assert len(list(firestore_client.collection("results").stream())) == 1


def test_settle_with_a_fresh_expected_record_settles_without_reading_again(
    ledger, firestore_client
):
    ledger.operations.register("batches/fresh", "review")
    record = ledger.operations.get("batches/fresh")
    reads: list[str] = []
    original_read = ledger._commits.read
    ledger._commits.read = lambda ref, subject: reads.append(subject) or original_read(ref, subject)

    assert (
        ledger.settle("batches/fresh", "succeeded", "reconcile", expected=record)
        == Settlement.SETTLED
    )
    assert stored(firestore_client, "batches/fresh")["settled_by"] == "reconcile"
    assert reads == []


def test_an_expected_record_of_another_operation_is_not_trusted(ledger, firestore_client):
    ledger.operations.register("batches/one", "review")
    ledger.operations.register("batches/two", "review")
    other = ledger.operations.get("batches/two")

    assert (
        ledger.settle("batches/one", "succeeded", "webhook", expected=other) == Settlement.SETTLED
    )
    assert stored(firestore_client, "batches/one")["status"] == "succeeded"
    assert stored(firestore_client, "batches/two")["status"] == "pending"


def test_put_operations_writes_documents_as_given_500_a_batch(ledger):
    ledger.operations.register("batches/p1", "k")
    saved = ledger.queries.stored_fields("batches/p1")
    ledger.settle("batches/p1", "succeeded", "webhook")
    now = ledger.clock()
    bulk = [
        {"name": f"batches/bulk-{i}", "kind": "bulk", "status": "succeeded", "submitted_at": now}
        for i in range(501)
    ]

    assert ledger.operations.put_many([saved, *bulk]) == 502

    assert ledger.queries.stored_fields("batches/p1") == saved
    assert ledger.operations.get("batches/p1").pending
    assert ledger.queries.count_operations(kind="bulk") == 501
    assert ledger.queries.stored_fields("batches/bulk-500") == bulk[500]
