"""The REST API version a simulated GitHub request is answered as (GitHub's "API Versions").

A request names the version it is written for in `X-GitHub-Api-Version`; without it,
GitHub answers as `DEFAULT` (2022-11-28). A version GitHub does not support is refused
with 400 (`unsupported`, GitHub's words; how GitHub lists two supported versions in it
is our reading of the one-version message it documents); an installation token is looked
at first, so a bad one is still 401 (an App JWT is checked by its route, after). Every
other answer says the version it was served as (`X-GitHub-Api-Version-Selected`). GraphQL
has no REST version: `/graphql` never reads the header.

What a version changed, of what the simulator answers (GitHub's "Breaking changes"), is
written here once, by the shape it changes; each shape is made as it always was (what
webhooks carry too) and then `shaped` for the version the request asked for, and a
request body is `taken` as that version reads it:

- 2026-03-10: an issue and a pull request no longer carry the singular `assignee`
  (`assignees` only), nor is it taken when an issue is created or edited; a pull request
  no longer carries `merge_commit_sha`; a repository no longer carries `has_downloads`;
  an issue's `pull_request` no longer carries null URLs (`merged_at` of a pull request
  not merged is left out).
"""

from __future__ import annotations

from typing import Any

from flask import g

from local.simulator.github_refusal import GitHubRefusal

HEADER = "X-GitHub-Api-Version"
SELECTED = "X-GitHub-Api-Version-Selected"
DEFAULT = "2022-11-28"
# Every version GitHub supports now, newest first (as its 400 lists them).
SUPPORTED = ("2026-03-10", "2022-11-28")
DOCS = "https://docs.github.com/rest/about-the-rest-api/api-versions"

# Per version, the fields each shape no longer answers with, from that version on.
DROPPED: dict[str, dict[str, tuple[str, ...]]] = {
    "2026-03-10": {
        "issue": ("assignee",),
        "pull": ("assignee", "merge_commit_sha"),
        "repository": ("has_downloads",),
    },
}
# Per version, the fields of a shape left out when null, from that version on.
NEVER_NULL: dict[str, dict[str, tuple[str, ...]]] = {
    "2026-03-10": {"issue.pull_request": ("url", "html_url", "diff_url", "patch_url", "merged_at")},
}
# Per version, the request fields a write no longer takes (ignored, as GitHub ignores a
# field it does not know), from that version on.
NOT_TAKEN: dict[str, dict[str, tuple[str, ...]]] = {
    "2026-03-10": {"issue": ("assignee",)},
}


def unsupported(asked: str) -> GitHubRefusal:
    """GitHub's refusal of a version it does not support (the 400 of "API Versions")."""
    known = ", ".join(
        f'"{version}"' + (" (most recent)" if version == SUPPORTED[0] else "")
        for version in SUPPORTED
    )
    message = (
        f'The version you specified in the "X-GitHub-API-Version" request header, "{asked}", '
        f"is not a supported version. The following versions are currently supported: {known}."
    )
    return GitHubRefusal(400, message, documentation_url=DOCS)


def select(asked: str | None) -> str:
    """The version a request is answered as: the one it names, `DEFAULT` when it names
    none; `unsupported` (400) for any other."""
    if asked is None or not asked.strip():
        return DEFAULT
    if asked.strip() not in SUPPORTED:
        raise unsupported(asked.strip())
    return asked.strip()


def current() -> str:
    """The version this request was selected as (`DEFAULT` outside a REST request)."""
    return str(g.get("github_api_version") or DEFAULT)


def _since(table: dict[str, dict[str, tuple[str, ...]]], kind: str, version: str) -> set[str]:
    """The fields `table` names for `kind` in `version` and every earlier one."""
    return {
        name for since, kinds in table.items() if version >= since for name in kinds.get(kind, ())
    }


def shaped(kind: str, body: dict[str, Any], version: str | None = None) -> dict[str, Any]:
    """`body` (a shape of `kind`: "issue", "pull", "repository") as `version` (this
    request's, by default) answers it; a copy, the fields it no longer carries left out."""
    version = version or current()
    dropped = _since(DROPPED, kind, version)
    out = {key: value for key, value in body.items() if key not in dropped}
    nested = out.get("pull_request")
    if kind == "issue" and isinstance(nested, dict):
        never_null = _since(NEVER_NULL, "issue.pull_request", version)
        out["pull_request"] = {
            key: value for key, value in nested.items() if not (key in never_null and value is None)
        }
    if kind == "pull":
        for side in ("head", "base"):
            if isinstance(out.get(side), dict) and isinstance(out[side].get("repo"), dict):
                out[side] = {**out[side], "repo": shaped("repository", out[side]["repo"], version)}
    return out


def taken(kind: str, fields: dict[str, Any], version: str | None = None) -> dict[str, Any]:
    """A write's request `fields` as `version` (this request's) reads them: a copy without
    the fields it no longer takes."""
    ignored = _since(NOT_TAKEN, kind, version or current())
    return {key: value for key, value in fields.items() if key not in ignored}
