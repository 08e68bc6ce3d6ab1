"""The simulator's GitHub GraphQL endpoint (local/simulator/graphql.py) and its secondary
per-endpoint limit (local/simulator/ratelimits.py), through the real `ContentsClient` and
raw HTTP: the shapes GitHub documents, and what the request log counts."""

from __future__ import annotations

from typing import Any

import pytest
import requests

from shared.github import ContentsClient
from shared.github.blobs import blob_query, blob_variables

SHA = "0123456789abcdef0123456789abcdef01234567"


def contents(simulator: Any) -> ContentsClient:
    return ContentsClient(simulator.url, timeout_s=5, attempts=2, sleep=lambda s: None)


def graphql(simulator: Any, paths: list[str], ref: str = SHA, **headers: str) -> requests.Response:
    body = {"query": blob_query(len(paths)), "variables": blob_variables("o", "r", ref, paths)}
    return requests.post(f"{simulator.url}/graphql", json=body, headers=headers, timeout=10)


def test_one_query_reads_every_stored_file_and_the_log_counts_one_request(simulator: Any) -> None:
    paths = [f"docs/{i}.md" for i in range(20)]
    for path in paths:
        simulator.control.put_file("o", "r", path, SHA, f"# {path}\n".encode())
    fetched = contents(simulator).fetch_many("o/r", paths, SHA)
    assert fetched.texts == {p: f"# {p}\n" for p in paths} and not fetched.refused
    reads = simulator.control.github_reads("o/r")
    assert [(r["method"], r["path"]) for r in reads] == [("POST", "/graphql")]


def test_missing_folder_binary_and_large_files_answer_githubs_shapes(simulator: Any) -> None:
    put = simulator.control.put_file
    put("o", "r", "a.md", SHA, b"# a\n")
    put("o", "r", "dir/inner.md", SHA, b"x")
    put("o", "r", "bin.md", SHA, b"\x89PNG\0\0")
    big = b"# big\n" + b"y" * 600_000
    put("o", "r", "big.md", SHA, big)
    answer = graphql(simulator, ["a.md", "gone.md", "dir", "bin.md", "big.md"])
    assert answer.status_code == 200 and "errors" not in answer.json()
    found = answer.json()["data"]["repository"]
    assert found["f0"] == {
        "__typename": "Blob",
        "text": "# a\n",
        "isBinary": False,
        "isTruncated": False,
        "byteSize": 4,
    }
    assert found["f1"] is None and found["f2"] == {"__typename": "Tree"}
    assert (found["f3"]["text"], found["f3"]["isBinary"]) == (None, True)
    assert found["f4"]["isTruncated"] and len(found["f4"]["text"]) == 512_000
    assert answer.headers["x-ratelimit-resource"] == "graphql"

    # The client: the cut file read again by the Contents API, the rest refused by name.
    fetched = contents(simulator).fetch_many(
        "o/r", ["a.md", "gone.md", "dir", "bin.md", "big.md"], SHA
    )
    assert fetched.texts == {"a.md": "# a\n", "big.md": big.decode()}
    assert sorted(fetched.refused) == ["bin.md", "dir", "gone.md"]
    assert fetched.requests == 2


def test_a_query_outside_hookledgers_shape_is_refused_in_graphql_errors(simulator: Any) -> None:
    for body in ({"query": "{ viewer { login } }"}, {"query": "mutation { x }"}, {}):
        answer = requests.post(f"{simulator.url}/graphql", json=body, timeout=10)
        assert answer.status_code == 200, body
        assert "data" not in answer.json() and answer.json()["errors"][0]["message"], body


def test_a_path_fault_fails_the_query_or_its_alias(simulator: Any) -> None:
    simulator.control.put_file("o", "r", "a.md", SHA, b"a")
    simulator.control.put_file("o", "r", "b.md", SHA, b"b")
    simulator.control.github_fault("b.md", status=502, count=1)
    assert graphql(simulator, ["a.md", "b.md"]).status_code == 502
    simulator.control.github_fault("b.md", status=404, count=1)
    answer = graphql(simulator, ["a.md", "b.md"]).json()
    assert answer["data"]["repository"]["f1"] is None
    assert answer["errors"][0]["type"] == "NOT_FOUND"
    assert answer["errors"][0]["path"] == ["repository", "f1"]


def test_a_spent_primary_limit_is_a_graphql_rate_limited_error(simulator: Any) -> None:
    simulator.control.set_fault_model(github_rate_limit={"remaining": 0, "reset_in_s": 600})
    answer = graphql(simulator, ["a.md"])
    assert answer.status_code == 200 and answer.headers["x-ratelimit-remaining"] == "0"
    assert answer.json()["errors"][0]["type"] == "RATE_LIMITED"
    fetched = contents(simulator).fetch_many("o/r", ["a.md"], SHA)
    failed = fetched.unavailable["a.md"]
    assert failed.retry_after_s is not None and 590 <= failed.retry_after_s <= 602


def test_the_endpoint_limit_refuses_past_its_budget_per_endpoint_then_turns_off(
    simulator: Any,
) -> None:
    simulator.control.put_file("o", "r", "a.md", SHA, b"a")
    url = f"{simulator.url}/repos/o/r/contents/a.md"
    state = simulator.control.set_github_endpoint_limit(
        rest_points_per_minute=3, graphql_points_per_minute=2, status=429
    )
    assert state["enabled"] and state["rest_points_per_minute"] == 3

    gets = [requests.get(url, params={"ref": SHA}, timeout=10) for _ in range(4)]
    assert [g.status_code for g in gets] == [200, 200, 200, 429]
    refused = gets[-1]
    assert 1 <= int(refused.headers["retry-after"]) <= 60
    assert "secondary rate limit" in refused.json()["message"]
    # Another endpoint has its own minute; a GraphQL query costs 1 of its 2 points.
    assert [graphql(simulator, ["a.md"]).status_code for _ in range(3)] == [200, 200, 429]
    # A write costs 5 points: over a 3-point budget at once.
    post = requests.post(
        f"{simulator.url}/repos/o/r/commits/{SHA}/comments", json={"body": "hi"}, timeout=10
    )
    assert post.status_code == 429

    faults = simulator.control.faults()
    assert faults["github_rate_limited"]["endpoint"] == 3
    assert faults["github_endpoint_limit"]["used"] == {
        "GET /repos/<owner>/<repo>/contents/<path:path>": 3,
        "POST /graphql": 2,
    }
    # The client waits what retry-after asks only up to its policy; here: unavailable.
    fetched = contents(simulator).fetch_many("o/r", ["a.md"], SHA)
    assert fetched.unavailable["a.md"].retry_after_s is not None

    simulator.control.set_github_endpoint_limit(enabled=False)
    assert requests.get(url, params={"ref": SHA}, timeout=10).status_code == 200


@pytest.mark.parametrize(
    ("limit", "field"),
    [
        ({"rest_points_per_minute": 0}, "rest_points_per_minute"),
        ({"status": 500}, "status"),
        ({"enabled": "yes"}, "enabled"),
        ({"per_minute": 5}, "unknown keys"),
        ("on", "must be an object"),
    ],
)
def test_a_bad_endpoint_limit_is_a_400_naming_its_field_and_changes_nothing(
    simulator: Any, limit: Any, field: str
) -> None:
    answer = requests.post(
        f"{simulator.url}/_sim/faults", json={"github_endpoint_limit": limit}, timeout=10
    )
    assert answer.status_code == 400 and field in answer.json()["error"]["message"]
    assert simulator.control.faults()["github_endpoint_limit"]["enabled"] is False
