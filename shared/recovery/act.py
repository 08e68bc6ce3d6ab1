"""Acting on open recoveries: close what the ledger has, redeliver once, then hand over.

For each open recovery, in this order (docs/architecture.md, "GitHub deliveries"):

    the ledger has the delivery        close: `recovered` (it arrived after the sweep acted)
                                       or `accepted` (it was there before: the ingress
                                       took it, answering after GitHub's 10 s)
    handed off                         wait (Cloud Tasks delivers and retries; GitHub's 3
                                       days no longer matter); `unrecorded_after` later
                                       still not in the ledger: handed off once more (a
                                       task of its own name); `unrecorded_after` after
                                       that: one `github_recovery_unrecorded` alert
    past GitHub's 3 days               close `unrecoverable` (alerting first if not yet)
    within `horizon` of the 3 days     one `github_delivery_unrecoverable` alert
    failed less than `grace` ago       wait (the ingress may have taken it)
    GitHub asked for a wait, or the    wait (no GitHub call now)
    run's budget is spent
    not acted on yet                   ask GitHub to redeliver, once; an installation
                                       event is handed off at once instead (below)
    redelivered `grace` ago, not here  read it from GitHub, hand it to the worker

A redelivery is claimed on the recovery first, by a write conditional on the version
read, so overlapping runs ask GitHub once; a hand-off is named after the guid
(`recovered_task_id`), so a second one is a duplicate task. A hand-off carries when GitHub
first sent the delivery (`Recovery.sent_at`), which a redelivery cannot: it reaches the
ingress, which stamps its own clock. So the events ordered by that time, `ORDERED_EVENTS`,
are never redelivered: a `removed` recovered after a later `added` was taken live would
otherwise win (shared/ledger/installations.py, ORDER). An alert is recorded on the
recovery before it is logged, so overlapping runs raise it once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from shared import events, logs
from shared.clock import Clock
from shared.errors import TransientError
from shared.github.errors import GitHubError, GitHubRejected, GitHubUnavailable
from shared.github.hook_deliveries import GITHUB_DELIVERY_WINDOW, HookDeliveriesClient
from shared.handoff.payloads import PayloadError
from shared.ledger import Ledger, LedgerError, Recovery
from shared.recovery.handoff import HandOff, Recovered, recovered_task_id, rehanded_task_id
from shared.recovery.report import SweepReport, SweepSettings
from shared.statuses import RecoveryStatus

log = logs.get_logger("reconcile.github")
ALERT = "github_delivery_unrecoverable"
UNRECORDED_ALERT = "github_recovery_unrecorded"
# Events a handler orders by their `received_at` (installations): handed off, never
# redelivered, so they carry the time GitHub first sent them (module docstring).
ORDERED_EVENTS = frozenset({"installation", "installation_repositories"})


@dataclass
class RunContext:
    """What the steps of one run share: its name and trace, its budget, and until when
    GitHub asked for no calls (`retry-after`; set by a step that met it)."""

    sweep_run: str
    trace_id: str | None
    spent: Callable[[], bool]
    paused_until: datetime | None = None

    def github_blocked(self, now: datetime) -> bool:
        return self.spent() or (self.paused_until is not None and now < self.paused_until)

    def pause(self, exc: GitHubError, now: datetime) -> None:
        """Honour GitHub's `retry-after` (when `exc` carries one) for the rest of the run."""
        wait = exc.retry_after_s if isinstance(exc, GitHubUnavailable) else None
        if wait:
            until = now + timedelta(seconds=wait)
            self.paused_until = max(until, self.paused_until or until)

    def fields(self) -> dict[str, Any]:
        return {"sweep_run": self.sweep_run, "trace_id": self.trace_id}


class RecoveryActions:
    """Takes each open recovery one step (module docstring)."""

    def __init__(
        self,
        ledger: Ledger,
        github: HookDeliveriesClient,
        hand_off: HandOff,
        clock: Clock,
        settings: SweepSettings,
    ) -> None:
        self._ledger = ledger
        self._github = github
        self._hand_off = hand_off
        self._clock = clock
        self._settings = settings

    def step(self, recovery: Recovery, report: SweepReport, run: RunContext) -> None:
        """One step for `recovery` within `run`."""
        now = self._clock()
        report.firestore_reads += 1
        recorded = self._ledger.deliveries.get("github", recovery.guid)
        if recorded is not None:
            self._close_recorded(recovery, recorded.received_at, report)
            return
        if recovery.via == "handoff":
            self._watch(recovery, report, now, run)
            return
        expires = recovery.failed_at + GITHUB_DELIVERY_WINDOW
        if now >= expires:
            recovery = self._alert(recovery, report, now) or recovery
            if self._change(recovery, report, status=RecoveryStatus.UNRECOVERABLE) is not None:
                report.unrecoverable += 1
            return
        if now >= expires - self._settings.horizon and recovery.alerted_at is None:
            recovery = self._alert(recovery, report, now) or recovery
        grace = self._settings.grace
        if now < recovery.failed_at + grace or run.github_blocked(now):
            report.waiting += 1
        elif recovery.via is None and recovery.event in ORDERED_EVENTS:
            self._take_over(recovery, report, now, run)  # GitHub's time, not the ingress's
        elif recovery.via is None:
            self._redeliver(recovery, report, now, run)
        elif recovery.redelivered_at is None or now >= recovery.redelivered_at + grace:
            self._take_over(recovery, report, now, run)
        else:
            report.waiting += 1

    def _close_recorded(self, recovery: Recovery, at: datetime, report: SweepReport) -> None:
        acted_at = recovery.redelivered_at or recovery.handed_off_at
        # Recorded before the sweep acted: the ingress had it (a backlog, a late answer).
        status = "recovered" if acted_at is not None and at >= acted_at else "accepted"
        after_s = round((at - recovery.failed_at).total_seconds(), 3)
        changed = self._change(recovery, report, status=status, recovered_at=at, after_s=after_s)
        if changed is not None:
            report.count(status)
            logs.event(
                log,
                logging.INFO,
                f"github delivery {recovery.guid} {status}"
                + (
                    f" by {recovery.via} after {after_s:g} s"
                    if status == RecoveryStatus.RECOVERED
                    else ""
                ),
                guid=recovery.guid,
                delivery_event=recovery.event,
                via=recovery.via,
                after_s=after_s,
                sweep_run=recovery.sweep_run,
            )

    def _redeliver(
        self, recovery: Recovery, report: SweepReport, now: datetime, run: RunContext
    ) -> None:
        claimed = self._change(
            recovery, report, via="redelivery", redelivered_at=now, **run.fields()
        )
        if claimed is None:
            return  # another run took this step
        try:
            self._github.redeliver(claimed.github_delivery_id)
        except GitHubRejected as exc:
            # e.g. GitHub no longer redelivers it: read it and hand it over now.
            noted = self._note(claimed, report, run, f"redelivery refused: {exc}")
            if noted is not None and not run.github_blocked(now):
                self._take_over(noted, report, now, run)
            return
        except GitHubError as exc:
            # Unknown whether GitHub sends it; the grace decides, then the hand-off.
            run.pause(exc, now)
            self._note(claimed, report, run, f"redelivery failed: {exc}")
            return
        report.redelivered += 1
        logs.event(
            log,
            logging.INFO,
            f"github delivery {recovery.guid}: redelivery asked of GitHub",
            guid=recovery.guid,
            delivery_event=recovery.event,
            github_delivery_id=recovery.github_delivery_id,
            sweep_run=run.sweep_run,
        )

    def _take_over(
        self,
        recovery: Recovery,
        report: SweepReport,
        now: datetime,
        run: RunContext,
        *,
        again: bool = False,
    ) -> Recovery | None:
        """Read the delivery from GitHub and hand it to the worker ourselves, as first sent
        (`again`: the one re-hand of a delivery the ledger never recorded). The recovery as
        this step last wrote it; None when another run changed it first."""
        try:
            request = self._github.get(recovery.github_delivery_id)
        except GitHubError as exc:
            run.pause(exc, now)
            error = f"reading the delivery failed: {exc}"
            return self._note(recovery, report, run, error, failed=True)
        reason = events.refusal("github", request.delivery.event, request.payload)
        if reason is not None:
            ignored = self._change(
                recovery, report, status=RecoveryStatus.IGNORED, last_error=reason
            )
            report.ignored += int(ignored is not None)
            return ignored
        task_id = (rehanded_task_id if again else recovered_task_id)(recovery.guid)
        sent_at = min(recovery.sent_at, request.delivery.delivered_at)
        try:
            self._hand_off(Recovered(request, sent_at, task_id))
        except (TransientError, PayloadError, ValueError) as exc:
            return self._note(recovery, report, run, f"hand-off failed: {exc}", failed=True)
        if again:
            changed = self._change(recovery, report, rehanded_at=now, **run.fields())
            why = f"not in the ledger {self._settings.unrecorded_after} after its hand-off"
        else:
            changed = self._change(
                recovery, report, via="handoff", handed_off_at=now, **run.fields()
            )
            why = (
                "an event ordered by when GitHub sent it"
                if recovery.event in ORDERED_EVENTS
                else "GitHub's redelivery did not arrive"
            )
        if changed is not None:
            report.count("rehanded" if again else "handed_off")
            logs.event(
                log,
                logging.WARNING,
                f"github delivery {recovery.guid}: handed to the worker by the sweep"
                f"{' again' if again else ''} ({why})",
                guid=recovery.guid,
                delivery_event=recovery.event,
                github_delivery_id=recovery.github_delivery_id,
                sent_at=sent_at.isoformat(),
                task_id=task_id,
                sweep_run=run.sweep_run,
            )
        return changed

    def _watch(
        self, recovery: Recovery, report: SweepReport, now: datetime, run: RunContext
    ) -> None:
        """A handed-off delivery the ledger has not recorded: handed off again once
        `unrecorded_after` after the hand-off; one alert `unrecorded_after` after the
        re-hand (or after it was due, when GitHub could not give the delivery again)."""
        bound = self._settings.unrecorded_after
        rehand_due = (recovery.handed_off_at or recovery.found_at) + bound
        if recovery.rehanded_at is None and now >= rehand_due and not run.github_blocked(now):
            written = self._take_over(recovery, report, now, run, again=True)
            if written is None or written.rehanded_at is not None or not written.open:
                return  # re-handed, closed, or another run's to act on
            recovery = written  # the re-hand failed (noted): the alert still comes when due
        alert_due = (recovery.rehanded_at or rehand_due) + bound
        if recovery.unrecorded_at is None and now >= alert_due:
            self._alert_unrecorded(recovery, report, now, run)
        report.waiting += 1

    def _alert_unrecorded(
        self, recovery: Recovery, report: SweepReport, now: datetime, run: RunContext
    ) -> None:
        if self._change(recovery, report, unrecorded_at=now) is None:
            return  # another run raised it, or the write failed (logged): not twice
        report.unrecorded += 1
        handed = recovery.handed_off_at
        times = "twice" if recovery.rehanded_at else "once (GitHub did not give it again)"
        logs.event(
            log,
            logging.ERROR,
            f"github delivery {recovery.guid} ({recovery.event}, GitHub delivery "
            f"{recovery.github_delivery_id}) was handed to the worker {times}"
            + (f", first at {handed:%Y-%m-%dT%H:%MZ}," if handed else "")
            + " and the ledger still has no record of it",
            alert=UNRECORDED_ALERT,
            guid=recovery.guid,
            github_delivery_id=recovery.github_delivery_id,
            delivery_event=recovery.event,
            action=recovery.action,
            repository_id=recovery.repository_id,
            installation_id=recovery.installation_id,
            handed_off_at=handed.isoformat() if handed else None,
            rehanded_at=recovery.rehanded_at.isoformat() if recovery.rehanded_at else None,
            last_error=recovery.last_error,
            sweep_run=run.sweep_run,
        )

    def _alert(self, recovery: Recovery, report: SweepReport, now: datetime) -> Recovery | None:
        """Raise the alert once per recovery; the recovery as re-read, None if unchanged."""
        if recovery.alerted_at is not None:
            return None
        alerted = self._change(recovery, report, alerted_at=now)
        if alerted is None:
            return None
        report.alerts += 1
        leaves = recovery.failed_at + GITHUB_DELIVERY_WINDOW
        logs.event(
            log,
            logging.ERROR,
            f"github delivery {recovery.guid} ({recovery.event}) is not recovered and leaves "
            f"GitHub's 3-day window at {leaves:%Y-%m-%dT%H:%MZ}",
            alert=ALERT,
            guid=recovery.guid,
            delivery_event=recovery.event,
            action=recovery.action,
            repository_id=recovery.repository_id,
            installation_id=recovery.installation_id,
            failed_at=recovery.failed_at.isoformat(),
            last_error=recovery.last_error,
        )
        return alerted

    def _note(
        self,
        recovery: Recovery,
        report: SweepReport,
        run: RunContext,
        error: str,
        *,
        failed: bool = False,
    ) -> Recovery | None:
        """Log `error` and keep it on the recovery (as written, or None when another run
        changed it first); `failed`: counted as a run error."""
        report.errors += int(failed)
        logs.event(
            log,
            logging.ERROR if failed else logging.WARNING,
            f"github delivery {recovery.guid}: {error}",
            guid=recovery.guid,
            delivery_event=recovery.event,
            sweep_run=run.sweep_run,
        )
        return self._change(recovery, report, last_error=error[:500])

    def _change(self, recovery: Recovery, report: SweepReport, **fields: Any) -> Recovery | None:
        report.firestore_writes += 1
        try:
            return self._ledger.recoveries.change(recovery, **fields)
        except LedgerError as exc:
            report.errors += 1
            logs.event(
                log,
                logging.ERROR,
                f"github delivery {recovery.guid}: recording {sorted(fields)} failed: {exc}",
                guid=recovery.guid,
            )
            return None
