"""The worker decision: verify what Cloud Tasks brings, record it, run its handler, answer.

Answers drive Cloud Tasks: 2xx stops retries, anything else retries with backoff.
- 401/403: the token or the envelope does not verify; nothing is written.
- 200: done, ignored, a duplicate of a finished delivery, or dead (recorded with the
  reason: a permanent failure, or a retryable one past `WORKER_MAX_RETRIES`).
- 202 `deferred`: the handler raised `Deferred` ("not yet, not a failure"): the same
  sealed envelope went back to the queue as a new task `after_s` later, so the wait
  spends none of the delivery's retries.
- 503: a retryable failure (upstream timeout/429/5xx, Firestore unavailable, a deferral
  that could not be re-enqueued), or `busy`: another attempt holds the delivery's lease,
  so this one runs nothing and marks nothing.

Each attempt takes a lease on its delivery when it records it (a new uuid4 id, for the
worker timeout plus a margin) and hands it to the handler as `event.attempt`; only the
attempt holding the lease may mark the delivery, and a finished delivery never moves back
(docs/architecture.md, "Delivery lease"). "Retry or dead" is read from the error tree
(shared/errors.py, `retryable(exc)`), never re-derived here: see docs/architecture.md,
"worker". The marks and answers are in answers.py; several apps on one event in
app_fanout.py.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from shared import handlers, logs, tracing
from shared.clock import Clock, system_clock
from shared.config import Config
from shared.crashpoints import crash_point
from shared.entrypoints.answers import DEFER_MAX_S as DEFER_MAX_S  # re-exported
from shared.entrypoints.answers import DEFER_MIN_S as DEFER_MIN_S  # re-exported
from shared.entrypoints.answers import DEFERRALS_HEADER, Answers, Task
from shared.entrypoints.app_fanout import AppFanOut
from shared.entrypoints.http import Endpoint, Reply
from shared.errors import Deferred, retryable
from shared.handlers import Attempt, Done, Event, Ignored, Unresolved
from shared.handlers.context import ClientFactories, HandlerContext
from shared.handoff.envelope import Envelope, EnvelopeSealer, resolve_body
from shared.handoff.payloads import PayloadError
from shared.ledger import (
    FINISHED_DELIVERY_STATUSES,
    DeliveryEnd,
    Ledger,
    LedgerError,
    Recorded,
)
from shared.retry import server_error
from shared.signatures import VerificationError
from shared.signatures.oidc import OidcError, OidcVerifier
from shared.statuses import DeliveryStatus

log = logs.get_logger("worker")

# Deliveries in these states are finished: a redelivery changes nothing.
FINISHED = FINISHED_DELIVERY_STATUSES


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
        self._fan_out = AppFanOut(config, sealer, ledger, context)
        self._answers = Answers(config, ledger, context)

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
        task = Task(
            envelope,
            body,
            _int(headers.get("X-CloudTasks-TaskRetryCount")),
            # Not from the queue (a test, a tool): this call is its own task.
            headers.get("X-CloudTasks-TaskName") or uuid.uuid4().hex,
            _int(headers.get(DEFERRALS_HEADER)),
        )
        with _attempt_span(envelope, headers, task.retry_count) as span:
            reply = self._run(task)
            _end_attempt_span(span, reply)
        return reply

    def _run(self, task: Task) -> Reply:
        envelope = task.envelope
        source, event_type = envelope.source, envelope.event
        unusable: str | None = None
        try:
            raw = resolve_body(envelope, self._context.payloads if envelope.payload_ref else None)
        except PayloadError as exc:
            if retryable(exc):
                first = {"source": source, "delivery_id": envelope.delivery_id, "event": event_type}
                return self._answers.retry(first, f"payload store unavailable: {exc}")
            raw, unusable = b"", f"stored payload unusable: {exc}"
        reg, key = self._fan_out.registration(envelope, raw)
        ids: dict[str, Any] = {"source": source, "delivery_id": key, "event": event_type}
        if envelope.app is not None:
            ids["app"] = envelope.app
        reply = self._run_registration(task, raw, unusable, reg, ids)
        if envelope.app is not None and reply.status == 200:
            self._fan_out.complete(envelope, raw)
        return reply

    def _run_registration(
        self,
        task: Task,
        raw: bytes,
        unusable: str | None,
        reg: handlers.Registration | None,
        ids: dict[str, Any],
    ) -> Reply:
        envelope = task.envelope
        source, delivery_id, event_type = ids["source"], ids["delivery_id"], ids["event"]
        attempt = uuid.uuid4().hex  # this run's name on the lease; never shared by two runs
        # A stored body stays behind its reference: stored once, not twice. An app's
        # own record keeps neither: the delivery's record holds the body.
        # A stored body is marked by the digest the envelope sealed (replays).
        stored = _Stored(
            raw if envelope.payload_ref is None else None,
            envelope.payload_ref,
            envelope.body_sha256,
        )
        if envelope.app is not None:
            stored = _Stored(None, None, None)
        if reg is not None and unusable is None and not reg.leased:
            return self._run_unleased(ids, raw, reg, stored, attempt, task)
        # The push's submission (not the payload's claim check) the handler will claim.
        context = self._context.for_app(reg.app) if reg is not None else self._context
        claims = reg.claims if reg is not None and unusable is None else None
        submission = claims(raw, context) if claims is not None else None
        lease_for = timedelta(seconds=self._config.delivery_lease_s)
        what = (source, delivery_id, event_type, stored.payload, stored.ref)
        try:
            if submission is None:
                recorded = self._ledger.deliveries.record(
                    *what, attempt=attempt, lease_for=lease_for, body_sha256=stored.sha256
                )
            else:  # a push's first run: its delivery and its submission in one commit
                recorded = self._ledger.record_and_claim(
                    *what,
                    attempt=attempt,
                    lease_for=lease_for,
                    tag=submission.tag,
                    context=submission.context,
                    body_sha256=stored.sha256,
                )
        except LedgerError as exc:
            return self._answers.retry(ids, f"recording the delivery failed: {exc}")
        if recorded.delivery.finished:
            return Reply(
                200, {"status": "duplicate", **ids, "delivery_status": recorded.delivery.status}
            )
        if recorded.busy:
            return self._answers.busy(ids, recorded.delivery)
        crash_point("push.delivery.recorded")
        if unusable is not None:
            return self._answers.dead(ids, attempt, unusable)
        if reg is None:
            return self._answers.finish(ids, attempt, "ignored", "no handler registered")
        event = Event(
            source,
            event_type,
            envelope.delivery_id,
            envelope.received_at,
            raw,
            envelope.headers,
            attempt=Attempt(attempt, expires_at=_lease_end(recorded)),
            claimed=recorded.claimed,
            end=DeliveryEnd(source, delivery_id, attempt),
        )
        return self._handle(reg.fn, event, ids, attempt, task, context)

    def _run_unleased(
        self,
        ids: dict[str, Any],
        raw: bytes,
        reg: handlers.Registration,
        stored: _Stored,
        attempt: str,
        task: Task,
    ) -> Reply:
        """A handler whose own commit makes a second run harmless (a settlement): no lease,
        and the delivery is recorded `done` in that commit, created if it is new (one commit
        per event), on condition it is as this run's dedupe read found it (one read). Any
        other outcome records it first, then marks it as usual (a `Deferred` too)."""
        envelope = task.envelope
        source, delivery_id, event_type = ids["source"], ids["delivery_id"], ids["event"]
        try:
            seen = self._ledger.deliveries.read(source, delivery_id)
            _, fields = self._ledger.deliveries.new_record(
                source, delivery_id, event_type, stored.payload, stored.ref
            )
        except LedgerError as exc:
            return self._answers.retry(ids, f"reading the delivery failed: {exc}")
        known = seen.delivery
        if known is not None and known.finished:
            return Reply(200, {"status": "duplicate", **ids, "delivery_status": known.status})
        end = DeliveryEnd(
            source, delivery_id, None, new=fields, seen=seen, body_sha256=stored.sha256
        )
        event = Event(
            source,
            event_type,
            envelope.delivery_id,
            envelope.received_at,
            raw,
            envelope.headers,
            attempt=Attempt(attempt),
            end=end,
        )
        try:
            outcome = reg.fn(event, self._context.for_app(reg.app))
        except Exception as exc:  # recorded first: the marks below need the record
            return self._recorded(ids, stored) or self._failed(ids, None, exc, task)
        return (
            _done_in_commit(outcome, end, ids)
            or self._recorded(ids, stored)
            or self._outcome(outcome, ids, None)
        )

    def _recorded(self, ids: dict[str, Any], stored: _Stored) -> Reply | None:
        """Record an unleased run's delivery (if new) so it can be marked; a retry if not."""
        try:
            self._ledger.deliveries.record(
                ids["source"],
                ids["delivery_id"],
                ids["event"],
                stored.payload,
                stored.ref,
                body_sha256=stored.sha256,
            )
        except LedgerError as exc:
            return self._answers.retry(ids, f"recording the delivery failed: {exc}")
        return None

    def _handle(
        self,
        fn: handlers.Handler,
        event: Event,
        ids: dict[str, Any],
        attempt: str,
        task: Task,
        context: HandlerContext,
    ) -> Reply:
        try:
            outcome = fn(event, context)
        except Exception as exc:  # the error tree, not this handler, says retry or dead
            return self._failed(ids, attempt, exc, task)
        crash_point("push.before_done")
        return _done_in_commit(outcome, event.end, ids) or self._outcome(outcome, ids, attempt)

    def _outcome(
        self, outcome: handlers.Outcome, ids: dict[str, Any], attempt: str | None
    ) -> Reply:
        if isinstance(outcome, Ignored):
            return self._answers.finish(ids, attempt, "ignored", outcome.detail)
        if isinstance(outcome, Unresolved):
            return self._answers.finish(
                ids, attempt, "unresolved", outcome.detail, error=outcome.detail
            )
        assert isinstance(outcome, Done)
        return self._answers.finish(ids, attempt, "done", outcome.detail)

    def _failed(
        self,
        ids: dict[str, Any],
        attempt: str | None,
        exc: Exception,
        task: Task,
    ) -> Reply:
        """A handler raised: deferred for a `Deferred`; else 503 while `retryable(exc)` and
        under the limit, else dead."""
        if isinstance(exc, Deferred):
            return self._answers.defer(ids, attempt, exc, task)
        retry_count = task.retry_count
        if not retryable(exc):
            return self._answers.dead(ids, attempt, str(exc))
        reason = f"{type(exc).__name__}: {exc}"
        if retry_count >= self._config.worker_max_retries:
            return self._answers.dead(
                ids, attempt, f"gave up after {retry_count} retries: {reason}"
            )
        return self._answers.retry(
            ids, reason, attempt, recorded=True
        )  # _failed runs after the record


def _attempt_span(
    envelope: Envelope, headers: Mapping[str, str], retry_count: int
) -> AbstractContextManager[tracing.Span]:
    """This attempt's span, in the trace the ingress's hand-off started: its traceparent
    rides in the signed envelope (Cloud Run may re-parent the header's), else the header."""
    if not tracing.enabled():
        return tracing.span("worker.attempt")
    attributes: dict[str, Any] = {
        "source": envelope.source,
        "event": envelope.event,
        "delivery_id": envelope.delivery_id,
        "cloudtasks.task_name": headers.get("X-CloudTasks-TaskName"),
        "cloudtasks.retry_count": retry_count,
        "cloudtasks.execution_count": _int(headers.get("X-CloudTasks-TaskExecutionCount")),
        "cloudtasks.retry_reason": headers.get("X-CloudTasks-TaskRetryReason"),
    }
    parent = envelope.headers.get(tracing.TRACEPARENT) or headers.get(tracing.TRACEPARENT)
    return tracing.span("worker.attempt", parent=parent, kind="server", **attributes)


def _end_attempt_span(span: tracing.Span, reply: Reply) -> None:
    """The outcome on the span; a retry is an error, a dead delivery's trace always kept."""
    status = reply.body.get("status")
    span.set(outcome=status, **{"http.response.status_code": reply.status})
    if status == DeliveryStatus.DEAD:
        span.keep()
        span.fail(str(reply.body.get("reason")))
    elif server_error(reply.status) and status != "busy":  # busy: another attempt is running it
        span.fail(str(reply.body.get("reason") or reply.body.get("error")))


class _Stored(NamedTuple):
    """What the delivery record keeps of the body: the body, or its stored payload's reference
    and the digest the envelope sealed (an app's own record keeps none: see app_fanout)."""

    payload: bytes | None
    ref: str | None
    sha256: str | None


def _done_in_commit(
    outcome: handlers.Outcome, end: DeliveryEnd | None, ids: dict[str, Any]
) -> Reply | None:
    """200 `done` when the handler's own commit (the push's winner, a settlement) marked
    the delivery done (`end.applied`); None when the worker must still mark it."""
    if not (isinstance(outcome, Done) and end is not None and end.applied):
        return None
    logs.event(log, logging.INFO, f"delivery done: {outcome.detail}", **ids)
    return Reply(200, {"status": DeliveryStatus.DONE, "detail": outcome.detail, **ids})


def _lease_end(recorded: Recorded) -> datetime | None:
    lease = recorded.delivery.lease
    return lease.until if lease is not None else None


def _no_services(name: str) -> Any:
    raise LookupError(f"no {name} client was given to this worker")


def _int(value: str | None) -> int:
    try:
        return max(0, int(value or 0))
    except ValueError:
        return 0
