"""The ingress, loaded by functions-framework's real loader, against the local Cloud Tasks emulator.

The queue is paused, so every task the ingress creates stays listable: "no task was
created" is checked by listing the queue, not by trusting a mock.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import functions_framework
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from shared.config import LOCAL_ENVELOPE_KEY, LOCAL_GEMINI_SECRET, LOCAL_GITHUB_SECRET, Config
from shared.entrypoints import runtime
from shared.handoff.envelope import EnvelopeSealer
from shared.handoff.tasks import ensure_queue, make_client
from shared.signatures import sign_github, sign_standard_webhook

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "github"
PUSH = (FIXTURES / "push-with-new-branch.payload.json").read_bytes()
OTHER_GEMINI_SECRET = "whsec_" + base64.b64encode(b"another-gemini-secret-0123").decode()
RETIRED_GITHUB_SECRET = "retired-github-secret"
RETIRED_GEMINI_SECRET = "whsec_" + base64.b64encode(b"retired-gemini-secret-0123").decode()
SMALL_LIMIT = 64 * 1024
GEMINI_LIMIT = 16 * 1024  # a Gemini notification is thin: its own, lower limit


@dataclass
class Harness:
    client: Any
    tasks_client: Any
    queue: str
    sent: list[str] = field(default_factory=list)

    def tasks(self) -> list[Any]:
        return list(
            self.tasks_client.list_tasks(request={"parent": self.queue, "response_view": "FULL"})
        )


def _load_app() -> Any:
    """functions/main.py under functions-framework's real loader, for the ingress."""
    runtime.reset()
    return functions_framework.create_app(target="ingress", source=str(REPO / "functions/main.py"))


def ingress_harness(cloudtasks_emulator, monkeypatch, env: dict[str, str]) -> Iterator[Harness]:
    """The real ingress app on its own paused queue (every created task stays listable),
    configured by the local defaults plus `env`; the queue is deleted afterwards."""
    tasks_client = make_client(cloudtasks_emulator.host)
    queue_id = f"ingress-{uuid.uuid4().hex[:12]}"
    queue = f"projects/demo-hookledger/locations/us-central1/queues/{queue_id}"
    ensure_queue(tasks_client, queue)
    tasks_client.pause_queue(name=queue)
    for name, value in {
        "GOOGLE_CLOUD_PROJECT": "demo-hookledger",
        "CLOUD_TASKS_EMULATOR_HOST": cloudtasks_emulator.host,
        "TASKS_QUEUE": queue_id,
        "WORKER_URL": "http://127.0.0.1:9/worker",
        "ENVELOPE_KEYS": LOCAL_ENVELOPE_KEY,
        "TASKS_TIMEOUT_S": "2",
        **env,
    }.items():
        monkeypatch.setenv(name, value)
    yield Harness(_load_app().test_client(), tasks_client, queue)
    runtime.reset()
    tasks_client.delete_queue(name=queue)


@pytest.fixture
def ingress(cloudtasks_emulator, monkeypatch) -> Iterator[Harness]:
    yield from ingress_harness(
        cloudtasks_emulator,
        monkeypatch,
        {
            "GITHUB_WEBHOOK_SECRETS": f"new-github-secret-0123,{LOCAL_GITHUB_SECRET}",
            "GEMINI_WEBHOOK_SECRETS": f"{OTHER_GEMINI_SECRET},{LOCAL_GEMINI_SECRET}",
            "MAX_BODY_BYTES": str(SMALL_LIMIT),
            "MAX_GEMINI_BODY_BYTES": str(GEMINI_LIMIT),
        },
    )


def github_headers(
    body: bytes,
    *,
    secret: str = LOCAL_GITHUB_SECRET,
    event: str = "push",
    delivery: str | None = None,
) -> dict[str, str]:
    return {
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
        "X-Hub-Signature-256": sign_github(secret, body),
        "Content-Type": "application/json",
    }


def gemini_body(event: str = "batch.succeeded", op: str = "batches/abc123") -> bytes:
    return json.dumps(
        {"type": event, "version": "v1", "timestamp": "2026-11-30T00:00:00Z", "data": {"id": op}}
    ).encode()


def gemini_headers(
    body: bytes,
    *,
    secret: str = LOCAL_GEMINI_SECRET,
    msg_id: str | None = None,
    timestamp: int | None = None,
) -> dict[str, str]:
    msg_id = msg_id or f"msg_{uuid.uuid4().hex}"
    timestamp = int(time.time()) if timestamp is None else timestamp
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": sign_standard_webhook(secret, msg_id, timestamp, body),
        "Content-Type": "application/json",
    }


def _without(headers: dict[str, str], name: str) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k != name}


def _with(headers: dict[str, str], **changes: str) -> dict[str, str]:
    out = dict(headers)
    for key, value in changes.items():
        out[key.replace("_", "-")] = value
    return out


def _bad_requests() -> list[tuple[str, str, str, dict[str, str], bytes, int]]:
    """(name, method, path, headers, body, expected status): each must create no task."""
    push, gh = PUSH, github_headers(PUSH)
    sig = gh["X-Hub-Signature-256"]
    reserialized = json.dumps(json.loads(PUSH)).encode()
    g_body = gemini_body()
    g = gemini_headers(g_body)
    now = int(time.time())
    g_sig = g["webhook-signature"]
    cases = [
        (
            "github: no signature header",
            "POST",
            "/github",
            _without(gh, "X-Hub-Signature-256"),
            push,
            401,
        ),
        (
            "github: empty signature",
            "POST",
            "/github",
            {**gh, "X-Hub-Signature-256": ""},
            push,
            401,
        ),
        (
            "github: wrong secret",
            "POST",
            "/github",
            github_headers(push, secret="wrong-secret-0123456"),
            push,
            401,
        ),
        (
            "github: rotated-out secret",
            "POST",
            "/github",
            github_headers(push, secret=RETIRED_GITHUB_SECRET),
            push,
            401,
        ),
        ("github: forged body", "POST", "/github", gh, push.replace(b"master", b"main"), 401),
        ("github: truncated body", "POST", "/github", gh, push[:-10], 401),
        ("github: re-serialized JSON", "POST", "/github", gh, reserialized, 401),
        ("github: body with a trailing newline", "POST", "/github", gh, push + b"\n", 401),
        (
            "github: sha1 prefix",
            "POST",
            "/github",
            {**gh, "X-Hub-Signature-256": "sha1=" + sig[7:]},
            push,
            401,
        ),
        ("github: no prefix", "POST", "/github", {**gh, "X-Hub-Signature-256": sig[7:]}, push, 401),
        (
            "github: truncated hex",
            "POST",
            "/github",
            {**gh, "X-Hub-Signature-256": sig[:-2]},
            push,
            401,
        ),
        (
            "github: non-hex digest",
            "POST",
            "/github",
            {**gh, "X-Hub-Signature-256": "sha256=" + "z" * 64},
            push,
            401,
        ),
        (
            "github: two signatures",
            "POST",
            "/github",
            {**gh, "X-Hub-Signature-256": f"{sig}, {sig}"},
            push,
            401,
        ),
        (
            "github: signature in the sha1 header only",
            "POST",
            "/github",
            {**_without(gh, "X-Hub-Signature-256"), "X-Hub-Signature": "sha1=" + "0" * 40},
            push,
            401,
        ),
        (
            "github: upper-case header name, wrong value",
            "POST",
            "/github",
            {**_without(gh, "X-Hub-Signature-256"), "X-HUB-SIGNATURE-256": "sha256=" + "0" * 64},
            push,
            401,
        ),
        ("github: empty body", "POST", "/github", github_headers(b""), b"", 400),
        ("github: non-JSON body", "POST", "/github", github_headers(b"hello"), b"hello", 400),
        ("github: JSON array body", "POST", "/github", github_headers(b"[1,2]"), b"[1,2]", 400),
        (
            "github: missing event header",
            "POST",
            "/github",
            _without(gh, "X-GitHub-Event"),
            push,
            400,
        ),
        (
            "github: missing delivery id",
            "POST",
            "/github",
            _without(gh, "X-GitHub-Delivery"),
            push,
            400,
        ),
        (
            "github: blank delivery id",
            "POST",
            "/github",
            {**gh, "X-GitHub-Delivery": "  "},
            push,
            400,
        ),
        (
            "github: overlong delivery id",
            "POST",
            "/github",
            {**gh, "X-GitHub-Delivery": "d" * 300},
            push,
            400,
        ),
        (
            "github: non-ASCII delivery id",
            "POST",
            "/github",
            {**gh, "X-GitHub-Delivery": "\u00e9" * 200},
            push,
            400,
        ),
        (
            "github: delivery id with a space",
            "POST",
            "/github",
            {**gh, "X-GitHub-Delivery": "two words"},
            push,
            400,
        ),
        (
            "github: non-printable delivery id",
            "POST",
            "/github",
            {**gh, "X-GitHub-Delivery": "d\x7f1"},
            push,
            400,
        ),
        (
            "github: overlong event",
            "POST",
            "/github",
            {**gh, "X-GitHub-Event": "e" * 129},
            push,
            400,
        ),
        (
            "github: signature header but no event or delivery id",
            "POST",
            "/github",
            {"X-Hub-Signature-256": sig},
            push,
            400,
        ),
        (
            "github: oversized body",
            "POST",
            "/github",
            github_headers(b"x" * (SMALL_LIMIT + 1)),
            b"x" * (SMALL_LIMIT + 1),
            413,
        ),
        ("github: GET", "GET", "/github", gh, b"", 405),
        ("github: PUT", "PUT", "/github", gh, push, 405),
        ("unknown route", "POST", "/bitbucket", gh, push, 404),
        ("root route", "POST", "/", gh, push, 404),
        ("gemini: DELETE", "DELETE", "/gemini", g, g_body, 405),
        ("gemini: no signature", "POST", "/gemini", _without(g, "webhook-signature"), g_body, 401),
        ("gemini: no id", "POST", "/gemini", _without(g, "webhook-id"), g_body, 401),
        ("gemini: no timestamp", "POST", "/gemini", _without(g, "webhook-timestamp"), g_body, 401),
        (
            "gemini: stale timestamp",
            "POST",
            "/gemini",
            gemini_headers(g_body, timestamp=now - 3600),
            g_body,
            401,
        ),
        (
            "gemini: future timestamp",
            "POST",
            "/gemini",
            gemini_headers(g_body, timestamp=now + 3600),
            g_body,
            401,
        ),
        (
            "gemini: non-integer timestamp",
            "POST",
            "/gemini",
            {**g, "webhook-timestamp": "soon"},
            g_body,
            401,
        ),
        (
            "gemini: unknown version",
            "POST",
            "/gemini",
            {**g, "webhook-signature": "v2" + g_sig[2:]},
            g_body,
            401,
        ),
        (
            "gemini: missing comma",
            "POST",
            "/gemini",
            {**g, "webhook-signature": g_sig.replace(",", "")},
            g_body,
            401,
        ),
        (
            "gemini: bad base64",
            "POST",
            "/gemini",
            {**g, "webhook-signature": "v1,not*base64!"},
            g_body,
            401,
        ),
        (
            "gemini: truncated signature",
            "POST",
            "/gemini",
            {**g, "webhook-signature": g_sig[:-8]},
            g_body,
            401,
        ),
        (
            "gemini: wrong secret",
            "POST",
            "/gemini",
            gemini_headers(g_body, secret="whsec_" + base64.b64encode(b"w" * 24).decode()),
            g_body,
            401,
        ),
        (
            "gemini: rotated-out secret",
            "POST",
            "/gemini",
            gemini_headers(g_body, secret=RETIRED_GEMINI_SECRET),
            g_body,
            401,
        ),
        ("gemini: tampered body", "POST", "/gemini", g, g_body.replace(b"abc123", b"abc124"), 401),
        (
            "gemini: re-serialized JSON",
            "POST",
            "/gemini",
            g,
            json.dumps(json.loads(g_body), indent=1).encode(),
            401,
        ),
        (
            "gemini: tampered id",
            "POST",
            "/gemini",
            {**g, "webhook-id": g["webhook-id"] + "x"},
            g_body,
            401,
        ),
        (
            "gemini: tampered timestamp",
            "POST",
            "/gemini",
            {**g, "webhook-timestamp": str(int(g["webhook-timestamp"]) - 1)},
            g_body,
            401,
        ),
        ("gemini: empty body", "POST", "/gemini", gemini_headers(b""), b"", 400),
        ("gemini: non-JSON body", "POST", "/gemini", gemini_headers(b"not json"), b"not json", 400),
        (
            "gemini: no type",
            "POST",
            "/gemini",
            gemini_headers(b'{"data":{"id":"batches/x"}}'),
            b'{"data":{"id":"batches/x"}}',
            400,
        ),
        (
            "gemini: no data.id",
            "POST",
            "/gemini",
            gemini_headers(b'{"type":"batch.succeeded","data":{}}'),
            b'{"type":"batch.succeeded","data":{}}',
            400,
        ),
        (
            "gemini: overlong webhook-id",
            "POST",
            "/gemini",
            gemini_headers(g_body, msg_id="m" * 201),
            g_body,
            400,
        ),
        (
            "gemini: non-ASCII webhook-id",
            "POST",
            "/gemini",
            {**g, "webhook-id": "\u00e9" * 200},
            g_body,
            400,
        ),
        (
            "gemini: over its own limit, under MAX_BODY_BYTES",
            "POST",
            "/gemini",
            gemini_headers(b"y" * (GEMINI_LIMIT + 1)),
            b"y" * (GEMINI_LIMIT + 1),
            413,
        ),
        (
            "gemini: oversized body",
            "POST",
            "/gemini",
            gemini_headers(b"y" * (SMALL_LIMIT + 1)),
            b"y" * (SMALL_LIMIT + 1),
            413,
        ),
    ]
    return cases


# Only the names at collection: the cases are signed when each test runs, since a
# signature made at collection goes stale (300 s tolerance) when the suite before it is long.
BAD_NAMES = [case[0] for case in _bad_requests()]


def test_there_are_at_least_forty_distinct_bad_requests():
    assert len(set(BAD_NAMES)) == len(BAD_NAMES) >= 40


@pytest.mark.parametrize("name", BAD_NAMES, ids=BAD_NAMES)
def test_a_bad_request_is_refused_and_creates_no_task(ingress, name):
    [(_, method, path, headers, body, status)] = [c for c in _bad_requests() if c[0] == name]
    response = ingress.client.open(path, method=method, headers=headers, data=body)

    assert response.status_code == status, name
    assert ingress.tasks() == [], name


@pytest.mark.parametrize(
    ("name", "event", "path", "expected"),
    [
        ("github issues: no handler", "issues", "/github", "ignored"),
        ("github ping", "ping", "/github", "pong"),
    ],
)
def test_events_without_work_answer_200_and_create_no_task(ingress, name, event, path, expected):
    body = (FIXTURES / "ping-payload.json").read_bytes()
    response = ingress.client.post(path, headers=github_headers(body, event=event), data=body)

    assert (response.status_code, response.json["status"]) == (200, expected), name
    assert ingress.tasks() == []


def test_a_non_terminal_gemini_event_is_ignored(ingress):
    body = gemini_body("interaction.requires_action", "interactions/i1")
    response = ingress.client.post("/gemini", headers=gemini_headers(body), data=body)

    assert (response.status_code, response.json["status"]) == (200, "ignored")
    assert ingress.tasks() == []


def test_a_signed_push_is_accepted_with_one_task_holding_a_sealed_envelope(ingress):
    headers = github_headers(PUSH, delivery="d-accepted-1")
    response = ingress.client.post("/github", headers=headers, data=PUSH)

    assert response.status_code == 202
    assert response.json == {"status": "accepted", "delivery_id": "d-accepted-1", "event": "push"}
    [task] = ingress.tasks()
    envelope = EnvelopeSealer([LOCAL_ENVELOPE_KEY]).open(task.http_request.body)
    assert (envelope.source, envelope.event, envelope.delivery_id) == (
        "github",
        "push",
        "d-accepted-1",
    )
    assert envelope.body == PUSH  # byte for byte, never re-serialized
    assert "x-hub-signature-256" not in envelope.headers
    assert task.http_request.url == "http://127.0.0.1:9/worker"


@pytest.mark.parametrize(
    ("event", "fixture"),
    [
        ("installation", "installation-created.payload.json"),
        ("installation", "installation-suspend.payload.json"),
        ("installation_repositories", "installation_repositories-removed.payload.json"),
    ],
)
def test_github_app_installation_events_are_accepted_byte_for_byte(ingress, event, fixture):
    body = (FIXTURES / fixture).read_bytes()
    headers = github_headers(body, event=event, delivery=f"d-{fixture}")
    response = ingress.client.post("/github", headers=headers, data=body)

    assert (response.status_code, response.json["event"]) == (202, event), fixture
    [task] = ingress.tasks()
    envelope = EnvelopeSealer([LOCAL_ENVELOPE_KEY]).open(task.http_request.body)
    assert (envelope.event, envelope.body) == (event, body)


def _ours(fixture: str, **changes: Any) -> bytes:
    """A published check_run/check_suite example, its run renamed to ours (re-serialized:
    the example's own run is `randscape`, which the ingress ignores)."""
    payload = json.loads((FIXTURES / fixture).read_bytes())
    if "check_run" in payload:
        payload["check_run"]["name"] = "hookledger review"
    payload.update(changes)
    return json.dumps(payload).encode()


@pytest.mark.parametrize(
    ("name", "event", "body", "expected"),
    [
        (
            "check_run rerequested, ours",
            "check_run",
            _ours("check_run-rerequested.payload.json"),
            (202, "accepted"),
        ),
        (
            "check_suite rerequested",
            "check_suite",
            (FIXTURES / "check_suite-rerequested.payload.json").read_bytes(),
            (202, "accepted"),
        ),
        (
            "check_run rerequested, another app's name (the published example)",
            "check_run",
            (FIXTURES / "check_run-rerequested.payload.json").read_bytes(),
            (200, "ignored"),
        ),
        (
            "check_suite requested: the push starts the review",
            "check_suite",
            (FIXTURES / "check_suite-requested.payload.json").read_bytes(),
            (200, "ignored"),
        ),
        (
            "check_run created",
            "check_run",
            _ours("check_run-rerequested.payload.json", action="created"),
            (200, "ignored"),
        ),
        (
            "check_run requested_action",
            "check_run",
            _ours("check_run-rerequested.payload.json", action="requested_action"),
            (200, "ignored"),
        ),
    ],
    ids=lambda value: value if isinstance(value, str) and " " in value else "",
)
def test_rerun_events_start_work_only_when_rerequested_on_our_run(
    ingress, name, event, body, expected
):
    headers = github_headers(body, event=event, delivery=f"d-rerun-{uuid.uuid4().hex[:8]}")
    response = ingress.client.post("/github", headers=headers, data=body)

    assert (response.status_code, response.json["status"]) == expected, name
    assert len(ingress.tasks()) == (1 if expected[0] == 202 else 0), name


def test_every_task_the_ingress_creates_carries_the_dispatch_deadline(ingress):
    github = ingress.client.post("/github", headers=github_headers(PUSH), data=PUSH)
    body = gemini_body()
    gemini = ingress.client.post("/gemini", headers=gemini_headers(body), data=body)

    assert (github.status_code, gemini.status_code) == (202, 202)
    deadlines = [task.dispatch_deadline.total_seconds() for task in ingress.tasks()]
    # Below the worker's timeout (docs/architecture.md, "Delivery lease").
    assert deadlines == [Config().task_dispatch_deadline_s] * 2


def test_the_same_delivery_three_times_yields_one_task(ingress):
    headers = github_headers(PUSH, delivery="d-thrice")
    answers = [ingress.client.post("/github", headers=headers, data=PUSH) for _ in range(3)]

    assert [a.status_code for a in answers] == [202, 200, 200]
    assert [a.json["status"] for a in answers] == ["accepted", "duplicate", "duplicate"]
    assert len(ingress.tasks()) == 1


def test_the_second_secret_still_verifies_during_rotation(ingress):
    response = ingress.client.post("/github", headers=github_headers(PUSH), data=PUSH)
    assert response.status_code == 202
    body = gemini_body()
    response = ingress.client.post("/gemini", headers=gemini_headers(body), data=body)
    assert response.status_code == 202
    assert len(ingress.tasks()) == 2


@pytest.mark.parametrize("case", [str.lower, str.upper, str.title], ids=["lower", "upper", "title"])
def test_header_names_are_case_insensitive(ingress, case):
    headers = {case(k): v for k, v in github_headers(PUSH).items()}
    assert ingress.client.post("/github", headers=headers, data=PUSH).status_code == 202
    body = gemini_body()
    headers = {case(k): v for k, v in gemini_headers(body).items()}
    assert ingress.client.post("/gemini", headers=headers, data=body).status_code == 202


def test_a_gemini_terminal_event_is_accepted(ingress):
    body = gemini_body("batch.failed", "batches/zz")
    headers = gemini_headers(body, msg_id="msg_terminal")
    response = ingress.client.post("/gemini", headers=headers, data=body)

    assert response.status_code == 202
    assert response.json["delivery_id"] == "msg_terminal"
    assert len(ingress.tasks()) == 1


def test_a_cloud_tasks_outage_answers_503(ingress, monkeypatch):
    from local.processes import free_port

    monkeypatch.setenv("CLOUD_TASKS_EMULATOR_HOST", f"127.0.0.1:{free_port()}")
    monkeypatch.setenv("TASKS_TIMEOUT_S", "1")
    runtime.reset()

    response = ingress.client.post("/github", headers=github_headers(PUSH), data=PUSH)

    assert response.status_code == 503
    assert ingress.tasks() == []


def test_healthz_answers_200(ingress):
    assert ingress.client.get("/healthz").status_code == 200


def test_no_signature_or_secret_reaches_the_logs(ingress, caplog, monkeypatch):
    caplog.set_level(logging.DEBUG, logger="hookledger")
    # A GitHub App configured too: its key is read with the rest of the configuration.
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    ).decode()
    monkeypatch.setenv("GITHUB_APP_ID", "Iv23liLOGTEST")
    monkeypatch.setenv("GITHUB_APP_PRIVATE_KEY", pem)
    runtime.reset()
    good = github_headers(PUSH)
    ingress.client.post("/github", headers=good, data=PUSH)
    bad = github_headers(PUSH, secret="wrong-secret-0123456")
    ingress.client.post("/github", headers=bad, data=PUSH)
    body = gemini_body()
    g = gemini_headers(body)
    ingress.client.post("/gemini", headers=g, data=body)

    text = "\n".join(
        f"{r.getMessage()} {getattr(r, 'hookledger_fields', {})}" for r in caplog.records
    )
    assert "github delivery accepted" in text  # the logs did record the traffic
    for secret in (
        good["X-Hub-Signature-256"][7:],
        bad["X-Hub-Signature-256"][7:],
        g["webhook-signature"][3:],
        LOCAL_GITHUB_SECRET,
        LOCAL_GEMINI_SECRET,
        LOCAL_ENVELOPE_KEY,
        *pem.splitlines()[1:-1],  # every line of the App's private key
    ):
        assert secret not in text


def test_a_signed_push_with_an_empty_kept_header_is_accepted_not_a_500(ingress):
    headers = {**github_headers(PUSH), "User-Agent": "", "X-GitHub-Hook-ID": ""}
    assert ingress.client.post("/github", headers=headers, data=PUSH).status_code == 202


def test_a_signed_but_absurdly_nested_body_is_a_400(ingress):
    body = b"[" * 5_000 + b"]" * 5_000  # deeper than the JSON parser's recursion limit
    response = ingress.client.post("/github", headers=github_headers(body), data=body)
    assert response.status_code == 400
    assert ingress.tasks() == []


def test_a_signed_github_body_replayed_under_a_new_delivery_id_is_a_duplicate(ingress):
    first = ingress.client.post("/github", headers=github_headers(PUSH, delivery="d-1"), data=PUSH)
    # The signature covers the body only: anyone holding it could re-send it as "d-2".
    again = ingress.client.post("/github", headers=github_headers(PUSH, delivery="d-2"), data=PUSH)

    assert (first.status_code, first.json["status"]) == (202, "accepted")
    assert (again.status_code, again.json) == (
        200,
        {"status": "duplicate", "delivery_id": "d-2", "event": "push"},
    )
    [task] = ingress.tasks()
    assert EnvelopeSealer([LOCAL_ENVELOPE_KEY]).open(task.http_request.body).delivery_id == "d-1"


def test_a_github_body_seen_before_is_logged_at_warning_with_its_digest(ingress, caplog):
    caplog.set_level(logging.INFO, logger="hookledger")
    ingress.client.post("/github", headers=github_headers(PUSH, delivery="d-1"), data=PUSH)
    again = ingress.client.post("/github", headers=github_headers(PUSH, delivery="d-2"), data=PUSH)

    assert again.json["status"] == "duplicate"
    warnings = [
        getattr(r, "hookledger_fields", {}) for r in caplog.records if r.levelno == logging.WARNING
    ]
    # The task is named after the body, so the id it was first sent under is the worker's to
    # name (the ledger's record); here, the id it came under now and the body's digest.
    assert [(w.get("delivery_id"), w.get("body_sha256")) for w in warnings] == [
        ("d-2", hashlib.sha256(PUSH).hexdigest())
    ]


def test_another_github_body_is_another_task(ingress):
    other = PUSH.replace(b'"forced": false', b'"forced": true')
    assert other != PUSH
    for body in (PUSH, other):
        response = ingress.client.post("/github", headers=github_headers(body), data=body)
        assert response.status_code == 202
    assert len(ingress.tasks()) == 2


def test_each_source_has_its_own_body_limit(ingress):
    body = json.dumps({"zen": "x" * GEMINI_LIMIT}).encode()
    assert GEMINI_LIMIT < len(body) <= SMALL_LIMIT

    github = ingress.client.post("/github", headers=github_headers(body, event="issues"), data=body)
    gemini = ingress.client.post("/gemini", headers=gemini_headers(body), data=body)

    assert (github.status_code, github.json["status"]) == (200, "ignored")  # read and verified
    assert (gemini.status_code, gemini.json) == (
        413,
        {"error": f"body over the {GEMINI_LIMIT}-byte limit"},
    )


def test_an_unusable_id_on_a_claim_checked_body_is_a_400_not_a_500(ingress, monkeypatch):
    """A body over 512 KiB goes by claim check, keyed by the delivery id: the id is refused first."""
    monkeypatch.setenv("MAX_BODY_BYTES", str(2 * 1024 * 1024))
    client = _load_app().test_client()
    body = json.dumps({"ref": "refs/heads/main", "padding": "p" * 600_000}).encode()
    headers = github_headers(body, delivery="\u00e9" * 200)

    response = client.post("/github", headers=headers, data=body)

    assert response.status_code == 400
    assert "X-GitHub-Delivery" in response.json["error"]
    assert ingress.tasks() == []
