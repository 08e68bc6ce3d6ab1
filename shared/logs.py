"""Structured logs in Cloud Logging's JSON format.

One line per record: `{"severity": …, "message": …, "logger": …, <fields>}`. Fields are
passed as keyword arguments to `event(...)`. Field names that can carry a secret are
replaced by `"[redacted]"`, so a careless caller cannot leak one.

A line whose record would reach `configure`'s handler and nothing else (no other
handler, no filter: a deployed function) is written to it straight, the same bytes
without the `LogRecord` and the handler chain (~20 µs of every accepted delivery's
CPU, bench/ack.py); anything else listening (a test's `caplog`) gets the record.
"""

from __future__ import annotations

import functools
import json
import logging
import sys
from collections.abc import Callable
from datetime import datetime
from typing import Any

_SEVERITY = {
    logging.DEBUG: "DEBUG",
    logging.INFO: "INFO",
    logging.WARNING: "WARNING",
    logging.ERROR: "ERROR",
    logging.CRITICAL: "CRITICAL",
}
_SECRET_WORDS = ("secret", "signature", "token", "password", "authorization", "api_key", "key")
_FIELDS_ATTR = "hookledger_fields"
# Set by shared/tracing while a process traces: Cloud Logging's trace fields of the
# current span, added to every line (None: tracing is off, nothing is asked).
trace_fields: Callable[[], dict[str, Any]] | None = None


# Field names are keyword arguments written in code, a few dozen: decide each once.
@functools.lru_cache(maxsize=1024)
def _is_secret(name: str) -> bool:
    lowered = name.lower()
    return any(word in lowered for word in _SECRET_WORDS) and lowered not in _SAFE_NAMES


# Names that contain a secret word but hold no secret.
_SAFE_NAMES = frozenset({"key_id", "idempotency_key", "kid", "token_kind"})


# What JSON holds as it is: a field of one of these types is written without a look.
_PLAIN = frozenset({str, int, float, bool, type(None)})


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    return value


# What json.dumps(entry, default=str) builds on every call, built once (it holds no state).
_ENCODER = json.JSONEncoder(default=str)


def _line(
    level: int, message: str, logger: str, fields: dict[str, Any], exception: str | None
) -> str:
    """One JSON line: the severity, message, logger, the fields (redacted), trace fields."""
    entry: dict[str, Any] = {
        "severity": _SEVERITY.get(level, "DEFAULT"),
        "message": message,
        "logger": logger,
    }
    for name, value in fields.items():
        if _is_secret(name):
            entry[name] = "[redacted]"
        else:
            entry[name] = value if type(value) in _PLAIN else _jsonable(value)
    if trace_fields is not None:
        entry.update(trace_fields())
    if exception:
        entry["exception"] = exception
    return _ENCODER.encode(entry)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        exception = self.formatException(record.exc_info) if record.exc_info else None
        fields = getattr(record, _FIELDS_ATTR, {})
        return _line(record.levelno, record.getMessage(), record.name, fields, exception)


def configure(level: str | int = "INFO", stream: Any = None) -> None:
    """Send hookledger's logs to `stream` (stdout by default) as JSON lines; idempotent."""
    root = logging.getLogger("hookledger")
    root.setLevel(level)
    if not any(getattr(h, "_hookledger", False) for h in root.handlers):
        handler = logging.StreamHandler(stream or sys.stdout)
        handler.setFormatter(JsonFormatter())
        handler._hookledger = True  # type: ignore[attr-defined]
        root.addHandler(handler)
    root.propagate = True


def get_logger(name: str) -> logging.Logger:
    return logging.getLogger(f"hookledger.{name}")


def event(
    logger: logging.Logger, level: int, message: str, exc_info: bool = False, **fields: Any
) -> None:
    """Log `message` with structured `fields` (secret-looking names are redacted).

    Written straight to `configure`'s handler when it alone would take the record (module
    docstring); else the record `logger.log` makes, its source location read off the
    caller's frame at once instead of by a walk up the stack comparing file names.
    """
    if not logger.isEnabledFor(level):
        return
    handler = None if exc_info else _only_handler(logger, level)
    if handler is not None and _written(handler, _line(level, message, logger.name, fields, None)):
        return
    caller = sys._getframe(1)
    record = logger.makeRecord(
        logger.name,
        level,
        caller.f_code.co_filename,
        caller.f_lineno,
        message,
        (),
        sys.exc_info() if exc_info else None,
        caller.f_code.co_name,
        {_FIELDS_ATTR: fields},
    )
    logger.handle(record)


def _written(handler: logging.StreamHandler[Any], line: str) -> bool:
    """`line` written as `handler.emit` writes one; False when that failed (the record's
    path then reports it as logging does)."""
    handler.acquire()
    try:
        handler.stream.write(line + handler.terminator)
        handler.flush()
        return True
    except RecursionError:
        raise
    except Exception:
        return False
    finally:
        handler.release()


def _only_handler(logger: logging.Logger, level: int) -> logging.StreamHandler[Any] | None:
    """`configure`'s handler when a record of `level` from `logger` reaches it alone,
    unfiltered, with its own formatter; else None (the record must be made)."""
    if logger.disabled or logger.filters:
        return None
    found: logging.StreamHandler[Any] | None = None
    current: logging.Logger | None = logger
    while current is not None:
        for handler in current.handlers:
            if level < handler.level:
                continue
            ours = getattr(handler, "_hookledger", False) and not handler.filters
            if found is not None or not ours or type(handler.formatter) is not JsonFormatter:
                return None
            found = handler  # type: ignore[assignment]
        current = current.parent if current.propagate else None
    return found
