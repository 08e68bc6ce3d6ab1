"""What one GitHub delivery sweep did (`SweepReport`), its settings (`SweepSettings`), and
its time budgets (`RunBudget`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from datetime import timedelta
from typing import Any

from shared.config import DEFAULTS, Config


@dataclass(frozen=True)
class SweepSettings:
    """`grace`: how long a failed delivery is left alone first (the ingress may have taken
    it, answering after GitHub's 10 s, and the worker not recorded it yet), and how long a
    redelivery has to arrive before the sweep hands the delivery over itself;
    `list_budget_s`: the listing starts no GitHub call after this long from the run's
    start; `act_budget_s`: acting on open recoveries starts no step after this long from
    its own start, plus whatever the listing left unused (`RunBudget`); `overlap`: how far
    back past the last listing's newest delivery a listing goes again (a delivery GitHub
    records late, after its 10 s timeout, is still listed); `horizon`: how long before
    GitHub's 3 days pass an unrecovered delivery raises its alert; `unrecorded_after`: how
    long a handed-off delivery may stay unrecorded in the ledger before it is handed off
    again, and again after that before `github_recovery_unrecorded`; `open_page`: open
    recoveries read per query (a run reads them all, page by page, within its budget);
    `full_pages`: pages of every delivery a run's listing reads, newest first, before it
    lists only those GitHub counts as failed (`status=failure`), so a run's GitHub calls
    grow with failed deliveries, not with all of them (0: failed ones only)."""

    grace: timedelta = timedelta(seconds=DEFAULTS.github_sweep_grace_s)
    list_budget_s: float = DEFAULTS.github_sweep_budget_s / 2
    act_budget_s: float = DEFAULTS.github_sweep_budget_s / 2
    overlap: timedelta = timedelta(seconds=60)
    horizon: timedelta = timedelta(hours=6)
    # 15 min > 480 s dispatch deadline + 7 queue retries (254 s): a live task is recorded by then.
    unrecorded_after: timedelta = timedelta(minutes=15)
    open_page: int = 200
    full_pages: int = DEFAULTS.github_sweep_full_pages

    def __post_init__(self) -> None:
        for name in ("list_budget_s", "act_budget_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"SweepSettings.{name} must be above 0, got {getattr(self, name)}")
        if self.full_pages < 0:
            raise ValueError(f"SweepSettings.full_pages must not be negative: {self.full_pages}")
        for name in ("grace", "overlap", "horizon", "unrecorded_after"):
            if getattr(self, name) < timedelta(0):
                raise ValueError(f"SweepSettings.{name} must not be negative")

    @classmethod
    def from_config(cls, config: Config) -> SweepSettings:
        # GITHUB_SWEEP_BUDGET_S is the whole run's (below the Scheduler's attempt deadline):
        # half is the listing's, half the acting's, so a catch-up listing never takes it all.
        whole = float(config.github_sweep_budget_s)
        return cls(
            grace=timedelta(seconds=config.github_sweep_grace_s),
            list_budget_s=whole / 2,
            act_budget_s=whole / 2,
            full_pages=config.github_sweep_full_pages,
        )


class RunBudget:
    """When one run stops starting work, on a monotonic clock read at each look.

    The listing stops after `list_budget_s` from the run's start. Acting stops after
    `act_budget_s` from its own start plus what the listing left unused: a first run's
    3-day listing never starves the redeliveries, and a short listing leaves acting the
    whole run. A run ends within `list_budget_s + act_budget_s` (plus the call under way)."""

    def __init__(self, settings: SweepSettings, monotonic: Callable[[], float]) -> None:
        self._settings = settings
        self._monotonic = monotonic
        self.started = monotonic()
        self._act_until: float | None = None

    def elapsed_s(self) -> float:
        return self._monotonic() - self.started

    def listing_spent(self) -> bool:
        return self.elapsed_s() >= self._settings.list_budget_s

    def acting_spent(self) -> bool:
        now = self._monotonic()
        if self._act_until is None:  # the first look starts the acting's budget
            listing_end = self.started + self._settings.list_budget_s
            self._act_until = max(listing_end, now) + self._settings.act_budget_s
        return now >= self._act_until


@dataclass
class SweepReport:
    """Counts of one run; `to_dict()` is JSON-ready (the reconcile function's answer)."""

    run_id: str = ""
    pages: int = 0  # listing pages read
    listed: int = 0  # deliveries examined (newer than the listing's floor)
    failed: int = 0  # events with no successful attempt in this listing, that an app takes
    opened: int = 0  # of those, recoveries this run opened (the rest were open already)
    skipped: int = 0  # failed deliveries of events no app takes (nothing to recover)
    open: int = 0  # open recoveries looked at
    waiting: int = 0  # left for a later run (in their grace, or handed off and queued)
    redelivered: int = 0
    handed_off: int = 0
    rehanded: int = 0  # handed off again: no ledger record `unrecorded_after` the hand-off
    recovered: int = 0  # closed: the ledger has the delivery the sweep brought back
    accepted: int = 0  # closed: the ingress had taken it; GitHub counted it failed
    ignored: int = 0  # closed: an event no app starts on (an action every app refuses)
    unrecoverable: int = 0  # closed: past GitHub's 3 days
    alerts: int = 0  # `github_delivery_unrecoverable` alerts raised
    unrecorded: int = 0  # `github_recovery_unrecorded` alerts raised
    errors: int = 0
    github_calls: int = 0
    firestore_reads: int = 0
    firestore_writes: int = 0
    resumed: bool = False  # continued a listing an earlier run's budget stopped
    failed_only: bool = False  # past `full_pages`, listed only failed deliveries
    stopped_early: bool = False
    stopped_at: str = ""  # list | act | rate_limited | github | ledger
    retry_after_s: float | None = None
    elapsed_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def count(self, name: str) -> None:
        setattr(self, name, getattr(self, name) + 1)

    def stop(self, phase: str) -> None:
        self.stopped_early = True
        self.stopped_at = self.stopped_at or phase
