"""Wait for a condition with a deadline (the kit's tests never sleep a fixed time)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
POLL_S = 0.1


class WaitTimeout(AssertionError):
    """The condition did not hold before the deadline (an assertion: the test fails)."""


def wait_for(
    check: Callable[[], T | None],
    *,
    timeout_s: float,
    what: Callable[[], str] | str,
    every_s: float = POLL_S,
) -> T:
    """`check()`'s first value that is not None, asked every `every_s`; WaitTimeout after
    `timeout_s` seconds, naming `what` (a callable is asked at the deadline, so it can show
    the last state)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value is not None:
            return value
        if time.monotonic() > deadline:
            described = what() if callable(what) else what
            raise WaitTimeout(f"timed out after {timeout_s:g} s waiting for {described}")
        time.sleep(every_s)
