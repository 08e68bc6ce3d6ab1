"""GitHub check-run routes, in GitHub's shapes, and their `/_sim/` control calls.

API (`check_runs.py` holds the rules; docs.github.com/rest/checks/runs):
- `POST /repos/{owner}/{repo}/check-runs`: 201 with the run and a `Location` header
- `PATCH /repos/{owner}/{repo}/check-runs/{id}`: 200 with the run; annotations appended
- `GET /repos/{owner}/{repo}/check-runs/{id}`: the run
- `GET /repos/{owner}/{repo}/check-runs/{id}/annotations?per_page=&page=`: its annotations
- `GET /repos/{owner}/{repo}/commits/{ref}/check-runs?check_name=&status=&filter=&per_page=&page=`:
  `{total_count, check_runs}`, `filter` `latest` (default) or `all`, `per_page` default
  30, at most 100, with a `Link` header (`next`, `last`, `prev`, `first`) keeping the query
- 422 with GitHub's body for a write GitHub refuses, 404 `Not Found` for an unknown run
- the caller is checked as on every repository route (`github_routes.authorize`): an
  installation token needs `checks` (read to get and list, write to create and update);
  served on the `github_api` blueprint, so rate limits and their headers apply too

Control (local only):
- `GET /_sim/github/check-runs[?repo=owner/name][&sha=SHA]`: every run, oldest first, as
  the API shows it plus `repo`, `annotations` (all of them) and `writes` (each applied
  write: `method`, `annotations` it carried, `status` and `conclusion` after it)
- `POST /_sim/github/check-runs/{id}/rerequest` `{"url"?, "installation_id"?,
  "head_branch"?, "sender"?}`: sends the App's `check_run` webhook, action `rerequested`,
  signed with the simulator's GitHub webhook secret, to `url` or the simulator's
  `--github-webhook-url`, through the App webhook's one sender and delivery log
  (`hook_deliveries.py`: recorded, listed by `GET /app/hook/deliveries`, throttled by its
  fault); answers the delivery: `{delivery_id, event, action, target, status, ok, error,
  answer, hook_delivery_id}` (one attempt: GitHub does not retry on its own)
- the write fault `github_check_run_write` is a key of `POST /_sim/faults` (control.py)
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from flask import Blueprint, Response, request

from local.simulator.check_run_rules import DOCS, Refused
from local.simulator.check_runs import StoredRun, annotation_json, run_json
from local.simulator.errors import BadRequest, NotFound
from local.simulator.github_routes import authorize
from local.simulator.github_webhooks import (
    DEFAULT_INSTALLATION_ID,
    check_run_payload,
    signed_request,
)
from local.simulator.hook_deliveries import outcome_json
from local.simulator.wire import json_response, read_json

if TYPE_CHECKING:
    from local.simulator.engine import Simulator

DEFAULT_PER_PAGE = 30
MAX_PER_PAGE = 100


def _authorized(sim: Simulator, owner: str, repo: str, level: str) -> None:
    """GitHub's refusal (401/403, `GitHubRefusal`) unless the caller may use the `checks`
    permission at `level` ("read", "write") on `owner/repo`: the one check of every
    check-run route, the same as the comment routes'."""
    authorize(sim, owner, repo, "checks", level)


def _not_found() -> Response:
    return json_response({"message": "Not Found", "documentation_url": DOCS, "status": "404"}, 404)


def _positive(name: str, default: int) -> int:
    try:
        value = int(request.args.get(name, default))
    except ValueError:
        return default
    return value if value > 0 else default


def _page_links(base: str, query: dict[str, Any], per_page: int, page: int, last: int) -> str:
    def link(number: int, rel: str) -> str:
        return f'<{base}?{urlencode({**query, "per_page": per_page, "page": number})}>; rel="{rel}"'

    links = []
    if page > 1:
        links += [link(page - 1, "prev"), link(1, "first")]
    if page < last:
        links += [link(page + 1, "next"), link(last, "last")]
    return ", ".join(links)


def _paged(items: list[Any]) -> tuple[list[Any], str]:
    """This request's page of `items` and its `Link` header ("" for a single page)."""
    per_page = min(_positive("per_page", DEFAULT_PER_PAGE), MAX_PER_PAGE)
    page = _positive("page", 1)
    last = max(1, -(-len(items) // per_page))
    query = {k: v for k, v in request.args.items() if k not in ("per_page", "page")}
    base = request.host_url.rstrip("/") + request.path
    return items[(page - 1) * per_page : page * per_page], _page_links(
        base, query, per_page, page, last
    )


def _written(run: StoredRun, status: int) -> Response:
    """The answer to a write: the run, or the injected fault's status."""
    if status >= 400:
        return json_response({"message": "Server Error (simulated)"}, status)
    shaped = run_json(request.host_url.rstrip("/"), run)
    response = Response(json.dumps(shaped), status=status, mimetype="application/json")
    if status == 201:
        response.headers["Location"] = shaped["url"]
    return response


def _inspected(base_url: str, run: StoredRun) -> dict[str, Any]:
    return {
        "repo": f"{run.owner}/{run.repo}",
        **run_json(base_url, run),
        "annotations": [annotation_json(base_url, run, a) for a in run.annotations],
        "writes": run.writes,
    }


def add_api_routes(bp: Blueprint, sim: Simulator) -> None:
    """The check-run routes, on the GitHub API blueprint (`github_routes.blueprint`)."""

    @bp.post("/repos/<owner>/<repo>/check-runs")
    def create_check_run(owner: str, repo: str) -> Response:
        _authorized(sim, owner, repo, "write")
        try:
            run, status = sim.check_runs.create(owner, repo, read_json())
        except Refused as exc:
            return json_response({**exc.body, "status": "422"}, 422)
        return _written(run, status)

    @bp.patch("/repos/<owner>/<repo>/check-runs/<int:run_id>")
    def update_check_run(owner: str, repo: str, run_id: int) -> Response:
        _authorized(sim, owner, repo, "write")
        try:
            run, status = sim.check_runs.update(owner, repo, run_id, read_json())
        except Refused as exc:
            return json_response({**exc.body, "status": "422"}, 422)
        if run is None:
            return _not_found()
        return _written(run, status)

    @bp.get("/repos/<owner>/<repo>/check-runs/<int:run_id>")
    def get_check_run(owner: str, repo: str, run_id: int) -> Response:
        _authorized(sim, owner, repo, "read")
        run = sim.check_runs.get(owner, repo, run_id)
        if run is None:
            return _not_found()
        return json_response(run_json(request.host_url.rstrip("/"), run))

    @bp.get("/repos/<owner>/<repo>/check-runs/<int:run_id>/annotations")
    def list_annotations(owner: str, repo: str, run_id: int) -> Response:
        _authorized(sim, owner, repo, "read")
        run = sim.check_runs.get(owner, repo, run_id)
        if run is None:
            return _not_found()
        page, link = _paged(run.annotations)
        base = request.host_url.rstrip("/")
        response = json_response([annotation_json(base, run, a) for a in page])
        if link:
            response.headers["Link"] = link
        return response

    @bp.get("/repos/<owner>/<repo>/commits/<ref>/check-runs")
    def list_for_ref(owner: str, repo: str, ref: str) -> Response:
        _authorized(sim, owner, repo, "read")
        runs = sim.check_runs.for_ref(
            owner,
            repo,
            ref,
            name=request.args.get("check_name") or None,
            status=request.args.get("status") or None,
            latest=request.args.get("filter", "latest") != "all",
        )
        page, link = _paged(runs)
        base = request.host_url.rstrip("/")
        response = json_response(
            {"total_count": len(runs), "check_runs": [run_json(base, r) for r in page]}
        )
        if link:
            response.headers["Link"] = link
        return response


def control_blueprint(sim: Simulator) -> Blueprint:
    """The local-only `/_sim/github/check-runs` calls (no caller check, no rate limit)."""
    bp = Blueprint("sim_check_runs", __name__)

    @bp.get("/_sim/github/check-runs")
    def inspect_check_runs() -> Response:
        base = request.host_url.rstrip("/")
        runs = sim.check_runs.every(
            repo=request.args.get("repo") or None, sha=request.args.get("sha") or None
        )
        return json_response({"check_runs": [_inspected(base, r) for r in runs]})

    @bp.post("/_sim/github/check-runs/<int:run_id>/rerequest")
    def rerequest(run_id: int) -> Response:
        body = read_json()
        found = [r for r in sim.check_runs.every() if r.id == run_id]
        if not found:
            raise NotFound(f"No check run {run_id}.")
        url = body.get("url", sim.settings.github_webhook_url)
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise BadRequest(
                "url must be an http(s) URL; without one the simulator needs --github-webhook-url."
            )
        installation_id = body.get("installation_id", DEFAULT_INSTALLATION_ID)
        if not isinstance(installation_id, int) or isinstance(installation_id, bool):
            raise BadRequest(f"installation_id must be a whole number, got {installation_id!r}.")
        head_branch = body.get("head_branch", "main")
        sender = body.get("sender")
        if not isinstance(head_branch, str) or (sender is not None and not isinstance(sender, str)):
            raise BadRequest("head_branch and sender must be strings.")
        payload = check_run_payload(
            request.host_url.rstrip("/"),
            found[0],
            "rerequested",
            installation_id=installation_id,
            head_branch=head_branch,
            sender=sender,
        )
        signed = signed_request(sim.settings.github_webhook_secret, "check_run", payload)
        delivery = sim.hook_deliveries.send(
            url, signed, timeout_s=sim.settings.github_webhook_timeout_s
        )
        if delivery is None:
            raise BadRequest("The simulator was reset while this webhook was being sent.")
        return json_response(outcome_json(delivery))

    return bp
