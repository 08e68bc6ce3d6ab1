"""The ingress decision: verify a webhook, hand it to Cloud Tasks, answer.

It answers 2xx only once the task exists (or existed: a duplicate), so every failure
before the hand-off is a 5xx/4xx: Gemini retries it for 24 h; GitHub never retries,
records the delivery failed, and the GitHub delivery sweep (shared/recovery) recovers it.
Status codes follow docs/architecture.md ("Contracts", ingress routes): 202 accepted, 200
ignored/duplicate/pong, 400 malformed, 401 signature, 404 route, 405 method, 413 size,
503 hand-off failed. `/healthz`, 404 and 405 are answered by `Endpoint`.

Order of work, cheapest refusal first; nothing is read that a header already refuses:

    before the body (`preflight`)    route 404, method 405, signature header present and
                                     well formed 401, Gemini timestamp fresh 401, event and
                                     delivery id usable 400, Content-Length over the
                                     source's limit 413
    with the body (`post`)           size 413, signature 401, JSON 400, hand-off 503

Each source has its own body limit: `MAX_BODY_BYTES` for GitHub (pushes can be large),
`MAX_GEMINI_BODY_BYTES` for Gemini (thin notifications). A delivery id is usable when it
is 1-200 printable ASCII characters without spaces: every Firestore id, payload key and task
name built from it then stays within its limits.

Dedupe: a task's name is its dedupe key. GitHub signs only the body, so a GitHub task
is named after the body's SHA-256: a redelivery (same id, same body) and a replay of a
captured body under a new id both find the name taken and answer 200 `duplicate`, logged
at WARNING with the id and the digest. That holds while Cloud Tasks keeps the name (about
an hour); past it, the worker's ledger knows the body by the same digest for the
deliveries' retention and records a replay as a duplicate of the id that carried it first
(docs/architecture.md, "Replays"): this public function reaches no ledger.
Gemini signs the id with the body, so its task is named after the id. A Gemini dynamic
webhook (an RS256 JWT in `webhook-signature`) signs neither header: its delivery id is
``jwt:<jti>`` (or ``jwt:sha256:<token hash>``) and its task is named in its own ``jwt``
namespace, so no unsigned `webhook-id` can take a static or another JWT delivery's slot.
When the token's claims carry the event (`type`, `data`), the envelope holds that signed
event, not the unsigned body. `hookledger deliveries replay` enqueues under its own task
names and never meets these.

Cold start matters: nothing here imports google-cloud-firestore or google-genai.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

import orjson
import simdjson

from shared import handlers, logs, tracing
from shared.clock import Clock, monotonic
from shared.config import Config
from shared.entrypoints.http import Endpoint, Reply, too_large
from shared.errors import PermanentError
from shared.handoff.envelope import Envelope, EnvelopeSealer, EnvelopeTooLarge, select_headers
from shared.handoff.payloads import PayloadError
from shared.handoff.tasks import EnqueueError, TaskQueue, task_id_for
from shared.handoff.to_worker import hand_to_worker
from shared.retry import server_error
from shared.signatures import (
    GITHUB_SIGNATURE_HEADER,
    WEBHOOK_ID_HEADER,
    WEBHOOK_SIGNATURE_HEADER,
    WEBHOOK_TIMESTAMP_HEADER,
    GeminiVerifier,
    GitHubVerifier,
    KeysUnavailable,
    VerificationError,
    header,
    looks_like_jwt,
)

log = logs.get_logger("ingress")
T = TypeVar("T")

# Printable ASCII without spaces: its UTF-8, percent-quoted form fits every id built from it.
_USABLE_ID = re.compile(r"[\x21-\x7e]{1,200}")
# The envelope carries an event name of at most 128 characters.
_USABLE_EVENT = re.compile(r"[\x21-\x7e]{1,128}")
_GITHUB_SIGNATURE = re.compile(r"sha256=[0-9a-fA-F]{64}")
_TIMESTAMP = re.compile(r"[0-9]{1,12}")


class _Rejected(PermanentError):
    """The request itself is refused (a 4xx): the sender's retry of it cannot succeed."""

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

    def body_limit(self, route: str) -> int:
        """`MAX_GEMINI_BODY_BYTES` for /gemini, `MAX_BODY_BYTES` for /github."""
        if route == "gemini":
            return self._config.max_gemini_body_bytes
        return self._config.max_body_bytes

    def check_headers(self, route: str, headers: Mapping[str, str]) -> Reply | None:
        """Refuse, before the body is read, a request whose headers already fail (module doc)."""
        try:
            if route == "github":
                _github_headers(headers)
            else:
                self._gemini_headers(headers)
        except _Rejected as exc:
            return _refused(route, headers, exc.status, str(exc))
        return None

    def post(self, route: str, headers: Mapping[str, str], body: bytes) -> Reply:
        """Verify, seal and hand off one webhook from `route` (its source: github, gemini)."""
        with tracing.server_span("ingress.request", headers, source=route) as span:
            reply = self._post(route, headers, body)
            if tracing.enabled():  # untraced, the attributes would be built for nothing
                span.set(
                    delivery_id=reply.body.get("delivery_id"),
                    event=reply.body.get("event"),
                    status=reply.body.get("status"),
                    **{"http.response.status_code": reply.status},
                )
            if server_error(reply.status):
                span.fail(str(reply.body.get("error")))
        return reply

    def _post(self, route: str, headers: Mapping[str, str], body: bytes) -> Reply:
        started = monotonic()
        source = route
        limit = self.body_limit(source)
        if len(body) > limit:
            return too_large(limit)
        try:
            if source == "github":
                reply = self._github_delivery(headers, body)
            else:
                reply = self._gemini_delivery(headers, body)
        except _Rejected as exc:
            return _refused(source, headers, exc.status, str(exc))
        except KeysUnavailable as exc:
            # Our JWKS fetch failed, not the sender: answer 503 so Gemini retries.
            return _refused(source, headers, 503, f"signing keys unavailable: {exc}")
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

    def _gemini_headers(self, headers: Mapping[str, str]) -> None:
        """What a Gemini delivery's headers must hold; the JWT itself is checked with the body."""
        try:
            signature = header(headers, WEBHOOK_SIGNATURE_HEADER)
            timestamp = header(headers, WEBHOOK_TIMESTAMP_HEADER)
        except VerificationError as exc:
            raise _Rejected(401, f"signature: {exc}") from None
        if looks_like_jwt(signature):
            if not self._gemini.dynamic_enabled:
                raise _Rejected(401, "signature: dynamic webhooks (JWT) are not enabled")
            return  # a dynamic webhook: its id comes from the token, not the headers
        claimed = headers.get(WEBHOOK_ID_HEADER)
        if claimed:
            _check_id(claimed, WEBHOOK_ID_HEADER)  # an id we could not store: 400, not 401
        if not signature or not signature.strip():
            raise _Rejected(401, f"signature: missing header {WEBHOOK_SIGNATURE_HEADER}")
        if not any(entry.startswith(("v1,", "v1a,")) for entry in signature.split()):
            raise _Rejected(401, "signature: no v1 or v1a entry in webhook-signature")
        if not claimed:
            raise _Rejected(401, f"signature: missing header {WEBHOOK_ID_HEADER}")
        if timestamp is None or not _TIMESTAMP.fullmatch(timestamp):
            raise _Rejected(401, "signature: webhook-timestamp is not a whole number of seconds")
        now = self._clock().timestamp()
        if abs(int(timestamp) - now) > self._config.signature_tolerance_s:
            raise _Rejected(401, "signature: webhook-timestamp is outside the tolerance")

    def _github_delivery(self, headers: Mapping[str, str], body: bytes) -> Reply:
        event, delivery_id = _github_headers(headers)
        _verified(lambda: self._github.verify(headers, body))
        payload = _parse_json_object(body)
        if event == "ping":
            return Reply(200, {"status": "pong", "delivery_id": delivery_id, "event": event})
        reason = handlers.refusal("github", event, payload)
        if reason is not None:  # e.g. a check_run action that starts nothing
            body_out = {"status": "ignored", "delivery_id": delivery_id, "event": event}
            return Reply(200, {**body_out, "reason": reason})
        # GitHub signs the body, not the id: the body names the task (module docstring).
        digest = hashlib.sha256(body).hexdigest()
        task_id = task_id_for("github", "sha256", digest)
        reply = self._hand_off("github", event, delivery_id, headers, body, task_id, digest)
        if reply.body.get("status") == "duplicate":
            # A redelivery, or a captured body under a new id: which id carried it first
            # is the ledger's to say, and the task's name keeps only the body.
            logs.event(
                log,
                logging.WARNING,
                f"github delivery {delivery_id}: its body was handed off before "
                "(a redelivery, or a replay under a new delivery id); answered duplicate",
                delivery_id=delivery_id,
                event=event,
                body_sha256=digest,
            )
        return reply

    def _gemini_delivery(self, headers: Mapping[str, str], body: bytes) -> Reply:
        # KeysUnavailable (our JWKS fetch failed: a 503) leaves it as an error.
        delivery = _verified(lambda: self._gemini.verify_delivery(headers, body))
        delivery_id = delivery.delivery_id
        _check_id(delivery_id, "webhook-id")
        payload: Mapping[str, Any]
        if delivery.event is not None:
            # The signed claims carry the event: trust them, not the unsigned body (module doc).
            body = json.dumps(dict(delivery.event), separators=(",", ":")).encode()
            payload = dict(delivery.event)
        else:
            payload = _parse_json_object(body)
        event = payload.get("type")
        data = payload.get("data")
        if not isinstance(event, str) or not event:
            raise _Rejected(400, "body has no event 'type'")
        if not isinstance(data, dict) or not isinstance(data.get("id"), str) or not data["id"]:
            raise _Rejected(400, "body has no 'data.id'")
        # A JWT delivery's slot is in its own namespace (module docstring).
        parts = ("gemini", "jwt", delivery_id) if delivery.dynamic else ("gemini", delivery_id)
        return self._hand_off("gemini", event, delivery_id, headers, body, task_id_for(*parts))

    def _hand_off(
        self,
        source: str,
        event: str,
        delivery_id: str,
        headers: Mapping[str, str],
        body: bytes,
        task_id: str,
        body_sha256: str | None = None,
    ) -> Reply:
        if not handlers.handled(source, event):
            return Reply(200, {"status": "ignored", "delivery_id": delivery_id, "event": event})
        with tracing.span("ingress.hand_off", task_id=task_id) as span:
            kept = select_headers(headers)
            current = tracing.traceparent()
            if current is not None:  # the worker's run continues this trace (shared/tracing)
                kept[tracing.TRACEPARENT] = current
            envelope = Envelope(
                source=source,
                event=event,
                delivery_id=delivery_id,
                received_at=self._clock(),
                headers=kept,
                body=body,
            )
            try:
                result = hand_to_worker(
                    self._config,
                    self._sealer,
                    self._queue(),
                    envelope,
                    task_id,
                    body_sha256=body_sha256,
                )
            except EnvelopeTooLarge as exc:
                raise _Rejected(413, str(exc)) from None
            except (EnqueueError, PayloadError) as exc:
                logs.event(
                    log,
                    logging.ERROR,
                    f"hand-off failed for {source} delivery {delivery_id}",
                    source=source,
                    delivery_id=delivery_id,
                    event=event,
                    task_id=task_id,
                    reason=str(exc),
                )
                span.fail(f"hand-off failed: {exc}")
                return Reply(
                    503, {"error": "hand-off failed; retry later", "delivery_id": delivery_id}
                )
            status = "duplicate" if result.status == "duplicate" else "accepted"
            code = 200 if status == "duplicate" else 202
            return Reply(code, {"status": status, "delivery_id": delivery_id, "event": event})


def _verified(verify: Callable[[], T]) -> T:
    """`verify()` in its span; a refused signature is a 401, the sender's failure, noted on
    the span but not as an error (that would keep every forged request's trace)."""
    with tracing.span("ingress.verify") as span:
        try:
            return verify()
        except VerificationError as exc:
            span.set(verified=False)
            refused = exc
    raise _Rejected(401, f"signature: {refused}")


def _refused(source: str, headers: Mapping[str, str], status: int, reason: str) -> Reply:
    # The id is unverified (it may be forged) but is what an operator searches for.
    claimed = headers.get("X-GitHub-Delivery") or headers.get("webhook-id") or ""
    logs.event(
        log,
        logging.WARNING,
        f"{source} webhook rejected",
        source=source,
        status=status,
        reason=reason,
        claimed_delivery_id=claimed[:100],
    )
    return Reply(status, {"error": reason})


def _github_headers(headers: Mapping[str, str]) -> tuple[str, str]:
    """The event and delivery id of a GitHub request whose signature header is well formed."""
    try:
        signature = header(headers, GITHUB_SIGNATURE_HEADER)
    except VerificationError as exc:
        raise _Rejected(401, f"signature: {exc}") from None
    if not signature:
        raise _Rejected(401, f"signature: missing header {GITHUB_SIGNATURE_HEADER}")
    if not _GITHUB_SIGNATURE.fullmatch(signature.strip()):
        raise _Rejected(401, "signature: not in the sha256=<64 hex digits> form")
    event = _required(headers, "X-GitHub-Event")
    if not _USABLE_EVENT.fullmatch(event):
        raise _Rejected(400, "unusable X-GitHub-Event: 1-128 printable ASCII characters, no spaces")
    delivery_id = _required(headers, "X-GitHub-Delivery")
    _check_id(delivery_id, "X-GitHub-Delivery")
    return event, delivery_id


def _required(headers: Mapping[str, str], name: str) -> str:
    value = headers.get(name)
    if not value or not value.strip():
        raise _Rejected(400, f"missing header {name}")
    return value.strip()


def _check_id(value: str, what: str) -> None:
    if not _USABLE_ID.fullmatch(value):
        raise _Rejected(
            400, f"unusable {what}: a delivery id is 1-200 printable ASCII characters, no spaces"
        )


def _parse_json_object(body: bytes) -> Mapping[str, Any]:
    """The body as a JSON object; 400 when it is none.

    A body simdjson reads as an object is one, and is made into Python objects only when
    something reads it (`_Unread`). Any other is parsed here: by orjson (under half
    `json`'s time), and what orjson refuses by `json`, which decides as it always did: a
    BOM, UTF-16, NaN, lone surrogates pass; garbage not. simdjson and orjson read 1,024
    levels of nesting, `json` stops at the recursion limit (~1,000, less in a server): a
    body nested between the two is taken now, where it was a 400.
    """
    if not body:
        raise _Rejected(400, "empty body")
    if _an_object(body):
        return _Unread(body)
    return _parsed(body)


def _parsed(body: bytes) -> dict[str, Any]:
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError:
        try:
            payload = json.loads(body)
        except (ValueError, UnicodeDecodeError, RecursionError):
            raise _Rejected(400, "body is not JSON") from None
    if not isinstance(payload, dict):
        raise _Rejected(400, "body is not a JSON object")
    return payload


# simdjson checks a body without making an object of it (a push: ~2 µs against orjson's
# ~10 to parse it, and what orjson made is freed after). A parser serves one thread and
# keeps buffers as large as the largest body it read: at most this large (~1 MiB of
# buffers a thread); a larger body is parsed whole.
_CHECKED_MAX_BYTES = 128 * 1024
_parsers = threading.local()


def _an_object(body: bytes) -> bool:
    """True when simdjson reads `body` as a JSON object; False when it does not say so."""
    parser = getattr(_parsers, "parser", None)
    if parser is None:
        parser = _parsers.parser = simdjson.Parser(max_capacity=_CHECKED_MAX_BYTES)
    try:
        document = parser.parse(body)
    except Exception:  # not JSON, too large, a number it cannot hold: `_parsed` decides
        return False
    an_object = isinstance(document, simdjson.Object)
    del document  # the parser is reused: no view into its buffers may outlive this call
    return an_object


class _Unread(Mapping[str, Any]):
    """A body known to be a JSON object, parsed when first read (an app's `refuses`, a
    Gemini event's fields): a push that no app refuses is never made into objects."""

    __slots__ = ("_body", "_object")

    def __init__(self, body: bytes) -> None:
        self._body = body
        self._object: dict[str, Any] | None = None

    def _read(self) -> dict[str, Any]:
        if self._object is None:
            self._object = _parsed(self._body)
        return self._object

    def __getitem__(self, key: str) -> Any:
        return self._read()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._read())

    def __len__(self) -> int:
        return len(self._read())
