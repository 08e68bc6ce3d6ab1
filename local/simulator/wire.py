"""JSON in and out for every route: one response helper, one strict body reader, and the
whole-number check the control calls share."""

from __future__ import annotations

import json
from typing import Any

from flask import Response, request

from local.simulator.errors import BadRequest


def json_response(body: Any, status: int = 200) -> Response:
    return Response(json.dumps(body), status=status, mimetype="application/json")


def read_json() -> dict[str, Any]:
    """The request body as a JSON object ({} when empty), or `BadRequest` saying what is wrong."""
    raw = request.get_data()
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequest(f"Request body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise BadRequest("Request body must be a JSON object.")
    return body


def is_int(value: Any) -> bool:
    """A JSON whole number (`true` and `false` are not)."""
    return isinstance(value, int) and not isinstance(value, bool)
