"""GitHub REST routes: the Contents API and commit comments, in GitHub's shapes.

- `GET /repos/{owner}/{repo}/contents/{path}?ref=SHA` (see `github.py`)
- `GET /repos/{owner}/{repo}/commits/{sha}/comments?per_page=&page=`: oldest first,
  `per_page` default 30, at most 100, with a `Link` header (`next`, `last`, `prev`,
  `first`) when there is more than one page
- `POST /repos/{owner}/{repo}/commits/{sha}/comments` `{"body": "..."}`: 201 with the
  comment and a `Location` header; 422 when `body` is missing or the sha is not a commit id
- `PATCH /repos/{owner}/{repo}/comments/{comment_id}` `{"body": "..."}` ("Update a commit
  comment"): 200 with the edited comment (same id, new body and `updated_at`), 404 when
  there is no such comment, 422 when `body` is missing
- `DELETE /repos/{owner}/{repo}/comments/{comment_id}`: 204 with no body, 404 when there
  is no such comment
- `POST /app/installations/{installation_id}/access_tokens` with an App JWT: 201 with an
  installation token (`apps.py`: the JWT rules, installations, permissions)
- `POST /graphql`: hookledger's one GraphQL query, many files of a commit by alias
  (`graphql.py`)

Every route here answers as GitHub does to its caller (`apps.py`): an installation token
must be live, cover the repository and hold the route's permission (401 / 403 with
GitHub's bodies); no token or a personal token is served as before. Then the REST API
version the request names is selected (`api_versions.py`: 400 for one GitHub does not
support, `X-GitHub-Api-Version-Selected` on every other answer) and the answer is shaped
as that version answers. Every repository answer carries GitHub's `x-ratelimit-*`
headers and may be refused by the rate limits of the fault model (`ratelimits.py`), the
per-endpoint secondary limit included: each request spends its points on its method and
route (`endpoint_spend`). The `github_errors` fault (`github_errors.py`) fails a request
before any of that; then a stub a test set (`github_stubs.py`) answers it, before the
caller is looked at.
"""

from __future__ import annotations

import json
import re
import time
from typing import TYPE_CHECKING

from flask import Blueprint, Response, g, request

from local.simulator import api_versions, graphql
from local.simulator.app_records import Caller
from local.simulator.comments import comment_json
from local.simulator.github import DEFAULT_REF, file_body, not_found, tree_body
from local.simulator.github_refusal import GitHubRefusal
from local.simulator.ratelimits import Spend, rest_points
from local.simulator.wire import json_response, read_json

if TYPE_CHECKING:
    from local.simulator.engine import Simulator

COMMENTS_DOCS = "https://docs.github.com/rest/commits/comments"
DEFAULT_PER_PAGE = 30
MAX_PER_PAGE = 100
_SHA = re.compile(r"[0-9a-fA-F]{4,64}")


def _positive(name: str, default: int) -> int:
    try:
        value = int(request.args.get(name, default))
    except ValueError:
        return default
    return value if value > 0 else default


def _unprocessable(message: str) -> Response:
    body = {"message": message, "documentation_url": COMMENTS_DOCS, "status": "422"}
    return json_response(body, 422)


def _link_header(base: str, per_page: int, page: int, last: int) -> str:
    def link(number: int, rel: str) -> str:
        return f'<{base}?per_page={per_page}&page={number}>; rel="{rel}"'

    links = []
    if page > 1:
        links += [link(page - 1, "prev"), link(1, "first")]
    if page < last:
        links += [link(page + 1, "next"), link(last, "last")]
    return ", ".join(links)


def authorize(sim: Simulator, owner: str, repo: str, permission: str, level: str) -> None:
    """Refuse this request (GitHubRefusal) unless its caller may use `permission` at
    `level` ("read", "write") on `owner/repo`; for every repository route."""
    caller = g.get("github_caller") or Caller()
    sim.apps.authorize(caller, owner, repo, permission, level)


def endpoint_spend() -> Spend:
    """This request's claim on the per-endpoint limit: its method and route (Flask's rule,
    e.g. `GET /repos/<owner>/<repo>/contents/<path:path>`), and its points."""
    rule = request.url_rule.rule if request.url_rule is not None else request.path
    endpoint = f"{request.method} {rule}"
    if request.path == "/graphql":
        body = request.get_json(silent=True)
        query = body.get("query") if isinstance(body, dict) else None
        return Spend(endpoint, graphql.points(query), graphql=True)
    return Spend(endpoint, rest_points(request.method))


def blueprint(sim: Simulator) -> Blueprint:
    bp = Blueprint("github_api", __name__)

    @bp.before_request
    def caller_and_rate_limits() -> Response | None:
        failing = sim.github_errors.take()
        if failing is not None:  # GitHub itself failing, before it looks at anything else
            return json_response(failing[1], failing[0])
        stubbed = sim.github_stubs.take(request.method, request.path)
        if stubbed is not None:  # the answer a test set for this route, whoever asks
            return stubbed
        g.github_caller = sim.apps.caller(request.headers.get("Authorization"))
        if request.path != "/graphql":  # GraphQL has no REST API version
            asked = request.headers.get(api_versions.HEADER)
            g.github_api_version = api_versions.select(asked)
        spend = endpoint_spend()
        if request.path.startswith("/app/"):
            # An App's own (JWT) calls spend no installation's budget; the secondary limits
            # refuse them all the same.
            refused = sim.rate_limits.secondary(spend)
            if refused is None:
                return None
            g.github_rate_limit = refused.headers
            return json_response(refused.body, refused.status or 403)
        verdict = sim.rate_limits.take(g.github_caller.rate_limit_subject, spend)
        g.github_rate_limit = verdict.headers
        if verdict.status is None:
            return None
        if spend.graphql and verdict.status == 403 and "retry-after" not in verdict.headers:
            # GitHub's GraphQL answers a spent primary limit in its own errors, with 200.
            assert verdict.body is not None
            error = {"type": "RATE_LIMITED", "message": verdict.body["message"]}
            return json_response({"errors": [error]}, 200)
        return json_response(verdict.body, verdict.status)

    @bp.after_request
    def rate_limit_headers(response: Response) -> Response:
        for name, value in (g.get("github_rate_limit") or {}).items():
            response.headers.setdefault(name, value)
        if g.get("github_api_version"):
            response.headers.setdefault(api_versions.SELECTED, g.github_api_version)
        return response

    @bp.errorhandler(GitHubRefusal)
    def refused(exc: GitHubRefusal) -> Response:
        response = json_response(exc.body, exc.status)
        response.headers.update(exc.headers)
        return response

    @bp.post("/app/installations/<int:installation_id>/access_tokens")
    def access_token(installation_id: int) -> Response:
        app = sim.apps.app_from_jwt(request.headers.get("Authorization"))
        permissions = read_json().get("permissions")
        if permissions is not None and not isinstance(permissions, dict):
            raise GitHubRefusal(422, "permissions must be an object.")
        issued, installation = sim.apps.issue_token(app, installation_id, permissions)
        base_url = request.host_url.rstrip("/")
        body = sim.apps.token_json(issued, installation, base_url)
        if "repositories" in body:
            shaped = [api_versions.shaped("repository", r) for r in body["repositories"]]
            body["repositories"] = shaped
        return json_response(body, 201)

    @bp.post("/graphql")
    def github_graphql() -> Response:
        if sim.contents.latency_ms:  # a slow GitHub: file reads wait first, by any API
            time.sleep(sim.contents.latency_ms / 1000)
        caller = g.get("github_caller") or Caller()
        answered = graphql.answer(sim, caller, request.get_json(silent=True))
        return json_response(answered.body, answered.status)

    @bp.get("/repos/<owner>/<repo>/contents/<path:path>")
    def github_contents(owner: str, repo: str, path: str) -> Response:
        authorize(sim, owner, repo, "contents", "read")
        if sim.contents.latency_ms:  # a slow GitHub: every contents GET waits first
            time.sleep(sim.contents.latency_ms / 1000)
        fault = sim.contents.take_fault(path)
        if fault is not None:
            return json_response({"message": "Server Error (simulated)"}, fault)
        ref = request.args.get("ref") or DEFAULT_REF
        data = sim.contents.get(owner, repo, path, ref)
        if data is None:
            return json_response(not_found(), 404)
        if "vnd.github.raw" in request.headers.get("Accept", "") or (
            "vnd.github.v3.raw" in request.headers.get("Accept", "")
        ):
            return Response(data, mimetype="application/vnd.github.raw")
        return json_response(file_body(request.host_url.rstrip("/"), owner, repo, path, ref, data))

    @bp.get("/repos/<owner>/<repo>/git/trees/<sha>")
    def git_tree(owner: str, repo: str, sha: str) -> Response:
        """ "Get a tree": the files stored at `sha` (`recursive` lists every level; without
        it, the top level only), with their folders, never truncated."""
        authorize(sim, owner, repo, "contents", "read")
        files = sim.contents.tree(owner, repo, sha)
        if not files:
            return json_response(not_found(), 404)
        recursive = request.args.get("recursive") not in (None, "", "0", "false")
        return json_response(
            tree_body(request.host_url.rstrip("/"), owner, repo, sha, files, recursive)
        )

    @bp.get("/repos/<owner>/<repo>/commits/<sha>/comments")
    def list_comments(owner: str, repo: str, sha: str) -> Response:
        authorize(sim, owner, repo, "metadata", "read")
        per_page = min(_positive("per_page", DEFAULT_PER_PAGE), MAX_PER_PAGE)
        page = _positive("page", 1)
        comments = sim.comments.on_commit(owner, repo, sha)
        last = max(1, -(-len(comments) // per_page))
        chosen = comments[(page - 1) * per_page : page * per_page]
        api = request.host_url.rstrip("/")
        response = json_response([comment_json(api, c) for c in chosen])
        link = _link_header(api + request.path, per_page, page, last)
        if link:
            response.headers["Link"] = link
        return response

    @bp.post("/repos/<owner>/<repo>/commits/<sha>/comments")
    def create_comment(owner: str, repo: str, sha: str) -> Response:
        authorize(sim, owner, repo, "contents", "write")
        body = read_json().get("body")
        if not isinstance(body, str) or not body:
            return _unprocessable('Invalid request.\n\n"body" wasn\'t supplied.')
        if not _SHA.fullmatch(sha):
            return _unprocessable(f"No commit found for SHA: {sha}")
        comment, status = sim.comments.post(owner, repo, sha, body)
        if status != 201:
            return json_response({"message": "Server Error (simulated)"}, status)
        assert comment is not None
        shaped = comment_json(request.host_url.rstrip("/"), comment)
        response = Response(json.dumps(shaped), status=201, mimetype="application/json")
        response.headers["Location"] = shaped["url"]
        return response

    @bp.patch("/repos/<owner>/<repo>/comments/<int:comment_id>")
    def update_comment(owner: str, repo: str, comment_id: int) -> Response:
        authorize(sim, owner, repo, "contents", "write")
        body = read_json().get("body")
        if not isinstance(body, str) or not body:
            return _unprocessable('Invalid request.\n\n"body" wasn\'t supplied.')
        edited = sim.comments.update(owner, repo, comment_id, body)
        if edited is None:
            return json_response(not_found(), 404)
        return json_response(comment_json(request.host_url.rstrip("/"), edited))

    @bp.delete("/repos/<owner>/<repo>/comments/<int:comment_id>")
    def delete_comment(owner: str, repo: str, comment_id: int) -> Response:
        authorize(sim, owner, repo, "contents", "write")
        if not sim.comments.delete(owner, repo, comment_id):
            return json_response(not_found(), 404)
        return Response(status=204)

    return bp
