"""The capacity model (bench/_capacity.py): what it computes from what.

The model is a pure function of measured figures, documented limits and Terraform's
settings, so these run it on fixed inputs: tests/fixtures/bench/cost-3-events.json is a
`python -m bench.cost --events 3` run, the deployment is written out here. No bench is run
and nothing is timed.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from bench._capacity import (
    Deployment,
    Measured,
    Sizing,
    cron_every_s,
    memory_gib,
    model,
    queue_fits_worker,
)
from bench._limits import ASSUMED

REPO = Path(__file__).resolve().parents[2]
COST_FIXTURE = REPO / "tests" / "fixtures" / "bench" / "cost-3-events.json"


def measured(**changes: object) -> Measured:
    cost = json.loads(COST_FIXTURE.read_text())
    base = Measured.from_benches(cost, ingress_cpu_s=0.003, worker_cpu_s=0.02)
    return replace(base, **changes)  # type: ignore[arg-type]


def deployment(**changes: object) -> Deployment:
    base = Deployment(
        queue_rate=50,
        queue_concurrent=100,
        ingress=Sizing(concurrency=8, cpu=1, max_instances=20, memory_gib=1),
        worker=Sizing(concurrency=8, cpu=1, max_instances=20, memory_gib=1),
        worker_request_s=2,
        github_comments=False,
        reconcile_every_s=300,
        reconcile_budget_s=240,
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def row(result: dict, rate: float, burst: bool = False) -> dict:
    [found] = [
        r
        for r in result["tiers"]
        if r["pushes_per_s"] == rate and (r["burst_s"] is not None) == burst
    ]
    return found


def test_the_cost_json_is_read_per_event() -> None:
    m = measured()
    assert m.push.writes == 5 and m.push.commits == 4 and m.push.github == 2
    assert m.settle.gemini == 2 and m.settle.writes_by_collection["reviews"] == 2
    assert m.push.create_task == m.settle.create_task == 1
    per_push = model(m, deployment())["per_push"]
    assert per_push["writes"] == 11 and per_push["reads"] == 6
    assert per_push["worker_requests"] == 2  # the push, then its completion webhook


def test_the_recorded_inputs_round_trip() -> None:
    m = measured(sources={"operations": "fixture"})
    assert Measured.from_json(json.loads(json.dumps(m.to_json()))) == m


def test_fewer_commits_make_worker_requests_shorter() -> None:
    before = model(measured(), deployment())["per_push"]["worker_request_s"]
    fewer = measured(push=replace(measured().push, commits=2))
    after = model(fewer, deployment())["per_push"]["worker_request_s"]
    # Two commits fewer in one of the push's two worker requests: half of 2 x commit latency.
    assert after == pytest.approx(before - ASSUMED["firestore_commit_s"].value, abs=1e-3)


def test_the_binding_limit_is_the_one_with_the_largest_demand_over_limit() -> None:
    result = model(measured(), deployment())
    for r in result["tiers"]:
        utilizations = [limit["utilization"] for limit in r["limits"]]
        assert r["binds_first"]["utilization"] == max(utilizations)
        settings = [limit for limit in r["limits"] if limit["kind"] == "setting"]
        assert r["first_of_our_settings"] == max(settings, key=lambda s: s["utilization"])


def test_each_tier_has_a_sustained_row_and_a_ten_times_burst_for_a_minute() -> None:
    result = model(measured(), deployment())
    for rate in (10, 100, 1000):
        assert row(result, rate)["burst_s"] is None
        burst = row(result, rate * 10, burst=True)
        assert burst["burst_s"] == 60


def test_the_queue_backlog_grows_by_demand_over_capacity() -> None:
    result = model(measured(), deployment(queue_rate=50))
    sustained = row(result, 100)["queue"]
    assert sustained["dispatches_per_s"] == 200 and sustained["capacity_per_s"] == 50
    assert sustained["backlog_tasks"]["grows_per_s"] == 150
    burst = row(result, 100, burst=True)["queue"]["backlog_tasks"]  # 10 -> 100 for 60 s
    assert burst["after_burst"] == (200 - 50) * 60
    assert burst["drain_s"] == (200 - 50) * 60 / (50 - 20)  # spare = capacity - 10 x 2
    assert row(result, 10)["queue"]["backlog_tasks"]["grows_per_s"] == 0


def test_a_queue_faster_than_the_worker_holds_is_capped_by_the_worker() -> None:
    small = deployment(queue_rate=500, worker=Sizing(8, 1, 2, 1))
    result = model(measured(), small)
    request_s = result["per_push"]["worker_request_s"]
    assert row(result, 100)["queue"]["capacity_per_s"] == pytest.approx(16 / request_s, abs=0.1)
    assert not result["queue_fits_worker"]


def test_instances_cover_requests_in_flight_and_cpu() -> None:
    result = model(measured(), deployment())
    request_s = result["per_push"]["worker_request_s"]
    worker = row(result, 100)["instances"]["worker"]
    assert worker == -(-200 * request_s // 8)  # ceil(in flight / concurrency)
    cpu_bound = model(measured(worker_cpu_s=1.0), deployment())
    assert row(cpu_bound, 100)["instances"]["worker"] == 200  # 200 CPU-seconds per second


def test_firestore_cost_per_hour_is_linear_in_pushes() -> None:
    result = model(measured(), deployment())
    low, high = row(result, 10), row(result, 100)
    firestore_10 = low["cost_per_hour_usd"]["firestore"]
    firestore_100 = high["cost_per_hour_usd"]["firestore"]
    per_push = (6 * 0.03 + 11 * 0.09 + 4 * 0.01) / 100_000
    assert firestore_100 - firestore_10 == pytest.approx(90 * 3600 * per_push, abs=0.02)


def test_github_comments_add_the_content_creation_limit() -> None:
    without = row(model(measured(), deployment()), 10)["limits"]
    with_comments = row(model(measured(), deployment(github_comments=True)), 10)["limits"]
    hour = {limit["limit"]: limit["utilization"] for limit in with_comments}
    assert hour["github_content_hour"] == pytest.approx(10 * 3600 / 500)
    assert {limit["limit"]: limit["utilization"] for limit in without}["github_content_hour"] == 0


@pytest.mark.parametrize("rate", [10, 100, 1000])
def test_the_github_sweep_spends_the_apps_jwt_budget_in_proportion_to_failures(
    rate: int,
) -> None:
    limits = {
        x["limit"]: x["utilization"] for x in row(model(measured(), deployment()), rate)["limits"]
    }
    # Each run (every 300 s) covers 360 s of deliveries: more than its 10 full pages hold
    # from 10 pushes/s, so 10 pages, then the failed 1% 100 a page; each failure costs 2
    # calls. Per hour, against 5,000 App-JWT requests.
    pages = 10 + max(1, rate * 360 * 0.01 / 100)
    per_hour = 12 * pages + rate * 3600 * 0.01 * 2
    assert limits["github_app_jwt"] == pytest.approx(per_hour / 5000, abs=0.005)


def test_below_its_full_pages_the_github_sweep_lists_every_delivery() -> None:
    from bench._capacity import github_sweep_calls_per_hour
    from bench._limits import ASSUMED

    assumed = {key: item.value for key, item in ASSUMED.items()}
    # 1 push/s: 360 deliveries a run, 3.6 pages of every delivery, 12 runs an hour, and
    # 2 calls for each of the 36 failed an hour.
    calls = github_sweep_calls_per_hour(1, deployment(), assumed)
    assert calls == pytest.approx(12 * 3.6 + 3600 * 0.01 * 2)


def test_assumptions_can_be_overridden() -> None:
    slow = model(measured(), deployment(), assume={"gemini_batch_life_s": 3600})
    fast = model(measured(), deployment(), assume={"gemini_batch_life_s": 1})
    util = {
        name: {x["limit"]: x["utilization"] for x in row(r, 10)["limits"]}["gemini_batches"]
        for name, r in (("slow", slow), ("fast", fast))
    }
    assert util["slow"] == 10 * 3600 / 100 and util["fast"] == 10 / 100


@pytest.mark.parametrize(
    ("rate", "request_s", "instances", "concurrency", "fits"),
    [(50, 2, 20, 8, True), (80, 2, 20, 8, True), (81, 2, 20, 8, False), (20, 2, 10, 8, True)],
)
def test_queue_fits_worker(
    rate: float, request_s: float, instances: int, concurrency: int, fits: bool
) -> None:
    assert queue_fits_worker(rate, request_s, instances, concurrency) is fits


def test_terraform_units() -> None:
    assert memory_gib("1Gi") == 1 and memory_gib("512Mi") == 0.5
    assert cron_every_s("*/5 * * * *") == 300 and cron_every_s("0 * * * *") == 3600


def binds(result: dict) -> dict[str, float | None]:
    return {limit["key"]: limit["binds_at_pushes_per_s"] for limit in result["limits"]}


def test_contents_reads_per_file_met_the_rest_endpoint_limit_at_seven_and_a_half_pushes() -> None:
    """The recorded fixture predates GraphQL: 2 Contents reads per push of 2 files, against
    900 points a minute to one REST endpoint (issue 36)."""
    result = model(measured(), deployment())
    assert result["per_push"]["github_rest"] == 2 and result["per_push"]["github_graphql"] == 0
    assert binds(result)["github_endpoint"] == 7.5
    assert binds(result)["github_graphql_endpoint"] is None


def test_one_graphql_query_per_push_moves_githubs_limit_to_the_graphql_endpoint() -> None:
    """Today's push of 2 files: 1 GraphQL query (bench/cost.py's `github_graphql_calls`),
    1 point of the GraphQL endpoint's 2,000 a minute and of its 5,000-point hour."""
    graphql = replace(measured().push, github=1, github_graphql=1)
    result = model(measured(push=graphql), deployment())
    per_push = result["per_push"]
    assert (per_push["github_reads"], per_push["github_rest"], per_push["github_graphql"]) == (
        1,
        0,
        1,
    )
    at = binds(result)
    assert at["github_endpoint"] is None  # no REST read left per push
    assert at["github_graphql_endpoint"] == pytest.approx(2000 / 60, abs=0.01)
    assert at["github_graphql_primary"] == pytest.approx(5000 / 3600, abs=0.01)
    assert at["github_primary"] is None
    limits = {x["limit"]: x["utilization"] for x in row(result, 10)["limits"]}
    assert limits["github_graphql_endpoint"] == pytest.approx(10 * 60 / 2000)


def test_the_graphql_count_is_read_from_the_cost_json() -> None:
    cost = json.loads(COST_FIXTURE.read_text())
    cost["accepted_push"] = {**cost["accepted_push"], "github_calls": 1, "github_graphql_calls": 1}
    m = Measured.from_benches(cost, ingress_cpu_s=0.003, worker_cpu_s=0.02)
    assert (m.push.github, m.push.github_graphql) == (1, 1)
    assert Measured.from_json(json.loads(json.dumps(m.to_json()))) == m
