"""Test doubles shared by the tests and the benchmarks; dev-only, never deployed.

- `FakeClock`: a clock that moves only when told (the code under test takes a `Clock`);
- `MemoryClaimStore`: a `shared.handoff.claims.ClaimStore` in a dict, with the same contract.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

from shared.handoff.claims import ClaimConflict, ClaimNotFound, check_put


class FakeClock:
    """A clock for tests: starts at `start`, moves only when told."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> datetime:
        self.now += timedelta(seconds=seconds)
        return self.now


class MemoryClaimStore:
    """A `ClaimStore` in a dict, with the same contract: for unit tests."""

    def __init__(self) -> None:
        self._items: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def put(self, key: str, data: bytes) -> str:
        check_put(key, data)
        with self._lock:
            existing = self._items.get(key)
            if existing is not None and existing != data:
                raise ClaimConflict(f"claim {key} already holds a different payload")
            self._items[key] = bytes(data)
        return key

    def get(self, ref: str) -> bytes:
        with self._lock:
            try:
                return self._items[ref]
            except KeyError:
                raise ClaimNotFound(f"no payload under claim {ref}") from None
