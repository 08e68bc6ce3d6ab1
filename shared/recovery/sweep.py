"""One sweep run: list what GitHub delivered since the checkpoint, open a recovery for
each failed event, then take every open recovery one step (`act.py`)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta

from shared import handlers, logs, tracing
from shared.clock import Clock
from shared.clock import monotonic as system_monotonic
from shared.github.errors import GitHubError, GitHubUnavailable
from shared.github.hook_deliveries import (
    GITHUB_DELIVERY_WINDOW,
    HookDeliveriesClient,
    HookDelivery,
)
from shared.ledger import Ledger, LedgerError, Recovery
from shared.ledger.recoveries import OPEN, Checkpoint, ScanPosition
from shared.recovery.act import RecoveryActions
from shared.recovery.handoff import HandOff
from shared.recovery.report import SweepReport, SweepSettings

log = logs.get_logger("reconcile.github")


class DeliverySweep:
    """`run()` is one sweep; safe to overlap with another (see the package docstring)."""

    def __init__(
        self,
        ledger: Ledger,
        github: HookDeliveriesClient,
        hand_off: HandOff,
        clock: Clock,
        settings: SweepSettings | None = None,
        *,
        monotonic: Callable[[], float] = system_monotonic,
    ) -> None:
        self._ledger = ledger
        self._github = github
        self._clock = clock
        self._settings = settings or SweepSettings()
        self._monotonic = monotonic
        self._actions = RecoveryActions(ledger, github, hand_off, clock, self._settings)

    def run(self) -> SweepReport:
        started = self._monotonic()
        report = SweepReport(run_id=f"sweep-{self._clock():%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:6]}")
        calls_before = self._github.calls
        with tracing.span("github_sweep.run", sweep_run=report.run_id) as span:
            try:
                self._run(report, started)
            except LedgerError as exc:
                report.errors += 1
                report.stop("ledger")
                logs.event(log, logging.ERROR, f"github delivery sweep stopped: {exc}")
            report.elapsed_s = round(self._monotonic() - started, 3)
            report.github_calls = self._github.calls - calls_before
            span.set(**{k: v for k, v in report.to_dict().items() if isinstance(v, int)})
        logs.event(log, logging.INFO, "github delivery sweep finished", **report.to_dict())
        return report

    def _spent(self, started: float) -> bool:
        return self._monotonic() - started >= self._settings.budget_s

    def _run(self, report: SweepReport, started: float) -> None:
        report.firestore_reads += 1
        checkpoint = self._ledger.recoveries.checkpoint()
        now = self._clock()
        if checkpoint.resume_after is not None and now < checkpoint.resume_after:
            report.stop("rate_limited")  # GitHub asked for a wait: no listing until then
            report.retry_after_s = (checkpoint.resume_after - now).total_seconds()
        else:
            checkpoint = self._list(checkpoint, report, started)
            report.firestore_writes += 1
            self._ledger.recoveries.save_checkpoint(
                checkpoint, run_id=report.run_id, at=now, listed=report.listed
            )
        self._act(report, started)

    def _list(self, checkpoint: Checkpoint, report: SweepReport, started: float) -> Checkpoint:
        """Resume the stopped listing, then list from the newest delivery down to the last
        listing's newest (less the overlap); the checkpoint to store."""
        # A listing stopped before its first page resumes as what it is: a fresh listing.
        report.resumed = checkpoint.scan is not None and checkpoint.scan.next_url is not None
        ok: set[str] = set()
        failed: set[str] = set()
        for _listing in range(2):  # the stopped one, if any, then a fresh one
            position = checkpoint.scan or ScanPosition(None, self._floor(checkpoint), None)
            while True:
                if self._spent(started):
                    report.stop("list")
                    return replace(checkpoint, scan=position, resume_after=None)
                try:
                    page = self._github.page(position.next_url)
                except GitHubError as exc:
                    return self._stopped_by_github(checkpoint, position, report, exc)
                report.pages += 1
                top = position.top_at
                if top is None and page.deliveries:
                    top = page.deliveries[0].delivered_at
                below_floor = False
                for delivery in page.deliveries:
                    if delivery.delivered_at < position.floor_at:
                        below_floor = True
                        break
                    report.listed += 1
                    self._examine(delivery, ok, failed, report)
                if below_floor or page.next_url is None:
                    covered = max(filter(None, (checkpoint.covered_to, top)), default=None)
                    checkpoint = Checkpoint(covered, None, None)
                    break
                position = ScanPosition(page.next_url, position.floor_at, top)
            if not report.resumed or _listing == 1:
                return checkpoint
        return checkpoint

    def _floor(self, checkpoint: Checkpoint) -> datetime:
        """Where a new listing stops: the last one's newest less the overlap, or (first run)
        as far back as GitHub keeps deliveries."""
        if checkpoint.covered_to is None:
            return self._clock() - GITHUB_DELIVERY_WINDOW
        return checkpoint.covered_to - self._settings.overlap

    def _stopped_by_github(
        self,
        checkpoint: Checkpoint,
        position: ScanPosition,
        report: SweepReport,
        exc: GitHubError,
    ) -> Checkpoint:
        """Keep the position; with GitHub's `retry-after`, no listing before it passes."""
        wait = exc.retry_after_s if isinstance(exc, GitHubUnavailable) else None
        report.stop("rate_limited" if wait else "github")
        report.errors += 0 if wait else 1
        report.retry_after_s = wait
        logs.event(
            log,
            logging.WARNING if isinstance(exc, GitHubUnavailable) else logging.ERROR,
            f"github delivery listing stopped: {exc}",
            retry_after_s=wait,
        )
        resume = self._clock() + timedelta(seconds=wait) if wait else None
        return replace(checkpoint, scan=position, resume_after=resume)

    def _examine(
        self, delivery: HookDelivery, ok: set[str], failed: set[str], report: SweepReport
    ) -> None:
        """Open a recovery for a failed event; newest first, so an event's later success
        (a redelivery) is seen before its failures."""
        if delivery.succeeded:
            ok.add(delivery.guid)
            return
        if delivery.guid in ok or delivery.guid in failed:
            return
        failed.add(delivery.guid)
        if not handlers.handled("github", delivery.event):
            report.skipped += 1  # no app takes it: its loss loses nothing
            return
        report.failed += 1
        report.firestore_writes += 1
        opened = self._ledger.recoveries.open_once(
            Recovery(
                guid=delivery.guid,
                event=delivery.event,
                action=delivery.action,
                github_delivery_id=delivery.id,
                repository_id=delivery.repository_id,
                installation_id=delivery.installation_id,
                failed_at=delivery.delivered_at,
                found_at=self._clock(),
                status=OPEN,
            )
        )
        report.opened += int(opened)

    def _act(self, report: SweepReport, started: float) -> None:
        if self._spent(started):
            report.stop("act")
            return
        traceparent = tracing.traceparent()
        run = {
            "sweep_run": report.run_id,
            "trace_id": traceparent.split("-")[1] if traceparent else None,
        }
        after: str | None = None
        while True:  # every open recovery, a page at a time, by guid
            page = self._ledger.recoveries.open_page(self._settings.open_page, after)
            report.firestore_reads += max(1, len(page))  # a query costs at least one read
            for recovery in page:
                if self._spent(started):
                    report.stop("act")
                    return
                report.open += 1
                # The delivery's own span in this run's trace: its page shows the sweep run.
                with tracing.span("github_sweep.recover", delivery_id=recovery.guid):
                    self._actions.step(recovery, report, run)
            if len(page) < self._settings.open_page:
                return
            after = page[-1].guid
