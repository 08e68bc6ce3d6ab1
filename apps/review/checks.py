"""A push's reviews as its check run: conclusion, title, summary, details and annotations.

Pure functions from the push's `reviews` rows (as `ledger.reviews.reviews_for_push` gives
them: `path`, `status`, `text` or `error`, `findings`) to a `CheckRunState` that
`ChecksClient.publish` makes GitHub show (shared/github/checks.py). Nothing here does I/O or
reads a clock: `completed_at` is passed in.

Conclusion, the first rule that applies:

    cancelled        the review will not finish: its batch was cancelled or superseded by
                     a newer review of the commit (`cancelled` names why)
    failure          some finding has severity `failure` (a factual error, broken content),
                     or Gemini refused the push's request (a file's review is `refused`)
    action_required  there were files and none could be reviewed (every row an error):
                     someone must look; GitHub sends them to `details_url` (the console)
    neutral          a finding has severity `warning`, some files could not be reviewed
                     while others were, or there was nothing to review: worth a look, but
                     GitHub does not count `neutral` against a required check
    success          every file reviewed, no finding above `notice`

A `notice` never changes the conclusion: it is a style remark. The model's own per-file
`conclusion` is kept in the row but not used, so the conclusion always agrees with the
annotations shown.

Output: the title counts findings by severity; the summary is a table of the files (file,
status, findings) under GitHub's 65535 characters; the text holds each file's own summary;
one annotation per finding (path, lines, level, message, title), clipped to GitHub's
limits, at most `MAX_ANNOTATIONS` per run (the rest are counted in the summary), each
marked with the operation that publishes it (`annotation_mark`, its `raw_details`): one run
carries every generation of a re-run review, and GitHub never removes an annotation, so the
mark is how a publish tells its own annotations from the others'.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from shared.api.github import (
    MAX_ANNOTATION_BYTES,
    MAX_ANNOTATION_TITLE_CHARS,
    MAX_OUTPUT_CHARS,
    Annotation,
    CheckRunState,
)

CHECK_NAME = "hookledger review"
MARK_PREFIX = "hookledger operation "
# 10 requests of 50: a publish stays a handful of requests inside an outbox lease.
MAX_ANNOTATIONS = 500
MAX_FILE_TEXT_CHARS = 4_000  # one file's summary in the details
MAX_CELL_CHARS = 120  # an error message in the table
_LEVELS = ("failure", "warning", "notice")  # most severe first
_ROOM = 200  # kept free under the limit for the closing line


def conclusion(reviews: Sequence[Mapping[str, Any]], cancelled: str | None = None) -> str:
    """The run's conclusion (module docstring)."""
    if cancelled is not None:
        return "cancelled"
    counts = severity_counts(reviews)
    if counts["failure"] or any(review.get("refused") for review in reviews):
        return "failure"
    errored = sum(1 for review in reviews if _errored(review))
    if reviews and errored == len(reviews):
        return "action_required"
    if counts["warning"] or errored or not reviews:
        return "neutral"
    return "success"


def severity_counts(reviews: Iterable[Mapping[str, Any]]) -> Counter[str]:
    """Findings of every reviewed file, counted by severity."""
    return Counter(str(f.get("severity")) for review in reviews for f in _findings(review))


def title(reviews: Sequence[Mapping[str, Any]], cancelled: str | None = None) -> str:
    """One line: what was found, in how many files ("2 failures, 1 warning in 3 files")."""
    if cancelled is not None:
        return "Review cancelled"
    files = len(reviews)
    errored = sum(1 for review in reviews if _errored(review))
    if not files:
        return "Nothing to review"
    if any(review.get("refused") for review in reviews):
        return "Gemini refused the review's request (see the files below)"
    if errored == files:
        return f"Could not review {_plural(files, 'file')}"
    counts = severity_counts(reviews)
    found = [_plural(counts[level], level) for level in _LEVELS if counts[level]]
    said = ", ".join(found) if found else "No findings"
    said += f" in {_plural(files - errored, 'file')}"
    if errored:
        said += f"; {_plural(errored, 'file')} not reviewed"
    return said


def summary(
    sha: str,
    reviews: Sequence[Mapping[str, Any]],
    cancelled: str | None = None,
    annotated: int | None = None,
) -> str:
    """Markdown: a line on the commit, then a table of the files (file, status, findings),
    within GitHub's 65535 characters (files past it are counted, not listed). `annotated`:
    how many findings the run annotates, when fewer than were found."""
    head = [f"hookledger reviewed `{sha[:12]}`."]
    if cancelled is not None:
        head = [f"The review of `{sha[:12]}` was cancelled: {_cell(cancelled)}."]
    total = sum(len(_findings(review)) for review in reviews)
    if annotated is not None and annotated < total:
        head.append(
            f"{_plural(total, 'finding')}, {annotated} of them annotated here "
            f"(at most {MAX_ANNOTATIONS} a run)."
        )
    lines = [*head, "", "| File | Status | Findings |", "| --- | --- | --- |"]
    used = sum(len(line) + 1 for line in lines)
    ordered = sorted(reviews, key=lambda r: str(r.get("path", "")))
    for index, review in enumerate(ordered):
        row = f"| {_path_cell(review)} | {_status_cell(review)} | {_findings_cell(review)} |"
        if used + len(row) + 1 > MAX_OUTPUT_CHARS - _ROOM:
            lines.append("")
            lines.append(f"… and {_plural(len(ordered) - index, 'more file')}.")
            break
        lines.append(row)
        used += len(row) + 1
    return "\n".join(lines)


def details(reviews: Sequence[Mapping[str, Any]]) -> str:
    """Markdown: each reviewed file's own summary (clipped), within 65535 characters."""
    parts: list[str] = []
    used = 0
    for review in sorted(reviews, key=lambda r: str(r.get("path", ""))):
        if _errored(review):
            continue
        text = str(review.get("text") or "").strip()
        if len(text) > MAX_FILE_TEXT_CHARS:
            text = text[:MAX_FILE_TEXT_CHARS] + "…"
        part = f"### {_path_cell(review)}\n\n{text}\n"
        if used + len(part) > MAX_OUTPUT_CHARS - _ROOM:
            parts.append("… (more files: see the console)\n")
            break
        parts.append(part)
        used += len(part) + 1
    return "\n".join(parts)


def annotations_of(
    reviews: Sequence[Mapping[str, Any]], limit: int = MAX_ANNOTATIONS
) -> tuple[Annotation, ...]:
    """One annotation per finding, by path then line, clipped to GitHub's limits; at most
    `limit`. A finding GitHub would refuse whatever the clipping (a path it refuses, a
    line that is no line) is left out."""
    found: list[tuple[str, int, int, Annotation]] = []
    for review in reviews:
        path = str(review.get("path") or "")
        for index, finding in enumerate(_findings(review)):
            note = _annotation(path, finding)
            if note is not None and note.problem() is None:
                found.append((path, note.start_line, index, note))
    found.sort(key=lambda item: item[:3])
    return tuple(note for *_, note in found[:limit])


def annotation_mark(operation: str) -> str:
    """The `raw_details` of every annotation `operation` publishes (`CheckRunState.mark`)."""
    return f"{MARK_PREFIX}{operation}"


def in_progress(
    sha: str, paths: Sequence[str], *, external_id: str, details_url: str | None = None
) -> CheckRunState:
    """The run while the review is under way: `in_progress`, the files it covers."""
    listed = "\n".join(f"- {_path_text(p)}" for p in sorted(paths)[:200])
    more = f"\n- … and {len(paths) - 200} more" if len(paths) > 200 else ""
    return CheckRunState(
        name=CHECK_NAME,
        external_id=external_id,
        status="in_progress",
        title=f"Reviewing {_plural(len(paths), 'file')}",
        summary=f"hookledger is reviewing `{sha[:12]}`:\n\n{listed}{more}"[:MAX_OUTPUT_CHARS],
        details_url=details_url,
    )


def completed(
    sha: str,
    reviews: Sequence[Mapping[str, Any]],
    *,
    external_id: str,
    completed_at: datetime,
    details_url: str | None = None,
    cancelled: str | None = None,
    operation: str = "",
) -> CheckRunState:
    """The run once the review settled (or was cancelled: `cancelled` says why); its
    annotations marked as `operation`'s (`annotation_mark`), when it names one."""
    notes = () if cancelled is not None else annotations_of(reviews)
    return CheckRunState(
        name=CHECK_NAME,
        external_id=external_id,
        status="completed",
        conclusion=conclusion(reviews, cancelled),
        title=title(reviews, cancelled),
        summary=summary(sha, reviews, cancelled, annotated=len(notes)),
        text=details(reviews) if cancelled is None else "",
        annotations=notes,
        details_url=details_url,
        completed_at=completed_at,
        mark=annotation_mark(operation) if operation else "",
    )


def _errored(review: Mapping[str, Any]) -> bool:
    return review.get("status") == "error" or review.get("error") is not None


def _findings(review: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    if _errored(review):
        return []
    found = review.get("findings")
    return [f for f in found if isinstance(f, Mapping)] if isinstance(found, list) else []


def _annotation(path: str, finding: Mapping[str, Any]) -> Annotation | None:
    start, end = finding.get("start_line"), finding.get("end_line")
    if not isinstance(start, int) or isinstance(start, bool):
        return None
    if not isinstance(end, int) or isinstance(end, bool) or end < start:
        end = start
    level = finding.get("severity")
    return Annotation(
        path=path,
        start_line=start,
        end_line=end,
        level=level if level in _LEVELS else "warning",
        message=_clip_bytes(str(finding.get("message") or "(no message)"), MAX_ANNOTATION_BYTES),
        title=_clip(str(finding.get("title") or ""), MAX_ANNOTATION_TITLE_CHARS),
    )


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _clip_bytes(text: str, limit: int) -> str:
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    return data[: limit - 3].decode("utf-8", errors="ignore") + "…"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _cell(text: str, limit: int = MAX_CELL_CHARS) -> str:
    """`text` fit for a table cell: one line, `|` escaped, clipped."""
    flat = " ".join(text.split()).replace("|", "\\|")
    return _clip(flat, limit)


def _path_text(path: str) -> str:
    """A path in Markdown: a code span, or escaped text when it holds a backtick."""
    flat = " ".join(path.split())
    return f"`{flat}`" if "`" not in flat else flat.replace("|", "\\|")


def _path_cell(review: Mapping[str, Any]) -> str:
    return _path_text(str(review.get("path") or "?")).replace("|", "\\|")


def _status_cell(review: Mapping[str, Any]) -> str:
    if _errored(review):
        return f"not reviewed: {_cell(str(review.get('error') or 'error'))}"
    return "reviewed (cut short)" if review.get("truncated") else "reviewed"


def _findings_cell(review: Mapping[str, Any]) -> str:
    if _errored(review):
        return "–"
    counts = Counter(str(f.get("severity")) for f in _findings(review))
    total = sum(counts.values())
    if not total:
        return "0"
    parts = [_plural(counts[level], level) for level in _LEVELS if counts[level]]
    return f"{total} ({', '.join(parts)})"
