"""Every GitHub REST route the simulator does not simulate answers 501, naming it: never
a silent 404 a test would take for GitHub's "no such object".

Routes under GitHub's top-level paths (`GITHUB_ROOTS`: `/repos/...`, `/orgs/...`,
`/user`, …) that no simulated route takes, in any method, land here, on the GitHub API
blueprint, so a stub (`github_stubs.py`) answers them first and the `github_errors` fault
applies. The body names GitHub's operation when `shared/github/operations.py` knows it:

    {"message": "the simulator does not simulate issues/lock (PUT
     /repos/{owner}/{repo}/issues/{issue_number}/lock)", "operation": "issues/lock", …}

and the method and path as asked otherwise (or when that module or its data is absent).
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from flask import Blueprint, Response, request

from local.simulator.wire import json_response

# GitHub REST's top-level path segments; `/graphql` (POST) is simulated and kept apart.
GITHUB_ROOTS = (
    "advisories",
    "app",
    "applications",
    "apps",
    "assignments",
    "classrooms",
    "codes_of_conduct",
    "emojis",
    "enterprises",
    "events",
    "feeds",
    "gists",
    "gitignore",
    "installation",
    "licenses",
    "markdown",
    "marketplace_listing",
    "meta",
    "networks",
    "notifications",
    "octocat",
    "organizations",
    "orgs",
    "projects",
    "rate_limit",
    "repos",
    "repositories",
    "search",
    "teams",
    "user",
    "users",
    "versions",
    "zen",
)
METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"]
DOCS = "https://docs.github.com/rest"


def is_github(path: str) -> bool:
    """Whether `path` is one of GitHub's (not Gemini's, not the control API's)."""
    root = path.lstrip("/").split("/", 1)[0]
    return root in GITHUB_ROOTS or root == "graphql"


def not_simulated_body(method: str, path: str) -> dict[str, Any]:
    """The 501's body: GitHub's operation id and template when known, else what was asked."""
    operation = None
    try:  # another module's data, optional: without it the answer names the request
        operation = import_module("shared.github.operations").match(method, path)
    except (ImportError, OSError, ValueError, KeyError):
        operation = None
    if operation is None:
        what = f"{method} {path}"
        return {
            "message": f"the simulator does not simulate {what}",
            "documentation_url": DOCS,
            "status": "501",
            "operation": None,
            "method": method,
            "path": path,
        }
    named = f"{operation.id} ({operation.method} {operation.path})"
    return {
        "message": f"the simulator does not simulate {named}",
        "documentation_url": DOCS,
        "status": "501",
        "operation": operation.id,
        "method": method,
        "path": path,
    }


def add_fallback_routes(bp: Blueprint) -> None:
    """The catch-all routes: the least specific rules, so any simulated route wins."""

    def not_simulated(**_parts: str) -> Response:
        return json_response(not_simulated_body(request.method, request.path), 501)

    for root in GITHUB_ROOTS:
        for rule in (f"/{root}", f"/{root}/<path:rest>"):
            bp.add_url_rule(rule, f"not_simulated_{rule}", not_simulated, methods=METHODS)
    others = [m for m in METHODS if m != "POST"]
    bp.add_url_rule("/graphql", "not_simulated_graphql", not_simulated, methods=others)
