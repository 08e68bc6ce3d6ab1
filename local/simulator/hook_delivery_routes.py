"""The App webhook's deliveries, in GitHub's shapes, and the `/_sim/` calls that send them.

API (GitHub's "REST API endpoints for GitHub App webhooks"; `hook_deliveries.py` holds the
log), each authenticated with the App JWT as `POST /app/installations/{id}/access_tokens`
is (`apps.py`: GitHub's 401 bodies, 404 "Integration not found"). The simulator serves one
App webhook: any registered App's JWT reads it.
- `GET /app/hook/deliveries?per_page=&cursor=&status=`: newest first, `per_page` default
  30, over 100 read as 100; `status` `success` (a `status_code` of 200-399) or `failure`
  (400-599); a `Link` header with `rel="next"` (and `rel="prev"` past the first page)
  whose URL carries an opaque `cursor` and the query. `redelivery`, a parameter of earlier
  versions of the description, is no longer documented and is ignored like any unknown
  parameter. Refused: `per_page` not a whole number above 0, or an unknown `status`, 422;
  a `cursor` this endpoint did not hand out, 400 (the two documented error statuses;
  their messages are ours)
- `GET /app/hook/deliveries/{delivery_id}`: the delivery with `url`, `request`,
  `response`; 404 `Not Found` for an id unknown or past the 3 days GitHub keeps (the
  page documents 400 and 422 only; 404 is how GitHub answers an unknown resource)
- `POST /app/hook/deliveries/{delivery_id}/attempts`: 202 `{}` (the documented "Accepted"
  object), then the same request is sent again on a background thread as a new delivery;
  404 for an unknown id; a delivery older than 3 days ("Redelivering webhooks": "You can
  redeliver webhook deliveries that occurred in the past 3 days") is refused with 422,
  the documented status of a refused redelivery: `{"message": "Validation Failed",
  "errors": ["..."]}`, GitHub's simple validation shape; GitHub documents no message for
  this case, the wording is ours

Control (local only, no JWT):
- `POST /_sim/github/webhooks` `{"event", "payload": {...}, "url"?, "guid"?}`: GitHub sends
  `event` with `payload` to `url` or the App's webhook URL (`--github-webhook-url`),
  signed with `--github-webhook-secret`, waiting `--github-webhook-timeout-s` (10 s);
  `guid` is the `X-GitHub-Delivery` (default a new UUID). Answers 200 with the recorded
  delivery as the GET above shows it, once the attempt is over
- `GET /_sim/github/webhooks/deliveries[?guid=]`: every recorded delivery, newest first,
  in the GET shape plus `expired` (past the 3 days: no longer listed) and `held`
  (throttled, not sent yet)
- `POST /_sim/github/webhooks/deliveries/wait` `{"guid", "count"?: 1, "timeout_s"?: 10}`
  (timeout at most 120): answers `{"deliveries": [...]}` (of that guid, newest first) as
  soon as `count` are recorded, 504 naming what it saw after `timeout_s`
- `POST /_sim/github/webhooks/deliveries/age` `{"seconds", "ids"?: [...]}`: moves
  `delivered_at` and `throttled_at` of those deliveries (default all) `seconds` back;
  answers `{"aged": n}`
- `POST /_sim/github/webhooks/throttle` `{"count"?: 0, "seconds"?: 0}`: the next `count`
  sends, and every send for `seconds` from now, are throttled (recorded with
  `throttled_at`, `status` `throttled`, `status_code` 0, not sent); both 0 turn it off;
  answers `{"count", "until"}`. `POST /_sim/github/webhooks/release`: sends the held
  deliveries now (updated in place); answers `{"deliveries": [...]}`
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from flask import Blueprint, Flask, Response, request

from local.simulator.errors import BadRequest, SimError
from local.simulator.github_refusal import GitHubRefusal
from local.simulator.github_webhooks import signed_request
from local.simulator.hook_deliveries import (
    OUTCOMES,
    StoredDelivery,
    TooOld,
    UnknownDelivery,
    full_json,
    item_json,
)
from local.simulator.wire import json_response, read_json

if TYPE_CHECKING:
    from local.simulator.engine import Simulator

DOCS = "https://docs.github.com/rest/apps/webhooks"
LIST_DOCS = f"{DOCS}#list-deliveries-for-an-app-webhook"
GET_DOCS = f"{DOCS}#get-a-delivery-for-an-app-webhook"
REDELIVER_DOCS = f"{DOCS}#redeliver-a-delivery-for-an-app-webhook"
DEFAULT_PER_PAGE = 30
MAX_PER_PAGE = 100
MAX_WAIT_S = 120.0
TOO_OLD = "The delivery is older than 3 days and can no longer be redelivered."
_CURSOR = re.compile(r"v1_([0-9]{1,18})")
_TOKEN = re.compile(r"[\x21-\x7e]{1,200}")  # printable ASCII, no spaces: a header value


class WaitTimedOut(SimError):
    status = 504


def _invalid(message: str) -> GitHubRefusal:
    return GitHubRefusal(422, f"Invalid request.\n\n{message}", LIST_DOCS)


def _per_page() -> int:
    raw = request.args.get("per_page", "")
    if not raw:
        return DEFAULT_PER_PAGE
    if not raw.isdigit() or int(raw) < 1:
        raise _invalid(f"For 'per_page', {raw!r} is not a whole number above 0.")
    return min(int(raw), MAX_PER_PAGE)


def _outcome() -> str | None:
    raw = request.args.get("status", "")
    if raw and raw not in OUTCOMES:
        listed = ", ".join(f'"{name}"' for name in OUTCOMES)
        raise _invalid(f"For 'status', {raw!r} is not one of [{listed}].")
    return raw or None


def _cursor() -> int | None:
    raw = request.args.get("cursor", "")
    if not raw:
        return None
    found = _CURSOR.fullmatch(raw)
    if found is None:
        raise GitHubRefusal(400, f"Invalid cursor: {raw!r}.", LIST_DOCS)
    return int(found.group(1))


def _links(per_page: int, next_id: int | None, prev_id: int | None) -> str:
    base = request.host_url.rstrip("/") + request.path
    query = {k: v for k, v in request.args.items() if k not in ("per_page", "cursor")}

    def link(start: int, rel: str) -> str:
        page = urlencode({**query, "per_page": per_page, "cursor": f"v1_{start}"})
        return f'<{base}?{page}>; rel="{rel}"'

    links = [] if next_id is None else [link(next_id, "next")]
    return ", ".join(links + ([] if prev_id is None else [link(prev_id, "prev")]))


def _delivery_id(raw: str, docs: str) -> int:
    if not raw.isdigit() or len(raw) > 18:
        raise GitHubRefusal(404, "Not Found", docs)
    return int(raw)


def _inspected(delivery: StoredDelivery, expired: bool) -> dict[str, Any]:
    return {**full_json(delivery), "expired": expired, "held": delivery.answer is None}


def _number(body: dict[str, Any], key: str, default: float, low: float, high: float) -> float:
    value = body.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise BadRequest(f"{key} must be a number {low:g}..{high:g}, got {value!r}.")
    return float(value)


def _whole(body: dict[str, Any], key: str, default: int, low: int, high: int) -> int:
    value = body.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise BadRequest(f"{key} must be a whole number {low}..{high}, got {value!r}.")
    return value


def _sent(sim: Simulator, body: dict[str, Any]) -> StoredDelivery:
    event, payload = body.get("event"), body.get("payload")
    if not isinstance(event, str) or not _TOKEN.fullmatch(event):
        raise BadRequest(f"event must be an event name such as 'push', got {event!r}.")
    if not isinstance(payload, dict):
        raise BadRequest("payload must be a JSON object: the event's payload.")
    url = body.get("url", sim.settings.github_webhook_url)
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise BadRequest(
            "url must be an http(s) URL; without one the simulator needs --github-webhook-url."
        )
    guid = body.get("guid")
    if guid is not None and (not isinstance(guid, str) or not _TOKEN.fullmatch(guid)):
        raise BadRequest("guid must be 1-200 printable ASCII characters without spaces.")
    signed = signed_request(sim.settings.github_webhook_secret, event, payload, guid)
    delivery = sim.hook_deliveries.send(
        url, signed, timeout_s=sim.settings.github_webhook_timeout_s
    )
    if delivery is None:
        raise BadRequest("The simulator was reset while this webhook was being sent.")
    return delivery


def add_api_routes(bp: Blueprint, sim: Simulator) -> None:
    """The three `/app/hook/deliveries` routes, on the GitHub API blueprint."""

    def authenticate() -> None:
        sim.apps.app_from_jwt(request.headers.get("Authorization"))

    @bp.get("/app/hook/deliveries")
    def list_hook_deliveries() -> Response:
        authenticate()
        per_page, outcome, start = _per_page(), _outcome(), _cursor()
        page, next_id, prev_id = sim.hook_deliveries.page(
            outcome=outcome, start=start, per_page=per_page
        )
        response = json_response([item_json(d) for d in page])
        link = _links(per_page, next_id, prev_id)
        if link:
            response.headers["Link"] = link
        return response

    @bp.get("/app/hook/deliveries/<delivery_id>")
    def get_hook_delivery(delivery_id: str) -> Response:
        authenticate()
        try:
            delivery = sim.hook_deliveries.get(_delivery_id(delivery_id, GET_DOCS))
        except UnknownDelivery:
            raise GitHubRefusal(404, "Not Found", GET_DOCS) from None
        return json_response(full_json(delivery))

    @bp.post("/app/hook/deliveries/<delivery_id>/attempts")
    def redeliver_hook_delivery(delivery_id: str) -> Response:
        authenticate()
        number = _delivery_id(delivery_id, REDELIVER_DOCS)
        try:
            sim.hook_deliveries.redeliver(number, sim.settings.github_webhook_timeout_s)
        except UnknownDelivery:
            raise GitHubRefusal(404, "Not Found", REDELIVER_DOCS) from None
        except TooOld:
            refused = {**GitHubRefusal(422, "Validation Failed", REDELIVER_DOCS).body}
            # GitHub's "validation-error": each error an object with at least a `code`.
            error = {"resource": "HookDelivery", "code": "custom", "message": TOO_OLD}
            return json_response({**refused, "errors": [error]}, 422)
        return json_response({}, 202)


def control_blueprint(sim: Simulator) -> Blueprint:
    """The local-only `/_sim/github/webhooks` calls (no caller check, no rate limit)."""
    bp = Blueprint("sim_hook_deliveries", __name__)

    @bp.post("/_sim/github/webhooks")
    def send_webhook() -> Response:
        return json_response(full_json(_sent(sim, read_json())))

    @bp.get("/_sim/github/webhooks/deliveries")
    def inspect_deliveries() -> Response:
        found = sim.hook_deliveries.every(request.args.get("guid") or None)
        return json_response({"deliveries": [_inspected(d, old) for d, old in found]})

    @bp.post("/_sim/github/webhooks/deliveries/wait")
    def wait_for_deliveries() -> Response:
        body = read_json()
        guid = body.get("guid")
        if not isinstance(guid, str) or not guid:
            raise BadRequest("guid is required: the X-GitHub-Delivery to wait for.")
        count = _whole(body, "count", 1, 1, 1000)
        timeout_s = _number(body, "timeout_s", 10.0, 0.0, MAX_WAIT_S)
        done, found = sim.hook_deliveries.wait_for(guid, count, timeout_s)
        if not done:
            raise WaitTimedOut(
                f"Waited {timeout_s:g} s for {count} deliveries of guid {guid}; "
                f"{len(found)} recorded."
            )
        return json_response({"deliveries": [full_json(d) for d in found]})

    @bp.post("/_sim/github/webhooks/deliveries/age")
    def age_deliveries() -> Response:
        body = read_json()
        seconds = _number(body, "seconds", 0.0, 0.0, 365 * 86400.0)
        ids = body.get("ids")
        if ids is not None and (
            not isinstance(ids, list)
            or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids)
        ):
            raise BadRequest("ids must be a list of delivery ids.")
        return json_response({"aged": sim.hook_deliveries.age(seconds, ids)})

    @bp.post("/_sim/github/webhooks/throttle")
    def throttle() -> Response:
        body = read_json()
        unknown = sorted(set(body) - {"count", "seconds"})
        if unknown:
            raise BadRequest(f"Unknown keys {unknown}; known: count, seconds.")
        count = _whole(body, "count", 0, 0, 100_000)
        seconds = _number(body, "seconds", 0.0, 0.0, 86400.0)
        return json_response(sim.hook_deliveries.throttle(count, seconds))

    @bp.post("/_sim/github/webhooks/release")
    def release() -> Response:
        released = sim.hook_deliveries.release(sim.settings.github_webhook_timeout_s)
        return json_response({"deliveries": [full_json(d) for d in released]})

    return bp


def register(app: Flask, github_api: Blueprint, sim: Simulator) -> None:
    """Both halves: the API routes on `github_api` (before it is registered) and the
    control blueprint on `app`."""
    add_api_routes(github_api, sim)
    app.register_blueprint(control_blueprint(sim))
