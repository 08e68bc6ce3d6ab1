"""Orphan adoption: tagged Gemini batches that never reached the ledger get registered.

A crash between creating a batch and registering it leaves a batch no webhook or run
would settle. Batches tagged `hookledger:{kind}:…` (`kinds.TAG_PREFIX`) that the ledger
does not know are registered as the kind the tag names (its adopter builds the context),
then checked like any due operation; untagged batches are never touched.

Which batches are examined (a ledger read each, unless the due pages just read them): those
created after the watermark minus `margin`, and never older than `ORPHAN_WINDOW`. The
watermark is when the last COMPLETE listing began (`ledger.watermark.get`, kept in
memory after the process's first read), so a run with nothing new reads no operation:

    worker      creates batch B (t0) ── crashes before register
    run n       listing begins at W_n ≤ t0 ... ends complete → watermark = W_n
    run n+1     listing begins at W_n+1 > t0: examines created ≥ W_n - margin ∋ B
                ledger has no B → adopted, checked now → watermark = W_n+1
    run n+2     examines created ≥ W_n+1 - margin: B is no longer read

`margin` (grace + `CLOCK_SKEW`) covers Gemini's clock against ours and a batch that a
listing missed because it appeared just as the listing began. A listing cut short (budget,
a listing error) or with a batch whose adoption failed leaves the watermark where it was:
the next run examines the same batches again.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from shared import logs
from shared.clock import Clock
from shared.errors import PermanentError, TransientError
from shared.gemini import BatchSummary, GeminiError, GeminiGateway
from shared.ledger import LedgerError, Operation
from shared.ledger.protocols import AdoptionLedger
from shared.reconcile.report import Budget, RunReport
from shared.settlement import kinds

log = logs.get_logger("reconcile")

# Orphans are looked for among batches this young: past Gemini's 48 h expiry with a day's
# slack, so the reads per run stay bounded however many batches the project has made.
ORPHAN_WINDOW = timedelta(hours=72)
# How far Gemini's create_time may run ahead of our clock (and the listing lag) we tolerate.
CLOCK_SKEW = timedelta(minutes=2)


class IncompleteContext(TransientError):
    """An orphan's context cannot be rebuilt yet (its kind `needs` a field neither its
    claim nor the batch tells): not registered, examined again next run."""


class OrphanAdopter:
    """Finds and registers orphan batches; `register_orphan` decides what a tag means."""

    def __init__(
        self,
        ledger: AdoptionLedger,
        gemini: GeminiGateway,
        clock: Clock,
        *,
        margin: timedelta = CLOCK_SKEW,
    ) -> None:
        self._ledger = ledger
        self._gemini = gemini
        self._clock = clock
        self._margin = margin
        # The watermark this process last read or wrote; None until the first run reads it.
        self._watermark: datetime | None = None
        self._loaded = False

    def adopt(self, report: RunReport, budget: Budget, known: set[str]) -> list[Operation]:
        """Register tagged batches missing from the ledger; returns them, to check now.

        Names in `known` were just read from the ledger and cost no second read; batches
        created before the watermark minus the margin cost none either. Stops (and says so
        in `report`) when the budget is spent; listing failures end adoption for this run,
        one batch's failure skips that batch; either keeps the watermark where it was.
        """
        adopted: list[Operation] = []
        listed_at = self._clock()
        cutoff = self._cutoff(listed_at)
        complete = True
        batches = self._gemini.list_batches()  # lazy: one page at a time, within the budget
        while True:
            if budget.spent():
                report.stop("adopt", None)
                complete = False
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
                complete = False
                break
            name, display_name = batch.name, batch.display_name
            if not display_name.startswith(kinds.TAG_PREFIX) or not name:
                continue  # not ours: never touched
            if batch.create_time is not None and batch.create_time < cutoff:
                continue  # examined by a complete listing already, or long expired
            if batch.create_time is not None and batch.create_time > listed_at - self._margin:
                continue  # maybe mid-create: its own attempt registers it (the watermark keeps it)
            if name in known:
                continue  # read from the ledger moments ago
            try:
                if self._ledger.operations.get(name) is not None:
                    continue
                record = register_orphan(self._ledger, self._gemini, batch)
            except IncompleteContext:  # alerted on by register_orphan
                report.add(errors=1)
                complete = False  # examine it again next run: its rows may tell by then
                continue
            except (LedgerError, GeminiError) as exc:
                report.add(errors=1)
                complete = False  # examine it again next run
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
        if complete:
            self._advance(listed_at)
        return adopted

    def _cutoff(self, now: datetime) -> datetime:
        """Batches created before this need no read: the window, or the watermark - margin."""
        floor = now - ORPHAN_WINDOW
        if not self._loaded:
            try:
                self._watermark = self._ledger.watermark.get()
                self._loaded = True
            except LedgerError as exc:  # fall back to the whole window: more reads, no miss
                logs.event(
                    log,
                    logging.WARNING,
                    "reading the adoption watermark failed; examining the whole window",
                    operation="reconcile_state/adoption",
                    reason=str(exc),
                )
        if self._watermark is None:
            return floor
        return max(floor, self._watermark - self._margin)

    def _advance(self, listed_at: datetime) -> None:
        """Store the complete listing's start; a failed write only costs reads next time."""
        try:
            self._ledger.watermark.set(listed_at)
        except LedgerError as exc:
            logs.event(
                log,
                logging.WARNING,
                "storing the adoption watermark failed; the next run examines more batches",
                operation="reconcile_state/adoption",
                reason=str(exc),
            )
        # This process's own complete listing is a fact whether or not the write landed.
        self._watermark, self._loaded = listed_at, True


def _generation(ledger: AdoptionLedger, parsed: kinds.ParsedTag) -> dict[str, Any]:
    """register_winner's arguments for an orphan re-run batch: it becomes the push's check
    run's current operation, a pending previous one superseded (docs, "Re-run"); none for
    any other batch, or a push whose submission has no winner (nothing to take over)."""
    from shared.settlement.cancel import cancel_item

    find = parsed.kind.generation_of
    push = find(parsed.key) if find is not None else None
    stored = ledger.submissions.get(push) if push else None
    if push is None or stored is None or not stored.operation:
        return {}
    return {"generation_of": push, "superseded_outbox": lambda name: [cancel_item(name)]}


def register_orphan(
    ledger: AdoptionLedger, gemini: GeminiGateway, batch: BatchSummary
) -> Operation | None:
    """Register the orphan `batch` as the kind its tag names (settlement/kinds.py); None if not;
    `IncompleteContext` when its context cannot be rebuilt yet.

    The push's submission decides first (docs/architecture.md, "One winner per push"): a
    batch that is not the push's winner is superseded and cancelled, never adopted; the
    winner is registered with the kind's adopter context (what the batch itself tells)
    merged under the submission's own (what its claim recorded: the files it submits and
    refuses), whatever the submission holds. A context still lacking a field the kind
    `needs` is never registered half: it is alerted on (`adoption_incomplete`) and
    examined again next run. A kind nobody registered (a `hookledger submit --kind X`
    batch) is adopted with the generic behaviour; a kind that adopts nothing, or a tag its
    kind cannot read, is logged and left alone.
    """
    from shared.settlement.cancel import supersede

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
    kind, tag = parsed.kind.name, batch.display_name
    submission = ledger.submissions.get(tag)
    fallback = None
    if submission is None or not submission.operation:
        try:
            fallback = adopt(parsed.key, batch, gemini)
        except PermanentError as exc:
            logs.event(
                log,
                logging.WARNING,
                f"tagged batch {batch.name} not adopted: {exc}",
                operation=batch.name,
                display_name=tag,
            )
            return None
        # The push's own context over the adopter's, as register_winner merges them.
        merged = {**fallback, **(submission.context if submission is not None else {})}
        missing = [need for need in parsed.kind.needs if not merged.get(need)]
        if missing:
            logs.event(
                log,
                logging.ERROR,
                f"orphan batch {batch.name} not adopted: its context lacks {', '.join(missing)}",
                alert="adoption_incomplete",
                operation=batch.name,
                kind=kind,
                display_name=tag,
                missing=missing,
            )
            raise IncompleteContext(f"{batch.name}: context lacks {', '.join(missing)}")
    winner = ledger.submissions.register_winner(
        tag, batch.name, kind, None, fallback_context=fallback, **_generation(ledger, parsed)
    )
    if not winner.won:
        supersede(ledger, gemini, batch.name, kind, winner=winner.operation)
        return None
    record = ledger.operations.get(batch.name)
    logs.event(
        log,
        logging.WARNING,
        f"adopted orphan batch {batch.name}",
        operation=batch.name,
        kind=kind,
        display_name=tag,
    )
    return record
