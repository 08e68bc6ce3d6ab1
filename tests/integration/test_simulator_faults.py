"""The simulator's fault model (`/_sim/faults`), driven through the real google-genai client.

Every rate is seeded, so a run draws the same outcomes every time; counts are checked
both against a wide band around the rate and exactly against what the simulator reports
it injected (`injected`), which is what the client must have seen.
"""

from __future__ import annotations

import importlib
import json
from collections import Counter
from typing import Any

import pytest
import requests
from google.genai import errors, types

from tests.integration.test_simulator import create_batch, raw_get
from tests.waiting import wait_until

CALLS = 200


def batch_name(data_id: str) -> str:
    """A webhook's `data.id` as a full name: the simulator sends full and bare ids in turn."""
    return data_id if "/" in data_id else f"batches/{data_id}"


def timeout_errors() -> tuple[type[BaseException], ...]:
    """What a client timeout surfaces as: google-genai runs on httpx2, or httpx in older releases."""
    found = []
    for module_name in ("httpx2", "httpx"):
        try:
            found.append(importlib.import_module(module_name).TimeoutException)
        except ImportError:
            continue
    return tuple(found)


def fault_state(simulator: Any) -> dict[str, Any]:
    return dict(simulator.control.faults())


def without_window_reset(state: dict[str, Any]) -> dict[str, Any]:
    return {**state, "github_rate_limit": {**state["github_rate_limit"], "reset": None}}


# --- the control API itself ------------------------------------------------------------


def test_defaults_are_off_and_reported_in_full(simulator: Any) -> None:
    state = fault_state(simulator)

    assert {k: v for k, v in state.items() if k != "injected"} == {
        "get_error_rate": 0.0,
        "status": 503,
        "error_rates": {},
        "timeout_rate": 0.0,
        "timeout_hold_s": 30.0,
        "latency_ms": 0,
        "latency_jitter_ms": 0,
        "webhook_drop_rate": 0.0,
        "webhook_copies": 1,
        "early_webhook": False,
        "webhook_before_register_ms": 0,
        "seed": None,
        "github_comment_post": {"fail": 0, "status": 502, "after_create": False},
        "github_check_run_write": {"fail": 0, "status": 502, "after_apply": False},
        "github_rate_limit": {
            "limit": 5000,
            "remaining": 5000,
            "reset": state["github_rate_limit"]["reset"],
            "enforced": False,
        },
        "github_secondary_limit": {"count": 0, "status": 403, "retry_after_s": 60},
        "github_endpoint_limit": {
            "enabled": False,
            "rest_points_per_minute": 900,
            "graphql_points_per_minute": 2000,
            "status": 403,
            "used": {},
        },
        "github_rate_limited": {"primary": 0, "secondary": 0, "endpoint": 0},
        "github_errors": {"count": 0, "status": 503, "injected": 0},
    }
    assert state["injected"]["gets"] == 0


def test_a_post_merges_into_the_current_faults_and_answers_the_full_state(
    simulator: Any,
) -> None:
    simulator.control.set_fault_model(latency_ms=5, webhook_copies=2)

    answer = simulator.control.set_fault_model(error_rates={429: 0.1, 503: 0.2}, seed=7)

    assert answer == fault_state(simulator)
    assert answer["latency_ms"] == 5 and answer["webhook_copies"] == 2
    assert answer["error_rates"] == {"429": 0.1, "503": 0.2}
    assert answer["seed"] == 7
    simulator.control.set_faults(0.0)  # the original client call keeps the map
    assert fault_state(simulator)["error_rates"] == {"429": 0.1, "503": 0.2}


def test_unknown_keys_are_a_400_naming_them_and_change_nothing(simulator: Any) -> None:
    before = fault_state(simulator)

    response = requests.post(
        f"{simulator.url}/_sim/faults",
        json={"latency_ms": 10, "drop_rate": 0.3, "copies": 2},
        timeout=10,
    )

    assert response.status_code == 400
    message = response.json()["error"]["message"]
    assert "'copies'" in message and "'drop_rate'" in message
    assert fault_state(simulator) == before


@pytest.mark.parametrize(
    "body",
    [
        {"webhook_drop_rate": 2},
        {"error_rates": {"429": 0.7, "503": 0.7}},
        {"webhook_copies": 0},
        {"timeout_hold_s": -1},
        {"latency_jitter_ms": "30"},
        {"error_rates": {"429": 0.1}, "github_comment_post": {"fail": -1}},
        {"latency_ms": 5, "github_errors": {"count": 1, "status": 404}},
        {"github_errors": {"count": -1}},
        {"github_errors": {"count": 1, "retry": True}},
    ],
    ids=[
        "rate",
        "rates sum",
        "copies",
        "hold",
        "jitter",
        "comment part",
        "github error not 5xx",
        "github errors count",
        "github errors key",
    ],
)
def test_a_bad_value_is_a_400_and_changes_nothing(simulator: Any, body: dict[str, Any]) -> None:
    before = fault_state(simulator)

    response = requests.post(f"{simulator.url}/_sim/faults", json=body, timeout=10)

    assert response.status_code == 400
    assert response.json()["error"]["message"]
    assert fault_state(simulator) == before


def test_reset_turns_every_fault_off(simulator: Any) -> None:
    defaults = fault_state(simulator)
    simulator.control.set_fault_model(
        error_rates={500: 0.5},
        timeout_rate=0.1,
        latency_ms=3,
        latency_jitter_ms=2,
        webhook_drop_rate=0.5,
        webhook_copies=4,
        early_webhook=True,
        seed=1,
        github_comment_post={"fail": 2},
    )
    batch = create_batch(simulator.genai())
    raw_get(simulator, batch.name)

    simulator.control.reset()

    # The rate-limit window's reset time is a clock reading: a reset starts a new window.
    assert without_window_reset(fault_state(simulator)) == without_window_reset(defaults)


# --- Gemini GETs ---------------------------------------------------------------------


def test_error_rates_fail_each_status_at_its_share_through_the_sdk(simulator: Any) -> None:
    client = simulator.genai()
    batch = create_batch(client)
    simulator.control.set_fault_model(error_rates={429: 0.1, 500: 0.05, 503: 0.1}, seed=7)

    seen: Counter[int] = Counter()
    for _ in range(CALLS):
        try:
            assert client.batches.get(name=batch.name).state == types.JobState.JOB_STATE_PENDING
        except errors.APIError as exc:
            seen[exc.code] += 1

    injected = fault_state(simulator)["injected"]
    assert injected["gets"] == CALLS
    assert {str(code): n for code, n in seen.items()} == injected["errors"]
    assert 5 <= seen[429] <= 40
    assert 1 <= seen[500] <= 25
    assert 5 <= seen[503] <= 40


def test_the_same_seed_draws_the_same_statuses(simulator: Any) -> None:
    batch = create_batch(simulator.genai())

    def pattern() -> list[int]:
        simulator.control.set_fault_model(error_rates={429: 0.3, 500: 0.3}, seed=5)
        return [raw_get(simulator, batch.name).status_code for _ in range(30)]

    first = pattern()

    assert first == pattern()
    assert set(first) == {200, 429, 500}


def test_a_429_carries_retry_info_and_a_quota_failure(simulator: Any) -> None:
    client = simulator.genai()
    batch = create_batch(client)
    simulator.control.set_fault_model(error_rates={429: 1.0})

    with pytest.raises(errors.ClientError) as caught:
        client.batches.get(name=batch.name)

    assert caught.value.code == 429
    assert caught.value.status == "RESOURCE_EXHAUSTED"
    details = {d["@type"]: d for d in caught.value.details["error"]["details"]}
    retry = details["type.googleapis.com/google.rpc.RetryInfo"]
    assert retry["retryDelay"].endswith("s") and float(retry["retryDelay"][:-1]) > 0
    (violation,) = details["type.googleapis.com/google.rpc.QuotaFailure"]["violations"]
    assert violation["quotaId"] and violation["quotaMetric"].startswith("generativelanguage")


def test_other_statuses_keep_the_plain_error_shape(simulator: Any) -> None:
    batch = create_batch(simulator.genai())
    simulator.control.set_fault_model(error_rates={503: 1.0})

    response = raw_get(simulator, batch.name)

    assert response.status_code == 503
    assert set(response.json()["error"]) == {"code", "message", "status"}


def test_a_timed_out_get_hangs_past_the_client_timeout(simulator: Any) -> None:
    client = simulator.genai(timeout_ms=300)
    batch = create_batch(client)
    simulator.control.set_fault_model(timeout_rate=1.0, timeout_hold_s=60)

    with pytest.raises(timeout_errors()):
        client.batches.get(name=batch.name)

    assert fault_state(simulator)["injected"]["timeouts"] == 1
    simulator.control.reset()  # lets the hung request go


def test_after_the_hold_the_connection_closes_without_an_answer(simulator: Any) -> None:
    batch = create_batch(simulator.genai())
    simulator.control.set_fault_model(timeout_rate=1.0, timeout_hold_s=0.2)

    with pytest.raises(requests.ConnectionError):
        raw_get(simulator, batch.name)


@pytest.mark.slow
def test_a_seeded_share_of_gets_times_out(simulator: Any) -> None:
    client = simulator.genai(timeout_ms=250)
    batch = create_batch(client)
    simulator.control.set_fault_model(timeout_rate=0.05, timeout_hold_s=2, seed=7)

    timed_out = 0
    for _ in range(CALLS):
        try:
            client.batches.get(name=batch.name)
        except timeout_errors():
            timed_out += 1

    assert timed_out == fault_state(simulator)["injected"]["timeouts"]
    assert 2 <= timed_out <= 25
    simulator.control.reset()


def test_latency_is_jittered_within_its_band(simulator: Any) -> None:
    client = simulator.genai()
    batch = create_batch(client)
    simulator.control.set_fault_model(latency_ms=50, latency_jitter_ms=30, seed=3)

    for _ in range(20):
        client.batches.get(name=batch.name)

    injected = fault_state(simulator)["injected"]
    assert injected["delayed"] == 20
    assert 20 <= injected["latency_min_ms"] < injected["latency_max_ms"] <= 80


# --- completion webhooks ---------------------------------------------------------------


def test_copies_share_one_webhook_id_and_body(simulator: Any) -> None:
    batch = create_batch(simulator.genai())
    simulator.control.set_fault_model(webhook_copies=3)

    simulator.control.complete(batch.name, "succeeded")

    received = simulator.receiver.wait_for(3)
    assert len({r.headers["webhook-id"] for r in received}) == 1
    assert len({r.body for r in received}) == 1
    attempts = wait_until(
        lambda: found if len(found := simulator.control.deliveries(batch.name)) == 3 else None,
        what="three recorded copies",
    )
    assert sorted(a["copy"] for a in attempts) == [1, 2, 3]


def test_duplicate_stays_two_copies_whatever_webhook_copies_says(simulator: Any) -> None:
    batch = create_batch(simulator.genai())
    simulator.control.set_fault_model(webhook_copies=3)

    simulator.control.complete(batch.name, "succeeded", webhook="duplicate")

    assert fault_state(simulator)["injected"]["webhook_copies_sent"] == 2
    first, second = simulator.receiver.wait_for(2)
    assert first.headers["webhook-id"] == second.headers["webhook-id"]


def test_a_dropped_webhook_is_recorded_as_dropped_and_never_sent(simulator: Any) -> None:
    client = simulator.genai()
    dropped, sent = create_batch(client), create_batch(client)
    simulator.control.set_fault_model(webhook_drop_rate=1.0)

    simulator.control.complete(dropped.name, "succeeded")

    (record,) = simulator.control.deliveries(dropped.name)
    assert record["dropped"] is True and record["ok"] is False
    assert record["target"] == simulator.receiver.url and record["type"] == "batch.succeeded"
    simulator.control.set_fault_model(webhook_drop_rate=0.0)
    simulator.control.complete(sent.name, "succeeded")
    simulator.receiver.wait_for(1)
    ids = [batch_name(json.loads(r.body)["data"]["id"]) for r in simulator.receiver.snapshot()]
    assert ids == [sent.name]
    assert client.batches.get(name=dropped.name).state == types.JobState.JOB_STATE_SUCCEEDED


@pytest.mark.slow
def test_a_seeded_share_of_webhooks_is_dropped(simulator: Any) -> None:
    client = simulator.genai()
    names = [create_batch(client, f"{i}.md").name for i in range(CALLS)]
    simulator.control.set_fault_model(webhook_drop_rate=0.3, seed=7)

    for name in names:
        simulator.control.complete(name, "succeeded")

    records = simulator.control.deliveries()
    dropped = {r["operation"] for r in records if r["dropped"]}
    assert len(dropped) == fault_state(simulator)["injected"]["webhooks_dropped"]
    assert 35 <= len(dropped) <= 85
    received = simulator.receiver.wait_for(CALLS - len(dropped))
    received_ids = {batch_name(json.loads(r.body)["data"]["id"]) for r in received}
    assert received_ids == set(names) - dropped


def test_an_early_webhook_arrives_before_the_create_call_returns(simulator: Any) -> None:
    client = simulator.genai()
    simulator.control.set_fault_model(early_webhook=True)

    batch = create_batch(client)

    assert batch.state == types.JobState.JOB_STATE_PENDING
    already = [json.loads(r.body) for r in simulator.receiver.snapshot()]
    assert [(e["type"], e["data"]["id"]) for e in already] == [("batch.succeeded", batch.name)]
    assert client.batches.get(name=batch.name).state == types.JobState.JOB_STATE_SUCCEEDED
    assert fault_state(simulator)["injected"]["early_webhooks"] == 1


def test_webhook_before_register_ms_means_an_early_webhook(simulator: Any) -> None:
    state = simulator.control.set_fault_model(webhook_before_register_ms=50)
    assert state["early_webhook"] is True

    batch = create_batch(simulator.genai())

    assert [json.loads(r.body)["data"]["id"] for r in simulator.receiver.snapshot()] == [batch.name]


# --- GitHub failing on any route (`github_errors`) -------------------------------------


def test_github_errors_fail_the_next_requests_on_any_route_then_github_answers(
    simulator: Any,
) -> None:
    simulator.control.put_file("octo-org", "handbook", "docs/a.md", "a" * 40, b"# A\n")
    contents = f"{simulator.url}/repos/octo-org/handbook/contents/docs/a.md?ref={'a' * 40}"
    tree = f"{simulator.url}/repos/octo-org/handbook/git/trees/{'a' * 40}"

    state = simulator.control.github_errors(status=502, count=2)

    assert state == {"count": 2, "status": 502, "injected": 0}
    first, second = requests.get(contents, timeout=10), requests.get(tree, timeout=10)
    assert (first.status_code, second.status_code) == (502, 502)
    assert first.json()["message"] == "Server Error"
    assert requests.get(contents, timeout=10).status_code == 200
    assert fault_state(simulator)["github_errors"] == {"count": 0, "status": 502, "injected": 2}


def test_github_errors_fail_the_apps_own_calls_too(simulator: Any) -> None:
    simulator.control.github_errors(count=1)

    answer = requests.post(f"{simulator.url}/app/installations/1/access_tokens", timeout=10)

    assert answer.status_code == 503
    assert answer.json()["message"] == "Service Unavailable"


def test_reset_turns_github_errors_off(simulator: Any) -> None:
    simulator.control.github_errors(count=5)

    simulator.control.reset()

    assert fault_state(simulator)["github_errors"] == {"count": 0, "status": 503, "injected": 0}
