"""Many files of one commit in one request: GitHub's GraphQL `Repository.object`, by alias.

    query($owner: String!, $name: String!, $f0: String!, $f1: String!) {
      repository(owner: $owner, name: $name) {
        f0: object(expression: $f0) {
          __typename ... on Blob { text isBinary isTruncated byteSize } }
        f1: object(expression: $f1) { ... }
      }
    }

Each `$fN` is "REF:PATH" (a rev-parse expression), passed as a variable so that no path is
ever spliced into the query text. What GitHub documents ("Rate limits and query limits for
the GraphQL API", the `Blob` object) and what this module relies on:

- one query without a connection costs 1 point of the GraphQL primary limit (5,000 an
  hour) and 1 point of the secondary per-endpoint limit (2,000 a minute), whatever the
  number of aliases: `FILES_PER_QUERY` files per request;
- `object` is null for a path not in the commit, a `Tree` for a folder, a `Commit` for a
  submodule; `Blob.text` is null for a binary blob and cut short (`isTruncated`) past
  GitHub's undocumented limit (512,000 bytes as observed): such a file is read again with
  the Contents API, which serves up to 100 MB;
- an error names what it concerns in `path` (`["repository"]`: the repository is not
  found or not accessible; `["repository", "f3"]`: that file) and says why in `type`
  (`NOT_FOUND`, `FORBIDDEN`, `RATE_LIMITED`, …) and `message`; an error without a `type`
  ("Something went wrong while executing your query…") is GitHub's own timeout.

The endpoint is `{GITHUB_API_URL}/graphql` on github.com (and the simulator), and
`https://HOST/api/graphql` for GitHub Enterprise Server, whose REST root is
`https://HOST/api/v3` (`graphql_url`). An installation token needs the same `contents: read`
it needs for the Contents API.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from shared.github.errors import GitHubRejected, GitHubUnavailable

# Files asked for in one query: a few hundred aliases pass GitHub's limits, but each answer
# can carry 512 kB of text per file, so one answer stays under ~25 MB and GitHub's 10 s.
FILES_PER_QUERY = 50
# GitHub refuses files over 100 MB in a push, and its blob and Contents APIs serve up to
# 100 MB: a larger blob (an LFS object stored as one) is refused before it is read.
MAX_FILE_BYTES = 100 * 1024 * 1024
# git's own test for a binary file: a NUL byte among the first 8,000 (`buffer_is_binary`).
BINARY_SNIFF_BYTES = 8000
BLOB_FIELDS = "__typename ... on Blob { text isBinary isTruncated byteSize }"
KIND_OF = {"Tree": "a folder", "Commit": "a submodule", "Tag": "a tag"}


@dataclass
class FetchedFiles:
    """What `ContentsClient.fetch_many` read: each asked path lands in exactly one map.

    `texts`: the file's text (UTF-8, undecodable bytes replaced); `refused`: a permanent
    reason (missing, a folder, binary, too large, no access), each naming its file;
    `unavailable`: a transient one (timeout, 5xx, rate limit: worth a retry), each naming
    its file; `requests`: the GraphQL queries and Contents reads made (a retry of one, as
    every GitHub call retries, is not counted again).
    """

    texts: dict[str, str] = field(default_factory=dict)
    refused: dict[str, GitHubRejected] = field(default_factory=dict)
    unavailable: dict[str, GitHubUnavailable] = field(default_factory=dict)
    requests: int = 0


def graphql_url(api_url: str) -> str:
    """GitHub's GraphQL endpoint beside the REST root `api_url` (GitHub's "Forming calls
    with GraphQL"): `…/api/v3` (Enterprise Server) → `…/api/graphql`, else `…/graphql`."""
    parts = urlsplit(api_url.rstrip("/"))
    path = parts.path
    path = path[: -len("/v3")] + "/graphql" if path.endswith("/api/v3") else path + "/graphql"
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def blob_query(count: int) -> str:
    """The query text for `count` files, aliases `f0`…; the expressions are variables."""
    names = ", ".join(f"$f{i}: String!" for i in range(count))
    aliases = " ".join(f"f{i}: object(expression: $f{i}) {{ {BLOB_FIELDS} }}" for i in range(count))
    return (
        f"query($owner: String!, $name: String!, {names}) "
        f"{{ repository(owner: $owner, name: $name) {{ {aliases} }} }}"
    )


def blob_variables(owner: str, name: str, ref: str, paths: Sequence[str]) -> dict[str, str]:
    expressions = {f"f{i}": f"{ref}:{path}" for i, path in enumerate(paths)}
    return {"owner": owner, "name": name, **expressions}


@dataclass(frozen=True)
class Blob:
    """One alias's answer: `text` when complete, else why not (`refusal`, or `truncated`:
    read it again through the Contents API)."""

    text: str | None = None
    refusal: str | None = None
    truncated: bool = False


def read_blob(answer: Any) -> Blob:
    """One `object(expression:)` answer (null, a Blob, or another git object)."""
    if answer is None:
        return Blob(refusal="not found at this commit")
    if not isinstance(answer, Mapping):
        return Blob(refusal=f"GitHub answered {type(answer).__name__} for the file")
    kind = answer.get("__typename")
    if kind != "Blob":
        return Blob(refusal=f"is {KIND_OF.get(str(kind), repr(kind))}, not a file")
    size = answer.get("byteSize")
    if isinstance(size, int) and size > MAX_FILE_BYTES:
        return Blob(refusal=f"is {size} bytes, over the {MAX_FILE_BYTES} GitHub serves")
    if answer.get("isBinary"):
        return Blob(refusal="is binary, not text")
    text = answer.get("text")
    if answer.get("isTruncated") or not isinstance(text, str):
        return Blob(truncated=True)
    return Blob(text=text)


def is_binary(data: bytes) -> bool:
    return b"\0" in data[:BINARY_SNIFF_BYTES]


@dataclass(frozen=True)
class ErrorSort:
    """A GraphQL answer's `errors`, sorted: per alias, for the whole repository, and
    whether any says the query could not run for now (a rate limit, GitHub's timeout)."""

    by_alias: dict[str, dict[str, Any]]
    repository: dict[str, Any] | None
    transient: dict[str, Any] | None
    refusing: dict[str, Any] | None


def sort_errors(errors: Any) -> ErrorSort:
    """Each error placed by its `path` and `type` (see the module docstring)."""
    by_alias: dict[str, dict[str, Any]] = {}
    repository = transient = refusing = None
    for error in errors if isinstance(errors, list) else []:
        if not isinstance(error, dict):
            continue
        kind, path = error.get("type"), error.get("path")
        where = path if isinstance(path, list) else []
        if kind == "RATE_LIMITED" or kind is None:
            transient = transient or error
        elif where[:1] == ["repository"] and len(where) >= 2 and isinstance(where[1], str):
            by_alias.setdefault(where[1], error)
        elif where[:1] == ["repository"]:
            repository = repository or error
        else:
            refusing = refusing or error
    return ErrorSort(by_alias, repository, transient, refusing)


def said(error: Mapping[str, Any]) -> str:
    """`TYPE: message` of one GraphQL error, on one line and at most 300 characters."""
    message = " ".join(str(error.get("message") or "no message").split())[:300]
    kind = error.get("type")
    return f"{kind}: {message}" if kind else message
