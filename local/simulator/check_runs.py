"""GitHub check runs: stored per commit, validated like GitHub, written on demand to fail.

Shapes and rules follow GitHub's REST "Check runs" pages (docs.github.com/rest/checks/runs:
"Create a check run", "Update a check run", "Get a check run", "List check runs for a Git
reference", "List check run annotations"):
- create needs `name` and `head_sha`; `status` is `queued`, `in_progress` or `completed`
  (GitHub Actions' `waiting`, `requested`, `pending` are refused here: an App cannot set
  them); `conclusion` is one of `CONCLUSIONS` (`stale` is GitHub's own) and "Required if you
  provide `completed_at` or a `status` of `completed`"; providing one sets the status to
  `completed`. Setting `queued`/`in_progress` again clears the conclusion (a re-run).
- `output` needs `title` and `summary` on create, `summary` on update; summary and text hold
  at most 65535 characters; `annotations` are appended on every write, at most 50 a
  request ("No more than 50 items are allowed; N were supplied.", the 422 message GitHub
  sends, as integrators have quoted it); each needs `path`, `start_line`, `end_line`,
  `annotation_level` (`notice`, `warning`, `failure`) and `message` (64 KB at most), a
  `title` at most 255 characters, columns only on one line; a bad one is GitHub's
  `Validation Failed` with `{"resource": "CheckRun", "code": "invalid", "field":
  "annotations"}`. Other 422 messages are in GitHub's `Invalid request.` form.
- one check suite per commit; runs list oldest first; `filter=latest` (the default) keeps
  the newest run of each name, `filter=all` every run.

Every write is logged on its run (`writes`: method, annotations carried, status and
conclusion after it) for tests and the chaos invariants. A write fault (`fail` writes
answer `status`, after applying the write when `after_apply`) reproduces GitHub having
done the write while the answer was lost.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from local.simulator.github_objects import CREATED_AT, github_app
from shared.clock import Clock, system_clock

DOCS = "https://docs.github.com/rest/checks/runs"
CREATE_DOCS = f"{DOCS}#create-a-check-run"
UPDATE_DOCS = f"{DOCS}#update-a-check-run"
STATUSES = ("queued", "in_progress", "completed")
CONCLUSIONS = (
    "action_required",
    "cancelled",
    "failure",
    "neutral",
    "success",
    "skipped",
    "timed_out",
)
LEVELS = ("notice", "warning", "failure")
MAX_ANNOTATIONS_PER_REQUEST = 50
MAX_OUTPUT_CHARS = 65535
MAX_ANNOTATION_TITLE_CHARS = 255
MAX_ANNOTATION_BYTES = 64 * 1024
_SHA = re.compile(r"[0-9a-fA-F]{4,64}")
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


class Refused(Exception):
    """A write GitHub would answer 422; `body` is GitHub's error body."""

    def __init__(self, body: dict[str, Any]) -> None:
        super().__init__(body.get("message"))
        self.body = body


def invalid(detail: str, docs: str = CREATE_DOCS) -> Refused:
    return Refused({"message": f"Invalid request.\n\n{detail}", "documentation_url": docs})


def validation_failed(field_name: str, docs: str = CREATE_DOCS) -> Refused:
    return Refused(
        {
            "message": "Validation Failed",
            "errors": [{"resource": "CheckRun", "code": "invalid", "field": field_name}],
            "documentation_url": docs,
        }
    )


def rfc3339(moment: datetime | None) -> str | None:
    return None if moment is None else moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _not_one_of(name: str, value: Any, allowed: tuple[str, ...], docs: str) -> Refused:
    listed = ", ".join(f'"{a}"' for a in allowed)
    return invalid(f"For 'properties/{name}', {value!r} is not one of [{listed}].", docs)


def _annotation(item: Any, docs: str) -> dict[str, Any]:
    """One annotation as GitHub stores it, or `Refused` (Validation Failed, annotations)."""
    if not isinstance(item, Mapping):
        raise validation_failed("annotations", docs)
    path, message = item.get("path"), item.get("message")
    start, end = item.get("start_line"), item.get("end_line")
    level, title = item.get("annotation_level"), item.get("title")
    raw_details = item.get("raw_details")
    lines_ok = all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in (start, end))
    ok = (
        isinstance(path, str)
        and bool(path)
        and isinstance(message, str)
        and bool(message)
        and len(message.encode("utf-8")) <= MAX_ANNOTATION_BYTES
        and lines_ok
        and level in LEVELS
        and (title is None or (isinstance(title, str) and len(title) <= MAX_ANNOTATION_TITLE_CHARS))
        and (
            raw_details is None
            or (
                isinstance(raw_details, str)
                and len(raw_details.encode("utf-8")) <= MAX_ANNOTATION_BYTES
            )
        )
    )
    columns = (item.get("start_column"), item.get("end_column"))
    if ok and any(c is not None for c in columns) and start != end:
        ok = False  # "Annotations only support start_column and end_column on the same line"
    if not ok:
        raise validation_failed("annotations", docs)
    return {
        "path": path,
        "start_line": start,
        "end_line": end,
        "start_column": columns[0],
        "end_column": columns[1],
        "annotation_level": level,
        "title": title,
        "message": message,
        "raw_details": raw_details,
    }


@dataclass(frozen=True)
class Changes:
    """A validated write: the fields it sets and the annotations it appends."""

    fields: dict[str, Any]
    output: dict[str, Any] | None
    annotations: list[dict[str, Any]]


def validate(body: Mapping[str, Any], *, creating: bool) -> Changes:
    """The changes a create (`creating`) or update body asks for, or `Refused`."""
    docs = CREATE_DOCS if creating else UPDATE_DOCS
    fields: dict[str, Any] = {}
    if creating:
        for required in ("name", "head_sha"):
            if not isinstance(body.get(required), str) or not body[required]:
                raise invalid(f'"{required}" wasn\'t supplied.', docs)
        if not _SHA.fullmatch(body["head_sha"]):
            raise invalid(f"No commit found for SHA: {body['head_sha']}", docs)
        fields["name"] = body["name"]
    elif "name" in body:
        if not isinstance(body["name"], str) or not body["name"]:
            raise invalid('"name" must be a non-empty string.', docs)
        fields["name"] = body["name"]
    for text_field in ("external_id", "details_url"):
        if body.get(text_field) is not None:
            if not isinstance(body[text_field], str):
                raise invalid(f"For 'properties/{text_field}', it must be a string.", docs)
            fields[text_field] = body[text_field]
    status, conclusion = body.get("status"), body.get("conclusion")
    if status is not None and status not in STATUSES:
        raise _not_one_of("status", status, STATUSES, docs)
    if conclusion is not None and conclusion not in CONCLUSIONS:
        raise _not_one_of("conclusion", conclusion, CONCLUSIONS, docs)
    completed_at = _timestamp(body.get("completed_at"), "completed_at", docs)
    if (status == "completed" or completed_at is not None) and conclusion is None:
        raise invalid('"conclusion" wasn\'t supplied.', docs)
    if conclusion is not None:
        status = "completed"  # "Providing conclusion will automatically set the status"
    if status is not None:
        fields["status"] = status
        fields["conclusion"] = conclusion
        fields["completed_at"] = completed_at
    started_at = _timestamp(body.get("started_at"), "started_at", docs)
    if started_at is not None:
        fields["started_at"] = started_at
    output, annotations = _output(body.get("output"), creating, docs)
    return Changes(fields, output, annotations)


def _timestamp(value: Any, name: str, docs: str) -> datetime | None:
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        raise invalid(f"For 'properties/{name}', {value!r} is not a timestamp.", docs) from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _output(value: Any, creating: bool, docs: str) -> tuple[dict[str, Any] | None, list[Any]]:
    if value is None:
        return None, []
    if not isinstance(value, Mapping):
        raise invalid("For 'properties/output', it must be an object.", docs)
    required = ("title", "summary") if creating else ("summary",)
    for name in required:
        if not isinstance(value.get(name), str) or not value[name]:
            raise invalid(f'"{name}" wasn\'t supplied.', docs)
    for name in ("summary", "text"):
        text = value.get(name)
        if isinstance(text, str) and len(text) > MAX_OUTPUT_CHARS:
            raise invalid(
                f"For 'properties/{name}', the value is {len(text)} characters; "
                f"only {MAX_OUTPUT_CHARS} are allowed.",
                docs,
            )
    raw = value.get("annotations") or []
    if not isinstance(raw, list):
        raise validation_failed("annotations", docs)
    if len(raw) > MAX_ANNOTATIONS_PER_REQUEST:
        raise invalid(
            f"No more than {MAX_ANNOTATIONS_PER_REQUEST} items are allowed; "
            f"{len(raw)} were supplied.",
            docs,
        )
    annotations = [_annotation(item, docs) for item in raw]
    output = {k: value[k] for k in ("title", "summary", "text") if isinstance(value.get(k), str)}
    return output, annotations


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
