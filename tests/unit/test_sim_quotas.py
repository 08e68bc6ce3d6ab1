"""The simulator's Gemini quotas in process (`/_sim/quotas`, local/simulator/quotas.py):
concurrent batches in flight and the inline request size, on a fake clock."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from local.fakes import FakeClock
from local.simulator.app import create_app
from local.simulator.engine import Settings, Simulator
from local.simulator.gemini import BATCH_QUOTA_ID, BATCH_QUOTA_METRIC, duration
from local.simulator.state import BatchQuotaExceeded, World

CREATE = "/v1beta/models/m:batchGenerateContent"
MIB_20 = 20 * 1024 * 1024


def body(text: str = "hi") -> dict[str, Any]:
    request = {"request": {"contents": [{"parts": [{"text": text}]}]}, "metadata": {"key": "k"}}
    return {"batch": {"displayName": "quota", "inputConfig": {"requests": {"requests": [request]}}}}


def make(clock: FakeClock | None = None) -> tuple[Simulator, Any]:
    sim = Simulator(Settings(running_after_s=30.0), clock=clock or FakeClock())
    return sim, create_app(sim).test_client()


def quotas(client: Any, **changes: Any) -> dict[str, Any]:
    if not changes:
        return dict(client.get("/_sim/quotas").get_json())
    answer = client.post("/_sim/quotas", json=changes)
    assert answer.status_code == 200, answer.get_json()
    return dict(answer.get_json())


def create(client: Any, text: str = "hi") -> Any:
    return client.post(CREATE, json=body(text))


def details(answer: Any) -> dict[str, dict[str, Any]]:
    """The 429's google.rpc details by short type name."""
    found = answer.get_json()["error"]["details"]
    return {detail["@type"].rsplit(".", 1)[1]: detail for detail in found}


# --- the control API ---------------------------------------------------------------------


def test_defaults_are_off_and_gemini_s_inline_limit() -> None:
    _sim, client = make()

    assert quotas(client) == {
        "gemini_batches_in_flight": None,
        "gemini_batch_retry_delay_s": 30.0,
        "gemini_inline_request_bytes": MIB_20,
        "in_flight": {"gemini_batches": 0},
        "refused": {"gemini_batches_in_flight": 0, "gemini_inline_request_bytes": 0},
    }


def test_a_post_merges_and_answers_the_full_state() -> None:
    _sim, client = make()
    quotas(client, gemini_batch_retry_delay_s=2)

    answer = quotas(client, gemini_batches_in_flight=5)

    assert answer == quotas(client)
    assert answer["gemini_batches_in_flight"] == 5
    assert answer["gemini_batch_retry_delay_s"] == 2.0


BAD_BODIES = [
    ("unknown key", {"gemini_batches": 5}, "gemini_batches"),
    ("negative limit", {"gemini_batches_in_flight": -1}, "gemini_batches_in_flight"),
    ("bool limit", {"gemini_batches_in_flight": True}, "gemini_batches_in_flight"),
    ("fractional limit", {"gemini_batches_in_flight": 2.5}, "gemini_batches_in_flight"),
    ("text delay", {"gemini_batch_retry_delay_s": "30s"}, "gemini_batch_retry_delay_s"),
    ("delay past an hour", {"gemini_batch_retry_delay_s": 3601}, "gemini_batch_retry_delay_s"),
    ("no inline bytes", {"gemini_inline_request_bytes": 0}, "gemini_inline_request_bytes"),
    ("inline over gemini's", {"gemini_inline_request_bytes": MIB_20 + 1}, "inline_request_bytes"),
    (
        "one bad key among good ones",
        {"gemini_batches_in_flight": 3, "gemini_batch_retry_delay_s": -1},
        "gemini_batch_retry_delay_s",
    ),
]


@pytest.mark.parametrize(("name", "bad", "named"), BAD_BODIES, ids=[c[0] for c in BAD_BODIES])
def test_bad_input_is_a_400_naming_the_key_and_changes_nothing(
    name: str, bad: dict[str, Any], named: str
) -> None:
    _sim, client = make()
    before = quotas(client)

    answer = client.post("/_sim/quotas", json=bad)

    assert answer.status_code == 400, name
    assert named in answer.get_json()["error"]["message"], name
    assert quotas(client) == before, name


def test_reset_restores_the_defaults_and_zeroes_the_counts() -> None:
    _sim, client = make()
    fresh = quotas(client)
    quotas(client, gemini_batches_in_flight=0, gemini_inline_request_bytes=10)
    assert create(client).status_code == 400
    quotas(client, gemini_inline_request_bytes=MIB_20)
    assert create(client).status_code == 429

    client.post("/_sim/reset")

    assert quotas(client) == fresh


# --- concurrent batches in flight -------------------------------------------------------


def test_a_create_beyond_the_limit_is_gemini_s_429_and_creates_nothing() -> None:
    sim, client = make()
    quotas(client, gemini_batches_in_flight=2, gemini_batch_retry_delay_s=1.5)
    assert [create(client).status_code for _ in range(2)] == [200, 200]

    refused = create(client)

    assert refused.status_code == 429
    error = refused.get_json()["error"]
    assert (error["code"], error["status"]) == (429, "RESOURCE_EXHAUSTED")
    assert error["message"].startswith("You exceeded your current quota")
    assert "limit: 2" in error["message"]
    found = details(refused)
    [violation] = found["QuotaFailure"]["violations"]
    assert violation["quotaId"] == BATCH_QUOTA_ID
    assert violation["quotaMetric"] == BATCH_QUOTA_METRIC
    assert violation["quotaValue"] == "2"
    assert found["RetryInfo"]["retryDelay"] == "1.5s"
    assert found["Help"]["links"][0]["url"].endswith("/rate-limits")
    assert len(sim.world.batches()) == 2
    report = quotas(client)
    assert report["in_flight"] == {"gemini_batches": 2}
    assert report["refused"]["gemini_batches_in_flight"] == 1


def test_a_running_batch_still_counts() -> None:
    clock = FakeClock()
    _sim, client = make(clock)
    quotas(client, gemini_batches_in_flight=1)
    name = create(client).get_json()["name"]
    clock.advance(30)

    assert client.get(f"/v1beta/{name}").get_json()["metadata"]["state"] == "BATCH_STATE_RUNNING"
    assert create(client).status_code == 429


@pytest.mark.parametrize("end", ["succeeded", "failed", "cancelled", "expired", "deleted"])
def test_a_batch_that_ends_or_is_deleted_frees_its_place(end: str) -> None:
    sim, client = make()
    quotas(client, gemini_batches_in_flight=1)
    name = create(client).get_json()["name"]
    assert create(client).status_code == 429, end

    if end == "deleted":
        assert client.delete(f"/v1beta/{name}").status_code == 200
    else:
        sim.complete_batch(name.removeprefix("batches/"), end, webhook="drop")

    assert quotas(client)["in_flight"] == {"gemini_batches": 0}, end
    assert create(client).status_code == 200, end


def test_a_limit_below_the_count_refuses_until_enough_end_and_null_turns_it_off() -> None:
    sim, client = make()
    names = [create(client).get_json()["name"] for _ in range(3)]
    quotas(client, gemini_batches_in_flight=2)
    assert create(client).status_code == 429
    sim.complete_batch(names[0].removeprefix("batches/"), "succeeded", webhook="drop")
    assert create(client).status_code == 429  # still 2 in flight: at the limit
    sim.complete_batch(names[1].removeprefix("batches/"), "succeeded", webhook="drop")
    assert create(client).status_code == 200

    quotas(client, gemini_batches_in_flight=None)

    assert [create(client).status_code for _ in range(3)] == [200, 200, 200]
    assert quotas(client)["refused"]["gemini_batches_in_flight"] == 2


def test_racing_creates_never_pass_the_limit_together() -> None:
    world = World(FakeClock())
    created: list[str] = []
    refused: list[int] = []
    start = threading.Barrier(20)

    def one() -> None:
        start.wait()
        try:
            created.append(world.create_batch("m", "race", [], max_in_flight=5).name)
        except BatchQuotaExceeded as exc:
            refused.append(exc.limit)

    threads = [threading.Thread(target=one) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert (len(created), refused) == (5, [5] * 15)
    assert world.batches_in_flight() == 5


@pytest.mark.parametrize(("seconds", "text"), [(30.0, "30s"), (1.5, "1.5s"), (0, "0s")])
def test_retry_delays_are_protobuf_durations(seconds: float, text: str) -> None:
    assert duration(seconds) == text


# --- inline request size -----------------------------------------------------------------


def test_a_lowered_inline_limit_refuses_a_larger_create_with_gemini_s_400() -> None:
    sim, client = make()
    quotas(client, gemini_inline_request_bytes=2_000)
    assert create(client, "x" * 1_000).status_code == 200

    refused = create(client, "x" * 2_000)

    assert refused.status_code == 400
    error = refused.get_json()["error"]
    assert error["status"] == "INVALID_ARGUMENT"
    assert error["message"] == "Request payload size exceeds the limit: 2000 bytes."
    assert len(sim.world.batches()) == 1
    assert quotas(client)["refused"]["gemini_inline_request_bytes"] == 1


def test_the_inline_limit_is_gemini_s_20_mib_by_default() -> None:
    _sim, client = make()
    overhead = len(json.dumps(body("")).encode())
    at_limit = json.dumps(body("x" * (MIB_20 - overhead))).encode()
    assert len(at_limit) == MIB_20

    assert client.post(CREATE, data=at_limit, content_type="application/json").status_code == 200
    over = at_limit.replace(b'"xx', b'"xxx', 1)
    refused = client.post(CREATE, data=over, content_type="application/json")
    assert refused.status_code == 400
    assert "20971520 bytes" in refused.get_json()["error"]["message"]
