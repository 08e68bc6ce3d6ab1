"""The simulator's GitHub secondary per-endpoint limit (local/simulator/ratelimits.py) and
its GraphQL query reading (local/simulator/graphql.py), on an injected clock: the minute
passes when the test says so, never by waiting."""

from __future__ import annotations

import pytest

from local.fakes import FakeClock
from local.simulator.graphql import Unsupported, blob_json, parse, points
from local.simulator.ratelimits import RateLimits, Spend, rest_points
from local.simulator.state import BadRequest
from shared.github.blobs import blob_query, blob_variables

CONTENTS = "GET /repos/<owner>/<repo>/contents/<path:path>"


def limits(**budget: int) -> tuple[RateLimits, FakeClock]:
    clock = FakeClock()
    found = RateLimits(clock)
    found.set_endpoint(budget)
    return found, clock


def test_off_by_default_nothing_is_refused_or_counted() -> None:
    found = RateLimits(FakeClock())
    assert all(found.take("user", Spend(CONTENTS)).status is None for _ in range(1000))
    assert found.report()["github_endpoint_limit"]["used"] == {}


def test_the_budget_refuses_past_it_until_the_oldest_points_age_out() -> None:
    found, clock = limits(rest_points_per_minute=3)
    for _ in range(3):
        assert found.take("user", Spend(CONTENTS)).status is None
        clock.advance(10)  # requests at t = 0, 10, 20
    refused = found.take("user", Spend(CONTENTS))  # t = 30
    assert refused.status == 403 and refused.headers["retry-after"] == "30"  # t=0 leaves at 60
    assert refused.headers["x-ratelimit-resource"] == "core"
    clock.advance(30)
    assert found.take("user", Spend(CONTENTS)).status is None
    report = found.report()
    assert report["github_endpoint_limit"]["used"] == {CONTENTS: 3}
    assert report["github_rate_limited"]["endpoint"] == 1


def test_each_endpoint_and_graphql_have_their_own_budget_and_writes_cost_five() -> None:
    found, _ = limits(rest_points_per_minute=5, graphql_points_per_minute=1)
    comment = Spend("POST /repos/<owner>/<repo>/commits/<sha>/comments", rest_points("POST"))
    assert comment.points == 5 and found.take("user", comment).status is None
    assert found.take("user", comment).status == 403  # 10 > 5
    assert found.take("user", Spend(CONTENTS)).status is None  # another endpoint
    query = Spend("POST /graphql", points("query { x }"), graphql=True)
    assert found.take("user", query).status is None
    again = found.take("user", query)
    assert again.status == 403 and again.headers["x-ratelimit-resource"] == "graphql"
    assert points("mutation { addStar }") == 5


def test_the_apps_own_calls_are_limited_and_counted_too() -> None:
    found, _ = limits(rest_points_per_minute=1, status=429)
    deliveries = Spend("GET /app/hook/deliveries")
    assert found.secondary(deliveries) is None
    refused = found.secondary(deliveries)
    assert refused is not None and refused.status == 429 and "retry-after" in refused.headers


@pytest.mark.parametrize(
    "value",
    [{"rest_points_per_minute": 0}, {"status": 404}, {"enabled": 1}, {"x": 1}, [900]],
)
def test_a_bad_setting_is_refused_and_changes_nothing(value: object) -> None:
    found, _ = limits(rest_points_per_minute=7)
    with pytest.raises(BadRequest):
        found.set_endpoint(value)
    assert found.report()["github_endpoint_limit"]["rest_points_per_minute"] == 7


def test_hookledgers_query_is_read_and_any_other_refused() -> None:
    body = {"query": blob_query(2), "variables": blob_variables("o", "r", "abc", ["a", "b/c"])}
    query = parse(body)
    assert (query.owner, query.name) == ("o", "r")
    assert query.expressions == {"f0": "abc:a", "f1": "abc:b/c"}
    for bad in (
        {"query": "{ viewer { login } }"},
        {"query": "mutation { x }"},
        {"query": blob_query(1), "variables": {"owner": "o", "name": "r"}},  # $f0 missing
        {"query": 7},
    ):
        with pytest.raises(Unsupported):
            parse(bad)


def test_a_blob_is_cut_at_512000_bytes_and_binary_has_no_text() -> None:
    big = blob_json(b"x" * 600_000)
    assert big["isTruncated"] and len(big["text"]) == 512_000 and big["byteSize"] == 600_000
    binary = blob_json(b"GIF89a\0\0")
    assert (binary["text"], binary["isBinary"], binary["isTruncated"]) == (None, True, False)
