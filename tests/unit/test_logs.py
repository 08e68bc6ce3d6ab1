"""Structured log lines: one JSON object each, secret-looking field names redacted."""

from __future__ import annotations

import inspect
import io
import json
import logging
from datetime import UTC, datetime

import pytest

from shared import logs


@pytest.fixture
def lines():
    """The JSON lines one `hookledger.*` logger writes, through the formatter `configure` sets."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logs.JsonFormatter())
    logger = logging.getLogger("hookledger.test-logs")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield lambda: [json.loads(line) for line in stream.getvalue().splitlines()]
    logger.removeHandler(handler)


FIELDS = [
    # (field name, redacted?)
    ("signature", True),
    ("X_Hub_Signature", True),
    ("webhook_secret", True),
    ("id_token", True),
    ("Authorization", True),
    ("api_key", True),
    ("envelope_key", True),
    ("key_id", False),
    ("idempotency_key", False),
    ("kid", False),
    ("token_kind", False),
    ("delivery_id", False),
    ("status", False),
]


def test_secret_looking_fields_are_redacted_every_time_they_are_logged(lines):
    logger = logging.getLogger("hookledger.test-logs")
    for _ in range(2):  # the decision per name is remembered: the second line must agree
        logs.event(logger, logging.INFO, "m", **{name: "v4lue" for name, _ in FIELDS})

    for entry in lines():
        for name, redacted in FIELDS:
            assert entry[name] == ("[redacted]" if redacted else "v4lue"), name


def test_a_line_is_one_json_object_with_severity_message_logger_and_fields(lines):
    logger = logging.getLogger("hookledger.test-logs")
    when = datetime(2026, 1, 1, tzinfo=UTC)

    logs.event(logger, logging.WARNING, "it %s", at=when, body=b"abc", other=object, n=1.5)

    [entry] = lines()
    assert entry["severity"] == "WARNING"
    assert entry["message"] == "it %s"
    assert entry["logger"] == "hookledger.test-logs"
    assert entry["at"] == when.isoformat()
    assert entry["body"] == "<3 bytes>"  # never the bytes themselves
    assert entry["other"] == str(object)  # anything else JSON cannot hold: its str()
    assert entry["n"] == 1.5


@pytest.fixture
def alone():
    """A logger whose records reach `configure`'s kind of handler alone, and its stream."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logs.JsonFormatter())
    handler._hookledger = True  # type: ignore[attr-defined]
    # Made outside logging's manager: no parent, and no caplog handler is attached to it.
    logger = logging.Logger("hookledger.test-logs-alone", logging.INFO)
    logger.addHandler(handler)
    return logger, handler, stream


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_a_line_written_straight_is_the_line_a_record_makes(alone, monkeypatch):
    logger, _, stream = alone
    fields = {"delivery_id": "d-1", "status": 202, "elapsed_ms": 1.5, "token": "t0k3n", "at": None}

    with monkeypatch.context() as patched:  # alone: written straight, no record made
        patched.setattr(logger, "makeRecord", lambda *a, **k: pytest.fail("a record was made"))
        logs.event(logger, logging.INFO, "github delivery accepted", **fields)
    others = Records()
    logger.addHandler(others)
    logs.event(logger, logging.INFO, "github delivery accepted", **fields)  # a record
    logger.removeHandler(others)

    straight, recorded = stream.getvalue().splitlines()
    assert straight == recorded
    assert json.loads(straight)["token"] == "[redacted]"
    [record] = others.records
    assert record.getMessage() == "github delivery accepted"


def test_a_record_is_made_when_a_filter_or_another_handler_listens(alone):
    logger, handler, stream = alone
    handler.addFilter(lambda record: record.levelno >= logging.WARNING)

    logs.event(logger, logging.INFO, "dropped by the filter")
    logs.event(logger, logging.WARNING, "kept")

    assert [json.loads(line)["message"] for line in stream.getvalue().splitlines()] == ["kept"]


def test_a_record_names_the_line_that_logged_it(caplog):
    logger = logging.getLogger("hookledger.test-logs")
    with caplog.at_level(logging.INFO, logger="hookledger.test-logs"):
        line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
        logs.event(logger, logging.INFO, "here", n=1)

    [record] = caplog.records
    assert (record.pathname, record.lineno) == (__file__, line)
    assert record.funcName == "test_a_record_names_the_line_that_logged_it"
