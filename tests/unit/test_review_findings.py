"""A file's review as structured findings: the reader of Gemini's JSON, the review row it
makes, the numbered prompt and the commit comment that shows the findings."""

from __future__ import annotations

import json
from typing import Any

import pytest

from apps.review.comments import comment_body
from apps.review.findings import (
    GENERATION_CONFIG,
    MAX_FINDINGS,
    MAX_MESSAGE_CHARS,
    parse_review,
)
from apps.review.kind import REVIEW
from apps.review.pipeline import prompt
from tests.unit.test_kinds import Writes, review_record


def answer(*findings: dict[str, Any], **extra: Any) -> str:
    return json.dumps({"summary": "Reads well.", "findings": list(findings), **extra})


def finding(**changes: Any) -> dict[str, Any]:
    return {
        "start_line": 3,
        "end_line": 5,
        "severity": "warning",
        "title": "Unclear",
        "message": "This sentence says two things.",
        **changes,
    }


def test_a_structured_answer_gives_its_summary_findings_and_conclusion() -> None:
    parsed = parse_review(answer(finding(), conclusion="neutral"))

    assert parsed is not None
    assert (parsed.summary, parsed.conclusion, parsed.dropped) == ("Reads well.", "neutral", 0)
    assert parsed.findings == [finding()]


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("free text", "- The intro is unclear.\n- Typo in line 3."),
        ("JSON cut short (MAX_TOKENS)", answer(finding())[:40]),
        ("a JSON list", json.dumps([finding()])),
        ("no summary", json.dumps({"findings": [finding()]})),
        ("a summary that is no string", json.dumps({"summary": 3, "findings": []})),
        ("empty", ""),
    ],
)
def test_an_answer_that_is_no_structured_review_is_none(name: str, text: str) -> None:
    assert parse_review(text) is None, name


@pytest.mark.parametrize(
    ("name", "given", "kept"),
    [
        ("severity in capitals", {"severity": "FAILURE"}, {"severity": "failure"}),
        ("error means failure", {"severity": "error"}, {"severity": "failure"}),
        ("info means notice", {"severity": "info"}, {"severity": "notice"}),
        ("an unknown severity is a warning", {"severity": "meh"}, {"severity": "warning"}),
        (
            "lines as strings",
            {"start_line": "7", "end_line": "8"},
            {"start_line": 7, "end_line": 8},
        ),
        ("lines as floats", {"start_line": 7.0, "end_line": 9.0}, {"start_line": 7, "end_line": 9}),
        ("an end before the start", {"start_line": 9, "end_line": 2}, {"end_line": 9}),
        ("no end line", {"end_line": None}, {"end_line": 3}),
        ("no title", {"title": None}, {"title": ""}),
        ("spaces around", {"message": "  m  ", "title": " t "}, {"message": "m", "title": "t"}),
    ],
)
def test_findings_are_read_tolerantly(name: str, given: dict[str, Any], kept: Any) -> None:
    parsed = parse_review(answer(finding(**given)))

    assert parsed is not None
    assert parsed.findings == [{**finding(), **given, **kept}], name


@pytest.mark.parametrize(
    ("name", "bad"),
    [
        ("no message", finding(message="")),
        ("no start line", finding(start_line=None)),
        ("line 0", finding(start_line=0)),
        ("a line that is no number", finding(start_line="three")),
        ("a boolean line", finding(start_line=True)),
        ("not an object", "a finding"),
    ],
)
def test_an_unusable_finding_is_dropped_and_counted(name: str, bad: Any) -> None:
    parsed = parse_review(answer(finding(), bad))

    assert parsed is not None
    assert (len(parsed.findings), parsed.dropped) == (1, 1), name


def test_a_fenced_answer_and_an_unknown_conclusion() -> None:
    parsed = parse_review("```json\n" + answer(conclusion="great") + "\n```")

    assert parsed is not None
    assert (parsed.summary, parsed.conclusion, parsed.findings) == ("Reads well.", None, [])


def test_findings_are_bounded_and_clipped() -> None:
    many = [finding(message="m" * (MAX_MESSAGE_CHARS + 5), title="t" * 300)] * (MAX_FINDINGS + 3)

    parsed = parse_review(answer(*many))

    assert parsed is not None
    assert (len(parsed.findings), parsed.dropped) == (MAX_FINDINGS, 3)
    assert len(parsed.findings[0]["message"]) == MAX_MESSAGE_CHARS
    assert len(parsed.findings[0]["title"]) == 255


def test_the_review_row_holds_the_summary_and_the_findings() -> None:
    from shared.gemini import BatchStatus, Row

    record = review_record({"paths": ["a.md", "b.md", "c.md"]})
    rows = (
        Row("a.md", text=answer(finding(), conclusion="neutral")),
        Row("b.md", text="Free text, as before."),
        Row("c.md", text=answer(finding(), "junk")),
    )
    writes = Writes()
    assert REVIEW.writeback is not None

    REVIEW.writeback(writes, record, BatchStatus("batches/b1", "JOB_STATE_SUCCEEDED", rows=rows))  # type: ignore[arg-type]

    assert writes.reviews["a.md"] == {
        "status": "ok",
        "text": "Reads well.",
        "findings": [finding()],
        "conclusion": "neutral",
    }
    assert writes.reviews["b.md"] == {"status": "ok", "text": "Free text, as before."}
    assert writes.reviews["c.md"]["findings_dropped"] == 1


def test_the_prompt_numbers_the_files_lines() -> None:
    text = prompt("docs/a.md", "# Title\n\nBody line.\n")

    assert text.endswith("File: docs/a.md\n\n1| # Title\n2| \n3| Body line.")
    assert "JSON" in text
    ten = prompt("b.md", "\n".join(f"l{n}" for n in range(1, 11)))
    assert " 1| l1\n" in ten and "\n10| l10" in ten


def test_the_generation_config_asks_for_json_with_the_summary_first() -> None:
    schema = GENERATION_CONFIG["responseSchema"]
    assert GENERATION_CONFIG["responseMimeType"] == "application/json"
    assert schema["propertyOrdering"][0] == "summary"
    item = schema["properties"]["findings"]["items"]
    assert item["properties"]["severity"]["enum"] == ["notice", "warning", "failure"]


def test_the_comment_shows_the_summary_and_each_finding() -> None:
    reviews = [
        {"path": "a.md", "text": "Reads well.", "findings": [finding(), finding(end_line=3)]},
        {"path": "b.md", "text": "Plain text review."},
        {"path": "c.md", "error": "blocked"},
    ]

    body = comment_body("6dcb09b5b57875f334f61aebed695e2e4193db5e", reviews)

    assert (
        "### `a.md`\n\nReads well.\n\n"
        "- **warning** lines 3-5: Unclear — This sentence says two things.\n"
        "- **warning** line 3: Unclear — This sentence says two things.\n"
    ) in body
    assert "### `b.md`\n\nPlain text review.\n" in body
    assert "### `c.md`\n\n_error_: blocked" in body
