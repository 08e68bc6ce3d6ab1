"""The simulator's create refusals in process (`/_sim/gemini/create-refusal`,
`/_sim/gemini/poison`, local/simulator/create_refusals.py): bad control bodies are 400s
naming the key and change nothing; refusals run down, are counted and end at reset."""

from __future__ import annotations

from typing import Any

import pytest

from local.fakes import FakeClock
from local.simulator.app import create_app
from local.simulator.create_refusals import REFUSALS
from local.simulator.engine import Settings, Simulator

CREATE = "/v1beta/models/m:batchGenerateContent"
REFUSAL = "/_sim/gemini/create-refusal"
POISON = "/_sim/gemini/poison"
OFF = {"status": None, "reason": None, "count": None, "refused": 0}
CLEAN = {"marker": None, "name_index": True, "refused": 0}


def make() -> tuple[Simulator, Any]:
    sim = Simulator(Settings(running_after_s=30.0), clock=FakeClock())
    return sim, create_app(sim).test_client()


def body(*texts: str) -> dict[str, Any]:
    requests = [
        {"request": {"contents": [{"parts": [{"text": text}]}]}, "metadata": {"key": f"k{i}"}}
        for i, text in enumerate(texts or ("hi",))
    ]
    return {
        "batch": {"displayName": "refusals", "inputConfig": {"requests": {"requests": requests}}}
    }


def ok(answer: Any) -> dict[str, Any]:
    assert answer.status_code == 200, answer.get_json()
    return dict(answer.get_json())


# --- the control API -------------------------------------------------------------------------


def test_both_are_off_by_default() -> None:
    _sim, client = make()

    assert ok(client.get(REFUSAL)) == OFF
    assert ok(client.get(POISON)) == CLEAN


def test_a_post_answers_the_state_get_reports_with_the_status_s_default_reason() -> None:
    _sim, client = make()

    answers = {status: ok(client.post(REFUSAL, json={"status": status})) for status in REFUSALS}

    assert answers[403]["reason"] == "CONSUMER_SUSPENDED"
    assert answers[401]["reason"] == "ACCESS_TOKEN_TYPE_UNSUPPORTED"
    assert answers[400]["reason"] == "API_KEY_INVALID"
    expected = {"status": 400, "reason": "API_KEY_INVALID", "count": None, "refused": 0}
    assert answers[400] == ok(client.get(REFUSAL)) == expected


BAD_REFUSALS = [
    ("unknown key", {"status": 403, "times": 2}, "times"),
    ("no status", {"count": 2}, "status"),
    ("status not a refusal", {"status": 500}, "status"),
    ("status as text", {"status": "403"}, "status"),
    ("status true", {"status": True}, "status"),
    ("reason of another status", {"status": 401, "reason": "CONSUMER_SUSPENDED"}, "reason"),
    ("unknown reason", {"status": 403, "reason": "BILLING"}, "reason"),
    ("count zero", {"status": 403, "count": 0}, "count"),
    ("negative count", {"status": 403, "count": -1}, "count"),
    ("fractional count", {"status": 403, "count": 1.5}, "count"),
    ("bool count", {"status": 403, "count": True}, "count"),
    ("count without a status", {"status": None, "count": 2}, "count"),
    ("reason without a status", {"status": None, "reason": "API_KEY_INVALID"}, "reason"),
]


@pytest.mark.parametrize(("name", "bad", "named"), BAD_REFUSALS, ids=[c[0] for c in BAD_REFUSALS])
def test_a_bad_refusal_is_a_400_naming_the_key_and_changes_nothing(
    name: str, bad: dict[str, Any], named: str
) -> None:
    _sim, client = make()
    before = ok(client.post(REFUSAL, json={"status": 401, "count": 3}))

    answer = client.post(REFUSAL, json=bad)

    assert answer.status_code == 400, name
    assert named in answer.get_json()["error"]["message"], name
    assert ok(client.get(REFUSAL)) == before, name


BAD_POISONS = [
    ("unknown key", {"marker": "X", "index": False}, "index"),
    ("no marker", {"name_index": False}, "marker"),
    ("empty marker", {"marker": ""}, "marker"),
    ("blank marker", {"marker": "  "}, "marker"),
    ("marker not text", {"marker": 7}, "marker"),
    ("marker too long", {"marker": "x" * 1001}, "marker"),
    ("name_index not a bool", {"marker": "X", "name_index": "no"}, "name_index"),
    ("name_index without a marker", {"marker": None, "name_index": False}, "name_index"),
]


@pytest.mark.parametrize(("name", "bad", "named"), BAD_POISONS, ids=[c[0] for c in BAD_POISONS])
def test_a_bad_poison_is_a_400_naming_the_key_and_changes_nothing(
    name: str, bad: dict[str, Any], named: str
) -> None:
    _sim, client = make()
    before = ok(client.post(POISON, json={"marker": "POISON", "name_index": False}))

    answer = client.post(POISON, json=bad)

    assert answer.status_code == 400, name
    assert named in answer.get_json()["error"]["message"], name
    assert ok(client.get(POISON)) == before, name


@pytest.mark.parametrize("path", [REFUSAL, POISON])
@pytest.mark.parametrize(("name", "raw"), [("not json", b"{"), ("a list", b"[403]")])
def test_a_body_that_is_no_json_object_is_a_400(path: str, name: str, raw: bytes) -> None:
    _sim, client = make()

    answer = client.post(path, data=raw, content_type="application/json")

    assert answer.status_code == 400, name
    assert "JSON" in answer.get_json()["error"]["message"], name


# --- refusing creates ------------------------------------------------------------------------


def test_a_count_refuses_that_many_creates_then_stops_by_itself() -> None:
    sim, client = make()
    ok(client.post(REFUSAL, json={"status": 401, "count": 2}))

    statuses = [client.post(CREATE, json=body()).status_code for _ in range(3)]

    assert statuses == [401, 401, 200]
    assert ok(client.get(REFUSAL)) == {**OFF, "refused": 2}
    assert len(sim.world.batches()) == 1


@pytest.mark.parametrize("stop", ["null status", "delete"])
def test_stopping_takes_creates_again_and_keeps_the_count(stop: str) -> None:
    _sim, client = make()
    ok(client.post(REFUSAL, json={"status": 403}))
    assert client.post(CREATE, json=body()).status_code == 403

    if stop == "delete":
        state = ok(client.delete(REFUSAL))
    else:
        state = ok(client.post(REFUSAL, json={"status": None}))

    assert state == {**OFF, "refused": 1}
    assert client.post(CREATE, json=body()).status_code == 200


def test_a_refused_deployment_answers_before_the_body_is_read() -> None:
    sim, client = make()
    ok(client.post(REFUSAL, json={"status": 400}))

    answer = client.post(CREATE, data=b"not json", content_type="application/json")

    assert answer.status_code == 400
    assert answer.get_json()["error"]["details"][0]["reason"] == "API_KEY_INVALID"
    assert sim.world.batches() == []


def test_the_refusal_names_the_caller_s_key_and_the_api_version() -> None:
    _sim, client = make()
    ok(client.post(REFUSAL, json={"status": 403}))
    suspended = client.post(CREATE, json=body(), headers={"x-goog-api-key": "AIzaSim"})
    ok(client.post(REFUSAL, json={"status": 401, "reason": "CREDENTIALS_MISSING"}))
    missing = client.post("/v1alpha/models/m:batchGenerateContent?key=AIzaQ", json=body())

    assert suspended.get_json()["error"]["message"] == (
        "Permission denied: Consumer 'api_key:AIzaSim' has been suspended."
    )
    [info] = missing.get_json()["error"]["details"]
    assert info["reason"] == "CREDENTIALS_MISSING"
    assert info["metadata"]["method"] == (
        "google.ai.generativelanguage.v1alpha.GenerativeService.BatchGenerateContent"
    )


def test_a_poisoned_request_is_named_by_its_content_and_part() -> None:
    sim, client = make()
    ok(client.post(POISON, json={"marker": "POISON"}))
    request = {"contents": [{"parts": [{"text": "fine"}]}, {"parts": [{}, {"text": "a POISON"}]}]}
    refused = body("fine")
    refused["batch"]["inputConfig"]["requests"]["requests"].append({"request": request})

    answer = client.post(CREATE, json=refused)

    assert answer.status_code == 400
    field = "batch.input_config.requests.requests[1].request.contents[1].parts[1].text"
    assert answer.get_json()["error"]["message"].startswith(
        f"* BatchGenerateContentRequest.{field}: "
    )
    assert sim.world.batches() == []
    assert ok(client.get(POISON))["refused"] == 1


def test_a_create_without_the_marker_goes_through() -> None:
    _sim, client = make()
    ok(client.post(POISON, json={"marker": "POISON"}))

    assert client.post(CREATE, json=body("poison", "POISSON", "P O I S O N")).status_code == 200
    assert ok(client.get(POISON))["refused"] == 0


def test_clearing_the_poison_takes_the_request_again() -> None:
    _sim, client = make()
    ok(client.post(POISON, json={"marker": "POISON"}))
    assert client.post(CREATE, json=body("POISON")).status_code == 400

    assert ok(client.delete(POISON)) == {**CLEAN, "refused": 1}
    assert client.post(CREATE, json=body("POISON")).status_code == 200


def test_reset_turns_both_off_and_zeroes_the_counts() -> None:
    _sim, client = make()
    ok(client.post(POISON, json={"marker": "POISON", "name_index": False}))
    assert client.post(CREATE, json=body("POISON")).status_code == 400
    ok(client.post(REFUSAL, json={"status": 403, "count": 5}))
    assert client.post(CREATE, json=body()).status_code == 403

    ok(client.post("/_sim/reset"))

    assert ok(client.get(REFUSAL)) == OFF
    assert ok(client.get(POISON)) == CLEAN
    assert client.post(CREATE, json=body("POISON")).status_code == 200
