"""What the simulated GitHub REST routes share: the request body as GitHub reads it, its
pages (`per_page`, `page`, a `Link` header), and its refusals in GitHub's bodies.

`Missing` (issue_records.py) answers 404 `{"message": "Not Found", …}`; `Invalid`
answers 422 `{"message": "Validation Failed", "errors": [{resource, field, code}], …}`;
a body that is not JSON answers 400 "Problems parsing JSON", as GitHub does.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from flask import Blueprint, Response, request

from local.simulator.github_refusal import GitHubRefusal
from local.simulator.issue_records import Invalid, Missing
from local.simulator.wire import json_response

REST_DOCS = "https://docs.github.com/rest"
DEFAULT_PER_PAGE = 30
MAX_PER_PAGE = 100


def base_url() -> str:
    """The simulator's own URL: the root of every API URL it answers."""
    return request.host_url.rstrip("/")


def github_request_body() -> Any:
    """The request's body parsed as JSON, None when empty or not JSON (the request log's)."""
    try:
        return json.loads(request.get_data()) if request.get_data().strip() else None
    except (ValueError, UnicodeDecodeError):
        return None


def github_body() -> Any:
    """The request's JSON (None when empty); GitHub's 400 when it is not JSON."""
    raw = request.get_data()
    if not raw.strip():
        return None
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise GitHubRefusal(400, "Problems parsing JSON") from None


def github_object() -> dict[str, Any]:
    """The request's JSON object ({} when empty); 400 for anything else."""
    body = github_body()
    if body is None:
        return {}
    if not isinstance(body, dict):
        raise GitHubRefusal(400, "Problems parsing JSON")
    return body


def _positive(name: str, default: int) -> int:
    try:
        value = int(request.args.get(name, default))
    except ValueError:
        return default
    return value if value > 0 else default


def paged(items: list[Any]) -> Response:
    """This request's page of `items` as a JSON list, with a `Link` header (`prev`,
    `first`, `next`, `last`, keeping the rest of the query) when there is more than one
    page; `per_page` default 30, at most 100."""
    per_page = min(_positive("per_page", DEFAULT_PER_PAGE), MAX_PER_PAGE)
    page = _positive("page", 1)
    last = max(1, -(-len(items) // per_page))
    query = {k: v for k, v in request.args.items() if k not in ("per_page", "page")}
    base = base_url() + request.path

    def link(number: int, rel: str) -> str:
        return f'<{base}?{urlencode({**query, "per_page": per_page, "page": number})}>; rel="{rel}"'

    links = []
    if page > 1:
        links += [link(page - 1, "prev"), link(1, "first")]
    if page < last:
        links += [link(page + 1, "next"), link(last, "last")]
    response = json_response(items[(page - 1) * per_page : page * per_page])
    if links:
        response.headers["Link"] = ", ".join(links)
    return response


def created(body: dict[str, Any], status: int = 201) -> Response:
    """A write's answer; a 201 carries `Location`, the new object's API URL."""
    response = json_response(body, status)
    if status == 201 and "url" in body:
        response.headers["Location"] = body["url"]
    return response


def register_refusals(bp: Blueprint) -> None:
    """`Missing` and `Invalid` raised by any route of `bp`, answered as GitHub does."""

    @bp.errorhandler(Missing)
    def missing(exc: Missing) -> Response:
        body = {"message": exc.message, "documentation_url": REST_DOCS, "status": "404"}
        return json_response(body, 404)

    @bp.errorhandler(Invalid)
    def invalid(exc: Invalid) -> Response:
        if exc.simple:  # GitHub's "Validation Error Simple": messages, not objects
            field, code = exc.error["field"], exc.error["code"].replace("_", " ")
            errors: list[Any] = [f"{field} is {code}"]
            message = "Unprocessable Entity"
        else:
            errors, message = [exc.error], "Validation Failed"
        body = {
            "message": message,
            "errors": errors,
            "documentation_url": REST_DOCS,
            "status": "422",
        }
        return json_response(body, 422)
