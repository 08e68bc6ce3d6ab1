"""The local-only control calls for the simulated GitHub's issues, pull requests, stubs
and request log (no caller check, no rate limit, not in the request log).

- `POST /_sim/github/issues` `{"repo": "owner/name", "number"?, "title", "body"?,
  "labels"?, "assignees"?, "state"?, "user"?: "octocat"}`: 201 with the issue as
  `GET /repos/{owner}/{repo}/issues/{number}` shows it: the same object a REST create
  makes, numbered in the same sequence (a `number` taken is a 400)
- `POST /_sim/github/pulls` `{"repo", "number"?, "title"?, "body"?, "user"?, "labels"?,
  "state"?, "draft"?, "head": {"ref"?: "feature", "sha"}, "base": {"ref"?: "main",
  "sha"}, "files"?: ["a.md" | {"filename", "status"?, "additions"?, "deletions"?,
  "patch"?, "previous_filename"?, "content"?}]}`: 201 with the "Pull Request"; a file's
  `content` (text) is also stored at the head sha for the contents API
- `POST /_sim/github/issues/{owner}/{repo}/{number}/comments` `{"body", "user"?}`: 201
  with the comment as the API lists it
- `POST /_sim/github/stubs` (`github_stubs.py`): 201 with the stub; `GET` lists them
  (with `used`), `DELETE` removes them all (a reset does too)
- `GET /_sim/github/requests[?method=&path_prefix=]`: the GitHub requests of the request
  log, oldest first, with `body`, `installation_id` and `auth` (`traffic.py`)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from flask import Blueprint, Response, request

from local.simulator.errors import BadRequest, NotFound
from local.simulator.github_answers import base_url
from local.simulator.issue_records import STATES, Invalid, Missing, PullFile
from local.simulator.issue_shapes import comment_json, issue_json
from local.simulator.pull_shapes import pull_json
from local.simulator.wire import json_response, read_json

if TYPE_CHECKING:
    from local.simulator.engine import Simulator

DEFAULT_USER = "octocat"
FILE_STATUSES = ("added", "removed", "modified", "renamed", "copied", "changed", "unchanged")


def _repo(body: dict[str, Any]) -> tuple[str, str]:
    repo = body.get("repo")
    if not isinstance(repo, str) or repo.count("/") != 1 or "" in repo.split("/"):
        raise BadRequest(f"repo must be 'owner/name', got {repo!r}.")
    owner, name = repo.split("/")
    return owner, name


def _seed_fields(body: dict[str, Any]) -> tuple[int | None, str, dict[str, Any]]:
    """(number, user, issue fields) of a seed, validated."""
    number = body.get("number")
    if number is not None and (
        not isinstance(number, int) or isinstance(number, bool) or number < 1
    ):
        raise BadRequest(f"number must be a whole number >= 1, got {number!r}.")
    user = body.get("user") or DEFAULT_USER
    if not isinstance(user, str):
        raise BadRequest(f"user must be a login, got {user!r}.")
    if body.get("state", "open") not in STATES:
        raise BadRequest(f"state must be one of {list(STATES)}.")
    keys = ("title", "body", "labels", "assignees", "state", "state_reason")
    return number, user, {k: body[k] for k in keys if k in body}


def _side(value: Any, name: str, default_ref: str) -> tuple[str, str]:
    if not isinstance(value, dict) or not isinstance(value.get("sha"), str) or not value["sha"]:
        raise BadRequest(f"{name} must be an object with a `sha` (and a `ref`).")
    ref = value.get("ref") or default_ref
    if not isinstance(ref, str):
        raise BadRequest(f"{name}.ref must be a branch name.")
    return ref, value["sha"]


def _files(value: Any) -> list[tuple[PullFile, str | None]]:
    """Each changed file and the text to store at the head sha, if given."""
    if not isinstance(value, list):
        raise BadRequest("files must be a list of file names or objects {filename, ...}.")
    files = []
    for index, item in enumerate(value):
        spec = {"filename": item} if isinstance(item, str) else item
        if not isinstance(spec, dict) or not isinstance(spec.get("filename"), str):
            raise BadRequest(f"files[{index}] needs a `filename`.")
        unknown = set(spec) - {
            "filename",
            "status",
            "additions",
            "deletions",
            "patch",
            "previous_filename",
            "content",
        }
        if unknown:
            raise BadRequest(f"files[{index}] has unknown keys {sorted(unknown)}.")
        if spec.get("status", "modified") not in FILE_STATUSES:
            raise BadRequest(f"files[{index}].status must be one of {list(FILE_STATUSES)}.")
        content = spec.pop("content", None)
        if content is not None and not isinstance(content, str):
            raise BadRequest(f"files[{index}].content must be text.")
        try:
            files.append((PullFile(**spec), content))
        except TypeError as exc:
            raise BadRequest(f"files[{index}]: {exc}") from None
    return files


def control_blueprint(sim: Simulator) -> Blueprint:
    bp = Blueprint("sim_github_objects", __name__, url_prefix="/_sim/github")

    @bp.errorhandler(Invalid)
    def invalid(exc: Invalid) -> Response:
        raise BadRequest(f"{exc.error['field']} is {exc.error['code'].replace('_', ' ')}.")

    @bp.errorhandler(Missing)
    def missing(exc: Missing) -> Response:
        raise NotFound(exc.message)

    @bp.post("/issues")
    def seed_issue() -> Response:
        body = read_json()
        owner, repo = _repo(body)
        number, user, fields = _seed_fields(body)
        issue = sim.issues.create(owner, repo, fields, user, number=number)
        return json_response(issue_json(base_url(), issue), 201)

    @bp.post("/pulls")
    def seed_pull() -> Response:
        body = read_json()
        owner, repo = _repo(body)
        number, user, fields = _seed_fields(body)
        fields.setdefault("title", "A pull request")
        head_ref, head_sha = _side(body.get("head"), "head", "feature")
        base_ref, base_sha = _side(body.get("base"), "base", "main")
        draft = body.get("draft", False)
        if not isinstance(draft, bool):
            raise BadRequest("draft must be true or false.")
        files = _files(body.get("files", []))
        pull = {
            "head_ref": head_ref,
            "head_sha": head_sha,
            "base_ref": base_ref,
            "base_sha": base_sha,
            "files": [f for f, _ in files],
            "draft": draft,
        }
        issue = sim.issues.create(owner, repo, fields, user, number=number, pull=pull)
        for changed, content in files:
            if content is not None:
                sim.contents.put(owner, repo, changed.filename, head_sha, content.encode())
        return json_response(pull_json(base_url(), issue), 201)

    @bp.post("/issues/<owner>/<repo>/<int:number>/comments")
    def seed_comment(owner: str, repo: str, number: int) -> Response:
        body = read_json()
        user = body.get("user") or DEFAULT_USER
        made = sim.issues.comment(owner, repo, number, body.get("body"), user)
        return json_response(comment_json(base_url(), owner, repo, made), 201)

    @bp.post("/stubs")
    def add_stub() -> Response:
        return json_response(sim.github_stubs.add(read_json()).json(), 201)

    @bp.get("/stubs")
    def list_stubs() -> Response:
        return json_response({"stubs": sim.github_stubs.every()})

    @bp.delete("/stubs")
    def clear_stubs() -> Response:
        sim.github_stubs.reset()
        return json_response({"stubs": []})

    @bp.get("/requests")
    def github_requests() -> Response:
        method = request.args.get("method") or None
        prefix = request.args.get("path_prefix") or ""
        found = sim.requests.github(method.upper() if method else None, prefix)
        return json_response({"requests": found})

    return bp
