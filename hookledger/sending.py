"""Sign a recorded webhook as its sender would and post it to an ingress.

    sent = send_event(ingress_url, "github", "push", body, secret=LOCAL_GITHUB_SECRET)
    sent.status, sent.delivery_id, sent.answer

GitHub's: the body as given, byte for byte, with `X-GitHub-Event`, `X-GitHub-Delivery`
(a new UUID unless given) and `X-Hub-Signature-256`. Gemini's (Standard Webhooks): the
body's `type` is the event and must equal `event`; `webhook-id` (a new `msg_…` unless
given), `webhook-timestamp` (now) and a `v1` signature. Used by `hookledger send` and the
test kit (hookledger/testing); nothing here reads the environment.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import requests

from shared.signatures import github_headers as signed_github_headers
from shared.signatures.standard_webhooks import sign_standard_webhook

SOURCES = ("github", "gemini")
DEFAULT_TIMEOUT_S = 10.0  # GitHub's own limit for an answer


class SendError(ValueError):
    """The event cannot be sent as given (unknown source, a body that is not its event)."""


@dataclass(frozen=True)
class Sent:
    """What the ingress answered: its status, its JSON answer (or text), the delivery id,
    and the source it was sent as."""

    status: int
    answer: Any
    delivery_id: str
    source: str = "github"

    @property
    def accepted(self) -> bool:
        return self.status == 202


def event_body(payload: bytes | str | Mapping[str, Any]) -> bytes:
    """The bytes to sign: a recorded body as it is, a mapping as compact JSON."""
    if isinstance(payload, bytes):
        return payload
    if isinstance(payload, str):
        return payload.encode()
    return json.dumps(payload, separators=(",", ":")).encode()


def github_headers(event: str, body: bytes, secret: str, delivery_id: str) -> dict[str, str]:
    """The headers GitHub sends with a webhook (shared/signatures/github.py signs them)."""
    return signed_github_headers(event, body, secret, delivery_id, agent="hookledger-send")


def gemini_headers(body: bytes, secret: str, delivery_id: str, now: float) -> dict[str, str]:
    """The Standard Webhooks headers Gemini signs a static webhook with."""
    timestamp = int(now)
    return {
        "webhook-id": delivery_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": sign_standard_webhook(secret, delivery_id, timestamp, body),
        "Content-Type": "application/json",
    }


def gemini_event_type(body: bytes) -> str:
    """The `type` of a Gemini webhook body; SendError when the body is not one."""
    try:
        document = json.loads(body)
    except ValueError as exc:
        raise SendError(f"a Gemini webhook body is JSON; this is not ({exc})") from None
    kind = document.get("type") if isinstance(document, dict) else None
    if not isinstance(kind, str) or not kind:
        raise SendError('a Gemini webhook body has a "type" ("batch.succeeded", …); this has none')
    return kind


def prepare(
    source: str,
    event: str,
    body: bytes,
    *,
    secret: str,
    delivery_id: str | None = None,
    now: float | None = None,
) -> tuple[str, dict[str, str]]:
    """(delivery id, headers) for posting `body` as `source`'s `event`; SendError if it
    cannot be."""
    if source == "github":
        delivery = delivery_id or str(uuid.uuid4())
        return delivery, github_headers(event, body, secret, delivery)
    if source == "gemini":
        kind = gemini_event_type(body)
        if kind != event:
            raise SendError(f"the body's type is {kind!r}, not {event!r}")
        delivery = delivery_id or f"msg_{uuid.uuid4().hex}"
        return delivery, gemini_headers(body, secret, delivery, time.time() if now is None else now)
    raise SendError(f"unknown source {source!r}; one of: {', '.join(SOURCES)}")


def send_event(
    ingress_url: str,
    source: str,
    event: str,
    payload: bytes | str | Mapping[str, Any],
    *,
    secret: str,
    delivery_id: str | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> Sent:
    """Sign `payload` as `source` would for `event` and POST it to `{ingress_url}/{source}`.

    Raises SendError before sending anything when the event cannot be sent as given, and
    `requests.RequestException` when the ingress does not answer.
    """
    body = event_body(payload)
    delivery, headers = prepare(source, event, body, secret=secret, delivery_id=delivery_id)
    response = requests.post(
        f"{ingress_url.rstrip('/')}/{source}", data=body, headers=headers, timeout=timeout_s
    )
    try:
        answer: Any = response.json()
    except ValueError:
        answer = response.text.strip()
    if isinstance(answer, dict) and isinstance(answer.get("delivery_id"), str):
        delivery = answer["delivery_id"]  # the ingress's own word (a JWT's id for Gemini)
    return Sent(response.status_code, answer, delivery, source)
