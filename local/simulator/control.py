"""The local-only control API under `/_sim/` (see docs/architecture.md, "Simulator control").

This docstring is the index and reference of every control call; each names the module
that serves it. `blueprint` serves health, reset and the request logs itself and adds
the routes of `gemini_control.py`, `fault_control.py`, `contents_control.py` and
`app_control.py`; `app.py` registers the other modules' routes beside it.

- `POST /_sim/operations/{name}:complete` (`gemini_control.py`) `{"state", "webhook"?,
  "rows"?, "error"?, "response"?, "echo_metadata"?, "malformed_lines"?}`
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
- `POST /_sim/operations/interactions/{id}:status` (`gemini_control.py`) `{"status",
  "output_text"?, "error"?, "webhook"?}`: the interaction reports that Interactions API
  status, waiting ones (`requires_action`, `requires_continuation`, `idle`) included;
  `completed`/`incomplete` carry `output_text` as their last model output; the event Gemini
  sends on it, if any
- `POST /_sim/operations` (`gemini_control.py`) `{"name": "models/veo/operations/x",
  "metadata"?, "webhook_config"?: {"uris", "user_metadata"}}` creates a pending non-batch
  operation (video generation, an interaction…) with the job's webhook config, as a batch
  gets it from `batches.create`; `GET /_sim/batches` shows each batch's `webhook_config`
- a batch is deleted through the Gemini API itself: `DELETE /v1beta/batches/{id}`, after
  which it answers 404 (`app.py`)
- `POST /_sim/faults`, `GET /_sim/faults` (`fault_control.py`): the fault model, below
- `POST /_sim/quotas`, `GET /_sim/quotas` (`fault_control.py`): the Gemini quotas
  `batches.create` enforces, below
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
- `POST /_sim/gemini/poison` `{"marker": "…"|null, "name_index"?: true}`, `DELETE` and
  `GET` on it (`create_refusal_routes.py`): a create any of whose requests (inline, or
  lines of its input file) has a text part holding `marker` creates nothing and answers
  400 INVALID_ARGUMENT, one message line per such request
  `* BatchGenerateContentRequest.batch.input_config.requests.requests[i]
  .request.contents[c].parts[p].text: …` and a google.rpc.BadRequest `fieldViolations`
  entry each (a file's request is named by its 0-based position in the file: the
  simulator's choice); with `name_index` false, Gemini's bare "Request contains an invalid
  argument." without details. `{"marker": null}` or `DELETE` clears; each answers
  `{"marker", "name_index", "refused"}`
- `POST /_sim/webhook-mode`, `GET /_sim/webhook-mode` (`gemini_control.py`): `{"data_id":
  "name"|"bare"|"mixed", "cancel_events": bool}`, how completion webhooks name the
  operation (`batches/abc`, `abc`, or each in turn) and whether `*.cancelled` events are
  sent at all (off: like the webhooks API reference and google-genai, which no longer list
  them); each key optional; `POST /_sim/reset` restores `mixed` and `true`
- `GET /_sim/github/comments` (here): every commit comment, and per commit `posts` received,
  `comments` stored and `deletes` done
- `GET /_sim/github/check-runs[?repo=&sha=]` and `POST /_sim/github/check-runs/{id}/rerequest`
  (`check_run_routes.py`): every check run with its annotations and writes; the App's
  `check_run` `rerequested` webhook, signed like GitHub
- `POST /_sim/github/webhooks` `{"event", "payload", "url"?, "guid"?}` and
  `/_sim/github/webhooks/...` (`hook_delivery_routes.py`): GitHub sends the App's webhook;
  every send is a delivery of `GET /app/hook/deliveries`; inspect, wait for, age and
  throttle them
- `GET /_sim/requests` (here): the last ~1000 GitHub and Gemini requests `{method, path, query}`
  (a GraphQL query is one `POST /graphql`, whatever the number of files it reads);
  `GET /_sim/github/requests` (`github_control.py`) the GitHub ones with their JSON `body`
  and credential
- `POST /_sim/github/issues`, `/_sim/github/pulls`, `/_sim/github/issues/{owner}/{repo}/
  {number}/comments` seed issues, pull requests and comments; `POST /_sim/github/stubs`
  sets a GitHub route's answer for a test, `GET` lists the stubs and `DELETE` removes them
  (`github_control.py`, `github_stubs.py`)
- `POST /_sim/reset` (here): empties everything, faults, quotas, create refusals and poison
  included (hung GETs are let go)
- `GET /_sim/webhook-deliveries[?operation=NAME]` and `GET /_sim/batches`
  (`gemini_control.py`; each batch with its `priority`, `created_at`, `started_at` and
  `ended_at`), `GET /_sim/health` (here)
- `POST /_sim/gemini/processing`, `GET /_sim/gemini/processing` (`gemini_control.py`,
  `processing.py`): how batches are run, below
- `POST /_sim/files/{id}:fail-downloads` `{"times"?: 1, "status"?: 503}` (`file_routes.py`):
  the next `times` downloads of that file answer `status`
- `PUT /_sim/github/{owner}/{repo}/contents/{path}?ref=SHA` (raw bytes; `contents_control.py`),
  `POST /_sim/github/faults` `{"path", "status"?, "count"?}`, and
  `POST /_sim/github/latency` `{"latency_ms"}` (0..60000): every contents GET (and every
  GraphQL read of files) waits that long before answering, until set back to 0 or reset;
  a path's faults apply to it in a GraphQL query too (`graphql.py`)
- GitHub Apps (`app_control.py`; the rules in `apps.py`): `POST /_sim/github/apps`
  `{"app_id"?, "client_id"?, "public_key"?, "slug"?}` registers an App (201 `{"id",
  "client_id", "slug"}`; without `public_key` the simulator makes the key pair and answers
  its `private_key` PEM, once, as GitHub's "Generate a private key" does); `POST
  /_sim/github/installations` `{"app_id", "account", "repositories"?: ["owner/repo"]
  (default: all of the account's), "permissions"?: {"contents": "read", …}, "id"?}`
  installs it (201, the installation); `PATCH /_sim/github/installations/{id}`
  `{"suspended"?, "deleted"?, "repositories"?, "permissions"?}`; `POST /_sim/github/tokens`
  `{"lifetime_s"?: 1..86400, "expire"?: true, "installation_id"?}` sets the lifetime of
  tokens issued from now on and/or makes the issued ones (of one installation) expire now;
  `GET /_sim/github/apps` shows Apps, installations and token counts

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

Processing
----------
A create's `batch.priority` (Gemini's REST reference: int64, default 0, "Batches with a
higher priority value will be processed before batches with a lower priority value") is
kept and shown (`metadata.priority` in the batch, as a string; `priority` in
`GET /_sim/batches`); a value that is no int64 (a fraction, `true`, text that is not a
whole number, beyond int64) is Gemini's 400 `Invalid value at 'batch.priority'
(TYPE_INT64), …` and nothing is created. `POST /_sim/gemini/processing` merges the keys it
is given, like `/_sim/quotas` (an unknown key or a bad value is a 400 naming it, and
changes nothing); it and `GET` answer the full state, with `running` and `queued` counts.
`POST /_sim/reset` restores the defaults (all off).
- `slots` (null = off, the default; else 1..100000): at most this many batches RUNNING at
  once; the others stay PENDING, queued, and each slot freed (a batch ended, cancelled or
  deleted) goes to the queued batch of the highest priority, then the oldest. Off: every
  batch runs at once (RUNNING `running_after_s` after its creation), as before.
- `run_s` (null = off, the default; else 0..86400): a running batch succeeds on its own this
  long after it started (slots off: after its creation), its webhook sent; off: the
  simulator's `--auto-complete-s` if set, else only `:complete` ends a batch.
- `honour_priority` (default true): false queues by creation order alone, as if every
  batch named the default priority.
Example: `{"slots": 4, "run_s": 0.5}`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from flask import Blueprint, Response, request

from local.simulator import app_control, contents_control, fault_control, gemini_control
from local.simulator.fault_control import CHECK_RUN_FAULT as CHECK_RUN_FAULT
from local.simulator.fault_control import COMMENT_FAULT as COMMENT_FAULT
from local.simulator.fault_control import ENDPOINT_LIMIT as ENDPOINT_LIMIT
from local.simulator.fault_control import GITHUB_FAULTS as GITHUB_FAULTS
from local.simulator.fault_control import RATE_LIMIT as RATE_LIMIT
from local.simulator.fault_control import SECONDARY_LIMIT as SECONDARY_LIMIT
from local.simulator.gemini_control import webhook_config as webhook_config
from local.simulator.wire import json_response

if TYPE_CHECKING:
    from local.simulator.engine import Simulator


def blueprint(sim: Simulator) -> Blueprint:
    """Every `/_sim/...` call of the modules this docstring names `blueprint` adds."""
    bp = Blueprint("sim_control", __name__, url_prefix="/_sim")

    @bp.get("/health")
    def health() -> Response:
        return json_response({"status": "ok"})

    @bp.post("/reset")
    def reset() -> Response:
        sim.reset()
        return json_response({"status": "reset"})

    @bp.get("/github/comments")
    def github_comments() -> Response:
        return json_response(sim.comments.summary(request.host_url.rstrip("/")))

    @bp.get("/requests")
    def requests_log() -> Response:
        return json_response({"requests": sim.requests.entries()})

    gemini_control.add_routes(bp, sim)
    fault_control.add_routes(bp, sim)
    contents_control.add_routes(bp, sim)
    app_control.add_routes(bp, sim)
    return bp
