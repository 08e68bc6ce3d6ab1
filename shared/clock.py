"""The one place that reads the wall clock; domain code takes a `Clock` instead."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

Clock = Callable[[], datetime]
"""A callable returning the current time as an aware UTC datetime."""


def system_clock() -> datetime:
    return datetime.now(UTC)


def monotonic() -> float:
    """Seconds from an arbitrary origin, for deadlines and durations."""
    return time.monotonic()


class FakeClock:
    """A clock for tests: starts at `start`, moves only when told."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> datetime:
        self.now += timedelta(seconds=seconds)
        return self.now
