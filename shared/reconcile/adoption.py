"""Orphan adoption: tagged Gemini batches that never reached the ledger get registered.

A crash between creating a batch and registering it leaves a batch no webhook or run
would settle. Batches tagged `hookledger:{kind}:…` (`kinds.TAG_PREFIX`) from the last
`ORPHAN_WINDOW` that the ledger does not know are registered as the kind the tag names
(its adopter builds the context), then checked like any due operation; untagged batches
are never touched.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from shared import kinds, logs
from shared.clock import Clock
from shared.errors import PermanentError
from shared.gemini import BatchSummary, GeminiError, GeminiGateway
from shared.ledger import Ledger, LedgerError, Operation
from shared.reconcile.report import Budget, RunReport

log = logs.get_logger("reconcile")

# Orphans are looked for among batches this young: past Gemini's 48 h expiry with a day's
# slack, so the reads per run stay bounded however many batches the project has made.
ORPHAN_WINDOW = timedelta(hours=72)


class OrphanAdopter:
    """Finds and registers orphan batches; `register_orphan` decides what a tag means."""

    def __init__(self, ledger: Ledger, gemini: GeminiGateway, clock: Clock) -> None:
        self._ledger = ledger
        self._gemini = gemini
        self._clock = clock

    def adopt(self, report: RunReport, budget: Budget, known: set[str]) -> list[Operation]:
        """Register tagged batches missing from the ledger; returns them, to check now.

        Names in `known` were just read from the ledger and cost no second read. Stops
        (and says so in `report`) when the budget is spent; listing failures end adoption
        for this run, one batch's failure skips that batch.
        """
        adopted: list[Operation] = []
        cutoff = self._clock() - ORPHAN_WINDOW
        batches = self._gemini.list_batches()  # lazy: one page at a time, within the budget
        while True:
            if budget.spent():
                report.stop("adopt", None)
                break
            try:
                batch = next(batches)
            except StopIteration:
                break
            except GeminiError as exc:
                report.add(errors=1)
                logs.event(
                    log,
                    logging.WARNING,
                    "listing Gemini batches failed; adoption stopped",
                    reason=str(exc),
                )
                break
            name, display_name = batch.name, batch.display_name
            if not display_name.startswith(kinds.TAG_PREFIX) or not name:
                continue  # not ours: never touched
            if batch.create_time is not None and batch.create_time < cutoff:
                continue  # long expired in Gemini; checking it would cost a read every run
            if name in known:
                continue  # read from the ledger moments ago
            try:
                if self._ledger.get(name) is not None:
                    continue
                record = register_orphan(self._ledger, self._gemini, batch)
            except (LedgerError, GeminiError) as exc:
                report.add(errors=1)
                logs.event(
                    log,
                    logging.ERROR,
                    f"adopting orphan batch {name} failed",
                    operation=name,
                    display_name=display_name,
                    reason=str(exc),
                )
                continue
            if record is not None:
                report.add(adopted=1)
                adopted.append(record)
        return adopted


def register_orphan(ledger: Ledger, gemini: GeminiGateway, batch: BatchSummary) -> Operation | None:
    """Register the orphan `batch` as the kind its tag names (shared/kinds/); None if it cannot.

    A kind nobody registered (a `hookledger submit --kind X` batch) is adopted with the
    generic behaviour; a kind that adopts nothing, or a tag its kind cannot read, is
    logged and left alone.
    """
    parsed = kinds.parse_tag(batch.display_name)
    adopt = parsed.kind.adopt if parsed is not None else None
    if parsed is None or adopt is None:
        logs.event(
            log,
            logging.WARNING,
            f"tagged batch {batch.name} names no adoptable kind; not adopted",
            operation=batch.name,
            display_name=batch.display_name,
        )
        return None
    try:
        context = adopt(parsed.key, batch, gemini)
    except PermanentError as exc:
        logs.event(
            log,
            logging.WARNING,
            f"tagged batch {batch.name} not adopted: {exc}",
            operation=batch.name,
            display_name=batch.display_name,
        )
        return None
    record = ledger.register(batch.name, parsed.kind.name, context)
    logs.event(
        log,
        logging.WARNING,
        f"adopted orphan batch {batch.name}",
        operation=batch.name,
        kind=parsed.kind.name,
        display_name=batch.display_name,
    )
    return record
