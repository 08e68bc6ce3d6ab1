"""Listing and acting have separate budgets (issue 44, 8): a first run's 3-day listing
never starves the redeliveries of recoveries already open, and a short listing leaves
acting the rest of the run.

Time is a monotonic clock the in-memory GitHub moves by a fixed cost per call (a page 10
s, a redelivery 1 s), so where each budget stops never depends on the machine.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from local.fakes import FakeClock
from shared.config import Config
from shared.recovery import DeliverySweep, SweepSettings
from shared.recovery.report import SweepReport
from tests.unit.recovery_fakes import FakeGitHub, FakeLedger, Moments

NOW = datetime(2026, 3, 5, 12, 0, tzinfo=UTC)
PAGE_S, REDELIVER_S = 10.0, 1.0


class World:
    def __init__(self, per_page: int = 10) -> None:
        self.clock = FakeClock(NOW)
        self.moments = Moments()
        costs = {"page": PAGE_S, "redeliver": REDELIVER_S}
        self.github = FakeGitHub(self.moments, per_page=per_page, cost_s=costs)
        self.ledger = FakeLedger()
        self.handed: list[Any] = []

    def failed_pushes(self, count: int, *, ago: timedelta, prefix: str) -> None:
        """`count` pushes GitHub failed to deliver, the newest `ago` before now."""
        for n in range(count):
            self.github.send(
                f"{prefix}-{n:05d}", "push", NOW - ago - timedelta(seconds=n), ok=False
            )

    def run(self, settings: SweepSettings) -> SweepReport:
        sweep = DeliverySweep(
            self.ledger,  # type: ignore[arg-type]
            self.github,  # type: ignore[arg-type]
            self.handed.append,
            self.clock,
            settings,
            monotonic=self.moments,
        )
        return sweep.run()


def test_a_long_first_listing_leaves_acting_its_own_budget() -> None:
    world = World()
    # A first run: 3 days of failures GitHub kept, 30 pages at 10 s each (300 s).
    world.failed_pushes(300, ago=timedelta(hours=1), prefix="old")

    report = world.run(SweepSettings.from_config(Config(github_sweep_budget_s=120)))

    # Half the run's 120 s lists (6 pages); the other half redelivers what it opened.
    assert (report.redelivered, len(world.github.redelivered)) == (60, 60)
    assert (report.stopped_at, report.pages, report.opened) == ("list", 6, 60)
    assert world.ledger.recoveries.saved.scan is not None  # the next run resumes the listing
    assert report.elapsed_s == 120


def test_acting_has_its_own_budget_after_a_page_that_overran_the_listings() -> None:
    world = World()
    world.failed_pushes(100, ago=timedelta(minutes=30), prefix="open")

    report = world.run(SweepSettings(list_budget_s=55, act_budget_s=30))

    # The sixth page starts at 50 s and ends at 60 s; acting then has its whole 30 s.
    assert (report.pages, report.stopped_at, report.opened) == (6, "list", 60)
    assert report.redelivered == 30  # one second each
    assert report.elapsed_s == 60 + 30


def test_a_short_listing_leaves_acting_the_rest_of_the_run() -> None:
    world = World(per_page=200)
    world.failed_pushes(150, ago=timedelta(minutes=30), prefix="open")

    report = world.run(SweepSettings(list_budget_s=60, act_budget_s=60))

    # One page (10 s) lists them all; acting has its 60 s and the listing's unused 50 s.
    assert (report.pages, report.opened, report.stopped_at) == (1, 150, "act")
    assert report.redelivered == 110
    assert report.elapsed_s == 120


@pytest.mark.parametrize(
    ("name", "settings", "error"),
    [
        ("no listing", dict(list_budget_s=0), r"SweepSettings\.list_budget_s must be above 0"),
        ("no acting", dict(act_budget_s=-1), r"SweepSettings\.act_budget_s must be above 0"),
    ],
)
def test_each_budget_must_be_positive(name: str, settings: dict[str, Any], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        SweepSettings(**settings)


def test_the_configured_budget_is_split_between_listing_and_acting() -> None:
    settings = SweepSettings.from_config(Config(github_sweep_budget_s=120))

    assert (settings.list_budget_s, settings.act_budget_s) == (60, 60)


def test_a_listing_of_failed_deliveries_stopped_by_its_budget_resumes_as_one() -> None:
    world = World()
    for n in range(400):  # every tenth failed: 40 failures among 400 deliveries
        at = NOW - timedelta(hours=1) - timedelta(seconds=n)
        world.github.send(f"d-{n:05d}", "push", at, ok=n % 10 != 0)

    # 25 s at 10 s a page: the newest page of every delivery, then two of failures only.
    first = world.run(SweepSettings(full_pages=1, list_budget_s=25, act_budget_s=1))
    assert (first.pages, first.listed, first.failed_only, first.stopped_at) == (3, 29, True, "list")
    scan = world.ledger.recoveries.saved.scan
    assert scan is not None and scan.failed_only and scan.next_url is not None

    second = world.run(SweepSettings(full_pages=1, list_budget_s=1000, act_budget_s=1))
    # The rest of the failures (2 pages), then a fresh listing down to the newest listed
    # less the 60 s overlap: a page of every delivery (10 s of them), then one of failures.
    assert (second.resumed, second.pages, second.opened) == (True, 4, 20)
    assert world.ledger.recoveries.saved.scan is None
    assert len(world.ledger.recoveries.docs) == 40
