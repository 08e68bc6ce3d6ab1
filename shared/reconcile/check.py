"""One operation's check: poll Gemini, settle if it ended, else alert if stuck and defer."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import NamedTuple

from google.api_core import exceptions as gexc

from shared import logs, tracing
from shared.clock import Clock
from shared.gemini import GeminiError, GeminiNotFound, GeminiRateLimited, GeminiUnavailable
from shared.ledger import LedgerError, Operation
from shared.ledger.protocols import DeferLedger
from shared.reconcile.report import RunReport
from shared.reconcile.stuck import StuckAlerts
from shared.retry import Backoff
from shared.settlement.settler import RUNNING, Settler

log = logs.get_logger("reconcile")

BY = "reconcile"

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


class OperationCheck:
    """`check(record, report)`: the same check for a run's due pages and a fanned-out page.

    Terminal → settled once through the `Settler` (by="reconcile"), with the webhook
    path's write-back and outbox. Still running, or Gemini unavailable / not found /
    refusing → left pending with `attempts + 1` and `next_check_at` pushed back by
    `backoff`; a 429 pushes it back at least as far as Gemini's `RetryInfo.retryDelay`
    (an hour or more for a per-day quota, with a `gemini_quota_exhausted` alert), a first
    404 at least until a second one may confirm it gone (the `Settler` settles it then).
    Waiting on its caller → `operation_waiting` alert once per window, then deferred.
    Nothing else is settled from an error. Never raises.
    """

    def __init__(
        self,
        settler: Settler,
        ledger: DeferLedger,
        clock: Clock,
        *,
        backoff: Backoff,
        stuck: StuckAlerts,
        rand: Callable[[], float],
    ) -> None:
        self._settler = settler
        self._ledger = ledger
        self._clock = clock
        self._backoff = backoff
        self._stuck = stuck
        self._rand = rand
        self._rand_lock = threading.Lock()  # an injected `rand` need not be thread-safe

    def backoff_s(self, attempts: int) -> float:
        """Seconds until the next check after `attempts` checks (`Backoff.delay`)."""
        with self._rand_lock:
            r = self._rand()
        return self._backoff.delay(attempts, lambda: r)

    def __call__(self, record: Operation, report: RunReport) -> None:
        # In the push's trace (the run's own trace is linked): one waterfall per push.
        with tracing.span_in(record.trace, "reconcile.check", operation=record.name):
            self._check(record, report)

    def _check(self, record: Operation, report: RunReport) -> None:
        report.add(examined=1)
        name = record.name
        try:
            outcome = self._settler.settle(name, BY, record=record)
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
                self._keep_pending(
                    record, report, f"{type(exc).__name__}: {exc}", _at_least_s(exc, record)
                )
            return
        report.add(**{_OUTCOME_COUNTERS.get(outcome.result, "errors"): 1})
        if outcome.result == RUNNING:
            answer = "still running"
            if outcome.waits_for:
                answer = f"waiting for {outcome.waits_for}"
                self._alert_waiting(record, report, outcome.waits_for)
            self._keep_pending(record, report, answer)

    def _alert_waiting(self, record: Operation, report: RunReport, waits_for: str) -> None:
        try:
            if self._stuck.alert_if_waiting(record, waits_for):
                report.add(waiting_alerts=1)
        except (LedgerError, gexc.GoogleAPIError) as exc:
            report.add(errors=1)
            logs.event(
                log,
                logging.ERROR,
                f"alerting that {record.name} waits failed",
                operation=record.name,
                reason=str(exc),
            )

    def _keep_pending(
        self,
        record: Operation,
        report: RunReport,
        answer: str,
        at_least_s: float | None = None,
    ) -> None:
        """Alert if stuck, then push `next_check_at` back with backoff (at least `at_least_s`),
        noting Gemini's answer on the operation."""
        try:
            if self._stuck.alert_if_stuck(record):
                report.add(stuck_alerts=1)
            delay = max(self.backoff_s(record.attempts), at_least_s or 0.0)
            at = self._clock() + timedelta(seconds=delay)
            if self._ledger.defer(record.name, at, record.attempts + 1, answer=answer):
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


def _at_least_s(exc: Exception, record: Operation) -> float | None:
    """How long the failure says to wait at least: Gemini's own wait for a 429 (a per-day
    quota is alerted), or until a 404 can be confirmed gone; None for any other failure."""
    if isinstance(exc, GeminiNotFound):
        return exc.recheck_after_s
    if not isinstance(exc, GeminiRateLimited):
        return None
    if exc.quota_kind in ("per_day", "spend"):  # lasts: an operator should know
        logs.event(
            log,
            logging.ERROR,
            f"Gemini's {exc.quota_kind} quota is exhausted; {record.name} is checked again later",
            alert="gemini_quota_exhausted",
            operation=record.name,
            quota_kind=exc.quota_kind,
            quota_ids=list(exc.quota_ids),
            defer_s=exc.defer_s,
        )
    return exc.defer_s
