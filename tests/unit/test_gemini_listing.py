"""`shared.gemini.listing.since`: the batch listing read only as far back as a search needs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from shared.gemini import BatchSummary
from shared.gemini.listing import LIST_PAGE, since

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


def listed(ages_s: list[float]) -> list[BatchSummary]:
    return [
        BatchSummary(f"batches/{n}", f"tag-{n}", "JOB_STATE_RUNNING", NOW - timedelta(seconds=a))
        for n, a in enumerate(ages_s)
    ]


def test_a_newest_first_listing_stops_at_the_end_of_the_page_past_the_floor():
    batches = listed([float(n) for n in range(3 * LIST_PAGE)])  # one a second, newest first
    floor = NOW - timedelta(seconds=LIST_PAGE + 10)  # crossed early in the second page
    read = list(since(iter(batches), floor))
    assert len(read) == 2 * LIST_PAGE


def test_a_listing_out_of_order_is_read_to_the_end():
    ages = [float(n) for n in range(3 * LIST_PAGE)]
    ages[LIST_PAGE // 2] = 0.0  # a new batch listed after older ones, in the first page
    floor = NOW - timedelta(seconds=10)
    assert len(list(since(iter(listed(ages)), floor))) == 3 * LIST_PAGE


def test_without_a_floor_every_batch_is_read():
    batches = listed([float(n) for n in range(2 * LIST_PAGE + 5)])
    assert len(list(since(iter(batches), None))) == 2 * LIST_PAGE + 5
