"""The one place that reads the wall clock; domain code takes a `Clock` instead."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime

Clock = Callable[[], datetime]
"""A callable returning the current time as an aware UTC datetime."""


def system_clock() -> datetime:
    return datetime.now(UTC)


def monotonic() -> float:
    """Seconds from an arbitrary origin, for deadlines and durations."""
    return time.monotonic()
