"""A write-back that keeps failing settles `failed` with an alert after a few attempts,
instead of being retried until Gemini forgets the batch (issue 33, point 6); a transient
error of the tree (a Firestore outage) is still retried for as long as it lasts.

Against the Firestore emulator: the count of failed write-backs is kept on the operation
by the ledger's failing path, and the final settlement is one conditional commit.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from google.api_core import exceptions as gexc

from apps.review.results import put_review
from shared import kinds
from shared.gemini import BatchStatus, Row
from shared.kinds import OperationKind
from shared.ledger import Ledger, Settlement, StoreUnavailable, WritebackFailed
from shared.settlement.settler import WRITEBACK_ATTEMPTS, Settler, SettleResult
from tests.standins import ScriptedGemini

NAME = "batches/broken"
BROKEN = "writeback-broken"  # its write-back has a bug: raises outside the error tree
OUTAGE = "writeback-outage"  # its write-back reads the ledger, which is unavailable
SDK_OUTAGE = "writeback-sdk-outage"  # the same outage, as the Firestore SDK raises it


def _bug(writes: Any, record: Any, batch: Any) -> None:
    raise TypeError("'NoneType' object is not subscriptable")


def _outage(writes: Any, record: Any, batch: Any) -> None:
    raise StoreUnavailable("reviews read timed out")


def _sdk_outage(writes: Any, record: Any, batch: Any) -> None:
    raise gexc.ServiceUnavailable("firestore.googleapis.com unreachable")


kinds.register(OperationKind(name=BROKEN, tag=BROKEN, writeback=_bug))
kinds.register(OperationKind(name=OUTAGE, tag=OUTAGE, writeback=_outage))
kinds.register(OperationKind(name=SDK_OUTAGE, tag=SDK_OUTAGE, writeback=_sdk_outage))


def succeeded(times: int) -> ScriptedGemini:
    """Gemini reporting the batch succeeded, with one row, for `times` fetches."""
    status = BatchStatus(NAME, "JOB_STATE_SUCCEEDED", rows=(Row("k", text="an answer"),))
    return ScriptedGemini(*[status] * times)


def settle_until_done(
    settler: Settler, most: int = 20
) -> tuple[SettleResult | None, list[WritebackFailed]]:
    """Settle as webhooks and reconcile runs would, until it stops failing (at most `most`)."""
    failures: list[WritebackFailed] = []
    for _ in range(most):
        try:
            return settler.settle(NAME, "reconcile"), failures
        except WritebackFailed as exc:
            failures.append(exc)
    return None, failures


def alerts(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    fields = [getattr(r, "hookledger_fields", {}) for r in caplog.records]
    return [f for f in fields if f.get("alert") == "writeback_failed"]


def test_a_writeback_that_keeps_failing_settles_failed_with_an_alert(ledger, clock, caplog):
    ledger.operations.register(NAME, BROKEN)
    settler = Settler(ledger, succeeded(20), clock=clock)

    with caplog.at_level(logging.INFO):
        outcome, failures = settle_until_done(settler)

    assert outcome is not None, f"still pending after {len(failures)} failed write-backs"
    attempts = WRITEBACK_ATTEMPTS
    assert (outcome.result, outcome.status) == ("settled", "failed")
    assert len(failures) == attempts - 1  # the last attempt's failure settles it
    record = ledger.operations.get(NAME)
    assert (record.status, record.settled_by) == ("failed", "reconcile")
    assert record.error["reason"] == "writeback_failed"
    assert "TypeError" in record.error["message"] and f"{attempts} " in record.error["message"]
    assert ledger.queries.stored_fields(NAME)["writeback_failures"] == attempts
    [alert] = alerts(caplog)
    assert (alert["operation"], alert["kind"], alert["failures"]) == (NAME, BROKEN, attempts)
    assert "TypeError" in alert["reason"]
    assert Settler(ledger, succeeded(1), clock=clock).settle(NAME, "webhook").result == (
        "already_settled"
    )


def test_each_failed_writeback_is_counted_on_the_operation_and_a_success_adds_nothing(ledger):
    ledger.operations.register(NAME, BROKEN)
    ledger.operations.register("batches/fine", BROKEN)

    def bug(writes: Any, record: Any) -> None:
        raise KeyError("summary")

    counted = []
    for _ in range(3):
        with pytest.raises(WritebackFailed, match=NAME) as caught:
            ledger.settle(NAME, "succeeded", "webhook", writeback=bug)
        counted.append(caught.value.failures)  # type: ignore[attr-defined]
    fine = ledger.settle("batches/fine", "succeeded", "webhook", writeback=lambda w, r: None)

    assert counted == [1, 2, 3]
    assert ledger.queries.stored_fields(NAME)["writeback_failures"] == 3
    assert ledger.operations.get(NAME).pending
    assert fine is Settlement.SETTLED
    assert "writeback_failures" not in ledger.queries.stored_fields("batches/fine")


def test_a_writeback_whose_own_write_is_refused_is_counted_too(ledger):
    for name in ("batches/first", NAME):
        ledger.operations.register(name, BROKEN)

    def create(writes: Any, record: Any) -> None:
        put_review(writes, "o/r", "abc", "a.md", {"by": record.name}, replace=False)

    ledger.settle("batches/first", "succeeded", "webhook", writeback=create)
    with pytest.raises(WritebackFailed, match="already exists") as caught:
        ledger.settle(NAME, "succeeded", "webhook", writeback=create)

    assert caught.value.failures == 1  # type: ignore[attr-defined]
    assert ledger.operations.get(NAME).pending


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        pytest.param("the ledger's StoreUnavailable", OUTAGE, id="store-unavailable"),
        pytest.param("the SDK's ServiceUnavailable", SDK_OUTAGE, id="sdk-unavailable"),
    ],
)
def test_a_firestore_outage_in_the_writeback_is_retried_and_never_settles_failed(
    ledger, clock, caplog, name, kind
):
    ledger.operations.register(NAME, kind)
    tries = 2 * WRITEBACK_ATTEMPTS
    settler = Settler(ledger, succeeded(tries), clock=clock)

    outcome, failures = settle_until_done(settler, most=tries)

    assert (outcome, len(failures)) == (None, tries), name
    assert ledger.operations.get(NAME).pending, name
    assert "writeback_failures" not in ledger.queries.stored_fields(NAME), name
    assert alerts(caplog) == [], name


class RacedAtTheLastFailure:
    """The ledger, where another caller settles the operation right after the write-back's
    last allowed failure, before the settler can record the give-up."""

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger
        self.raced = False

    @property
    def clock(self) -> Any:
        return self._ledger.clock

    @property
    def operations(self) -> Any:
        return self._ledger.operations

    def settle(self, name: str, status: str, by: str, **options: Any) -> Settlement:
        try:
            return self._ledger.settle(name, status, by, **options)
        except WritebackFailed as exc:
            last = getattr(exc, "failures", 0) >= WRITEBACK_ATTEMPTS
            if last and not self.raced:
                self.raced = True
                self._ledger.settle(name, "cancelled", "webhook")  # the other caller wins
            raise


def test_the_give_up_is_one_conditional_commit_that_a_racing_settlement_wins(ledger, clock, caplog):
    ledger.operations.register(NAME, BROKEN)
    raced = RacedAtTheLastFailure(ledger)
    settler = Settler(raced, succeeded(20), clock=clock)  # type: ignore[arg-type]

    outcome, failures = settle_until_done(settler)

    assert raced.raced and outcome is not None
    assert outcome.result == "already_settled"
    assert len(failures) == WRITEBACK_ATTEMPTS - 1
    record = ledger.operations.get(NAME)
    assert (record.status, record.settled_by, record.error) == ("cancelled", "webhook", None)
    assert alerts(caplog) == []
