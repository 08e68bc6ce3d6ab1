"""Write-backs staged through the ledger, submissions, and stuck alerts, on the emulator."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

import pytest

from apps.review.results import Reviews, put_review, review_doc_id
from shared.ledger import (
    InvalidArgument,
    Ledger,
    Settlement,
    StoreUnavailable,
    WritebackFailed,
)

# ----------------------------------------------------------------------- reviews


def test_review_doc_id_is_the_sha256_of_repo_sha_and_path():
    expected = hashlib.sha256(b"o/r\nabc\ndocs/a.md").hexdigest()

    assert review_doc_id("o/r", "abc", "docs/a.md") == expected


def test_put_review_commits_with_the_settlement_and_reads_back(ledger):
    long_path = "docs/" + "deep/" * 400 + "a.md"  # over Firestore's 1,500-byte id limit
    ledger.operations.register("batches/r1", "github-review")
    ids = []

    def writeback(writes, record):
        ids.append(put_review(writes, "o/r", "abc", "docs/a.md", {"text": "fine"}))
        ids.append(put_review(writes, "o/r", "abc", long_path, {"error": "row failed"}))

    assert ledger.settle("batches/r1", "succeeded", "webhook", writeback=writeback) is (
        Settlement.SETTLED
    )

    assert ids == [review_doc_id("o/r", "abc", "docs/a.md"), review_doc_id("o/r", "abc", long_path)]
    assert Reviews(ledger).get_review("o/r", "abc", "docs/a.md") == {
        "repo": "o/r",
        "sha": "abc",
        "path": "docs/a.md",
        "operation": "batches/r1",
        "text": "fine",
    }
    assert Reviews(ledger).get_review("o/r", "abc", long_path)["error"] == "row failed"
    assert [r["path"] for r in Reviews(ledger).reviews_for("batches/r1")] == [
        "docs/a.md",
        long_path,
    ]
    assert Reviews(ledger).reviews_for("batches/other") == []
    assert Reviews(ledger).get_review("o/r", "abc", "docs/missing.md") is None


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("empty repo", ("", "abc", "a.md", {})),
        ("non-string path", ("o/r", "abc", None, {})),
        ("fields not a mapping", ("o/r", "abc", "a.md", ["text"])),
        ("fields override the operation", ("o/r", "abc", "a.md", {"operation": "x"})),
    ],
)
def test_put_review_rejects_bad_input_and_the_operation_settles_with_the_reason(ledger, name, args):
    """A permanent write-back error can never succeed: settle, record why, write nothing."""
    ledger.operations.register("batches/bad", "github-review")

    def writeback(writes, record):
        put_review(writes, "o/r", "abc", "docs/fine.md", {"status": "ok", "text": "staged first"})
        put_review(writes, *args)

    assert ledger.settle("batches/bad", "succeeded", "webhook", writeback=writeback) is (
        Settlement.SETTLED
    )

    stored = ledger.queries.stored_fields("batches/bad")
    assert stored["status"] == "succeeded", name
    assert stored["writeback_error"].startswith("write-back failed: review"), name
    assert Reviews(ledger).reviews_for("batches/bad") == [], name  # the staged writes rolled back
    assert ledger.operations.due_pending(datetime.now(UTC) + timedelta(days=1), 10) == [], name


def test_a_transient_writeback_error_leaves_the_operation_pending(ledger):
    ledger.operations.register("batches/flaky", "github-review")

    def writeback(writes, record):
        raise StoreUnavailable("reviews read timed out")

    with pytest.raises(WritebackFailed, match="batches/flaky") as caught:
        ledger.settle("batches/flaky", "succeeded", "webhook", writeback=writeback)

    assert isinstance(caught.value.__cause__, StoreUnavailable)
    assert ledger.operations.get("batches/flaky").pending
    assert "writeback_error" not in ledger.queries.stored_fields("batches/flaky")


@pytest.mark.parametrize(
    ("name", "fields", "message"),
    [
        ("over a document", {"text": "x" * 1_100_000}, "over"),
        ("a lone surrogate", {"text": "bad \ud800 text"}, "cannot store"),
    ],
)
def test_put_review_refuses_what_firestore_would_refuse_before_the_commit(
    ledger, name, fields, message
):
    ledger.operations.register("batches/big", "github-review")
    refused = []

    def writeback(writes, record):
        try:
            put_review(writes, "o/r", "abc", "docs/a.md", fields)
        except InvalidArgument as exc:
            refused.append(str(exc))
            put_review(writes, "o/r", "abc", "docs/a.md", {"status": "error", "error": "too big"})

    assert ledger.settle("batches/big", "succeeded", "webhook", writeback=writeback) is (
        Settlement.SETTLED
    )
    assert len(refused) == 1 and message in refused[0], name
    assert Reviews(ledger).get_review("o/r", "abc", "docs/a.md")["error"] == "too big", name


def test_a_writeback_firestore_refuses_at_commit_settles_with_the_reason(ledger, firestore_client):
    """Firestore's INVALID_ARGUMENT for a staged write will come back on every retry."""
    ledger.operations.register("batches/huge", "github-review")

    def writeback(writes, record):  # past the ledger's own checks, straight on the transaction
        ref = firestore_client.collection("reviews").document("huge")
        writes.transaction.set(ref, {"text": "x" * 1_100_000})

    assert ledger.settle("batches/huge", "succeeded", "webhook", writeback=writeback) is (
        Settlement.SETTLED
    )
    stored = ledger.queries.stored_fields("batches/huge")
    assert stored["status"] == "succeeded"
    assert "Firestore refused the write-back" in stored["writeback_error"]
    assert not firestore_client.collection("reviews").document("huge").get().exists


# ----------------------------------------------------------------------- stuck alerts


def test_mark_stuck_alerted_records_once_per_window(ledger, clock):
    ledger.operations.register("batches/slow", "k")
    window = timedelta(hours=1)

    first = ledger.operations.mark_stuck_alerted("batches/slow", clock(), window)
    clock.advance(600)
    within = ledger.operations.mark_stuck_alerted("slow", clock(), window)
    clock.advance(3000)
    after = ledger.operations.mark_stuck_alerted("batches/slow", clock(), window)

    assert (first, within, after) == (True, False, True)
    assert ledger.operations.get("batches/slow").stuck_alerted_at == clock.now
    assert ledger.operations.get("batches/slow").to_dict()["stuck_alerted_at"] == clock.now


def test_mark_stuck_alerted_is_false_for_settled_and_unknown_operations(ledger, clock):
    ledger.operations.register("batches/done", "k")
    ledger.settle("batches/done", "succeeded", "webhook")

    assert (
        ledger.operations.mark_stuck_alerted("batches/done", clock(), timedelta(hours=1)) is False
    )
    assert (
        ledger.operations.mark_stuck_alerted("batches/ghost", clock(), timedelta(hours=1)) is False
    )
    assert ledger.operations.get("batches/done").stuck_alerted_at is None


def test_two_runs_racing_on_one_read_alert_once(firestore_client, clock):
    """Both read v1; the second's conditional write is refused and its re-read says no."""
    ledgers = [Ledger(firestore_client, clock=clock) for _ in range(2)]
    ledgers[0].operations.register("batches/race", "k")
    commits = ledgers[1]._commits
    real_read = commits.read
    raced = []

    def read_then_let_the_other_run_alert(ref, subject):
        snapshot = real_read(ref, subject)
        if not raced:
            raced.append(
                ledgers[0].operations.mark_stuck_alerted("batches/race", clock(), timedelta(1))
            )
        return snapshot

    commits.read = read_then_let_the_other_run_alert

    second = ledgers[1].operations.mark_stuck_alerted("batches/race", clock(), timedelta(hours=1))

    assert (raced, second) == ([True], False)
    assert ledgers[1].counts()["conflicts"] == 1


def test_a_review_put_without_replace_is_created_and_counted_per_push(ledger):
    for name in ("batches/c1", "batches/c2"):
        ledger.operations.register(name, "bench")

    def create(writes, record):
        put_review(writes, "o/r", "abc", "a.md", {"by": record.name}, replace=False)

    assert ledger.settle("batches/c1", "succeeded", "webhook", writeback=create) is (
        Settlement.SETTLED
    )
    with pytest.raises(WritebackFailed, match="already exists"):
        ledger.settle("batches/c2", "succeeded", "webhook", writeback=create)

    assert ledger.operations.get("batches/c2").pending
    assert Reviews(ledger).get_review("o/r", "abc", "a.md")["by"] == "batches/c1"
    assert Reviews(ledger).count_for_push("o/r", "abc") == 1
    assert Reviews(ledger).count_for_push("o/r", "other") == 0
