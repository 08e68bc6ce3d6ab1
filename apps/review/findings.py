"""A file's review as structured findings: what Gemini is asked for, and how its answer is read.

Gemini's structured output ("Structured output", ai.google.dev/gemini-api/docs/structured-output):
`generationConfig.responseMimeType` `application/json` with a `responseSchema` (an OpenAPI
3.0 subset: `type`, `properties`, `required`, `enum`, `items`, `description`,
`propertyOrdering`) makes the answer JSON of that shape. Without `propertyOrdering` the
properties come in alphabetical order: `summary` is put first, so that an answer cut short
(MAX_TOKENS) still opens with it. The same config goes into every request of a review
batch, inline (google-genai's `InlinedRequest.config`) or in the input file
(`request.generationConfig`).

The answer is read tolerantly (`parse_review`): a Markdown code fence around the JSON is
dropped; a finding's severity is lower-cased and a few common words map onto GitHub's
annotation levels (`error` → failure, `info` → notice); a finding without a message or a
line is skipped; lines are whole numbers from 1 to MAX_LINE, an end before the start is
the start. An answer that is not a JSON object with a string `summary` is no structured
review at all (None): the caller keeps it as text, as before structured output. JSON nested
past Python's recursion limit raises RecursionError from `parse_review`: the write-back
records it as that file's error review (apps/review/kind.py, `_review_fields`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

SEVERITIES = ("notice", "warning", "failure")  # GitHub's annotation levels
VERDICTS = ("success", "neutral", "failure")  # what the model may conclude for its file
# One file's findings stay well inside a Firestore document (1 MiB) and a check run's
# annotations: at most this many, each message and title clipped.
MAX_FINDINGS = 200
MAX_MESSAGE_CHARS = 2_000
MAX_TITLE_CHARS = 255  # GitHub's limit on an annotation's title
# No file has more lines; a bigger number (Firestore stores at most int64) is no line at all.
MAX_LINE = 2**31 - 1
_MAX_LINE_DIGITS = len(str(MAX_LINE))
_ALIASES = {
    "error": "failure",
    "fail": "failure",
    "critical": "failure",
    "warn": "warning",
    "info": "notice",
    "note": "notice",
    "suggestion": "notice",
}
_FENCE = re.compile(r"^```[a-zA-Z]*\s*\n(.*)\n```\s*$", re.DOTALL)

RESPONSE_SCHEMA: dict[str, Any] = {
    "type": "OBJECT",
    "properties": {
        "summary": {
            "type": "STRING",
            "description": "A short review of the whole file, in Markdown.",
        },
        "conclusion": {"type": "STRING", "enum": list(VERDICTS)},
        "findings": {
            "type": "ARRAY",
            "items": {
                "type": "OBJECT",
                "properties": {
                    "start_line": {"type": "INTEGER", "description": "First line, from 1."},
                    "end_line": {"type": "INTEGER", "description": "Last line, inclusive."},
                    "severity": {"type": "STRING", "enum": list(SEVERITIES)},
                    "title": {"type": "STRING", "description": "A few words."},
                    "message": {"type": "STRING", "description": "What is wrong and why."},
                },
                "required": ["start_line", "end_line", "severity", "title", "message"],
                "propertyOrdering": ["start_line", "end_line", "severity", "title", "message"],
            },
        },
    },
    "required": ["summary", "findings"],
    "propertyOrdering": ["summary", "conclusion", "findings"],
}
# The request's `generationConfig`, in the REST API's spelling.
GENERATION_CONFIG: dict[str, Any] = {
    "responseMimeType": "application/json",
    "responseSchema": RESPONSE_SCHEMA,
}


@dataclass(frozen=True)
class ParsedReview:
    """A structured answer: the `summary`, the model's own `conclusion` (one of VERDICTS,
    or None), the `findings` as stored (`start_line`, `end_line`, `severity`, `title`,
    `message`), and how many were `dropped` (unusable, or past MAX_FINDINGS)."""

    summary: str
    conclusion: str | None = None
    findings: list[dict[str, Any]] = field(default_factory=list)
    dropped: int = 0


def parse_review(text: str) -> ParsedReview | None:
    """The structured review in `text`, or None when `text` is not one (keep it as text).

    JSON nested past Python's recursion limit raises RecursionError (`json.loads` does):
    the answer is neither a review nor text worth keeping, so the caller fails that file."""
    stripped = text.strip()
    fenced = _FENCE.match(stripped)
    if fenced:
        stripped = fenced.group(1).strip()
    try:
        answer = json.loads(stripped)
    except ValueError:
        return None
    if not isinstance(answer, dict) or not isinstance(answer.get("summary"), str):
        return None
    raw = answer.get("findings")
    items = raw if isinstance(raw, list) else []
    findings = [f for f in (_finding(item) for item in items) if f is not None]
    kept = findings[:MAX_FINDINGS]
    verdict = answer.get("conclusion")
    return ParsedReview(
        summary=answer["summary"],
        conclusion=verdict if verdict in VERDICTS else None,
        findings=kept,
        dropped=len(items) - len(kept),
    )


def _finding(item: Any) -> dict[str, Any] | None:
    if not isinstance(item, dict):
        return None
    message = item.get("message")
    start = _line(item.get("start_line"))
    if not isinstance(message, str) or not message.strip() or start is None:
        return None
    end = _line(item.get("end_line"))
    title = item.get("title")
    return {
        "start_line": start,
        "end_line": end if end is not None and end >= start else start,
        "severity": _severity(item.get("severity")),
        "title": _clip(title.strip(), MAX_TITLE_CHARS) if isinstance(title, str) else "",
        "message": _clip(message.strip(), MAX_MESSAGE_CHARS),
    }


def _line(value: Any) -> int | None:
    """A line number in 1..MAX_LINE: an int, an integral float or a string of ASCII digits;
    else None (never raises: `"²".isdigit()` is true, yet `int("²")` raises)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        value = value.strip()
        # Short ASCII digits only: int() refuses other digits, and strings over 4,300 of them.
        if not (value.isascii() and value.isdigit() and len(value) <= _MAX_LINE_DIGITS):
            return None
        value = int(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value if isinstance(value, int) and 1 <= value <= MAX_LINE else None


def _severity(value: Any) -> str:
    """One of SEVERITIES; an unknown word is a warning (shown, never failing the check)."""
    word = value.strip().lower() if isinstance(value, str) else ""
    word = _ALIASES.get(word, word)
    return word if word in SEVERITIES else "warning"


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
