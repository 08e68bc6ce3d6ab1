"""The `/_sim/github/...` control calls for GitHub Apps (`apps.py`): registering an App,
installing it, changing an installation, token lifetimes, and the summary of all three.
Documented in `control.py`'s docstring.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from flask import Blueprint, Response

from local.simulator.app_records import LEVELS
from local.simulator.errors import BadRequest
from local.simulator.wire import is_int, json_response, read_json

if TYPE_CHECKING:
    from local.simulator.engine import Simulator


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


def add_routes(bp: Blueprint, sim: Simulator) -> None:
    """The App calls, on the `/_sim` blueprint of `control.py`."""

    @bp.post("/github/apps")
    def register_app() -> Response:
        body = read_json()
        app_id = body.get("app_id")
        if app_id is not None and (not is_int(app_id) or app_id < 1):
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

    @bp.post("/github/installations")
    def install_app() -> Response:
        body = read_json()
        app_id, account = body.get("app_id"), body.get("account")
        if not isinstance(app_id, int) or isinstance(app_id, bool):
            raise BadRequest(f"app_id must be a registered App's id, got {app_id!r}.")
        if not isinstance(account, str) or not account:
            raise BadRequest("account is required: the user or organization login.")
        number = body.get("id")
        if number is not None and (not is_int(number) or number < 1):
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
        if lifetime is not None and (not is_int(lifetime) or not 1 <= lifetime <= 86_400):
            raise BadRequest(f"lifetime_s must be 1..86400, got {lifetime!r}.")
        expire = body.get("expire", False)
        if not isinstance(expire, bool):
            raise BadRequest("expire must be true or false.")
        installation_id = body.get("installation_id")
        if installation_id is not None and not is_int(installation_id):
            raise BadRequest("installation_id must be a whole number.")
        if lifetime is not None:
            sim.apps.token_lifetime_s = lifetime
        expired = sim.apps.expire_tokens(installation_id) if expire else 0
        return json_response({"token_lifetime_s": sim.apps.token_lifetime_s, "expired": expired})
