"""A GitHub Contents API stand-in: files stored per (owner, repo, ref, path).

`GET /repos/{owner}/{repo}/contents/{path}?ref=SHA` answers as GitHub does for a file:
`type: "file"`, `encoding: "base64"`, `content` in base64 with a newline after every
60 characters (Ruby's `Base64.encode64`, which GitHub uses), `sha` the git blob sha,
plus `size`, `name`, `path` and the URL fields. A missing file is 404
`{"message": "Not Found", …}`. With `Accept: application/vnd.github.raw…` the raw
bytes come back instead.
"""

from __future__ import annotations

import base64
import hashlib
import threading
from dataclasses import dataclass
from typing import Any

DEFAULT_REF = "HEAD"
DOCS_URL = "https://docs.github.com/rest/repos/contents#get-repository-content"


def blob_sha(data: bytes) -> str:
    """The git blob id of `data` (what GitHub reports as a file's `sha`)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def encode64(data: bytes) -> str:
    """Base64 with a newline after every 60 characters, the last line included."""
    text = base64.b64encode(data).decode()
    return "".join(text[i : i + 60] + "\n" for i in range(0, len(text), 60))


def not_found() -> dict[str, str]:
    return {"message": "Not Found", "documentation_url": DOCS_URL, "status": "404"}


@dataclass
class PathFault:
    status: int
    remaining: int


class Contents:
    """Thread-safe file store plus per-path injected failures and a latency on every GET."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self._files: dict[tuple[str, str, str, str], bytes] = {}
            self._faults: dict[str, PathFault] = {}
            self.latency_ms = 0

    def put(self, owner: str, repo: str, path: str, ref: str | None, data: bytes) -> str:
        with self._lock:
            self._files[(owner, repo, ref or DEFAULT_REF, path.strip("/"))] = data
        return blob_sha(data)

    def get(self, owner: str, repo: str, path: str, ref: str | None) -> bytes | None:
        with self._lock:
            return self._files.get((owner, repo, ref or DEFAULT_REF, path.strip("/")))

    def write(
        self,
        owner: str,
        repo: str,
        path: str,
        refs: tuple[str, ...],
        data: bytes,
        expected_sha: str | None,
    ) -> tuple[bytes | None, bool]:
        """(the file at `refs[0]` before, whether `data` was written): written under every
        ref of `refs` when there was no file or `expected_sha` is its blob sha. The last
        ref is the new commit: it takes every file of `refs[0]`, as a commit's tree does."""
        path = path.strip("/")
        with self._lock:
            before = self._files.get((owner, repo, refs[0], path))
            if before is not None and expected_sha != blob_sha(before):
                return before, False
            for ref in refs:
                self._files[(owner, repo, ref, path)] = data
            for (o, r, at, other), held in list(self._files.items()):
                if (o, r, at) == (owner, repo, refs[0]):
                    self._files[(owner, repo, refs[-1], other)] = held
            return before, True

    def tree(self, owner: str, repo: str, ref: str) -> list[tuple[str, bytes]]:
        """Every file stored for `ref`, by path: the commit's tree as the Git Trees API lists it."""
        with self._lock:
            return sorted(
                (path, data)
                for (o, r, at, path), data in self._files.items()
                if (o, r, at) == (owner, repo, ref)
            )

    def add_fault(self, path: str, status: int, count: int) -> None:
        with self._lock:
            self._faults[path.strip("/")] = PathFault(status, count)

    def take_fault(self, path: str) -> int | None:
        """The status to fail this GET with, consuming one of the path's injected failures."""
        with self._lock:
            fault = self._faults.get(path.strip("/"))
            if fault is None or fault.remaining <= 0:
                return None
            fault.remaining -= 1
            return fault.status


# The Contents API's JSON form carries a file's content up to 1 MB.
MAX_JSON_CONTENT_BYTES = 1024 * 1024


def file_body(
    base_url: str, owner: str, repo: str, path: str, ref: str, data: bytes
) -> dict[str, Any]:
    path = path.strip("/")
    sha = blob_sha(data)
    api = f"{base_url}/repos/{owner}/{repo}"
    self_url = f"{api}/contents/{path}?ref={ref}"
    git_url = f"{api}/git/blobs/{sha}"
    html_url = f"https://github.com/{owner}/{repo}/blob/{ref}/{path}"
    # Over 1 MB GitHub gives no content in JSON: only the raw media type returns the bytes.
    inline = len(data) <= MAX_JSON_CONTENT_BYTES
    return {
        "type": "file",
        "encoding": "base64" if inline else "none",
        "size": len(data),
        "name": path.rsplit("/", 1)[-1],
        "path": path,
        "content": encode64(data) if inline else "",
        "sha": sha,
        "url": self_url,
        "git_url": git_url,
        "html_url": html_url,
        "download_url": f"https://raw.githubusercontent.com/{owner}/{repo}/{ref}/{path}",
        "_links": {"self": self_url, "git": git_url, "html": html_url},
    }


def tree_body(
    base_url: str,
    owner: str,
    repo: str,
    sha: str,
    files: list[tuple[str, bytes]],
    recursive: bool,
) -> dict[str, Any]:
    """A "Get a tree" answer: each file a `blob` (mode 100644, its blob sha and size), each
    folder holding one a `tree` (mode 040000); only the top level unless `recursive`."""
    api = f"{base_url}/repos/{owner}/{repo}/git"
    entries: dict[str, dict[str, Any]] = {}
    for path, data in files:
        parts = path.split("/")
        for depth in range(1, len(parts)):
            folder = "/".join(parts[:depth])
            folder_sha = hashlib.sha1(f"tree {sha} {folder}".encode()).hexdigest()  # noqa: S324
            entries.setdefault(
                folder,
                {"path": folder, "mode": "040000", "type": "tree", "sha": folder_sha,
                 "url": f"{api}/trees/{folder_sha}"},
            )  # fmt: skip
        blob = blob_sha(data)
        entries[path] = {
            "path": path,
            "mode": "100644",
            "type": "blob",
            "sha": blob,
            "size": len(data),
            "url": f"{api}/blobs/{blob}",
        }
    shown = [e for p, e in sorted(entries.items()) if recursive or "/" not in p]
    return {"sha": sha, "url": f"{api}/trees/{sha}", "tree": shown, "truncated": False}
