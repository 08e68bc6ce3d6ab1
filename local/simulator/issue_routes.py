"""GitHub REST routes for issues, their labels, comments and reactions (`issues.py`
holds them; `issue_shapes.py` shapes them), on the GitHub API blueprint, so the caller
check, rate limits, stubs and faults of every GitHub route apply.

- `GET /repos/{owner}/{repo}/issues?state=open|closed|all&labels=a,b&direction=&per_page=&page=`:
  newest first (`direction=asc`: oldest), pull requests included as GitHub lists them;
  `labels` keeps issues carrying every one named; 422 for an unknown `state`
- `POST /repos/{owner}/{repo}/issues` `{title, body?, labels?, assignees?}`: 201; 422
  without a title
- `GET`, `PATCH /repos/{owner}/{repo}/issues/{number}` (`title`, `body`, `state`,
  `state_reason`, `labels`, `assignees`): 404 for an unknown number
- `GET`, `POST` (`{"labels": [...]}` or a bare array), `PUT` (the same; replaces)
  `/repos/{owner}/{repo}/issues/{number}/labels`; `DELETE .../labels/{name}`: 200 with
  the labels left, 404 "Label does not exist" when the issue does not carry it
- `GET`, `POST .../issues/{number}/comments` (oldest first; 201); `GET`, `PATCH
  /repos/{owner}/{repo}/issues/comments/{comment_id}`
- `GET`, `POST .../issues/{number}/reactions`, `GET`, `POST
  .../issues/comments/{comment_id}/reactions` `{"content": "+1"}`: 201 for a new
  reaction, 200 with the existing one when the same user already reacted so

Writes are made as the simulator's bot (`comments.USER`). An installation token needs
`issues` (read to get and list, write to change), as GitHub's permission tables say.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from flask import Blueprint, Response, request

from local.simulator.api_versions import shaped, taken
from local.simulator.comments import USER
from local.simulator.github_answers import base_url, created, github_body, github_object, paged
from local.simulator.github_routes import authorize
from local.simulator.issue_records import Invalid, Issue, Label
from local.simulator.issue_shapes import comment_json, issue_json, label_json, reaction_json
from local.simulator.wire import json_response

if TYPE_CHECKING:
    from local.simulator.engine import Simulator

ISSUE = "/repos/<owner>/<repo>/issues/<int:number>"
COMMENT = "/repos/<owner>/<repo>/issues/comments/<int:comment_id>"


def listed(issues: list[Issue]) -> list[Issue]:
    """The issues this list request asks for: `state`, `labels`, `direction`."""
    state = request.args.get("state", "open")
    if state not in ("open", "closed", "all"):
        raise Invalid("Issue", "state", "invalid")
    wanted = {n.strip().lower() for n in request.args.get("labels", "").split(",") if n.strip()}
    chosen = [
        i
        for i in issues
        if state in ("all", i.state) and wanted <= {label.name.lower() for label in i.labels}
    ]
    return chosen[::-1] if request.args.get("direction") == "asc" else chosen


def _labels_body() -> object:
    """The labels of an add or set: `{"labels": [...]}` or the bare array GitHub takes."""
    body = github_body()
    return body.get("labels") if isinstance(body, dict) else body


def add_api_routes(bp: Blueprint, sim: Simulator) -> None:
    """The issue routes, on the GitHub API blueprint (`github_routes.blueprint`)."""

    def labels_answer(owner: str, repo: str, labels: list[Label]) -> Response:
        return json_response([label_json(base_url(), owner, repo, lb) for lb in labels])

    @bp.get("/repos/<owner>/<repo>/issues")
    def list_issues(owner: str, repo: str) -> Response:
        authorize(sim, owner, repo, "issues", "read")
        issues = listed(sim.issues.every(owner, repo))
        return paged([shaped("issue", issue_json(base_url(), i)) for i in issues])

    @bp.post("/repos/<owner>/<repo>/issues")
    def create_issue(owner: str, repo: str) -> Response:
        authorize(sim, owner, repo, "issues", "write")
        fields = taken("issue", github_object())
        issue = sim.issues.create(owner, repo, fields, USER["login"])
        return created(shaped("issue", issue_json(base_url(), issue)))

    @bp.get(ISSUE)
    def get_issue(owner: str, repo: str, number: int) -> Response:
        authorize(sim, owner, repo, "issues", "read")
        issue = sim.issues.get(owner, repo, number)
        return json_response(shaped("issue", issue_json(base_url(), issue)))

    @bp.patch(ISSUE)
    def update_issue(owner: str, repo: str, number: int) -> Response:
        authorize(sim, owner, repo, "issues", "write")
        issue = sim.issues.update(owner, repo, number, taken("issue", github_object()))
        return json_response(shaped("issue", issue_json(base_url(), issue)))

    @bp.get(f"{ISSUE}/labels")
    def list_labels(owner: str, repo: str, number: int) -> Response:
        authorize(sim, owner, repo, "issues", "read")
        labels = sim.issues.get(owner, repo, number).labels
        return paged([label_json(base_url(), owner, repo, lb) for lb in labels])

    @bp.post(f"{ISSUE}/labels")
    def add_labels(owner: str, repo: str, number: int) -> Response:
        authorize(sim, owner, repo, "issues", "write")
        labels = sim.issues.add_labels(owner, repo, number, _labels_body())
        return labels_answer(owner, repo, labels)

    @bp.put(f"{ISSUE}/labels")
    def set_labels(owner: str, repo: str, number: int) -> Response:
        authorize(sim, owner, repo, "issues", "write")
        labels = _labels_body()
        return labels_answer(owner, repo, sim.issues.set_labels(owner, repo, number, labels or []))

    @bp.delete(f"{ISSUE}/labels/<path:name>")
    def remove_label(owner: str, repo: str, number: int, name: str) -> Response:
        authorize(sim, owner, repo, "issues", "write")
        return labels_answer(owner, repo, sim.issues.remove_label(owner, repo, number, name))

    @bp.get(f"{ISSUE}/comments")
    def list_issue_comments(owner: str, repo: str, number: int) -> Response:
        authorize(sim, owner, repo, "issues", "read")
        comments = sim.issues.comments(owner, repo, number)
        return paged([comment_json(base_url(), owner, repo, c) for c in comments])

    @bp.post(f"{ISSUE}/comments")
    def create_issue_comment(owner: str, repo: str, number: int) -> Response:
        authorize(sim, owner, repo, "issues", "write")
        body = github_object().get("body")
        made = sim.issues.comment(owner, repo, number, body, USER["login"])
        return created(comment_json(base_url(), owner, repo, made))

    @bp.get(COMMENT)
    def get_issue_comment(owner: str, repo: str, comment_id: int) -> Response:
        authorize(sim, owner, repo, "issues", "read")
        found = sim.issues.get_comment(owner, repo, comment_id)
        return json_response(comment_json(base_url(), owner, repo, found))

    @bp.patch(COMMENT)
    def update_issue_comment(owner: str, repo: str, comment_id: int) -> Response:
        authorize(sim, owner, repo, "issues", "write")
        body = github_object().get("body")
        edited = sim.issues.edit_comment(owner, repo, comment_id, body)
        return json_response(comment_json(base_url(), owner, repo, edited))

    @bp.get(f"{ISSUE}/reactions")
    def list_issue_reactions(owner: str, repo: str, number: int) -> Response:
        authorize(sim, owner, repo, "issues", "read")
        reactions = sim.issues.get(owner, repo, number).reactions
        content = request.args.get("content")
        chosen = [r for r in reactions if content in (None, r.content)]
        return paged([reaction_json(base_url(), r) for r in chosen])

    @bp.post(f"{ISSUE}/reactions")
    def react_to_issue(owner: str, repo: str, number: int) -> Response:
        authorize(sim, owner, repo, "issues", "write")
        content = github_object().get("content")
        made, new = sim.issues.react(owner, repo, content, USER["login"], number=number)
        return json_response(reaction_json(base_url(), made), 201 if new else 200)

    @bp.get(f"{COMMENT}/reactions")
    def list_comment_reactions(owner: str, repo: str, comment_id: int) -> Response:
        authorize(sim, owner, repo, "issues", "read")
        reactions = sim.issues.get_comment(owner, repo, comment_id).reactions
        content = request.args.get("content")
        chosen = [r for r in reactions if content in (None, r.content)]
        return paged([reaction_json(base_url(), r) for r in chosen])

    @bp.post(f"{COMMENT}/reactions")
    def react_to_comment(owner: str, repo: str, comment_id: int) -> Response:
        authorize(sim, owner, repo, "issues", "write")
        content = github_object().get("content")
        made, new = sim.issues.react(owner, repo, content, USER["login"], comment_id=comment_id)
        return json_response(reaction_json(base_url(), made), 201 if new else 200)
