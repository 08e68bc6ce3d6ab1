"""A push's reviews as its check run (apps/review/checks.py): conclusion, title,
summary table, details and annotations, all within GitHub's limits."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from apps.review import checks
from shared.github.checks import MAX_ANNOTATIONS_PER_REQUEST, MAX_OUTPUT_CHARS

SHA = "6dcb09b5b57875f334f61aebed695e2e4193db5e"
DONE = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def finding(severity: str = "warning", line: int = 3, **changes: Any) -> dict[str, Any]:
    return {
        "start_line": line,
        "end_line": line + 1,
        "severity": severity,
        "title": "Unclear",
        "message": f"{severity} at {line}",
        **changes,
    }


def ok(path: str, *findings: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "path": path,
        "status": "ok",
        "text": f"Summary of {path}.",
        "findings": list(findings),
        **extra,
    }


def error(path: str, reason: str = "blocked: SAFETY") -> dict[str, Any]:
    return {"path": path, "status": "error", "error": reason}


CONCLUSIONS = [
    ("no findings", [ok("a.md"), ok("b.md")], None, "success"),
    ("notices only", [ok("a.md", finding("notice"))], None, "success"),
    (
        "free-text reviews (no findings field)",
        [{"path": "a.md", "status": "ok", "text": "t"}],
        None,
        "success",
    ),
    ("a warning", [ok("a.md", finding("notice")), ok("b.md", finding("warning"))], None, "neutral"),
    (
        "a failure",
        [ok("a.md", finding("warning")), ok("b.md", finding("failure"))],
        None,
        "failure",
    ),
    ("a failure beside an error", [ok("a.md", finding("failure")), error("b.md")], None, "failure"),
    ("one file errored, one clean", [ok("a.md"), error("b.md")], None, "neutral"),
    ("every file errored", [error("a.md"), error("b.md")], None, "action_required"),
    ("nothing to review", [], None, "neutral"),
    ("cancelled", [ok("a.md", finding("failure"))], "superseded by batches/b2", "cancelled"),
    (
        "an error row's findings do not count",
        [{**error("a.md"), "findings": [finding("failure")]}],
        None,
        "action_required",
    ),
]


@pytest.mark.parametrize(
    ("name", "reviews", "cancelled", "expected"), CONCLUSIONS, ids=[c[0] for c in CONCLUSIONS]
)
def test_the_conclusion_follows_the_documented_rules(name, reviews, cancelled, expected) -> None:
    assert checks.conclusion(reviews, cancelled) == expected, name


@pytest.mark.parametrize(
    ("name", "reviews", "cancelled", "expected"),
    [
        (
            "counts by severity",
            [ok("a.md", finding("failure"), finding("failure")), ok("b.md", finding("notice"))],
            None,
            "2 failures, 1 notice in 2 files",
        ),
        ("no findings", [ok("a.md")], None, "No findings in 1 file"),
        (
            "some not reviewed",
            [ok("a.md", finding()), error("b.md")],
            None,
            "1 warning in 1 file; 1 file not reviewed",
        ),
        ("none reviewed", [error("a.md"), error("b.md")], None, "Could not review 2 files"),
        ("nothing", [], None, "Nothing to review"),
        ("cancelled", [ok("a.md")], "superseded", "Review cancelled"),
    ],
)
def test_the_title_says_what_was_found(name, reviews, cancelled, expected) -> None:
    assert checks.title(reviews, cancelled) == expected, name


def test_the_summary_is_a_table_of_the_files() -> None:
    reviews = [
        ok("docs/b.md", finding("failure"), finding("warning"), finding("warning")),
        error("docs/c.md", "blocked:\nSAFETY | HIGH"),
        ok("docs/a.md", truncated=True),
        ok("docs/pipe|name.md", finding("notice")),
    ]

    text = checks.summary(SHA, reviews)

    assert text.splitlines() == [
        "hookledger reviewed `6dcb09b5b578`.",
        "",
        "| File | Status | Findings |",
        "| --- | --- | --- |",
        "| `docs/a.md` | reviewed (cut short) | 0 |",
        "| `docs/b.md` | reviewed | 3 (1 failure, 2 warnings) |",
        "| `docs/c.md` | not reviewed: blocked: SAFETY \\| HIGH | – |",
        "| `docs/pipe\\|name.md` | reviewed | 1 (1 notice) |",
    ]


def test_a_summary_of_many_files_stays_under_githubs_limit() -> None:
    reviews = [ok(f"docs/{'deep/' * 30}{n:05}.md", finding()) for n in range(2_000)]

    text = checks.summary(SHA, reviews)

    assert len(text) <= MAX_OUTPUT_CHARS
    assert text.endswith("more files.") and "| `docs/deep/" in text


def test_the_details_hold_each_reviewed_files_summary_clipped() -> None:
    reviews = [ok("b.md"), error("c.md"), {**ok("a.md"), "text": "x" * 5_000}]

    text = checks.details(reviews)

    assert text.startswith("### `a.md`\n\n" + "x" * checks.MAX_FILE_TEXT_CHARS + "…")
    assert "### `b.md`\n\nSummary of b.md." in text and "c.md" not in text
    huge = [{**ok(f"f{n}.md"), "text": "y" * 4_000} for n in range(40)]
    assert len(checks.details(huge)) <= MAX_OUTPUT_CHARS


def test_one_annotation_per_finding_by_path_and_line() -> None:
    reviews = [
        ok("b.md", finding("failure", 9), finding("notice", 2)),
        ok("a.md", finding("warning", 5, title="")),
        error("c.md"),
    ]

    notes = checks.annotations_of(reviews)

    assert [(n.path, n.start_line, n.end_line, n.level, n.message, n.title) for n in notes] == [
        ("a.md", 5, 6, "warning", "warning at 5", ""),
        ("b.md", 2, 3, "notice", "notice at 2", "Unclear"),
        ("b.md", 9, 10, "failure", "failure at 9", "Unclear"),
    ]
    assert notes[0].as_json() == {
        "path": "a.md",
        "start_line": 5,
        "end_line": 6,
        "annotation_level": "warning",
        "message": "warning at 5",
    }


def test_annotations_are_clipped_to_githubs_limits_and_bounded() -> None:
    long = finding(message="é" * 40_000, title="t" * 300, end_line=1)
    bad_line = finding(start_line="3")
    reviews = [ok("a.md", long, bad_line), ok("../escape.md", finding())]

    [note] = checks.annotations_of(reviews)

    assert note.problem() is None
    assert len(note.message.encode()) <= 64 * 1024 and len(note.title) == 255
    assert note.end_line == 3  # an end before the start is the start
    many = [ok("a.md", *[finding(line=n) for n in range(1, 700)])]
    assert len(checks.annotations_of(many)) == checks.MAX_ANNOTATIONS


def test_the_completed_state_is_one_github_accepts() -> None:
    reviews = [ok("a.md", *[finding(line=n) for n in range(1, 121)]), error("b.md")]

    state = checks.completed(
        SHA, reviews, external_id="sub-1", completed_at=DONE, details_url="http://console/op"
    )

    assert state.problem() is None
    assert (state.name, state.status, state.conclusion) == (
        "hookledger review",
        "completed",
        "neutral",
    )
    assert (len(state.annotations), state.completed_at, state.external_id) == (120, DONE, "sub-1")
    assert state.title == "120 warnings in 1 file; 1 file not reviewed"
    assert -(-len(state.annotations) // MAX_ANNOTATIONS_PER_REQUEST) == 3  # 50 + 50 + 20


def test_more_findings_than_a_run_annotates_are_counted_in_the_summary() -> None:
    reviews = [ok("a.md", *[finding(line=n) for n in range(1, 601)])]

    state = checks.completed(SHA, reviews, external_id="sub-1", completed_at=DONE)

    assert len(state.annotations) == checks.MAX_ANNOTATIONS
    assert "600 findings, 500 of them annotated here" in state.summary


def test_a_cancelled_review_has_no_annotations_and_says_why() -> None:
    state = checks.completed(
        SHA,
        [ok("a.md", finding("failure"))],
        external_id="s",
        completed_at=DONE,
        cancelled="superseded by a newer review of this commit",
    )

    assert (state.conclusion, state.annotations, state.problem()) == ("cancelled", (), None)
    assert "was cancelled: superseded by a newer review of this commit" in state.summary


def test_the_in_progress_state_lists_the_files() -> None:
    state = checks.in_progress(SHA, ["docs/b.md", "docs/a.md"], external_id="sub-1")

    assert state.problem() is None
    assert (state.status, state.conclusion, state.title) == (
        "in_progress",
        None,
        "Reviewing 2 files",
    )
    assert state.summary.endswith("- `docs/a.md`\n- `docs/b.md`")


def test_a_completed_states_annotations_carry_its_operations_mark() -> None:
    reviews = [ok("a.md", finding(line=1), finding(line=2))]

    state = checks.completed(
        SHA, reviews, external_id="sub-1", completed_at=DONE, operation="batches/r3"
    )
    [request] = [state.output(state.annotations)]

    assert state.mark == checks.annotation_mark("batches/r3") == "hookledger operation batches/r3"
    assert [a["raw_details"] for a in request["annotations"]] == [state.mark] * 2
    assert state.problem() is None
    # Each operation its own mark: a re-run's annotations never count as its push's.
    assert checks.annotation_mark("batches/b1") != state.mark
