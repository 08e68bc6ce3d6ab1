"""Result rows from JSONL files, streamed in arbitrary chunks; what each response shape
becomes (text, truncated text, or an error with its reason); placing rows under their
requests by key, else by position; the inline size estimate."""

from __future__ import annotations

import json

import pytest

from shared.gemini.rows import (
    MAX_INLINE_BYTES,
    ROW_ERROR,
    UNREADABLE,
    Row,
    RowReader,
    file_line,
    inline_bytes,
    place,
    row_from_response,
)


def response(text: str) -> dict:
    return {"candidates": [{"content": {"parts": [{"text": text}], "role": "model"}}]}


def essentials(row: Row) -> tuple:
    return (row.key, row.text, row.error, row.outcome)


LINES = [
    {"key": "a.md", "response": response("fine")},
    {"key": "b.md", "error": {"code": 3, "message": "too long"}},
    {"metadata": {"key": "c.md"}, "response": response("from metadata")},
    {"response": response("no key")},
    {"key": "e.md", "status": {"code": 13}},
]
EXPECTED = (
    ("a.md", "fine", None, "succeeded"),
    ("b.md", None, "too long", "failed"),
    ("c.md", "from metadata", None, "succeeded"),
    ("", "no key", None, "succeeded"),
    ("e.md", None, "code 13", "failed"),
)


@pytest.mark.parametrize("chunk", [1, 7, 64, 1 << 20])
def test_rows_are_the_same_whatever_the_chunking(chunk: int) -> None:
    data = "\n".join(json.dumps(line) for line in LINES).encode()  # no final newline
    reader = RowReader("files/r")
    for start in range(0, len(data), chunk):
        assert reader.write(data[start : start + chunk]) == len(data[start : start + chunk])

    rows = reader.rows()
    assert tuple(essentials(row) for row in rows) == EXPECTED
    assert [row.line for row in rows] == [1, 2, 3, 4, 5]
    assert [row.index for row in rows] == [0, 1, 2, 3, 4]
    assert rows[1].origin == ROW_ERROR


def test_a_malformed_line_is_an_error_row_with_its_line_and_the_others_are_read() -> None:
    reader = RowReader("files/bad")
    reader.write(b'{"key": "a", "response": ' + json.dumps(response("A")).encode() + b"}\n\n")
    reader.write(b'{not json\n["a list"]\n{"key": "d", "response": ')
    reader.write(json.dumps(response("D")).encode() + b"}\n")

    rows = reader.rows()

    assert [essentials(row) for row in rows] == [
        ("a", "A", None, "succeeded"),
        ("", None, "files/bad: line 3 is not a JSON object", "failed"),
        ("", None, "files/bad: line 4 is not a JSON object", "failed"),
        ("d", "D", None, "succeeded"),
    ]
    assert [(row.line, row.index, row.origin) for row in rows[1:3]] == [
        (3, 1, UNREADABLE),
        (4, 2, UNREADABLE),
    ]


HARASSMENT_HIGH = {"category": "HARM_CATEGORY_HARASSMENT", "probability": "HIGH", "blocked": True}
NEGLIGIBLE = {"category": "HARM_CATEGORY_HATE_SPEECH", "probability": "NEGLIGIBLE"}


@pytest.mark.parametrize(
    ("name", "body", "expected"),
    [
        (
            "blocked prompt: promptFeedback.blockReason and no candidates",
            {"promptFeedback": {"blockReason": "SAFETY", "safetyRatings": [HARASSMENT_HIGH]}},
            (
                None,
                "prompt blocked: SAFETY; safety ratings: HARM_CATEGORY_HARASSMENT HIGH (blocked)",
                "blocked",
            ),
        ),
        (
            "safety stop: the candidate's finishReason SAFETY, its partial text dropped",
            {
                "candidates": [
                    {
                        "content": {"parts": [{"text": "half"}]},
                        "finishReason": "SAFETY",
                        "safetyRatings": [HARASSMENT_HIGH, NEGLIGIBLE],
                    }
                ]
            },
            (
                None,
                "answer withheld: finishReason SAFETY; "
                "safety ratings: HARM_CATEGORY_HARASSMENT HIGH (blocked)",
                "blocked",
            ),
        ),
        (
            "recitation stop",
            {"candidates": [{"finishReason": "RECITATION"}]},
            (None, "answer withheld: finishReason RECITATION", "blocked"),
        ),
        (
            "MAX_TOKENS with text keeps it, truncated",
            {
                "candidates": [
                    {"content": {"parts": [{"text": "partial"}]}, "finishReason": "MAX_TOKENS"}
                ]
            },
            ("partial", None, "truncated"),
        ),
        (
            "MAX_TOKENS with no text is an empty answer",
            {"candidates": [{"finishReason": "MAX_TOKENS"}]},
            (None, "empty answer: finishReason MAX_TOKENS", "failed"),
        ),
        (
            "no candidate and no block reason",
            {"usageMetadata": {"promptTokenCount": 3}},
            (None, "empty response: no candidate and no block reason", "failed"),
        ),
        (
            "STOP with no text",
            {"candidates": [{"content": {"parts": []}, "finishReason": "STOP"}]},
            (None, "empty answer: finishReason STOP", "failed"),
        ),
        (
            "another finish reason",
            {"candidates": [{"content": {"parts": [{"text": "x"}]}, "finishReason": "LANGUAGE"}]},
            (None, "answer stopped: finishReason LANGUAGE", "failed"),
        ),
        (
            "STOP with text",
            {
                "candidates": [
                    {"content": {"parts": [{"text": "a"}, {"text": "b"}]}, "finishReason": "STOP"}
                ]
            },
            ("ab", None, "succeeded"),
        ),
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_each_response_shape_becomes_text_truncated_text_or_an_error_with_its_reason(
    name: str, body: dict, expected: tuple
) -> None:
    row = row_from_response("docs/a.md", body)

    assert (row.text, row.error, row.outcome) == expected, name


def keyed(key: str, index: int, text: str = "t") -> Row:
    return Row(key, text=text, index=index)


def test_rows_match_by_echoed_key_else_by_request_order_else_they_are_unplaced_errors() -> None:
    keys = ["a.md", "b.md", "c.md"]
    rows = (
        keyed("c.md", 0, "C"),  # echoed key wins over position
        keyed("", 1, "B"),  # no key: the request at its position
        keyed("", 2, "third"),  # position 2 is c.md, already answered by key
        keyed("zzz.md", 3, "stray"),  # a key nobody asked for
        keyed("c.md", 4, "again"),  # a second answer for c.md
    )

    placed = place(rows, keys)

    assert [(row.key, row.text, row.unplaced) for row in placed[:2]] == [
        ("c.md", "C", False),
        ("b.md", "B", False),
    ]
    assert [row.unplaced for row in placed[2:]] == [True, True, True]
    assert [row.outcome for row in placed[2:]] == ["failed"] * 3
    assert "result 2: no key, and its position matches no unanswered request" in str(
        placed[2].error
    )
    assert "key 'zzz.md' names no request of this batch" in str(placed[3].error)
    assert "a second result for 'c.md'" in str(placed[4].error)
    assert "a.md" not in {row.key for row in placed if not row.unplaced}  # left for "no result"


def test_rows_without_keys_follow_request_order_and_a_results_file_line_names_its_line() -> None:
    rows = (
        Row("", text="one", index=0, line=1),
        Row("", error="files/r: line 2 is not a JSON object", origin=UNREADABLE, index=1, line=2),
        Row("", text="extra", index=2, line=3),
    )

    placed = place(rows, ["x.md", "y.md"])

    assert [(row.key, row.outcome) for row in placed[:2]] == [
        ("x.md", "succeeded"),
        ("y.md", "failed"),
    ]
    assert placed[1].error == "files/r: line 2 is not a JSON object"
    assert placed[2].unplaced and str(placed[2].error).startswith("line 3: no key")


def test_an_input_line_carries_the_key_and_the_request() -> None:
    line = json.loads(file_line("docs/a.md", "review this"))
    assert line == {
        "key": "docs/a.md",
        "request": {"contents": [{"role": "user", "parts": [{"text": "review this"}]}]},
    }


def test_the_inline_estimate_crosses_the_limit_before_the_requests_do() -> None:
    small = [("a", "x" * 1000)]
    large = [(str(i), "é" * 1_200_000) for i in range(3)]  # 3.6 M chars, ~21.6 MB escaped

    assert inline_bytes(small) < MAX_INLINE_BYTES
    assert inline_bytes(large) > MAX_INLINE_BYTES
