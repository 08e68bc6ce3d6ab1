"""Adoption reads only what is open (shared/reconcile/adoption.py, issue 36 point 3).

Against the Firestore emulator, with Gemini's listing in memory (`local.fakes.ListedGateway`:
newest first, 100 to a page, counted) so create times and list calls are exact.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest

from local.fakes import FakeClock, ListedGateway
from shared import kinds
from shared.gemini import BatchSummary, GeminiError
from shared.ledger import Ledger
from shared.ledger.ids import submission_id
from shared.reconcile.adoption import CLOCK_SKEW, OrphanAdopter
from shared.reconcile.report import Budget, RunReport

KIND = kinds.generic("nightly-eval")
PENDING = "JOB_STATE_PENDING"
LEASE = timedelta(minutes=10)


class Cancelling(ListedGateway):
    """The listing, plus the cancel a superseded batch's outbox item sends."""

    def __init__(self, batches: Any = ()) -> None:
        super().__init__(batches)
        self.cancelled: list[str] = []

    def cancel_batch(self, name: str) -> None:
        self.cancelled.append(name)


def tag(n: int) -> str:
    return KIND.make_tag(f"{n:012x}")


def batch(name: str, display_name: str, at: datetime) -> BatchSummary:
    return BatchSummary(f"batches/{name}", display_name, PENDING, at)


def claim(ledger: Ledger, tag_: str, at: datetime, attempt: str = "a-1") -> None:
    """A claim whose holder died at `at`: its lease ends then."""
    ledger.submissions.claim(
        tag_, delivery_id="d-1", attempt=attempt, lease_until=at + LEASE, now=at, context={}
    )


def adopt(ledger: Ledger, gateway: Any, clock: FakeClock) -> RunReport:
    report = RunReport()
    budget = Budget.starting_now(60, 0, lambda: 0.0)  # never spent
    adopted = OrphanAdopter(ledger, gateway, clock).adopt(report, budget, set())
    assert report.adopted == len(adopted)
    return report


def open_tags(ledger: Ledger, clock: FakeClock) -> list[str]:
    return [c.tag for c in ledger.submissions.open_claims(clock() + timedelta(days=1), 100)]


def old_batches(count: int, before: datetime) -> list[BatchSummary]:
    """`count` batches (other pushes', all registered long ago), a second apart."""
    return [
        batch(f"old-{i}", tag(10_000 + i), before - timedelta(seconds=i + 1)) for i in range(count)
    ]


def test_with_no_open_claim_adoption_lists_nothing(ledger: Ledger, clock: FakeClock) -> None:
    t0 = clock()
    gateway = ListedGateway([*old_batches(1000, t0), batch("stray", tag(1), t0)])
    claim(ledger, tag(2), t0)
    ledger.submissions.register_winner(tag(2), "batches/won", KIND.name, None)  # decided
    clock.advance(3600)

    report = adopt(ledger, gateway, clock)

    assert (gateway.pages, gateway.read, report.adopted, report.errors) == (0, 0, 0, 0)


def test_an_open_claims_batch_is_adopted_and_nothing_is_listed_for_it_again(
    ledger: Ledger, clock: FakeClock
) -> None:
    t0 = clock()
    claim(ledger, tag(1), t0)
    gateway = ListedGateway(
        [*old_batches(300, t0), batch("orphan", tag(1), t0 + timedelta(seconds=1))]
    )
    clock.advance((LEASE + CLOCK_SKEW).total_seconds() + 1)

    report = adopt(ledger, gateway, clock)

    assert report.adopted == 1 and report.errors == 0, report
    assert ledger.submissions.get(tag(1)).operation == "batches/orphan"  # type: ignore[union-attr]
    assert open_tags(ledger, clock) == []  # the winner's commit closed it
    pages = gateway.pages
    assert adopt(ledger, gateway, clock).adopted == 0 and gateway.pages == pages


def test_a_claim_is_not_looked_for_before_its_lease_and_the_margin_are_over(
    ledger: Ledger, clock: FakeClock
) -> None:
    t0 = clock()
    claim(ledger, tag(1), t0)
    gateway = ListedGateway([batch("orphan", tag(1), t0 + timedelta(seconds=1))])
    clock.advance((LEASE + CLOCK_SKEW).total_seconds() - 1)  # its holder may be registering

    assert adopt(ledger, gateway, clock).adopted == 0 and gateway.pages == 0
    clock.advance(2)
    assert adopt(ledger, gateway, clock).adopted == 1


def test_the_listing_stops_past_the_oldest_open_claim(ledger: Ledger, clock: FakeClock) -> None:
    t0 = clock()
    newer = [
        batch(f"new-{i}", tag(20_000 + i), t0 + timedelta(minutes=1, seconds=i)) for i in range(50)
    ]
    gateway = ListedGateway([*old_batches(1000, t0 - CLOCK_SKEW), *newer])
    gateway.add(batch("orphan", tag(1), t0 + timedelta(seconds=5)))
    claim(ledger, tag(1), t0)
    clock.advance(3600)

    report = adopt(ledger, gateway, clock)

    assert report.adopted == 1, report
    # 50 newer, the orphan, then batches below open_since - margin: the first page only.
    assert (gateway.pages, gateway.read) == (1, 100)


def test_an_open_claim_with_no_batch_is_closed_by_a_complete_listing(
    ledger: Ledger, clock: FakeClock
) -> None:
    t0 = clock()
    claim(ledger, tag(1), t0)  # its holder died before the create
    gateway = ListedGateway(old_batches(250, t0 - CLOCK_SKEW))
    clock.advance(3600)

    first = adopt(ledger, gateway, clock)

    assert first.adopted == 0 and first.errors == 0 and gateway.pages == 1
    assert open_tags(ledger, clock) == []
    stored = ledger.submissions.get(tag(1))
    assert stored is not None and stored.operation is None and stored.open_since is None
    adopt(ledger, gateway, clock)
    assert gateway.pages == 1  # no listing for it again


def test_a_listing_cut_short_keeps_the_claim_open_and_a_later_run_adopts(
    ledger: Ledger, clock: FakeClock
) -> None:
    t0 = clock()
    claim(ledger, tag(1), t0)
    clock.advance(3600)

    class Failing(ListedGateway):
        def list_batches(self, page_size: int = 100) -> Iterator[BatchSummary]:
            yield from []
            raise GeminiError("list batches: 503")

    cut = adopt(ledger, Failing(), clock)

    assert cut.errors == 1 and open_tags(ledger, clock) == [tag(1)]
    later = adopt(
        ledger, ListedGateway([batch("orphan", tag(1), t0 + timedelta(seconds=1))]), clock
    )
    assert later.adopted == 1


def test_a_claim_taken_over_is_open_again_and_an_earlier_holders_batch_is_superseded(
    ledger: Ledger, clock: FakeClock
) -> None:
    """A's create became listable only after B's takeover listing: B's winner is
    registered, the claim stays open, and adoption supersedes A's batch, then closes it."""
    t0 = clock()
    claim(ledger, tag(1), t0, attempt="a-A")
    gateway = Cancelling()
    clock.advance(3600)
    adopt(ledger, gateway, clock)  # nothing listed yet: closed
    assert open_tags(ledger, clock) == []

    stale = ledger.submissions.get(tag(1))
    assert stale is not None
    taken = ledger.submissions.take_over(
        stale, delivery_id="d-1", attempt="a-B", lease_until=clock() + LEASE, now=clock()
    )
    assert taken.state == "owned" and open_tags(ledger, clock) == [tag(1)]
    gateway.add(batch("from-A", tag(1), t0 + timedelta(seconds=30)))
    gateway.add(batch("from-B", tag(1), clock() + timedelta(seconds=1)))
    ledger.submissions.register_winner(tag(1), "batches/from-B", KIND.name, {})
    assert open_tags(ledger, clock) == [tag(1)]  # taken over: A's batch may still show
    clock.advance((LEASE + CLOCK_SKEW).total_seconds() + 1)

    report = adopt(ledger, gateway, clock)

    assert report.errors == 0, report
    loser = ledger.operations.get("batches/from-A")
    assert loser is not None and loser.status == "superseded"
    assert gateway.cancelled == ["batches/from-A"]
    assert open_tags(ledger, clock) == []


def test_a_release_opens_the_claim_at_once(ledger: Ledger, clock: FakeClock) -> None:
    t0 = clock()
    claim(ledger, tag(1), t0)
    assert ledger.submissions.release(tag(1), attempt="a-1", now=t0)
    gateway = ListedGateway([batch("landed", tag(1), t0)])  # the create that "failed"
    clock.advance(CLOCK_SKEW.total_seconds() + 1)  # long before the lease would have ended

    assert adopt(ledger, gateway, clock).adopted == 1


@pytest.fixture
def old_format(firestore_client: Any, clock: FakeClock) -> str:
    """A submission claimed before the open marks existed, its holder dead."""
    at = clock()
    firestore_client.collection("submissions").document(submission_id(tag(7))).set(
        {
            "tag": tag(7),
            "operation": None,
            "claimed_by": "d-old",
            "attempt": "a-old",
            "claimed_at": at,
            "lease_until": at + LEASE,
            "context": {},
        }
    )
    return tag(7)


def test_an_old_claim_is_found_by_the_watermarks_last_listing(
    ledger: Ledger, clock: FakeClock, firestore_client: Any, old_format: str
) -> None:
    t0 = clock()
    firestore_client.collection("reconcile_state").document("adoption").set(
        {"listed_at": t0 - timedelta(minutes=5)}
    )
    gateway = ListedGateway(
        [*old_batches(500, t0 - timedelta(minutes=10)), batch("old-orphan", old_format, t0)]
    )
    clock.advance(3600)

    report = adopt(ledger, gateway, clock)

    assert report.adopted == 1 and gateway.pages == 1, report
    assert ledger.operations.get("batches/old-orphan") is not None
    assert ledger.watermark.get() is None  # its last listing is done
    assert adopt(ledger, gateway, clock).adopted == 0 and gateway.pages == 1


def test_an_old_claim_taken_over_gets_the_open_marks(
    ledger: Ledger, clock: FakeClock, old_format: str
) -> None:
    clock.advance(3600)
    stale = ledger.submissions.get(old_format)
    assert stale is not None and stale.open_since is None
    ledger.submissions.take_over(
        stale, delivery_id="d-2", attempt="a-2", lease_until=clock(), now=clock()
    )
    [found] = ledger.submissions.open_claims(clock() + timedelta(seconds=1), 10)
    assert found.tag == old_format and found.open_since == stale.claimed_at


def test_a_listing_out_of_creation_order_is_read_to_the_end(
    ledger: Ledger, clock: FakeClock, caplog: Any
) -> None:
    """Oldest first: the first batch is already past the floor, but its page shows the
    order is not newest first, so the orphan beyond it is still found."""
    t0 = clock()
    claim(ledger, tag(1), t0)
    older = old_batches(300, t0 - timedelta(hours=1))
    gateway = ListedGateway()
    gateway.batches = [*reversed(older[150:]), batch("orphan", tag(1), t0), *reversed(older[:150])]
    clock.advance(3600)

    report = adopt(ledger, gateway, clock)

    assert report.adopted == 1 and (gateway.read, gateway.pages) == (301, 4), report
    assert any("after an older one" in r.getMessage() for r in caplog.records)
