"""Structured log lines: one JSON object each, secret-looking field names redacted."""

from __future__ import annotations

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
