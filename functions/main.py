"""Cloud Functions entry points: thin. Parse the request, delegate to `shared`, map to HTTP.

Each function is deployed from this one file with its own entry point. What an entry
point needs is built on its first request (see `shared.runtime`), so the ingress never
loads the Firestore or Gemini clients.
"""

from __future__ import annotations

import flask
import functions_framework

from shared import logs, runtime
from shared.ingress import Reply, too_large

logs.configure()
ENVELOPE_LIMIT = 1_048_576


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


@functions_framework.http
def ingress(request: flask.Request) -> flask.Response:
    limit = runtime.config().max_body_bytes
    body = _body_within(request, limit)
    if body is None:
        return _respond(too_large(limit))
    return _respond(runtime.ingress().handle(request.method, request.path, request.headers, body))


@functions_framework.http
def worker(request: flask.Request) -> flask.Response:
    # A sealed envelope is at most Cloud Tasks' 1 MB; never read more than that.
    body = _body_within(request, ENVELOPE_LIMIT)
    if body is None:
        return _respond(too_large(ENVELOPE_LIMIT))
    return _respond(runtime.worker().handle(request.method, request.path, request.headers, body))


@functions_framework.http
def reconcile(request: flask.Request) -> flask.Response:
    if request.path.strip("/") == "healthz" and request.method in ("GET", "HEAD"):
        return _respond(Reply(200, {"status": "ok"}))
    if request.method != "POST":
        return _respond(Reply(405, {"error": f"{request.method} is not allowed; use POST"}))
    verifier = runtime.reconcile_oidc()
    if verifier is not None:
        from shared.oidc import OidcError

        try:
            verifier.verify(request.headers)
        except OidcError as exc:
            return _respond(Reply(exc.status, {"error": str(exc)}))
    return _respond(Reply(200, runtime.reconciler().run().to_dict()))
