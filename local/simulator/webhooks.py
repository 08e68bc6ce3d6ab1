"""Sending Gemini-style completion webhooks, signed per Standard Webhooks.

Each event is one message: one `webhook-id`, one timestamp, one body, POSTed to every
target from a background thread (so the control call that triggered it returns fast),
retried a bounded number of times on non-2xx or transport errors with doubling
backoff (Gemini retries for 24 h; locally a handful is enough). Every attempt is
recorded for tests (`Dispatcher.attempts()`), and so is a message the fault model
dropped (`dropped: true`, never sent). Copies of one message share its `webhook-id`.

Signing uses the `standardwebhooks` reference library, an implementation independent
of hookledger's own verifier, so end-to-end tests cross-check the two.

Envelope (the Webhooks guide, ai.google.dev/gemini-api/docs/webhooks): `{type, version:
"v1", timestamp, data: {id, …}}`; a `*.failed` event adds `error_code` and
`error_message`, a succeeded batch with a results file adds `file_name` and
`output_file_uri`. `data.id` is the full resource name, the bare id, or (the default) each in turn
(`DATA_ID_FORMS`), since Gemini may send either. With `cancel_events` off no
`*.cancelled` event is ever sent: the webhooks API reference and google-genai's enums
no longer list them (the guide still does), so hookledger must settle cancellations
through reconcile alone.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import requests
from standardwebhooks import Webhook

from local.simulator.errors import SimError
from local.simulator.gemini import rfc3339
from local.simulator.state import World
from shared.logs import event, get_logger

logger = get_logger("simulator.webhooks")

# How `data.id` names the operation: `name` (`batches/abc`), `bare` (`abc`), or
# `mixed` (the two in turn, message by message).
DATA_ID_FORMS = ("name", "bare", "mixed")
CANCEL_EVENTS = ("batch.cancelled", "interaction.cancelled")


@dataclass(frozen=True)
class Target:
    """Where one event goes and which secrets sign it (several during a rotation)."""

    url: str
    secrets: tuple[str, ...]
    registered_id: str | None = None  # a webhook created through the webhooks API


@dataclass(frozen=True)
class Message:
    webhook_id: str
    timestamp: int
    body: bytes
    event_type: str
    operation: str


@dataclass
class Attempt:
    """One POST of one message to one target, as `GET /_sim/webhook-deliveries` lists it."""

    webhook_id: str
    type: str
    operation: str
    target: str
    copy: int
    attempt: int
    status: int | None
    ok: bool
    error: str | None
    at: str
    dropped: bool = False  # lost by the fault model (`webhook_drop_rate`): never sent


def signature_header(secrets: tuple[str, ...], message: Message) -> str:
    """`v1,<b64>` per secret, space-separated (Standard Webhooks' rotation form)."""
    from datetime import UTC, datetime

    moment = datetime.fromtimestamp(message.timestamp, UTC)
    return " ".join(
        Webhook(secret).sign(message.webhook_id, moment, message.body.decode())
        for secret in secrets
    )


class Dispatcher:
    """Builds, signs and sends events; thread-safe; `reset()` forgets recorded attempts."""

    def __init__(
        self,
        world: World,
        *,
        retries: int = 3,
        backoff_s: float = 0.2,
        timeout_s: float = 5.0,
        disable_after: int = 3,
        post: Callable[..., requests.Response] | None = None,
    ) -> None:
        self.world = world
        self.retries = retries
        self.backoff_s = backoff_s
        self.timeout_s = timeout_s
        self.disable_after = disable_after
        self._post = post or requests.post
        self._lock = threading.Lock()
        self._recorded = threading.Condition(self._lock)
        self._attempts: list[Attempt] = []
        self._threads: list[threading.Thread] = []
        self.data_id_form = "mixed"
        self.cancel_events = True
        self._messages = 0

    def reset(self) -> None:
        """Forget recorded attempts and return the webhook mode to its defaults."""
        with self._lock:
            self._attempts = []
            self.data_id_form = "mixed"
            self.cancel_events = True
            self._messages = 0

    def set_mode(self, data_id: str | None = None, cancel_events: bool | None = None) -> None:
        """Change how `data.id` is written and whether cancel events go out (None: keep)."""
        if data_id is not None and data_id not in DATA_ID_FORMS:
            raise ValueError(f"data_id must be one of {list(DATA_ID_FORMS)}, got {data_id!r}")
        with self._lock:
            if data_id is not None:
                self.data_id_form = data_id
            if cancel_events is not None:
                self.cancel_events = cancel_events

    def mode(self) -> dict[str, Any]:
        with self._lock:
            return {"data_id": self.data_id_form, "cancel_events": self.cancel_events}

    def _data_id(self, operation: str) -> str:
        with self._lock:
            form = self.data_id_form
            self._messages += 1
            turn = self._messages
        if form == "mixed":
            form = "bare" if turn % 2 == 0 else "name"
        if form == "bare" and not operation.startswith("webhooks/"):
            return operation.rsplit("/", 1)[-1]
        return operation

    def _envelope_fields(self, event_type: str, operation: str) -> dict[str, Any]:
        """The documented per-event fields: the error of a failure, the results file."""
        resource: Any = None
        try:
            if operation.startswith("batches/"):
                resource = self.world.batch(operation.removeprefix("batches/"))
            elif not operation.startswith("webhooks/"):
                resource = self.world.operation(operation)
        except SimError:  # the resource is gone (a reset): the event keeps just its id
            return {}
        fields: dict[str, Any] = {}
        error = getattr(resource, "error", None)
        if event_type.endswith(".failed") and isinstance(error, dict):
            fields["error_code"] = error.get("code")
            fields["error_message"] = error.get("message")
        # A file-input batch reports its results as a generated file (state.Batch.output_file).
        results_file = getattr(resource, "output_file", None)
        if event_type == "batch.succeeded" and isinstance(results_file, str) and results_file:
            fields["file_name"] = results_file
            fields["output_file_uri"] = (
                f"https://generativelanguage.googleapis.com/v1beta/{results_file}"
            )
        return fields

    def attempts(self, operation: str | None = None) -> list[dict[str, Any]]:
        with self._lock:
            found = [a for a in self._attempts if operation is None or a.operation == operation]
            return [asdict(a) for a in found]

    def message(
        self, event_type: str, operation: str, extra: dict[str, Any] | None = None
    ) -> Message:
        now = self.world.clock()
        body = {
            "type": event_type,
            "version": "v1",
            "timestamp": rfc3339(now),
            "data": {
                "id": self._data_id(operation),
                **self._envelope_fields(event_type, operation),
                **(extra or {}),
            },
        }
        return Message(
            webhook_id=f"msg_{uuid.uuid4().hex}",
            timestamp=int(now.timestamp()),
            body=json.dumps(body, separators=(",", ":")).encode(),
            event_type=event_type,
            operation=operation,
        )

    def dispatch(self, message: Message, targets: list[Target], copies: int = 1) -> None:
        """Send `message` `copies` times (identical bytes and headers) to each target;
        nothing at all for a cancel event while `cancel_events` is off."""
        if message.event_type in CANCEL_EVENTS and not self.cancel_events:
            event(
                logger,
                logging.INFO,
                "cancel event not sent (cancel_events off)",
                webhook_id=message.webhook_id,
                operation=message.operation,
            )
            return
        generation = self.world.generation
        for target in targets:
            thread = threading.Thread(
                target=self._deliver,
                args=(message, target, copies, generation),
                name=f"webhook-{message.webhook_id}",
                daemon=True,
            )
            thread.start()
            with self._lock:
                self._threads = [t for t in self._threads if t.is_alive()] + [thread]

    def record_dropped(self, message: Message, targets: list[Target]) -> None:
        """Record `message` as dropped for each target (copy and attempt 0, nothing sent)."""
        if message.event_type in CANCEL_EVENTS and not self.cancel_events:
            return  # never sent at all: there is no drop to record
        for target in targets:
            self._append(
                Attempt(
                    webhook_id=message.webhook_id,
                    type=message.event_type,
                    operation=message.operation,
                    target=target.url,
                    copy=0,
                    attempt=0,
                    status=None,
                    ok=False,
                    error="dropped by the simulator's fault model (webhook_drop_rate)",
                    at=rfc3339(self.world.clock()),
                    dropped=True,
                )
            )
        event(
            logger,
            logging.INFO,
            "webhook dropped by the fault model",
            webhook_id=message.webhook_id,
            operation=message.operation,
            targets=len(targets),
        )

    def wait_for_attempts(self, webhook_id: str, count: int, timeout: float) -> bool:
        """Block until `count` attempts of `webhook_id` are recorded; False on `timeout`."""

        def enough() -> bool:
            return sum(1 for a in self._attempts if a.webhook_id == webhook_id) >= count

        with self._recorded:
            return self._recorded.wait_for(enough, timeout)

    def wait_idle(self, timeout: float = 10.0) -> None:
        """Block until every delivery started so far has finished (for shutdown)."""
        deadline = time.monotonic() + timeout
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def _deliver(self, message: Message, target: Target, copies: int, generation: int) -> None:
        headers = {
            "content-type": "application/json",
            "user-agent": "hookledger-gemini-simulator",
            "webhook-id": message.webhook_id,
            "webhook-timestamp": str(message.timestamp),
            "webhook-signature": signature_header(target.secrets, message),
        }
        delivered_all = True
        for copy in range(1, copies + 1):
            delivered_all = self._deliver_copy(message, target, headers, copy, generation) and (
                delivered_all
            )
        if target.registered_id is not None and generation == self.world.generation:
            self.world.record_delivery_outcome(
                target.registered_id, delivered_all, self.disable_after
            )

    def _deliver_copy(
        self,
        message: Message,
        target: Target,
        headers: dict[str, str],
        copy: int,
        generation: int,
    ) -> bool:
        for attempt in range(1, self.retries + 2):
            if generation != self.world.generation:
                return False  # the world was reset: this delivery no longer exists
            status: int | None = None
            error: str | None = None
            try:
                response = self._post(
                    target.url, data=message.body, headers=headers, timeout=self.timeout_s
                )
                status = response.status_code
                ok = 200 <= status < 300
                if not ok:
                    error = f"HTTP {status}"
            except requests.RequestException as exc:
                ok = False
                error = f"{type(exc).__name__}: {exc}"
            if generation != self.world.generation:
                return ok  # the world was reset meanwhile: this delivery no longer exists
            self._record(message, target, copy, attempt, status, ok, error)
            if ok:
                return True
            event(
                logger,
                logging.WARNING,
                "webhook delivery attempt failed",
                webhook_id=message.webhook_id,
                operation=message.operation,
                target=target.url,
                attempt=attempt,
                error=error,
            )
            if attempt <= self.retries:
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
        event(
            logger,
            logging.ERROR,
            "webhook delivery gave up",
            webhook_id=message.webhook_id,
            operation=message.operation,
            target=target.url,
            attempts=self.retries + 1,
        )
        return False

    def _record(
        self,
        message: Message,
        target: Target,
        copy: int,
        attempt: int,
        status: int | None,
        ok: bool,
        error: str | None,
    ) -> None:
        self._append(
            Attempt(
                webhook_id=message.webhook_id,
                type=message.event_type,
                operation=message.operation,
                target=target.url,
                copy=copy,
                attempt=attempt,
                status=status,
                ok=ok,
                error=error,
                at=rfc3339(self.world.clock()),
            )
        )

    def _append(self, attempt: Attempt) -> None:
        with self._recorded:
            self._attempts.append(attempt)
            self._recorded.notify_all()
