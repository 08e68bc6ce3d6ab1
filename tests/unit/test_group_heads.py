"""Which group head a join tries (shared/ledger/group_lanes.py `head_of`): shard 0 first, so
at a low rate one group a window takes every item; each contended try picks among twice
as many shards, up to `Sharing.shards`; each fair key has heads of its own."""

from __future__ import annotations

import random

from shared.kinds import Sharing
from shared.ledger.group_lanes import head_of
from shared.ledger.groups import JoinRequest


def request(fair_key: str = "", shards: int = 16) -> JoinRequest:
    return JoinRequest(
        tag="hookledger:review:o/r@1",
        attempt="a",
        kind="review",
        model="models/gemini-2.5-flash",
        generation_config=None,
        sharing=Sharing(max_requests=1000, window_s=60, shards=shards),
        pages=("p",),
        requests=2,
        bytes=10,
        context={},
        fair_key=fair_key,
    )


def _head_id(r: JoinRequest, tried: int) -> str:
    return head_of(r.kind, r.model, r.generation_config, r.fair_key, r.sharing.shards, tried)


def shard(head: str) -> int:
    return int(head.rpartition("~")[2])


def test_a_first_try_always_joins_shard_zero() -> None:
    random.seed(7)
    assert {shard(_head_id(request(), 0)) for _ in range(200)} == {0}


def test_each_contended_try_doubles_the_shards_it_picks_among_up_to_the_setting() -> None:
    random.seed(7)
    for tried, width in ((1, 2), (2, 4), (3, 8), (4, 16), (9, 16)):
        seen = {shard(_head_id(request(), tried)) for _ in range(400)}
        assert seen == set(range(width)), tried
    assert {shard(_head_id(request(shards=3), 9)) for _ in range(200)} == {0, 1, 2}


def test_each_fair_key_has_heads_of_its_own() -> None:
    one, other = _head_id(request("installation:1"), 0), _head_id(request("installation:2"), 0)
    assert one != other
    assert _head_id(request("installation:1"), 0) == one
