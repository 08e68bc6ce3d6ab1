"""Gemini dynamic webhooks through the real ingress: an RS256 JWT in `webhook-signature`,
its key served by a JWKS over loopback HTTP, tasks created in the local Cloud Tasks emulator.

The queue is paused, so "nothing enqueued" is checked by listing the queue.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from shared.config import LOCAL_ENVELOPE_KEY, LOCAL_GEMINI_SECRET
from shared.handoff.envelope import EnvelopeSealer
from tests.integration.test_ingress import (
    Harness,
    _load_app,
    gemini_body,
    gemini_headers,
    ingress_harness,
)
from tests.jwks_server import AUDIENCE, JwksServer, sign

ISSUER = "https://generativelanguage.googleapis.com"
KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
STRANGER = rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture
def keys() -> Iterator[JwksServer]:
    with JwksServer([(KEY, "gemini-1")]) as server:
        yield server


@pytest.fixture
def ingress(cloudtasks_emulator, keys, monkeypatch) -> Iterator[Harness]:
    yield from ingress_harness(
        cloudtasks_emulator,
        monkeypatch,
        {
            "GEMINI_WEBHOOK_SECRETS": LOCAL_GEMINI_SECRET,
            "GEMINI_JWKS_URL": keys.url,
            "GEMINI_WEBHOOK_AUDIENCE": AUDIENCE,
            "GEMINI_WEBHOOK_ISSUER": ISSUER,
        },
    )


def claims(**changes: Any) -> dict[str, Any]:
    now = int(time.time())
    base: dict[str, Any] = {
        "iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + 300,
        "jti": f"evt-{uuid.uuid4().hex}", "type": "batch.succeeded", "version": "v1",
        "data": {"id": "batches/signed"},
    }  # fmt: skip
    base.update(changes)
    return {k: v for k, v in base.items() if v is not None}


def jwt_headers(token: str, msg_id: str = "msg_unsigned") -> dict[str, str]:
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(int(time.time())),
        "webhook-signature": token,
        "Content-Type": "application/json",
    }


def post(ingress: Harness, token: str, body: bytes | None = None, msg_id: str = "msg_x") -> Any:
    body = gemini_body("batch.succeeded", "batches/from-body") if body is None else body
    return ingress.client.post("/gemini", headers=jwt_headers(token, msg_id), data=body)


def test_a_valid_token_is_accepted_and_the_task_holds_the_signed_event(ingress, keys):
    token = sign(KEY, "gemini-1", claims(jti="evt-1", data={"id": "batches/signed"}))

    response = post(ingress, token, gemini_body("batch.failed", "batches/unsigned"))

    assert response.status_code == 202, response.json
    assert response.json == {
        "status": "accepted",
        "delivery_id": "jwt:evt-1",
        "event": "batch.succeeded",
    }
    [task] = ingress.tasks()
    envelope = EnvelopeSealer([LOCAL_ENVELOPE_KEY]).open(task.http_request.body)
    assert (envelope.source, envelope.event, envelope.delivery_id) == (
        "gemini",
        "batch.succeeded",
        "jwt:evt-1",
    )
    sent = json.loads(envelope.body)
    assert sent["data"] == {"id": "batches/signed"}, "the signed claims, not the unsigned body"
    assert "aud" not in sent and "jti" not in sent


def test_claims_without_an_event_use_the_body(ingress):
    token = sign(KEY, "gemini-1", claims(type=None, data=None, version=None, jti="evt-body"))
    body = gemini_body("batch.failed", "batches/from-body")

    response = post(ingress, token, body)

    assert (response.status_code, response.json["event"]) == (202, "batch.failed")
    [task] = ingress.tasks()
    assert EnvelopeSealer([LOCAL_ENVELOPE_KEY]).open(task.http_request.body).body == body


def _header_alg(token: str, alg: str) -> str:
    import base64

    head = base64.urlsafe_b64encode(json.dumps({"alg": alg, "kid": "gemini-1"}).encode())
    return head.decode().rstrip("=") + token[token.index(".") :]


def _refused_tokens() -> list[tuple[str, str]]:
    now = int(time.time())
    good = sign(KEY, "gemini-1", claims())
    return [
        ("wrong audience", sign(KEY, "gemini-1", claims(aud="https://someone-else.example/"))),
        ("wrong issuer", sign(KEY, "gemini-1", claims(iss="https://evil.example"))),
        ("unknown kid", sign(STRANGER, "gemini-9", claims())),
        ("known kid, another key", sign(STRANGER, "gemini-1", claims())),
        ("alg none", _header_alg(good, "none").rsplit(".", 1)[0] + "."),
        ("alg HS256", _header_alg(good, "HS256")),
        ("expired", sign(KEY, "gemini-1", claims(iat=now - 900, exp=now - 600))),
    ]


@pytest.mark.parametrize("name", [name for name, _ in _refused_tokens()])
def test_a_bad_token_is_401_and_nothing_is_enqueued(ingress, name):
    token = dict(_refused_tokens())[name]

    response = post(ingress, token)

    assert response.status_code == 401, (name, response.json)
    assert ingress.tasks() == [], name


def test_a_jwks_outage_is_503_and_nothing_is_enqueued(ingress, keys):
    keys.fail = True

    response = post(ingress, sign(KEY, "gemini-1", claims()))

    assert response.status_code == 503
    assert ingress.tasks() == []


def test_a_jwt_cannot_take_a_static_deliverys_slot(ingress):
    body = gemini_body("batch.succeeded", "batches/static")
    static = ingress.client.post("/gemini", headers=gemini_headers(body, msg_id="msg_1"), data=body)
    # The JWT delivery presents the same unsigned webhook-id; its signed jti is the same text too.
    dynamic = post(ingress, sign(KEY, "gemini-1", claims(jti="msg_1")), msg_id="msg_1")

    assert (static.status_code, dynamic.status_code) == (202, 202)
    assert (static.json["delivery_id"], dynamic.json["delivery_id"]) == ("msg_1", "jwt:msg_1")
    assert len(ingress.tasks()) == 2


def test_a_jwt_cannot_take_another_jwt_deliverys_slot(ingress):
    first = post(ingress, sign(KEY, "gemini-1", claims(jti="evt-a")), msg_id="msg_same")
    second = post(ingress, sign(KEY, "gemini-1", claims(jti="evt-b")), msg_id="msg_same")
    no_jti = post(ingress, sign(KEY, "gemini-1", claims(jti=None)), msg_id="msg_same")

    assert [r.status_code for r in (first, second, no_jti)] == [202, 202, 202]
    assert len(ingress.tasks()) == 3


def test_the_same_token_twice_is_one_task(ingress):
    token = sign(KEY, "gemini-1", claims(jti="evt-twice"))

    answers = [post(ingress, token, msg_id=f"msg_{i}") for i in range(2)]

    assert [a.json["status"] for a in answers] == ["accepted", "duplicate"]
    assert len(ingress.tasks()) == 1


@pytest.mark.parametrize(
    ("name", "variable"),
    [
        ("GEMINI_JWKS_URL empty", "GEMINI_JWKS_URL"),
        ("no audience (demo)", "GEMINI_WEBHOOK_AUDIENCE"),
    ],
)
def test_with_dynamic_webhooks_off_a_jwt_is_401_and_no_key_is_fetched(
    ingress, keys, monkeypatch, name, variable
):
    if variable == "GEMINI_JWKS_URL":
        monkeypatch.setenv(variable, "")
    else:
        monkeypatch.delenv(variable)
    client = _load_app().test_client()

    response = client.post(
        "/gemini", headers=jwt_headers(sign(KEY, "gemini-1", claims())), data=gemini_body()
    )

    assert response.status_code == 401, name
    assert (keys.hits, ingress.tasks()) == (0, []), name
