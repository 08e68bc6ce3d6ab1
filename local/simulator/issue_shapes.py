"""Issues, labels, issue comments and reactions in GitHub's REST shapes ("Issue",
"Label", "Issue Comment", "Reaction", "Reaction Rollup"), every field GitHub documents
as required present (tests/integration/test_simulator_openapi.py checks them).

API URLs point at the simulator (`base_url`), `html_url`s at github.com, as the other
simulated objects do; times are RFC 3339 in UTC, to the second.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from urllib.parse import quote

from local.simulator.comments import USER
from local.simulator.github_objects import account_id, simple_user
from local.simulator.issue_records import REACTIONS, Comment, Issue, Label, Reaction


def stamp(moment: datetime | None) -> str | None:
    return None if moment is None else moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def user_json(base_url: str, login: str) -> dict[str, Any]:
    """The account `login` whole: the simulator's own bot as the Bot it is, others as Users."""
    if login == USER["login"]:
        return simple_user(base_url, login, USER["id"], USER["type"])
    return simple_user(base_url, login, account_id(login), "Bot" if "[bot]" in login else "User")


def repo_api(base_url: str, owner: str, repo: str) -> str:
    return f"{base_url}/repos/{owner}/{repo}"


def label_json(base_url: str, owner: str, repo: str, label: Label) -> dict[str, Any]:
    return {
        "id": label.id,
        "node_id": f"LA_sim{label.id}",
        "url": f"{repo_api(base_url, owner, repo)}/labels/{quote(label.name, safe='')}",
        "name": label.name,
        "description": label.description,
        "color": label.color,
        "default": False,
    }


def rollup(url: str, reactions: list[Reaction]) -> dict[str, Any]:
    """A "Reaction Rollup": the count of each content, and their total."""
    counts = {content: sum(r.content == content for r in reactions) for content in REACTIONS}
    return {"url": url, "total_count": len(reactions), **counts}


def issue_json(base_url: str, issue: Issue) -> dict[str, Any]:
    """An "Issue"; a pull request's issue carries `pull_request` with its URLs."""
    api = repo_api(base_url, issue.owner, issue.repo)
    url = f"{api}/issues/{issue.number}"
    kind = "pull" if issue.pull is not None else "issues"
    html = f"https://github.com/{issue.owner}/{issue.repo}/{kind}/{issue.number}"
    assignees = [user_json(base_url, login) for login in issue.assignees]
    body: dict[str, Any] = {
        "id": issue.id,
        "node_id": f"I_sim{issue.id}",
        "url": url,
        "repository_url": api,
        "labels_url": f"{url}/labels{{/name}}",
        "comments_url": f"{url}/comments",
        "events_url": f"{url}/events",
        "html_url": html,
        "timeline_url": f"{url}/timeline",
        "number": issue.number,
        "state": issue.state,
        "state_reason": issue.state_reason,
        "title": issue.title,
        "body": issue.body,
        "user": user_json(base_url, issue.user),
        "labels": [label_json(base_url, issue.owner, issue.repo, lb) for lb in issue.labels],
        "assignee": assignees[0] if assignees else None,
        "assignees": assignees,
        "milestone": None,
        "locked": False,
        "active_lock_reason": None,
        "comments": len(issue.comments),
        "created_at": stamp(issue.created_at),
        "updated_at": stamp(issue.updated_at),
        "closed_at": stamp(issue.closed_at),
        "author_association": "NONE",
        "reactions": rollup(f"{url}/reactions", issue.reactions),
    }
    if issue.pull is not None:
        pull_url = f"{api}/pulls/{issue.number}"
        body["pull_request"] = {
            "url": pull_url,
            "html_url": html,
            "diff_url": f"{html}.diff",
            "patch_url": f"{html}.patch",
            "merged_at": stamp(issue.pull.merged_at),
        }
        body["draft"] = issue.pull.draft
    return body


def comment_json(base_url: str, owner: str, repo: str, comment: Comment) -> dict[str, Any]:
    """An "Issue Comment" on issue (or pull request) `comment.number`."""
    api = repo_api(base_url, owner, repo)
    url = f"{api}/issues/comments/{comment.id}"
    return {
        "id": comment.id,
        "node_id": f"IC_sim{comment.id}",
        "url": url,
        "html_url": (
            f"https://github.com/{owner}/{repo}/issues/{comment.number}#issuecomment-{comment.id}"
        ),
        "issue_url": f"{api}/issues/{comment.number}",
        "body": comment.body,
        "user": user_json(base_url, comment.user),
        "created_at": stamp(comment.created_at),
        "updated_at": stamp(comment.updated_at),
        "author_association": "NONE",
        "reactions": rollup(f"{url}/reactions", comment.reactions),
    }


def reaction_json(base_url: str, reaction: Reaction) -> dict[str, Any]:
    return {
        "id": reaction.id,
        "node_id": f"REA_sim{reaction.id}",
        "user": user_json(base_url, reaction.user),
        "content": reaction.content,
        "created_at": stamp(reaction.created_at),
    }
