"""The `/_sim/github/...` control calls for the contents API: storing a file, failing a
path's reads, slowing every read. Documented in `control.py`'s docstring.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from flask import Blueprint, Response, request

from local.simulator.errors import BadRequest
from local.simulator.faults import MAX_LATENCY_MS
from local.simulator.github import DEFAULT_REF
from local.simulator.wire import is_int, json_response, read_json

if TYPE_CHECKING:
    from local.simulator.engine import Simulator


def add_routes(bp: Blueprint, sim: Simulator) -> None:
    """The contents calls, on the `/_sim` blueprint of `control.py`."""

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
        if not is_int(status) or not 400 <= status <= 599:
            raise BadRequest(f"status must be an HTTP error code 400..599, got {status!r}.")
        if not is_int(count) or count < 0:
            raise BadRequest(f"count must be a whole number >= 0, got {count!r}.")
        sim.contents.add_fault(path, status, count)
        return json_response({"path": path.strip("/"), "status": status, "count": count})

    @bp.post("/github/latency")
    def github_latency() -> Response:
        latency_ms = read_json().get("latency_ms")
        if not isinstance(latency_ms, int) or isinstance(latency_ms, bool):
            raise BadRequest(f"latency_ms must be 0..{MAX_LATENCY_MS}, got {latency_ms!r}.")
        if not 0 <= latency_ms <= MAX_LATENCY_MS:
            raise BadRequest(f"latency_ms must be 0..{MAX_LATENCY_MS}, got {latency_ms!r}.")
        sim.contents.latency_ms = latency_ms
        return json_response({"latency_ms": latency_ms})
