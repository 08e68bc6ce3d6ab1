"""Reading Gemini's batch listing only as far back as a search needs.

`batches.list` documents no order; Gemini lists newest first (as the simulator does), so a
search for batches made since `floor` can stop at the end of the page that reached one
made before it. Checked while reading: a batch listed after one more than
`ORDER_TOLERANCE` older means the order is not that, and the listing goes to the end.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import datetime, timedelta

from shared.gemini.batches import BatchSummary

# How far Gemini's create_time may run ahead of our clock (and the listing lag) we tolerate.
CLOCK_SKEW = timedelta(minutes=2)
# Batches per listing call (the API's page size; a page is read whole).
LIST_PAGE = 100
# Create times in one listing are Gemini's own: a batch this much newer than one listed
# before it means the listing is not newest first.
ORDER_TOLERANCE = timedelta(seconds=5)


def since(listing: Iterable[BatchSummary], floor: datetime | None) -> Iterator[BatchSummary]:
    """The batches of `listing` (newest first, `LIST_PAGE` a page) down to the end of the
    page that reached one made before `floor`; every batch without a floor, or when the
    listing turns out not to be newest first."""
    oldest: datetime | None = None
    ordered = True
    past_floor = False
    for read, batch in enumerate(listing, start=1):
        created = batch.create_time
        if created is not None:
            if oldest is not None and created > oldest + ORDER_TOLERANCE:
                ordered = False
            oldest = created if oldest is None else min(oldest, created)
            past_floor = past_floor or (floor is not None and created < floor)
        yield batch
        if past_floor and ordered and read % LIST_PAGE == 0:
            return
