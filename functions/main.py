"""Cloud Functions entry points: thin. Read the body, delegate to `shared`, answer.

Each function is deployed from this one file with its own entry point, and each does
the same three things: read the body within its limit (413 beyond it), hand the request
to its `Endpoint` from `shared.runtime` (`handle(method, path, headers, body) -> Reply`),
and turn the `Reply` into a Flask response. What an endpoint needs is built on its
first request, so the ingress never loads the Firestore or Gemini clients.
"""

from __future__ import annotations

from collections.abc import Callable

import flask
import functions_framework

from shared import logs, runtime
from shared.entrypoints.http import Endpoint, Reply, too_large

logs.configure()
# A sealed envelope is at most Cloud Tasks' 1 MB; never read more than that.
ENVELOPE_LIMIT = 1_048_576
# Cloud Scheduler posts an empty body; anything larger is not from it.
SCHEDULER_LIMIT = 65_536


@functions_framework.http
def ingress(request: flask.Request) -> flask.Response:
    return _serve(request, runtime.config().max_body_bytes, runtime.ingress)


@functions_framework.http
def worker(request: flask.Request) -> flask.Response:
    return _serve(request, ENVELOPE_LIMIT, runtime.worker)


@functions_framework.http
def reconcile(request: flask.Request) -> flask.Response:
    return _serve(request, SCHEDULER_LIMIT, runtime.reconcile_endpoint)


def _serve(request: flask.Request, limit: int, endpoint: Callable[[], Endpoint]) -> flask.Response:
    body = _body_within(request, limit)
    if body is None:
        return _respond(too_large(limit))
    return _respond(endpoint().handle(request.method, request.path, request.headers, body))


def _body_within(request: flask.Request, limit: int) -> bytes | None:
    """The raw body, or None when it exceeds `limit` (read at most limit + 1 bytes)."""
    if request.content_length is not None and request.content_length > limit:
        return None
    body = request.stream.read(limit + 1)
    return None if len(body) > limit else body


def _respond(reply: Reply) -> flask.Response:
    response = flask.jsonify(reply.body)
    response.status_code = reply.status
    return response
