"""The simulator's GitHub as the sending side of an App's webhook: every webhook it sends is
one recorded delivery, listed, read and redelivered through GitHub's App endpoints with
the App JWT (`local/simulator/hook_deliveries.py`, `hook_delivery_routes.py`).

One simulator for the module, its App webhook URL pointing at a loopback receiver that
answers as each test scripts it (a status, or holding the request past the simulator's
0.5 s timeout). Nothing here waits for time: a send answers once its attempt is over, a
redelivery is waited for through the simulator's own condition, and the 3-day window is a
control call that ages the log.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import jwt
import pytest
import requests
from cryptography.hazmat.primitives.asymmetric import rsa

from local import loopback
from local.processes import ServiceError, start_on_free_ports
from local.simulator.apps import NOT_DECODED
from local.simulator.client import SimulatorClient, start_simulator
from shared.github.app import AppCredentials, app_jwt
from shared.signatures.github import GitHubVerifier
from tests.github_openapi import documented_json
from tests.plugins.simulator import Received
from tests.ports import refusing_port

SECRET = "hook-deliveries-test-secret-0123456789"
TIMEOUT_S = 0.5
HOLD_S = 10.0  # how long the receiver holds a request it is told to hold, at most
DAY_S = 86400
INSTALLATION, REPOSITORY = 4711, 8150


@dataclass
class Receiver:
    """The App's webhook endpoint: records every POST, answers the scripted next answer
    (a status, or "hold": keep the request until `clear()`), by default 200."""

    url: str = ""
    requests: list[Received] = field(default_factory=list)
    script: list[int | str] = field(default_factory=list)
    released: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def clear(self) -> None:
        with self.lock:
            self.requests.clear()
            self.script.clear()
            self.released.set()  # let go of held requests
            self.released = threading.Event()

    def answer_with(self, *answers: int | str) -> None:
        with self.lock:
            self.script[:] = answers

    def take(self, item: Received) -> tuple[int | str, threading.Event]:
        with self.lock:
            self.requests.append(item)
            return (self.script.pop(0) if self.script else 200), self.released

    def snapshot(self) -> list[Received]:
        with self.lock:
            return list(self.requests)


@dataclass
class Sim:
    url: str
    control: SimulatorClient
    receiver: Receiver


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    found = Receiver()

    class Handler(loopback.QuietHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            answer, released = found.take(Received(self.path, dict(self.headers), body))
            if answer == "hold":
                released.wait(HOLD_S)
                return  # the simulator gave up long ago: no answer
            data = json.dumps({"seen": self.headers.get("X-GitHub-Delivery")}).encode()
            self.send_response(int(answer))
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    with loopback.serve(Handler, name="app-webhook-receiver") as server:
        found.url = f"{server.url}/github"
        try:
            yield found
        finally:
            found.clear()


@pytest.fixture(scope="module")
def sim_service(receiver: Receiver) -> Iterator[Sim]:
    def start_on(port: int) -> Any:
        return start_simulator(
            port,
            github_webhook_url=receiver.url,
            extra_args=[
                "--github-webhook-secret",
                SECRET,
                "--github-webhook-timeout-s",
                str(TIMEOUT_S),
            ],
        )

    try:  # a parallel run may take a free port before we bind it: start over on another
        service, (port,) = start_on_free_ports(start_on)
    except ServiceError as exc:
        pytest.fail(str(exc), pytrace=False)
    url = f"http://127.0.0.1:{port}"
    try:
        yield Sim(url, SimulatorClient(url), receiver)
    finally:
        service.stop()


@pytest.fixture
def sim(sim_service: Sim) -> Sim:
    sim_service.control.reset()
    sim_service.receiver.clear()
    return sim_service


@pytest.fixture
def auth(sim: Sim) -> dict[str, str]:
    """The `Authorization` header of a registered App's JWT."""
    app = sim.control.register_github_app()
    credentials = AppCredentials.from_pem(app["client_id"], app["private_key"])
    return {"Authorization": f"Bearer {app_jwt(credentials, datetime.now(UTC))}"}


def push(n: int = 1) -> dict[str, Any]:
    return {
        "ref": "refs/heads/main",
        "after": f"{n:040x}",
        "repository": {"id": REPOSITORY, "full_name": "octo/docs"},
        "installation": {"id": INSTALLATION},
    }


def api(sim: Sim, method: str, path: str, auth: dict[str, str], **kwargs: Any) -> Any:
    return requests.request(method, f"{sim.url}{path}", headers=auth, timeout=10, **kwargs)


def listed(sim: Sim, auth: dict[str, str], **params: Any) -> list[dict[str, Any]]:
    """Every page of `GET /app/hook/deliveries`, following `Link: rel="next"`."""
    answer = api(sim, "GET", "/app/hook/deliveries", auth, params=params)
    found = []
    while True:
        assert answer.status_code == 200, answer.text
        found += answer.json()
        if "next" not in answer.links:
            return found
        answer = requests.get(answer.links["next"]["url"], headers=auth, timeout=10)


# --- sending --------------------------------------------------------------------------------


def test_a_sent_webhook_carries_githubs_headers_and_signature_and_is_recorded(
    sim: Sim, auth: dict[str, str]
) -> None:
    sent = sim.control.send_github_webhook("push", push(), guid="guid-push-1")

    [got] = sim.receiver.snapshot()
    assert got.path == "/github"
    headers = {k.lower(): v for k, v in got.headers.items()}
    assert headers["x-github-event"] == "push"
    assert headers["x-github-delivery"] == "guid-push-1"
    assert headers["x-github-hook-installation-target-type"] == "integration"
    assert headers["user-agent"].startswith("GitHub-Hookshot/")
    GitHubVerifier([SECRET]).verify(got.headers, got.body)  # hookledger's own check
    sha1 = "sha1=" + hmac.new(SECRET.encode(), got.body, hashlib.sha1).hexdigest()
    assert headers["x-hub-signature"] == sha1
    assert json.loads(got.body) == push()

    assert (sent["status"], sent["status_code"], sent["guid"]) == ("OK", 200, "guid-push-1")
    assert (sent["event"], sent["action"], sent["redelivery"]) == ("push", None, False)
    assert (sent["installation_id"], sent["repository_id"]) == (INSTALLATION, REPOSITORY)
    assert sent["throttled_at"] is None and sent["delivered_at"].endswith("Z")
    assert isinstance(sent["duration"], float) and sent["url"] == sim.receiver.url
    assert sent["request"]["payload"] == push()
    assert sent["request"]["headers"]["X-Hub-Signature-256"] == headers["x-hub-signature-256"]
    assert json.loads(sent["response"]["payload"]) == {"seen": "guid-push-1"}
    assert sent["response"]["headers"]["content-type"] == "application/json"

    one = api(sim, "GET", f"/app/hook/deliveries/{sent['id']}", auth)
    assert (one.status_code, one.json()) == (200, sent)
    [item] = listed(sim, auth)
    assert set(item) == {
        "id", "guid", "delivered_at", "redelivery", "duration", "status", "status_code",
        "event", "action", "installation_id", "repository_id", "throttled_at",
    }  # fmt: skip
    assert item == {k: v for k, v in sent.items() if k in item}


def test_a_503_answer_is_githubs_invalid_http_response(sim: Sim) -> None:
    sim.receiver.answer_with(503)

    sent = sim.control.send_github_webhook("installation", {"action": "created"})

    assert (sent["status"], sent["status_code"]) == ("Invalid HTTP Response: 503", 503)
    assert (sent["action"], sent["installation_id"], sent["repository_id"]) == (
        "created",
        None,
        None,
    )
    assert json.loads(sent["response"]["payload"])["seen"] == sent["guid"]


def test_a_receiver_that_is_down_is_failed_to_connect_with_no_status_code(sim: Sim) -> None:
    with refusing_port() as port:
        sent = sim.control.send_github_webhook("push", push(), url=f"http://127.0.0.1:{port}/x")

    assert (sent["status"], sent["status_code"]) == ("failed to connect to network", 0)
    assert sent["response"] == {"headers": None, "payload": None}
    assert sim.receiver.snapshot() == []


def test_a_receiver_that_does_not_answer_in_time_is_timed_out(sim: Sim) -> None:
    sim.receiver.answer_with("hold")

    sent = sim.control.send_github_webhook("push", push())

    assert (sent["status"], sent["status_code"]) == ("timed out", 0)
    assert sent["duration"] >= TIMEOUT_S - 0.01
    assert len(sim.receiver.snapshot()) == 1  # it arrived; no answer came back


def test_the_control_call_refuses_what_github_could_not_send(sim: Sim) -> None:
    for body, word in [
        ({"payload": {}}, "event"),
        ({"event": "push"}, "payload"),
        ({"event": "push", "payload": [1]}, "payload"),
        ({"event": "push", "payload": {}, "url": "ftp://x"}, "url"),
        ({"event": "push", "payload": {}, "guid": "has space"}, "guid"),
    ]:
        answer = requests.post(f"{sim.url}/_sim/github/webhooks", json=body, timeout=10)
        assert answer.status_code == 400, body
        assert word in answer.text, body
    assert sim.control.github_hook_deliveries() == []


# --- listing --------------------------------------------------------------------------------


def test_deliveries_are_listed_newest_first_by_status_and_by_cursor_pages(
    sim: Sim, auth: dict[str, str]
) -> None:
    sim.receiver.answer_with(200, 503, 200, 404, 302)
    sent = [sim.control.send_github_webhook("push", push(n)) for n in range(5)]
    with refusing_port() as port:
        down = sim.control.send_github_webhook("push", push(9), url=f"http://127.0.0.1:{port}/")
    ids = [d["id"] for d in [*sent, down]]
    assert ids == sorted(ids)  # ids increase

    first = api(sim, "GET", "/app/hook/deliveries", auth, params={"per_page": 2})
    everything = listed(sim, auth, per_page=2)
    successes = listed(sim, auth, status="success", per_page=1)
    failures = listed(sim, auth, status="failure")

    assert [d["id"] for d in first.json()] == ids[:-3:-1]
    nxt = first.links["next"]["url"]
    assert "per_page=2" in nxt and "cursor=" in nxt and "prev" not in first.links
    second = requests.get(nxt, headers=auth, timeout=10)
    assert "prev" in second.links
    assert [d["id"] for d in everything] == ids[::-1]
    codes = {d["id"]: d["status_code"] for d in everything}
    assert [codes[i] for i in ids] == [200, 503, 200, 404, 302, 0]
    assert [d["id"] for d in successes] == [ids[4], ids[2], ids[0]]  # 200-399
    assert [d["id"] for d in failures] == [ids[3], ids[1]]  # 400-599: the 0 is in neither


def test_bad_list_parameters_are_refused_like_github(sim: Sim, auth: dict[str, str]) -> None:
    cases = [
        ({"status": "failed"}, 422, "'status'"),
        ({"per_page": "many"}, 422, "'per_page'"),
        ({"per_page": "0"}, 422, "'per_page'"),
        ({"cursor": "page-2"}, 400, "cursor"),
    ]
    for params, status, word in cases:
        answer = api(sim, "GET", "/app/hook/deliveries", auth, params=params)
        assert answer.status_code == status, params
        assert word in answer.json()["message"], params
        assert answer.json()["documentation_url"].startswith("https://docs.github.com/rest/apps")

    capped = api(sim, "GET", "/app/hook/deliveries", auth, params={"per_page": 500})
    assert (capped.status_code, capped.json()) == (200, [])


def test_an_unknown_delivery_is_not_found(sim: Sim, auth: dict[str, str]) -> None:
    for method, path in [
        ("GET", "/app/hook/deliveries/999"),
        ("GET", "/app/hook/deliveries/abc"),
        ("POST", "/app/hook/deliveries/999/attempts"),
    ]:
        answer = api(sim, method, path, auth)
        assert (answer.status_code, answer.json()["message"]) == (404, "Not Found"), path


ENDPOINTS = [
    ("GET", "/app/hook/deliveries"),
    ("GET", "/app/hook/deliveries/{id}"),
    ("POST", "/app/hook/deliveries/{id}/attempts"),
]


@pytest.mark.parametrize(("method", "path"), ENDPOINTS, ids=[p for _m, p in ENDPOINTS])
def test_every_endpoint_needs_the_app_jwt(
    sim: Sim, auth: dict[str, str], method: str, path: str
) -> None:
    sent = sim.control.send_github_webhook("push", push())
    url = path.format(id=sent["id"])
    app = sim.control.register_github_app()
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    forged = app_jwt(AppCredentials(app["client_id"], other), datetime.now(UTC))
    stranger = jwt.encode({"iss": "Iv23liNOBODY", "iat": 0, "exp": 1}, other, algorithm="RS256")

    for headers, status, message in [
        ({}, 401, NOT_DECODED),
        ({"Authorization": "Bearer not-a-jwt"}, 401, NOT_DECODED),
        ({"Authorization": f"Bearer {forged}"}, 401, NOT_DECODED),
        ({"Authorization": f"Bearer {stranger}"}, 404, "Integration not found"),
    ]:
        answer = api(sim, method, url, headers)
        assert (answer.status_code, answer.json()["message"]) == (status, message), headers
    assert api(sim, method, url, auth).status_code in (200, 202)
    if method == "POST":  # the accepted redelivery is sent before the test ends
        sim.control.wait_for_github_hook_deliveries(sent["guid"], 2)


# --- redelivering ---------------------------------------------------------------------------


def test_a_redelivery_is_a_new_delivery_with_the_same_guid_and_request(
    sim: Sim, auth: dict[str, str]
) -> None:
    sim.receiver.answer_with(503)
    failed = sim.control.send_github_webhook("push", push())

    answer = api(sim, "POST", f"/app/hook/deliveries/{failed['id']}/attempts", auth)
    redelivered, original = sim.control.wait_for_github_hook_deliveries(failed["guid"], 2)

    assert (answer.status_code, answer.json()) == (202, {})
    assert original["id"] == failed["id"] and original["redelivery"] is False
    assert redelivered["id"] > failed["id"] and redelivered["guid"] == failed["guid"]
    assert (redelivered["redelivery"], redelivered["status"]) == (True, "OK")
    assert redelivered["request"] == failed["request"]
    first, again = sim.receiver.snapshot()
    assert first.body == again.body
    for name in ("X-GitHub-Delivery", "X-Hub-Signature-256", "X-GitHub-Event"):
        assert first.headers[name] == again.headers[name], name
    [newest, oldest] = listed(sim, auth)
    assert (newest["id"], newest["redelivery"], oldest["id"]) == (
        redelivered["id"],
        True,
        failed["id"],
    )


def test_a_redelivery_waited_for_in_vain_is_reported(sim: Sim) -> None:
    sent = sim.control.send_github_webhook("push", push())

    with pytest.raises(requests.HTTPError, match="504") as caught:
        sim.control.wait_for_github_hook_deliveries(sent["guid"], 2, timeout_s=0)
    assert "1 recorded" in str(caught.value)


def test_past_three_days_a_delivery_is_gone_and_cannot_be_redelivered(
    sim: Sim, auth: dict[str, str]
) -> None:
    sent = sim.control.send_github_webhook("push", push())
    attempts = f"/app/hook/deliveries/{sent['id']}/attempts"

    assert sim.control.age_github_hook_deliveries(3 * DAY_S - 60) == 1
    still = api(sim, "POST", attempts, auth)
    sim.control.wait_for_github_hook_deliveries(sent["guid"], 2)
    assert sim.control.age_github_hook_deliveries(61, ids=[sent["id"]]) == 1
    refused = api(sim, "POST", attempts, auth)

    assert still.status_code == 202
    assert refused.status_code == 422
    assert refused.json()["message"] == "Validation Failed"
    assert "older than 3 days" in refused.json()["errors"][0]["message"]
    assert api(sim, "GET", f"/app/hook/deliveries/{sent['id']}", auth).status_code == 404
    [fresh] = listed(sim, auth)  # the redelivery, still inside the window
    assert fresh["redelivery"] is True
    inspected = {d["id"]: d["expired"] for d in sim.control.github_hook_deliveries()}
    assert inspected == {sent["id"]: True, fresh["id"]: False}


# --- throttling -----------------------------------------------------------------------------


def test_a_throttled_delivery_is_recorded_unsent_until_released(
    sim: Sim, auth: dict[str, str]
) -> None:
    assert sim.control.throttle_github_webhooks(count=1) == {"count": 1, "until": None}

    held = sim.control.send_github_webhook("push", push(1))
    after = sim.control.send_github_webhook("push", push(2))

    assert (held["status"], held["status_code"], held["duration"]) == ("throttled", 0, 0.0)
    assert held["throttled_at"] is not None and after["throttled_at"] is None
    assert held["response"] == {"headers": None, "payload": None}
    assert [json.loads(r.body) for r in sim.receiver.snapshot()] == [push(2)]
    assert [d["held"] for d in sim.control.github_hook_deliveries()] == [False, True]
    assert [d["id"] for d in listed(sim, auth, status="failure")] == []  # 0: in neither

    [released] = sim.control.release_throttled_github_webhooks()

    assert (released["id"], released["status"]) == (held["id"], "OK")
    assert released["throttled_at"] == held["throttled_at"]  # as GitHub's example shows
    assert [json.loads(r.body) for r in sim.receiver.snapshot()] == [push(2), push(1)]
    assert sim.control.release_throttled_github_webhooks() == []


def test_throttling_for_a_while_holds_every_send_redeliveries_too(
    sim: Sim, auth: dict[str, str]
) -> None:
    sent = sim.control.send_github_webhook("push", push())
    state = sim.control.throttle_github_webhooks(seconds=3600)

    again = api(sim, "POST", f"/app/hook/deliveries/{sent['id']}/attempts", auth)
    redelivery, _original = sim.control.wait_for_github_hook_deliveries(sent["guid"], 2)
    other = sim.control.send_github_webhook("push", push(2))
    off = sim.control.throttle_github_webhooks()
    last = sim.control.send_github_webhook("push", push(3))

    assert state["until"] is not None and off == {"count": 0, "until": None}
    assert again.status_code == 202
    assert (redelivery["status"], redelivery["redelivery"]) == ("throttled", True)
    assert other["status"] == "throttled" and last["status"] == "OK"
    assert len(sim.receiver.snapshot()) == 2  # the first send and the last


# --- one path for every send ----------------------------------------------------------------


def test_a_check_run_rerequest_is_recorded_like_any_delivery(
    sim: Sim, auth: dict[str, str]
) -> None:
    repo, sha = "octo/docs", "6dcb09b5b57875f334f61aebed695e2e4193db5e"
    run = requests.post(
        f"{sim.url}/repos/{repo}/check-runs",
        json={"name": "hookledger review", "head_sha": sha},
        timeout=10,
    ).json()

    outcome = sim.control.rerequest_check_run(run["id"], installation_id=INSTALLATION)

    assert (outcome["status"], outcome["ok"], outcome["event"]) == (200, True, "check_run")
    [item] = listed(sim, auth)
    assert item["id"] == outcome["hook_delivery_id"] and item["guid"] == outcome["delivery_id"]
    assert (item["event"], item["action"], item["installation_id"]) == (
        "check_run",
        "rerequested",
        INSTALLATION,
    )
    [got] = sim.receiver.snapshot()
    GitHubVerifier([SECRET]).verify(got.headers, got.body)


def test_reset_forgets_every_delivery_and_the_throttle(sim: Sim) -> None:
    first = sim.control.send_github_webhook("push", push())
    sim.control.throttle_github_webhooks(count=5)

    sim.control.reset()
    fresh = sim.control.send_github_webhook("push", push(2))

    assert [d["id"] for d in sim.control.github_hook_deliveries()] == [fresh["id"]]
    assert (fresh["id"], fresh["status"]) == (first["id"], "OK")  # ids start over


# --- GitHub's OpenAPI description -------------------------------------------------------------


def test_every_answer_is_the_shape_githubs_openapi_description_documents(
    sim: Sim, auth: dict[str, str]
) -> None:
    """List, one delivery, a redelivery and the refusals, held to `@octokit/openapi`'s
    schemas (tests/fixtures/github_openapi.json): every field GitHub says is required."""
    sim.receiver.answer_with(503)
    failed = sim.control.send_github_webhook("push", push())
    one = f"/app/hook/deliveries/{failed['id']}"

    documented_json(api(sim, "GET", "/app/hook/deliveries", auth), "GET", "/app/hook/deliveries")
    documented_json(api(sim, "GET", one, auth), "GET", "/app/hook/deliveries/{delivery_id}")
    attempts = "/app/hook/deliveries/{delivery_id}/attempts"
    documented_json(api(sim, "POST", f"{one}/attempts", auth), "POST", attempts)
    sim.control.wait_for_github_hook_deliveries(failed["guid"], 2)
    bad = api(sim, "GET", "/app/hook/deliveries", auth, params={"status": "failed"})
    assert bad.status_code == 422
    documented_json(bad, "GET", "/app/hook/deliveries")
    sim.control.age_github_hook_deliveries(3 * DAY_S + 60, ids=[failed["id"]])
    too_old = api(sim, "POST", f"{one}/attempts", auth)
    assert too_old.status_code == 422
    documented_json(too_old, "POST", attempts)
