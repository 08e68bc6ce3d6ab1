"""The worker decision: verify what Cloud Tasks brings, record it, run its handler, answer.

Answers drive Cloud Tasks: 2xx stops retries, anything else retries with backoff.
- 401/403: the token or the envelope does not verify; nothing is written.
- 200: done, ignored, a duplicate of a finished delivery, or dead (recorded with the
  reason: a permanent failure, or a retryable one past `WORKER_MAX_RETRIES`).
- 503: a retryable failure (upstream timeout/429/5xx, Firestore unavailable).

"Retry or dead" is read from the error tree (shared/errors.py, `retryable(exc)`), never
re-derived here: see docs/architecture.md, "worker".
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import Any

from shared import handlers, logs
from shared.claims import ClaimError
from shared.clock import Clock, system_clock
from shared.config import Config
from shared.entrypoints.http import Endpoint, Reply
from shared.envelope import Envelope, EnvelopeSealer, resolve_body
from shared.errors import retryable
from shared.handler_context import ClientFactories, HandlerContext
from shared.handlers import Done, Event, Ignored, Unresolved
from shared.ledger import Ledger, LedgerError
from shared.oidc import OidcError, OidcVerifier
from shared.signatures import VerificationError

log = logs.get_logger("worker")

# Deliveries in these states are finished: a redelivery changes nothing.
FINISHED = frozenset({"done", "ignored", "dead", "unresolved"})


class Worker(Endpoint):
    """Runs the handler of each sealed envelope Cloud Tasks delivers; built once per process.

    Handlers receive `context`, or, for callers that pass `services` (a name -> client
    lookup, as tests do), a context built on it with `ClientFactories.from_lookup`.
    """

    def __init__(
        self,
        config: Config,
        *,
        sealer: EnvelopeSealer,
        ledger: Ledger,
        context: HandlerContext | None = None,
        services: Callable[[str], Any] | None = None,
        oidc: OidcVerifier | None = None,
        clock: Clock = system_clock,
    ) -> None:
        self._config = config
        self._sealer = sealer
        self._ledger = ledger
        self._oidc = oidc
        if context is None:
            lookup = services or _no_services
            context = HandlerContext(
                config, ClientFactories.from_lookup(ledger, lookup), clock=clock
            )
        self._context = context

    def post(self, route: str, headers: Mapping[str, str], body: bytes) -> Reply:
        """Verify the caller and the envelope, then run the delivery; any path is accepted."""
        if self._oidc is not None:
            try:
                self._oidc.verify(headers)
            except OidcError as exc:
                logs.event(log, logging.WARNING, "worker call refused", reason=str(exc))
                return Reply(exc.status, {"error": str(exc)})
        try:
            envelope = self._sealer.open(body)
        except VerificationError as exc:
            logs.event(log, logging.WARNING, "envelope refused", reason=str(exc))
            return Reply(401, {"error": f"envelope: {exc}"})
        retry_count = _int(headers.get("X-CloudTasks-TaskRetryCount"))
        return self._run(envelope, retry_count)

    def _run(self, envelope: Envelope, retry_count: int) -> Reply:
        source, delivery_id, event_type = envelope.source, envelope.delivery_id, envelope.event
        ids: dict[str, Any] = {"source": source, "delivery_id": delivery_id, "event": event_type}
        try:
            raw = resolve_body(envelope, self._context.claims if envelope.claim else None)
        except ClaimError as exc:
            if retryable(exc):
                return self._retry(ids, f"claim store unavailable: {exc}")
            return self._dead(ids, f"payload claim unusable: {exc}", record=True)
        try:
            recorded = self._ledger.record_delivery(
                source,
                delivery_id,
                event_type,
                # A claim-checked body stays behind its reference: stored once, not twice.
                payload=raw if envelope.claim is None else None,
                payload_ref=envelope.claim,
            )
        except LedgerError as exc:
            return self._retry(ids, f"recording the delivery failed: {exc}")
        if not recorded.new and recorded.delivery.status in FINISHED:
            return Reply(
                200, {"status": "duplicate", **ids, "delivery_status": recorded.delivery.status}
            )
        fn = handlers.lookup(source, event_type)
        if fn is None:
            return self._finish(ids, "ignored", "no handler registered")
        event = Event(source, event_type, delivery_id, envelope.received_at, raw, envelope.headers)
        try:
            outcome = fn(event, self._context)
        except Exception as exc:  # the error tree, not this handler, says retry or dead
            return self._failed(ids, exc, retry_count)
        if isinstance(outcome, Ignored):
            return self._finish(ids, "ignored", outcome.detail)
        if isinstance(outcome, Unresolved):
            return self._finish(ids, "unresolved", outcome.detail, error=outcome.detail)
        assert isinstance(outcome, Done)
        return self._finish(ids, "done", outcome.detail)

    def _failed(self, ids: dict[str, Any], exc: Exception, retry_count: int) -> Reply:
        """A handler raised: 503 while `retryable(exc)` and under the limit, else dead."""
        if not retryable(exc):
            return self._dead(ids, str(exc))
        reason = f"{type(exc).__name__}: {exc}"
        if retry_count >= self._config.worker_max_retries:
            return self._dead(ids, f"gave up after {retry_count} retries: {reason}")
        return self._retry(ids, reason)

    def _finish(
        self, ids: dict[str, Any], status: str, detail: str, error: str | None = None
    ) -> Reply:
        try:
            self._ledger.mark_delivery(ids["source"], ids["delivery_id"], status, error=error)
        except LedgerError as exc:
            return self._retry(ids, f"marking the delivery {status} failed: {exc}")
        logs.event(log, logging.INFO, f"delivery {status}: {detail}", **ids)
        return Reply(200, {"status": status, "detail": detail, **ids})

    def _dead(self, ids: dict[str, Any], reason: str, record: bool = False) -> Reply:
        try:
            if record:
                self._ledger.record_delivery(ids["source"], ids["delivery_id"], ids["event"])
            self._ledger.mark_delivery(ids["source"], ids["delivery_id"], "dead", error=reason)
        except LedgerError as exc:
            return self._retry(ids, f"recording the dead delivery failed: {exc}")
        logs.event(
            log,
            logging.ERROR,
            f"delivery {ids['delivery_id']} dead: {reason}",
            alert="delivery_dead",
            reason=reason,
            **ids,
        )
        return Reply(200, {"status": "dead", "reason": reason, **ids})

    def _retry(self, ids: dict[str, Any], reason: str) -> Reply:
        logs.event(
            log,
            logging.WARNING,
            f"delivery {ids['delivery_id']} will be retried",
            reason=reason,
            **ids,
        )
        # The retry itself is what matters; the record catches up on the next attempt.
        with contextlib.suppress(LedgerError):
            self._ledger.mark_delivery(ids["source"], ids["delivery_id"], "queued", error=reason)
        return Reply(503, {"status": "retry", "reason": reason, **ids})


def _no_services(name: str) -> Any:
    raise LookupError(f"no {name} client was given to this worker")


def _int(value: str | None) -> int:
    try:
        return max(0, int(value or 0))
    except ValueError:
        return 0
