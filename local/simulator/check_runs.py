"""GitHub check runs: stored per commit, validated like GitHub (`check_run_rules.py`),
written on demand to fail.

Shapes follow GitHub's REST "Check runs" pages (docs.github.com/rest/checks/runs: "Get a
check run", "List check runs for a Git reference", "List check run annotations"): one
check suite per commit; runs list oldest first; `filter=latest` (the default) keeps the
newest run of each name, `filter=all` every run. What a create or update may carry is
checked by `check_run_rules.validate` (its names importable from here too).

Every write is logged on its run (`writes`: method, annotations carried, status and
conclusion after it) for tests and the chaos invariants. A write fault (`fail` writes
answer `status`, after applying the write when `after_apply`) reproduces GitHub having
done the write while the answer was lost.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from local.simulator.check_run_rules import (
    CONCLUSIONS,
    CREATE_DOCS,
    DOCS,
    LEVELS,
    MAX_ANNOTATION_BYTES,
    MAX_ANNOTATION_TITLE_CHARS,
    MAX_ANNOTATIONS_PER_REQUEST,
    MAX_OUTPUT_CHARS,
    STATUSES,
    UPDATE_DOCS,
    Changes,
    Refused,
    invalid,
    validate,
    validation_failed,
)
from local.simulator.github_objects import CREATED_AT, github_app
from shared.clock import Clock, system_clock

__all__ = [  # the write rules live in `check_run_rules`; importable from here as before
    "APP",
    "CONCLUSIONS",
    "CREATE_DOCS",
    "DOCS",
    "LEVELS",
    "MAX_ANNOTATIONS_PER_REQUEST",
    "MAX_ANNOTATION_BYTES",
    "MAX_ANNOTATION_TITLE_CHARS",
    "MAX_OUTPUT_CHARS",
    "STATUSES",
    "UPDATE_DOCS",
    "Changes",
    "CheckRuns",
    "Refused",
    "StoredRun",
    "WriteFault",
    "annotation_json",
    "invalid",
    "rfc3339",
    "run_json",
    "validate",
    "validation_failed",
]

# The App whose runs these are, as GitHub embeds it in a check run (`app`, a "GitHub
# app"); `github_objects.github_app` makes its owner a whole "Simple User".
APP: dict[str, Any] = {
    "id": 1,
    "slug": "hookledger",
    "node_id": "A_sim1",
    "client_id": "Iv23li0000000001",
    "name": "hookledger",
    "description": "Reviews pushed Markdown and reports it as a check run.",
    "owner": {"login": "hookledger", "id": 4242, "type": "Organization"},
    "external_url": "https://hookledger.example",
    "html_url": "https://github.com/apps/hookledger",
    "created_at": CREATED_AT,
    "updated_at": CREATED_AT,
    "permissions": {"checks": "write", "contents": "write", "metadata": "read"},
    "events": ["check_run", "check_suite", "push"],
}


@dataclass
class StoredRun:
    id: int
    owner: str
    repo: str
    head_sha: str
    name: str
    suite_id: int
    status: str
    conclusion: str | None
    external_id: str
    details_url: str | None
    started_at: datetime
    completed_at: datetime | None
    title: str | None = None
    summary: str | None = None
    text: str | None = None
    annotations: list[dict[str, Any]] = field(default_factory=list)
    writes: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class WriteFault:
    """The next `remaining` writes answer `status`; with `after_apply`, after applying."""

    remaining: int = 0
    status: int = 502
    after_apply: bool = False


def rfc3339(moment: datetime | None) -> str | None:
    return None if moment is None else moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def run_json(base_url: str, run: StoredRun) -> dict[str, Any]:
    """One check run as GitHub's REST API returns it."""
    api = f"{base_url}/repos/{run.owner}/{run.repo}"
    return {
        "id": run.id,
        "node_id": f"CR_sim{run.id}",
        "head_sha": run.head_sha,
        "external_id": run.external_id,
        "url": f"{api}/check-runs/{run.id}",
        "html_url": f"https://github.com/{run.owner}/{run.repo}/runs/{run.id}",
        "details_url": run.details_url,
        "status": run.status,
        "conclusion": run.conclusion,
        "started_at": rfc3339(run.started_at),
        "completed_at": rfc3339(run.completed_at),
        "output": {
            "title": run.title,
            "summary": run.summary,
            "text": run.text,
            "annotations_count": len(run.annotations),
            "annotations_url": f"{api}/check-runs/{run.id}/annotations",
        },
        "name": run.name,
        "check_suite": {"id": run.suite_id},
        "app": github_app(base_url, APP),
        "pull_requests": [],
    }


def annotation_json(base_url: str, run: StoredRun, item: dict[str, Any]) -> dict[str, Any]:
    """One annotation as "List check run annotations" returns it."""
    blob = f"https://github.com/{run.owner}/{run.repo}/blob/{run.head_sha}/{item['path']}"
    return {**item, "blob_href": blob}


class CheckRuns:
    """Thread-safe check-run store with an injectable write fault."""

    def __init__(self, clock: Clock = system_clock) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self._runs: dict[int, StoredRun] = {}
            self._suites: dict[tuple[str, str, str], int] = {}
            self._next_id = 5001
            self._fault = WriteFault()

    def set_fault(self, fail: int, status: int, after_apply: bool) -> None:
        with self._lock:
            self._fault = WriteFault(fail, status, after_apply)

    def fault(self) -> dict[str, Any]:
        with self._lock:
            f = self._fault
            return {"fail": f.remaining, "status": f.status, "after_apply": f.after_apply}

    def _take_fault(self) -> tuple[int | None, bool]:
        """(status to answer or None, whether to apply the write first); lock held."""
        fault = self._fault
        if fault.remaining <= 0:
            return None, True
        fault.remaining -= 1
        return fault.status, fault.after_apply

    def create(self, owner: str, repo: str, body: Mapping[str, Any]) -> tuple[StoredRun, int]:
        """(the run, the status to answer: 201 or a fault's); `Refused` for a bad body."""
        changes = validate(body, creating=True)
        with self._lock:
            status, apply = self._take_fault()
            now = self._clock()
            key = (owner, repo, body["head_sha"])
            suite = self._suites.setdefault(key, len(self._suites) + 7001)
            run = StoredRun(
                id=self._next_id,
                owner=owner,
                repo=repo,
                head_sha=body["head_sha"],
                name=changes.fields["name"],
                suite_id=suite,
                status="queued",
                conclusion=None,
                external_id=changes.fields.get("external_id", ""),
                details_url=changes.fields.get("details_url"),
                started_at=changes.fields.get("started_at") or now,
                completed_at=None,
            )
            if not apply:
                return run, status or 201
            self._next_id += 1
            self._apply(run, changes, "POST", now)
            self._runs[run.id] = run
            return _copy(run), status or 201

    def update(
        self, owner: str, repo: str, run_id: int, body: Mapping[str, Any]
    ) -> tuple[StoredRun | None, int]:
        """(the run or None when there is none, the status to answer)."""
        changes = validate(body, creating=False)
        with self._lock:
            run = self._runs.get(run_id)
            if run is None or (run.owner, run.repo) != (owner, repo):
                return None, 404
            status, apply = self._take_fault()
            if apply:
                self._apply(run, changes, "PATCH", self._clock())
            return _copy(run), status or 200

    def _apply(self, run: StoredRun, changes: Changes, method: str, now: datetime) -> None:
        fields = dict(changes.fields)
        if "status" in fields:
            if fields["status"] == "completed":
                fields["completed_at"] = fields.get("completed_at") or now
            else:  # back to queued/in_progress: a re-run of the same run
                fields["conclusion"], fields["completed_at"] = None, None
        for name, value in fields.items():
            setattr(run, name, value)
        if changes.output is not None:
            for name, value in changes.output.items():
                setattr(run, name, value)
        run.annotations.extend(changes.annotations)
        run.writes.append(
            {
                "method": method,
                "annotations": len(changes.annotations),
                "status": run.status,
                "conclusion": run.conclusion,
            }
        )

    def get(self, owner: str, repo: str, run_id: int) -> StoredRun | None:
        with self._lock:
            run = self._runs.get(run_id)
            if run is None or (run.owner, run.repo) != (owner, repo):
                return None
            return _copy(run)

    def for_ref(
        self,
        owner: str,
        repo: str,
        sha: str,
        name: str | None = None,
        status: str | None = None,
        latest: bool = True,
    ) -> list[StoredRun]:
        """The commit's runs, oldest first; `latest` keeps the newest of each name."""
        with self._lock:
            runs = [
                _copy(r)
                for r in self._runs.values()
                if (r.owner, r.repo, r.head_sha) == (owner, repo, sha)
                and (name is None or r.name == name)
                and (status is None or r.status == status)
            ]
        runs.sort(key=lambda r: r.id)
        if latest:
            newest = {r.name: r.id for r in runs}
            runs = [r for r in runs if newest[r.name] == r.id]
        return runs

    def every(self, repo: str | None = None, sha: str | None = None) -> list[StoredRun]:
        """Every run (of `owner/repo`, of commit `sha`), oldest first."""
        with self._lock:
            runs = [
                _copy(r)
                for r in self._runs.values()
                if (repo is None or f"{r.owner}/{r.repo}" == repo)
                and (sha is None or r.head_sha == sha)
            ]
        return sorted(runs, key=lambda r: r.id)


def _copy(run: StoredRun) -> StoredRun:
    """A snapshot the caller may read without the lock."""
    return StoredRun(
        **{
            **run.__dict__,
            "annotations": list(run.annotations),
            "writes": [dict(w) for w in run.writes],
        }
    )
