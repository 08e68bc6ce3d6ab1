"""The capacity model with shared batches (bench/_capacity.py; docs/architecture.md
"Shared batches"): batches per push from the review's settings, what a batch's share costs
a push, the writes on each lane of a group, and what the window and shards trade at 100
pushes/s.

Run on the fixed inputs of tests/unit/test_capacity_model.py (a `bench.cost --events 3`
run, one batch per push, pushes of 2 files); nothing is measured or timed.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from bench._capacity import (
    Deployment,
    batches_per_push,
    model,
    per_push,
    review_sharing,
)
from bench._limits import ASSUMED
from tests.unit.test_capacity_model import deployment, measured, row

ASSUME = {key: item.value for key, item in ASSUMED.items()}
SHARED = {"group_requests": 1000, "group_window_s": 60.0, "group_shards": 16}


def shared(**changes: object) -> Deployment:
    return deployment(**(SHARED | changes))


def utilizations(result: dict, rate: float) -> dict[str, float]:
    return {x["limit"]: x["utilization"] for x in row(result, rate)["limits"]}


def binds(result: dict) -> dict[str, float | None]:
    return {limit["key"]: limit["binds_at_pushes_per_s"] for limit in result["limits"]}


@pytest.mark.parametrize(
    ("name", "rate", "expected"),
    [
        ("a rare push waits its window alone: one batch", 0.01, 1.0),
        ("one group open at a slow rate: a batch a minute for 12 pushes", 0.2, 1 / 60 / 0.2),
        # A group takes up to 16 lanes of 0.5 joins/s: one more opens per 8 pushes/s.
        ("groups open with the load: 2 a minute shared by 600 pushes", 10, 2 / 60 / 10),
        ("the window still binds at 100 pushes/s (200 requests/s)", 100, 13 / 60 / 100),
        ("groups fill first: 1,000 requests of 2 per push", 1000, 2 / 1000),
    ],
)
def test_batches_per_push_seal_when_full_or_at_the_window(
    name: str, rate: float, expected: float
) -> None:
    assert batches_per_push(rate, shared(), 2) == pytest.approx(expected), name


def test_without_sharing_every_push_is_one_batch() -> None:
    assert batches_per_push(100, deployment(), 2) == 1.0
    result = model(measured(), deployment())
    assert result["per_push"]["batches"] == 1
    # 10 pushes/s x 300 s a batch against 100 in flight, as before sharing.
    assert utilizations(result, 10)["gemini_batches"] == pytest.approx(30)
    assert result["sharing"]["at_100_pushes_per_s"] == []


def test_shared_batches_keep_gemini_under_its_quota_at_10_and_100_pushes() -> None:
    result = model(measured(), shared())
    # Groups open with the load (one per 8 pushes a second, up to 16), each sealed once a
    # minute and 300 s in flight: 10 batches of 100 at 10 pushes/s, 65 at 100.
    assert utilizations(result, 10)["gemini_batches"] == pytest.approx(0.1)
    assert utilizations(result, 100)["gemini_batches"] == pytest.approx(0.65)
    # Past 133 pushes/s groups fill before their window: 0.6 x rate in flight.
    assert binds(result)["gemini_batches"] == pytest.approx(100 / 0.6, abs=0.01)


def test_a_join_writes_one_lane_of_its_group_at_half_a_write_a_second() -> None:
    result = model(measured(), shared())
    # 100 pushes/s: 13 groups open, each with 16 lanes (100 / 13 / 0.5 rounded up, at most
    # 16), so each lane document takes 100 / 208 writes a second.
    assert utilizations(result, 100)["firestore_group_document"] == pytest.approx(100 / 208, 1e-3)
    # It binds once 16 groups' 16 lanes each take 1 write a second.
    assert binds(result)["firestore_group_document"] == pytest.approx(16 * 16)
    fewer = model(measured(), shared(group_shards=4))
    assert binds(fewer)["firestore_group_document"] == pytest.approx(4 * 16)
    assert utilizations(fewer, 100)["firestore_group_document"] == pytest.approx(100 / 64, 1e-3)
    off = model(measured(), deployment())
    assert binds(off)["firestore_group_document"] is None


def test_no_lane_holds_fewer_than_eight_pushes() -> None:
    from bench._capacity import group_lanes

    # Groups of 40 requests of 2 per push hold 20 pushes: 2 lanes, however busy.
    assert group_lanes(100, shared(group_requests=40), 2) == 2
    assert group_lanes(100, shared(group_requests=10), 2) == 1


def test_a_push_pays_its_share_of_a_batch_and_its_own_settling_commit() -> None:
    m, rate = measured(), 10.0
    off = per_push(m, deployment(), ASSUME, rate)
    on = per_push(m, shared(), ASSUME, rate)
    b = 2 / 60 / rate  # 2 groups open at 10 pushes/s, each sealed once a minute
    assert on.batches == pytest.approx(b)
    # The push's task; per batch the opener's deferred re-run and the completion webhook.
    assert on.worker_requests == pytest.approx(1 + 2 * b) and off.worker_requests == 2
    assert on.ingress_requests == pytest.approx(1 + b)
    # Per batch its create and the webhook's 2 fetches; one members read per 50 items.
    members_reads = b * math.ceil(1 / (b * 50))
    assert on.gemini_calls == pytest.approx(3 * b + members_reads)
    # Each push settles in its own commit: its writes are the measured ones plus the join's.
    assert on.writes == off.writes + 2
    assert on.writes_by_collection["batch_groups"] == 1
    assert on.worker_cpu_s == off.worker_cpu_s  # the measured CPU of a push, either way


def test_reconcile_listing_no_longer_grows_with_pushes() -> None:
    result = model(measured(), shared())
    assert binds(result)["reconcile_listing"] is None
    low, high = utilizations(result, 10), utilizations(result, 1000)
    assert low["reconcile_listing"] == high["reconcile_listing"] < 0.01


def test_the_window_and_shards_trade_batches_lanes_and_latency_at_100_pushes() -> None:
    table = model(measured(), shared())["sharing"]["at_100_pushes_per_s"]
    cells = {(r["window_s"], r["shards"]): r for r in table}
    assert set(cells) == {(w, s) for w in (60.0, 300.0, 600.0) for s in (4, 16)}
    # 16 shards: 13 groups open, 16 lanes each, a lane at 0.48 writes/s; sealed by a 60 s
    # window 13 a minute are 65 in flight, by filling (200 requests/s) 60.
    assert cells[(60.0, 16)]["group_lanes"] == 16
    assert cells[(60.0, 16)]["group_document_writes_per_s"] == pytest.approx(0.48)
    assert cells[(60.0, 16)]["batches_in_flight"] == pytest.approx(13 / 60 * 300, abs=0.1)
    assert cells[(600.0, 16)]["batches_in_flight"] == pytest.approx(60)
    # 13 groups fill 1,000 requests in 1,000 x 13 / 200 = 65 s: a longer window changes
    # nothing past that.
    assert cells[(300.0, 16)]["added_wait_s"] == cells[(600.0, 16)]["added_wait_s"] == 65
    # 4 shards: groups fill in 20 s, but each lane takes 1.56 writes a second.
    assert cells[(60.0, 4)]["added_wait_s"] == 20
    assert cells[(60.0, 4)]["group_document_writes_per_s"] == pytest.approx(1.56)


def test_the_deployed_settings_are_the_apps_defaults_unless_terraform_sets_them() -> None:
    dep = Deployment.from_terraform()
    assert (dep.group_requests, dep.group_window_s, dep.group_shards) == (1000, 60.0, 16)
    overridden = review_sharing({"REVIEW_GROUP_SHARDS": "100", "REVIEW_PATH": "docs"})
    assert overridden == {
        "REVIEW_GROUP_REQUESTS": 1000,
        "REVIEW_GROUP_WINDOW_S": 60.0,
        "REVIEW_GROUP_SHARDS": "100",
    }
    stated = model(measured(), replace(dep, group_requests=0))["sharing"]["settings"]
    assert stated["REVIEW_GROUP_REQUESTS"] == 0
