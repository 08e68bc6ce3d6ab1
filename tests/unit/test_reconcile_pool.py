"""RunReport, Budget and the bounded check pool, with fake checks and a fake monotonic clock."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

from shared.ledger import Operation
from shared.reconcile import Budget, RunReport
from shared.reconcile.pool import check_all

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def op(name: str) -> Operation:
    return Operation(name, name, "k", "pending", NOW, 0, NOW, False, {})


class Ticks:
    """A monotonic clock that moves only when told (thread-safe)."""

    def __init__(self) -> None:
        self.now = 0.0
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self.now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self.now += seconds


def test_report_adds_counters_and_serializes_without_its_lock() -> None:
    report = RunReport()
    report.add(settled=2, errors=1)
    report.add(settled=1)
    data = report.to_dict()
    assert (data["settled"], data["errors"]) == (3, 1) and "_lock" not in data


def test_report_stop_records_the_phase() -> None:
    report = RunReport()
    report.stop("sweep", None)
    assert report.stopped_early and report.stopped_at == "sweep"


def test_budget_left_and_drain_follow_the_injected_clock() -> None:
    ticks = Ticks()
    budget = Budget.starting_now(10.0, 5.0, ticks)
    assert not budget.spent() and budget.left_s() == 10.0 and budget.drain_left_s() == 15.0
    ticks.advance(12)
    assert budget.spent() and budget.left_s() == 0.0 and budget.drain_left_s() == 3.0
    ticks.advance(10)
    assert budget.drain_left_s() == 0.0


def test_every_record_is_checked_once_and_progress_counts_them() -> None:
    checked: list[str] = []
    lock = threading.Lock()
    calls: list[tuple[str, int, int]] = []

    def check(record: Operation, report: RunReport) -> None:
        with lock:
            checked.append(record.name)
        report.add(examined=1)

    report = RunReport()
    records = [op(f"batches/{i}") for i in range(20)]
    check_all(
        records,
        check,
        concurrency=4,
        report=report,
        budget=Budget.starting_now(60, 0, Ticks()),
        phase="poll",
        progress=lambda phase, done, total: calls.append((phase, done, total)),
    )

    assert sorted(checked) == sorted(r.name for r in records) and report.examined == 20
    assert calls[0] == ("poll", 0, 20)
    assert sorted(done for _, done, _ in calls[1:]) == list(range(1, 21))
    assert not report.stopped_early and report.abandoned == 0


def test_no_more_than_concurrency_checks_run_at_once() -> None:
    running, peak, lock = [0], [0], threading.Lock()

    def check(record: Operation, report: RunReport) -> None:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        with lock:
            running[0] -= 1

    check_all(
        [op(f"batches/{i}") for i in range(30)],
        check,
        concurrency=3,
        report=RunReport(),
        budget=Budget.starting_now(60, 0, Ticks()),
        phase="poll",
    )

    assert 1 <= peak[0] <= 3


def test_no_check_starts_once_the_budget_is_spent() -> None:
    ticks = Ticks()
    started: list[str] = []

    def check(record: Operation, report: RunReport) -> None:
        started.append(record.name)
        ticks.advance(1.0)  # each check costs one second of the budget

    report = RunReport()
    check_all(
        [op(f"batches/{i:02d}") for i in range(40)],
        check,
        concurrency=1,
        report=report,
        budget=Budget.starting_now(10.5, 0, ticks),
        phase="poll",
    )

    assert len(started) == 11  # starts at t = 0..10; at t = 11 the budget is spent
    assert report.stopped_early and report.stopped_at == "poll"
    assert report.last_examined == "batches/10"


def test_a_check_running_past_the_drain_is_abandoned_not_awaited() -> None:
    ticks = Ticks()
    entered, release = threading.Event(), threading.Event()

    def check(record: Operation, report: RunReport) -> None:
        ticks.advance(100.0)  # the check outlasts budget and drain on the run's clock
        entered.set()
        release.wait(timeout=30)

    report = RunReport()
    finished = threading.Event()

    def run() -> None:
        check_all(
            [op("batches/slow")],
            check,
            concurrency=1,
            report=report,
            budget=Budget.starting_now(1.0, 1.0, ticks),
            phase="poll",
        )
        finished.set()

    runner = threading.Thread(target=run)
    runner.start()
    try:
        assert finished.wait(timeout=30), "check_all waited for a check past its drain time"
        assert entered.is_set() and report.abandoned == 1
    finally:
        release.set()
        runner.join(timeout=30)
