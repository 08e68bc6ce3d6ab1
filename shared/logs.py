"""Structured logs in Cloud Logging's JSON format.

One line per record: `{"severity": …, "message": …, "logger": …, <fields>}`. Fields are
passed as keyword arguments to `event(...)`. Field names that can carry a secret are
replaced by `"[redacted]"`, so a careless caller cannot leak one.
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


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    return value


# What json.dumps(entry, default=str) builds on every call, built once (it holds no state).
_ENCODER = json.JSONEncoder(default=str)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "severity": _SEVERITY.get(record.levelno, "DEFAULT"),
            "message": record.getMessage(),
            "logger": record.name,
        }
        for name, value in getattr(record, _FIELDS_ATTR, {}).items():
            entry[name] = "[redacted]" if _is_secret(name) else _jsonable(value)
        if trace_fields is not None:
            entry.update(trace_fields())
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return _ENCODER.encode(entry)


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
    """Log `message` with structured `fields` (secret-looking names are redacted)."""
    logger.log(level, message, exc_info=exc_info, extra={_FIELDS_ATTR: fields})
