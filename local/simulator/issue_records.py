"""The records of GitHub's issues and pull requests as the simulator stores them
(`issues.py` owns them), and the two refusals every issue route turns into GitHub's
answers: `Missing` (404) and `Invalid` (422 "Validation Failed").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

# GitHub's color for a label created by naming it on an issue.
DEFAULT_COLOR = "ededed"
REACTIONS = ("+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes")
STATES = ("open", "closed")


class Missing(Exception):
    """No such issue, pull request, comment or label: GitHub's 404 with `message`."""

    def __init__(self, message: str = "Not Found") -> None:
        super().__init__(message)
        self.message = message


class Invalid(Exception):
    """GitHub's 422 "Validation Failed": `error` is its `errors` entry; `simple` answers
    GitHub's other form, `errors` a list of messages (as "Create a review" does)."""

    def __init__(
        self, resource: str, field_name: str, code: str = "missing_field", *, simple: bool = False
    ) -> None:
        super().__init__(f"{resource}.{field_name}: {code}")
        self.error = {"resource": resource, "field": field_name, "code": code}
        self.simple = simple

    def as_simple(self) -> Invalid:
        """The same refusal in the simple form."""
        error = self.error
        return Invalid(error["resource"], error["field"], error["code"], simple=True)


@dataclass
class Label:
    id: int
    name: str
    color: str = DEFAULT_COLOR
    description: str | None = None


@dataclass
class PullFile:
    filename: str
    status: str = "modified"
    additions: int = 1
    deletions: int = 0
    patch: str | None = None
    previous_filename: str | None = None


@dataclass
class Review:
    id: int
    number: int
    user: str
    body: str
    state: str
    commit_id: str
    submitted_at: datetime | None


@dataclass
class ReviewComment:
    id: int
    number: int
    review_id: int | None
    user: str
    body: str
    path: str
    line: int | None
    side: str
    commit_id: str
    created_at: datetime
    in_reply_to: int | None = None


@dataclass
class Pull:
    id: int
    head_ref: str
    head_sha: str
    base_ref: str
    base_sha: str
    files: list[PullFile] = field(default_factory=list)
    draft: bool = False
    merged_at: datetime | None = None
    reviews: list[Review] = field(default_factory=list)
    review_comments: list[ReviewComment] = field(default_factory=list)


@dataclass
class Reaction:
    id: int
    user: str
    content: str
    created_at: datetime


@dataclass
class Comment:
    id: int
    number: int
    user: str
    body: str
    created_at: datetime
    updated_at: datetime
    reactions: list[Reaction] = field(default_factory=list)


@dataclass
class Issue:
    id: int
    owner: str
    repo: str
    number: int
    title: str
    body: str | None
    user: str
    created_at: datetime
    updated_at: datetime
    state: str = "open"
    state_reason: str | None = None
    closed_at: datetime | None = None
    labels: list[Label] = field(default_factory=list)
    assignees: list[str] = field(default_factory=list)
    comments: list[Comment] = field(default_factory=list)
    reactions: list[Reaction] = field(default_factory=list)
    pull: Pull | None = None


@dataclass
class Repo:
    """One repository's issues (pull requests included) and labels."""

    issues: dict[int, Issue] = field(default_factory=dict)
    labels: dict[str, Label] = field(default_factory=dict)  # by lower-cased name


def label_names(labels: Any, where: str) -> list[str]:
    """Label names from `["a", …]` or `[{"name": "a"}, …]`, as GitHub takes both."""
    if not isinstance(labels, list):
        raise Invalid("Label", where, "invalid")
    names = []
    for item in labels:
        name = item.get("name") if isinstance(item, dict) else item
        if not isinstance(name, str) or not name.strip():
            raise Invalid("Label", where, "invalid")
        names.append(name.strip())
    return names
