"""Commit comments, one per marker: `CommentsClient` (`publish_once`) and its
`PublishResult`."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple
from urllib.parse import quote

import requests

from shared.clock import Clock, system_clock
from shared.crashpoints import crash_point
from shared.github.auth import GitHubAuth
from shared.github.errors import GitHubRejected, GitHubUnavailable
from shared.github.names import _repo_url, check_sha
from shared.github.transport import Deadline, Ownership, OwnershipLost, _RestClient
from shared.retry import RetryPolicy

COMMENTS_PER_PAGE = 100  # GitHub's maximum page size
MAX_COMMENT_PAGES = 50
MAX_COMMENT_CHARS = 65536  # GitHub refuses longer comment bodies with a 422


@dataclass(frozen=True)
class PublishResult:
    """The comment carrying the marker, whether this call created it, what it deleted, and
    whether it edited it.

    `comment_id` is the OLDEST comment carrying a marker: the one kept. `deleted` holds the
    ids of newer duplicates this call removed (its own post, when another was older).
    `updated`: the kept comment showed another body and this call replaced it (PATCH).
    """

    comment_id: int
    created: bool
    deleted: tuple[int, ...] = ()
    updated: bool = False


class _Comment(NamedTuple):
    """A listed comment carrying a marker: its id and the body it shows now."""

    id: int
    body: str


class CommentsClient(_RestClient):
    """Commit comments, ONE per marker, whatever the timing (GitHub REST commit comments),
    showing the body of the last publish.

    `publish_once` is safe to call again after any failure: it looks for the marker
    before posting, so a retry after a lost answer finds the comment GitHub created; a
    comment found showing another body is edited in place (PATCH: same id, new body).

        deliverer                          GitHub
        ── find(marker) → none ──────────▶
        ── POST comment ─────────────────▶ creates #7
           (answer lost: 502 / timeout)  ◀─ ✗            → GitHubUnavailable
        ── retry: find(marker) → #7 ─────▶               → PublishResult(7, created=False)
        ── later body: find → #7 (old) ──▶
        ── PATCH #7 {body} ──────────────▶ edits #7      → PublishResult(7, updated=True)

    Two callers that both find nothing would both post. Three things stop that
    (docs/architecture.md, "Outbox"): with an `Ownership`, no request starts unless its
    timeout fits in the caller's lease, and ownership is re-read right before the POST
    (and before an edit); and after posting, the commit's comments are listed again and
    every NEWER comment carrying the marker is deleted, so a duplicate that slipped
    through is removed. Which body is the latest is the caller's to decide: the last
    publish wins (a deliverer that publishes generations sends only the current one).
    """

    def __init__(
        self,
        api_url: str,
        token: str = "",
        *,
        auth: GitHubAuth | None = None,
        session: requests.Session | None = None,
        timeout_s: float = 30.0,
        attempts: int = 3,
        sleep: Callable[[float], None] = time.sleep,
        rand: Callable[[], float] = random.random,
        policy: RetryPolicy | None = None,
        clock: Clock = system_clock,
        max_pages: int = MAX_COMMENT_PAGES,
        api_version: str | None = None,
    ) -> None:
        super().__init__(
            api_url,
            token,
            auth=auth,
            session=session,
            timeout_s=timeout_s,
            attempts=attempts,
            sleep=sleep,
            rand=rand,
            policy=policy,
            clock=clock,
            api_version=api_version,
        )
        self._max_pages = max(1, max_pages)

    @property
    def timeout_s(self) -> float:
        """The timeout of one request: an outbox lease must hold several of them."""
        return self._timeout_s

    def _comments_url(self, repo: str, sha: str) -> str:
        base = _repo_url(self._api_url, repo)
        return f"{base}/commits/{quote(check_sha(sha), safe='')}/comments"

    def find_comment(
        self, repo: str, sha: str, marker: str, *, installation_id: int | None = None
    ) -> int | None:
        """The id of the oldest comment on `sha` whose body contains `marker`, or None.

        Follows `Link: rel="next"` for at most `max_pages` pages; a commit with more
        comments than that is `GitHubRejected` rather than a guess that could double-post.
        """
        found = self._marked(
            repo, sha, (marker,), first_only=True, deadline=None, installation_id=installation_id
        )
        return found[0].id if found else None

    def marked_comments(
        self,
        repo: str,
        sha: str,
        markers: Sequence[str],
        deadline: Deadline | None = None,
        *,
        installation_id: int | None = None,
    ) -> list[int]:
        """The ids of every comment on `sha` carrying one of `markers`, oldest first."""
        found = self._marked(
            repo,
            sha,
            markers,
            first_only=False,
            deadline=deadline,
            installation_id=installation_id,
        )
        return [comment.id for comment in found]

    def _marked(
        self,
        repo: str,
        sha: str,
        markers: Sequence[str],
        *,
        first_only: bool,
        deadline: Deadline | None,
        installation_id: int | None = None,
    ) -> list[_Comment]:
        """The comments on `sha` carrying one of `markers`, oldest first (the first only,
        when `first_only`), each with the body it shows."""
        where = f"{repo}@{sha}"
        if not markers or not all(markers):
            raise GitHubRejected(f"{where}: a marker is empty")
        url = self._comments_url(repo, sha)
        params: dict[str, str | int] | None = {"per_page": COMMENTS_PER_PAGE}
        found: list[_Comment] = []
        for _page in range(self._max_pages):
            response = self._send(
                "GET", url, where, params=params, deadline=deadline, installation_id=installation_id
            )
            found += _marked(_json_list(response, where), markers, where)
            if found and first_only:
                return found[:1]
            following = response.links.get("next", {}).get("url")
            if not following:
                return found
            url, params = self._same_host(following, where), None
        raise GitHubRejected(f"{where}: more than {self._max_pages} pages of comments")

    def delete_comment(
        self,
        repo: str,
        comment_id: int,
        deadline: Deadline | None = None,
        *,
        installation_id: int | None = None,
    ) -> bool:
        """Delete commit comment `comment_id` (DELETE /repos/{owner}/{repo}/comments/{id}).

        True when this call deleted it, False when it was already gone (404).
        """
        where = f"{repo}: comment {comment_id}"
        if isinstance(comment_id, bool) or not isinstance(comment_id, int) or comment_id < 1:
            raise GitHubRejected(f"{where}: not a comment id")
        url = f"{_repo_url(self._api_url, repo)}/comments/{comment_id}"
        response = self._send(
            "DELETE",
            url,
            where,
            deadline=deadline,
            missing_ok=True,
            installation_id=installation_id,
        )
        return response.status_code != 404  # 404: another caller's clean-up got there first

    def update_comment(
        self,
        repo: str,
        comment_id: int,
        body: str,
        deadline: Deadline | None = None,
        *,
        installation_id: int | None = None,
    ) -> bool:
        """Replace the body of commit comment `comment_id` ("Update a commit comment":
        PATCH /repos/{owner}/{repo}/comments/{id} with `{"body"}`; 200 with the comment).

        True when edited, False when the comment is gone (404). Sending the same body again
        changes nothing, so a lost answer is retried like a GET.
        """
        where = f"{repo}: comment {comment_id}"
        if isinstance(comment_id, bool) or not isinstance(comment_id, int) or comment_id < 1:
            raise GitHubRejected(f"{where}: not a comment id")
        if len(body) > MAX_COMMENT_CHARS:
            raise GitHubRejected(f"{where}: comment of {len(body)} characters is over the limit")
        url = f"{_repo_url(self._api_url, repo)}/comments/{comment_id}"
        response = self._send(
            "PATCH",
            url,
            where,
            json={"body": body},
            deadline=deadline,
            missing_ok=True,
            installation_id=installation_id,
        )
        return response.status_code != 404

    def publish_once(
        self,
        repo: str,
        sha: str,
        marker: str,
        body: str,
        *,
        ownership: Ownership | None = None,
        also: Sequence[str] = (),
        installation_id: int | None = None,
    ) -> PublishResult:
        """Make ONE comment on `sha` carrying `marker` show `body`: post it when none
        carries the marker, else edit the oldest in place when it shows another body.

        The body always carries `marker` (appended when absent); comments carrying one of
        `also` (older markers for the same thing) count as already there too. Newer
        comments carrying a marker are deleted, whether found or posted: the oldest stays.
        A 5xx, 429 or timeout of the POST is `GitHubUnavailable` without a retry here:
        GitHub may have created the comment, and the caller's next `publish_once` finds it.
        A comment gone before its edit (404) is `GitHubUnavailable`: the next call posts.

        With `ownership`: every request starts only if its timeout fits in
        `ownership.seconds_left()` (else `GitHubUnavailable`, nothing more sent), and
        `ownership.still_owner()` is asked right before the POST and before an edit
        (`OwnershipLost`, nothing written, when it says no). Every request uses
        `installation_id`'s credentials (None: GITHUB_TOKEN).
        """
        where = f"{repo}@{sha}"
        url = self._comments_url(repo, sha)
        if marker not in body:
            body = f"{body}\n\n{marker}"
        if len(body) > MAX_COMMENT_CHARS:
            raise GitHubRejected(f"{where}: comment of {len(body)} characters is over the limit")
        markers = (marker, *[m for m in also if m and m != marker])
        app = installation_id

        def listed() -> list[_Comment]:
            return self._marked(
                repo, sha, markers, first_only=False, deadline=ownership, installation_id=app
            )

        existing, created = listed(), False
        if not existing:
            self._still_owner(ownership, f"{where}: the outbox claim passed to another caller")
            crash_point("outbox.before_post")
            response = self._send(
                "POST",
                url,
                where,
                json={"body": body},
                retry=False,
                deadline=ownership,
                installation_id=app,
            )
            crash_point("outbox.posted")
            try:
                comment_id = int(response.json()["id"])
            except (ValueError, KeyError, TypeError):
                # Created, but we cannot tell its id: the next call finds it by the marker.
                raise GitHubUnavailable(
                    f"{where}: comment posted but the answer had no id"
                ) from None
            # A caller that posted in the same window shows up here; the oldest comment stays.
            existing = listed()
            if comment_id not in {c.id for c in existing}:
                existing = sorted([*existing, _Comment(comment_id, body)])
            created = existing[0].id == comment_id
        kept = existing[0]
        deleted = self._delete_newer(repo, [c.id for c in existing], ownership, app)
        if kept.body == body:
            return PublishResult(kept.id, created, deleted)
        self._still_owner(ownership, f"{where}: the outbox claim passed to another caller")
        if not self.update_comment(repo, kept.id, body, ownership, installation_id=app):
            raise GitHubUnavailable(f"{where}: comment {kept.id} was deleted before its edit")
        return PublishResult(kept.id, created, deleted, updated=True)

    @staticmethod
    def _still_owner(ownership: Ownership | None, refusal: str) -> None:
        """`OwnershipLost` (nothing written) when the caller's claim passed to another."""
        if ownership is not None and not ownership.still_owner():
            raise OwnershipLost(f"{refusal}; nothing written")

    def _delete_newer(
        self,
        repo: str,
        ids: Sequence[int],
        deadline: Deadline | None,
        installation_id: int | None = None,
    ) -> tuple[int, ...]:
        """Delete every comment of `ids` but the first (oldest); the ids this call deleted."""
        return tuple(
            cid
            for cid in ids[1:]
            if self.delete_comment(repo, cid, deadline, installation_id=installation_id)
        )


def _json_list(response: requests.Response, where: str) -> list[Any]:
    try:
        body = response.json()
    except ValueError as exc:
        raise GitHubRejected(f"{where}: GitHub answered non-JSON") from exc
    if not isinstance(body, list):
        raise GitHubRejected(f"{where}: GitHub answered {type(body).__name__}, not a list")
    return body


def _marked(comments: list[Any], markers: Sequence[str], where: str) -> list[_Comment]:
    """The `comments` (one page, oldest first) whose body carries one of `markers`."""
    found = []
    for comment in comments:
        body = str(comment.get("body") or "") if isinstance(comment, dict) else ""
        if any(marker in body for marker in markers):
            try:
                found.append(_Comment(int(comment["id"]), body))
            except (KeyError, TypeError, ValueError):
                raise GitHubRejected(f"{where}: a comment without an id") from None
    return found
