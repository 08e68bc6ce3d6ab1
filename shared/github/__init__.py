"""GitHub: what a push changed, file contents (Contents API) and commit comments.

Every name that reaches a URL is validated first (`check_repo`, `check_path`,
`check_sha`): bad input is refused before anything is sent. `repository_allowed` is the
optional `GITHUB_REPOSITORIES` allowlist (fnmatch globs such as `octo-org/*`).

Errors (every message names the repository, and the file path or commit):

    GitHubError
    ├── GitHubUnavailable   timeout, connection error, 408, 429, 5xx or a rate-limit 403
    │                       (`shared.retry`, `github_rate_limits`), too little time left
    │                       before a deadline, or the caller's ownership lost: worth a retry
    └── GitHubRejected      any other 4xx (missing file, bad credentials) or input we
                            refuse to send: a retry will not help
"""

from __future__ import annotations

import base64
import random
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, NamedTuple, Protocol
from urllib.parse import quote, urlsplit

import requests

from shared import tracing
from shared.clock import Clock, system_clock
from shared.crashpoints import crash_point
from shared.errors import HookledgerError, PermanentError, TransientError
from shared.github.auth import GitHubAuth, TokenAuth
from shared.github.installations import installation_of
from shared.retry import Backoff, RetryPolicy, parse_retry_after, server_error

MARKDOWN_SUFFIXES = (".md", ".markdown")
_OWNER = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,38}")
_NAME = re.compile(r"[A-Za-z0-9._-]{1,100}")
_SHA = re.compile(r"[0-9a-fA-F]{4,64}")
# A file name no common filesystem can hold (Linux NAME_MAX, NTFS, APFS: 255 bytes), so no
# checkout has it; and Linux's PATH_MAX for the whole path. Enforced before any URL is built.
MAX_PATH_SEGMENT_BYTES = 255
MAX_PATH_BYTES = 4096
COMMENTS_PER_PAGE = 100  # GitHub's maximum page size
MAX_COMMENT_PAGES = 50
MAX_COMMENT_CHARS = 65536  # GitHub refuses longer comment bodies with a 422


class GitHubError(HookledgerError):
    """Base of the GitHub client's errors; `status` is GitHub's HTTP answer, when there was
    one (None for a timeout, a connection error, or input refused before sending)."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class GitHubUnavailable(GitHubError, TransientError):
    """Transient: a retry may succeed."""


class GitHubRejected(GitHubError, PermanentError):
    """Permanent: GitHub answered a 4xx that will not change, or the input was refused."""


def check_repo(repo: str) -> tuple[str, str]:
    """(owner, name) of `repo` ("owner/name" in GitHub's syntax), else `GitHubRejected`."""
    if not isinstance(repo, str) or repo.count("/") != 1:
        raise GitHubRejected(f"repository {repo!r} is not of the form owner/name")
    owner, name = repo.split("/")
    if not _OWNER.fullmatch(owner):
        raise GitHubRejected(
            f"repository {repo!r}: owner must be 1-39 letters, digits or '-', not starting with '-'"
        )
    if not _NAME.fullmatch(name) or name in (".", ".."):
        raise GitHubRejected(
            f"repository {repo!r}: name must be 1-100 letters, digits, '.', '_' or '-', "
            "and not '.' or '..'"
        )
    return owner, name


def check_path(path: str) -> str:
    """`path` when it is a plain relative file path, else `GitHubRejected`.

    Refused: a leading '/', an empty segment ('', 'a//b', 'a/'), a '.' or '..' segment, NUL,
    text that is not valid UTF-8 (a lone surrogate), a segment over `MAX_PATH_SEGMENT_BYTES`
    or a whole path over `MAX_PATH_BYTES` (UTF-8 bytes).
    """
    if not isinstance(path, str):
        raise GitHubRejected(f"path {path!r} is not a string")
    if "\0" in path:
        raise GitHubRejected(f"path {path!r} contains a NUL character")
    try:
        size = len(path.encode("utf-8"))
    except UnicodeEncodeError:
        raise GitHubRejected(f"path {path!r} is not valid UTF-8") from None
    if size > MAX_PATH_BYTES:
        raise GitHubRejected(f"path {path[:80]!r}… is {size} bytes, over {MAX_PATH_BYTES}")
    if path.startswith("/"):
        raise GitHubRejected(f"path {path!r} starts with '/': paths are relative to the repository")
    for segment in path.split("/"):
        if segment in ("", ".", ".."):
            raise GitHubRejected(f"path {path!r} has an empty, '.' or '..' segment")
        length = len(segment.encode("utf-8"))
        if length > MAX_PATH_SEGMENT_BYTES:
            raise GitHubRejected(
                f"path {path!r} has a {length}-byte name, over the {MAX_PATH_SEGMENT_BYTES} bytes "
                "a filesystem allows for one name"
            )
    return path


def check_sha(sha: str) -> str:
    """`sha` when it is a commit id (4-64 hex digits), else `GitHubRejected`."""
    if not isinstance(sha, str) or not _SHA.fullmatch(sha):
        raise GitHubRejected(f"commit {sha!r} is not a hexadecimal commit id")
    return sha


def repository_allowed(repo: str, patterns: tuple[str, ...]) -> bool:
    """Whether `repo` matches one of `patterns` (fnmatch globs); no patterns allow every repo.

    Compared case-insensitively, as GitHub compares owner and repository names.
    """
    if not patterns:
        return True
    wanted = repo.lower()
    return any(fnmatchcase(wanted, pattern.lower()) for pattern in patterns)


def _repo_url(api_url: str, repo: str) -> str:
    owner, name = check_repo(repo)
    return f"{api_url}/repos/{quote(owner, safe='')}/{quote(name, safe='')}"


@dataclass(frozen=True)
class Push:
    repo: str
    sha: str
    ref: str
    default_branch: str
    deleted: bool
    changed: tuple[str, ...]
    # The GitHub App installation the push came through (`installation.id`); None for a
    # repository webhook: its fetches and comments then use GITHUB_TOKEN, as before Apps.
    installation_id: int | None = None

    @property
    def to_default_branch(self) -> bool:
        return self.ref == f"refs/heads/{self.default_branch}"


def parse_push(payload: Mapping[str, Any]) -> Push:
    """Read a `push` payload; raise ValueError naming the missing field."""
    try:
        repository = payload["repository"]
        repo = repository["full_name"]
        default_branch = repository.get("default_branch") or repository.get("master_branch")
        ref = payload["ref"]
        sha = payload["after"]
    except (KeyError, TypeError) as exc:
        raise ValueError(f"push payload is missing {exc}") from None
    if not default_branch:
        raise ValueError("push payload is missing repository.default_branch")
    installation_id = installation_of(payload)
    # Later commits win: a file added then removed in one push is not in `changed`.
    present: dict[str, None] = {}
    try:
        for commit in payload.get("commits") or []:
            for path in [*commit.get("added", []), *commit.get("modified", [])]:
                present[str(path)] = None
            for path in commit.get("removed", []):
                present.pop(str(path), None)
    except (AttributeError, TypeError):
        raise ValueError("push payload has malformed commits") from None
    return Push(
        repo=repo,
        sha=sha,
        ref=ref,
        default_branch=default_branch,
        deleted=bool(payload.get("deleted")),
        changed=tuple(present),
        installation_id=installation_id,
    )


def select_paths(paths: Iterable[str], under: str, suffixes: tuple[str, ...]) -> list[str]:
    """The paths among `paths` ending in one of `suffixes` (any case) under the folder
    `under` ('' = the whole repository), sorted."""
    prefix = under.strip("/")
    chosen = []
    for path in paths:
        if not path.lower().endswith(suffixes):
            continue
        if prefix and not (path == prefix or path.startswith(prefix + "/")):
            continue
        chosen.append(path)
    return sorted(chosen)


class Deadline(Protocol):
    """How long a caller may still spend (e.g. the rest of an outbox lease)."""

    def seconds_left(self) -> float: ...


class Ownership(Deadline, Protocol):
    """A deadline, and whether the caller still holds the right to act (a ledger read)."""

    def still_owner(self) -> bool: ...


class OwnershipLost(GitHubUnavailable):
    """The caller's claim passed to someone else before the POST: nothing was posted."""


class _NoCredential(GitHubUnavailable):
    """The auth provider could not produce a credential now (`error`): one failed attempt,
    told apart from a deadline's `GitHubUnavailable`, which ends the call at once."""

    def __init__(self, error: GitHubUnavailable) -> None:
        super().__init__(str(error), status=error.status)
        self.error = error


class _RestClient:
    """The request/retry code shared by every GitHub client: headers, timeout, backoff.

    Credentials come from `auth` (`shared/github/auth.py`: a personal token, or a GitHub
    App's installation tokens per `installation_id`); without one, `token` (or none). They
    go only into the Authorization header; no message built here contains them.
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
    ) -> None:
        self._api_url = api_url.rstrip("/")
        self._session = session or requests.Session()
        self._headers = {
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": "2022-11-28",
            "User-Agent": "hookledger",
        }
        self._auth: GitHubAuth = auth if auth is not None else TokenAuth(token)
        self._timeout_s = timeout_s
        self._policy = policy or github_policy(attempts)
        self._sleep = sleep
        self._rand = rand
        self._clock = clock

    def _send(
        self,
        method: str,
        url: str,
        where: str,
        *,
        params: Mapping[str, str | int] | None = None,
        json: Any = None,
        retry: bool = True,
        deadline: Deadline | None = None,
        missing_ok: bool = False,
        accept: str | None = None,
        installation_id: int | None = None,
    ) -> requests.Response:
        """A 2xx response; what the policy retries (408, 429, 5xx, a rate-limit 403, timeouts)
        is retried (when `retry`) then `GitHubUnavailable`.

        Any other answer is `GitHubRejected`. `where` names the object in every message.
        Waits follow the policy's jittered backoff, or what GitHub asked for when longer:
        `retry-after`, or with `x-ratelimit-remaining: 0` the time until
        `x-ratelimit-reset` ("Rate limits for the REST API"); one over the policy's
        `max_wait_s` is not waited for (`GitHubUnavailable` at once). With a `deadline`, no
        request starts unless its whole timeout fits in the time left: `GitHubUnavailable`
        instead, so a call never outlives the caller's lease. With `missing_ok`, a 404 is
        answered like a 2xx. Credentials are `installation_id`'s (`_authorized`): a 401 is
        answered by one more try with a renewed credential, never more.
        """
        attempts = self._policy.attempts if retry else 1
        last: GitHubError | None = None
        asked: float | None = None
        for attempt in range(attempts):
            if attempt:
                wait = self._policy.wait_s(attempt - 1, asked, self._rand)
                if wait is None:
                    assert last is not None
                    raise GitHubUnavailable(
                        f"{last} (retry-after {asked:g} s: not waited for)", status=last.status
                    )
                if deadline is not None:  # a wait that leaves no room for the attempt: stop now
                    self._check_time(deadline, f"{where}: {method}", last, wait_s=wait)
                self._sleep(wait)
            try:
                response = self._authorized(
                    method,
                    url,
                    where,
                    installation_id=installation_id,
                    deadline=deadline,
                    last=last,
                    params=params,
                    json=json,
                    headers={**self._headers, "Accept": accept} if accept else self._headers,
                )
            except requests.RequestException as exc:
                last, asked = GitHubUnavailable(f"{where}: {type(exc).__name__}: {exc}"), None
                continue
            except _NoCredential as exc:
                status = exc.error.status
                last, asked = GitHubUnavailable(f"{where}: {exc.error}", status=status), None
                continue
            if self._policy.retryable(response.status_code, response.headers):
                last = GitHubUnavailable(
                    f"{where}: GitHub answered {response.status_code}", status=response.status_code
                )
                asked = self._asked_wait(response.headers)
                continue
            if missing_ok and response.status_code == 404:
                return response
            if not 200 <= response.status_code < 300:
                raise GitHubRejected(
                    f"{where}: GitHub answered {response.status_code}{_said(response)}",
                    status=response.status_code,
                )
            return response
        assert last is not None
        raise last

    def _same_host(self, url: str, where: str) -> str:
        """A pagination URL on the API's own host; the token never goes anywhere else."""
        wanted, got = urlsplit(self._api_url), urlsplit(url)
        if (got.scheme, got.netloc) != (wanted.scheme, wanted.netloc):
            raise GitHubRejected(f"{where}: pagination link leaves {wanted.netloc}")
        return url

    def _authorized(
        self,
        method: str,
        url: str,
        where: str,
        *,
        installation_id: int | None,
        deadline: Deadline | None,
        last: GitHubError | None,
        headers: Mapping[str, str],
        **kwargs: Any,
    ) -> requests.Response:
        """One attempt with `installation_id`'s credentials; on a 401 the auth provider may
        renew them (an installation token expired or revoked) and the request is sent once
        more. GitHub authenticates before it acts, so a request answered 401 did nothing:
        even a POST is safe to send again. The deadline is checked before each send, after
        any token was minted. `_NoCredential` when no credential could be had now."""
        for renewed in (False, True):
            try:
                credential = self._auth.headers(installation_id)
            except GitHubUnavailable as exc:
                raise _NoCredential(exc) from exc
            if deadline is not None:
                self._check_time(deadline, f"{where}: {method}", last)
            with tracing.span(
                "github.request",
                kind="client",
                **{"http.request.method": method, "url.path": urlsplit(url).path},
            ) as span:
                sent = {**headers, **credential}
                response = self._session.request(
                    method, url, headers=sent, timeout=self._timeout_s, **kwargs
                )
                span.set(**{"http.response.status_code": response.status_code})
                if server_error(response.status_code):
                    span.fail(f"{where}: GitHub answered {response.status_code}")
            if response.status_code != 401 or renewed:
                return response
            if not self._auth.invalidate(installation_id, credential):
                return response
        raise AssertionError("unreachable: the loop returns")  # pragma: no cover

    def _asked_wait(self, headers: Mapping[str, str]) -> float | None:
        """How long GitHub asked us to wait, in seconds: `retry-after`, else (a primary rate
        limit, `x-ratelimit-remaining: 0`) until `x-ratelimit-reset` (Unix seconds) and one
        more second; None when it said neither ("Rate limits for the REST API")."""
        now = self._clock().timestamp()
        asked = parse_retry_after(headers.get("retry-after"), now)
        if asked is not None or headers.get("x-ratelimit-remaining") != "0":
            return asked
        reset = (headers.get("x-ratelimit-reset") or "").strip()
        return max(0.0, float(reset) - now) + 1.0 if reset.isdigit() else None

    def _check_time(
        self, deadline: Deadline, what: str, last: GitHubError | None, wait_s: float = 0.0
    ) -> None:
        """`GitHubUnavailable` when, after waiting `wait_s`, less than one request's timeout
        is left before `deadline` (`RetryPolicy.fits`)."""
        left = deadline.seconds_left() - wait_s
        if self._policy.fits(0.0, self._timeout_s, left):
            return
        reason = f" (after: {last})" if last is not None else ""
        raise GitHubUnavailable(
            f"{what}: {max(left, 0.0):.1f} s left before the deadline, less than one "
            f"request's {self._timeout_s:g} s timeout; not sent{reason}"
        )


class ContentsClient(_RestClient):
    """Fetches file bytes at a commit through GitHub's Contents API."""

    def fetch(self, repo: str, path: str, ref: str, *, installation_id: int | None = None) -> bytes:
        """The file's bytes at `ref`; retries 429/5xx and timeouts a few times, then raises.

        A malformed `repo` or `path` is `GitHubRejected` before anything is sent.
        `installation_id`: the App installation whose token reads it (None: GITHUB_TOKEN).
        """
        where = f"{repo}:{path}@{str(ref)[:12]}"
        try:
            base = _repo_url(self._api_url, repo)
            check_path(path)
        except GitHubRejected as exc:
            raise GitHubRejected(f"{where}: {exc}") from None
        url = f"{base}/contents/{quote(path, safe='/')}"
        # The raw media type: the JSON form carries content only for files up to 1 MB.
        response = self._send(
            "GET",
            url,
            where,
            params={"ref": ref},
            accept=RAW_MEDIA_TYPE,
            installation_id=installation_id,
        )
        if response.headers.get("Content-Type", "").startswith("application/json"):
            return _decode(response, where)  # a directory or a submodule answers JSON
        return response.content


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


# GitHub's error `message` (e.g. a 422's "No more than 50 items are allowed") is kept this
# long in an error: it says what was refused and never holds the token.
MAX_SAID_CHARS = 300


def _said(response: requests.Response) -> str:
    """`: <GitHub's message>` of a refusal, or "" when its body carries none."""
    try:
        message = response.json().get("message")
    except (ValueError, AttributeError):
        return ""
    if not isinstance(message, str) or not message.strip():
        return ""
    flat = " ".join(message.split())
    return ": " + (flat if len(flat) <= MAX_SAID_CHARS else flat[:MAX_SAID_CHARS] + "…")


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


def github_rate_limits(code: int, headers: Mapping[str, str]) -> bool:
    """GitHub's "Rate limits for the REST API": a primary or secondary rate limit may be
    answered with 403 (not only 429), saying so in `x-ratelimit-remaining: 0` or
    `retry-after`. Such a 403 is a wait, not a refusal. (`headers` as requests gives them:
    case-insensitive.)"""
    return code == 403 and (
        headers.get("x-ratelimit-remaining") == "0" or headers.get("retry-after") is not None
    )


def github_policy(attempts: int = 3) -> RetryPolicy:
    """The retry policy of GitHub calls: the shared one, `attempts` per call, with GitHub's
    documented rate-limit 403 (`github_rate_limits`); waits 0.5 s, 1 s, 2 s, 4 s (ceilings,
    half jittered) or as long as `retry-after` asks, up to the policy's `max_wait_s`."""
    return RetryPolicy(
        backoff=Backoff(attempts=max(1, attempts), first_s=0.5, cap_s=4.0, jitter=0.5),
        rate_limited=github_rate_limits,
    )


# GitHub's Contents API: "Files between 1-100 MB: Only the raw or object custom media types
# are supported"; raw answers the file's bytes themselves.
RAW_MEDIA_TYPE = "application/vnd.github.raw+json"


def _decode(response: requests.Response, where: str) -> bytes:
    try:
        body = response.json()
    except ValueError as exc:
        raise GitHubRejected(f"{where}: Contents API answered non-JSON") from exc
    if not isinstance(body, dict) or body.get("type") != "file":
        raise GitHubRejected(f"{where}: not a file")
    if body.get("encoding") != "base64":
        raise GitHubRejected(f"{where}: unsupported encoding {body.get('encoding')!r}")
    try:
        return base64.b64decode(body.get("content", ""))
    except ValueError as exc:
        raise GitHubRejected(f"{where}: content is not base64") from exc
