"""The ingress decision: verify a webhook, hand it to Cloud Tasks, answer.

It answers 2xx only once the task exists (or existed: a duplicate), so every failure
before the hand-off is a 5xx/4xx the sender retries or reports. Status codes follow
docs/architecture.md ("Contracts", ingress routes): 202 accepted, 200
ignored/duplicate/pong, 400 malformed, 401 signature, 404 route, 405 method, 413 size,
503 hand-off failed. `/healthz`, 404 and 405 are answered by `Endpoint`.

Cold start matters: nothing here imports google-cloud-firestore or google-genai.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

from shared import handlers, logs
from shared.claims import ClaimError
from shared.clock import Clock, monotonic
from shared.config import Config
from shared.entrypoints.http import Endpoint, Reply, too_large
from shared.envelope import Envelope, EnvelopeSealer, EnvelopeTooLarge, select_headers
from shared.signatures import (
    GeminiVerifier,
    GitHubVerifier,
    KeysUnavailable,
    VerificationError,
)
from shared.tasks import EnqueueError, TaskQueue, task_id_for

log = logs.get_logger("ingress")

_MAX_ID_LENGTH = 200


class _Rejected(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class Ingress(Endpoint):
    """Routes `POST /github` and `POST /gemini`; built once per process."""

    routes = frozenset({"github", "gemini"})

    def __init__(
        self,
        config: Config,
        *,
        github: GitHubVerifier,
        gemini: GeminiVerifier,
        sealer: EnvelopeSealer,
        queue: Callable[[], TaskQueue],
        clock: Clock,
    ) -> None:
        self._config = config
        self._github = github
        self._gemini = gemini
        self._sealer = sealer
        self._queue = queue
        self._clock = clock

    def post(self, route: str, headers: Mapping[str, str], body: bytes) -> Reply:
        """Verify, seal and hand off one webhook from `route` (its source: github, gemini)."""
        started = monotonic()
        source = route
        if len(body) > self._config.max_body_bytes:
            return too_large(self._config.max_body_bytes)
        try:
            if source == "github":
                reply = self._github_delivery(headers, body)
            else:
                reply = self._gemini_delivery(headers, body)
        except _Rejected as exc:
            # The id is unverified (it may be forged) but is what an operator searches for.
            claimed = headers.get("X-GitHub-Delivery") or headers.get("webhook-id") or ""
            logs.event(
                log,
                logging.WARNING,
                f"{source} webhook rejected",
                source=source,
                status=exc.status,
                reason=str(exc),
                claimed_delivery_id=claimed[:100],
            )
            return Reply(exc.status, {"error": str(exc)})
        logs.event(
            log,
            logging.INFO,
            f"{source} delivery {reply.body.get('status')}",
            source=source,
            delivery_id=reply.body.get("delivery_id"),
            event=reply.body.get("event"),
            status=reply.status,
            elapsed_ms=round((monotonic() - started) * 1000, 2),
        )
        return reply

    def _github_delivery(self, headers: Mapping[str, str], body: bytes) -> Reply:
        try:
            self._github.verify(headers, body)
        except VerificationError as exc:
            raise _Rejected(401, f"signature: {exc}") from None
        event = _header(headers, "X-GitHub-Event")
        delivery_id = _header(headers, "X-GitHub-Delivery")
        _parse_json_object(body)
        if event == "ping":
            return Reply(200, {"status": "pong", "delivery_id": delivery_id, "event": event})
        return self._hand_off("github", event, delivery_id, headers, body)

    def _gemini_delivery(self, headers: Mapping[str, str], body: bytes) -> Reply:
        try:
            delivery_id = self._gemini.verify(headers, body)
        except KeysUnavailable as exc:
            # Our JWKS fetch failed, not the sender: answer 503 so Gemini retries.
            raise _Rejected(503, f"signing keys unavailable: {exc}") from None
        except VerificationError as exc:
            raise _Rejected(401, f"signature: {exc}") from None
        _check_id(delivery_id, "webhook-id")
        payload = _parse_json_object(body)
        event = payload.get("type")
        data = payload.get("data")
        if not isinstance(event, str) or not event:
            raise _Rejected(400, "body has no event 'type'")
        if not isinstance(data, dict) or not isinstance(data.get("id"), str) or not data["id"]:
            raise _Rejected(400, "body has no 'data.id'")
        return self._hand_off("gemini", event, delivery_id, headers, body)

    def _hand_off(
        self, source: str, event: str, delivery_id: str, headers: Mapping[str, str], body: bytes
    ) -> Reply:
        if handlers.lookup(source, event) is None:
            return Reply(200, {"status": "ignored", "delivery_id": delivery_id, "event": event})
        envelope = Envelope(
            source=source,
            event=event,
            delivery_id=delivery_id,
            received_at=self._clock(),
            headers=select_headers(headers),
            body=body,
        )
        try:
            sealed = self._sealer.seal(envelope)
            result = self._queue().enqueue(
                self._config.worker_url,
                sealed,
                {"Content-Type": "application/json"},
                task_id=task_id_for(source, delivery_id),
                oidc_service_account=self._config.tasks_service_account or None,
                oidc_audience=self._config.worker_url,  # the worker checks this audience
            )
        except EnvelopeTooLarge as exc:
            raise _Rejected(413, str(exc)) from None
        except (EnqueueError, ClaimError) as exc:
            logs.event(
                log,
                logging.ERROR,
                f"hand-off failed for {source} delivery {delivery_id}",
                source=source,
                delivery_id=delivery_id,
                event=event,
                reason=str(exc),
            )
            return Reply(503, {"error": "hand-off failed; retry later", "delivery_id": delivery_id})
        status = "duplicate" if result.status == "duplicate" else "accepted"
        code = 200 if status == "duplicate" else 202
        return Reply(code, {"status": status, "delivery_id": delivery_id, "event": event})


def _header(headers: Mapping[str, str], name: str) -> str:
    value = headers.get(name)
    if not value or not value.strip():
        raise _Rejected(400, f"missing header {name}")
    value = value.strip()
    _check_id(value, name)
    return value


def _check_id(value: str, what: str) -> None:
    if len(value) > _MAX_ID_LENGTH or not value.isprintable():
        raise _Rejected(400, f"malformed {what}")


def _parse_json_object(body: bytes) -> dict[str, Any]:
    if not body:
        raise _Rejected(400, "empty body")
    try:
        payload = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise _Rejected(400, "body is not JSON") from None
    if not isinstance(payload, dict):
        raise _Rejected(400, "body is not a JSON object")
    return payload
