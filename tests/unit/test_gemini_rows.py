"""Result rows from JSONL files, streamed in arbitrary chunks; the inline size estimate."""

from __future__ import annotations

import json

import pytest

from shared.gemini.rows import (
    MAX_INLINE_BYTES,
    MalformedRows,
    Row,
    RowReader,
    file_line,
    inline_bytes,
)


def response(text: str) -> dict:
    return {"candidates": [{"content": {"parts": [{"text": text}], "role": "model"}}]}


LINES = [
    {"key": "a.md", "response": response("fine")},
    {"key": "b.md", "error": {"code": 3, "message": "too long"}},
    {"metadata": {"key": "c.md"}, "response": response("from metadata")},
    {"response": response("no key")},
    {"key": "e.md", "status": {"code": 13}},
]
EXPECTED = (
    Row("a.md", text="fine"),
    Row("b.md", error="too long"),
    Row("c.md", text="from metadata"),
    Row("3", text="no key"),
    Row("e.md", error="code 13"),
)


@pytest.mark.parametrize("chunk", [1, 7, 64, 1 << 20])
def test_rows_are_the_same_whatever_the_chunking(chunk: int) -> None:
    data = "\n".join(json.dumps(line) for line in LINES).encode()  # no final newline
    reader = RowReader("files/r")
    for start in range(0, len(data), chunk):
        assert reader.write(data[start : start + chunk]) == len(data[start : start + chunk])

    assert reader.rows() == EXPECTED


def test_a_line_that_is_not_json_stops_the_read_naming_the_file_and_line() -> None:
    reader = RowReader("files/bad")
    reader.write(b'{"key": "a", "response": {}}\n\n')

    with pytest.raises(MalformedRows, match="files/bad: line 3"):
        reader.write(b"{not json\n")


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
