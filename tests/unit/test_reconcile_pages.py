"""Fan-out pages: task ids, payloads and windows, without Firestore or Cloud Tasks."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from local.fakes import FakeClock
from shared.ledger import Operation
from shared.reconcile import (
    Budget,
    RunReport,
    TaskPageEnqueuer,
    page_names,
    page_payload,
    page_task_id,
    window_key,
)
from shared.reconcile.fanout import fan_out

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def op(name: str) -> Operation:
    return Operation(
        name=name,
        doc_id=name.replace("/", "_"),
        kind="k",
        status="pending",
        submitted_at=NOW,
        attempts=0,
        next_check_at=NOW,
        writeback_done=False,
        context={},
    )


@pytest.mark.parametrize(
    "body",
    [b"not json", b"{}", b'{"names": []}', b'{"names": [1]}', b'{"names": "batches/a"}'],
)
def test_bad_check_page_body_is_refused(body: bytes) -> None:
    with pytest.raises(ValueError, match="check-page"):
        page_names(body)


def test_a_page_with_too_many_names_is_refused() -> None:
    body = page_payload([op(f"batches/{i}") for i in range(1001)])
    with pytest.raises(ValueError, match=r"1\.\.1000"):
        page_names(body)


def test_page_payload_round_trips_through_page_names() -> None:
    page = [op("batches/a"), op("batches/b")]
    assert page_names(page_payload(page)) == ["batches/a", "batches/b"]


def test_page_task_id_depends_on_window_and_page_ends() -> None:
    a, b, c = (op(f"batches/p{i}") for i in range(3))
    assert page_task_id("w1", [a, b]) == page_task_id("w1", [a, b])
    assert (
        len({page_task_id("w1", [a, b]), page_task_id("w2", [a, b]), page_task_id("w1", [a, c])})
        == 3
    )


def test_window_key_is_stable_within_a_window_and_changes_across() -> None:
    clock = FakeClock(datetime.fromtimestamp(3000, UTC))
    first = window_key(clock(), 300)
    assert window_key(clock.advance(299), 300) == first
    assert window_key(clock.advance(1), 300) != first


def test_fan_out_stops_at_the_budget_and_counts_what_it_enqueued() -> None:
    ticks = [0.0]
    budget = Budget(deadline=2.0, drain_s=0.0, monotonic=lambda: ticks[0])
    enqueued: list[str] = []

    def enqueue(page: Any, task_id: str) -> None:
        enqueued.append(task_id)
        ticks[0] += 1.0  # each enqueue takes one second of the budget

    pages = [[op(f"batches/{i}a"), op(f"batches/{i}b")] for i in range(5)]
    report = RunReport()

    fan_out(iter(pages), enqueue, "w1", report, budget)

    assert len(enqueued) == 2 and report.fanned_out_pages == 2 and report.fanned_out_ops == 4
    assert report.stopped_early and report.stopped_at == "fanout"


def test_a_failed_enqueue_counts_an_error_and_the_next_page_still_goes() -> None:
    budget = Budget(deadline=10.0, drain_s=0.0, monotonic=lambda: 0.0)
    calls: list[str] = []

    def enqueue(page: Any, task_id: str) -> None:
        calls.append(task_id)
        if len(calls) == 1:
            raise RuntimeError("queue unavailable")

    report = RunReport()
    fan_out(iter([[op("batches/a")], [op("batches/b")]]), enqueue, "w1", report, budget)

    assert (len(calls), report.errors, report.fanned_out_pages) == (2, 1, 1)
    assert report.last_examined == "batches/b"


def test_task_page_enqueuer_seals_the_page_under_its_task_id() -> None:
    sent: list[dict[str, Any]] = []

    class Queue:
        def enqueue(self, url: str, body: bytes, headers: Any, **options: Any) -> Any:
            sent.append({"url": url, "body": body, **options})
            return type("Result", (), {"status": "created"})()

    enqueue = TaskPageEnqueuer(
        Queue(),
        "https://worker",
        lambda task_id, payload: task_id.encode() + b"|" + payload,
        oidc_service_account="sa@x",
        oidc_audience="https://worker",
        dispatch_deadline_s=480,
    )

    assert enqueue([op("batches/a")], "t-1") == "created"
    [task] = sent
    assert task["body"] == b't-1|{"names": ["batches/a"]}' and task["task_id"] == "t-1"
    assert (task["oidc_service_account"], task["oidc_audience"]) == ("sa@x", "https://worker")
    assert task["dispatch_deadline_s"] == 480
