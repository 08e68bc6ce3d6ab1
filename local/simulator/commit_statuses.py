"""GitHub commit statuses: stored per (repository, ref), with GitHub's combined view.

`POST /repos/{owner}/{repo}/statuses/{sha}` takes `state` (error, failure, pending,
success), `target_url`, `description` and `context` (default "default"). A ref's
statuses list newest first; the combined status keeps the newest of each context and is
`failure` when any of those is error or failure, `pending` when any is pending or there
are none, else `success` (GitHub's "Get the combined status for a specific reference").
A ref is kept as the caller spells it (a sha or a branch name): the simulator has no
branches to resolve.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from local.simulator.comments import USER
from local.simulator.github_objects import repository
from local.simulator.issue_records import Invalid
from local.simulator.issue_shapes import repo_api, stamp, user_json
from shared.clock import Clock, system_clock

STATES = ("error", "failure", "pending", "success")


@dataclass(frozen=True)
class Status:
    id: int
    owner: str
    repo: str
    sha: str
    state: str
    target_url: str | None
    description: str | None
    context: str
    creator: str
    created_at: datetime


class CommitStatuses:
    """Thread-safe store of every commit status."""

    def __init__(self, clock: Clock = system_clock) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self._statuses: list[Status] = []
            self._next_id = 8_000_001

    def create(self, owner: str, repo: str, sha: str, fields: dict[str, Any]) -> Status:
        """A new status as the simulator's bot; Invalid for a bad `state` or field."""
        state = fields.get("state")
        if state not in STATES:
            raise Invalid("Status", "state", "missing_field" if state is None else "invalid")
        texts = {k: fields.get(k) for k in ("target_url", "description", "context")}
        for name, value in texts.items():
            if value is not None and not isinstance(value, str):
                raise Invalid("Status", name, "invalid")
        with self._lock:
            made = Status(
                self._next_id,
                owner,
                repo,
                sha,
                state,
                texts["target_url"],
                texts["description"],
                texts["context"] or "default",
                USER["login"],
                self._clock(),
            )
            self._next_id += 1
            self._statuses.append(made)
            return made

    def for_ref(self, owner: str, repo: str, ref: str) -> list[Status]:
        """The ref's statuses, newest first."""
        key = (owner.lower(), repo.lower(), ref)
        with self._lock:
            found = [s for s in self._statuses if (s.owner.lower(), s.repo.lower(), s.sha) == key]
        return found[::-1]


def status_json(base_url: str, status: Status, *, simple: bool = False) -> dict[str, Any]:
    """A "Status" (`simple`: the "Simple Commit Status" a combined status lists)."""
    body: dict[str, Any] = {
        "url": f"{repo_api(base_url, status.owner, status.repo)}/statuses/{status.sha}",
        "avatar_url": f"https://avatars.githubusercontent.com/u/{USER['id']}?v=4",
        "id": status.id,
        "node_id": f"SC_sim{status.id}",
        "state": status.state,
        "description": status.description,
        "target_url": status.target_url,
        "context": status.context,
        "created_at": stamp(status.created_at),
        "updated_at": stamp(status.created_at),
    }
    if simple:
        return {**body, "required": False}
    return {**body, "creator": user_json(base_url, status.creator)}


def combined_json(
    base_url: str, owner: str, repo: str, ref: str, statuses: list[Status]
) -> dict[str, Any]:
    """A "Combined Commit Status" of `statuses` (newest first)."""
    latest: dict[str, Status] = {}
    for status in statuses:
        latest.setdefault(status.context, status)
    states = {s.state for s in latest.values()}
    if states & {"error", "failure"}:
        state = "failure"
    elif "pending" in states or not states:
        state = "pending"
    else:
        state = "success"
    api = repo_api(base_url, owner, repo)
    return {
        "state": state,
        "statuses": [status_json(base_url, s, simple=True) for s in latest.values()],
        "sha": ref,
        "total_count": len(latest),
        "repository": repository(base_url, f"{owner}/{repo}"),
        "commit_url": f"{api}/commits/{ref}",
        "url": f"{api}/commits/{ref}/status",
    }
