"""A busy group's lanes (shared/ledger/group_lanes.py): its joins write lane documents,
not the group's, and its batch still holds every item once, however they raced its seal.

The review pipeline called directly, the real google-genai client against the simulator,
the ledger on the Firestore emulator.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from shared.ledger.group_lanes import LANES
from shared.ledger.group_records import LANE_STRIDE
from shared.sharing import Sharing
from tests.integration.test_shared_batch_faults import (
    POISON,
    _item,
    _push,
    _reconciler,
    _reviewed,
    _store,
    clock,
)
from tests.integration.test_shared_batches import REPO, deps, settle_all, sha

__all__ = ["clock", "deps"]

BUSY = Sharing(max_requests=1000, window_s=300)


@pytest.fixture
def busy(deps: Any) -> Any:
    return replace(deps, sharing=BUSY)


def _open_busy_group(deps: Any, simulator: Any) -> str:
    """Four pushes join a first group within its first second, which is then sealed: push 5
    opens the next group with eight lanes (half a join a second each); its id."""
    for n in range(1, 5):
        _store(simulator, n, f"# {n}\n")
        _push(deps, n)
    first = _item(deps, 1).group
    deps.ledger.groups.seal(first)
    _store(simulator, 5, "# 5\n")
    _push(deps, 5)
    busy = _item(deps, 5).group
    assert busy != first and deps.ledger.groups.get(busy).lanes == 8
    return busy


def _lane_counts(deps: Any, gid: str) -> dict[int, int]:
    """Each lane document's count: lane 0 from the group's own."""
    counts = {0: deps.ledger.groups.get(gid).count}
    for snapshot in deps.ledger._commits.collection(LANES).stream():
        lane_gid, _, number = snapshot.id.rpartition("~")
        if lane_gid == gid:
            counts[int(number)] = int((snapshot.to_dict() or {})["count"])
    return counts


def test_a_busy_groups_joins_write_its_lanes_and_its_batch_holds_each_item_once(
    busy, simulator, clock
):
    gid = _open_busy_group(busy, simulator)
    for n in range(6, 13):
        _store(simulator, n, f"# {n}\n")
        _push(busy, n)

    counts = _lane_counts(busy, gid)
    assert sum(counts.values()) == 8 and counts[0] < 8  # the group's document took some
    assert len([c for c in counts.values() if c]) >= 3, counts  # joins went round the lanes
    for n in range(5, 13):
        lane, index = divmod(int(_item(busy, n).name.rpartition(".")[2]), LANE_STRIDE)
        assert _item(busy, n).group == gid and index < counts[lane], n

    clock.advance(301)  # past its window: reconcile seals it and makes its batch
    _reconciler(busy, clock).run()
    group = busy.ledger.groups.get(gid)
    assert list(group.lane_counts) == [counts.get(lane, 0) for lane in range(8)]
    assert group.count == 8 and [p.operation is not None for p in group.parts] == [True]
    [batch] = [b for b in simulator.control.batches() if b["name"] == group.operation]
    assert len(batch["requests"]) == 8
    settle_all(busy, simulator)
    for n in range(1, 13):
        assert _item(busy, n).status == "succeeded", n
        assert [r["status"] for r in _reviewed(busy, n)] == ["ok"], n


def test_a_join_that_raced_the_seal_on_its_lane_joins_the_next_group(
    busy, simulator, clock, monkeypatch
):
    """The seal writes every lane in its commit: a join that read its lane before the seal
    fails its condition and joins the next group; the sealed group never counts it."""
    gid = _open_busy_group(busy, simulator)
    groups = busy.ledger.groups
    real = groups._commit_join
    raced: list[int] = []

    def seal_then_commit(request: Any, place: Any, *args: Any) -> Any:
        if place.lane.number and not raced:
            groups.seal(place.group.gid)  # between this join's read and its commit
            raced.append(place.lane.number)
        return real(request, place, *args)

    monkeypatch.setattr(groups, "_commit_join", seal_then_commit)
    n = 5
    while not raced and n < 13:  # eight lanes: a join takes one past the first by then
        n += 1
        _store(simulator, n, f"# {n}\n")
        _push(busy, n)

    assert raced, "no join took a lane past the first"
    sealed = busy.ledger.groups.get(gid)
    assert sealed.status == "sealed" and sum(sealed.lane_counts) == n - 5
    assert _item(busy, n).group not in (None, gid)
    tags = {m.tag for m in busy.ledger.groups.members(sealed)}
    assert tags == {f"hookledger:review:{REPO}@{sha(k)}" for k in range(5, n)}


def test_a_refusal_naming_no_request_in_a_busy_group_is_narrowed_down_across_lanes(
    busy, simulator, clock
):
    simulator.control.poison(POISON, name_index=False)
    gid = _open_busy_group(busy, simulator)
    for n in range(6, 10):
        _store(simulator, n, f"# {n}\n{POISON if n == 7 else 'fine'}\n")
        _push(busy, n)

    clock.advance(301)
    _reconciler(busy, clock).run()
    group = busy.ledger.groups.get(gid)
    made = [b for b in simulator.control.batches() if b["display_name"].count(gid)]
    assert sum(len(b["requests"]) for b in made) == 4  # every item of the five but push 7
    assert len(group.parts) > 1 and group.settled_parts
    assert _item(busy, 7).status == "failed"
    settle_all(busy, simulator)
    assert [_item(busy, n).status for n in (5, 6, 8, 9)] == ["succeeded"] * 4


def test_a_joining_items_delivery_ends_done_in_its_join_read_with_its_place(
    busy, clock, monkeypatch
):
    """A join that neither opens nor fills its group carries the delivery's `done`, its
    condition read in the join's one read call; a mark the delivery refuses (another
    attempt holds it) is left to the worker."""
    from datetime import timedelta

    from shared.ledger import DeliveryEnd
    from shared.ledger.groups import JoinRequest

    ledger = busy.ledger
    lease = timedelta(minutes=10)
    reads: list[int] = []
    read_many = ledger.groups._read_many

    def counted(refs: Any, subject: str) -> Any:
        reads.append(len(refs))
        return read_many(refs, subject)

    monkeypatch.setattr(ledger.groups, "_read_many", counted)

    def join(n: int, end: DeliveryEnd) -> Any:
        tag = f"lane-end-{n}"
        until = clock() + lease
        ledger.submissions.claim(
            tag, delivery_id=f"d-{n}", attempt=tag, lease_until=until, now=clock()
        )
        pages = ledger.groups.request_pages(tag, tag, [(f"{n}.md", "review")])
        return ledger.groups.join(
            JoinRequest(
                tag=tag,
                attempt=tag,
                kind="review",
                model="m",
                generation_config=None,
                sharing=BUSY,
                pages=pages.ids,
                page_documents=pages.documents,
                requests=1,
                bytes=pages.bytes,
                context={"repo": "o/r"},
                end=end,
            )
        )

    for n in (1, 2, 3):
        ledger.deliveries.record("github", f"d-{n}", "push", attempt=f"a{n}", lease_for=lease)
    opener, held, foreign = (
        DeliveryEnd("github", "d-1", "a1"),
        DeliveryEnd("github", "d-2", "a2"),
        DeliveryEnd("github", "d-3", "someone-else"),
    )
    assert join(1, opener).opened and not opener.applied  # it must still see its group sealed
    reads.clear()
    assert not join(2, held).opened
    assert held.applied and ledger.deliveries.get("github", "d-2").status == "done"
    assert reads == [3]  # its submission, its group (lane 0) and its delivery, in one call
    join(3, foreign)
    assert not foreign.applied and ledger.deliveries.get("github", "d-3").status == "queued"
