"""What a check-run write may carry, checked as GitHub checks it; `validate` turns a
create or update body into the `Changes` `check_runs.CheckRuns` applies, or `Refused`.

Rules follow GitHub's REST "Check runs" pages (docs.github.com/rest/checks/runs:
"Create a check run", "Update a check run"):
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
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

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
