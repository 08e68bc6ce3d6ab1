"""The local-only control API under `/_sim/` (see docs/architecture.md, "Simulator control").

- `POST /_sim/operations/{name}:complete` `{"state", "webhook"?, "rows"?, "error"?, "response"?,
  "echo_metadata"?, "malformed_lines"?}`
  (`webhook`: `send` (default; `webhook_copies` copies, subject to `webhook_drop_rate`),
  `duplicate` (2 copies, subject to the drop rate), `drop` (nothing sent or recorded)).
  `state` `partially_succeeded` (batches only): the batch reports
  `BATCH_STATE_PARTIALLY_SUCCEEDED` with its rows, at least one failed (the last, unless
  `rows` names one), and sends `batch.succeeded`
  For a succeeded (or partially succeeded) batch:
  - `rows`: per-request results, either a list `[{"index": 0, "error": {code, message}} |
    {"index": 1, "text": "…"} | {"index": 2, "outcome": "blocked", "block_reason"?: "SAFETY"}]`
    or an object by request key `{"docs/a.md": "blocked", "docs/b.md": {"outcome":
    "truncated", "text"?: "…"}}`. Outcomes, each in Gemini's GenerateContentResponse shape:
    `ok` (default), `blocked` (`promptFeedback.blockReason`, default SAFETY, with
    `safetyRatings`, no candidates), `safety` (candidate `finishReason` SAFETY, no content,
    `safetyRatings`), `recitation` (`finishReason` RECITATION), `truncated` (`finishReason`
    MAX_TOKENS with the first half of the answer, or of `text`), `empty` (STOP, no parts).
  - `echo_metadata` (default true): false sends the results without the requests'
    `metadata` (inline) or `key` (results-file lines), so only their order places them.
  - `malformed_lines` `[2, …]`: those 1-based lines of the results file are written cut
    off mid-object (a batch made from an input file only: inline results have no lines).
- `POST /_sim/operations/interactions/{id}:status` `{"status", "output_text"?, "error"?,
  "webhook"?}`: the interaction reports that Interactions API status, waiting ones
  (`requires_action`, `requires_continuation`, `idle`) included; `completed`/`incomplete`
  carry `output_text` as their last model output; the event Gemini sends on it, if any
- `POST /_sim/operations` `{"name": "models/veo/operations/x", "metadata"?,
  "webhook_config"?: {"uris", "user_metadata"}}` creates a pending non-batch operation
  (video generation, an interaction…) with the job's webhook config, as a batch gets it
  from `batches.create`; `GET /_sim/batches` shows each batch's `webhook_config`
- a batch is deleted through the Gemini API itself: `DELETE /v1beta/batches/{id}`, after
  which it answers 404
- `POST /_sim/faults`, `GET /_sim/faults`: the fault model, below
- `POST /_sim/quotas`, `GET /_sim/quotas`: the Gemini quotas `batches.create` enforces,
  below
- `POST /_sim/gemini/create-refusal` `{"status": 403|401|400|null, "reason"?, "count"?}`,
  `DELETE` and `GET` on it (`create_refusal_routes.py`): Gemini refusing the deployment.
  While set, every `batches.create` creates nothing and answers `status` with Gemini's body
  for `reason` (`create_refusals.REFUSALS`): 403 PERMISSION_DENIED `CONSUMER_SUSPENDED`
  (default; "Permission denied: Consumer 'api_key:KEY' has been suspended."),
  `SERVICE_DISABLED` or `PERMISSION_DENIED` ("The caller does not have permission"); 401
  UNAUTHENTICATED `ACCESS_TOKEN_TYPE_UNSUPPORTED` (default) or `CREDENTIALS_MISSING`; 400
  INVALID_ARGUMENT `API_KEY_INVALID` ("API key not valid. Please pass a valid API key.",
  `details` a google.rpc.ErrorInfo). `count` N (1..1000000; default null, until stopped)
  refuses the next N creates, then stops by itself; `{"status": null}` or `DELETE` stops.
  Each answers `{"status", "reason", "count" (left), "refused"}` (creates refused since
  the last reset)
- `POST /_sim/gemini/poison` `{"marker": "…"|null, "name_index"?: true}`, `DELETE` and `GET`
  on it: a create any of whose requests (inline, or lines of its input file) has a text
  part holding `marker` creates nothing and answers 400 INVALID_ARGUMENT, one message line
  per such request `* BatchGenerateContentRequest.batch.input_config.requests.requests[i]
  .request.contents[c].parts[p].text: …` and a google.rpc.BadRequest `fieldViolations`
  entry each (a file's request is named by its 0-based position in the file: the
  simulator's choice); with `name_index` false, Gemini's bare "Request contains an invalid
  argument." without details. `{"marker": null}` or `DELETE` clears; each answers
  `{"marker", "name_index", "refused"}`
- `POST /_sim/webhook-mode`, `GET /_sim/webhook-mode`: `{"data_id": "name"|"bare"|"mixed",
  "cancel_events": bool}`, how completion webhooks name the operation (`batches/abc`, `abc`,
  or each in turn) and whether `*.cancelled` events are sent at all (off: like the
  webhooks API reference and google-genai, which no longer list them); each key optional;
  `POST /_sim/reset` restores `mixed` and `true`
- `GET /_sim/github/comments`: every commit comment, and per commit `posts` received,
  `comments` stored and `deletes` done
- `GET /_sim/github/check-runs[?repo=&sha=]` and `POST /_sim/github/check-runs/{id}/rerequest`
  (`check_run_routes.py`): every check run with its annotations and writes; the App's
  `check_run` `rerequested` webhook, signed like GitHub
- `POST /_sim/github/webhooks` `{"event", "payload", "url"?, "guid"?}` and
  `/_sim/github/webhooks/...` (`hook_delivery_routes.py`): GitHub sends the App's webhook;
  every send is a delivery of `GET /app/hook/deliveries`; inspect, wait for, age and
  throttle them
- `GET /_sim/requests`: the last ~1000 GitHub and Gemini requests `{method, path, query}`
  (a GraphQL query is one `POST /graphql`, whatever the number of files it reads);
  `GET /_sim/github/requests` the GitHub ones with their JSON `body` and credential
- `POST /_sim/github/issues`, `/_sim/github/pulls`, `/_sim/github/issues/{owner}/{repo}/
  {number}/comments` seed issues, pull requests and comments; `POST /_sim/github/stubs`
  sets a GitHub route's answer for a test (`github_control.py`, `github_stubs.py`)
- `POST /_sim/reset`: empties everything, faults, quotas, create refusals and poison
  included (hung GETs are let go)
- `GET /_sim/webhook-deliveries[?operation=NAME]`, `GET /_sim/batches`, `GET /_sim/health`
- `PUT /_sim/github/{owner}/{repo}/contents/{path}?ref=SHA` (raw bytes),
  `POST /_sim/github/faults` `{"path", "status"?, "count"?}`, and
  `POST /_sim/github/latency` `{"latency_ms"}` (0..60000): every contents GET (and every
  GraphQL read of files) waits that long before answering, until set back to 0 or reset;
  a path's faults apply to it in a GraphQL query too (`graphql.py`)
- GitHub Apps (`apps.py`): `POST /_sim/github/apps` `{"app_id"?, "client_id"?,
  "public_key"?, "slug"?}` registers an App (201 `{"id", "client_id", "slug"}`; without
  `public_key` the simulator makes the key pair and answers its `private_key` PEM, once,
  as GitHub's "Generate a private key" does); `POST /_sim/github/installations`
  `{"app_id", "account", "repositories"?: ["owner/repo"] (default: all of the account's),
  "permissions"?: {"contents": "read", …}, "id"?}` installs it (201, the installation);
  `PATCH /_sim/github/installations/{id}` `{"suspended"?, "deleted"?, "repositories"?,
  "permissions"?}`; `POST /_sim/github/tokens` `{"lifetime_s"?: 1..86400, "expire"?: true,
  "installation_id"?}` sets the lifetime of tokens issued from now on and/or makes the
  issued ones (of one installation) expire now; `GET /_sim/github/apps` shows Apps,
  installations and token counts

Bad input is a 400 whose message names the offending field.

Fault model
-----------
`POST /_sim/faults` takes a JSON object; every key is optional and is merged into the
current faults (a key left out keeps its value). An unknown key is a 400 naming it; a
bad value is a 400 naming the key, and then nothing changes. Both the answer and
`GET /_sim/faults` report the full current state: every key below, plus
`github_comment_post`, `github_check_run_write` and `injected` (counts since the last
reset: `gets`, `errors` by status, `timeouts`, `delayed`, `latency_min_ms`,
`latency_max_ms`, `latency_total_ms`, `webhooks`, `webhooks_dropped`,
`webhook_copies_sent`, `early_webhooks`). All off by default; `POST /_sim/reset` turns
every fault off.

Gemini GETs (a batch, the batch list, an operation, an interaction):
- `error_rates` `{"429": 0.1, "500": 0.05, "503": 0.1}`: share of GETs failing with each
  status (replaces the whole map). A 429 carries Gemini's body: `RESOURCE_EXHAUSTED` with
  `details` holding a `google.rpc.QuotaFailure` (`quotaId`, `quotaMetric`), a
  `google.rpc.Help` and a `google.rpc.RetryInfo` (`retryDelay`, e.g. `"22s"`); others
  the plain `{"error": {"code", "message", "status"}}`.
- `get_error_rate` (0..1) with `status` (default 503): the original single-status
  spelling, kept; it adds to `error_rates`.
- `timeout_rate` (0..1): share of GETs that hang `timeout_hold_s` (default 30, up to
  600) then close the connection without an answer, past any sane client timeout.
  Timeouts plus error rates must not add up past 1.
- `latency_ms`, `latency_jitter_ms` (0..60000): every GET waits `latency_ms` ±
  `latency_jitter_ms`, uniformly drawn (never below 0), before its outcome.

Completion webhooks:
- `webhook_drop_rate` (0..1): each completion webhook is lost with this probability,
  recorded in `/_sim/webhook-deliveries` as `{"dropped": true, "copy": 0, "attempt": 0}`
  per target.
- `webhook_copies` (1..10): each `send` webhook goes out this many times, same
  `webhook-id`, same bytes.
- `early_webhook` (bool): a created batch succeeds at once and its webhook goes out
  before the create call answers (after the first attempt per target finished), so the
  receiver sees an event for an operation its creator has not registered yet; the
  create answer still shows the batch PENDING.
- `webhook_before_register_ms` (0..60000): the create answer is held this much longer
  after the early webhook; a positive value turns `early_webhook` on.

- `seed` (integer or null): re-seeds the fault draws; with a seed, the n-th GET and the
  n-th webhook always draw the same outcome.
- `github_comment_post` `{"fail": N, "status"?: 502, "after_create"?: false}`: the next N
  commit-comment posts answer `status` (after storing the comment when `after_create`).
- `github_check_run_write` `{"fail": N, "status"?: 502, "after_apply"?: false}`: the next N
  check-run writes (create or update) answer `status` (after applying the write when
  `after_apply`: GitHub did it, the answer was lost).
- `github_rate_limit` `{"remaining", "limit"?: 5000, "reset_in_s"?: 3600}`: GitHub's
  primary limit, enforced from then on: with nothing left a GitHub request answers 403
  with `x-ratelimit-remaining: 0` until `x-ratelimit-reset` (`ratelimits.py`).
- `github_secondary_limit` `{"count", "status"?: 403|429, "retry_after_s"?: 60}`: the next
  `count` GitHub requests answer a secondary rate limit with `retry-after`.
- `github_endpoint_limit` `{"enabled"?: true, "rest_points_per_minute"?: 900,
  "graphql_points_per_minute"?: 2000, "status"?: 403|429}`: GitHub's secondary limit per
  endpoint, enforced while enabled (off by default; a key left out keeps its value): a
  request that would spend more than the budget of its method and route in the last
  minute (a REST GET 1 point, a write 5; a GraphQL query 1, a mutation 5) answers `status`
  with `retry-after`. Reported with the points each endpoint `used` this minute; refusals
  are counted in `github_rate_limited.endpoint` (`ratelimits.py`).
- `github_errors` `{"count", "status"?: 503}`: the next `count` GitHub API requests, any
  route (the App's JWT calls and GraphQL too), answer `status` (500..599) with GitHub's
  error body, before rate limits or authorization; reported as `{"count" (left), "status",
  "injected"}` (`github_errors.py`).

Example: `{"error_rates": {"429": 0.1, "503": 0.1}, "timeout_rate": 0.05,
"timeout_hold_s": 30, "latency_ms": 50, "latency_jitter_ms": 30, "webhook_drop_rate": 0.3,
"webhook_copies": 3, "seed": 7}`.

Quotas
------
`POST /_sim/quotas` merges the keys it is given, like `/_sim/faults` (an unknown key or a
bad value is a 400 naming it, and changes nothing); it and `GET /_sim/quotas` answer the
full state. `POST /_sim/reset` restores the defaults and zeroes the counts.
- `gemini_batches_in_flight` (null = off, the default; else 0..1000000): the concurrent
  batch jobs of the project (Gemini: 100). In flight: not yet in a terminal state (PENDING
  or RUNNING); a deleted batch leaves the count. A `batches.create` (`POST
  /{v}/models/{m}:batchGenerateContent`, inline or from a file) beyond it creates nothing
  and answers 429 `RESOURCE_EXHAUSTED`, its `details` a `google.rpc.QuotaFailure`
  (`quotaId` `ConcurrentBatchJobsPerProject`, `quotaMetric`
  `generativelanguage.googleapis.com/concurrent_batch_jobs`, `quotaValue` the limit: names
  of ours, Gemini publishes none), a `google.rpc.Help` and a `google.rpc.RetryInfo`.
  Lowering the limit below the count in flight refuses creates until enough batches end.
- `gemini_batch_retry_delay_s` (0..3600, default 30): that 429's `RetryInfo.retryDelay`.
- `gemini_inline_request_bytes` (1..20971520, default 20971520): a create request larger
  than this is Gemini's 400 `INVALID_ARGUMENT` "Request payload size exceeds the limit: N
  bytes." (N this value), before its body is read.
The answer also holds `in_flight` `{"gemini_batches": N}` and `refused`
`{"gemini_batches_in_flight": N, "gemini_inline_request_bytes": N}` (creates refused by
each since the last reset). Example: `{"gemini_batches_in_flight": 5,
"gemini_batch_retry_delay_s": 1}`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from flask import Blueprint, Response, request

from local.simulator.apps import LEVELS
from local.simulator.engine import WEBHOOK_MODES
from local.simulator.faults import GEMINI_KEYS, MAX_LATENCY_MS, unknown_keys
from local.simulator.gemini import (
    OUTCOMES,
    batch_resource,
    interaction_resource,
    operation_resource,
    prompt_text,
)
from local.simulator.github import DEFAULT_REF
from local.simulator.github_errors import KEY as GITHUB_ERRORS
from local.simulator.github_errors import GitHubErrors
from local.simulator.ratelimits import RateLimits
from local.simulator.state import BATCH_STATES, INTERACTION_API_STATUSES, WITH_ROWS, BadRequest
from local.simulator.webhooks import DATA_ID_FORMS
from local.simulator.wire import json_response, read_json

if TYPE_CHECKING:
    from local.simulator.engine import Simulator


COMMENT_FAULT = "github_comment_post"
CHECK_RUN_FAULT = "github_check_run_write"
RATE_LIMIT = "github_rate_limit"
SECONDARY_LIMIT = "github_secondary_limit"
ENDPOINT_LIMIT = "github_endpoint_limit"
GITHUB_FAULTS = frozenset(
    {COMMENT_FAULT, CHECK_RUN_FAULT, RATE_LIMIT, SECONDARY_LIMIT, ENDPOINT_LIMIT, GITHUB_ERRORS}
)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_status(status: Any, field: str) -> None:
    if not _is_int(status) or not 400 <= status <= 599:
        raise BadRequest(f"{field} must be an HTTP error code 400..599, got {status!r}.")


def _comment_post_fault(value: Any) -> dict[str, Any]:
    """`{"fail", "status", "after_create"}` from a `github_comment_post` fault, validated."""
    if not isinstance(value, dict):
        raise BadRequest("github_comment_post must be an object {fail, status?, after_create?}.")
    fail = value.get("fail", 1)
    status = value.get("status", 502)
    after_create = value.get("after_create", False)
    if not _is_int(fail) or fail < 0:
        raise BadRequest(f"github_comment_post.fail must be a whole number >= 0, got {fail!r}.")
    _check_status(status, "github_comment_post.status")
    if not isinstance(after_create, bool):
        raise BadRequest(
            f"github_comment_post.after_create must be true or false, got {after_create!r}."
        )
    return {"fail": fail, "status": status, "after_create": after_create}


def _check_run_write_fault(value: Any) -> dict[str, Any]:
    """`{"fail", "status", "after_apply"}` from a `github_check_run_write` fault, validated."""
    if not isinstance(value, dict):
        raise BadRequest(f"{CHECK_RUN_FAULT} must be an object {{fail, status?, after_apply?}}.")
    fail = value.get("fail", 1)
    status = value.get("status", 502)
    after_apply = value.get("after_apply", False)
    if not _is_int(fail) or fail < 0:
        raise BadRequest(f"{CHECK_RUN_FAULT}.fail must be a whole number >= 0, got {fail!r}.")
    _check_status(status, f"{CHECK_RUN_FAULT}.status")
    if not isinstance(after_apply, bool):
        raise BadRequest(
            f"{CHECK_RUN_FAULT}.after_apply must be true or false, got {after_apply!r}."
        )
    return {"fail": fail, "status": status, "after_apply": after_apply}


def _rpc_status(value: Any, field: str) -> dict[str, Any]:
    """A google.rpc.Status-like `{"code": int, "message": str}` or `BadRequest`."""
    if not isinstance(value, dict) or not _is_int(value.get("code")):
        raise BadRequest(f"{field} must be an object with an integer `code` and a `message`.")
    if not isinstance(value.get("message", ""), str):
        raise BadRequest(f"{field}.message must be a string.")
    return {
        "code": value["code"],
        "message": value.get("message", ""),
        **{k: v for k, v in value.items() if k not in ("code", "message")},
    }


def _rows(value: Any, keys: list[str | None]) -> dict[int, dict[str, Any]]:
    """Per-request overrides by index, from a list of `{index, error | text | outcome}` or
    an object `{request key: outcome | {outcome, text?, block_reason?} | {error}}`."""
    if isinstance(value, dict):
        entries = []
        for key, spec in value.items():
            if key not in keys:
                raise BadRequest(f"rows[{key!r}] names no request of this batch.")
            spec = {"outcome": spec} if isinstance(spec, str) else spec
            if not isinstance(spec, dict):
                raise BadRequest(f"rows[{key!r}] must be an outcome name or an object.")
            entries.append((f"rows[{key!r}]", {**spec, "index": keys.index(key)}))
    elif isinstance(value, list):
        entries = [(f"rows[{position}]", row) for position, row in enumerate(value)]
    else:
        raise BadRequest(
            "rows must be a list of {index, error | text | outcome} or an object by key."
        )
    rows: dict[int, dict[str, Any]] = {}
    for where, row in entries:
        if not isinstance(row, dict) or not _is_int(row.get("index")):
            raise BadRequest(f"{where} must be an object with an integer `index`.")
        index = row["index"]
        if not 0 <= index < len(keys):
            raise BadRequest(f"{where}.index {index} is outside 0..{len(keys) - 1}.")
        rows[index] = _row(row, where)
    return rows


def _row(row: dict[str, Any], where: str) -> dict[str, Any]:
    if "error" in row:
        if "text" in row or "outcome" in row:
            raise BadRequest(f"{where}: `error` goes alone, without `text` or `outcome`.")
        return {"error": _rpc_status(row["error"], f"{where}.error")}
    if "text" not in row and "outcome" not in row:
        raise BadRequest(f"{where} needs one of `error`, `text` or `outcome`.")
    spec: dict[str, Any] = {}
    if "text" in row:
        if not isinstance(row["text"], str):
            raise BadRequest(f"{where}.text must be a string.")
        spec["text"] = row["text"]
    outcome = row.get("outcome", "ok")
    if outcome not in OUTCOMES:
        raise BadRequest(f"{where}.outcome must be one of {sorted(OUTCOMES)}, got {outcome!r}.")
    spec["outcome"] = outcome
    if "block_reason" in row:
        if outcome != "blocked" or not isinstance(row["block_reason"], str):
            raise BadRequest(f"{where}.block_reason is a string, for outcome 'blocked' only.")
        spec["block_reason"] = row["block_reason"]
    return spec


def _malformed_lines(value: Any, request_count: int) -> frozenset[int]:
    if not isinstance(value, list) or not all(_is_int(n) for n in value):
        raise BadRequest("malformed_lines must be a list of 1-based line numbers.")
    outside = [n for n in value if not 1 <= n <= request_count]
    if outside:
        raise BadRequest(f"malformed_lines {outside} are outside 1..{request_count}.")
    return frozenset(value)


def webhook_config(value: Any) -> tuple[tuple[str, ...], dict[str, Any] | None]:
    """(uris, user metadata) of a job's `webhook_config` (REST camelCase or snake_case)."""
    hook = value or {}
    if not isinstance(hook, dict):
        raise BadRequest("webhookConfig must be an object.")
    uris = hook.get("uris") or []
    if not isinstance(uris, list) or not all(isinstance(u, str) for u in uris):
        raise BadRequest("webhookConfig.uris must be a list of URLs.")
    user_metadata = hook.get("userMetadata", hook.get("user_metadata"))
    if user_metadata is not None and not isinstance(user_metadata, dict):
        raise BadRequest("webhookConfig.userMetadata must be an object.")
    return tuple(uris), user_metadata


def blueprint(sim: Simulator) -> Blueprint:
    bp = Blueprint("sim_control", __name__, url_prefix="/_sim")

    @bp.get("/health")
    def health() -> Response:
        return json_response({"status": "ok"})

    @bp.post("/reset")
    def reset() -> Response:
        sim.reset()
        return json_response({"status": "reset"})

    @bp.post("/operations/<path:name>:complete")
    def complete(name: str) -> Response:
        body = read_json()
        state = body.get("state")
        if state not in BATCH_STATES:
            raise BadRequest(f"state must be one of {sorted(BATCH_STATES)}, got {state!r}.")
        webhook = body.get("webhook", "send")
        if webhook not in WEBHOOK_MODES:
            raise BadRequest(f"webhook must be one of {sorted(WEBHOOK_MODES)}, got {webhook!r}.")
        if "rows" in body and state not in WITH_ROWS:
            raise BadRequest(f"rows applies only to states {sorted(WITH_ROWS)}.")
        for option in ("echo_metadata", "malformed_lines"):
            if option in body and state not in WITH_ROWS:
                raise BadRequest(f"{option} applies only to states {sorted(WITH_ROWS)}.")
        if "error" in body and state != "failed":
            raise BadRequest("error applies only to state 'failed'.")
        error = _rpc_status(body["error"], "error") if "error" in body else None
        if name.startswith("batches/"):
            batch_id = name.removeprefix("batches/")
            batch = sim.world.batch(batch_id)
            keys = [(r.get("metadata") or {}).get("key") for r in batch.requests]
            rows = _rows(body["rows"], keys) if "rows" in body else None
            echo = body.get("echo_metadata", True)
            if not isinstance(echo, bool):
                raise BadRequest(f"echo_metadata must be true or false, got {echo!r}.")
            malformed = _malformed_lines(body.get("malformed_lines", []), len(keys))
            if malformed and batch.input_file is None:
                raise BadRequest(
                    "malformed_lines applies only to a batch made from an input file "
                    "(its results are a file; inline results have no lines)."
                )
            done = sim.complete_batch(
                batch_id,
                state,
                webhook,
                rows,
                error,
                echo_metadata=echo,
                malformed_lines=malformed,
            )
            return json_response(batch_resource(done))
        for option in ("rows", "echo_metadata", "malformed_lines"):
            if option in body:
                raise BadRequest(f"{option} applies only to batches.")
        if state == "partially_succeeded":
            raise BadRequest("partially_succeeded applies only to batches.")
        response = body.get("response")
        if response is not None and not isinstance(response, dict):
            raise BadRequest("response must be an object.")
        operation = sim.complete_operation(name, state, webhook, response, error)
        return json_response(operation_resource(operation))

    @bp.post("/operations/<path:name>:status")
    def interaction_status(name: str) -> Response:
        body = read_json()
        if not name.startswith("interactions/"):
            raise BadRequest(f"name must be an interaction 'interactions/abc', got {name!r}.")
        status = body.get("status")
        if status not in INTERACTION_API_STATUSES:
            raise BadRequest(
                f"status must be one of {sorted(INTERACTION_API_STATUSES)}, got {status!r}."
            )
        webhook = body.get("webhook", "send")
        if webhook not in WEBHOOK_MODES:
            raise BadRequest(f"webhook must be one of {sorted(WEBHOOK_MODES)}, got {webhook!r}.")
        output_text = body.get("output_text")
        if output_text is not None and not isinstance(output_text, str):
            raise BadRequest("output_text must be a string.")
        error = _rpc_status(body["error"], "error") if "error" in body else None
        operation = sim.set_interaction_status(name, status, webhook, output_text, error)
        return json_response(interaction_resource(operation))

    @bp.post("/operations")
    def create_operation() -> Response:
        body = read_json()
        name = body.get("name")
        if (
            not isinstance(name, str)
            or name.startswith("batches/")
            or not ("/operations/" in name or name.startswith("interactions/"))
        ):
            raise BadRequest(
                "name must be an operation name such as "
                "'models/veo-2.0-generate-001/operations/abc' or an interaction "
                "'interactions/abc' (batches are made through the API)."
            )
        metadata = body.get("metadata", {})
        if not isinstance(metadata, dict):
            raise BadRequest("metadata must be an object.")
        uris, user_metadata = webhook_config(body.get("webhook_config"))
        operation = sim.world.create_operation(name, metadata, uris, user_metadata)
        return json_response(operation_resource(operation))

    @bp.get("/batches")
    def batches() -> Response:
        return json_response(
            {
                "batches": [
                    {
                        "name": b.name,
                        "model": b.model,
                        "display_name": b.display_name,
                        "state": b.state,
                        "webhook_config": {
                            "uris": list(b.webhook_uris),
                            "user_metadata": b.user_metadata,
                        },
                        "requests": [
                            {
                                "metadata": r.get("metadata"),
                                "text": prompt_text(r),
                                "generation_config": (r.get("request") or {}).get(
                                    "generationConfig"
                                ),
                            }
                            for r in b.requests
                        ],
                    }
                    for b in sim.world.batches()
                ]
            }
        )

    def fault_state() -> dict[str, Any]:
        return {
            **sim.faults.report(),
            COMMENT_FAULT: sim.comments.fault(),
            CHECK_RUN_FAULT: sim.check_runs.fault(),
            **sim.rate_limits.report(),
            GITHUB_ERRORS: sim.github_errors.report(),
        }

    @bp.post("/faults")
    def set_faults() -> Response:
        body = read_json()
        unknown = unknown_keys(body, GITHUB_FAULTS)
        if unknown:
            known = sorted(GEMINI_KEYS | GITHUB_FAULTS)
            raise BadRequest(f"Unknown fault keys {unknown}; known keys: {known}.")
        comment_fault = _comment_post_fault(body[COMMENT_FAULT]) if COMMENT_FAULT in body else None
        check_run_fault = (
            _check_run_write_fault(body[CHECK_RUN_FAULT]) if CHECK_RUN_FAULT in body else None
        )
        # Validates the whole body before changing anything, so a 400 leaves every fault as it was.
        trial = RateLimits()  # the same validation, on a throwaway copy
        if RATE_LIMIT in body:
            trial.set_primary(body[RATE_LIMIT])
        if SECONDARY_LIMIT in body:
            trial.set_secondary(body[SECONDARY_LIMIT])
        if ENDPOINT_LIMIT in body:
            trial.set_endpoint(body[ENDPOINT_LIMIT])
        if GITHUB_ERRORS in body:
            GitHubErrors.check(body[GITHUB_ERRORS])
        sim.faults.update({key: value for key, value in body.items() if key not in GITHUB_FAULTS})
        if comment_fault is not None:
            sim.comments.set_fault(**comment_fault)
        if check_run_fault is not None:
            sim.check_runs.set_fault(**check_run_fault)
        if RATE_LIMIT in body:
            sim.rate_limits.set_primary(body[RATE_LIMIT])
        if SECONDARY_LIMIT in body:
            sim.rate_limits.set_secondary(body[SECONDARY_LIMIT])
        if ENDPOINT_LIMIT in body:
            sim.rate_limits.set_endpoint(body[ENDPOINT_LIMIT])
        if GITHUB_ERRORS in body:
            sim.github_errors.set(body[GITHUB_ERRORS])
        return json_response(fault_state())

    @bp.get("/faults")
    def get_faults() -> Response:
        return json_response(fault_state())

    @bp.post("/quotas")
    def set_quotas() -> Response:
        sim.quotas.update(read_json())
        return json_response(sim.quotas.report(sim.world.batches_in_flight()))

    @bp.get("/quotas")
    def get_quotas() -> Response:
        return json_response(sim.quotas.report(sim.world.batches_in_flight()))

    @bp.post("/webhook-mode")
    def set_webhook_mode() -> Response:
        body = read_json()
        unknown = sorted(set(body) - {"data_id", "cancel_events"})
        if unknown:
            raise BadRequest(f"Unknown webhook-mode keys {unknown}; known: data_id, cancel_events.")
        data_id = body.get("data_id")
        if data_id is not None and data_id not in DATA_ID_FORMS:
            raise BadRequest(f"data_id must be one of {list(DATA_ID_FORMS)}, got {data_id!r}.")
        cancel_events = body.get("cancel_events")
        if cancel_events is not None and not isinstance(cancel_events, bool):
            raise BadRequest(f"cancel_events must be true or false, got {cancel_events!r}.")
        sim.dispatcher.set_mode(data_id=data_id, cancel_events=cancel_events)
        return json_response(sim.dispatcher.mode())

    @bp.get("/webhook-mode")
    def get_webhook_mode() -> Response:
        return json_response(sim.dispatcher.mode())

    @bp.get("/github/comments")
    def github_comments() -> Response:
        return json_response(sim.comments.summary(request.host_url.rstrip("/")))

    @bp.get("/requests")
    def requests_log() -> Response:
        return json_response({"requests": sim.requests.entries()})

    @bp.get("/webhook-deliveries")
    def deliveries() -> Response:
        operation = request.args.get("operation") or None
        return json_response({"deliveries": sim.dispatcher.attempts(operation)})

    @bp.put("/github/<owner>/<repo>/contents/<path:path>")
    def put_file(owner: str, repo: str, path: str) -> Response:
        ref = request.args.get("ref") or DEFAULT_REF
        sha = sim.contents.put(owner, repo, path, ref, request.get_data())
        return json_response({"path": path.strip("/"), "ref": ref, "sha": sha}, 201)

    @bp.post("/github/faults")
    def github_faults() -> Response:
        body = read_json()
        path = body.get("path")
        status = body.get("status", 502)
        count = body.get("count", 1)
        if not isinstance(path, str) or not path.strip("/"):
            raise BadRequest("path is required: the file path inside the repository.")
        if not _is_int(status) or not 400 <= status <= 599:
            raise BadRequest(f"status must be an HTTP error code 400..599, got {status!r}.")
        if not _is_int(count) or count < 0:
            raise BadRequest(f"count must be a whole number >= 0, got {count!r}.")
        sim.contents.add_fault(path, status, count)
        return json_response({"path": path.strip("/"), "status": status, "count": count})

    @bp.post("/github/apps")
    def register_app() -> Response:
        body = read_json()
        app_id = body.get("app_id")
        if app_id is not None and (not _is_int(app_id) or app_id < 1):
            raise BadRequest(f"app_id must be a positive whole number, got {app_id!r}.")
        texts = {k: body.get(k) for k in ("client_id", "public_key", "slug")}
        for key, value in texts.items():
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise BadRequest(f"{key} must be a non-empty string.")
        app, private_key = sim.apps.register(
            app_id=app_id,
            client_id=texts["client_id"],
            public_key_pem=texts["public_key"],
            slug=texts["slug"],
        )
        answer: dict[str, Any] = {"id": app.id, "client_id": app.client_id, "slug": app.slug}
        if private_key is not None:
            answer["private_key"] = private_key
        return json_response(answer, 201)

    @bp.get("/github/apps")
    def github_apps() -> Response:
        return json_response(sim.apps.summary())

    def _installation_fields(body: dict[str, Any]) -> dict[str, Any]:
        fields: dict[str, Any] = {}
        if "repositories" in body:
            repos = body["repositories"]
            if repos is not None and (
                not isinstance(repos, list)
                or not all(isinstance(r, str) and r.count("/") == 1 for r in repos)
            ):
                raise BadRequest("repositories must be null (all) or a list of 'owner/repo'.")
            fields["repositories"] = repos
        if "permissions" in body:
            permissions = body["permissions"]
            if not isinstance(permissions, dict) or not all(
                isinstance(k, str) and v in LEVELS for k, v in permissions.items()
            ):
                raise BadRequest(f"permissions must map names to one of {sorted(LEVELS)}.")
            fields["permissions"] = permissions
        return fields

    @bp.post("/github/installations")
    def install_app() -> Response:
        body = read_json()
        app_id, account = body.get("app_id"), body.get("account")
        if not isinstance(app_id, int) or isinstance(app_id, bool):
            raise BadRequest(f"app_id must be a registered App's id, got {app_id!r}.")
        if not isinstance(account, str) or not account:
            raise BadRequest("account is required: the user or organization login.")
        number = body.get("id")
        if number is not None and (not _is_int(number) or number < 1):
            raise BadRequest(f"id must be a positive whole number, got {number!r}.")
        fields = _installation_fields(body)
        installation = sim.apps.install(
            app_id,
            account,
            fields.get("repositories"),
            fields.get("permissions"),
            installation_id=number,
        )
        return json_response(installation.json(), 201)

    @bp.patch("/github/installations/<int:installation_id>")
    def change_installation(installation_id: int) -> Response:
        body = read_json()
        unknown = sorted(set(body) - {"suspended", "deleted", "repositories", "permissions"})
        if unknown:
            raise BadRequest(f"Unknown installation keys {unknown}.")
        fields = _installation_fields(body)
        for flag in ("suspended", "deleted"):
            if flag in body:
                if not isinstance(body[flag], bool):
                    raise BadRequest(f"{flag} must be true or false.")
                fields[flag] = body[flag]
        return json_response(sim.apps.update(installation_id, **fields).json())

    @bp.post("/github/tokens")
    def github_tokens() -> Response:
        body = read_json()
        lifetime = body.get("lifetime_s")
        if lifetime is not None and (not _is_int(lifetime) or not 1 <= lifetime <= 86_400):
            raise BadRequest(f"lifetime_s must be 1..86400, got {lifetime!r}.")
        expire = body.get("expire", False)
        if not isinstance(expire, bool):
            raise BadRequest("expire must be true or false.")
        installation_id = body.get("installation_id")
        if installation_id is not None and not _is_int(installation_id):
            raise BadRequest("installation_id must be a whole number.")
        if lifetime is not None:
            sim.apps.token_lifetime_s = lifetime
        expired = sim.apps.expire_tokens(installation_id) if expire else 0
        return json_response({"token_lifetime_s": sim.apps.token_lifetime_s, "expired": expired})

    @bp.post("/github/latency")
    def github_latency() -> Response:
        latency_ms = read_json().get("latency_ms")
        if not isinstance(latency_ms, int) or isinstance(latency_ms, bool):
            raise BadRequest(f"latency_ms must be 0..{MAX_LATENCY_MS}, got {latency_ms!r}.")
        if not 0 <= latency_ms <= MAX_LATENCY_MS:
            raise BadRequest(f"latency_ms must be 0..{MAX_LATENCY_MS}, got {latency_ms!r}.")
        sim.contents.latency_ms = latency_ms
        return json_response({"latency_ms": latency_ms})

    return bp
