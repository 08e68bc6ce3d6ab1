"""GitHub REST routes for a repository itself, writing a file, and commit statuses, on
the GitHub API blueprint.

- `GET /repos/{owner}/{repo}`: a "Full Repository" (every repository exists here, public,
  default branch `main`); `open_issues_count` counts its open issues and pull requests
- `PUT /repos/{owner}/{repo}/contents/{path}` `{message, content (base64), sha?, branch?}`
  ("Create or update file contents"): 201 for a new file, 200 for an update, each with
  the file and a new commit; 422 when `message` or `content` is missing or not base64,
  or when the file exists and no `sha` is given; 409 when `sha` is not the file's blob
  sha. The file is then served by the contents and trees routes at the branch (the
  default branch also as `HEAD`, what a GET without `ref` reads) and at the new commit,
  which holds every file of the branch
- `POST /repos/{owner}/{repo}/statuses/{sha}`, `GET .../commits/{ref}/statuses`, `GET
  .../commits/{ref}/status` (`commit_statuses.py`)

An installation token needs `metadata: read` for the repository, `contents: write` to
write a file, `statuses` to read or write statuses.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from itertools import count
from typing import TYPE_CHECKING, Any

from flask import Blueprint, Response

from local.simulator.api_versions import shaped
from local.simulator.comments import USER
from local.simulator.commit_statuses import combined_json, status_json
from local.simulator.github import DEFAULT_REF, blob_sha, file_body
from local.simulator.github_answers import base_url, created, github_object, paged
from local.simulator.github_objects import repository
from local.simulator.github_refusal import GitHubRefusal
from local.simulator.github_routes import authorize
from local.simulator.issue_records import Invalid
from local.simulator.issue_shapes import repo_api, stamp
from local.simulator.wire import json_response

if TYPE_CHECKING:
    from local.simulator.engine import Simulator

DEFAULT_BRANCH = "main"
CONTENTS_DOCS = "https://docs.github.com/rest/repos/contents#create-or-update-file-contents"
# Tells the commits of one simulator run apart when the same file is written twice alike.
_commits = count(1)


def _file_fields(body: dict[str, Any]) -> tuple[str, bytes, str | None, str]:
    """(message, content, sha, branch) of a file write; Invalid naming the field."""
    message, content, sha = body.get("message"), body.get("content"), body.get("sha")
    if not isinstance(message, str) or not message:
        raise Invalid("Commit", "message")
    if not isinstance(content, str):
        raise Invalid("Blob", "content")
    try:
        data = base64.b64decode(content, validate=False)
    except (binascii.Error, ValueError):
        raise Invalid("Blob", "content", "invalid") from None
    if sha is not None and not isinstance(sha, str):
        raise Invalid("Blob", "sha", "invalid")
    branch = body.get("branch") or DEFAULT_BRANCH
    if not isinstance(branch, str):
        raise Invalid("Commit", "branch", "invalid")
    return message, data, sha, branch


def commit_json(
    owner: str, repo: str, sha: str, message: str, parent: str, when: str
) -> dict[str, Any]:
    """The commit a file write made, as "File Commit" carries it."""
    api = repo_api(base_url(), owner, repo)
    html = f"https://github.com/{owner}/{repo}/commit"
    person = {
        "name": USER["login"],
        "email": f"{USER['login']}@users.noreply.github.com",
        "date": when,
    }
    tree = hashlib.sha1(f"tree {sha}".encode(), usedforsecurity=False).hexdigest()
    return {
        "sha": sha,
        "node_id": f"C_sim{sha[:12]}",
        "url": f"{api}/git/commits/{sha}",
        "html_url": f"{html}/{sha}",
        "author": person,
        "committer": person,
        "message": message,
        "tree": {"url": f"{api}/git/trees/{tree}", "sha": tree},
        "parents": [
            {"url": f"{api}/git/commits/{parent}", "html_url": f"{html}/{parent}", "sha": parent}
        ],
        "verification": {
            "verified": False,
            "reason": "unsigned",
            "signature": None,
            "payload": None,
            "verified_at": None,
        },
    }


def add_api_routes(bp: Blueprint, sim: Simulator) -> None:
    """The repository, file-write and status routes, on the GitHub API blueprint."""

    @bp.get("/repos/<owner>/<repo>")
    def get_repository(owner: str, repo: str) -> Response:
        authorize(sim, owner, repo, "metadata", "read")
        body = shaped("repository", repository(base_url(), f"{owner}/{repo}", DEFAULT_BRANCH))
        open_count = sim.issues.open_count(owner, repo)
        return json_response(
            {
                **body,
                "open_issues": open_count,
                "open_issues_count": open_count,
                "network_count": 0,
                "subscribers_count": 0,
            }
        )

    @bp.put("/repos/<owner>/<repo>/contents/<path:path>")
    def write_file(owner: str, repo: str, path: str) -> Response:
        authorize(sim, owner, repo, "contents", "write")
        message, data, sha, branch = _file_fields(github_object())
        read_at = DEFAULT_REF if branch == DEFAULT_BRANCH else branch
        seed = f"{owner}/{repo}@{branch}:{path}:{blob_sha(data)}:{next(_commits)}"
        commit = hashlib.sha1(seed.encode(), usedforsecurity=False).hexdigest()
        refs = (read_at, branch, commit) if read_at != branch else (branch, commit)
        before, written = sim.contents.write(owner, repo, path, refs, data, sha)
        if not written:
            if sha is None:
                raise Invalid("Blob", "sha")  # GitHub: "sha" wasn't supplied
            assert before is not None
            raise GitHubRefusal(409, f"{path} does not match {sha}", CONTENTS_DOCS)
        file = file_body(base_url(), owner, repo, path, branch, data)
        for inline in ("content", "encoding"):
            file.pop(inline)
        when = stamp(sim.clock()) or ""
        parent = hashlib.sha1(f"parent {commit}".encode(), usedforsecurity=False).hexdigest()
        answer = {
            "content": file,
            "commit": commit_json(owner, repo, commit, message, parent, when),
        }
        return json_response(answer, 200 if before is not None else 201)

    @bp.post("/repos/<owner>/<repo>/statuses/<sha>")
    def create_status(owner: str, repo: str, sha: str) -> Response:
        authorize(sim, owner, repo, "statuses", "write")
        made = sim.statuses.create(owner, repo, sha, github_object())
        return created(status_json(base_url(), made))

    @bp.get("/repos/<owner>/<repo>/commits/<path:ref>/statuses")
    def list_statuses(owner: str, repo: str, ref: str) -> Response:
        authorize(sim, owner, repo, "statuses", "read")
        statuses = sim.statuses.for_ref(owner, repo, ref)
        return paged([status_json(base_url(), s) for s in statuses])

    @bp.get("/repos/<owner>/<repo>/commits/<path:ref>/status")
    def combined_status(owner: str, repo: str, ref: str) -> Response:
        authorize(sim, owner, repo, "statuses", "read")
        statuses = sim.statuses.for_ref(owner, repo, ref)
        combined = combined_json(base_url(), owner, repo, ref, statuses)
        combined["repository"] = shaped("repository", combined["repository"])
        return json_response(combined)
