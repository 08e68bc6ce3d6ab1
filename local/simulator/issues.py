"""GitHub issues and pull requests of each repository, with their labels, comments and
reactions: one store, one lock, so what one call writes the next call lists.

As on GitHub, an issue and a pull request share one `number` sequence per repository
(from 1); a pull request is an issue that also has `pull` data (head, base, files,
reviews). Ids (of issues, pull requests, labels, comments, reactions, reviews, review
comments) ascend across the whole simulator, each kind from its own base. A label named
on an issue that the repository does not have yet is created with `DEFAULT_COLOR`.
Repositories are case-insensitive, as GitHub's names are. Callers get deep copies.

Errors: `Missing` (the caller answers 404) and `Invalid` (422, with GitHub's
`errors` entry), from `issue_records.py`; `BadRequest` for control-API input. Reviews
and review comments of pull requests: `pull_reviews.py`, on the same lock.
"""

from __future__ import annotations

import copy
import threading
from datetime import datetime
from typing import Any

from local.simulator.errors import BadRequest
from local.simulator.issue_records import (
    REACTIONS,
    STATES,
    Comment,
    Invalid,
    Issue,
    Label,
    Missing,
    Pull,
    Reaction,
    Repo,
    label_names,
)
from local.simulator.pull_reviews import PullReviews
from shared.clock import Clock, system_clock


class Issues(PullReviews):
    """Thread-safe store of every repository's issues and pull requests."""

    def __init__(self, clock: Clock = system_clock) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self._repos: dict[str, Repo] = {}
            # One id sequence per kind, far apart so ids of kinds never meet in a test.
            self._ids = {
                "issue": 1_000_001,
                "pull": 2_000_001,
                "label": 3_000_001,
                "comment": 4_000_001,
                "reaction": 5_000_001,
                "review": 6_000_001,
                "review_comment": 7_000_001,
            }

    # --- helpers, under the lock -----------------------------------------------------

    def _next(self, kind: str) -> int:
        self._ids[kind] += 1
        return self._ids[kind] - 1

    def _repo(self, owner: str, repo: str) -> Repo:
        return self._repos.setdefault(f"{owner}/{repo}".lower(), Repo())

    def _issue(self, owner: str, repo: str, number: int) -> Issue:
        found = self._repo(owner, repo).issues.get(number)
        if found is None:
            raise Missing()
        return found

    def _labels(self, owner: str, repo: str, names: list[str]) -> list[Label]:
        """The repository's labels of these names, created when new; no duplicates."""
        known = self._repo(owner, repo).labels
        chosen: dict[str, Label] = {}
        for name in names:
            label = known.get(name.lower())
            if label is None:
                label = known[name.lower()] = Label(self._next("label"), name)
            chosen.setdefault(name.lower(), label)
        return list(chosen.values())

    # --- issues --------------------------------------------------------------------

    def create(
        self,
        owner: str,
        repo: str,
        fields: dict[str, Any],
        user: str,
        *,
        number: int | None = None,
        pull: dict[str, Any] | None = None,
    ) -> Issue:
        """A new open issue (a pull request with `pull`: `head_ref`, `head_sha`, `base_ref`,
        `base_sha`, `files`, `draft`) from `title`, `body`, `labels`, `assignees`, `state`;
        `number` None takes the next one. Invalid when the title is missing."""
        title = fields.get("title")
        if isinstance(title, int) and not isinstance(title, bool):
            title = str(title)  # GitHub takes a number as the title
        if not isinstance(title, str) or not title:
            raise Invalid("Issue", "title")
        now = self._clock()
        with self._lock:
            issues = self._repo(owner, repo).issues
            if number is None:
                number = max(issues, default=0) + 1
            elif number in issues:
                raise BadRequest(f"{owner}/{repo} already has issue or pull request #{number}.")
            issue = Issue(
                self._next("issue"),
                owner,
                repo,
                number,
                title,
                fields.get("body"),
                user,
                now,
                now,
            )
            if pull is not None:
                issue.pull = Pull(self._next("pull"), **pull)
            issues[number] = issue
            self._apply(issue, fields, now)
            return copy.deepcopy(issue)

    def _apply(self, issue: Issue, fields: dict[str, Any], now: datetime) -> None:
        """`labels`, `assignees`, `state`, `state_reason`, `title`, `body` onto `issue`."""
        if "labels" in fields and fields["labels"] is not None:
            names = label_names(fields["labels"], "labels")
            issue.labels = self._labels(issue.owner, issue.repo, names)
        assignees = fields.get("assignees")
        if assignees is None and fields.get("assignee") is not None:
            assignees = [fields["assignee"]]
        if assignees is not None:
            if not isinstance(assignees, list) or not all(isinstance(a, str) for a in assignees):
                raise Invalid("Issue", "assignees", "invalid")
            issue.assignees = list(dict.fromkeys(assignees))
        if fields.get("title"):
            issue.title = str(fields["title"])
        if "body" in fields:
            if fields["body"] is not None and not isinstance(fields["body"], str):
                raise Invalid("Issue", "body", "invalid")
            issue.body = fields["body"]
        state = fields.get("state")
        if state is not None:
            if state not in STATES:
                raise Invalid("Issue", "state", "invalid")
            if state != issue.state:
                issue.closed_at = now if state == "closed" else None
                issue.state_reason = "completed" if state == "closed" else "reopened"
            issue.state = state
        if fields.get("state_reason") in ("completed", "not_planned", "reopened"):
            issue.state_reason = fields["state_reason"]
        issue.updated_at = now

    def update(self, owner: str, repo: str, number: int, fields: dict[str, Any]) -> Issue:
        """The issue with `fields` applied (a `title` of "" is Invalid); Missing if none."""
        if "title" in fields and not fields["title"]:
            raise Invalid("Issue", "title")
        now = self._clock()
        with self._lock:
            issue = self._issue(owner, repo, number)
            trial = copy.deepcopy(issue)
            self._apply(trial, fields, now)  # a refused field changes nothing
            self._repo(owner, repo).issues[number] = trial
            return copy.deepcopy(trial)

    def get(self, owner: str, repo: str, number: int) -> Issue:
        with self._lock:
            return copy.deepcopy(self._issue(owner, repo, number))

    def every(self, owner: str, repo: str) -> list[Issue]:
        """The repository's issues and pull requests, newest first (GitHub's default)."""
        with self._lock:
            issues = self._repo(owner, repo).issues.values()
            return copy.deepcopy(sorted(issues, key=lambda i: -i.number))

    def open_count(self, owner: str, repo: str) -> int:
        with self._lock:
            return sum(i.state == "open" for i in self._repo(owner, repo).issues.values())

    # --- labels --------------------------------------------------------------------

    def add_labels(self, owner: str, repo: str, number: int, labels: Any) -> list[Label]:
        """Every label of the issue after adding `labels` (names or `{"name"}` objects)."""
        names = label_names(labels, "labels")
        with self._lock:
            issue = self._issue(owner, repo, number)
            current = [label.name for label in issue.labels]
            issue.labels = self._labels(owner, repo, current + names)
            issue.updated_at = self._clock()
            return copy.deepcopy(issue.labels)

    def set_labels(self, owner: str, repo: str, number: int, labels: Any) -> list[Label]:
        names = label_names(labels, "labels")
        with self._lock:
            issue = self._issue(owner, repo, number)
            issue.labels = self._labels(owner, repo, names)
            issue.updated_at = self._clock()
            return copy.deepcopy(issue.labels)

    def remove_label(self, owner: str, repo: str, number: int, name: str) -> list[Label]:
        """The labels left; Missing when the issue does not carry `name`."""
        with self._lock:
            issue = self._issue(owner, repo, number)
            kept = [label for label in issue.labels if label.name.lower() != name.lower()]
            if len(kept) == len(issue.labels):
                raise Missing("Label does not exist")
            issue.labels = kept
            issue.updated_at = self._clock()
            return copy.deepcopy(kept)

    # --- comments and reactions ------------------------------------------------------

    def comment(self, owner: str, repo: str, number: int, body: Any, user: str) -> Comment:
        if not isinstance(body, str) or not body:
            raise Invalid("IssueComment", "body")
        now = self._clock()
        with self._lock:
            issue = self._issue(owner, repo, number)
            made = Comment(self._next("comment"), number, user, body, now, now)
            issue.comments.append(made)
            return copy.deepcopy(made)

    def _find_comment(self, owner: str, repo: str, comment_id: int) -> Comment:
        for issue in self._repo(owner, repo).issues.values():
            for found in issue.comments:
                if found.id == comment_id:
                    return found
        raise Missing()

    def get_comment(self, owner: str, repo: str, comment_id: int) -> Comment:
        with self._lock:
            return copy.deepcopy(self._find_comment(owner, repo, comment_id))

    def edit_comment(self, owner: str, repo: str, comment_id: int, body: Any) -> Comment:
        if not isinstance(body, str) or not body:
            raise Invalid("IssueComment", "body")
        with self._lock:
            found = self._find_comment(owner, repo, comment_id)
            found.body, found.updated_at = body, self._clock()
            return copy.deepcopy(found)

    def comments(self, owner: str, repo: str, number: int) -> list[Comment]:
        """The issue's comments, oldest first."""
        with self._lock:
            return copy.deepcopy(self._issue(owner, repo, number).comments)

    def react(
        self,
        owner: str,
        repo: str,
        content: Any,
        user: str,
        *,
        number: int | None = None,
        comment_id: int | None = None,
    ) -> tuple[Reaction, bool]:
        """(the reaction, whether it is new) on issue `number` or comment `comment_id`: the
        same content by the same user is the one already there, as GitHub answers it."""
        if content not in REACTIONS:
            raise Invalid("Reaction", "content", "invalid")
        with self._lock:
            if comment_id is not None:
                reactions = self._find_comment(owner, repo, comment_id).reactions
            else:
                assert number is not None
                reactions = self._issue(owner, repo, number).reactions
            for existing in reactions:
                if (existing.user, existing.content) == (user, content):
                    return copy.deepcopy(existing), False
            made = Reaction(self._next("reaction"), user, content, self._clock())
            reactions.append(made)
            return copy.deepcopy(made), True
