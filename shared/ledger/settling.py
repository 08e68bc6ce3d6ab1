"""Settling an operation: the settle commit, its write-back, and a write-back's faults.

The `Settling` mixin gives `Operations` (operations.py) its `settle`; it uses the
operations' own `resolve` and `expire_submission` and their commits, clock and retention.

Settlement, the one rule everything else protects: an operation goes from `pending` to a
terminal status once, and its write-back commits in that same transaction
(docs/architecture.md, "Settlement"). Timeline of two racing settles (webhook W,
reconcile R)::

    W reads v1 (pending)      R reads v1 (pending)
    W commits write-back + status, on condition "still v1"  → v2, settled
                              R commits on condition "still v1" → FAILED_PRECONDITION
                              R re-reads v2 (succeeded)      → already_settled, no write

A stale read can only say `pending` wrongly, never `settled`, because a terminal status
never changes.

A write-back that fails by its own fault (an exception outside the error tree, or a write
of its own refused) is counted on the operation (`writeback_failures`) in the failing path
only, and `WritebackFaulted.failures` tells the caller how many times it failed so far: the
`Settler` gives up after `WRITEBACK_ATTEMPTS` (shared/settlement/settler.py). A transient error of
the tree, or Firestore's own failure, is not counted: an outage is retried as long as it lasts.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any

from google.api_core import exceptions as gexc

from shared.clock import Clock
from shared.errors import HookledgerError, PermanentError, TransientError, retryable
from shared.ledger.commits import REFUSED, Commits, Conflict, Seen, Staged
from shared.ledger.errors import InvalidArgument, StoreUnavailable, WritebackFailed
from shared.ledger.ids import clip_error
from shared.ledger.records import (
    OUTBOX_DUE_AT,
    OUTCOME,
    PENDING,
    SETTLED_BY,
    TERMINAL_STATUSES,
    WRITEBACK_ERROR,
    Operation,
    OutboxItem,
    Settled,
    Settlement,
    operation_from_snapshot,
)
from shared.ledger.results import PagingTransaction, RecordedWrites, ResultWrites, Writeback
from shared.logs import event as log_event
from shared.logs import get_logger
from shared.retry import find_cause

log = get_logger("ledger")

# How many times a pending operation's write-back failed by its own fault (`WritebackFaulted`).
# Ledger-owned; it belongs beside the other field names in records.py.
WRITEBACK_FAILURES = "writeback_failures"
# How many pages of a write-back too large for one commit were written before it settles.
WRITEBACK_PAGES = "writeback_pages"
# Firestore takes 500 writes and 10 MiB per commit: a page leaves room for the ledger's own.
PAGE_WRITES = 400
PAGE_BYTES = 8_000_000


class WritebackFaulted(WritebackFailed):
    """The write-back failed by its own fault: it raised an exception outside the error tree
    (a bug, an input it cannot handle), or one of its own writes was refused. Transient like
    any `WritebackFailed` (the operation stays pending), but counted on the operation:
    `failures` is how many times so far, this one included; `reason` names the last one."""

    def __init__(self, message: str, *, failures: int, reason: str) -> None:
        super().__init__(message)
        self.failures = failures
        self.reason = reason


class Settling:
    """`Operations.settle` and what it alone uses; mixed into `Operations` (operations.py),
    which provides the attributes and methods declared here."""

    _commits: Commits
    _clock: Clock
    _retention: timedelta
    resolve: Callable[[str], Any]
    expire_submission: Callable[[Any, str | None, Any], None]

    def settle(
        self,
        name: str,
        status: str,
        by: str,
        *,
        error: str | Mapping[str, Any] | None = None,
        writeback: Writeback | None = None,
        outbox: Sequence[Any] | None = None,
        expected: Operation | None = None,
        result_counts: Mapping[str, Any] | None = None,
        outcome: Mapping[str, Any] | None = None,
        also: Callable[[], Staged | None] | None = None,
    ) -> Settled:
        """Move a pending operation to `status` once, with its write-back and outbox items
        (and, when given, `result_counts` and `outcome` flags such as `partial`, stored as
        the operation's fields of those names). `also()`, asked before each commit
        attempt, stages another document's update into the settling commit (the
        delivery's `done`, `Ledger.settle`); `Settled.also_applied` says if it went in."""
        _check_settle(name, status, by, error, outbox)
        if outcome is not None and not isinstance(outcome, Mapping):
            raise InvalidArgument(f"operation {name}: outcome must be a mapping")
        items = list(outbox or [])
        ref = self.resolve(name)
        if ref is None:
            return Settled(Settlement.UNKNOWN)
        known: list[Operation] = []
        if expected is not None and expected.update_time is not None and expected.doc_id == ref.id:
            known.append(expected)  # the caller's own read of this very operation
        # Set once a write-back proved too large for one commit: its last page, replayed.
        last_page: list[Writeback] = []

        def attempt() -> Settled:
            if known:  # first attempt only: trust the caller's fresh read
                record = known.pop()
                snapshot: Any = Seen(ref.id, record.update_time)
            else:
                snapshot = self._commits.read(ref, name)
                if not snapshot.exists:
                    return Settled(Settlement.UNKNOWN)
                record = operation_from_snapshot(snapshot)
            if not record.pending:
                if record.status != status:
                    log_event(
                        log,
                        logging.INFO,
                        "settle: already settled with another status",
                        operation=record.name,
                        stored_status=record.status,
                        requested_status=status,
                        by=by,
                    )
                return Settled(Settlement.ALREADY_SETTLED)
            now = self._clock()
            # Items recorded while pending keep their places (idempotency keys); new ones follow.
            kept = [_stored(item) for item in record.outbox]
            still_open = items or any(item.open for item in record.outbox)
            update: dict[str, Any] = {
                "status": status,
                "settled_at": now,
                "settled_by": by,
                # TTL only once the outbox is finished (docs/architecture.md, "Outbox").
                **({OUTBOX_DUE_AT: now} if still_open else {"expire_at": now + self._retention}),
                "writeback_done": not still_open,
                "outbox": kept + [{"payload": item, "delivered_at": None} for item in items],
            }
            if error is not None:
                update["error"] = clip_error(error) if isinstance(error, str) else dict(error)
            if result_counts is not None:
                update["result_counts"] = dict(result_counts)
            if outcome:
                update[OUTCOME] = dict(outcome)

            staged = also() if also is not None else None

            def body(txn: Any) -> None:
                if last_page:
                    last_page[0](ResultWrites(txn, self._commits.client, record), record)
                elif writeback is not None:
                    paging = PagingTransaction(txn, PAGE_WRITES, PAGE_BYTES)
                    _stage(writeback, ResultWrites(paging, self._commits.client, record), record)
                    if paging.overflowed:
                        raise _TooLarge(paging.recorded)
                txn.update(ref, update, option=self._commits.unchanged_since(snapshot))
                self.expire_submission(txn, record.submission, update.get("expire_at"))

            try:
                self._commits.commit(body, ref, snapshot, also=staged)
            except _TooLarge as exc:
                # Written in pages first, each while the operation is pending; then its last
                # page commits with the settlement (a fresh read: the pages changed it).
                recorded = exc.recorded
                pages = recorded.pages(PAGE_WRITES, PAGE_BYTES)
                for number, page in enumerate(pages[:-1], start=1):
                    try:
                        if not self._commit_page(ref, name, page, number):
                            break  # settled meanwhile: the next attempt says so
                    except StoreUnavailable as refused:
                        if not find_cause(refused, gexc.InvalidArgument):
                            raise
                        # Firestore refused a page: no retry could write it (as below).
                        fresh = self._commits.read(ref, name)
                        if (fresh.to_dict() or {}).get("status") != PENDING:
                            raise Conflict(f"operation {name}: settled meanwhile") from refused
                        reason = f"Firestore refused the write-back: {refused}"
                        return self._settle_without_writeback(
                            ref, fresh, record, update, reason, staged
                        )
                last = pages[-1]
                last_page.append(lambda writes, current: recorded.replay(writes, last))
                raise Conflict(f"operation {name}: its write-back was written in pages") from exc
            except _WritebackRejected as exc:
                return self._settle_without_writeback(
                    ref, snapshot, record, update, exc.reason, staged
                )
            except _WritebackFault as exc:
                raise self._count_fault(ref, record.name, exc.reason) from exc.__cause__
            except REFUSED as exc:
                # The operation is unchanged, so one of the write-back's own writes was refused.
                reason = f"write-back refused by Firestore: {exc}"
                if writeback is None:
                    raise WritebackFailed(f"operation {record.name}: {reason}") from exc
                raise self._count_fault(ref, record.name, reason) from exc
            except Exception as exc:
                if writeback is None or not find_cause(exc, gexc.InvalidArgument):
                    raise
                # Our own update is small and valid: Firestore refused what the write-back staged.
                reason = f"Firestore refused the write-back: {exc}"
                return self._settle_without_writeback(ref, snapshot, record, update, reason, staged)
            return Settled(Settlement.SETTLED, also_applied=staged is not None)

        return self._commits.retrying(name, attempt)

    def _commit_page(self, ref: Any, name: str, page: Sequence[Any], number: int) -> bool:
        """Commit one page of a write-back while the operation is pending; False if not.

        Firestore takes at most 500 writes (and 10 MiB) per commit; an item of 1,200 files
        writes 1,200 documents. A write-back is the same on every attempt, so a page written
        again after a crash writes the same documents; until the settling commit the
        operation stays pending, and no page is written once another caller settled it."""

        def attempt() -> bool:
            snapshot = self._commits.read(ref, name)
            if not snapshot.exists or (snapshot.to_dict() or {}).get("status") != PENDING:
                return False

            def body(txn: Any) -> None:
                RecordedWrites.write(txn, page)
                mark = {WRITEBACK_PAGES: number}
                txn.update(ref, mark, option=self._commits.unchanged_since(snapshot))

            self._commits.commit(body, ref, snapshot)
            return True

        return self._commits.retrying(name, attempt)

    def _count_fault(self, ref: Any, name: str, reason: str) -> WritebackFaulted:
        """Count a write-back's own failure on the pending operation; the error to raise.

        One conditional write on a fresh read, in the failing path only (a settlement that
        commits writes nothing more). Raises `Conflict` (re-read, decide again) when the
        operation changed or was settled meanwhile: the next attempt answers for it.
        """
        snapshot = self._commits.read(ref, name)
        data = snapshot.to_dict() or {}
        if not snapshot.exists or data.get("status") != PENDING:
            raise Conflict(f"operation {name}: settled while its write-back failed")
        stored = data.get(WRITEBACK_FAILURES)
        failures = (stored if isinstance(stored, int) and stored > 0 else 0) + 1
        self._commits.update_if_unchanged(ref, snapshot, {WRITEBACK_FAILURES: failures})
        return WritebackFaulted(
            f"operation {name}: write-back failed ({failures} so far): {reason}",
            failures=failures,
            reason=reason,
        )

    def _settle_without_writeback(
        self,
        ref: Any,
        snapshot: Any,
        record: Operation,
        update: dict[str, Any],
        reason: str,
        staged: Staged | None,
    ) -> Settled:
        """Settle with `writeback_error` and no result documents: no retry could write them.

        Conditional on the same read as the failed attempt; a concurrent settle makes it a
        `Conflict`, which re-reads and finds the operation settled. `staged` goes with it.
        """
        settled = {**update, WRITEBACK_ERROR: clip_error(reason)}
        self._commits.commit(
            lambda txn: txn.update(ref, settled, option=self._commits.unchanged_since(snapshot)),
            ref,
            snapshot,
            also=staged,
        )
        log_event(
            log,
            logging.ERROR,
            "write-back failed permanently; settled without it",
            operation=record.name,
            kind=record.kind,
            status=update["status"],
            reason=clip_error(reason),
            alert="writeback_failed",
        )
        return Settled(Settlement.SETTLED, also_applied=staged is not None)


class _TooLarge(HookledgerError):
    """The write-back staged more than one commit takes: raised inside the settle
    transaction (rolling it back) with every write it recorded, to be written in pages."""

    def __init__(self, recorded: RecordedWrites) -> None:
        super().__init__(f"{len(recorded.writes)} writes")
        self.recorded = recorded


class _WritebackFault(TransientError):
    """The write-back raised an exception outside the error tree: count it (`_count_fault`).

    Raised inside the settle transaction to roll it back, and caught by `settle` itself."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _WritebackRejected(PermanentError):
    """The write-back raised a non-retryable error: settle without it (never retry forever).

    Raised inside the settle transaction to roll it back, and caught by `settle` itself;
    not a `LedgerError`, so `Commits.commit` treats it as it treats the write-back's own."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _stage(writeback: Writeback, writes: ResultWrites, record: Operation) -> None:
    """Run the write-back; sort what it raises into retry-now, retry-later, count a fault,
    or settle-without.

    ABORTED (lock contention on its reads) propagates for the commit's backoff; a
    non-retryable error (`errors.retryable` false, e.g. `InvalidArgument` from `writes.put`)
    becomes `_WritebackRejected`, and the operation settles with the reason; an exception
    outside the error tree that is not Firestore's (a bug) becomes `_WritebackFault`,
    counted on the operation (`WritebackFaulted`); a transient error of the tree or of
    Firestore (an outage) is `WritebackFailed`, not counted: the operation stays pending.
    """
    try:
        writeback(writes, record)
    except Exception as exc:
        if find_cause(exc, gexc.Aborted):
            raise
        if not retryable(exc):
            raise _WritebackRejected(f"write-back failed: {exc}") from exc
        if not isinstance(exc, HookledgerError) and not find_cause(exc, gexc.GoogleAPIError):
            raise _WritebackFault(f"{type(exc).__name__}: {exc}") from exc
        raise WritebackFailed(f"operation {record.name}: write-back failed: {exc}") from exc


def _stored(item: OutboxItem) -> dict[str, Any]:
    """An item as the operation stores it (its key is derived from its place, not stored)."""
    fields = item.to_dict()
    fields.pop("idempotency_key", None)
    return fields


def _check_settle(name: str, status: str, by: str, error: Any, outbox: Any) -> None:
    if status not in TERMINAL_STATUSES:
        raise InvalidArgument(
            f"operation {name}: status must be one of {sorted(TERMINAL_STATUSES)}, got {status!r}"
        )
    if by not in SETTLED_BY:
        raise InvalidArgument(
            f"operation {name}: by must be one of {sorted(SETTLED_BY)}, got {by!r}"
        )
    if error is not None and not isinstance(error, str | Mapping):
        raise InvalidArgument(f"operation {name}: error must be a string or a mapping")
    if outbox is not None and isinstance(outbox, str | bytes | Mapping):
        raise InvalidArgument(f"operation {name}: outbox must be a list of items")
