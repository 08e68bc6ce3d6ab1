"""Reconcile's per-operation check (`OperationCheck`): settle, defer or alert, decided
against the in-memory ledger (tests/memory_ledger.py), which passes the exactly-once
contract (tests/integration/test_ledger_contract.py). No emulator, no simulator."""

from __future__ import annotations

from datetime import timedelta

import pytest

from local.fakes import FakeClock
from shared.gemini import BatchStatus, GeminiNotFound, GeminiRateLimited, GeminiUnavailable
from shared.ledger import StoreUnavailable
from shared.reconcile.check import OperationCheck
from shared.reconcile.report import RunReport
from shared.reconcile.stuck import StuckAlerts
from shared.retry import Backoff
from shared.settlement.settler import Settler
from tests.memory_ledger import MemoryLedger
from tests.standins import ScriptedGemini as Gemini

NAME = "batches/check"
BACKOFF = Backoff(first_s=30, cap_s=1800, jitter=0.0)  # no jitter: exact times
STUCK_AFTER = timedelta(hours=6)
WINDOW = timedelta(hours=1)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def ledger(clock: FakeClock) -> MemoryLedger:
    memory = MemoryLedger(clock)
    memory.operations.register(NAME, "k")
    return memory


def check(ledger, clock, *answers):
    """Run one check of NAME with Gemini answering `answers`; (report, record after)."""
    settler = Settler(ledger, Gemini(*answers), clock=clock, gone_after=timedelta(seconds=30))
    stuck = StuckAlerts(ledger.operations, clock, STUCK_AFTER, WINDOW)
    run = OperationCheck(
        settler, ledger.operations, clock, backoff=BACKOFF, stuck=stuck, rand=lambda: 0.5
    )
    report = RunReport()
    run(ledger.operations.get(NAME), report)
    return report, ledger.operations.get(NAME)


def counts(report: RunReport) -> dict[str, int]:
    return {
        key: value for key, value in report.to_dict().items() if isinstance(value, int) and value
    }


def test_a_terminal_operation_is_settled_by_reconcile_and_not_deferred(ledger, clock):
    report, record = check(ledger, clock, BatchStatus(NAME, "JOB_STATE_FAILED"))

    assert counts(report) == {"examined": 1, "settled": 1}
    assert (record.status, record.settled_by, record.attempts) == ("failed", "reconcile", 0)


def test_a_running_operation_is_deferred_by_the_backoff_with_the_answer_noted(ledger, clock):
    report, record = check(ledger, clock, BatchStatus(NAME, "JOB_STATE_RUNNING"))

    assert counts(report) == {"examined": 1, "still_running": 1, "deferred": 1}
    assert record.pending and record.attempts == 1
    assert record.next_check_at == clock() + timedelta(seconds=30)
    assert [c["answer"] for c in record.checks] == ["still running"]


def test_gemini_unavailable_defers_and_counts_an_error(ledger, clock):
    report, record = check(ledger, clock, GeminiUnavailable("503"))

    assert counts(report) == {"examined": 1, "errors": 1, "unavailable": 1, "deferred": 1}
    assert record.pending and record.next_check_at == clock() + timedelta(seconds=30)


def test_a_daily_quota_429_defers_at_least_as_long_as_gemini_asks(ledger, clock):
    limited = GeminiRateLimited("429", retry_after_s=7200, quota_kind="per_day")

    report, record = check(ledger, clock, limited)

    assert report.deferred == 1 and record.next_check_at == clock() + timedelta(hours=2)


def test_a_first_404_defers_until_a_second_may_confirm_it_gone(ledger, clock):
    report, record = check(ledger, clock, GeminiNotFound("404"))

    assert counts(report) == {"examined": 1, "errors": 1, "not_found": 1, "deferred": 1}
    assert record.pending and record.not_found_at == clock()
    assert record.next_check_at == clock() + timedelta(seconds=30)
    clock.advance(30)

    report, record = check(ledger, clock, GeminiNotFound("404"))

    assert report.settled == 1 and record.error["reason"] == "gone"


def test_a_ledger_failure_is_not_deferred_the_operation_stays_due(ledger, clock):
    ledger.settle = lambda *a, **k: (_ for _ in ()).throw(StoreUnavailable("firestore down"))

    report, record = check(ledger, clock, BatchStatus(NAME, "JOB_STATE_SUCCEEDED"))

    assert counts(report) == {"examined": 1, "errors": 1}
    assert record.pending and record.attempts == 0


def test_a_stuck_operation_is_alerted_once_per_window_and_still_deferred(ledger, clock):
    clock.advance(STUCK_AFTER.total_seconds())
    running = BatchStatus(NAME, "JOB_STATE_RUNNING")

    first, _ = check(ledger, clock, running)
    clock.advance(60)
    second, record = check(ledger, clock, running)

    assert (first.stuck_alerts, second.stuck_alerts) == (1, 0)
    assert (first.deferred, second.deferred, record.attempts) == (1, 1, 2)


def test_an_operation_waiting_on_its_caller_is_alerted_and_deferred(ledger, clock):
    report, record = check(ledger, clock, BatchStatus(NAME, "requires_action"))

    assert (report.waiting_alerts, report.deferred) == (1, 1)
    assert record.waiting_alerted_at == clock()
    assert record.checks[-1]["answer"].startswith("waiting for")
