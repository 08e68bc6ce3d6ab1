"""HTTP routes: the Gemini REST API (as google-genai calls it), GitHub's REST API (from
`github_routes.py`, `check_run_routes.py`, `hook_delivery_routes.py`, `issue_routes.py`,
`pull_routes.py` and `repo_routes.py`; any other GitHub route answers 501 naming it,
`github_fallback.py`) and the local-only `/_sim/...` control API (`control.py` indexes
every call and the module serving it).
Every API request (not `/_sim/`) is recorded in the request log first.

Gemini paths are served under `v1`, `v1beta` and `v1alpha` alike: google-genai 3.x
defaults to `v1`, older releases and `GOOGLE_GENAI_API_VERSION=beta` use `v1beta`.
Every error answers JSON; nothing a client sends can crash the process. Gemini GETs
(a batch, the batch list, an operation, an interaction) go through the fault model
(`/_sim/faults`): added latency, then a hang past the client's timeout or an error.

Batches as Gemini makes them: a create request over 20 MiB (or the lower
`gemini_inline_request_bytes` of `/_sim/quotas`) is refused with Gemini's 400; with the
`gemini_batches_in_flight` quota set, a create beyond it is Gemini's 429
RESOURCE_EXHAUSTED (`quotas.py`); a batch may come from an uploaded JSONL file (Files API,
`files.py`) and then its results are a generated file, downloadable at
`/{v}/files/{id}:download?alt=media`. A create's `batch.priority` (int64, default 0) is
kept; a value that is no int64 is Gemini's 400 (`processing.py`, which also runs batches
by it when `/_sim/gemini/processing` gives them slots).
A create may also be refused as Gemini refuses a deployment (403 PERMISSION_DENIED,
401 UNAUTHENTICATED, 400 API_KEY_INVALID) or a poisoned request (400 INVALID_ARGUMENT
naming it), as `/_sim/gemini/create-refusal` and `/_sim/gemini/poison` ask
(`create_refusals.py`); nothing is created.
`POST /_sim/files/{id}:fail-downloads` `{"times": N, "status": 503}` makes the next N
downloads of that file fail.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import logging
import socket
import time
from typing import Any

from flask import Flask, Response, request
from werkzeug.exceptions import HTTPException

from local.simulator import (
    check_run_routes,
    control,
    create_refusal_routes,
    github_control,
    github_routes,
    hook_delivery_routes,
    issue_routes,
    pull_routes,
    repo_routes,
)
from local.simulator.create_refusals import Caller, RefusedCreate
from local.simulator.engine import Simulator
from local.simulator.errors import BadRequest, BatchQuotaExceeded, NotFound, SimError
from local.simulator.file_routes import files_routes
from local.simulator.gemini import (
    QUOTA_MESSAGE,
    batch_quota_error_body,
    batch_resource,
    error_body,
    interaction_resource,
    operation_resource,
    quota_error_body,
    rfc3339,
)
from local.simulator.gemini_control import webhook_config
from local.simulator.github_answers import github_request_body, register_refusals
from local.simulator.github_fallback import add_fallback_routes, is_github
from local.simulator.processing import priority_of
from local.simulator.quotas import INLINE_REQUEST_BYTES, MAX_INLINE_REQUEST_BYTES, inline_too_large
from local.simulator.records import WEBHOOK_EVENTS, WEBHOOK_STATES, RegisteredWebhook
from local.simulator.wire import json_response, read_json
from shared.logs import event, get_logger

logger = get_logger("simulator")

VERSION = "<any(v1, v1beta, v1alpha):version>"
DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 1000
MAX_BODY_BYTES = 32 * 1024 * 1024
# Gemini refuses a create request (inline requests) over 20 MiB with this 400 (quotas.py).
INLINE_TOO_LARGE = inline_too_large(MAX_INLINE_REQUEST_BYTES)


def page_args(size_name: str, token_name: str) -> tuple[int, int | None]:
    """(page size, cursor) from the query string; the cursor is an opaque token."""
    raw_size = request.args.get(size_name, "")
    try:
        size = int(raw_size) if raw_size else DEFAULT_PAGE_SIZE
    except ValueError:
        raise BadRequest(f"{size_name} must be a whole number, got {raw_size!r}.") from None
    if size <= 0:
        size = DEFAULT_PAGE_SIZE
    size = min(size, MAX_PAGE_SIZE)
    token = request.args.get(token_name, "")
    if not token:
        return size, None
    try:
        cursor = int(base64.urlsafe_b64decode(token.encode()).decode().removeprefix("after:"))
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise BadRequest(f"{token_name} {token!r} is not a token this API handed out.") from None
    return size, cursor


def page_token(cursor: int) -> str:
    return base64.urlsafe_b64encode(f"after:{cursor}".encode()).decode()


def inject_faults(sim: Simulator, what: str) -> None:
    """Apply `/_sim/faults` to one GET: latency, then a hang (timeout) or an error."""
    fault = sim.faults.draw_get()
    if fault.latency_ms:
        time.sleep(fault.latency_ms / 1000)
    if fault.hang_s is not None:
        sim.faults.hang(fault.hang_s)
        drop_connection()
        raise InjectedFault(504, f"Simulated timeout while reading {what}.")
    if fault.status is not None:
        raise InjectedFault(fault.status, f"Simulated fault while reading {what}.")


def drop_connection() -> None:
    """Close this request's connection without an answer (a hung upstream giving up)."""
    connection = request.environ.get("werkzeug.socket")
    if connection is None:  # not served by werkzeug's server (e.g. a test client)
        return
    with contextlib.suppress(OSError):  # the client may already have gone away
        connection.shutdown(socket.SHUT_RDWR)


class InjectedFault(SimError):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status

    def body(self) -> dict[str, Any]:
        if self.status == 429:
            return quota_error_body(f"{QUOTA_MESSAGE} {self.message}")
        return error_body(self.status, self.message)


def webhook_json(webhook: RegisteredWebhook, new_secret: str | None = None) -> dict[str, Any]:
    """A webhook as the webhooks API returns it (snake_case; secrets only truncated)."""
    body: dict[str, Any] = {
        "id": webhook.id,
        "uri": webhook.uri,
        "subscribed_events": webhook.subscribed_events,
        "state": webhook.state,
        "create_time": rfc3339(webhook.created_at),
        "update_time": rfc3339(webhook.updated_at),
        "signing_secrets": [
            {
                "truncated_secret": secret.secret[-4:],
                **({"expire_time": rfc3339(secret.expire_time)} if secret.expire_time else {}),
            }
            for secret in webhook.secrets
        ],
    }
    if webhook.name is not None:
        body["name"] = webhook.name
    if new_secret is not None:
        body["new_signing_secret"] = new_secret
    return body


def webhook_fields(body: dict[str, Any], *, partial: bool) -> dict[str, Any]:
    """Validated `uri`, `subscribed_events`, `name`, `state` from a create/update body."""
    fields: dict[str, Any] = {}
    if "uri" in body or not partial:
        uri = body.get("uri")
        if not isinstance(uri, str) or not uri.startswith(("http://", "https://")):
            raise BadRequest("uri is required and must be an http(s) URL.")
        fields["uri"] = uri
    if "subscribed_events" in body or not partial:
        events = body.get("subscribed_events")
        if not isinstance(events, list) or not events:
            raise BadRequest("subscribed_events is required: a non-empty list of event names.")
        unknown = [e for e in events if e not in WEBHOOK_EVENTS]
        if unknown:
            raise BadRequest(f"Unknown subscribed_events {unknown}; known: {list(WEBHOOK_EVENTS)}.")
        fields["subscribed_events"] = list(events)
    if body.get("name") is not None:
        if not isinstance(body["name"], str):
            raise BadRequest("name must be a string.")
        fields["name"] = body["name"]
    if "state" in body:
        if body["state"] not in WEBHOOK_STATES:
            raise BadRequest(f"state must be one of {list(WEBHOOK_STATES)}.")
        fields["state"] = body["state"]
    return fields


def file_requests(data: bytes, file_name: str) -> list[dict[str, Any]]:
    """An input file's JSONL lines `{"key", "request"}` as inline-shaped requests."""
    requests_: list[dict[str, Any]] = []
    for number, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError:
            raise BadRequest(f"{file_name} line {number} is not JSON.") from None
        if not isinstance(item, dict) or not isinstance(item.get("request"), dict):
            raise BadRequest(f"{file_name} line {number} needs a `request` object.")
        key = item.get("key")
        requests_.append({"request": item["request"], "metadata": {"key": key}})
    return requests_


def parse_batch(
    body: dict[str, Any], sim: Simulator
) -> tuple[str, list[dict[str, Any]], tuple[str, ...], Any, str | None]:
    """(display name, requests, webhook URIs, user metadata, input file) from a create body."""
    batch = body.get("batch")
    if not isinstance(batch, dict):
        raise BadRequest("Request body must hold a `batch` object.")
    config = batch.get("inputConfig") or batch.get("input_config")
    if not isinstance(config, dict):
        raise BadRequest("batch.inputConfig is required.")
    input_file = config.get("fileName")
    requests_: Any
    if input_file is not None:
        if not isinstance(input_file, str):
            raise BadRequest("batch.inputConfig.fileName must be a file name.")
        requests_ = file_requests(sim.files.get(input_file).data, input_file)
    else:
        requests_ = (config.get("requests") or {}).get("requests")
    if not isinstance(requests_, list) or not requests_:
        raise BadRequest("batch.inputConfig.requests.requests must be a non-empty list.")
    for index, item in enumerate(requests_):
        if not isinstance(item, dict) or not isinstance(item.get("request"), dict):
            raise BadRequest(f"requests[{index}] must be an object with a `request` object.")
        if not isinstance(item["request"].get("contents"), list):
            raise BadRequest(f"requests[{index}].request.contents must be a list.")
        if "metadata" in item and not isinstance(item["metadata"], dict):
            raise BadRequest(f"requests[{index}].metadata must be an object.")
    display_name = batch.get("displayName", "")
    if not isinstance(display_name, str):
        raise BadRequest("batch.displayName must be a string.")
    uris, user_metadata = webhook_config(batch.get("webhookConfig"))
    return display_name, requests_, uris, user_metadata, input_file


def graphql_files() -> list[str]:
    """The "REF:PATH" expressions a GitHub GraphQL request names (`fN` variables), in order."""
    body = request.get_json(silent=True)
    variables = body.get("variables") if isinstance(body, dict) else None
    if not isinstance(variables, dict):
        return []
    named = [k for k in variables if isinstance(k, str) and k[:1] == "f" and k[1:].isdigit()]
    return [str(variables[k]) for k in sorted(named, key=lambda k: int(k[1:]))]


def create_app(sim: Simulator) -> Flask:
    """The WSGI app serving `sim`; `app.config["SIMULATOR"]` is `sim`."""
    app = Flask("local.simulator")
    app.config["SIMULATOR"] = sim
    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY_BYTES
    app.register_blueprint(control.blueprint(sim))
    app.register_blueprint(check_run_routes.control_blueprint(sim))
    app.register_blueprint(create_refusal_routes.control_blueprint(sim))
    github_api = github_routes.blueprint(sim)
    check_run_routes.add_api_routes(github_api, sim)  # the same caller check and rate limits
    issue_routes.add_api_routes(github_api, sim)
    pull_routes.add_api_routes(github_api, sim)
    repo_routes.add_api_routes(github_api, sim)
    register_refusals(github_api)
    add_fallback_routes(github_api)  # every other GitHub route: 501, naming it
    hook_delivery_routes.register(app, github_api, sim)
    app.register_blueprint(github_api)
    app.register_blueprint(github_control.control_blueprint(sim))

    @app.before_request
    def log_api_request() -> None:
        if not request.path.startswith("/_sim/"):
            files = graphql_files() if request.path == "/graphql" else None
            github = None
            if is_github(request.path):
                auth, installation_id = sim.apps.credential_of(request.headers.get("Authorization"))
                github = {
                    "body": github_request_body(),
                    "installation_id": installation_id,
                    "auth": auth,
                    "api_version": request.headers.get("X-GitHub-Api-Version"),
                }
            query = request.query_string.decode("latin-1")
            sim.requests.record(request.method, request.path, query, files, github)

    @app.errorhandler(SimError)
    def sim_error(exc: SimError) -> Response:
        if isinstance(exc, InjectedFault):
            return json_response(exc.body(), exc.status)
        if isinstance(exc, RefusedCreate):
            return json_response(exc.body, exc.status)
        if isinstance(exc, BatchQuotaExceeded):
            delay_s = sim.quotas.settings.batch_retry_delay_s
            return json_response(batch_quota_error_body(exc.limit, delay_s), exc.status)
        return json_response(error_body(exc.status, exc.message), exc.status)

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException) -> Response:
        code = exc.code or 500
        return json_response(error_body(code, exc.description or exc.name), code)

    @app.errorhandler(Exception)
    def unexpected(exc: Exception) -> Response:
        event(
            logger,
            logging.ERROR,
            "simulator request failed",
            exc_info=True,
            method=request.method,
            path=request.path,
        )
        return json_response(error_body(500, f"Simulator error: {type(exc).__name__}: {exc}"), 500)

    # --- Gemini: batches -----------------------------------------------------------

    @app.post(f"/{VERSION}/models/<model>:batchGenerateContent")
    def create_batch(version: str, model: str) -> Response:
        # Google checks the caller first: a refused deployment answers before size or body.
        api_key = request.headers.get("x-goog-api-key") or request.args.get("key", "")
        sim.create_refusals.check_caller(Caller(api_key, version))
        limit = sim.quotas.settings.inline_request_bytes
        # Refused on its declared length, before a byte of it is read.
        size = request.content_length
        if size is None:
            size = len(request.get_data())
        if size > limit:
            sim.quotas.count_refusal(INLINE_REQUEST_BYTES)
            raise BadRequest(inline_too_large(limit))
        body = read_json()
        # The JSON's types are read before its meaning, as Google's front end parses first.
        priority = priority_of(body["batch"]) if isinstance(body.get("batch"), dict) else 0
        display_name, requests_, uris, user_metadata, input_file = parse_batch(body, sim)
        sim.create_refusals.check_requests(requests_)  # a poisoned request (poison)
        batch = sim.create_batch(
            f"models/{model}", display_name, requests_, uris, user_metadata, input_file, priority
        )
        event(logger, logging.INFO, "batch created", operation=batch.name, requests=len(requests_))
        return json_response(batch_resource(batch))

    @app.get(f"/{VERSION}/batches")
    def list_batches(version: str) -> Response:
        inject_faults(sim, "the batch list")
        size, cursor = page_args("pageSize", "pageToken")
        batches = [b for b in sim.world.batches() if cursor is None or b.seq < cursor]
        page = batches[:size]
        body: dict[str, Any] = {"operations": [batch_resource(b, False) for b in page]}
        if len(batches) > size:
            body["nextPageToken"] = page_token(page[-1].seq)
        return json_response(body)

    @app.get(f"/{VERSION}/batches/<batch_id>")
    def get_batch(version: str, batch_id: str) -> Response:
        inject_faults(sim, f"batches/{batch_id}")
        return json_response(batch_resource(sim.world.batch(batch_id)))

    @app.post(f"/{VERSION}/batches/<batch_id>:cancel")
    def cancel_batch(version: str, batch_id: str) -> Response:
        sim.cancel_batch(batch_id)
        return json_response({})

    @app.delete(f"/{VERSION}/batches/<batch_id>")
    def delete_batch(version: str, batch_id: str) -> Response:
        sim.world.delete_batch(batch_id)
        return json_response({})

    files_routes(app, sim)

    # --- Gemini: webhooks API --------------------------------------------------------

    @app.post(f"/{VERSION}/webhooks")
    def create_webhook(version: str) -> Response:
        fields = webhook_fields(read_json(), partial=False)
        webhook, secret = sim.world.create_webhook(
            fields["uri"], fields["subscribed_events"], fields.get("name")
        )
        return json_response(webhook_json(webhook, new_secret=secret))

    @app.get(f"/{VERSION}/webhooks")
    def list_webhooks(version: str) -> Response:
        size, cursor = page_args("page_size", "page_token")
        webhooks = sim.world.webhooks()
        start = cursor or 0
        page = webhooks[start : start + size]
        body: dict[str, Any] = {"webhooks": [webhook_json(w) for w in page]}
        if start + size < len(webhooks):
            body["next_page_token"] = page_token(start + size)
        return json_response(body)

    @app.get(f"/{VERSION}/webhooks/<webhook_id>")
    def get_webhook(version: str, webhook_id: str) -> Response:
        return json_response(webhook_json(sim.world.webhook(webhook_id)))

    @app.patch(f"/{VERSION}/webhooks/<webhook_id>")
    def update_webhook(version: str, webhook_id: str) -> Response:
        fields = webhook_fields(read_json(), partial=True)
        mask = request.args.get("update_mask") or request.args.get("updateMask")
        if mask:
            wanted = {part.strip() for part in mask.split(",")}
            fields = {k: v for k, v in fields.items() if k in wanted}
        return json_response(webhook_json(sim.world.update_webhook(webhook_id, fields)))

    @app.delete(f"/{VERSION}/webhooks/<webhook_id>")
    def delete_webhook(version: str, webhook_id: str) -> Response:
        sim.world.delete_webhook(webhook_id)
        return json_response({})

    @app.post(f"/{VERSION}/webhooks/<webhook_id>:rotateSigningSecret")
    def rotate_webhook(version: str, webhook_id: str) -> Response:
        behavior = read_json().get("revocation_behavior") or "revoke_previous_secrets_after_h24"
        if behavior not in (
            "revoke_previous_secrets_after_h24",
            "revoke_previous_secrets_immediately",
        ):
            raise BadRequest(f"Unknown revocation_behavior {behavior!r}.")
        immediately = behavior == "revoke_previous_secrets_immediately"
        return json_response({"secret": sim.world.rotate_webhook_secret(webhook_id, immediately)})

    @app.post(f"/{VERSION}/webhooks/<webhook_id>:ping")
    def ping_webhook(version: str, webhook_id: str) -> Response:
        sim.ping(webhook_id)
        return json_response({})

    # --- Gemini: other long-running operations -------------------------------------

    @app.get(f"/{VERSION}/<path:name>")
    def get_operation(version: str, name: str) -> Response:
        if name.startswith("interactions/"):
            inject_faults(sim, name)
            return json_response(interaction_resource(sim.world.operation(name)))
        if "/operations/" not in f"/{name}":
            raise NotFound(f"No resource at {request.path}.")
        inject_faults(sim, name)
        return json_response(operation_resource(sim.world.operation(name)))

    return app
