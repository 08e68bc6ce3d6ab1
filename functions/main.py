"""Cloud Functions entry points: thin. Ask the endpoint, read the body within its limit, answer.

Each function is deployed from this one file with its own entry point, and each does
the same three things through its `Endpoint` from `shared.entrypoints.runtime`:

1. `preflight(method, path, headers, ceiling)`: route, method, the headers and the
   declared Content-Length are judged before a byte of the body is read; a refusal is
   answered at once (docs/architecture.md, "Contracts");
2. the body is read in bounded chunks, never more than the endpoint's limit + 1 bytes
   (413 past it, also for a chunked body that declared no length);
3. `post(route, headers, body) -> Reply`, turned into a Flask response.

At import, the function being served (`FUNCTION_TARGET`, set by Cloud Functions and by
functions-framework before this module loads) has its configuration and secrets checked
(`runtime.check_startup`): a bad deployment fails to start with one structured ERROR
line naming the variable, and exits non-zero. Clients are still built on first use, so
the ingress never loads the Firestore or Gemini clients.
"""

from __future__ import annotations

import logging
import os
from typing import IO, Any

import flask
import functions_framework
import orjson

# The apps this deployment runs (shared/apps.py); Terraform always sets it.
os.environ.setdefault("HOOKLEDGER_APPS", "apps.review")

from shared import logs
from shared.config import FUNCTIONS, ConfigError
from shared.entrypoints import runtime
from shared.entrypoints.http import REQUEST_LIMIT, Endpoint, Reply, too_large
from shared.signatures import RequestHeaders

logs.configure()
# A sealed envelope is at most Cloud Tasks' 1 MB; never read more than that.
ENVELOPE_LIMIT = 1_048_576
# Cloud Scheduler posts an empty body; anything larger is not from it.
SCHEDULER_LIMIT = 65_536
# Bodies arrive from the socket in pieces this size: memory follows what was accepted.
READ_CHUNK = 64 * 1024


def _check_startup() -> None:
    served = os.environ.get("FUNCTION_TARGET", "")
    if served not in FUNCTIONS:
        return  # loaded by a tool, not served: the endpoints still check on first use
    try:
        runtime.check_startup(served)
    except ConfigError as exc:
        # One line naming the variable, no traceback: the platform reports the failed start.
        logs.event(
            logs.get_logger("startup"),
            logging.ERROR,
            f"{served} cannot start: {exc}",
            function=served,
            alert="config_invalid",
        )
        raise SystemExit(1) from None


_check_startup()


@functions_framework.http
def ingress(request: flask.Request) -> flask.Response:
    return _serve(request, runtime.ingress(), REQUEST_LIMIT)


@functions_framework.http
def worker(request: flask.Request) -> flask.Response:
    return _serve(request, runtime.worker(), ENVELOPE_LIMIT)


@functions_framework.http
def reconcile(request: flask.Request) -> flask.Response:
    return _serve(request, runtime.reconcile_endpoint(), SCHEDULER_LIMIT)


def _serve(request: flask.Request, endpoint: Endpoint, ceiling: int) -> flask.Response:
    # A name is one environ key: nothing is read that no check asks for (shared/signatures).
    headers = RequestHeaders.from_environ(request.environ)
    decision = endpoint.preflight(request.method, request.path, headers, ceiling)
    if isinstance(decision, Reply):
        return _respond(decision)
    body = _read_within(request.stream, decision.max_bytes)
    if body is None:
        return _respond(too_large(decision.max_bytes))
    return _respond(endpoint.post(decision.route, headers, body))


def _read_within(stream: IO[bytes], limit: int) -> bytes | None:
    """The whole body, or None past `limit`; reads at most limit + 1 bytes, a chunk at a time."""
    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        chunk = stream.read(min(READ_CHUNK, limit + 1 - size))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
    return None


def _respond(reply: Reply) -> flask.Response:
    """The Flask response for `reply`, as a one-piece stream with its Content-Length.

    functions-framework reads whatever is left of the request body after every answer
    that is not streamed (its `read_request` hook): that would buffer a refused 25 MiB
    body, or a chunked one without end. A streamed answer is left alone; gunicorn then
    drains at most 64 KiB of the unread body and closes the connection.
    """
    data = _json_bytes(reply.body)
    if data is None:
        data = flask.jsonify(reply.body).get_data()
    headers = [("Content-Type", "application/json"), ("Content-Length", str(len(data)))]
    return flask.Response(iter([data]), status=reply.status, headers=headers)


# What orjson must leave to `jsonify` (its `default` writes these its own way).
_PASSTHROUGH = (
    orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_SUBCLASS
)


def _json_bytes(body: dict[str, Any]) -> bytes | None:
    """`jsonify`'s bytes for `body` (sorted keys, compact, ASCII, a newline) from orjson, in
    a fraction of its time; None when a value or an escape is `jsonify`'s to write."""
    try:
        data = orjson.dumps(
            body, option=orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE | _PASSTHROUGH
        )
    except TypeError:
        return None
    if not data.isascii() or b"\\" in data or b"\x7f" in data:
        return None
    return data
