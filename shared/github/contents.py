"""File contents at a commit: `ContentsClient`, GitHub's Contents API."""

from __future__ import annotations

import base64
from urllib.parse import quote

import requests

from shared.github.errors import GitHubRejected
from shared.github.names import _repo_url, check_path
from shared.github.transport import _RestClient


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
