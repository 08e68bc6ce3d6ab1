"""Names that reach a URL, validated first (`check_repo`, `check_path`, `check_sha`): bad
input is refused (`GitHubRejected`) before anything is sent. `repository_allowed` is the
optional `GITHUB_REPOSITORIES` allowlist (fnmatch globs such as `octo-org/*`);
`select_paths` picks a push's files by folder and suffix.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from fnmatch import fnmatchcase
from urllib.parse import quote

from shared.github.errors import GitHubRejected

MARKDOWN_SUFFIXES = (".md", ".markdown")
_OWNER = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,38}")
_NAME = re.compile(r"[A-Za-z0-9._-]{1,100}")
_SHA = re.compile(r"[0-9a-fA-F]{4,64}")
# A file name no common filesystem can hold (Linux NAME_MAX, NTFS, APFS: 255 bytes), so no
# checkout has it; and Linux's PATH_MAX for the whole path. Enforced before any URL is built.
MAX_PATH_SEGMENT_BYTES = 255
MAX_PATH_BYTES = 4096


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
