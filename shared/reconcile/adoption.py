"""Orphan adoption: tagged Gemini batches that never reached the ledger get registered.

A crash between creating a batch and registering it leaves a batch no webhook or run
would settle. Batches tagged `hookledger:` (`gemini.TAG_PREFIX`) from the last
`ORPHAN_WINDOW` that the ledger does not know are registered, then checked like any
due operation; untagged batches are never touched.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from shared import logs, review
from shared.clock import Clock
from shared.gemini import TAG_PREFIX, TERMINAL_STATES, GeminiError, GeminiGateway
from shared.ledger import Ledger, LedgerError, Operation
from shared.reconcile.report import Budget, RunReport

log = logs.get_logger("reconcile")

REVIEW_TAG_PREFIX = f"{TAG_PREFIX}review:"
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
                name, display_name, state, created = next(batches)
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
            if not display_name.startswith(TAG_PREFIX) or not name:
                continue  # not ours: never touched
            if created is not None and created < cutoff:
                continue  # long expired in Gemini; checking it would cost a read every run
            if name in known:
                continue  # read from the ledger moments ago
            try:
                if self._ledger.get(name) is not None:
                    continue
                record = register_orphan(self._ledger, self._gemini, name, display_name, state)
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


def register_orphan(
    ledger: Ledger, gemini: GeminiGateway, name: str, tag: str, state: str
) -> Operation | None:
    """Register the orphan `name` by what its tag says; None (logged) for an unknown kind.

    Today only the review pipeline's tag (`hookledger:review:{repo}@{sha}`) is known; this
    is the one place a registry of kinds would be consulted.
    """
    if not tag.startswith(REVIEW_TAG_PREFIX) or "@" not in tag:
        logs.event(
            log,
            logging.WARNING,
            f"tagged batch {name} has an unknown kind; not adopted",
            operation=name,
            display_name=tag,
        )
        return None
    repo, _, sha = tag.removeprefix(REVIEW_TAG_PREFIX).rpartition("@")
    paths: list[str] = []
    if state in TERMINAL_STATES:
        paths = [row.key for row in gemini.fetch_batch(name).rows]
    record = ledger.register(name, review.KIND, {"repo": repo, "sha": sha, "paths": paths})
    logs.event(
        log,
        logging.WARNING,
        f"adopted orphan batch {name}",
        operation=name,
        kind=review.KIND,
        repo=repo,
        sha=sha,
        files=len(paths),
    )
    return record
