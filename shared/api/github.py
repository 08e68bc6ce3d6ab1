"""GitHub for apps: parsing and checking what events carry, and the REST clients.

    from shared.api import github

    push = github.parse_push(event.json())          # repo, sha, ref, changed paths, …
    github.check_repo(push.repo); github.check_sha(push.sha)
    paths = github.select_paths(push.changed, "docs", (".md",))
    text = ctx.github.fetch(push.repo, paths[0], push.sha, installation_id=push.installation_id)
    many = ctx.github.fetch_many(push.repo, paths, push.sha)  # FetchedFiles: few requests
    ctx.github_api.request("POST", f"/repos/{push.repo}/issues", json={...})

Errors: `GitHubRejected` (a 4xx, or input refused before sending: permanent) and
`GitHubUnavailable` (timeouts, 429, 5xx, rate limits: transient), both in the error tree.
Check runs (`ChecksClient`, `CheckRunState`, `Annotation`) and commit comments
(`CommentsClient`: one marked comment per commit) are GitHub features any app may publish.
"""

from __future__ import annotations

from shared.github import (
    MARKDOWN_SUFFIXES,
    CommentsClient,
    ContentsClient,
    Deadline,
    FetchedFiles,
    GitHubError,
    GitHubRejected,
    GitHubUnavailable,
    Ownership,
    PublishResult,
    Push,
    check_path,
    check_repo,
    check_sha,
    parse_push,
    repository_allowed,
    select_paths,
)
from shared.github.checks import (
    MAX_ANNOTATION_BYTES,
    MAX_ANNOTATION_TITLE_CHARS,
    MAX_OUTPUT_CHARS,
    Annotation,
    CheckRun,
    CheckRunState,
    ChecksClient,
    PublishedCheckRun,
)
from shared.github.installations import installation_of
from shared.github.operations import InvalidCall, Operation, UnknownOperation, operation
from shared.github.rest import GitHubApi, GitHubResponse

__all__ = [
    "MARKDOWN_SUFFIXES",
    "MAX_ANNOTATION_BYTES",
    "MAX_ANNOTATION_TITLE_CHARS",
    "MAX_OUTPUT_CHARS",
    "Annotation",
    "CheckRun",
    "CheckRunState",
    "ChecksClient",
    "CommentsClient",
    "ContentsClient",
    "Deadline",
    "FetchedFiles",
    "GitHubApi",
    "GitHubError",
    "GitHubRejected",
    "GitHubResponse",
    "GitHubUnavailable",
    "InvalidCall",
    "Operation",
    "Ownership",
    "PublishResult",
    "PublishedCheckRun",
    "Push",
    "UnknownOperation",
    "check_path",
    "check_repo",
    "check_sha",
    "installation_of",
    "operation",
    "parse_push",
    "repository_allowed",
    "select_paths",
]
