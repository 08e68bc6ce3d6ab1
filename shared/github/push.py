"""What a push changed: `parse_push` reads a `push` webhook payload into a `Push`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shared.github.installations import installation_of


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
