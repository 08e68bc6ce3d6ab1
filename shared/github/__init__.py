"""GitHub: what a push changed, file contents (Contents API), commit comments, check runs.

The modules, each one concept:

- `errors.py`: the error tree (`GitHubError`, `GitHubUnavailable`, `GitHubRejected`);
- `names.py`: every name that reaches a URL validated first (`check_repo`, `check_path`,
  `check_sha`), the `GITHUB_REPOSITORIES` allowlist (`repository_allowed`) and
  `select_paths`;
- `push.py`: a `push` payload read (`parse_push`, `Push`);
- `transport.py`: the REST transport every client shares (`_RestClient`), the REST API
  version its requests name (`API_VERSION`), the retry policy (`github_policy`,
  `github_rate_limits`), `Deadline`, `Ownership` and `OwnershipLost`;
- `contents.py`, `blobs.py`: `ContentsClient`, file bytes at a commit, and a push's files in
  few requests (`fetch_many`: GraphQL, `FetchedFiles`);
- `comments.py`: `CommentsClient`, one commit comment per marker (`PublishResult`);
- `check_state.py`, `check_runs.py`, `checks.py`: check runs (`CheckRunState`; the REST
  calls; `ChecksClient` and its exactly-once `publish`);
- `auth.py`, `app.py`, `installations.py`: credentials, the GitHub App, installations;
- `rest.py`: `GitHubApi`, any REST endpoint for apps.

Every public name this package defined before its split is re-exported here, so `from
shared.github import X` keeps working.
"""

from __future__ import annotations

from shared.github.blobs import FILES_PER_QUERY, FetchedFiles
from shared.github.comments import (
    COMMENTS_PER_PAGE,
    MAX_COMMENT_CHARS,
    MAX_COMMENT_PAGES,
    CommentsClient,
    PublishResult,
)
from shared.github.contents import RAW_MEDIA_TYPE, ContentsClient
from shared.github.errors import GitHubError, GitHubRejected, GitHubUnavailable
from shared.github.names import (
    MARKDOWN_SUFFIXES,
    MAX_PATH_BYTES,
    MAX_PATH_SEGMENT_BYTES,
    check_path,
    check_repo,
    check_sha,
    repository_allowed,
    select_paths,
)
from shared.github.names import _repo_url as _repo_url
from shared.github.push import Push, parse_push
from shared.github.transport import (
    API_VERSION,
    MAX_SAID_CHARS,
    Deadline,
    Ownership,
    OwnershipLost,
    github_policy,
    github_rate_limits,
)
from shared.github.transport import _RestClient as _RestClient

# `_repo_url` and `_RestClient` (imported as themselves, above) are private, but the
# clients beside this package imported them from it before its split: they stay here.
__all__ = [
    "API_VERSION",
    "COMMENTS_PER_PAGE",
    "FILES_PER_QUERY",
    "MARKDOWN_SUFFIXES",
    "MAX_COMMENT_CHARS",
    "MAX_COMMENT_PAGES",
    "MAX_PATH_BYTES",
    "MAX_PATH_SEGMENT_BYTES",
    "MAX_SAID_CHARS",
    "RAW_MEDIA_TYPE",
    "CommentsClient",
    "ContentsClient",
    "Deadline",
    "FetchedFiles",
    "GitHubError",
    "GitHubRejected",
    "GitHubUnavailable",
    "Ownership",
    "OwnershipLost",
    "PublishResult",
    "Push",
    "check_path",
    "check_repo",
    "check_sha",
    "github_policy",
    "github_rate_limits",
    "parse_push",
    "repository_allowed",
    "select_paths",
]
