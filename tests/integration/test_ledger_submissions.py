"""The push submission against the Firestore emulator: claims, leases, takeover, one winner."""

from __future__ import annotations

from datetime import timedelta

from shared.ledger import SUPERSEDED
from shared.ledger.submissions import Claim

TAG = "hookledger:review:o/r@abc"
LEASE = timedelta(minutes=10)
CONTEXT = {"repo": "o/r", "sha": "abc", "paths": ["a.md"], "refused": []}


def claim(ledger, clock, attempt, delivery="d-1", context=CONTEXT):
    now = clock()
    return ledger.submissions.claim(
        TAG,
        delivery_id=delivery,
        attempt=attempt,
        lease_until=now + LEASE,
        now=now,
        context=context,
    )


def test_the_first_claim_owns_and_another_attempt_is_busy_while_the_lease_runs(ledger, clock):
    assert claim(ledger, clock, "a1").state is Claim.OWNED
    clock.advance(60)

    busy = claim(ledger, clock, "a2", delivery="d-2")

    assert busy.state is Claim.BUSY
    assert (busy.submission.attempt, busy.submission.claimed_by) == ("a1", "d-1")
    assert busy.submission.context == CONTEXT


def test_a_claim_is_stale_once_its_lease_ends_or_to_its_own_attempt(ledger, clock):
    claim(ledger, clock, "a1")

    assert claim(ledger, clock, "a1").state is Claim.STALE  # the same run may have created
    clock.advance(LEASE.total_seconds() + 1)
    assert claim(ledger, clock, "a2").state is Claim.STALE


def test_of_two_takeovers_of_one_stale_read_exactly_one_wins(ledger, clock):
    claim(ledger, clock, "a1")
    clock.advance(LEASE.total_seconds() + 1)
    stale = claim(ledger, clock, "a2").submission
    now = clock()

    first = ledger.submissions.take_over(
        stale, delivery_id="d-2", attempt="a2", lease_until=now + LEASE, now=now
    )
    second = ledger.submissions.take_over(
        stale, delivery_id="d-3", attempt="a3", lease_until=now + LEASE, now=now
    )

    assert first.state is Claim.OWNED
    assert second.state is Claim.BUSY and second.submission.attempt == "a2"


def test_release_ends_the_lease_only_for_its_holder(ledger, clock):
    claim(ledger, clock, "a1")

    assert ledger.submissions.release(TAG, attempt="a2", now=clock()) is False
    assert claim(ledger, clock, "a2").state is Claim.BUSY
    assert ledger.submissions.release(TAG, attempt="a1", now=clock()) is True
    assert claim(ledger, clock, "a2").state is Claim.STALE


def test_the_winner_is_registered_with_the_push_context_in_one_commit_and_only_once(ledger, clock):
    claim(ledger, clock, "a1")

    first = ledger.submissions.register_winner(TAG, "batches/one", "github-review", CONTEXT)
    second = ledger.submissions.register_winner(TAG, "batches/two", "github-review", {"x": 1})
    again = ledger.submissions.register_winner(TAG, "batches/one", "github-review", CONTEXT)

    assert (first.won, first.operation) == (True, "batches/one")
    assert (second.won, second.operation) == (False, "batches/one")
    assert again.won
    record = ledger.operations.get("batches/one")
    assert record.pending and record.context == CONTEXT and record.submission == TAG
    assert ledger.operations.get("batches/two") is None  # the loser is the caller's to supersede
    assert claim(ledger, clock, "a9").state is Claim.DECIDED


def test_an_adopted_winner_gets_the_submission_context_not_the_adopters(ledger, clock):
    claim(ledger, clock, "a1")

    ledger.submissions.register_winner(
        TAG, "batches/orphan", "github-review", None, fallback_context={"paths": []}
    )

    assert ledger.operations.get("batches/orphan").context == CONTEXT


def test_an_orphan_of_an_unclaimed_push_wins_and_decides_the_push(ledger, clock):
    winner = ledger.submissions.register_winner(
        TAG, "batches/x", "github-review", None, fallback_context={"adopted": True}
    )

    assert winner.won and ledger.operations.get("batches/x").context == {"adopted": True}
    decided = claim(ledger, clock, "late-run")  # the push's own run, arriving later
    assert decided.state is Claim.DECIDED and decided.submission.operation == "batches/x"


def test_a_superseded_batch_is_final_at_once_and_never_pending(ledger, clock):
    record = ledger.operations.record_superseded(
        "batches/two",
        "github-review",
        None,
        winner="batches/one",
        outbox=[{"kind": "gemini-cancel", "name": "batches/two"}],
    )

    stored = ledger.operations.get("batches/two")
    assert record.status == stored.status == SUPERSEDED
    assert stored.superseded_by == "batches/one" and not stored.pending
    assert ledger.operations.due_pending(clock() + timedelta(days=1), 10) == []
    assert [item.payload["kind"] for item in stored.outbox] == ["gemini-cancel"]


def test_a_tag_too_long_for_a_document_id_still_claims_once(ledger, clock):
    tag = "review:o/r@" + "x" * 3000
    now = clock()
    kwargs = {"lease_until": now + LEASE, "now": now}

    assert (
        ledger.submissions.claim(tag, delivery_id="d", attempt="a1", **kwargs).state is Claim.OWNED
    )
    assert (
        ledger.submissions.claim(tag, delivery_id="d", attempt="a2", **kwargs).state is Claim.BUSY
    )
