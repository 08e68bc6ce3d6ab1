"""Reconcile: find every operation a webhook missed and settle it the way the worker does.

Webhooks are the fast path, never the only one. A run, called by Cloud Scheduler:

1. reads the due operations page by page (`status == pending`, `next_check_at <= now`,
   ordered, cursor-paged: `Ledger.due_pending`), never the whole collection;
2. checks each through `settle_from_gemini(..., by="reconcile")` with at most
   `concurrency` Gemini calls in flight: terminal → settled once, with the same
   write-back as the webhook path; still running, Gemini unavailable (429/5xx/timeout),
   not found or rejected → left pending, `attempts + 1`, `next_check_at` pushed back
   by a capped, jittered exponential backoff (30 s → 30 min). Nothing is ever settled
   from an error;
3. adopts orphans: Gemini batches from the last `ORPHAN_WINDOW` tagged `hookledger:`
   (`gemini.TAG_PREFIX`) that are not in the ledger (a crash between create and
   register) are registered, then checked; untagged batches are left alone, and batches
   just read as due cost no second read;
4. reports an operation pending longer than `stuck_after_s` with one ERROR log
   (`alert="operation_stuck"`, `operation`, `kind`, `age_s`) per alert window, recorded
   as `stuck_alerted_at` on the operation by a conditional write, so overlapping runs
   alert once; a stuck operation is never closed;
5. sweeps settled operations whose outbox is unfinished (`Ledger.sweep_outbox`);
6. stops taking new work once `budget_s` is spent (monotonic clock) and logs how far it
   got; due operations stay due, so the next run resumes.

When more than `fanout_threshold` operations are due, the run does not poll them itself:
it hands each page to `enqueue_page(page)` (a Cloud Task per page, deterministic names,
see `page_task_id`) and the worker calls `Reconciler.check_names(names)` for the page,
which is the same check as above.

Overlapping runs, and a run racing the webhook, are safe: the ledger settles each
operation once, and `defer` does nothing once an operation is settled.
"""

from __future__ import annotations

import json
import logging
import random
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, fields
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from google.api_core import exceptions as gexc

from shared import logs, review
from shared.clock import Clock, system_clock
from shared.clock import monotonic as system_monotonic
from shared.config import FIRESTORE_TIMEOUT_S, Config
from shared.gemini import (
    TAG_PREFIX,
    TERMINAL_STATES,
    GeminiError,
    GeminiGateway,
    GeminiNotFound,
    GeminiUnavailable,
)
from shared.ledger import OPERATIONS, PENDING, Ledger, LedgerError, Operation, OutboxItem
from shared.settlement import RUNNING, settle_from_gemini
from shared.tasks import task_id_for

log = logs.get_logger("reconcile")

BY = "reconcile"
REVIEW_TAG_PREFIX = f"{TAG_PREFIX}review:"
GEMINI_MAX_PENDING = timedelta(hours=48)  # Gemini expires a batch pending this long
# Orphans are looked for among batches this young: past Gemini's 48 h expiry with a day's
# slack, so the reads per run stay bounded however many batches the project has made.
ORPHAN_WINDOW = timedelta(hours=72)

# How long a run waits, past its budget, for checks already in flight.
DRAIN_S = 30.0

Progress = Callable[[str, int, int], None]
"""`progress(phase, done, total)`: how many of a phase's operations have been checked."""
BACKOFF_FIRST_S = 30.0
BACKOFF_CAP_S = 30 * 60.0
STUCK_ALERTED_AT = "stuck_alerted_at"

EnqueuePage = Callable[[Sequence[Operation], str], Any]
"""`enqueue_page(page, task_id)`: hand one page of due operations to a worker (idempotent
on `task_id`: a second call with the same id must not create a second task)."""

Deliver = Callable[[OutboxItem], None]

# ----------------------------------------------------------------------- outbox delivery

_DELIVERERS: dict[str, Deliver] = {}


def outbox_deliverer(kind: str) -> Callable[[Deliver], Deliver]:
    """Register how to deliver outbox items whose payload has `{"kind": kind, ...}`."""

    def register(fn: Deliver) -> Deliver:
        if kind in _DELIVERERS and _DELIVERERS[kind] is not fn:
            raise ValueError(f"an outbox deliverer for kind {kind!r} is already registered")
        _DELIVERERS[kind] = fn
        return fn

    return register


def default_deliver(item: OutboxItem) -> None:
    """Deliver `item` with the deliverer registered for its payload's `kind`.

    With none registered it raises (naming the operation and key), so the item stays
    undelivered and is reported each sweep rather than silently dropped.
    """
    kind = item.payload.get("kind") if isinstance(item.payload, dict) else None
    fn = _DELIVERERS.get(kind) if isinstance(kind, str) else None
    if fn is None:
        raise LookupError(
            f"operation {item.operation}: no outbox deliverer registered for kind {kind!r} "
            f"(item {item.idempotency_key})"
        )
    fn(item)


# ----------------------------------------------------------------------- report


@dataclass
class RunReport:
    """What one run (or one `check_names` call) did. `to_dict()` is JSON-ready."""

    examined: int = 0
    settled: int = 0
    already_settled: int = 0
    unknown: int = 0
    still_running: int = 0
    deferred: int = 0
    unavailable: int = 0
    not_found: int = 0
    errors: int = 0
    stuck_alerts: int = 0
    adopted: int = 0
    swept: int = 0
    sweep_failed: int = 0
    pages: int = 0
    fanned_out_pages: int = 0
    fanned_out_ops: int = 0
    abandoned: int = 0  # checks still running when the run had to answer (they finish alone)
    stopped_early: bool = False
    stopped_at: str = ""  # the phase the deadline stopped: adopt|poll|fanout|sweep
    last_examined: str | None = None  # the last operation whose check started (cursor)
    elapsed_s: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, **counts: int) -> None:
        with self._lock:
            for name, value in counts.items():
                setattr(self, name, getattr(self, name) + value)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "_lock"}


_OUTCOME_COUNTERS = {
    "settled": "settled",
    "already_settled": "already_settled",
    "unknown": "unknown",
    RUNNING: "still_running",
}


class _Failure(NamedTuple):
    counter: str | None  # the RunReport field counted besides `errors`
    level: int
    message: str  # formatted with the operation's `name`
    defer: bool  # Gemini answered: back off; otherwise the operation simply stays due
    traceback: bool = False  # unexpected: log where it came from


def _failure(exc: Exception) -> _Failure:
    """How a failed check is counted and logged, and whether its operation is deferred."""
    if isinstance(exc, GeminiUnavailable):
        return _Failure("unavailable", logging.WARNING, "Gemini unavailable for {name}", True)
    if isinstance(exc, GeminiNotFound):
        return _Failure("not_found", logging.ERROR, "Gemini does not know {name}", True)
    if isinstance(exc, GeminiError):
        return _Failure(None, logging.ERROR, "Gemini refused to report {name}", True)
    if isinstance(exc, LedgerError):
        return _Failure(None, logging.ERROR, "settling {name} failed; it stays due", False)
    return _Failure(None, logging.ERROR, "checking {name} failed unexpectedly", False, True)


# ----------------------------------------------------------------------- reconciler


class Reconciler:
    """One reconcile run per `run()`; see the module docstring for what callers may rely on."""

    def __init__(
        self,
        ledger: Ledger,
        gemini: GeminiGateway,
        firestore_client: Any,
        clock: Clock,
        *,
        grace_s: float,
        concurrency: int = 8,
        budget_s: float,
        stuck_after_s: float,
        page_size: int = 100,
        fanout_threshold: int = 500,
        enqueue_page: EnqueuePage | None = None,
        fanout_window_s: float = 300.0,
        alert_window_s: float | None = None,
        deliver: Deliver = default_deliver,
        adopt_orphans: bool = True,
        backoff_first_s: float = BACKOFF_FIRST_S,
        backoff_cap_s: float = BACKOFF_CAP_S,
        monotonic: Callable[[], float] = system_monotonic,
        rand: Callable[[], float] = random.random,
        drain_s: float = DRAIN_S,
    ) -> None:
        if not isinstance(concurrency, int) or concurrency < 1:
            raise ValueError(f"concurrency must be an integer ≥ 1, got {concurrency!r}")
        if not isinstance(page_size, int) or not 1 <= page_size <= 1000:
            raise ValueError(f"page_size must be an integer in 1..1000, got {page_size!r}")
        if not isinstance(fanout_threshold, int) or fanout_threshold < 1:
            raise ValueError(f"fanout_threshold must be an integer ≥ 1, got {fanout_threshold!r}")
        if grace_s < 0 or budget_s <= 0:
            raise ValueError(f"need grace_s ≥ 0 and budget_s > 0, got {grace_s}, {budget_s}")
        if not 0 < stuck_after_s < GEMINI_MAX_PENDING.total_seconds():
            raise ValueError(
                "stuck_after_s must be positive and below Gemini's 48 h expiry, "
                f"got {stuck_after_s}"
            )
        if not 0 < backoff_first_s <= backoff_cap_s:
            raise ValueError(f"need 0 < backoff_first_s ≤ backoff_cap_s, got {backoff_first_s}")
        self._ledger = ledger
        self._gemini = gemini
        self._client = firestore_client
        self._clock = clock
        self._grace = timedelta(seconds=grace_s)
        self._concurrency = concurrency
        self._budget_s = float(budget_s)
        self._stuck_after = timedelta(seconds=stuck_after_s)
        self._alert_window = timedelta(seconds=alert_window_s or stuck_after_s)
        self._page_size = page_size
        self._fanout_threshold = fanout_threshold
        self._enqueue_page = enqueue_page
        self._fanout_window_s = fanout_window_s
        self._deliver = deliver
        self._adopt_orphans = adopt_orphans
        self._backoff_first_s = backoff_first_s
        self._backoff_cap_s = backoff_cap_s
        self._monotonic = monotonic
        self._drain_s = drain_s
        self._rand = rand
        self._rand_lock = threading.Lock()

    # ------------------------------------------------------------------- public

    @classmethod
    def from_config(
        cls, config: Config, ledger: Ledger, gemini: GeminiGateway, client: Any, **extra: Any
    ) -> Reconciler:
        """A Reconciler with the deployment's settings (`RECONCILE_*`, `STUCK_AFTER_S`)."""
        return cls(
            ledger,
            gemini,
            client,
            system_clock,
            grace_s=config.reconcile_grace_s,
            concurrency=config.reconcile_concurrency,
            budget_s=config.reconcile_budget_s,
            stuck_after_s=config.stuck_after_s,
            fanout_threshold=config.reconcile_fanout_threshold,
            **extra,
        )

    def run(self, progress: Progress | None = None) -> RunReport:
        """One pass: check due operations (or fan them out), adopt orphans, sweep outboxes.

        `progress(phase, done, total)` is told how far each phase's checks got (a CLI bar).
        """
        started = self._monotonic()
        deadline = started + self._budget_s
        report = RunReport()
        now = self._clock()
        seen: set[str] = set()
        self._due(now, report, deadline, progress, seen)
        # After the due pages: a batch just read there is known to the ledger, no read needed.
        if self._adopt_orphans and not report.stopped_early:
            if self._monotonic() >= deadline:
                self._stop(report, "adopt", None)  # listing Gemini's batches takes time too
            elif adopted := self._adopt(report, deadline, seen):
                self._check_all(adopted, report, deadline, "adopt", progress)
        if not report.stopped_early:
            self._sweep(report, deadline)
        report.elapsed_s = round(self._monotonic() - started, 3)
        level = logging.WARNING if report.stopped_early else logging.INFO
        message = (
            f"reconcile stopped at its {self._budget_s:g} s budget during {report.stopped_at}; "
            "the next run resumes"
            if report.stopped_early
            else "reconcile run finished"
        )
        logs.event(log, level, message, **report.to_dict())
        return report

    def check_names(self, names: Iterable[str]) -> RunReport:
        """Check the named operations now (the worker side of fan-out), same path as `run`.

        Unknown names are counted, not errors; a settled one is `already_settled`.
        """
        started = self._monotonic()
        deadline = started + self._budget_s
        report = RunReport()
        records: list[Operation] = []
        for name in names:
            try:
                record = self._ledger.get(name)
            except LedgerError as exc:
                report.add(errors=1)
                logs.event(
                    log,
                    logging.ERROR,
                    f"check-page: reading {name} failed",
                    operation=name,
                    reason=str(exc),
                )
                continue
            if record is None:
                report.add(unknown=1)
            elif not record.pending:
                report.add(already_settled=1)
            else:
                records.append(record)
        self._check_all(records, report, deadline, "poll")
        report.elapsed_s = round(self._monotonic() - started, 3)
        return report

    def backoff_s(self, attempts: int) -> float:
        """Seconds until the next check after `attempts` checks: jittered in [c/2, c],
        c = min(cap, first · 2^attempts)."""
        ceiling = min(self._backoff_cap_s, self._backoff_first_s * 2 ** min(attempts, 32))
        with self._rand_lock:
            r = self._rand()
        return ceiling / 2 + ceiling / 2 * r

    # ------------------------------------------------------------------- phases

    def _due(
        self,
        now: datetime,
        report: RunReport,
        deadline: float,
        progress: Progress | None = None,
        seen: set[str] | None = None,
    ) -> None:
        """Read due pages; poll them, or fan them out once more than the threshold are due.

        The name of every operation read is added to `seen`.
        """
        pages = self._pages(now, report, seen if seen is not None else set())
        buffered: list[list[Operation]] = []
        count = 0
        exhausted = True
        for page in pages:
            buffered.append(page)
            count += len(page)
            if count > self._fanout_threshold and self._enqueue_page is not None:
                exhausted = False
                break
        if exhausted:
            due = [op for page in buffered for op in page]
            self._check_all(due, report, deadline, "poll", progress)
            return
        logs.event(
            log,
            logging.INFO,
            "more operations due than one run polls; fanning out",
            due_at_least=count,
            threshold=self._fanout_threshold,
        )
        window = self._window_key(now)
        for page in _chain(buffered, pages):
            if self._monotonic() >= deadline:
                self._stop(report, "fanout", page[0].name)
                return
            task_id = page_task_id(window, page)
            try:
                assert self._enqueue_page is not None
                self._enqueue_page(page, task_id)
            except Exception as exc:  # a failed page stays due: the next run enqueues it
                report.add(errors=1)
                logs.event(
                    log,
                    logging.ERROR,
                    f"enqueuing check page {task_id} failed",
                    task_id=task_id,
                    first=page[0].name,
                    last=page[-1].name,
                    reason=str(exc),
                )
                continue
            report.add(fanned_out_pages=1, fanned_out_ops=len(page))
            report.last_examined = page[-1].name

    def _pages(self, now: datetime, report: RunReport, seen: set[str]) -> Iterator[list[Operation]]:
        cursor: Operation | None = None
        while True:
            try:
                page = self._ledger.due_pending(now, self._page_size, start_after=cursor)
            except LedgerError as exc:
                report.add(errors=1)
                logs.event(
                    log,
                    logging.ERROR,
                    "reading due operations failed",
                    after=cursor.name if cursor else None,
                    reason=str(exc),
                )
                return
            if not page:
                return
            report.add(pages=1)
            seen.update(op.name for op in page)
            yield page
            if len(page) < self._page_size:
                return
            cursor = page[-1]

    def _check_all(
        self,
        records: Sequence[Operation],
        report: RunReport,
        deadline: float,
        phase: str,
        progress: Progress | None = None,
    ) -> None:
        """Check `records` with at most `concurrency` in flight; stop submitting at `deadline`."""
        if not records:
            return
        total, done, lock = len(records), [0], threading.Lock()

        def tick(_: Future[None]) -> None:
            with lock:
                done[0] += 1
                count = done[0]
            if progress is not None:
                progress(phase, count, total)

        if progress is not None:
            progress(phase, 0, total)
        pool = ThreadPoolExecutor(self._concurrency, thread_name_prefix="reconcile")
        in_flight: set[Future[None]] = set()
        try:
            for record in records:
                if self._monotonic() >= deadline:
                    self._stop(report, phase, record.name)
                    break
                while len(in_flight) >= self._concurrency:
                    _, in_flight = wait(
                        in_flight,
                        timeout=max(0.0, deadline - self._monotonic()),
                        return_when=FIRST_COMPLETED,
                    )
                    if self._monotonic() >= deadline:
                        break  # no new check starts past the budget
                else:
                    report.last_examined = record.name
                    future = pool.submit(self._check, record, report)
                    future.add_done_callback(tick)
                    in_flight.add(future)
                    continue
                self._stop(report, phase, record.name)
                break
            _, in_flight = wait(in_flight, timeout=self._left(deadline))
        finally:
            # A check stuck past the drain time is left to finish on its own: its commit is
            # atomic, and the function must answer before its platform timeout.
            report.add(abandoned=len(in_flight))
            pool.shutdown(wait=not in_flight, cancel_futures=True)

    def _left(self, deadline: float) -> float:
        """Seconds until the drain time after `deadline` runs out (at least 0)."""
        return max(0.0, deadline + self._drain_s - self._monotonic())

    def _check(self, record: Operation, report: RunReport) -> None:
        """Poll one operation and settle or defer it; never raises (each failure is logged)."""
        report.add(examined=1)
        name = record.name
        try:
            outcome = settle_from_gemini(
                self._ledger, self._gemini, self._client, name, BY, record=record
            )
        except Exception as exc:  # one operation's failure never ends the run
            failure = _failure(exc)
            report.add(errors=1, **({failure.counter: 1} if failure.counter else {}))
            logs.event(
                log,
                failure.level,
                failure.message.format(name=name) + ("; left pending" if failure.defer else ""),
                operation=name,
                kind=record.kind,
                reason=f"{type(exc).__name__}: {exc}",
                exc_info=failure.traceback,
            )
            if failure.defer:
                self._keep_pending(record, report)
            return
        report.add(**{_OUTCOME_COUNTERS.get(outcome.result, "errors"): 1})
        if outcome.result == RUNNING:
            self._keep_pending(record, report)

    def _keep_pending(self, record: Operation, report: RunReport) -> None:
        """Alert if stuck, then push `next_check_at` back with backoff."""
        try:
            if self._alert_if_stuck(record):
                report.add(stuck_alerts=1)
            at = self._clock() + timedelta(seconds=self.backoff_s(record.attempts))
            if self._ledger.defer(record.name, at, record.attempts + 1):
                report.add(deferred=1)
        except (LedgerError, gexc.GoogleAPIError) as exc:
            report.add(errors=1)
            logs.event(
                log,
                logging.ERROR,
                f"deferring {record.name} failed; it stays due",
                operation=record.name,
                reason=str(exc),
            )

    def _alert_if_stuck(self, record: Operation) -> bool:
        """One ERROR log per operation per alert window; True when this call logged it.

        Timeline it closes (two overlapping runs A and B)::

            A reads v1 (no alert yet)      B reads v1 (no alert yet)
            A writes stuck_alerted_at on condition "still v1" → v2, A logs
                                           B writes on condition "still v1" → refused
                                           B re-reads v2: alerted this window → no log
        """
        now = self._clock()
        age = now - record.submitted_at
        if age < self._stuck_after:
            return False
        ref = self._client.collection(OPERATIONS).document(record.doc_id)
        for _ in range(3):
            snapshot = ref.get(timeout=FIRESTORE_TIMEOUT_S)
            data = snapshot.to_dict() or {}
            if not snapshot.exists or data.get("status") != PENDING:
                return False
            alerted = data.get(STUCK_ALERTED_AT)
            if alerted is not None and now - alerted < self._alert_window:
                return False
            option = self._client.write_option(last_update_time=snapshot.update_time)
            try:
                ref.update({STUCK_ALERTED_AT: now}, option=option, timeout=FIRESTORE_TIMEOUT_S)
            except (gexc.FailedPrecondition, gexc.NotFound):
                continue  # changed under us (another run, a defer): decide again
            logs.event(
                log,
                logging.ERROR,
                f"operation {record.name} pending for {int(age.total_seconds())} s",
                alert="operation_stuck",
                operation=record.name,
                kind=record.kind,
                age_s=int(age.total_seconds()),
                attempts=record.attempts,
                submitted_at=record.submitted_at,
            )
            return True
        return False

    def _adopt(self, report: RunReport, deadline: float, known: set[str]) -> list[Operation]:
        """Register tagged batches missing from the ledger; returns them, to check now."""
        adopted: list[Operation] = []
        cutoff = self._clock() - ORPHAN_WINDOW
        batches = self._gemini.list_batches()  # lazy: one page at a time, within the budget
        while True:
            if self._monotonic() >= deadline:
                self._stop(report, "adopt", None)
                break
            try:
                name, display_name, state, created = next(batches)
            except StopIteration:
                break
            except GeminiError as exc:
                report.add(errors=1)
                logs.event(
                    log,
                    logging.WARNING,
                    "listing Gemini batches failed; adoption stopped",
                    reason=str(exc),
                )
                break
            if not display_name.startswith(TAG_PREFIX) or not name:
                continue  # not ours: never touched
            if created is not None and created < cutoff:
                continue  # long expired in Gemini; checking it would cost a read every run
            if name in known:
                continue  # read from the ledger moments ago
            try:
                if self._ledger.get(name) is not None:
                    continue
                record = self._register_orphan(name, display_name, state)
            except (LedgerError, GeminiError) as exc:
                report.add(errors=1)
                logs.event(
                    log,
                    logging.ERROR,
                    f"adopting orphan batch {name} failed",
                    operation=name,
                    display_name=display_name,
                    reason=str(exc),
                )
                continue
            if record is not None:
                report.add(adopted=1)
                adopted.append(record)
        return adopted

    def _register_orphan(self, name: str, tag: str, state: str) -> Operation | None:
        if not tag.startswith(REVIEW_TAG_PREFIX) or "@" not in tag:
            logs.event(
                log,
                logging.WARNING,
                f"tagged batch {name} has an unknown kind; not adopted",
                operation=name,
                display_name=tag,
            )
            return None
        repo, _, sha = tag.removeprefix(REVIEW_TAG_PREFIX).rpartition("@")
        paths: list[str] = []
        if state in TERMINAL_STATES:
            paths = [row.key for row in self._gemini.fetch_batch(name).rows]
        record = self._ledger.register(
            name, review.KIND, {"repo": repo, "sha": sha, "paths": paths}
        )
        logs.event(
            log,
            logging.WARNING,
            f"adopted orphan batch {name}",
            operation=name,
            kind=review.KIND,
            repo=repo,
            sha=sha,
            files=len(paths),
        )
        return record

    def _sweep(self, report: RunReport, deadline: float) -> None:
        if self._monotonic() >= deadline:
            self._stop(report, "sweep", None)
            return
        try:
            swept = self._ledger.sweep_outbox(
                self._deliver, older_than=self._grace, limit=self._page_size
            )
        except LedgerError as exc:
            report.add(errors=1)
            logs.event(log, logging.ERROR, "outbox sweep failed", reason=str(exc))
            return
        report.add(swept=len(swept.completed), sweep_failed=len(swept.failed))

    def _stop(self, report: RunReport, phase: str, next_name: str | None) -> None:
        report.stopped_early = True
        report.stopped_at = phase
        logs.event(
            log,
            logging.WARNING,
            f"reconcile budget spent during {phase}",
            phase=phase,
            next_operation=next_name,
            examined=report.examined,
        )

    def _window_key(self, now: datetime) -> str:
        window = int(now.timestamp() // self._fanout_window_s)
        return f"w{window}"


def page_task_id(window: str, page: Sequence[Operation]) -> str:
    """A Cloud Tasks id for one page: same window and same first/last operation, same id,
    so overlapping runs in one window do not double a page."""
    return task_id_for("reconcile-page", window, page[0].name, page[-1].name, str(len(page)))


def _chain(
    first: list[list[Operation]], rest: Iterator[list[Operation]]
) -> Iterator[list[Operation]]:
    yield from first
    yield from rest


# ----------------------------------------------------------------------- fan-out via Cloud Tasks

CHECK_PAGE_SOURCE = "hookledger"
CHECK_PAGE_EVENT = "check-page"
MAX_PAGE_NAMES = 1000


def page_payload(page: Sequence[Operation]) -> bytes:
    """The body of one check-page task: `{"names": [...]}`."""
    return json.dumps({"names": [record.name for record in page]}).encode("utf-8")


def page_names(body: bytes) -> list[str]:
    """The operation names in a check-page body; `ValueError` naming the problem otherwise."""
    try:
        data = json.loads(body)
    except ValueError as exc:
        raise ValueError(f"check-page body is not JSON: {exc}") from None
    names = data.get("names") if isinstance(data, dict) else None
    if not isinstance(names, list) or not names or len(names) > MAX_PAGE_NAMES:
        raise ValueError(f"check-page body needs 'names': a list of 1..{MAX_PAGE_NAMES} names")
    if not all(isinstance(name, str) and name for name in names):
        raise ValueError("check-page 'names' must all be non-empty strings")
    return names


class TaskPageEnqueuer:
    """`enqueue_page` for production: one named Cloud Task per page, POSTed to `url`.

    `seal(task_id, payload) -> bytes` wraps the payload the way the worker verifies it
    (a signed envelope). A page already enqueued under the same id counts as done.
    """

    def __init__(
        self,
        queue: Any,
        url: str,
        seal: Callable[[str, bytes], bytes],
        *,
        oidc_service_account: str | None = None,
        oidc_audience: str | None = None,
    ) -> None:
        self._queue = queue
        self._url = url
        self._seal = seal
        self._oidc_service_account = oidc_service_account
        self._oidc_audience = oidc_audience

    def __call__(self, page: Sequence[Operation], task_id: str) -> str:
        """Create the task; returns `created` or `duplicate`. Raises `tasks.EnqueueError`."""
        result = self._queue.enqueue(
            self._url,
            self._seal(task_id, page_payload(page)),
            {"Content-Type": "application/json"},
            task_id=task_id,
            oidc_service_account=self._oidc_service_account,
            oidc_audience=self._oidc_audience,
        )
        return str(result.status)
