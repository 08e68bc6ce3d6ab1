"""A group's lanes without a store (shared/ledger/group_lanes.py, group_records.py): how
many a group opens with, what a lane takes, and the indices of a group sealed with lanes."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from shared.kinds import Sharing
from shared.ledger.group_lanes import (
    MAX_LANES,
    Lane,
    join_lock,
    lane_of,
    lanes_for,
    pick_lane,
    saw_group,
)
from shared.ledger.group_records import LANE_STRIDE, OPEN, SEALED, Group, Part

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def group(count: int = 0, lanes: int = 1, lane_counts: tuple[int, ...] = ()) -> Group:
    return Group(
        gid="review-g",
        kind="review",
        model="m",
        generation_config=None,
        status=SEALED if lane_counts else OPEN,
        opened_at=T0,
        seal_at=T0 + timedelta(seconds=60),
        count=count,
        requests=count,
        bytes=count,
        lanes=lanes,
        lane_counts=lane_counts,
    )


def test_a_first_group_and_a_quiet_heads_next_have_one_lane() -> None:
    assert lanes_for(None, T0, room=1000) == 1
    assert lanes_for(group(count=30), T0 + timedelta(seconds=60), room=1000) == 1
    assert lanes_for(group(count=31), T0 + timedelta(seconds=60), room=1000) == 2


def test_a_busy_heads_next_group_has_a_lane_per_half_a_join_a_second_up_to_the_most() -> None:
    sealed = group(count=30, lanes=2, lane_counts=(12, 18))
    assert lanes_for(sealed, T0 + timedelta(seconds=10), room=1000) == 6
    assert lanes_for(group(count=20, lanes=2), T0 + timedelta(seconds=10), room=1000) == 8
    assert lanes_for(sealed, T0, room=10_000) == MAX_LANES


def test_no_lane_is_smaller_than_eight_items_like_the_opener() -> None:
    assert lanes_for(group(count=600), T0 + timedelta(seconds=10), room=40) == 5
    assert lanes_for(group(count=600), T0 + timedelta(seconds=10), room=7) == 1


def test_a_lane_takes_items_within_its_share_of_the_groups_limits() -> None:
    sharing = Sharing(max_requests=100, window_s=60, max_bytes=1000)
    assert Lane(1, None).takes(500, 10**6, sharing, lanes=4)  # empty: an item of its own
    assert Lane(1, None, count=1, requests=20, bytes=10).takes(5, 10, sharing, lanes=4)
    assert not Lane(1, None, count=1, requests=20, bytes=10).takes(6, 10, sharing, lanes=4)
    assert not Lane(1, None, count=1, requests=1, bytes=200).takes(1, 60, sharing, lanes=4)
    assert not Lane(1, None, sealed=True).takes(1, 1, sharing, lanes=4)
    assert Lane(2, None, count=3).index() == 2 * LANE_STRIDE + 3


def test_a_process_takes_a_heads_lanes_in_turn() -> None:
    assert pick_lane("review~unseen~0") == 0
    saw_group("review~h~0", "g1", 3)
    lanes = [lane_of(pick_lane("review~h~0"), 3) for _ in range(6)]
    assert sorted(lanes) == [0, 0, 1, 1, 2, 2] and lanes[:3] == lanes[3:]
    saw_group("review~h~0", "g2", 1)
    assert {lane_of(pick_lane("review~h~0"), 1) for _ in range(4)} == {0}


def test_a_processs_joins_to_one_lane_take_one_lock() -> None:
    """Joins of one process to a one-lane group queue on one lock, not race its commits."""
    saw_group("review~one~0", "g", 1)
    locks = {id(join_lock("review~one~0", pick_lane("review~one~0"))) for _ in range(5)}
    assert len(locks) == 1
    saw_group("review~one~0", "g4", 4)
    picks = [pick_lane("review~one~0") for _ in range(8)]
    assert set(picks) == {0, 1, 2, 3}
    assert len({id(join_lock("review~one~0", p)) for p in picks}) <= 4


def test_a_group_sealed_with_lanes_has_its_items_lane_by_lane() -> None:
    sealed = group(count=5, lanes=3, lane_counts=(2, 0, 3))
    s = LANE_STRIDE
    assert sealed.indices == [0, 1, 2 * s, 2 * s + 1, 2 * s + 2]
    assert sealed.end == 2 * s + 3
    [whole] = sealed.parts
    assert sealed.whole(whole) and sealed.part_tag(whole) == sealed.tag
    assert sealed.items_of(Part(1, 2 * s + 1)) == [1, 2 * s]
    refused = replace(sealed, refused={2 * s + 1: "bad"}, fail_cursor=2)
    assert refused.live(whole) == [0, 1, 2 * s, 2 * s + 2]
    assert refused.unfailed_from == 2 * s + 1


def test_a_group_of_one_lane_keeps_its_indices_from_zero() -> None:
    quiet = group(count=3)
    assert quiet.indices == [0, 1, 2] and quiet.end == 3
    assert quiet.parts == (Part(0, 3),)
