"""The Reconciler: one run's phases in order (due pages, adoption, outbox sweep)."""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from shared import logs
from shared.clock import Clock, system_clock
from shared.clock import monotonic as system_monotonic
from shared.config import Config
from shared.gemini import GeminiGateway
from shared.kinds import Deliverers
from shared.ledger import LedgerError, Operation
from shared.ledger.protocols import ReconcileLedger
from shared.reconcile import fanout
from shared.reconcile.adoption import CLOCK_SKEW, OrphanAdopter
from shared.reconcile.check import OperationCheck
from shared.reconcile.groups import seal_due
from shared.reconcile.outbox_sweep import Deliver, sweep
from shared.reconcile.pool import check_all
from shared.reconcile.report import Budget, Progress, RunReport
from shared.reconcile.selection import due_pages
from shared.reconcile.settings import ReconcileSettings, field_names
from shared.reconcile.stuck import StuckAlerts
from shared.settlement.settler import Settler

log = logs.get_logger("reconcile")

# The share of a run's budget that sealing groups may spend before due operations.
SEAL_SHARE = 0.25


@dataclass(frozen=True)
class Sources:
    """Where a run reads elapsed time (deadlines) and randomness (jitter); tests inject both."""

    monotonic: Callable[[], float] = system_monotonic
    rand: Callable[[], float] = random.random


class Reconciler:
    """One reconcile run per `run()`; see the package docstring for what callers may rely on."""

    def __init__(
        self,
        ledger: ReconcileLedger,
        gemini: GeminiGateway,
        clock: Clock,
        settings: ReconcileSettings | None = None,
        *,
        enqueue_page: fanout.EnqueuePage | None = None,
        deliver: Deliver | None = None,
        sources: Sources | None = None,
    ) -> None:
        self._ledger = ledger
        self._gemini = gemini
        self._clock = clock
        self._settings = settings or ReconcileSettings()
        self._enqueue_page = enqueue_page
        # Without services to deliver with, an item stays undelivered and is alerted on.
        self._deliver = deliver or Deliverers(None)
        self._sources = sources or Sources()
        s = self._settings
        stuck = StuckAlerts(ledger.operations, clock, s.stuck_after, s.alert_window)
        settler = Settler(
            ledger,
            gemini,
            self._deliver,
            clock=clock,
            # Two checks in a row, the backoff's first delay apart, may call a batch gone.
            gone_after=timedelta(seconds=s.backoff.first_s),
        )
        self._check = OperationCheck(
            settler,
            ledger.operations,
            clock,
            backoff=s.backoff,
            stuck=stuck,
            rand=self._sources.rand,
        )
        self._adopter = OrphanAdopter(ledger, gemini, clock, margin=s.grace + CLOCK_SKEW)

    @classmethod
    def from_config(
        cls, config: Config, ledger: ReconcileLedger, gemini: GeminiGateway, **extra: Any
    ) -> Reconciler:
        """A Reconciler with the deployment's settings (`RECONCILE_*`, `STUCK_AFTER_S`).

        `extra` may override any `ReconcileSettings` field (e.g. `adopt_orphans=False`)
        and pass `clock`, `enqueue_page`, `deliver` or `sources`.
        """
        names = field_names()
        overrides = {key: value for key, value in extra.items() if key in names}
        rest = {key: value for key, value in extra.items() if key not in names}
        clock = rest.pop("clock", system_clock)
        settings = ReconcileSettings.from_config(config, **overrides)
        return cls(ledger, gemini, clock, settings, **rest)

    @property
    def settings(self) -> ReconcileSettings:
        return self._settings

    def run(self, progress: Progress | None = None) -> RunReport:
        """One pass: check due operations (or fan them out), adopt orphans, sweep outboxes.

        `progress(phase, done, total)` is told how far each phase's checks got (a CLI bar).
        """
        s = self._settings
        started = self._sources.monotonic()
        started_at = self._clock()
        budget = Budget.starting_now(s.budget_s, s.drain_s, self._sources.monotonic)
        report = RunReport()
        seen: set[str] = set()
        # First, groups left unsealed (a sealer died or waited): their items wait on them.
        # On a share of the budget: groups held by a quota never starve due operations.
        seal_due(
            self._ledger,
            self._gemini,
            started_at,
            grace=s.grace,
            limit=s.page_size,
            report=report,
            budget=budget.share(SEAL_SHARE),
            deliver=self._deliver,
        )
        self._due(started_at, report, budget, progress, seen)
        # After the due pages: a batch just read there is known to the ledger, no read needed.
        if s.adopt_orphans and report.stopped_at in ("", "groups"):
            if budget.spent():
                report.stop("adopt", None)  # listing Gemini's batches takes time too
            elif adopted := self._adopter.adopt(report, budget, seen):
                self._check_all(adopted, report, budget, "adopt", progress)
        # Issue 20 (outbox): the sweep runs even when the phases above spent the budget, on
        # its own allowance, so outboxes never wait on a busy reconcile (docs/architecture.md,
        # "Outbox").
        sweep(
            self._ledger.outbox,
            self._deliver,
            older_than=s.grace,
            limit=s.page_size,
            report=report,
            budget=Budget.starting_now(s.sweep_budget_s, 0.0, self._sources.monotonic),
        )
        report.elapsed_s = round(self._sources.monotonic() - started, 3)
        level = logging.WARNING if report.stopped_early else logging.INFO
        message = (
            f"reconcile stopped at its {s.budget_s:g} s budget during {report.stopped_at}; "
            "the next run resumes"
            if report.stopped_early
            else "reconcile run finished"
        )
        logs.event(log, level, message, **report.to_dict())
        self._record(started_at, report, seen)
        return report

    def check_names(self, names: Iterable[str]) -> RunReport:
        """Check the named operations now (the worker side of fan-out), same path as `run`.

        Unknown names are counted, not errors; a settled one is `already_settled`.
        """
        s = self._settings
        started = self._sources.monotonic()
        budget = Budget.starting_now(s.budget_s, s.drain_s, self._sources.monotonic)
        report = RunReport()
        records: list[Operation] = []
        for name in names:
            try:
                record = self._ledger.operations.get(name)
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
        self._check_all(records, report, budget, "poll")
        report.elapsed_s = round(self._sources.monotonic() - started, 3)
        return report

    def backoff_s(self, attempts: int) -> float:
        """Seconds until the next check after `attempts` checks: `settings.backoff.delay`."""
        return self._check.backoff_s(attempts)

    def _record(self, started_at: datetime, report: RunReport, seen: set[str]) -> None:
        """Keep the run's report for the console; a failure is logged, never fatal to the run."""
        try:
            self._ledger.runs.record(
                started_at,
                self._clock(),
                report.to_dict(),
                examined_ops=sorted(seen),
                budget_s=self._settings.budget_s,
            )
        except Exception as exc:  # the run's work is done; a lost record only hides it
            logs.event(
                log,
                logging.WARNING,
                "recording the reconcile run failed",
                operation="reconcile_runs",
                reason=f"{type(exc).__name__}: {exc}",
            )

    # ------------------------------------------------------------------- phases

    def _due(
        self,
        now: datetime,
        report: RunReport,
        budget: Budget,
        progress: Progress | None,
        seen: set[str],
    ) -> None:
        """Read due pages; poll them, or fan them out once more than the threshold are due.

        The name of every operation read is added to `seen`.
        """
        s = self._settings
        enqueue = self._enqueue_page
        pages = due_pages(self._ledger.operations, now, s.page_size, report, seen)
        buffered: list[list[Operation]] = []
        count = 0
        for page in pages:
            buffered.append(page)
            count += len(page)
            if enqueue is not None and count > s.fanout_threshold:
                logs.event(
                    log,
                    logging.INFO,
                    "more operations due than one run polls; fanning out",
                    due_at_least=count,
                    threshold=s.fanout_threshold,
                )
                window = fanout.window_key(now, s.fanout_window_s)
                fanout.fan_out(_chain(buffered, pages), enqueue, window, report, budget)
                return
        due = [op for page in buffered for op in page]
        self._check_all(due, report, budget, "poll", progress)

    def _check_all(
        self,
        records: list[Operation],
        report: RunReport,
        budget: Budget,
        phase: str,
        progress: Progress | None = None,
    ) -> None:
        check_all(
            records,
            self._check,
            concurrency=self._settings.concurrency,
            report=report,
            budget=budget,
            phase=phase,
            progress=progress,
        )


def _chain(
    first: list[list[Operation]], rest: Iterator[list[Operation]]
) -> Iterator[list[Operation]]:
    yield from first
    yield from rest
