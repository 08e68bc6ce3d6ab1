"""The `/_sim/faults` and `/_sim/quotas` control calls: one fault model over Gemini
(`faults.py`, `injector.py`) and GitHub (comment and check-run write faults, rate limits,
`github_errors.py`), and the Gemini quotas (`quotas.py`). Documented in `control.py`'s
docstring ("Fault model", "Quotas").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from flask import Blueprint, Response

from local.simulator.errors import BadRequest
from local.simulator.faults import GEMINI_KEYS, unknown_keys
from local.simulator.github_errors import KEY as GITHUB_ERRORS
from local.simulator.github_errors import GitHubErrors
from local.simulator.ratelimits import RateLimits
from local.simulator.wire import is_int, json_response, read_json

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


def _check_status(status: Any, field: str) -> None:
    if not is_int(status) or not 400 <= status <= 599:
        raise BadRequest(f"{field} must be an HTTP error code 400..599, got {status!r}.")


def _comment_post_fault(value: Any) -> dict[str, Any]:
    """`{"fail", "status", "after_create"}` from a `github_comment_post` fault, validated."""
    if not isinstance(value, dict):
        raise BadRequest("github_comment_post must be an object {fail, status?, after_create?}.")
    fail = value.get("fail", 1)
    status = value.get("status", 502)
    after_create = value.get("after_create", False)
    if not is_int(fail) or fail < 0:
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
    if not is_int(fail) or fail < 0:
        raise BadRequest(f"{CHECK_RUN_FAULT}.fail must be a whole number >= 0, got {fail!r}.")
    _check_status(status, f"{CHECK_RUN_FAULT}.status")
    if not isinstance(after_apply, bool):
        raise BadRequest(
            f"{CHECK_RUN_FAULT}.after_apply must be true or false, got {after_apply!r}."
        )
    return {"fail": fail, "status": status, "after_apply": after_apply}


def add_routes(bp: Blueprint, sim: Simulator) -> None:
    """The fault and quota calls, on the `/_sim` blueprint of `control.py`."""

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
