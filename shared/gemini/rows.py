"""A batch's requests and result rows as the Gemini Batch API writes them, inline or in files.

Sources (checked against both; where they differ the SDK wins):
- Batch API reference (ai.google.dev, "Batch Mode"): inline requests must keep the whole
  create request under 20 MB, else 400; an input file is JSONL, one
  `{"key": …, "request": GenerateContentRequest}` per line; a file-input batch's results
  are a JSONL file (`output.responsesFile`), one line per request, each with its `key`
  and a `response` (GenerateContentResponse) or an `error`/`status` (google.rpc.Status).
- google-genai 3.x: `batches.create(src="files/…")` sends `inputConfig.fileName`;
  `BatchJob.dest.file_name` carries `output.responsesFile`; `files.download(file=…,
  destination=<writable stream>)` streams the body in 1 MiB chunks into `write()`.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# The inline limit is "20 MB" in the docs; the decimal reading is the smaller one, and the
# estimate below is an upper bound on the JSON the SDK sends (json.dumps, ASCII-escaped).
MAX_INLINE_BYTES = 20_000_000
# The create request's envelope around the requests (model, display name, config).
_ENVELOPE_BYTES = 64 * 1024


@dataclass(frozen=True)
class Row:
    """One request's outcome: `key` is the request's metadata key (e.g. a file path)."""

    key: str
    text: str | None = None
    error: str | None = None


class MalformedRows(ValueError):
    """A results file line that is not a JSON object; the message names the line."""


def contents(prompt: str) -> list[dict[str, Any]]:
    """One user turn holding `prompt`, in the REST shape."""
    return [{"role": "user", "parts": [{"text": prompt}]}]


def inline_bytes(requests: Iterable[tuple[str, str]]) -> int:
    """An upper bound on the bytes of a create request carrying `requests` inline."""
    total = _ENVELOPE_BYTES
    for key, prompt in requests:
        item = {"request": {"contents": contents(prompt)}, "metadata": {"key": key}}
        total += len(json.dumps(item)) + 2  # ", " between items
    return total


def file_line(key: str, prompt: str) -> bytes:
    """One input-file line: `{"key": …, "request": {"contents": …}}` and a newline."""
    return (json.dumps({"key": key, "request": {"contents": contents(prompt)}}) + "\n").encode()


def row_from_result(index: int, item: Mapping[str, Any]) -> Row:
    """A Row from one results-file line (or an inlined response in REST shape).

    The key is the line's `key`, else its `metadata.key`, else its position.
    """
    metadata = item.get("metadata")
    key = item.get("key")
    if not isinstance(key, str) and isinstance(metadata, Mapping):
        key = metadata.get("key")
    key = key if isinstance(key, str) else str(index)
    failure = item.get("error", item.get("status"))
    if isinstance(failure, Mapping) and failure.get("code") not in (None, 0):
        return Row(key=key, error=str(failure.get("message") or f"code {failure.get('code')}"))
    response = item.get("response")
    if not isinstance(response, Mapping):
        return Row(key=key, error="the result line holds neither a response nor an error")
    return Row(key=key, text=response_text(response))


def response_text(response: Mapping[str, Any]) -> str:
    """The first candidate's text parts, joined ("" when there is none)."""
    candidates = response.get("candidates")
    if not isinstance(candidates, Sequence) or not candidates:
        return ""
    first = candidates[0] if isinstance(candidates[0], Mapping) else {}
    parts = (first.get("content") or {}).get("parts") or []
    return "".join(p.get("text") or "" for p in parts if isinstance(p, Mapping))


class RowReader(io.RawIOBase):
    """A writable stream that turns a JSONL results file into Rows as the bytes arrive.

    Memory holds one chunk and the line being assembled, never the file: each complete
    line is parsed and dropped, keeping only its Row. `rows()` closes the last line.
    """

    def __init__(self, file_name: str) -> None:
        super().__init__()
        self._file_name = file_name
        self._pending = bytearray()
        self._rows: list[Row] = []
        self._line = 0

    def writable(self) -> bool:
        return True

    def write(self, chunk: Any) -> int:
        data = bytes(chunk)
        start = 0
        while (end := data.find(b"\n", start)) != -1:
            self._pending += data[start:end]
            self._take_line()
            start = end + 1
        self._pending += data[start:]
        return len(data)

    def rows(self) -> tuple[Row, ...]:
        """Every row read; raises `MalformedRows` if a line was not a JSON object."""
        self._take_line()
        return tuple(self._rows)

    def _take_line(self) -> None:
        line, self._pending = bytes(self._pending), bytearray()
        self._line += 1
        if not line.strip():
            return
        try:
            item = json.loads(line)
        except ValueError:
            item = None
        if not isinstance(item, dict):
            raise MalformedRows(f"{self._file_name}: line {self._line} is not a JSON object")
        self._rows.append(row_from_result(len(self._rows), item))
