"""The JSON the Gemini API (generativelanguage, v1beta) answers with, built from `state`.

Shapes match what google-genai parses (`batches._BatchJob_from_mldev`): the batch
lives under `metadata` (`state`, `displayName`, `createTime`, `output`), results
under `metadata.output.inlinedResponses.inlinedResponses` (inline input) or
`metadata.output.responsesFile` (file input: a JSONL file, one `{"key", "response"|
"error"}` per line), and a failure in the top-level `error` (which the SDK does not
copy: callers read the raw JSON). Listing leaves inlined results out.
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import UTC, datetime
from typing import Any

from local.simulator.records import Batch, Operation

BATCH_TYPE = "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch"
OUTPUT_TYPE = "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatchOutput"

# google.rpc.Code names for the HTTP statuses the simulator answers with.
STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    405: "METHOD_NOT_ALLOWED",
    409: "ALREADY_EXISTS",
    413: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def error_body(code: int, message: str) -> dict[str, Any]:
    """`{"error": {"code", "message", "status"}}`, the shape google-genai's errors parse."""
    return {
        "error": {"code": code, "message": message, "status": STATUS_NAMES.get(code, "UNKNOWN")}
    }


QUOTA_DOCS = "https://ai.google.dev/gemini-api/docs/rate-limits"
QUOTA_RETRY_DELAY = "22s"
# The message every Gemini quota 429 opens with (batch creates refused included).
QUOTA_MESSAGE = (
    "You exceeded your current quota, please check your plan and billing details. "
    f"For more information on this error, head to: {QUOTA_DOCS}."
)
# Gemini's "Rate limits" page (Batch API) gives 100 "concurrent batch requests" per project
# but publishes no quotaId or metric for it: these two names are the simulator's own.
BATCH_QUOTA_ID = "ConcurrentBatchJobsPerProject"
BATCH_QUOTA_METRIC = "generativelanguage.googleapis.com/concurrent_batch_jobs"


def duration(seconds: float) -> str:
    """A google.protobuf.Duration as JSON: `"30s"`, `"1.5s"`."""
    return format(seconds, ".9f").rstrip("0").rstrip(".") + "s"


def _quota_429(message: str, violation: dict[str, Any], retry_delay: str) -> dict[str, Any]:
    """RESOURCE_EXHAUSTED with google.rpc `details`: QuotaFailure, Help, RetryInfo."""
    body = error_body(429, message)
    body["error"]["details"] = [
        {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [violation]},
        {
            "@type": "type.googleapis.com/google.rpc.Help",
            "links": [{"description": "Learn more about Gemini API quotas", "url": QUOTA_DOCS}],
        },
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": retry_delay},
    ]
    return body


def quota_error_body(message: str, model: str = "gemini-2.5-flash") -> dict[str, Any]:
    """A 429 as the Gemini API sends it: RESOURCE_EXHAUSTED with google.rpc `details`.

    The details carry a `QuotaFailure` naming the quota (`quotaId`, `quotaMetric`), a
    `Help` link and a `RetryInfo` whose `retryDelay` is a protobuf Duration string.
    """
    violation = {
        "quotaMetric": "generativelanguage.googleapis.com/generate_requests_per_model",
        "quotaId": "GenerateRequestsPerMinutePerProjectPerModel",
        "quotaDimensions": {"location": "global", "model": model},
        "quotaValue": "1000",
    }
    return _quota_429(message, violation, QUOTA_RETRY_DELAY)


def batch_quota_message(limit: int, retry_delay_s: float) -> str:
    """The message of a batch create refused at `limit` batches in flight, in the shape of
    Gemini's quota messages ("* Quota exceeded for metric: …, limit: …", "Please retry in …")."""
    return (
        f"{QUOTA_MESSAGE}\n* Quota exceeded for metric: {BATCH_QUOTA_METRIC}, limit: {limit}"
        f"\nPlease retry in {duration(retry_delay_s)}."
    )


def batch_quota_error_body(limit: int, retry_delay_s: float) -> dict[str, Any]:
    """The 429 of a `batches.create` beyond `limit` concurrent batch jobs per project.

    The shape is the per-minute quota's (`quota_error_body`); the quota is named by
    BATCH_QUOTA_ID / BATCH_QUOTA_METRIC (ours: the docs name none), per project (no model
    dimension), `quotaValue` the limit, and `RetryInfo.retryDelay` `retry_delay_s`: how long
    Gemini would have the caller wait is not published either (reports of real batch-create
    429s show some with no QuotaFailure or RetryInfo at all; a caller must cope with both).
    """
    violation = {
        "quotaMetric": BATCH_QUOTA_METRIC,
        "quotaId": BATCH_QUOTA_ID,
        "quotaDimensions": {"location": "global"},
        "quotaValue": str(limit),
    }
    return _quota_429(batch_quota_message(limit, retry_delay_s), violation, duration(retry_delay_s))


def prompt_text(request: dict[str, Any]) -> str:
    """All text parts of one inline request, joined."""
    texts = []
    for content in request.get("request", {}).get("contents", []) or []:
        for part in content.get("parts", []) or []:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                texts.append(part["text"])
    return "\n".join(texts)


def wants_json(request: dict[str, Any]) -> bool:
    """Whether the request asks for structured output (`generationConfig.responseMimeType`)."""
    config = (request.get("request") or {}).get("generationConfig") or {}
    return isinstance(config, dict) and config.get("responseMimeType") == "application/json"


def review_text(request: dict[str, Any]) -> str:
    """A deterministic simulated review that names the request (its metadata) and its size;
    JSON of the review schema (`review_json`) when the request asks for JSON."""
    text = prompt_text(request)
    metadata = request.get("metadata") or {}
    label = ", ".join(f"{k}={v}" for k, v in sorted(metadata.items())) or "unlabelled request"
    lines = text.splitlines()
    first = lines[0].strip()[:80] if lines else ""
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    summary = (
        f"Simulated review of {label}: {len(lines)} lines, {len(text)} characters "
        f"(sha256 {digest}). Opens with: {first!r}."
    )
    if not wants_json(request):
        return summary
    return json.dumps(review_json(text, label, summary))


# A file asks for N simulated findings with `sim:findings=N` anywhere in it (an HTML comment
# hides it in Markdown: `<!-- sim:findings=120 -->`), optionally `level=notice|warning|failure`
# (default warning). Without it a file has no findings.
FINDINGS_MARKER = re.compile(r"sim:findings=(\d+)(?:\s+level=(notice|warning|failure))?")
MAX_SIM_FINDINGS = 1000
# The review prompt numbers the file's lines ("  12| text", apps/review/pipeline.py).
_NUMBERED = re.compile(r"^\s*\d+\| ", re.MULTILINE)


def review_json(text: str, label: str, summary: str) -> dict[str, Any]:
    """`{summary, conclusion, findings}` in the shape apps/review/findings.py asks
    for: the findings a `sim:findings=N` marker asks for, on the file's lines in turn."""
    marker = FINDINGS_MARKER.search(text)
    count = min(int(marker.group(1)), MAX_SIM_FINDINGS) if marker else 0
    level = (marker.group(2) if marker else None) or "warning"
    lines = len(_NUMBERED.findall(text)) or len(text.splitlines()) or 1
    findings = []
    for index in range(count):
        line = index % lines + 1
        findings.append(
            {
                "start_line": line,
                "end_line": line,
                "severity": level,
                "title": f"Simulated finding {index + 1}",
                "message": f"Simulated finding {index + 1} of {count} in {label}, line {line}.",
            }
        )
    verdict = "success" if not findings else ("failure" if level == "failure" else "neutral")
    return {"summary": summary, "conclusion": verdict, "findings": findings}


def generate_content_response(request: dict[str, Any], model: str, text: str) -> dict[str, Any]:
    prompt_tokens = max(1, len(prompt_text(request)) // 4)
    answer_tokens = max(1, len(text) // 4)
    return {
        "candidates": [
            {
                "content": {"parts": [{"text": text}], "role": "model"},
                "finishReason": "STOP",
                "index": 0,
            }
        ],
        "usageMetadata": {
            "promptTokenCount": prompt_tokens,
            "candidatesTokenCount": answer_tokens,
            "totalTokenCount": prompt_tokens + answer_tokens,
        },
        "modelVersion": model.removeprefix("models/"),
    }


# Per-row outcomes the control API can ask for (`rows[].outcome`), each in the documented
# GenerateContentResponse shape: a prompt blocked (`promptFeedback.blockReason`, no
# candidates), an answer withheld (`finishReason` SAFETY / RECITATION, no content), a
# truncated answer (`MAX_TOKENS` with partial text), an empty one, or a normal answer.
OUTCOMES = frozenset({"ok", "blocked", "safety", "recitation", "truncated", "empty"})
_BLOCKING_RATING = {
    "category": "HARM_CATEGORY_DANGEROUS_CONTENT",
    "probability": "HIGH",
    "blocked": True,
}
_QUIET_RATING = {"category": "HARM_CATEGORY_HARASSMENT", "probability": "NEGLIGIBLE"}


def outcome_response(
    request: dict[str, Any], model: str, outcome: str, text: str | None, block_reason: str
) -> dict[str, Any]:
    """The GenerateContentResponse of one request whose outcome is `outcome` (OUTCOMES)."""
    if outcome == "ok":
        return generate_content_response(request, model, text or review_text(request))
    if outcome == "truncated":
        full = text or review_text(request)
        body = generate_content_response(request, model, full[: max(1, len(full) // 2)])
        body["candidates"][0]["finishReason"] = "MAX_TOKENS"
        return body
    body = generate_content_response(request, model, "")
    if outcome == "blocked":
        del body["candidates"]
        body["promptFeedback"] = {
            "blockReason": block_reason,
            "safetyRatings": [_BLOCKING_RATING, _QUIET_RATING],
        }
        return body
    candidate = body["candidates"][0]
    if outcome == "empty":
        candidate["content"] = {"parts": [], "role": "model"}
        return body
    del candidate["content"]  # a withheld answer carries no content
    candidate["finishReason"] = "SAFETY" if outcome == "safety" else "RECITATION"
    if outcome == "safety":
        candidate["safetyRatings"] = [_BLOCKING_RATING, _QUIET_RATING]
    return body


def build_rows(
    batch: Batch, overrides: dict[int, dict[str, Any]], echo_metadata: bool = True
) -> list[dict[str, Any]]:
    """One inlined response per request, in request order, each echoing its `metadata`
    (none when `echo_metadata` is false).

    `overrides[index]` may hold `error` (that row fails), `text` (its answer) and/or
    `outcome` (OUTCOMES, with an optional `block_reason`).
    """
    rows = []
    for index, request in enumerate(batch.requests):
        override = overrides.get(index, {})
        row: dict[str, Any] = {}
        if "error" in override:
            row["error"] = override["error"]
        else:
            row["response"] = outcome_response(
                request,
                batch.model,
                override.get("outcome", "ok"),
                override.get("text"),
                override.get("block_reason", "SAFETY"),
            )
        if echo_metadata and request.get("metadata") is not None:
            row["metadata"] = request["metadata"]
        rows.append(row)
    return rows


def result_lines(rows: list[dict[str, Any]], malformed: frozenset[int] = frozenset()) -> bytes:
    """Inline-shaped rows as a results file: one `{"key", "response"|"error"}` line each
    (no `key` when the row echoes no metadata). Lines numbered in `malformed` (1-based)
    are written cut off mid-object, as a damaged file would hold them."""
    lines = []
    for index, row in enumerate(rows):
        line: dict[str, Any] = {}
        key = (row.get("metadata") or {}).get("key")
        if key is not None:
            line["key"] = key
        if "error" in row:
            line["error"] = row["error"]
        else:
            line["response"] = row["response"]
        text = json.dumps(line)
        lines.append(text[: len(text) // 2] if index + 1 in malformed else text)
    return ("\n".join(lines) + "\n").encode()


def batch_resource(batch: Batch, with_results: bool = True) -> dict[str, Any]:
    """A batch as `GET /v1beta/batches/{id}` answers it: an Operation, the batch in metadata.

    `with_results=False` is the list's shape: no inlined responses (a file name stays).
    """
    total = len(batch.requests)
    failed = sum(1 for row in batch.rows or [] if "error" in row)
    succeeded = (len(batch.rows) - failed) if batch.rows is not None else 0
    metadata: dict[str, Any] = {
        "@type": BATCH_TYPE,
        "model": batch.model,
        "displayName": batch.display_name,
        "createTime": rfc3339(batch.created_at),
        "updateTime": rfc3339(batch.updated_at),
        "batchStats": {
            "requestCount": str(total),
            "pendingRequestCount": str(0 if batch.done else total),
            "successfulRequestCount": str(succeeded),
            "failedRequestCount": str(failed),
        },
        "state": batch.state,
        "name": batch.name,
    }
    if batch.end_time is not None:
        metadata["endTime"] = rfc3339(batch.end_time)
    if batch.priority:  # an int64 in JSON: a string; the default 0 left out, as proto3 does
        metadata["priority"] = str(batch.priority)
    body: dict[str, Any] = {"name": batch.name, "metadata": metadata}
    if batch.done:
        body["done"] = True
    output: dict[str, Any] | None = None
    if batch.output_file is not None:
        output = {"responsesFile": batch.output_file}
    elif batch.rows is not None and with_results:
        output = {"inlinedResponses": {"inlinedResponses": batch.rows}}
    if output is not None:
        metadata["output"] = output
        body["response"] = {"@type": OUTPUT_TYPE, **output}
    if batch.error is not None:
        body["error"] = batch.error
    return body


def interaction_resource(operation: Operation) -> dict[str, Any]:
    """An interaction as the Interactions API shows it: `id` and `status`."""
    body: dict[str, Any] = {
        "id": operation.name.split("/", 1)[1],
        "status": operation.interaction_status,
    }
    if operation.error is not None:
        # The Interactions API reports failures as a list of {code, message}.
        body["errors"] = [operation.error]
    if operation.output_text is not None:
        # The output so far, as the last model-output step (the SDK's `output_text`).
        body["steps"] = [
            {"type": "model_output", "content": [{"type": "text", "text": operation.output_text}]}
        ]
    return body


def operation_resource(operation: Operation) -> dict[str, Any]:
    """A generic long-running operation: `name`, `metadata`, `done`, `response` or `error`."""
    body: dict[str, Any] = {"name": operation.name}
    if operation.metadata:
        body["metadata"] = operation.metadata
    if operation.done:
        body["done"] = True
        if operation.error is not None:
            body["error"] = operation.error
        elif operation.response is not None:
            body["response"] = operation.response
    return body
