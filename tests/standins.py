"""Stand-ins at the edge of the Gemini and GitHub SDKs, for races no real server can stage.

The overlap test and the crash-point sweep need a Gemini whose new batch becomes listable
at a chosen moment of its create call (before the answer, as a server that commits first,
or only after it), and thousands of trials: an in-process stand-in with the gateway's own
method names (`shared.gemini.GeminiGateway`). Everything else in those tests is real: the
ledger on the Firestore emulator, the review pipeline, the worker, the settler, the outbox.
`ScriptedGemini` answers `fetch` from a script, for the fast unit tests of settlement.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from shared.gemini import BatchStatus, BatchSummary, Row
from shared.gemini.errors import GeminiNotFound
from shared.github import FetchedFiles

Visible = Literal["during", "after"]


@dataclass
class StandInBatch:
    name: str
    display_name: str
    keys: tuple[str, ...]
    created_at: datetime
    state: str = "JOB_STATE_RUNNING"
    cancel_requested: bool = False
    priority: int = 0  # Gemini's `batch.priority` it was created with


@dataclass
class RacingGemini:
    """Batches in memory; `visible` says when a created batch shows in `list_batches`.

    `during`: listed as soon as the create reaches the "server", `create_s` before the
    call returns; `after`: listed only once the call has returned.
    """

    visible: Visible = "during"
    create_s: float = 0.0
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))
    batches: dict[str, StandInBatch] = field(default_factory=dict)
    created: list[str] = field(default_factory=list)
    _listed: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _ids: Iterator[int] = field(default_factory=itertools.count)

    def create_batch(
        self,
        model: str,
        requests: Sequence[tuple[str, str]],
        display_name: str,
        *,
        generation_config: Mapping[str, Any] | None = None,
        created_at: datetime | None = None,
        priority: int = 0,
    ) -> str:
        with self._lock:
            name = f"batches/standin-{next(self._ids)}"
            keys = tuple(k for k, _ in requests)
            born = created_at or self.clock()
            self.batches[name] = StandInBatch(name, display_name, keys, born, priority=priority)
            self.created.append(name)
            if self.visible == "during":
                self._listed.append(name)
        if self.create_s:
            time.sleep(self.create_s)  # the server's latency, not a wait for a condition
        if self.visible == "after":
            with self._lock:
                self._listed.append(name)
        return name

    def list_batches(self, page_size: int = 100) -> Iterator[BatchSummary]:
        with self._lock:
            listed = [self.batches[name] for name in self._listed]
        for b in listed:
            yield BatchSummary(b.name, b.display_name, b.state, b.created_at)

    def hide(self, name: str) -> None:
        """Leave `name` out of `list_batches` (a create that shows late)."""
        with self._lock:
            self._listed.remove(name)

    def reveal(self, name: str) -> None:
        """List `name` from now on (no-op when listed already)."""
        with self._lock:
            if name not in self._listed:
                self._listed.append(name)

    def cancel_batch(self, name: str) -> None:
        with self._lock:
            batch = self.batches.get(name)
            if batch is None:
                return
            batch.cancel_requested = True
            if batch.state == "JOB_STATE_RUNNING":
                batch.state = "JOB_STATE_CANCELLED"

    def succeed(self, name: str) -> None:
        with self._lock:
            self.batches[name].state = "JOB_STATE_SUCCEEDED"

    def fetch(self, name: str) -> BatchStatus:
        return self.fetch_batch(name)

    def fetch_batch(self, name: str) -> BatchStatus:
        with self._lock:
            batch = self.batches.get(name)
        if batch is None:
            raise GeminiNotFound(f"{name}: no such batch")
        rows: tuple[Row, ...] = ()
        if batch.state == "JOB_STATE_SUCCEEDED":
            rows = tuple(Row(key, text=f"review of {key} by {name}") for key in batch.keys)
        return BatchStatus(name, batch.state, batch.display_name, rows=rows)

    def live(self, display_name: str) -> list[str]:
        """Batches with this tag that nobody asked to cancel: what Gemini bills on."""
        with self._lock:
            return [
                b.name
                for b in self.batches.values()
                if b.display_name == display_name and not b.cancel_requested
            ]


@dataclass
class StandInContents:
    """GitHub's Contents API: every path has a small Markdown body."""

    def fetch(self, repo: str, path: str, sha: str, *, installation_id: int | None = None) -> bytes:
        return f"# {path}\n\nAt {sha[:7]}.\n".encode()

    def fetch_many(
        self, repo: str, paths: Iterable[str], sha: str, *, installation_id: int | None = None
    ) -> FetchedFiles:
        """Every path read, in one request (as `ContentsClient.fetch_many` for small files)."""
        texts = {path: self.fetch(repo, path, sha).decode() for path in paths}
        return FetchedFiles(texts=texts, requests=1)


class ScriptedGemini:
    """`fetch` answers from a script, one answer per call: a BatchStatus, or an exception to
    raise (the fast unit tests of `Settler` and reconcile's check)."""

    def __init__(self, *answers: BatchStatus | Exception) -> None:
        self.answers = list(answers)
        self.fetched: list[str] = []

    def fetch(self, name: str) -> BatchStatus:
        self.fetched.append(name)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer
