"""Pull requests, their files, reviews and review comments in GitHub's REST shapes
("Pull Request", "Pull Request Simple", "Diff Entry", "Pull Request Review", "Pull
Request Review Comment"), every documented required field present.

A simulated pull request is never merged, never mergeable-checked (`mergeable` null,
`mergeable_state` "unknown", as GitHub answers before it computed them) and has one
commit; its counts of additions, deletions and changed files come from its files.
"""

from __future__ import annotations

import hashlib
from typing import Any

from local.simulator.github_objects import repository
from local.simulator.issue_records import Issue, PullFile, Review, ReviewComment
from local.simulator.issue_shapes import label_json, repo_api, stamp, user_json


def _side(base_url: str, issue: Issue, ref: str, sha: str) -> dict[str, Any]:
    """A pull request's `head` or `base`: the branch of this same repository."""
    return {
        "label": f"{issue.owner}:{ref}",
        "ref": ref,
        "sha": sha,
        "user": user_json(base_url, issue.owner),
        "repo": repository(base_url, f"{issue.owner}/{issue.repo}"),
    }


def pull_json(base_url: str, issue: Issue, *, simple: bool = False) -> dict[str, Any]:
    """A "Pull Request" (`simple`: the "Pull Request Simple" of the list)."""
    pull = issue.pull
    assert pull is not None
    api = repo_api(base_url, issue.owner, issue.repo)
    url = f"{api}/pulls/{issue.number}"
    html = f"https://github.com/{issue.owner}/{issue.repo}/pull/{issue.number}"
    issue_url = f"{api}/issues/{issue.number}"
    statuses = f"{api}/statuses/{pull.head_sha}"
    labels = [label_json(base_url, issue.owner, issue.repo, lb) for lb in issue.labels]
    if simple:  # the list's labels document `description` as a string, never null
        labels = [{**lb, "description": lb["description"] or ""} for lb in labels]
    assignees = [user_json(base_url, login) for login in issue.assignees]
    links = {
        "self": url,
        "html": html,
        "issue": issue_url,
        "comments": f"{issue_url}/comments",
        "review_comments": f"{url}/comments",
        "review_comment": f"{api}/pulls/comments{{/number}}",
        "commits": f"{url}/commits",
        "statuses": statuses,
    }
    body: dict[str, Any] = {
        "url": url,
        "id": pull.id,
        "node_id": f"PR_sim{pull.id}",
        "html_url": html,
        "diff_url": f"{html}.diff",
        "patch_url": f"{html}.patch",
        "issue_url": issue_url,
        "commits_url": links["commits"],
        "review_comments_url": links["review_comments"],
        "review_comment_url": links["review_comment"],
        "comments_url": links["comments"],
        "statuses_url": statuses,
        "number": issue.number,
        "state": issue.state,
        "locked": False,
        "title": issue.title,
        "user": user_json(base_url, issue.user),
        "body": issue.body,
        "labels": labels,
        "milestone": None,
        "active_lock_reason": None,
        "created_at": stamp(issue.created_at),
        "updated_at": stamp(issue.updated_at),
        "closed_at": stamp(issue.closed_at),
        "merged_at": stamp(pull.merged_at),
        "merge_commit_sha": None,
        "assignee": assignees[0] if assignees else None,
        "assignees": assignees,
        "requested_reviewers": [],
        "requested_teams": [],
        "head": _side(base_url, issue, pull.head_ref, pull.head_sha),
        "base": _side(base_url, issue, pull.base_ref, pull.base_sha),
        "_links": {name: {"href": href} for name, href in links.items()},
        "author_association": "NONE",
        "auto_merge": None,
        "draft": pull.draft,
    }
    if simple:
        return body
    return {
        **body,
        "merged": pull.merged_at is not None,
        "mergeable": None,
        "rebaseable": None,
        "mergeable_state": "unknown",
        "merged_by": None,
        "comments": len(issue.comments),
        "review_comments": len(pull.review_comments),
        "maintainer_can_modify": False,
        "commits": 1,
        "additions": sum(f.additions for f in pull.files),
        "deletions": sum(f.deletions for f in pull.files),
        "changed_files": len(pull.files),
    }


def file_json(base_url: str, issue: Issue, changed: PullFile) -> dict[str, Any]:
    """A "Diff Entry": one changed file at the head commit (`sha` its blob id, derived)."""
    pull = issue.pull
    assert pull is not None
    full = f"{issue.owner}/{issue.repo}"
    sha = hashlib.sha1(f"{pull.head_sha}:{changed.filename}".encode(), usedforsecurity=False)
    body: dict[str, Any] = {
        "sha": None if changed.status == "removed" else sha.hexdigest(),
        "filename": changed.filename,
        "status": changed.status,
        "additions": changed.additions,
        "deletions": changed.deletions,
        "changes": changed.additions + changed.deletions,
        "blob_url": f"https://github.com/{full}/blob/{pull.head_sha}/{changed.filename}",
        "raw_url": f"https://github.com/{full}/raw/{pull.head_sha}/{changed.filename}",
        "contents_url": (
            f"{repo_api(base_url, issue.owner, issue.repo)}/contents/{changed.filename}"
            f"?ref={pull.head_sha}"
        ),
    }
    if changed.patch is not None:
        body["patch"] = changed.patch
    if changed.previous_filename is not None:
        body["previous_filename"] = changed.previous_filename
    return body


def review_json(base_url: str, issue: Issue, review: Review) -> dict[str, Any]:
    api = repo_api(base_url, issue.owner, issue.repo)
    html = (
        f"https://github.com/{issue.owner}/{issue.repo}/pull/{issue.number}"
        f"#pullrequestreview-{review.id}"
    )
    pull_url = f"{api}/pulls/{issue.number}"
    body: dict[str, Any] = {
        "id": review.id,
        "node_id": f"PRR_sim{review.id}",
        "user": user_json(base_url, review.user),
        "body": review.body,
        "state": review.state,
        "html_url": html,
        "pull_request_url": pull_url,
        "_links": {"html": {"href": html}, "pull_request": {"href": pull_url}},
        "commit_id": review.commit_id,
        "author_association": "NONE",
    }
    if review.submitted_at is not None:
        body["submitted_at"] = stamp(review.submitted_at)
    return body


def review_comment_json(base_url: str, issue: Issue, comment: ReviewComment) -> dict[str, Any]:
    api = repo_api(base_url, issue.owner, issue.repo)
    url = f"{api}/pulls/comments/{comment.id}"
    html = (
        f"https://github.com/{issue.owner}/{issue.repo}/pull/{issue.number}"
        f"#discussion_r{comment.id}"
    )
    pull_url = f"{api}/pulls/{issue.number}"
    links = {"self": url, "html": html, "pull_request": pull_url}
    body: dict[str, Any] = {
        "url": url,
        "id": comment.id,
        "node_id": f"PRRC_sim{comment.id}",
        "pull_request_review_id": comment.review_id,
        "diff_hunk": f"@@ -1 +1 @@ {comment.path}",
        "path": comment.path,
        "commit_id": comment.commit_id,
        "original_commit_id": comment.commit_id,
        "user": user_json(base_url, comment.user),
        "body": comment.body,
        "created_at": stamp(comment.created_at),
        "updated_at": stamp(comment.created_at),
        "html_url": html,
        "pull_request_url": pull_url,
        "author_association": "NONE",
        "_links": {name: {"href": href} for name, href in links.items()},
        "side": comment.side,
        "subject_type": "line" if comment.line is not None else "file",
    }
    if comment.line is not None:
        body["line"] = body["original_line"] = comment.line
    if comment.in_reply_to is not None:
        body["in_reply_to_id"] = comment.in_reply_to
    return body
