"""Test doubles shared by the tests and the benchmarks; dev-only, never deployed.

- `FakeClock`: a clock that moves only when told (the code under test takes a `Clock`);
- `MemoryPayloadStore`: a `shared.handoff.payloads.PayloadStore` in a dict, with the same contract;
- `ListedGateway`: Gemini's batch listing in memory (newest first, in pages), counted.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime, timedelta

from shared.gemini import BatchSummary
from shared.handoff.payloads import PayloadConflict, PayloadNotFound, check_put


class FakeClock:
    """A clock for tests: starts at `start`, moves only when told."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> datetime:
        self.now += timedelta(seconds=seconds)
        return self.now


class MemoryPayloadStore:
    """A `PayloadStore` in a dict, with the same contract: for unit tests."""

    def __init__(self) -> None:
        self._items: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def put(self, key: str, data: bytes) -> str:
        check_put(key, data)
        with self._lock:
            existing = self._items.get(key)
            if existing is not None and existing != data:
                raise PayloadConflict(f"payload {key} already holds a different body")
            self._items[key] = bytes(data)
        return key

    def get(self, ref: str) -> bytes:
        with self._lock:
            try:
                return self._items[ref]
            except KeyError:
                raise PayloadNotFound(f"no payload under {ref}") from None


class ListedGateway:
    """The listing side of `GeminiGateway`, in memory: `list_batches` yields `batches`
    newest first, `page_size` to a page, as Gemini (and the simulator) list them. Counts
    `pages` (list calls: one for an empty list) and `read` (batches yielded)."""

    def __init__(self, batches: Iterable[BatchSummary] = ()) -> None:
        self.batches = sorted(batches, key=_newest, reverse=True)
        self.pages = 0
        self.read = 0

    def add(self, *batches: BatchSummary) -> None:
        self.batches = sorted([*self.batches, *batches], key=_newest, reverse=True)

    def list_batches(self, page_size: int = 100) -> Iterator[BatchSummary]:
        start = 0
        while True:
            self.pages += 1
            page = self.batches[start : start + page_size]
            for batch in page:
                self.read += 1
                yield batch
            start += page_size
            if start >= len(self.batches):
                return


def _newest(batch: BatchSummary) -> datetime:
    return batch.create_time or datetime.min.replace(tzinfo=UTC)
