"""The `/_sim/` control calls that drive Gemini's jobs: finishing a batch or an operation,
an interaction's status, making an operation, listing batches, how batches are run
(`processing.py`: slots, priority), the completion webhooks' mode and their delivery log.
Documented in `control.py`'s docstring, which indexes every control call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from flask import Blueprint, Response, request

from local.simulator.announcer import WEBHOOK_MODES
from local.simulator.errors import BadRequest
from local.simulator.gemini import (
    OUTCOMES,
    batch_resource,
    interaction_resource,
    operation_resource,
    prompt_text,
    rfc3339,
)
from local.simulator.records import BATCH_STATES, INTERACTION_API_STATUSES, WITH_ROWS, Batch
from local.simulator.webhooks import DATA_ID_FORMS
from local.simulator.wire import is_int, json_response, read_json

if TYPE_CHECKING:
    from local.simulator.engine import Simulator


def _rpc_status(value: Any, field: str) -> dict[str, Any]:
    """A google.rpc.Status-like `{"code": int, "message": str}` or `BadRequest`."""
    if not isinstance(value, dict) or not is_int(value.get("code")):
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
        if not isinstance(row, dict) or not is_int(row.get("index")):
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
    if not isinstance(value, list) or not all(is_int(n) for n in value):
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


def _batch_summary(batch: Batch) -> dict[str, Any]:
    """One batch as `GET /_sim/batches` lists it: its webhook config and each request."""
    return {
        "name": batch.name,
        "model": batch.model,
        "display_name": batch.display_name,
        "state": batch.state,
        "priority": batch.priority,
        "created_at": rfc3339(batch.created_at),
        "started_at": rfc3339(batch.started_at) if batch.started_at is not None else None,
        "ended_at": rfc3339(batch.end_time) if batch.end_time is not None else None,
        "webhook_config": {"uris": list(batch.webhook_uris), "user_metadata": batch.user_metadata},
        "requests": [
            {
                "metadata": r.get("metadata"),
                "text": prompt_text(r),
                "generation_config": (r.get("request") or {}).get("generationConfig"),
            }
            for r in batch.requests
        ],
    }


def add_routes(bp: Blueprint, sim: Simulator) -> None:
    """The Gemini job calls, on the `/_sim` blueprint of `control.py`."""

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
        return json_response({"batches": [_batch_summary(b) for b in sim.world.batches()]})

    @bp.post("/gemini/processing")
    def set_processing() -> Response:
        return json_response(sim.set_processing(read_json()))

    @bp.get("/gemini/processing")
    def processing() -> Response:
        return json_response(sim.world.processing_report())

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

    @bp.get("/webhook-deliveries")
    def deliveries() -> Response:
        operation = request.args.get("operation") or None
        return json_response({"deliveries": sim.dispatcher.attempts(operation)})
