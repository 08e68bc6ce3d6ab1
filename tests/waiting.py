"""Poll with a deadline instead of sleeping a fixed time."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import pytest

from hookledger.testing.waiting import WaitTimeout, wait_for

T = TypeVar("T")


def wait_until(
    check: Callable[[], T], timeout: float = 10.0, what: str = "condition", every: float = 0.02
) -> T:
    """`check()`'s first truthy value; fails the test, naming `what`, after `timeout` seconds."""
    try:
        return wait_for(lambda: check() or None, timeout_s=timeout, what=what, every_s=every)
    except WaitTimeout as exc:
        pytest.fail(str(exc), pytrace=False)
