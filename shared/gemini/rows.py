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
from dataclasses import dataclass, replace
from typing import Any

# The inline limit is "20 MB" in the docs; the decimal reading is the smaller one, and the
# estimate below is an upper bound on the JSON the SDK sends (json.dumps, ASCII-escaped).
MAX_INLINE_BYTES = 20_000_000
# The create request's envelope around the requests (model, display name, config).
_ENVELOPE_BYTES = 64 * 1024


SUCCEEDED, FAILED, BLOCKED, TRUNCATED = "succeeded", "failed", "blocked", "truncated"
OUTCOMES = (SUCCEEDED, FAILED, BLOCKED, TRUNCATED)

# Where a row came from: Gemini answered (`response`, whatever the answer held), Gemini
# failed the request (`error`, counted in `batchStats.failedRequestCount`), or a results-file
# line hookledger could not read (`unreadable`).
RESPONSE, ROW_ERROR, UNREADABLE = "response", "error", "unreadable"

# finishReason values (google-genai `types.FinishReason`) that mean Gemini withheld the
# answer for a policy reason: the row is `blocked`, its partial text (if any) is dropped.
WITHHELD = frozenset(
    {
        "SAFETY",
        "RECITATION",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "IMAGE_SAFETY",
        "IMAGE_PROHIBITED_CONTENT",
        "IMAGE_RECITATION",
        "MODEL_ARMOR",
    }
)
# A natural end: the text is the whole answer (an absent finishReason is read the same way).
_COMPLETE = frozenset({"STOP", "FINISH_REASON_UNSPECIFIED", ""})
_NOTABLE = frozenset({"MEDIUM", "HIGH"})


@dataclass(frozen=True)
class Row:
    """One request's outcome: `text`, or an `error` saying why there is none.

    `key` is the request's metadata key (e.g. a file path) as Gemini echoed it, "" when it
    echoed none (`place` then matches the row by `index`). `outcome` is one of OUTCOMES:
    `truncated` rows keep their (partial) text; `blocked` and `failed` rows carry the
    reason in `error` (block reason, finish reason, safety ratings, or the row's own error).
    """

    key: str
    text: str | None = None
    error: str | None = None
    blocked: bool = False
    truncated: bool = False
    finish_reason: str | None = None
    block_reason: str | None = None
    origin: str = RESPONSE
    index: int | None = None  # position among the batch's results, 0-based
    line: int | None = None  # results-file line, 1-based
    unplaced: bool = False  # `place` found no request it answers

    @property
    def outcome(self) -> str:
        if self.error is not None:
            return BLOCKED if self.blocked else FAILED
        return TRUNCATED if self.truncated else SUCCEEDED


def contents(prompt: str) -> list[dict[str, Any]]:
    """One user turn holding `prompt`, in the REST shape."""
    return [{"role": "user", "parts": [{"text": prompt}]}]


def request_body(prompt: str, generation_config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One GenerateContentRequest in the REST shape: the prompt, and `generationConfig`
    (REST spelling, e.g. `responseMimeType`) when given."""
    body: dict[str, Any] = {"contents": contents(prompt)}
    if generation_config:
        body["generationConfig"] = dict(generation_config)
    return body


def inline_bytes(
    requests: Iterable[tuple[str, str]], generation_config: Mapping[str, Any] | None = None
) -> int:
    """An upper bound on the bytes of a create request carrying `requests` inline."""
    total = _ENVELOPE_BYTES
    for key, prompt in requests:
        item = {"request": request_body(prompt, generation_config), "metadata": {"key": key}}
        total += len(json.dumps(item)) + 2  # ", " between items
    return total


def file_line(key: str, prompt: str, generation_config: Mapping[str, Any] | None = None) -> bytes:
    """One input-file line: `{"key": …, "request": {"contents": …, "generationConfig"?: …}}`
    and a newline."""
    line = {"key": key, "request": request_body(prompt, generation_config)}
    return (json.dumps(line) + "\n").encode()


def row_from_result(index: int, item: Mapping[str, Any], line: int | None = None) -> Row:
    """A Row from one results-file line (or an inlined response in REST shape).

    The key is the line's `key`, else its `metadata.key`, else "" (placed by position).
    """
    metadata = item.get("metadata")
    key = item.get("key")
    if not isinstance(key, str) and isinstance(metadata, Mapping):
        key = metadata.get("key")
    key = key if isinstance(key, str) else ""
    failure = item.get("error", item.get("status"))
    if isinstance(failure, Mapping) and failure.get("code") not in (None, 0):
        reason = str(failure.get("message") or f"code {failure.get('code')}")
        return Row(key=key, error=reason, origin=ROW_ERROR, index=index, line=line)
    response = item.get("response")
    if not isinstance(response, Mapping):
        where = f"line {line}" if line is not None else f"result {index}"
        return Row(
            key=key,
            error=f"{where} holds neither a response nor an error",
            origin=UNREADABLE,
            index=index,
            line=line,
        )
    return row_from_response(key, response, index=index, line=line)


def row_from_response(
    key: str, response: Mapping[str, Any], *, index: int | None = None, line: int | None = None
) -> Row:
    """Classify one GenerateContentResponse (REST shape) as text, truncated text or an error.

    - `promptFeedback.blockReason` set (no candidates): blocked, "prompt blocked: REASON";
    - no candidate at all: failed, "empty response";
    - first candidate's `finishReason` in WITHHELD (SAFETY, RECITATION, …): blocked;
    - `MAX_TOKENS` with text: truncated, text kept; without text: failed;
    - `STOP` (or none) with text: succeeded; without text: failed, "empty answer";
    - any other finishReason (OTHER, LANGUAGE, MALFORMED_FUNCTION_CALL, …): failed.
    Reasons carry a summary of the notable safety ratings when there are any.
    """
    feedback = response.get("promptFeedback")
    feedback = feedback if isinstance(feedback, Mapping) else {}
    block = feedback.get("blockReason")
    if block:
        reason = _with_ratings(f"prompt blocked: {block}", feedback.get("safetyRatings"))
        return Row(
            key=key, error=reason, blocked=True, block_reason=str(block), index=index, line=line
        )
    candidates = response.get("candidates")
    if not isinstance(candidates, Sequence) or not candidates:
        reason = "empty response: no candidate and no block reason"
        return Row(key=key, error=reason, index=index, line=line)
    first = candidates[0] if isinstance(candidates[0], Mapping) else {}
    finish = str(first.get("finishReason") or "")
    text = _candidate_text(first)
    ratings = first.get("safetyRatings")

    def row(
        text: str | None = None,
        error: str | None = None,
        blocked: bool = False,
        truncated: bool = False,
    ) -> Row:
        return Row(
            key=key,
            text=text,
            error=error,
            blocked=blocked,
            truncated=truncated,
            finish_reason=finish or None,
            index=index,
            line=line,
        )

    if finish in WITHHELD:
        return row(
            error=_with_ratings(f"answer withheld: finishReason {finish}", ratings), blocked=True
        )
    if finish == "MAX_TOKENS":
        if text:
            return row(text=text, truncated=True)
        return row(error="empty answer: finishReason MAX_TOKENS")
    if finish in _COMPLETE:
        return (
            row(text=text) if text else row(error=f"empty answer: finishReason {finish or 'unset'}")
        )
    return row(error=_with_ratings(f"answer stopped: finishReason {finish}", ratings))


def _candidate_text(candidate: Mapping[str, Any]) -> str:
    content = candidate.get("content")
    parts = content.get("parts") if isinstance(content, Mapping) else None
    if not isinstance(parts, Sequence):
        return ""
    return "".join(str(p.get("text") or "") for p in parts if isinstance(p, Mapping))


def safety_summary(ratings: Any) -> str:
    """ "HARM_CATEGORY_X HIGH (blocked), …" for the ratings that blocked or rate MEDIUM/HIGH."""
    notable = []
    for rating in ratings if isinstance(ratings, Sequence) else []:
        if not isinstance(rating, Mapping):
            continue
        probability = str(rating.get("probability") or "")
        if rating.get("blocked") or probability in _NOTABLE:
            entry = f"{rating.get('category') or 'HARM_CATEGORY_UNSPECIFIED'} {probability}".strip()
            notable.append(entry + (" (blocked)" if rating.get("blocked") else ""))
    return ", ".join(notable)


def _with_ratings(reason: str, ratings: Any) -> str:
    summary = safety_summary(ratings)
    return f"{reason}; safety ratings: {summary}" if summary else reason


def place(rows: Sequence[Row], keys: Sequence[str]) -> tuple[Row, ...]:
    """Every row under the request it answers, in the same order as `rows`.

    A row whose echoed key names a request answers that request (the first one does: a
    second row for the same key is unplaced). A row with no key answers the request at its
    position, when that request has no keyed row: the Batch API reference promises inline
    responses and results-file lines "in the same order as the input requests". Any other
    row (a key nobody asked for, a position past the requests or already answered) comes
    back `unplaced`, an error row that says why: never dropped.
    """
    wanted = set(keys)
    taken: set[str] = set()
    placed: list[Row | None] = [None] * len(rows)
    for i, row in enumerate(rows):
        if row.key and row.key in wanted and row.key not in taken:
            taken.add(row.key)
            placed[i] = row
    for i, row in enumerate(rows):
        if placed[i] is not None or row.key or row.index is None:
            continue
        if row.index < len(keys) and keys[row.index] not in taken:
            taken.add(keys[row.index])
            placed[i] = replace(row, key=keys[row.index])
    result = []
    for i, row in enumerate(rows):
        done = placed[i]
        result.append(done if done is not None else _unplaced(row, wanted))
    return tuple(result)


def _unplaced(row: Row, wanted: set[str]) -> Row:
    where = f"line {row.line}" if row.line is not None else f"result {row.index}"
    if row.key and row.key in wanted:
        why = f"a second result for {row.key!r}"
    elif row.key:
        why = f"key {row.key!r} names no request of this batch"
    else:
        why = "no key, and its position matches no unanswered request"
    was = row.error or f"{row.outcome} result"
    return replace(
        row, error=f"{where}: {why} ({was})", blocked=False, truncated=False, unplaced=True
    )


class RowReader(io.RawIOBase):
    """A writable stream that turns a JSONL results file into Rows as the bytes arrive.

    Memory holds one chunk and the line being assembled, never the file: each complete
    line is parsed and dropped, keeping only its Row. A line that is not a JSON object
    becomes an error row naming the file and the line (`origin` UNREADABLE): the other
    rows stay readable. `rows()` closes the last line.
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
        """Every row read, one per non-blank line, in file order."""
        self._take_line()
        return tuple(self._rows)

    def _take_line(self) -> None:
        line, self._pending = bytes(self._pending), bytearray()
        self._line += 1
        if not line.strip():
            return
        index = len(self._rows)
        try:
            item = json.loads(line)
        except ValueError:
            item = None
        if not isinstance(item, dict):
            reason = f"{self._file_name}: line {self._line} is not a JSON object"
            row = Row(key="", error=reason, origin=UNREADABLE, index=index, line=self._line)
            self._rows.append(row)
            return
        self._rows.append(row_from_result(index, item, line=self._line))
