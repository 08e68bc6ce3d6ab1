"""What a check run should show and what GitHub answered: `CheckRunState` (with its
`Annotation`s, checked against GitHub's limits before anything is sent), `CheckRun` (a run
as GitHub answered it) and `PublishedCheckRun` (what `ChecksClient.publish` did).

The fields and limits are those of GitHub REST "Check runs" (`checks.py`'s docstring).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from shared.github.errors import GitHubRejected, GitHubUnavailable
from shared.github.names import check_path

STATUSES = ("queued", "in_progress", "completed")
CONCLUSIONS = (
    "action_required",
    "cancelled",
    "failure",
    "neutral",
    "skipped",
    "success",
    "timed_out",
)
ANNOTATION_LEVELS = ("notice", "warning", "failure")
MAX_OUTPUT_CHARS = 65535  # output.summary and output.text
MAX_ANNOTATION_TITLE_CHARS = 255
MAX_ANNOTATION_BYTES = 64 * 1024  # annotation message ("The maximum size is 64 KB")


@dataclass(frozen=True)
class Annotation:
    """One annotation: lines `start_line`..`end_line` (1-based) of `path`, at `level`."""

    path: str
    start_line: int
    end_line: int
    level: str
    message: str
    title: str = ""

    def as_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "path": self.path,
            "start_line": self.start_line,
            "end_line": self.end_line,
            "annotation_level": self.level,
            "message": self.message,
        }
        if self.title:
            body["title"] = self.title
        return body

    def problem(self) -> str | None:
        """Why GitHub would refuse this annotation (422), or None."""
        try:
            check_path(self.path)
        except GitHubRejected as exc:
            return str(exc)
        lines = (self.start_line, self.end_line)
        if not all(isinstance(n, int) and not isinstance(n, bool) for n in lines):
            return f"{self.path}: lines must be whole numbers"
        if self.start_line < 1 or self.end_line < self.start_line:
            return f"{self.path}: lines {self.start_line}-{self.end_line} are not a range from 1"
        if self.level not in ANNOTATION_LEVELS:
            return f"{self.path}: annotation level {self.level!r} is not one of {ANNOTATION_LEVELS}"
        if not self.message:
            return f"{self.path}:{self.start_line}: an annotation needs a message"
        if len(self.message.encode("utf-8")) > MAX_ANNOTATION_BYTES:
            return f"{self.path}:{self.start_line}: message over {MAX_ANNOTATION_BYTES} bytes"
        if len(self.title) > MAX_ANNOTATION_TITLE_CHARS:
            return f"{self.path}:{self.start_line}: title over {MAX_ANNOTATION_TITLE_CHARS} chars"
        return None


@dataclass(frozen=True)
class CheckRunState:
    """What one check run should show: its identity (`name`, `external_id`), status and
    conclusion, and its output. `publish` makes GitHub's run match it.

    `conclusion` goes with `status` "completed" and only with it; `completed_at` (aware) is
    sent only then (GitHub stamps the time itself when it is None). `mark` is the
    `raw_details` every annotation of this state carries: `publish` counts the run's
    annotations carrying it to know which of this state's GitHub holds already (module
    docstring); it names the state's author, the same on every retry.
    """

    name: str
    external_id: str
    status: str = "in_progress"
    conclusion: str | None = None
    title: str = ""
    summary: str = ""
    text: str = ""
    annotations: tuple[Annotation, ...] = ()
    details_url: str | None = None
    completed_at: datetime | None = None
    mark: str = ""

    def problem(self) -> str | None:
        """Why GitHub would refuse this state (422), or None."""
        if not self.name or not self.external_id:
            return "a check run needs a name and an external_id"
        if self.status not in STATUSES:
            return f"status {self.status!r} is not one of {STATUSES}"
        completed = self.status == "completed"
        if completed and self.conclusion not in CONCLUSIONS:
            return f"a completed run needs a conclusion from {CONCLUSIONS}, not {self.conclusion!r}"
        if not completed and (self.conclusion is not None or self.completed_at is not None):
            return f"a conclusion or completed_at needs status completed, not {self.status!r}"
        if self.completed_at is not None and self.completed_at.tzinfo is None:
            return "completed_at must carry a time zone"
        if not self.title or not self.summary:
            return "the output needs a title and a summary"
        for field, value in (("summary", self.summary), ("text", self.text)):
            if len(value) > MAX_OUTPUT_CHARS:
                return f"output.{field} is {len(value)} characters, over {MAX_OUTPUT_CHARS}"
        if len(self.mark.encode("utf-8")) > MAX_ANNOTATION_BYTES:
            return f"the mark (an annotation's raw_details) is over {MAX_ANNOTATION_BYTES} bytes"
        for annotation in self.annotations:
            reason = annotation.problem()
            if reason is not None:
                return reason
        return None

    def output(self, annotations: Sequence[Annotation] = ()) -> dict[str, Any]:
        """The `output` object of one request, carrying `annotations` (at most 50), each
        marked with `mark` as its `raw_details`."""
        body: dict[str, Any] = {"title": self.title, "summary": self.summary}
        if self.text:
            body["text"] = self.text
        if annotations:
            marked = {"raw_details": self.mark} if self.mark else {}
            body["annotations"] = [{**a.as_json(), **marked} for a in annotations]
        return body


@dataclass(frozen=True)
class CheckRun:
    """A check run as GitHub answered it (the fields hookledger reads)."""

    id: int
    name: str
    head_sha: str
    external_id: str | None
    status: str
    conclusion: str | None
    annotations_count: int
    html_url: str | None = None
    details_url: str | None = None


@dataclass(frozen=True)
class PublishedCheckRun:
    """What `publish` did: the run (`check_run_id`), whether this call created it, the
    annotations and write requests this call sent, and newer runs carrying the same
    `external_id` (`duplicates`), each completed as a pointer to the one kept."""

    check_run_id: int
    created: bool
    annotations_sent: int
    writes: int
    duplicates: tuple[int, ...] = ()


def _check_run(body: Any, where: str) -> CheckRun:
    """A `CheckRun` from one JSON object; `GitHubUnavailable` when it has no usable id."""
    if not isinstance(body, Mapping):
        raise GitHubUnavailable(f"{where}: GitHub answered {type(body).__name__}, not a check run")
    try:
        run_id = int(body["id"])
    except (KeyError, TypeError, ValueError):
        # The run may exist; the next `publish` finds it by its external_id.
        raise GitHubUnavailable(f"{where}: GitHub's answer carries no check run id") from None
    output = body.get("output") if isinstance(body.get("output"), Mapping) else {}
    count = output.get("annotations_count") if isinstance(output, Mapping) else 0
    return CheckRun(
        id=run_id,
        name=str(body.get("name") or ""),
        head_sha=str(body.get("head_sha") or ""),
        external_id=body.get("external_id") if isinstance(body.get("external_id"), str) else None,
        status=str(body.get("status") or ""),
        conclusion=body.get("conclusion") if isinstance(body.get("conclusion"), str) else None,
        annotations_count=count if isinstance(count, int) and count > 0 else 0,
        html_url=body.get("html_url") if isinstance(body.get("html_url"), str) else None,
        details_url=body.get("details_url") if isinstance(body.get("details_url"), str) else None,
    )
