"""A clock that moves only when told to, so tests can drive backoff and tombstones exactly.

With `--manual-clock` the emulator's store reads this clock instead of the wall clock:
schedule times, retry backoff, max_retry_duration and name tombstones then advance only
through `POST /_clock/advance` on the key server. Rate-limit refill, dispatch deadlines
and OIDC token lifetimes keep using real time (they bound real waits).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class ManualClock:
    """Epoch seconds, frozen at `start` (default: the wall clock at creation) until `advance`."""

    def __init__(self, start: float | None = None) -> None:
        self._now = time.time() if start is None else start
        self._lock = threading.Lock()
        self._listeners: list[Callable[[], None]] = []

    def __call__(self) -> float:
        with self._lock:
            return self._now

    def on_advance(self, listener: Callable[[], None]) -> None:
        """Call `listener()` after every advance (the dispatcher re-checks what is due)."""
        self._listeners.append(listener)

    def advance(self, seconds: float) -> float:
        """Move forward by `seconds` (>= 0); returns the new time. Never moves back."""
        if seconds < 0:
            raise ValueError(f"a clock only moves forward, got {seconds}")
        with self._lock:
            self._now += seconds
            now = self._now
        for listener in self._listeners:
            listener()
        return now
