"""Reviews and review comments of pull requests: the part of the `Issues` store
(`issues.py`) that only pull requests have, on its lock and records.

A review with `event` APPROVE, REQUEST_CHANGES or COMMENT is submitted at once (the last
two need a `body` or `comments`, as GitHub asks); without one it stays PENDING. Its
`comments` become review comments of that review. A single review comment (`POST
.../pulls/{n}/comments`) gets a submitted COMMENTED review of its own, as on GitHub; one
`in_reply_to` another takes that comment's path.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from typing import Any

from local.simulator.issue_records import Invalid, Issue, Missing, Pull, Review, ReviewComment
from shared.clock import Clock

EVENTS = {
    "APPROVE": "APPROVED",
    "REQUEST_CHANGES": "CHANGES_REQUESTED",
    "COMMENT": "COMMENTED",
    None: "PENDING",
}
COMMENT = "PullRequestReviewComment"


def _checked(pull: Pull, spec: Any) -> dict[str, Any]:
    """A review comment's `body`, `path`, `line`, `side`, `commit_id`, `in_reply_to`, or
    Invalid naming the field GitHub would."""
    if not isinstance(spec, dict):
        raise Invalid(COMMENT, "comments", "invalid")
    body, path, reply = spec.get("body"), spec.get("path"), spec.get("in_reply_to")
    if not isinstance(body, str) or not body:
        raise Invalid(COMMENT, "body")
    if reply is not None:
        parent = next((c for c in pull.review_comments if c.id == reply), None)
        if parent is None:
            raise Invalid(COMMENT, "in_reply_to", "invalid")
        path = parent.path
    if not isinstance(path, str) or not path:
        raise Invalid(COMMENT, "path")
    line = spec.get("line", spec.get("position"))
    if line is not None and (not isinstance(line, int) or isinstance(line, bool)):
        raise Invalid(COMMENT, "line", "invalid")
    side = spec.get("side") or "RIGHT"
    if side not in ("LEFT", "RIGHT"):
        raise Invalid(COMMENT, "side", "invalid")
    commit_id = str(spec.get("commit_id") or pull.head_sha)
    return {
        "body": body,
        "path": path,
        "line": line,
        "side": side,
        "commit_id": commit_id,
        "in_reply_to": reply,
    }


class PullReviews:
    """Review operations; the `Issues` store provides the lock, clock and lookups."""

    _lock: threading.Lock
    _clock: Clock
    _issue: Callable[[str, str, int], Issue]
    _next: Callable[[str], int]

    def _pull(self, owner: str, repo: str, number: int) -> tuple[Issue, Pull]:
        issue = self._issue(owner, repo, number)
        if issue.pull is None:
            raise Missing()
        return issue, issue.pull

    def get_pull(self, owner: str, repo: str, number: int) -> Issue:
        """The issue of pull request `number` (its `pull` set); Missing for a plain issue."""
        with self._lock:
            return copy.deepcopy(self._pull(owner, repo, number)[0])

    def _stored_comment(
        self, number: int, pull: Pull, checked: dict[str, Any], user: str, review_id: int
    ) -> ReviewComment:
        made = ReviewComment(
            self._next("review_comment"),
            number,
            review_id,
            user,
            checked["body"],
            checked["path"],
            checked["line"],
            checked["side"],
            checked["commit_id"],
            self._clock(),
            checked["in_reply_to"],
        )
        pull.review_comments.append(made)
        return made

    def review(
        self, owner: str, repo: str, number: int, fields: dict[str, Any], user: str
    ) -> Review:
        """A review (see the module's docstring); Invalid in GitHub's simple form."""
        try:
            return self._review(owner, repo, number, fields, user)
        except Invalid as exc:
            raise exc.as_simple() from None

    def _review(
        self, owner: str, repo: str, number: int, fields: dict[str, Any], user: str
    ) -> Review:
        event = fields.get("event")
        if event not in EVENTS:
            raise Invalid("PullRequestReview", "event", "invalid")
        body = fields.get("body") or ""
        specs = fields.get("comments") or []
        if not isinstance(specs, list):
            raise Invalid("PullRequestReview", "comments", "invalid")
        if event in ("REQUEST_CHANGES", "COMMENT") and not body and not specs:
            raise Invalid("PullRequestReview", "body")
        with self._lock:
            pull = self._pull(owner, repo, number)[1]
            commit_id = str(fields.get("commit_id") or pull.head_sha)
            checked = [_checked(pull, {"commit_id": commit_id, **s}) for s in specs]
            submitted = None if event is None else self._clock()
            made = Review(
                self._next("review"), number, user, body, EVENTS[event], commit_id, submitted
            )
            pull.reviews.append(made)
            for one in checked:
                self._stored_comment(number, pull, one, user, made.id)
            return copy.deepcopy(made)

    def reviews(self, owner: str, repo: str, number: int) -> list[Review]:
        """The pull request's reviews, oldest first."""
        with self._lock:
            return copy.deepcopy(self._pull(owner, repo, number)[1].reviews)

    def review_comment(
        self, owner: str, repo: str, number: int, fields: dict[str, Any], user: str
    ) -> ReviewComment:
        with self._lock:
            pull = self._pull(owner, repo, number)[1]
            checked = _checked(pull, fields)
            review = Review(
                self._next("review"),
                number,
                user,
                "",
                "COMMENTED",
                checked["commit_id"],
                self._clock(),
            )
            pull.reviews.append(review)
            return copy.deepcopy(self._stored_comment(number, pull, checked, user, review.id))

    def review_comments(self, owner: str, repo: str, number: int) -> list[ReviewComment]:
        """The pull request's review comments, oldest first."""
        with self._lock:
            return copy.deepcopy(self._pull(owner, repo, number)[1].review_comments)
