"""The simulator's `batch.priority` and how it runs batches, in process on a fake clock
(local/simulator/processing.py, `/_sim/gemini/processing`): a create keeps an int64
priority and refuses anything else as Gemini does; with slots, batches run highest
priority first, then oldest; with `run_s`, they succeed in the order they started."""

from __future__ import annotations

import json
from typing import Any

import pytest

from local.fakes import FakeClock
from local.simulator.app import create_app
from local.simulator.engine import Settings, Simulator

CREATE = "/v1beta/models/m:batchGenerateContent"
PENDING, RUNNING = "BATCH_STATE_PENDING", "BATCH_STATE_RUNNING"


def make() -> tuple[Simulator, Any, FakeClock]:
    clock = FakeClock()
    sim = Simulator(Settings(running_after_s=30.0), clock=clock)
    # The test steps completion itself (`complete_due`) on the fake clock: no loop runs.
    sim.stop(timeout=0)
    return sim, create_app(sim).test_client(), clock


def body(name: str, priority: Any = None) -> dict[str, Any]:
    request = {"request": {"contents": [{"parts": [{"text": "hi"}]}]}, "metadata": {"key": "k"}}
    batch: dict[str, Any] = {
        "displayName": name,
        "inputConfig": {"requests": {"requests": [request]}},
    }
    if priority is not None:
        batch["priority"] = priority
    return {"batch": batch}


def create(client: Any, name: str, priority: Any = None) -> str:
    answer = client.post(CREATE, json=body(name, priority))
    assert answer.status_code == 200, answer.get_json()
    return str(answer.get_json()["name"])


def processing(client: Any, **changes: Any) -> dict[str, Any]:
    if not changes:
        return dict(client.get("/_sim/gemini/processing").get_json())
    answer = client.post("/_sim/gemini/processing", json=changes)
    assert answer.status_code == 200, answer.get_json()
    return dict(answer.get_json())


def states(client: Any) -> dict[str, str]:
    return {
        b["display_name"]: b["state"] for b in client.get("/_sim/batches").get_json()["batches"]
    }


# --- a create's `batch.priority` -----------------------------------------------------------


@pytest.mark.parametrize(
    ("sent", "kept"),
    [("100", 100), (7, 7), ("-3", -3), (str(2**63 - 1), 2**63 - 1), (None, 0)],
    ids=["int64 as a string", "a JSON number", "negative", "int64's largest", "absent: 0"],
)
def test_a_create_keeps_its_priority_and_shows_it_as_gemini_does(sent: Any, kept: int) -> None:
    _sim, client, _clock = make()

    answer = client.post(CREATE, json=body("b", sent))

    assert answer.status_code == 200, answer.get_json()
    metadata = answer.get_json()["metadata"]
    # int64 in JSON: a string; the default left out, as proto3 JSON leaves it.
    assert metadata.get("priority") == (str(kept) if kept else None)
    [listed] = client.get("/_sim/batches").get_json()["batches"]
    assert listed["priority"] == kept


@pytest.mark.parametrize(
    "bad",
    [1.5, True, "abc", "1.5", " 1", 2**63, str(-(2**63) - 1), {}, []],
    ids=["fraction", "bool", "text", "fraction text", "space", "past int64", "below", "{}", "[]"],
)
def test_a_priority_that_is_no_int64_is_geminis_400_and_creates_nothing(bad: Any) -> None:
    _sim, client, _clock = make()

    answer = client.post(CREATE, data=json.dumps(body("b", bad)), content_type="application/json")

    assert answer.status_code == 400
    error = answer.get_json()["error"]
    assert error["status"] == "INVALID_ARGUMENT"
    assert error["message"] == f"Invalid value at 'batch.priority' (TYPE_INT64), {json.dumps(bad)}"
    assert client.get("/_sim/batches").get_json()["batches"] == []


# --- the control API -----------------------------------------------------------------------


def test_processing_is_off_by_default_and_a_post_answers_the_full_state() -> None:
    _sim, client, _clock = make()

    assert processing(client) == {
        "slots": None,
        "run_s": None,
        "honour_priority": True,
        "running": 0,
        "queued": 0,
    }
    answer = processing(client, slots=2)
    assert answer == processing(client)
    assert (answer["slots"], answer["run_s"]) == (2, None)


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"workers": 2}, "workers"),
        ({"slots": 0}, "slots"),
        ({"slots": True}, "slots"),
        ({"slots": 2.5}, "slots"),
        ({"run_s": -1}, "run_s"),
        ({"run_s": "1"}, "run_s"),
        ({"honour_priority": 1}, "honour_priority"),
    ],
    ids=["unknown key", "no slot", "bool slots", "fraction", "negative run", "text run", "1"],
)
def test_a_bad_processing_body_is_a_400_naming_it_and_changes_nothing(
    change: dict[str, Any], named: str
) -> None:
    _sim, client, _clock = make()
    processing(client, slots=3)

    answer = client.post("/_sim/gemini/processing", json={"run_s": 5, **change})

    assert answer.status_code == 400
    assert named in answer.get_json()["error"]["message"]
    assert processing(client)["slots"] == 3 and processing(client)["run_s"] is None


def test_a_reset_turns_processing_off() -> None:
    _sim, client, _clock = make()
    processing(client, slots=1, run_s=1, honour_priority=False)

    client.post("/_sim/reset")

    assert processing(client)["slots"] is None and processing(client)["honour_priority"]


# --- running batches in order ----------------------------------------------------------------


def complete(client: Any, name: str) -> None:
    answer = client.post(f"/_sim/operations/{name}:complete", json={"state": "succeeded"})
    assert answer.status_code == 200, answer.get_json()


def test_a_freed_slot_goes_to_the_highest_priority_then_the_oldest() -> None:
    _sim, client, _clock = make()
    processing(client, slots=1)
    first = create(client, "first")
    create(client, "older background")
    create(client, "newer background")
    create(client, "pressed", "100")

    assert states(client) == {
        "first": RUNNING,
        "older background": PENDING,
        "newer background": PENDING,
        "pressed": PENDING,
    }
    assert (processing(client)["running"], processing(client)["queued"]) == (1, 3)
    complete(client, first)
    assert states(client)["pressed"] == RUNNING
    assert states(client)["older background"] == PENDING


def completion_order(honour_priority: bool) -> list[str]:
    sim, client, clock = make()
    processing(client, slots=1, run_s=10, honour_priority=honour_priority)
    names = {create(client, name, priority): name for name, priority in
             [("b1", None), ("b2", None), ("b3", None), ("pressed", 100)]}  # fmt: skip
    order: list[str] = []
    for _ in range(len(names)):
        assert sim.complete_due() == []  # nothing has run its 10 s yet
        clock.advance(10)
        order += [names[name] for name in sim.complete_due()]
    return order


def test_batches_succeed_on_their_own_highest_priority_first() -> None:
    assert completion_order(honour_priority=True) == ["b1", "pressed", "b2", "b3"]


def test_without_priority_they_succeed_in_creation_order() -> None:
    assert completion_order(honour_priority=False) == ["b1", "b2", "b3", "pressed"]


def test_a_deleted_or_cancelled_running_batch_frees_its_slot() -> None:
    sim, client, _clock = make()
    processing(client, slots=1)
    first, second = create(client, "first"), create(client, "second")
    create(client, "third")

    assert client.delete(f"/v1beta/{first}").status_code == 200
    assert states(client)["second"] == RUNNING
    sim.cancel_batch(second.removeprefix("batches/"))
    sim._finish_cancel(second.removeprefix("batches/"))  # the cancel's timer, at once
    assert states(client)["third"] == RUNNING


def test_without_slots_every_batch_runs_at_once_whatever_its_priority() -> None:
    sim, client, clock = make()
    create(client, "background")
    create(client, "pressed", "100")
    assert set(states(client).values()) == {PENDING}

    clock.advance(30)  # running_after_s

    assert set(states(client).values()) == {RUNNING}
    processing(client, run_s=5)  # no slots: each runs from its creation
    assert sorted(sim.complete_due()) == sorted(
        b["name"] for b in client.get("/_sim/batches").get_json()["batches"]
    )
