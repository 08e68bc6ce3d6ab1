"""How the CLI prints: aligned tables for people, JSON for scripts, one-line errors.

`Output(json_mode)` writes to whatever `sys.stdout` / `sys.stderr` are at call time (so
pytest's capsys sees it). Timestamps are RFC 3339 UTC with a `Z`; bytes become text (a
JSON payload is parsed back into an object, so `--json` nests it instead of quoting it).
"""

from __future__ import annotations

import base64
import json
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, TextIO


class CliError(Exception):
    """A failure to report as one line on stderr; `code` is the exit status (default 1)."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def rfc3339(value: datetime) -> str:
    """`2024-05-01T12:00:00.123456Z` (naive datetimes are taken as UTC)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def payload_value(data: bytes | str) -> Any:
    """A stored body as JSON-ready data: the parsed JSON, else text, else `{"base64": …}`."""
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return {"base64": base64.b64encode(data).decode("ascii")}
    else:
        text = data
    try:
        return json.loads(text)
    except ValueError:
        return text


def jsonable(value: Any) -> Any:
    """`value` with datetimes as RFC 3339 strings and bytes decoded, recursively."""
    if isinstance(value, datetime):
        return rfc3339(value)
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, bytes):
        return payload_value(value)
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


def cell(value: Any) -> str:
    """One table cell: short, single-line."""
    if value is None:
        return "-"
    if isinstance(value, datetime):
        return rfc3339(value).split(".")[0].replace("T", " ").rstrip("Z") + "Z"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list | tuple):
        return ",".join(cell(v) for v in value) or "-"
    text = str(value).replace("\n", " ")
    return text if len(text) <= 80 else text[:79] + "…"


def age(seconds: float) -> str:
    """`42s`, `3m05s`, `2h10m`, `3d04h`: how long ago, readable."""
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    if seconds < 86400:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 86400}d{seconds % 86400 // 3600:02d}h"


def table(rows: Sequence[Mapping[str, Any]], columns: Sequence[tuple[str, str]]) -> str:
    """Rows aligned under upper-case headers; `columns` is [(header, key)]."""
    cells = [[header for header, _ in columns]]
    cells += [[cell(row.get(key)) for _, key in columns] for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    return "\n".join(
        "  ".join(text.ljust(width) for text, width in zip(line, widths, strict=True)).rstrip()
        for line in cells
    )


def fields_block(data: Mapping[str, Any]) -> str:
    """`key: value` lines with the keys aligned; nested values as compact JSON."""
    width = max((len(str(k)) for k in data), default=0)
    lines = []
    for key, value in data.items():
        if isinstance(value, Mapping | list | tuple | bytes):
            shown = json.dumps(jsonable(value), ensure_ascii=False, sort_keys=True)
        elif isinstance(value, datetime):
            shown = rfc3339(value)
        else:
            shown = "-" if value is None else str(value)
        lines.append(f"{str(key).ljust(width)}  {shown}")
    return "\n".join(lines)


class Output:
    """Prints a command's result: `emit(data, human)` prints `data` as JSON or `human()`."""

    def __init__(self, json_mode: bool) -> None:
        self.json = json_mode

    def emit(self, data: Any, human: Callable[[], str]) -> None:
        if self.json:
            print(json.dumps(jsonable(data), ensure_ascii=False, sort_keys=True))
        else:
            text = human()
            if text:
                print(text)

    def say(self, line: str) -> None:
        """A narration line for people; silent in JSON mode."""
        if not self.json:
            print(line, flush=True)

    @staticmethod
    def error(message: str) -> None:
        first = " ".join(message.split())  # one line, whatever the cause's message held
        print(f"hookledger: error: {first}", file=sys.stderr, flush=True)


class ProgressBar:
    """A one-line bar on `stream`, redrawn as `(phase, done, total)` calls arrive.

    Thread-safe (reconcile reports from its worker threads). Draws only when `total` is
    more than `min_total`; `close()` ends the line.
    """

    def __init__(
        self,
        stream: TextIO,
        *,
        min_total: int = 5,
        width: int = 30,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._stream = stream
        self._min_total = min_total
        self._width = width
        self._lock = threading.Lock()
        self._drawn = False
        self._monotonic = monotonic
        self._last = 0.0

    def __call__(self, phase: str, done: int, total: int) -> None:
        if total <= self._min_total:
            return
        with self._lock:
            now = self._monotonic()
            if done < total and self._drawn and now - self._last < 0.05:
                return  # redraw at most 20 times a second
            self._last = now
            filled = self._width * done // total
            bar = "#" * filled + "." * (self._width - filled)
            self._stream.write(f"\r{phase:<7} [{bar}] {done}/{total}")
            self._stream.flush()
            self._drawn = True

    def close(self) -> None:
        with self._lock:
            if self._drawn:
                self._stream.write("\n")
                self._stream.flush()
                self._drawn = False
