"""Conditional commits: read outside the transaction, commit on "unchanged since that read".

The read is outside the transaction and the commit is conditional on the version read
(optimistic concurrency): on the emulator a read inside the transaction takes a lock
that makes every race cost a ~2 s lock timeout; the condition gives the same guarantee
without it. Timeline of two racing writers A and B (docs/architecture.md, "Settlement")::

    A reads v1               B reads v1
    A commits on condition "still v1"  → v2
                             B commits on condition "still v1" → FAILED_PRECONDITION
                             B re-reads v2 (Conflict → Retry.NOW) and decides again

An ABORTED commit (lock contention) is retried after a jittered, growing delay
(`shared.retry.Backoff`); after the budget, `ContentionError`. Any other Firestore
failure becomes `StoreUnavailable`, raised `from` the original.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from google.api_core import exceptions as gexc
from google.cloud import firestore

from shared import tracing
from shared.config import FIRESTORE_TIMEOUT_S
from shared.errors import TransientError
from shared.ledger.errors import ContentionError, LedgerError, StoreUnavailable
from shared.logs import event as log_event
from shared.logs import get_logger
from shared.retry import Backoff, RetriesExhausted, Retry, find_cause, retrying

T = TypeVar("T")
log = get_logger("ledger")

# What a commit raises when a write's precondition fails.
REFUSED = (gexc.FailedPrecondition, gexc.AlreadyExists, gexc.NotFound)


@dataclass(frozen=True)
class Seen:
    """What a conditional commit needs of a snapshot, taken from a record already read."""

    id: str
    update_time: Any


@dataclass(frozen=True)
class Staged:
    """A conditional update of another part's document, staged into one commit: written on
    condition `ref` is unchanged since `seen`, so a change refuses the whole commit."""

    ref: Any
    seen: Any
    update: Mapping[str, Any]
    create: bool = False  # a document that did not exist at `seen`: created, not updated


class Conflict(TransientError):
    """A conditional write found the document changed since it was read: re-read, decide again.

    Transient, and deliberately not a `LedgerError`: `commit` re-raises a `LedgerError` as
    it is, while a `Conflict` is the retry loop's own signal (`Retry.NOW`) and never leaves
    `Commits.retrying` but as the cause of a `ContentionError`."""


class Commits:
    """Reads, queries and conditional commits on one Firestore client, with bounded retries."""

    def __init__(
        self,
        client: firestore.Client,
        *,
        backoff: Backoff | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rand: Callable[[], float] = random.random,
        timeout_s: float = FIRESTORE_TIMEOUT_S,
    ) -> None:
        self.client = client
        self._backoff = backoff or Backoff()
        self._sleep = sleep
        self._rand = rand
        # Reads, creates and queries carry it; commits keep the client's own 60 s deadline.
        self.timeout_s = timeout_s
        self._counts_lock = threading.Lock()
        self._counts = {"aborted": 0, "conflicts": 0}

    def collection(self, name: str) -> Any:
        return self.client.collection(name)

    def counts(self) -> dict[str, int]:
        """Retries so far: `aborted` (backed off) and `conflicts` (re-read at once)."""
        with self._counts_lock:
            return dict(self._counts)

    def read(self, ref: Any, subject: str) -> Any:
        try:
            return ref.get(timeout=self.timeout_s)
        except gexc.GoogleAPIError as exc:
            raise StoreUnavailable(f"{subject}: read failed: {exc}") from exc

    def read_many(self, refs: Sequence[Any], subject: str) -> dict[str, Any]:
        """Each of `refs` in one call (`get_all`), by document path; a missing one's
        snapshot does not exist."""
        try:
            found = self.client.get_all(list(refs), timeout=self.timeout_s)
            return {snapshot.reference.path: snapshot for snapshot in found}
        except gexc.GoogleAPIError as exc:
            raise StoreUnavailable(f"{subject}: read failed: {exc}") from exc

    def stream(self, query: Any, what: str) -> list[Any]:
        """Every snapshot `query` returns (the caller set its limit)."""
        try:
            return list(query.stream(timeout=self.timeout_s))
        except gexc.GoogleAPIError as exc:
            raise StoreUnavailable(f"{what} query failed: {exc}") from exc

    def count(self, query: Any, what: str) -> int:
        """A server-side count aggregation of `query`."""
        try:
            return int(query.count(alias="n").get(timeout=self.timeout_s)[0][0].value)
        except gexc.GoogleAPIError as exc:
            raise StoreUnavailable(f"{what} count failed: {exc}") from exc

    def unchanged_since(self, snapshot: Any) -> Any:
        return self.client.write_option(last_update_time=snapshot.update_time)

    def update_if_unchanged(self, ref: Any, snapshot: Any, update: Mapping[str, Any]) -> None:
        """Apply `update` to `ref` on condition it is unchanged since `snapshot`."""
        self.commit(
            lambda txn: txn.update(ref, dict(update), option=self.unchanged_since(snapshot)),
            ref,
            snapshot,
        )

    def commit(
        self,
        body: Callable[[Any], None],
        ref: Any,
        snapshot: Any,
        also: Staged | None = None,
    ) -> None:
        """Run `body(txn)` as one transaction attempt; retrying is `retrying`'s job.

        `body` writes `ref` on condition it is unchanged since `snapshot`; `also`, another
        document's staged update, is written in the same commit on its own condition. When
        the commit is refused and `ref` or `also`'s document did change, raises `Conflict`
        (re-read and decide again): the refusal may name another write of the same commit
        (a write-back's `create`), so the error code alone cannot tell.
        """

        def with_also(txn: Any) -> None:
            body(txn)
            if also is not None and also.create:
                txn.create(also.ref, dict(also.update))
            elif also is not None:
                txn.update(also.ref, dict(also.update), option=self.unchanged_since(also.seen))

        try:
            firestore.transactional(with_also)(self.client.transaction(max_attempts=1))
        except LedgerError:
            raise
        except Exception as exc:
            if find_cause(exc, gexc.Aborted) or not find_cause(exc, REFUSED):
                raise
            if self.read(ref, snapshot.id).update_time != snapshot.update_time:
                raise Conflict(str(exc)) from exc
            if also is not None and self.read(also.ref, also.ref.id).update_time != (
                also.seen.update_time
            ):
                raise Conflict(str(exc)) from exc
            raise

    def retrying(self, subject: str, attempt: Callable[[], T]) -> T:
        """Call `attempt` until it returns: at once after a Conflict, with backoff on ABORTED."""

        def classify(exc: Exception) -> Retry | None:
            if isinstance(exc, Conflict):
                return Retry.NOW
            if isinstance(exc, LedgerError):
                return None
            return Retry.LATER if find_cause(exc, gexc.Aborted) else None

        def on_retry(number: int, kind: Retry, delay: float, exc: Exception) -> None:
            self._count("conflicts" if kind is Retry.NOW else "aborted")
            log_event(
                log,
                logging.INFO if kind is Retry.NOW else logging.WARNING,
                "transaction conflict; re-reading"
                if kind is Retry.NOW
                else "transaction aborted; backing off",
                operation=subject,
                attempt=number,
                delay_s=round(delay, 3),
            )

        try:
            with tracing.span("firestore.commit", subject=subject):
                return retrying(
                    attempt,
                    classify=classify,
                    backoff=self._backoff,
                    sleep=self._sleep,
                    rand=self._rand,
                    on_retry=on_retry,
                )
        except RetriesExhausted as exc:
            self._count("conflicts" if isinstance(exc.__cause__, Conflict) else "aborted")
            log_event(
                log, logging.ERROR, "transaction gave up", operation=subject, attempts=exc.attempts
            )
            raise ContentionError(
                f"{subject}: transaction still contended after {exc.attempts} attempts"
            ) from exc.__cause__
        except LedgerError:
            raise
        except Exception as exc:
            # The client wraps some failed commits in ValueError: look for the API error.
            if not find_cause(exc, gexc.GoogleAPIError):
                raise
            raise StoreUnavailable(f"{subject}: transaction failed: {exc}") from exc

    def _count(self, counter: str) -> None:
        with self._counts_lock:
            self._counts[counter] += 1
