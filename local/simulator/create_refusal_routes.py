"""The `/_sim/gemini/...` control calls that make `batches.create` refuse
(`create_refusals.py` holds the rules and the bodies).

- `POST /_sim/gemini/create-refusal` `{"status": 403|401|400|null, "reason"?, "count"?}`:
  while set, every create answers `status` for `reason` (default: the status's first,
  see `create_refusals.REFUSALS`); `count` N refuses the next N creates, then stops;
  `{"status": null}` stops. `DELETE` stops too. `POST`, `DELETE` and `GET` answer
  `{"status", "reason", "count" (left; null: until stopped), "refused"}`.
- `POST /_sim/gemini/poison` `{"marker": "…"|null, "name_index"?: true}`: a create with a
  request whose text holds `marker` is refused with a 400 naming that request (or
  Gemini's bare "Request contains an invalid argument." when `name_index` is false);
  `{"marker": null}` or `DELETE` clears it. All three answer `{"marker", "name_index",
  "refused"}`.

An unknown key or a bad value is a 400 naming it, and changes nothing. `refused` counts
the creates refused since `POST /_sim/reset`, which turns both off.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from flask import Blueprint, Response

from local.simulator.wire import json_response, read_json

if TYPE_CHECKING:
    from local.simulator.engine import Simulator


def control_blueprint(sim: Simulator) -> Blueprint:
    """The local-only `/_sim/gemini/create-refusal` and `/_sim/gemini/poison` calls."""
    bp = Blueprint("sim_create_refusals", __name__, url_prefix="/_sim/gemini")
    refusals = sim.create_refusals

    @bp.post("/create-refusal")
    def set_create_refusal() -> Response:
        return json_response(refusals.set_refusal(read_json()))

    @bp.delete("/create-refusal")
    def stop_create_refusal() -> Response:
        return json_response(refusals.set_refusal({"status": None}))

    @bp.get("/create-refusal")
    def get_create_refusal() -> Response:
        return json_response(refusals.refusal_report())

    @bp.post("/poison")
    def set_poison() -> Response:
        return json_response(refusals.set_poison(read_json()))

    @bp.delete("/poison")
    def clear_poison() -> Response:
        return json_response(refusals.set_poison({"marker": None}))

    @bp.get("/poison")
    def get_poison() -> Response:
        return json_response(refusals.poison_report())

    return bp
