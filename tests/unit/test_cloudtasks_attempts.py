"""The emulator's retry rules for 429/503 and Retry-After: pure functions, no process."""

from __future__ import annotations

import email.utils

import pytest

from local.cloudtasks_emulator.attempts import Outcome, parse_retry_after, retry_delay_s
from local.cloudtasks_emulator.model import RetryPolicy

NOW = 1_700_000_000.0
POLICY = RetryPolicy(min_backoff_s=1.0, max_backoff_s=60.0, max_doublings=3)


def answer(status: int | None, retry_after: str | None = None) -> Outcome:
    return Outcome(status, 0, "test", retry_after=retry_after)


RETRY_AFTER = [
    ("delay-seconds", "2", 2.0),
    ("delay-seconds with spaces", " 120 ", 120.0),
    ("HTTP-date 30 s ahead", email.utils.formatdate(NOW + 30, usegmt=True), 30.0),
    ("HTTP-date in the past", email.utils.formatdate(NOW - 30, usegmt=True), 0.0),
    ("negative number", "-5", None),
    ("garbage", "soon", None),
    ("absent", None, None),
]


@pytest.mark.parametrize(
    ("case", "value", "expected"), RETRY_AFTER, ids=[c for c, _, _ in RETRY_AFTER]
)
def test_retry_after_reads_seconds_and_http_dates(
    case: str, value: str | None, expected: float | None
) -> None:
    assert parse_retry_after(value, NOW) == expected, case


DELAYS = [
    ("500 keeps the RetryConfig backoff", answer(500), 2, 4.0),
    ("503 doubles it", answer(503), 2, 8.0),
    ("429 doubles it", answer(429), 0, 2.0),
    ("a longer Retry-After wins", answer(503, "20"), 0, 20.0),
    ("a shorter Retry-After does not shorten it", answer(429, "1"), 2, 8.0),
    ("Retry-After is capped at max_backoff", answer(503, "7200"), 0, 60.0),
    ("Retry-After on a 500 is not a throttling signal", answer(500, "20"), 0, 1.0),
    ("no answer at all keeps the backoff", answer(None), 1, 2.0),
]


@pytest.mark.parametrize(
    ("case", "outcome", "retry_index", "expected"), DELAYS, ids=[c for c, *_ in DELAYS]
)
def test_throttling_answers_get_a_higher_backoff(
    case: str, outcome: Outcome, retry_index: int, expected: float
) -> None:
    assert retry_delay_s(POLICY, retry_index, outcome, NOW) == expected, case
