"""Outbox owner tokens, due order, give-up and expiry: exactly one comment per push, whatever
the timing, and nothing deleted before its outbox is finished (docs/architecture.md, "Outbox").

GitHub is the simulator (`simulator` fixture); the ledger is the Firestore emulator; time is
a FakeClock shared by every ledger in a test, so "the lease expired" is a clock advance.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
import requests

from apps.review.comments import item as comment_item
from apps.review.comments import push_marker
from apps.review.results import put_review
from local.fakes import FakeClock
from shared import crashpoints
from shared.errors import PermanentError
from shared.github import CommentsClient
from shared.kinds import Deliverers
from shared.ledger import Ledger, OutboxDeliveryFailed, OutboxItem, OutboxPolicy, opnames
from tests.integration.test_github_comments import REPO, SHA, commit_counts

LEASE = OutboxPolicy().lease.total_seconds()


@dataclass(frozen=True)
class Services:
    """What the comment deliverer uses: this ledger and a GitHub client on the simulator."""

    ledger: Ledger
    comments: CommentsClient


class AfterFirstListing(requests.Session):
    """A session that runs `meanwhile()` once, right after its first comment listing returns:
    the holder has looked (no marker) and is about to re-check and post."""

    def __init__(self, meanwhile: Callable[[], None]) -> None:
        super().__init__()
        self._meanwhile: Callable[[], None] | None = meanwhile

    def request(self, method: str | bytes, url: str | bytes, *args: Any, **kwargs: Any) -> Any:
        response = super().request(method, url, *args, **kwargs)
        if method == "GET" and str(url).endswith("/comments") and self._meanwhile is not None:
            meanwhile, self._meanwhile = self._meanwhile, None
            meanwhile()
        return response


def stored(client: Any, name: str) -> dict[str, Any]:
    return client.collection("operations").document(opnames.encode(name)).get().to_dict()


def settle_review(ledger: Ledger, name: str, sha: str = SHA) -> None:
    """A settled review operation for the push `REPO@sha`: one review, one comment item."""
    ledger.operations.register(name, "github-review", {"repo": REPO, "sha": sha})
    ledger.settle(
        name,
        "succeeded",
        "webhook",
        writeback=lambda writes, record: put_review(
            writes, REPO, sha, "docs/a.md", {"status": "ok", "text": "fine"}
        ),
        outbox=[comment_item(REPO, sha, name)],
    )


def comments_client(simulator: Any, session: requests.Session | None = None) -> CommentsClient:
    return CommentsClient(simulator.url, "sim-token", session=session, timeout_s=5, attempts=1)


def test_a_slow_holder_whose_lease_expired_neither_posts_nor_marks(simulator, firestore_client):
    clock = FakeClock()
    ledger = Ledger(firestore_client, clock=clock)
    settle_review(ledger, "batches/slow")
    clock.advance(120)
    second: list[Any] = []

    def lease_expires_and_another_sweep_delivers() -> None:
        clock.advance(LEASE + 1)
        sweeper = Ledger(firestore_client, clock=clock)
        services = Services(sweeper, comments_client(simulator))
        second.append(sweeper.outbox.sweep(Deliverers(services)))

    slow = Services(
        ledger,
        comments_client(simulator, AfterFirstListing(lease_expires_and_another_sweep_delivers)),
    )
    first = ledger.outbox.sweep(Deliverers(slow))

    doc = stored(firestore_client, "batches/slow")
    [item] = doc["outbox"]
    assert [r.completed for r in second] == [["batches/slow"]]
    assert first.failed == ["batches/slow"]  # OwnershipLost: retryable, nothing posted
    assert commit_counts(simulator) == {"posts": 1, "comments": 1}
    # The slow holder's failure changed nothing: the second claimer's delivery stands.
    assert item["delivered_at"] is not None
    assert (item.get("attempts", 0), item["leased_by"], item.get("given_up_at")) == (0, None, None)
    assert doc["writeback_done"] is True and "outbox_due_at" not in doc


def test_a_non_owners_mark_and_failure_change_nothing(firestore_client):
    clock = FakeClock()
    ledger = Ledger(firestore_client, clock=clock)
    ledger.operations.register("batches/owner", "k")
    ledger.settle("batches/owner", "succeeded", "webhook", outbox=[{"n": 1}])
    ref = firestore_client.collection("operations").document(opnames.encode("batches/owner"))
    held: list[OutboxItem] = []
    seen: list[tuple[Any, Any]] = []

    def first_holder(item: OutboxItem) -> None:
        held.append(item)
        clock.advance(LEASE + 1)  # slow: its lease runs out …
        ledger.outbox.deliver("batches/owner", second_holder)  # … and another claims it
        raise TimeoutError("the first holder's late failure")

    def second_holder(item: OutboxItem) -> None:
        held.append(item)
        before = ref.get()
        record = ledger.operations.get("batches/owner")
        assert record is not None
        # The first holder, still running, tries to mark and then to record its failure.
        seen.append((ledger.outbox._mark_delivered(record, held[0]), None))
        ledger.outbox._record_failure(record, held[0], TimeoutError("late"))
        seen.append((before.update_time, ref.get().update_time))

    with pytest.raises(OutboxDeliveryFailed, match="late failure"):
        ledger.outbox.deliver("batches/owner", first_holder)

    [item] = ref.get().to_dict()["outbox"]
    assert held[0].lease is not None and held[1].lease is not None
    assert held[0].lease.token != held[1].lease.token  # a new token per claim
    assert seen[0] == (False, None)  # the stale mark was refused
    assert seen[1][0] == seen[1][1]  # and neither stale write changed the document
    # The second holder's delivery stands; the first holder's failures were never counted.
    assert item["delivered_at"] is not None
    assert (item.get("attempts", 0), item["leased_by"], item.get("last_error")) == (0, None, None)


def test_an_item_leased_in_the_old_words_is_held_then_taken_in_the_new_ones(firestore_client):
    # Items stored before the lease had its own words carry claimed_by / claimed_until.
    clock = FakeClock()
    ledger = Ledger(firestore_client, clock=clock)
    ledger.operations.register("batches/old-words", "k")
    ledger.settle("batches/old-words", "succeeded", "webhook", outbox=[{"n": 1}])
    ref = firestore_client.collection("operations").document(opnames.encode("batches/old-words"))
    outbox = ref.get().to_dict()["outbox"]
    until = clock() + timedelta(seconds=LEASE)
    old = {k: v for k, v in outbox[0].items() if k not in ("leased_by", "leased_until")}
    ref.update({"outbox": [{**old, "claimed_by": "old-holder", "claimed_until": until}]})
    record = ledger.operations.get("batches/old-words")
    assert record is not None
    assert (record.outbox[0].leased_by, record.outbox[0].claimed_by) == ("old-holder",) * 2

    delivered: list[OutboxItem] = []
    now = ledger.outbox.deliver("batches/old-words", delivered.append)
    assert (delivered, now) == ([], 0)  # the old holder's live lease is respected

    clock.advance(LEASE + 1)
    ledger.outbox.deliver("batches/old-words", delivered.append)
    [item] = ref.get().to_dict()["outbox"]
    assert len(delivered) == 1 and item["delivered_at"] is not None
    assert (item["leased_by"], item["leased_until"]) == (None, None)
    assert "claimed_by" not in item and "claimed_until" not in item


def test_two_operations_of_one_push_publishing_at_once_leave_one_comment(
    simulator, firestore_client
):
    clock = FakeClock()
    ledger = Ledger(firestore_client, clock=clock)
    settle_review(ledger, "batches/first")
    settle_review(ledger, "batches/second")
    both_looked = threading.Barrier(2, timeout=30)
    errors: list[BaseException] = []

    def hold_before_post(point: str) -> None:
        if point == "outbox.before_post":
            both_looked.wait()  # each re-checked its own claim; neither saw a marker

    def deliver(name: str) -> None:
        own = Ledger(firestore_client, clock=clock)
        try:
            own.outbox.deliver(name, Deliverers(Services(own, comments_client(simulator))))
        except Exception as exc:
            errors.append(exc)

    crashpoints.install(hold_before_post)
    try:
        threads = [
            threading.Thread(target=deliver, args=(n,)) for n in ("batches/first", "batches/second")
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
    finally:
        crashpoints.install(None)

    [comment] = simulator.control.github_comments()["comments"]
    assert errors == []
    assert commit_counts(simulator) == {"posts": 2, "comments": 1}  # the newer was deleted
    assert push_marker(REPO, SHA) in comment["body"]
    for name in ("batches/first", "batches/second"):
        assert stored(firestore_client, name)["writeback_done"] is True


@pytest.mark.slow
def test_items_given_up_or_backing_off_never_block_a_newer_due_item(firestore_client, caplog):
    clock = FakeClock()
    ledger = Ledger(firestore_client, clock=clock)
    old = [f"batches/old-{n:03d}" for n in range(110)]
    for name in old:
        ledger.operations.register(name, "k")
        ledger.settle(name, "succeeded", "webhook", outbox=[{"name": name}])
    clock.advance(120)

    def broken(item: OutboxItem) -> None:
        number = int(item.operation.rsplit("-", 1)[1])
        if number % 2:
            raise PermanentError("GitHub answered 404: no such repository")
        raise TimeoutError("GitHub timed out")

    first = ledger.outbox.sweep(broken, limit=200)
    ledger.operations.register("batches/new", "k")
    ledger.settle("batches/new", "succeeded", "webhook", outbox=[{"name": "batches/new"}])
    clock.advance(14)  # the failing ones back off at least 15 s (30 s, half jittered)
    delivered: list[str] = []
    second = ledger.outbox.sweep(
        lambda item: delivered.append(item.operation), older_than=timedelta(0), limit=100
    )

    assert len(first.failed) == 110
    assert (second.completed, delivered) == (["batches/new"], ["batches/new"])
    given_up = stored(firestore_client, old[1])
    assert given_up["outbox"][0]["given_up_at"] is not None
    assert "404" in given_up["outbox"][0]["given_up_reason"]
    assert given_up["writeback_done"] is True and "outbox_due_at" not in given_up
    backing_off = stored(firestore_client, old[0])
    assert backing_off["outbox_due_at"] == backing_off["outbox"][0]["next_attempt_at"]
    alerts = [
        r.hookledger_fields
        for r in caplog.records
        if getattr(r, "hookledger_fields", {}).get("alert") == "outbox_item_failing"
    ]
    assert len(alerts) == 55 and all(a["given_up"] for a in alerts)
    assert {a["operation"] for a in alerts} == set(old[1::2])


def test_expire_at_waits_until_the_last_item_is_delivered_or_given_up(firestore_client):
    clock = FakeClock()
    retention = timedelta(days=14)
    policy = OutboxPolicy(give_up_after=2, rand=lambda: 1.0)
    ledger = Ledger(firestore_client, clock=clock, retention=retention, outbox_policy=policy)
    ledger.operations.register("batches/none", "k")
    ledger.settle("batches/none", "succeeded", "webhook")
    ledger.operations.register("batches/two", "k")
    ledger.settle("batches/two", "succeeded", "webhook", outbox=[{"n": 0}, {"n": 1}])
    settled_at = clock.now

    def second_fails(item: OutboxItem) -> None:
        if item.index == 1:
            raise TimeoutError("down")

    unsent = stored(firestore_client, "batches/two")
    clock.advance(120)
    ledger.outbox.sweep(second_fails)  # item 0 delivered, item 1 fails once
    half = stored(firestore_client, "batches/two")
    clock.advance(3600)
    ledger.outbox.sweep(second_fails)  # item 1 fails again: given up (give_up_after=2)
    done = stored(firestore_client, "batches/two")

    assert stored(firestore_client, "batches/none")["expire_at"] == settled_at + retention
    assert unsent.get("expire_at") is None and unsent["outbox_due_at"] == settled_at
    assert half.get("expire_at") is None and half["outbox"][0]["delivered_at"] is not None
    assert half["outbox_due_at"] == half["outbox"][1]["next_attempt_at"]
    assert done["outbox"][1]["given_up_at"] == clock.now
    assert done["expire_at"] == clock.now + retention
    assert done["writeback_done"] is True and "outbox_due_at" not in done


def test_expire_at_is_set_when_the_last_item_is_delivered(firestore_client):
    clock = FakeClock()
    ledger = Ledger(firestore_client, clock=clock)
    ledger.operations.register("batches/one", "k")
    ledger.settle("batches/one", "succeeded", "webhook", outbox=[{"n": 0}])
    before = stored(firestore_client, "batches/one")
    clock.advance(300)

    ledger.outbox.deliver("batches/one", lambda item: None)

    after = stored(firestore_client, "batches/one")
    assert before.get("expire_at") is None
    assert after["expire_at"] == clock.now + timedelta(days=14)


def test_the_lease_must_hold_three_calls():
    with pytest.raises(ValueError, match="at least 3 calls"):
        OutboxPolicy(lease=timedelta(seconds=89), call_timeout=timedelta(seconds=30))
    assert OutboxPolicy().lease >= 3 * OutboxPolicy().call_timeout
