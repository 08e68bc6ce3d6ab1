"""GitHub commit comments: stored per (owner, repo, sha), counted, and failed on demand.

Shapes follow GitHub's REST API for commit comments ("Commit comments": every field it
documents as required): ids ascend in creation order (the order GitHub lists them in),
`html_url` ends in `#commitcomment-{id}`, `user` is the token's account (a whole "Simple
User"). A post fault (`fail` posts answer `status`, optionally after storing the
comment) reproduces the case where GitHub created a comment but the answer was lost.
A deleted comment is gone from listings; its commit counts `deletes`. An edited comment
(`PATCH`) keeps its id, place and `created_at`, and takes the new body and `updated_at`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from local.simulator.github_objects import simple_user
from shared.clock import Clock, system_clock

# The account every comment is posted as (made whole by `github_objects.simple_user`).
USER: dict[str, Any] = {"login": "hookledger-bot", "id": 4242, "type": "Bot"}


@dataclass(frozen=True)
class Comment:
    id: int
    owner: str
    repo: str
    sha: str
    body: str
    created_at: datetime
    updated_at: datetime | None = None  # None: never edited, so `created_at`


@dataclass
class PostFault:
    """The next `remaining` posts answer `status`; with `after_create`, after storing."""

    remaining: int = 0
    status: int = 502
    after_create: bool = False


def rfc3339(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def comment_json(base_url: str, comment: Comment) -> dict[str, Any]:
    """One comment as GitHub's REST API returns it."""
    stamp = rfc3339(comment.created_at)
    updated = rfc3339(comment.updated_at) if comment.updated_at is not None else stamp
    return {
        "html_url": (
            f"https://github.com/{comment.owner}/{comment.repo}/commit/{comment.sha}"
            f"#commitcomment-{comment.id}"
        ),
        "url": f"{base_url}/repos/{comment.owner}/{comment.repo}/comments/{comment.id}",
        "id": comment.id,
        "node_id": f"CC_sim{comment.id}",
        "body": comment.body,
        "path": None,
        "position": None,
        "line": None,
        "commit_id": comment.sha,
        "user": simple_user(base_url, USER["login"], USER["id"], USER["type"]),
        "created_at": stamp,
        "updated_at": updated,
        "author_association": "NONE",
    }


class CommitComments:
    """Thread-safe comment store with per-commit post counts and an injectable post fault."""

    def __init__(self, clock: Clock = system_clock) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self._comments: list[Comment] = []
            self._posts: dict[tuple[str, str, str], int] = {}
            self._deletes: dict[tuple[str, str, str], int] = {}
            self._next_id = 1001
            self._fault = PostFault()

    def set_fault(self, fail: int, status: int, after_create: bool) -> None:
        with self._lock:
            self._fault = PostFault(fail, status, after_create)

    def fault(self) -> dict[str, Any]:
        """The post fault as `/_sim/faults` reports it: posts still to fail, status, when."""
        with self._lock:
            fault = self._fault
            return {
                "fail": fault.remaining,
                "status": fault.status,
                "after_create": fault.after_create,
            }

    def post(self, owner: str, repo: str, sha: str, body: str) -> tuple[Comment | None, int]:
        """(the stored comment or None, the status to answer), consuming one injected fault."""
        with self._lock:
            key = (owner, repo, sha)
            self._posts[key] = self._posts.get(key, 0) + 1
            fault = self._fault
            failing = fault.remaining > 0
            if failing:
                fault.remaining -= 1
                if not fault.after_create:
                    return None, fault.status
            comment = Comment(self._next_id, owner, repo, sha, body, self._clock())
            self._next_id += 1
            self._comments.append(comment)
            return comment, (fault.status if failing else 201)

    def delete(self, owner: str, repo: str, comment_id: int) -> bool:
        """Remove comment `comment_id` of `owner/repo`; False when there is none."""
        with self._lock:
            for index, comment in enumerate(self._comments):
                if (comment.owner, comment.repo, comment.id) == (owner, repo, comment_id):
                    del self._comments[index]
                    key = (owner, repo, comment.sha)
                    self._deletes[key] = self._deletes.get(key, 0) + 1
                    return True
            return False

    def update(self, owner: str, repo: str, comment_id: int, body: str) -> Comment | None:
        """Replace the body of comment `comment_id` of `owner/repo`; None when there is none."""
        with self._lock:
            for index, comment in enumerate(self._comments):
                if (comment.owner, comment.repo, comment.id) == (owner, repo, comment_id):
                    edited = replace(comment, body=body, updated_at=self._clock())
                    self._comments[index] = edited
                    return edited
            return None

    def on_commit(self, owner: str, repo: str, sha: str) -> list[Comment]:
        """The commit's comments, oldest first."""
        with self._lock:
            return [c for c in self._comments if (c.owner, c.repo, c.sha) == (owner, repo, sha)]

    def summary(self, base_url: str) -> dict[str, Any]:
        """Every comment (with its repo) and, per commit, posts received, comments stored and
        comments deleted."""
        with self._lock:
            comments = list(self._comments)
            posts = dict(self._posts)
            deletes = dict(self._deletes)
        stored: dict[tuple[str, str, str], int] = {}
        for comment in comments:
            key = (comment.owner, comment.repo, comment.sha)
            stored[key] = stored.get(key, 0) + 1
        commits = [
            {
                "repo": f"{o}/{r}",
                "sha": s,
                "posts": posts.get((o, r, s), 0),
                "comments": n,
                "deletes": deletes.get((o, r, s), 0),
            }
            for (o, r, s), n in {**dict.fromkeys(posts, 0), **stored}.items()
        ]
        return {
            "comments": [
                {"repo": f"{c.owner}/{c.repo}", **comment_json(base_url, c)} for c in comments
            ],
            "commits": commits,
        }
