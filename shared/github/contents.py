"""File contents at a commit: `ContentsClient`, one file through GitHub's Contents API
(`fetch`) or a push's files in as few requests as GitHub allows (`fetch_many`: GraphQL,
shared/github/blobs.py, with the Contents API for a file GraphQL cuts short)."""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable, Sequence
from urllib.parse import quote

import requests

from shared.github.blobs import (
    FILES_PER_QUERY,
    FetchedFiles,
    blob_query,
    blob_variables,
    graphql_url,
    is_binary,
    read_blob,
    said,
    sort_errors,
)
from shared.github.errors import GitHubRejected, GitHubUnavailable
from shared.github.names import _repo_url, check_path, check_repo
from shared.github.transport import _RestClient, response_json

# A ref GitHub's rev-parse expression "REF:PATH" can carry: a commit id or a branch/tag name
# (no ':' that would end it early, no whitespace, no '..').
_REF = re.compile(r"[A-Za-z0-9._/-]{1,255}")


class ContentsClient(_RestClient):
    """Fetches file bytes at a commit through GitHub's Contents API."""

    def fetch(self, repo: str, path: str, ref: str, *, installation_id: int | None = None) -> bytes:
        """The file's bytes at `ref`; retries 429/5xx and timeouts a few times, then raises.

        A malformed `repo` or `path` is `GitHubRejected` before anything is sent.
        `installation_id`: the App installation whose token reads it (None: GITHUB_TOKEN).
        """
        where = _where(repo, path, ref)
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

    def fetch_many(
        self,
        repo: str,
        paths: Iterable[str],
        ref: str,
        *,
        installation_id: int | None = None,
    ) -> FetchedFiles:
        """The text of each of `paths` at `ref`, in ceil(n / FILES_PER_QUERY) GraphQL
        queries, plus one Contents read per file GraphQL cuts short (over ~500 kB).

        Never raises for a file: each path lands in `texts`, `refused` or `unavailable`
        (`FetchedFiles`), its error naming it. Refused before any request: a malformed repo
        or ref (every path), a path `check_path` refuses (that path). A transient failure
        (timeout, 5xx, a rate limit, retried as `fetch` retries) makes the files of that
        query and every later one `unavailable`: nothing more is sent.
        `installation_id`: the App installation whose token reads them (None: GITHUB_TOKEN).
        """
        fetched = FetchedFiles()
        wanted = list(dict.fromkeys(paths))  # each path once, in the caller's order
        try:
            owner, name = check_repo(repo)
            if not isinstance(ref, str) or not _REF.fullmatch(ref) or ".." in ref:
                raise GitHubRejected(f"ref {ref!r} is not a commit id or branch name")
        except GitHubRejected as exc:
            for path in wanted:
                fetched.refused[path] = GitHubRejected(f"{_where(repo, path, ref)}: {exc}")
            return fetched
        readable = []
        for path in wanted:
            try:
                readable.append(check_path(path))
            except GitHubRejected as exc:  # its message names the path (up to 4 kB) already
                fetched.refused[path] = exc
        for start in range(0, len(readable), FILES_PER_QUERY):
            chunk = readable[start : start + FILES_PER_QUERY]
            if fetched.unavailable:  # GitHub is failing or limiting us: ask nothing more
                for path in chunk:
                    fetched.unavailable[path] = GitHubUnavailable(
                        f"{_where(repo, path, ref)}: not asked: an earlier request failed"
                    )
                continue
            self._query_chunk(fetched, (owner, name), repo, chunk, ref, installation_id)
        return fetched

    def _query_chunk(
        self,
        fetched: FetchedFiles,
        owner_name: tuple[str, str],
        repo: str,
        paths: Sequence[str],
        ref: str,
        installation_id: int | None,
    ) -> None:
        """One GraphQL query for `paths`; every path's outcome lands in `fetched`."""
        where = f"GraphQL query of {len(paths)} file(s)"
        body = {
            "query": blob_query(len(paths)),
            "variables": blob_variables(*owner_name, ref, paths),
        }
        fetched.requests += 1
        try:
            response = self._send(
                "POST",
                graphql_url(self._api_url),
                where,
                json=body,
                accept="application/json",
                installation_id=installation_id,
            )
            answer = response_json(response, where)
        except (GitHubRejected, GitHubUnavailable) as exc:
            _each(fetched, repo, paths, ref, exc)
            return
        if not isinstance(answer, dict):
            _each(fetched, repo, paths, ref, GitHubUnavailable(f"{where}: not a GraphQL answer"))
            return
        errors = sort_errors(answer.get("errors"))
        if errors.transient is not None:  # RATE_LIMITED, or GitHub's own timeout
            asked = self._asked_wait(response.headers)
            failed = GitHubUnavailable(
                f"{where}: {said(errors.transient)}",
                status=response.status_code,
                retry_after_s=asked,
            )
            _each(fetched, repo, paths, ref, failed)
            return
        whole = errors.repository or errors.refusing
        if whole is not None:  # the repository is missing or out of reach, or the query refused
            _each(fetched, repo, paths, ref, GitHubRejected(f"{where}: {said(whole)}"))
            return
        data = answer.get("data")
        found = data.get("repository") if isinstance(data, dict) else None
        if not isinstance(found, dict):
            _each(fetched, repo, paths, ref, GitHubRejected(f"{where}: no repository {repo}"))
            return
        for index, path in enumerate(paths):
            alias = f"f{index}"
            here = _where(repo, path, ref)
            if alias in errors.by_alias:
                fetched.refused[path] = GitHubRejected(f"{here}: {said(errors.by_alias[alias])}")
                continue
            blob = read_blob(found.get(alias))
            if blob.text is not None:
                fetched.texts[path] = blob.text
            elif blob.refusal is not None:
                fetched.refused[path] = GitHubRejected(f"{here}: {blob.refusal}")
            else:
                self._read_whole(fetched, repo, path, ref, installation_id)

    def _read_whole(
        self, fetched: FetchedFiles, repo: str, path: str, ref: str, installation_id: int | None
    ) -> None:
        """A file GraphQL cut short, read through the Contents API (up to 100 MB)."""
        fetched.requests += 1
        try:
            data = self.fetch(repo, path, ref, installation_id=installation_id)
        except GitHubRejected as exc:
            fetched.refused[path] = exc
            return
        except GitHubUnavailable as exc:
            fetched.unavailable[path] = exc
            return
        if is_binary(data):
            fetched.refused[path] = GitHubRejected(
                f"{_where(repo, path, ref)}: is binary, not text"
            )
            return
        fetched.texts[path] = data.decode("utf-8", errors="replace")


def _where(repo: str, path: str, ref: str) -> str:
    """How every message names a file: `owner/name:path@ref` (ref cut to 12 characters)."""
    return f"{repo}:{path}@{str(ref)[:12]}"


def _each(
    fetched: FetchedFiles,
    repo: str,
    paths: Sequence[str],
    ref: str,
    error: GitHubRejected | GitHubUnavailable,
) -> None:
    """`error` for every one of `paths`, each message naming its own file."""
    for path in paths:
        message = f"{_where(repo, path, ref)}: {error}"
        if isinstance(error, GitHubUnavailable):
            fetched.unavailable[path] = GitHubUnavailable(
                message, status=error.status, retry_after_s=error.retry_after_s
            )
        else:
            fetched.refused[path] = GitHubRejected(message, status=error.status)


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
