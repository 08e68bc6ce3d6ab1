"""One sweep run: list what GitHub delivered since the checkpoint, open a recovery for
each failed event, then take every open recovery one step (`act.py`), each part within
its own budget (`RunBudget`)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from shared import events, logs, tracing
from shared.clock import Clock
from shared.clock import monotonic as system_monotonic
from shared.github.errors import GitHubError, GitHubRejected, GitHubUnavailable
from shared.github.hook_deliveries import (
    GITHUB_DELIVERY_WINDOW,
    HookDeliveriesClient,
    HookDelivery,
)
from shared.ledger import Ledger, LedgerError, Recovery
from shared.ledger.recoveries import OPEN, Checkpoint, ScanPosition
from shared.recovery.act import RecoveryActions, RunContext
from shared.recovery.handoff import HandOff
from shared.recovery.report import RunBudget, SweepReport, SweepSettings

log = logs.get_logger("reconcile.github")
BEHIND_ALERT = "github_sweep_behind"
# Runs in a row GitHub may fail at a stopped listing's position before the sweep lists
# afresh from the newest delivery down to the same floor (a cursor GitHub no longer takes).
MAX_POSITION_FAILURES = 3


@dataclass
class Listed:
    """What one run's listing saw of the events it examined: each event with a successful
    attempt (`ok`), each one without that an app takes (`failed`), and for those the
    oldest attempt seen (`first_sent`) against the attempt its recovery was opened with
    (`opened_at`): listed newest first, the original comes after its redeliveries."""

    ok: set[str] = field(default_factory=set)
    failed: set[str] = field(default_factory=set)
    opened_at: dict[str, datetime] = field(default_factory=dict)
    first_sent: dict[str, datetime] = field(default_factory=dict)

    def attempt(self, guid: str, at: datetime) -> None:
        if guid in self.opened_at:
            self.first_sent[guid] = min(at, self.first_sent.get(guid, at))

    def earlier(self) -> dict[str, datetime]:
        """The events an older attempt than their recovery's was seen of, and its time."""
        return {g: at for g, at in self.first_sent.items() if at < self.opened_at[g]}


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
        budget = RunBudget(self._settings, self._monotonic)
        report = SweepReport(run_id=f"sweep-{self._clock():%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:6]}")
        calls_before = self._github.calls  # one run at a time per process (reconcile's)
        with tracing.span("github_sweep.run", sweep_run=report.run_id) as span:
            self._run(report, budget)
            report.elapsed_s = round(budget.elapsed_s(), 3)
            report.github_calls = self._github.calls - calls_before
            span.set(**{k: v for k, v in report.to_dict().items() if isinstance(v, int)})
        logs.event(log, logging.INFO, "github delivery sweep finished", **report.to_dict())
        return report

    def _run(self, report: SweepReport, budget: RunBudget) -> None:
        traceparent = tracing.traceparent()
        run = RunContext(
            sweep_run=report.run_id,
            trace_id=traceparent.split("-")[1] if traceparent else None,
            spent=budget.acting_spent,
        )
        now = self._clock()
        checkpoint: Checkpoint | None = None
        listed = Listed()
        try:
            report.firestore_reads += 1
            checkpoint = self._ledger.recoveries.checkpoint()
            if checkpoint.resume_after is not None and now < checkpoint.resume_after:
                report.stop("rate_limited")  # GitHub asked for a wait: no call until then
                report.retry_after_s = (checkpoint.resume_after - now).total_seconds()
                run.paused_until = checkpoint.resume_after
                checkpoint = None  # nothing listed: nothing to store
            else:
                checkpoint = self._list(checkpoint, report, budget, listed)
                run.paused_until = checkpoint.resume_after  # a wait the listing was asked
        except LedgerError as exc:
            checkpoint = None  # the next run lists again from the stored checkpoint
            self._failed(report, "ledger", f"listing stopped: {exc}")
        self._first_sent(listed, report)
        self._act(report, budget, run)
        if checkpoint is not None:
            self._save(checkpoint, report, run, now)

    def _save(
        self, checkpoint: Checkpoint, report: SweepReport, run: RunContext, now: datetime
    ) -> None:
        """Store how far this run listed, and a wait GitHub asked of any of its calls."""
        waits = [w for w in (checkpoint.resume_after, run.paused_until) if w is not None]
        checkpoint = replace(checkpoint, resume_after=max(waits) if waits else None)
        try:
            report.firestore_writes += 1
            self._ledger.recoveries.save_checkpoint(
                checkpoint, run_id=report.run_id, at=now, listed=report.listed
            )
        except LedgerError as exc:
            self._failed(report, "ledger", f"checkpoint not stored: {exc}")
        listed_at = checkpoint.listed_at
        if listed_at is not None and now - listed_at > self._settings.horizon:
            logs.event(
                log,
                logging.ERROR,
                f"the GitHub delivery sweep has not finished a listing since "
                f"{listed_at:%Y-%m-%dT%H:%MZ}: failed deliveries may leave GitHub's 3 days "
                "unrecovered",
                alert=BEHIND_ALERT,
                listed_at=listed_at.isoformat(),
                sweep_run=report.run_id,
            )

    def _list(
        self, checkpoint: Checkpoint, report: SweepReport, budget: RunBudget, listed: Listed
    ) -> Checkpoint:
        """Finish a stopped listing first, then list from the newest delivery down to the
        last complete listing's newest less the overlap; the checkpoint to store."""
        # A listing stopped before its first page resumes as what it is: a fresh listing.
        report.resumed = checkpoint.scan is not None and checkpoint.scan.next_url is not None
        listings = 2 if report.resumed else 1  # the stopped one, then a fresh one
        full_pages = 0  # pages of every delivery read this run
        seen: set[int] = set()  # their deliveries: a failed one is listed again after them
        for _ in range(listings):
            position = checkpoint.scan or ScanPosition(None, self._floor(checkpoint), None)
            while True:
                if budget.listing_spent():
                    report.stop("list")
                    return replace(checkpoint, scan=position, resume_after=None)
                if not position.failed_only and full_pages >= self._settings.full_pages:
                    # Past the newest pages, only failed deliveries, from the newest one
                    # down to the same floor: GitHub's cost grows with failures alone.
                    position = ScanPosition(
                        None, position.floor_at, position.top_at, failed_only=True
                    )
                asked_at = self._clock()
                try:
                    page = self._github.page(position.next_url, failed_only=position.failed_only)
                except GitHubError as exc:
                    return self._stopped_by_github(checkpoint, position, report, exc)
                report.pages += 1
                if position.failed_only:
                    report.failed_only = True
                else:
                    full_pages += 1
                for problem in page.malformed:
                    self._failed(report, "", f"a delivery GitHub listed is unreadable: {problem}")
                top = position.top_at
                if top is None:
                    # The newest delivery listed; of failed ones only, when it was asked:
                    # every failure recorded by then is in this listing (late ones: overlap).
                    newest = page.deliveries[0].delivered_at if page.deliveries else None
                    top = asked_at if position.failed_only else newest
                below_floor = False
                for delivery in page.deliveries:
                    if delivery.delivered_at < position.floor_at:
                        below_floor = True
                        break
                    if delivery.id in seen:
                        continue
                    if not position.failed_only:
                        seen.add(delivery.id)
                    report.listed += 1
                    self._examine(delivery, listed, report)
                if below_floor or page.next_url is None:
                    covered = max(filter(None, (checkpoint.covered_to, top)), default=None)
                    checkpoint = Checkpoint(covered, None, None, listed_at=self._clock())
                    break
                position = replace(position, next_url=page.next_url, top_at=top, failures=0)
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
        """Keep the position for the next run; with GitHub's `retry-after`, no call before
        it passes. A position GitHub refuses (a cursor it no longer takes), or fails at
        `MAX_POSITION_FAILURES` runs in a row, is dropped for a fresh listing down to the
        same floor: more is listed again, nothing is skipped."""
        wait = exc.retry_after_s if isinstance(exc, GitHubUnavailable) else None
        if wait:
            report.stop("rate_limited")
            report.retry_after_s = wait
            logs.event(log, logging.WARNING, f"github delivery listing paused: {exc}")
            resume = self._clock() + timedelta(seconds=wait)
            return replace(checkpoint, scan=position, resume_after=resume)
        self._failed(report, "github", f"github delivery listing stopped: {exc}")
        failures = position.failures + 1
        if position.next_url is not None and (
            isinstance(exc, GitHubRejected) or failures >= MAX_POSITION_FAILURES
        ):
            logs.event(
                log,
                logging.ERROR,
                f"github delivery listing restarted from the newest delivery after {failures} "
                "failure(s) at its position",
                floor_at=position.floor_at.isoformat(),
            )
            position = ScanPosition(None, position.floor_at, None)
        else:
            position = replace(position, failures=failures)
        return replace(checkpoint, scan=position, resume_after=None)

    def _examine(self, delivery: HookDelivery, listed: Listed, report: SweepReport) -> None:
        """Open a recovery for a failed event, unless a later attempt of it succeeded
        (listed first: newest first). A success that is not seen here (a resumed listing
        reads the older part first) is found in the ledger by the recovery's first step."""
        listed.attempt(delivery.guid, delivery.delivered_at)
        if delivery.succeeded:
            listed.ok.add(delivery.guid)
            return
        if delivery.guid in listed.ok or delivery.guid in listed.failed:
            return
        listed.failed.add(delivery.guid)
        if not events.handled("github", delivery.event):
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
                first_sent_at=delivery.delivered_at,
            )
        )
        report.opened += int(opened)
        listed.opened_at[delivery.guid] = listed.first_sent[delivery.guid] = delivery.delivered_at

    def _first_sent(self, listed: Listed, report: SweepReport) -> None:
        """Move each open recovery's `first_sent_at` back to the oldest attempt of its event
        the listing saw, so a hand-off carries when GitHub first sent it (1 read per event
        with an older attempt, 1 write per recovery moved; a conflict: re-read once)."""
        earlier = listed.earlier()
        for _ in range(2):
            if not earlier:
                return
            try:
                report.firestore_reads += len(earlier)
                found = self._ledger.recoveries.get_many(earlier)
                moved = [r for r in found.values() if r.open and earlier[r.guid] < r.sent_at]
                conflicts: dict[str, datetime] = {}
                for recovery in moved:
                    report.firestore_writes += 1
                    at = earlier[recovery.guid]
                    if self._ledger.recoveries.change(recovery, first_sent_at=at) is None:
                        conflicts[recovery.guid] = at  # another run changed it since the read
            except LedgerError as exc:
                self._failed(report, "", f"first-sent times of {_named(earlier)} not stored: {exc}")
                return
            earlier = conflicts
        if earlier:  # their hand-offs carry a newer attempt's time; the next listing may fix it
            message = f"first-sent times of {_named(earlier)} not stored: changed by another run"
            self._failed(report, "", message)

    def _act(self, report: SweepReport, budget: RunBudget, run: RunContext) -> None:
        """Every open recovery one step, a page at a time by guid, within the budget. One
        that fails is logged and counted; the others still get their step."""
        after: str | None = None
        while True:
            if budget.acting_spent():
                report.stop("act")
                return
            try:
                page = self._ledger.recoveries.open_page(self._settings.open_page, after)
            except LedgerError as exc:
                self._failed(report, "ledger", f"open recoveries unreadable: {exc}")
                return
            report.firestore_reads += max(1, len(page))  # a query costs at least one read
            for recovery in page:
                if budget.acting_spent():
                    report.stop("act")
                    return
                report.open += 1
                # The delivery's own span in this run's trace: its page shows the sweep run.
                with tracing.span("github_sweep.recover", delivery_id=recovery.guid):
                    try:
                        self._actions.step(recovery, report, run)
                    except Exception as exc:  # one recovery's fault stops no other's step
                        self._failed(
                            report,
                            "",
                            f"github delivery {recovery.guid}: step failed: "
                            f"{type(exc).__name__}: {exc}",
                            guid=recovery.guid,
                        )
            if len(page) < self._settings.open_page:
                return
            after = page[-1].guid

    def _failed(
        self, report: SweepReport, phase: str, message: str, guid: str | None = None
    ) -> None:
        """Count and log an error of this run; with `phase`, it also stopped there."""
        report.errors += 1
        if phase:
            report.stop(phase)
        logs.event(log, logging.ERROR, message, sweep_run=report.run_id, guid=guid)


def _named(guids: Iterable[str]) -> str:
    """A few guids for a log line: `github deliveries a, b, c (+4 more)`."""
    names = sorted(guids)
    more = f" (+{len(names) - 3} more)" if len(names) > 3 else ""
    return f"github deliveries {', '.join(names[:3])}{more}"
