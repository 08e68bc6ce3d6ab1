"""GitHub REST routes for pull requests, their files, reviews and review comments
(`issues.py` / `pull_reviews.py` hold them, `pull_shapes.py` shapes them), on the GitHub
API blueprint. A pull request is made by a test (`POST /_sim/github/pulls`): GitHub's
own create needs branches the simulator does not have.

- `GET /repos/{owner}/{repo}/pulls?state=open|closed|all&head=&base=&direction=&per_page=&page=`:
  "Pull Request Simple"s, newest first; `head` (`owner:ref` or `ref`) and `base` (a ref)
  narrow it; 422 for an unknown `state`
- `GET /repos/{owner}/{repo}/pulls/{number}`: the whole "Pull Request"; 404 for an
  unknown number or a plain issue's
- `GET .../pulls/{number}/files?per_page=&page=`: its "Diff Entry"s, as seeded
- `GET`, `POST .../pulls/{number}/reviews` `{body?, event?, commit_id?, comments?}`: the
  create answers 200 (as GitHub does), 422 for a bad event or a comment without body or
  path
- `GET`, `POST .../pulls/{number}/comments` `{body, path, line?, side?, commit_id?,
  in_reply_to?}`: 201

An installation token needs `pull_requests` (read to list and get, write to review).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from flask import Blueprint, Response, request

from local.simulator.api_versions import shaped
from local.simulator.comments import USER
from local.simulator.github_answers import base_url, created, github_object, paged
from local.simulator.github_routes import authorize
from local.simulator.issue_records import Invalid
from local.simulator.pull_shapes import file_json, pull_json, review_comment_json, review_json
from local.simulator.wire import json_response

if TYPE_CHECKING:
    from local.simulator.engine import Simulator

PULL = "/repos/<owner>/<repo>/pulls/<int:number>"


def add_api_routes(bp: Blueprint, sim: Simulator) -> None:
    """The pull request routes, on the GitHub API blueprint (`github_routes.blueprint`)."""

    @bp.get("/repos/<owner>/<repo>/pulls")
    def list_pulls(owner: str, repo: str) -> Response:
        authorize(sim, owner, repo, "pull_requests", "read")
        state = request.args.get("state", "open")
        if state not in ("open", "closed", "all"):
            raise Invalid("PullRequest", "state", "invalid")
        head = request.args.get("head", "").split(":")[-1]
        base = request.args.get("base", "")
        chosen = [
            i
            for i in sim.issues.every(owner, repo)
            if i.pull is not None
            and state in ("all", i.state)
            and head in ("", i.pull.head_ref)
            and base in ("", i.pull.base_ref)
        ]
        if request.args.get("direction") == "asc":
            chosen.reverse()
        return paged([shaped("pull", pull_json(base_url(), i, simple=True)) for i in chosen])

    @bp.get(PULL)
    def get_pull(owner: str, repo: str, number: int) -> Response:
        authorize(sim, owner, repo, "pull_requests", "read")
        issue = sim.issues.get_pull(owner, repo, number)
        return json_response(shaped("pull", pull_json(base_url(), issue)))

    @bp.get(f"{PULL}/files")
    def list_files(owner: str, repo: str, number: int) -> Response:
        authorize(sim, owner, repo, "pull_requests", "read")
        issue = sim.issues.get_pull(owner, repo, number)
        assert issue.pull is not None
        return paged([file_json(base_url(), issue, f) for f in issue.pull.files])

    @bp.get(f"{PULL}/reviews")
    def list_reviews(owner: str, repo: str, number: int) -> Response:
        authorize(sim, owner, repo, "pull_requests", "read")
        issue = sim.issues.get_pull(owner, repo, number)
        reviews = sim.issues.reviews(owner, repo, number)
        return paged([review_json(base_url(), issue, r) for r in reviews])

    @bp.post(f"{PULL}/reviews")
    def create_review(owner: str, repo: str, number: int) -> Response:
        authorize(sim, owner, repo, "pull_requests", "write")
        issue = sim.issues.get_pull(owner, repo, number)
        made = sim.issues.review(owner, repo, number, github_object(), USER["login"])
        return json_response(review_json(base_url(), issue, made))

    @bp.get(f"{PULL}/comments")
    def list_review_comments(owner: str, repo: str, number: int) -> Response:
        authorize(sim, owner, repo, "pull_requests", "read")
        issue = sim.issues.get_pull(owner, repo, number)
        comments = sim.issues.review_comments(owner, repo, number)
        return paged([review_comment_json(base_url(), issue, c) for c in comments])

    @bp.post(f"{PULL}/comments")
    def create_review_comment(owner: str, repo: str, number: int) -> Response:
        authorize(sim, owner, repo, "pull_requests", "write")
        issue = sim.issues.get_pull(owner, repo, number)
        made = sim.issues.review_comment(owner, repo, number, github_object(), USER["login"])
        return created(review_comment_json(base_url(), issue, made))
