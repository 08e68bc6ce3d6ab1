"""GitHub: what a push changed, and file contents through the Contents API.

Errors (every message names the repository and file path):

    GitHubError
    ├── GitHubUnavailable   timeout, connection error, 429 or 5xx: worth a retry
    └── GitHubRejected      any other 4xx (missing file, bad credentials): a retry will not help
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import requests

from shared.errors import HookledgerError, PermanentError, TransientError

MARKDOWN_SUFFIXES = (".md", ".markdown")
_RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})


class GitHubError(HookledgerError):
    """Base of the GitHub client's errors."""


class GitHubUnavailable(GitHubError, TransientError):
    """Transient: a retry may succeed."""


class GitHubRejected(GitHubError, PermanentError):
    """Permanent: GitHub answered a 4xx that will not change."""


@dataclass(frozen=True)
class Push:
    repo: str
    sha: str
    ref: str
    default_branch: str
    deleted: bool
    changed: tuple[str, ...]

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
    # Later commits win: a file added then removed in one push is not reviewed.
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
    )


def reviewable(paths: tuple[str, ...], review_path: str) -> list[str]:
    """The Markdown files among `paths` under `review_path` ('' = the whole repository)."""
    prefix = review_path.strip("/")
    chosen = []
    for path in paths:
        if not path.lower().endswith(MARKDOWN_SUFFIXES):
            continue
        if prefix and not (path == prefix or path.startswith(prefix + "/")):
            continue
        chosen.append(path)
    return sorted(chosen)


class ContentsClient:
    """Fetches file bytes at a commit through GitHub's Contents API."""

    def __init__(
        self,
        api_url: str,
        token: str = "",
        *,
        session: requests.Session | None = None,
        timeout_s: float = 30.0,
        attempts: int = 3,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._api_url = api_url.rstrip("/")
        self._session = session or requests.Session()
        self._headers = {
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": "2022-11-28",
            "User-Agent": "hookledger",
        }
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        self._timeout_s = timeout_s
        self._attempts = max(1, attempts)
        self._sleep = sleep

    def fetch(self, repo: str, path: str, ref: str) -> bytes:
        """The file's bytes at `ref`; retries 429/5xx and timeouts a few times, then raises."""
        url = f"{self._api_url}/repos/{repo}/contents/{quote(path)}"
        where = f"{repo}:{path}@{ref[:12]}"
        last: GitHubError | None = None
        for attempt in range(self._attempts):
            if attempt:
                self._sleep(min(0.5 * 2 ** (attempt - 1), 4.0))
            try:
                response = self._session.get(
                    url, params={"ref": ref}, headers=self._headers, timeout=self._timeout_s
                )
            except requests.RequestException as exc:
                last = GitHubUnavailable(f"{where}: {type(exc).__name__}: {exc}")
                continue
            if response.status_code in _RETRY_STATUSES or _rate_limited(response):
                last = GitHubUnavailable(f"{where}: GitHub answered {response.status_code}")
                continue
            if response.status_code != 200:
                raise GitHubRejected(f"{where}: GitHub answered {response.status_code}")
            return _decode(response, where)
        assert last is not None
        raise last


def _rate_limited(response: requests.Response) -> bool:
    """GitHub answers a rate limit with 403 and says so in its headers: wait, do not give up."""
    return response.status_code == 403 and (
        response.headers.get("x-ratelimit-remaining") == "0" or "retry-after" in response.headers
    )


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
