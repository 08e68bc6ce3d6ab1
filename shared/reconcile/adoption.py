"""Orphan adoption: batches the ledger is waiting for, found at Gemini and registered.

A crash between creating a batch and registering it leaves a batch no webhook or run
would settle. Such a batch can exist only where a submission was claimed and has no
winner yet, or was taken over (shared/ledger/submissions.py, its open marks): adoption
reads those open claims (`open_claims`, one query, at most `OPEN_CLAIMS_PER_RUN`) whose
last lease ended more than `margin` (grace + `CLOCK_SKEW`) ago, so their creators are done.
With none open it lists nothing. Else it lists Gemini's batches newest first and stops at
the end of the page holding the first one created before the oldest claim's `open_since`
minus `margin`: no batch of those claims is older. A batch whose `display_name` is an open
claim's tag is registered as the kind the tag names (`register_orphan`: the submission
decides the winner, the rest are superseded), then checked like any due operation; no
other batch is touched.

    worker    claim (open) ─ create B ─ crash                adopt_after = lease end
    run n     open_claims ∋ tag ─ list newest first … B … stop below open_since - margin
              B unknown → register_orphan(B): the winner, open marks cleared
    run n+1   open_claims ∌ tag: no listing for it again

A complete listing (not cut by the budget or an error) that found no unknown batch of an
open claim closes it (`close_open`, on condition nobody claimed it since): its lease ended
before the listing began, and a create is only sent with `CREATE_BUDGET` of lease left.

The order: Gemini's `batches.list` reference documents no order. It lists newest first
(as the simulator does, local/simulator/state.py), and the early stop relies on it; the
adopter checks it while reading, a fetched page always whole: a batch created more than
`ORDER_TOLERANCE` after an older one listed before it means the order is not that, and the
run lists to the end (WARNING).

Claims from before the open marks: the deployment's last watermark
(`reconcile_state/adoption`, left by the adoption that listed everything) makes one more
listing examine every tagged batch created since it, minus `margin`, as that adoption
did; once that listing is complete, the watermark is deleted. Not covered: a tagged batch
with no submission at all (`hookledger submit --kind` creates before it registers, and
reports a failed registration to its operator; a process killed between the two leaves a
batch no claim names).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from shared import kinds, logs
from shared.clock import Clock
from shared.errors import PermanentError, TransientError
from shared.gemini import BatchSummary, GeminiError, GeminiGateway
from shared.gemini.listing import CLOCK_SKEW, LIST_PAGE, ORDER_TOLERANCE
from shared.ledger import LedgerError, Operation
from shared.ledger.protocols import AdoptionLedger
from shared.ledger.submissions import OpenClaim
from shared.reconcile.report import Budget, RunReport
from shared.settlement.cancel import cancel_item, supersede

log = logs.get_logger("reconcile")

# Never list further back than this: past Gemini's 48 h expiry with a day's slack.
ORPHAN_WINDOW = timedelta(hours=72)
# Open claims one run looks for (the longest ended first; the rest next run).
OPEN_CLAIMS_PER_RUN = 500


class IncompleteContext(TransientError):
    """An orphan's context cannot be rebuilt yet (its kind `needs` a field neither its
    claim nor the batch tells): not registered, examined again next run."""


@dataclass
class Listing:
    """What one listing found: each open tag's batches, the watermark's tagged batches,
    and whether it read down to its floor (or the end) without a cut or an error."""

    by_tag: dict[str, list[BatchSummary]] = field(default_factory=lambda: defaultdict(list))
    since_watermark: list[BatchSummary] = field(default_factory=list)
    complete: bool = True


class OrphanAdopter:
    """Finds and registers the batches open claims may have left; `register_orphan`
    decides what a tag means."""

    def __init__(
        self,
        ledger: AdoptionLedger,
        gemini: GeminiGateway,
        clock: Clock,
        *,
        margin: timedelta = CLOCK_SKEW,
        limit: int = OPEN_CLAIMS_PER_RUN,
    ) -> None:
        self._ledger = ledger
        self._gemini = gemini
        self._clock = clock
        self._margin = margin
        self._limit = limit
        # The old adoption's watermark, read once per process; None once its listing is done.
        self._watermark: datetime | None = None
        self._watermark_read = False

    def adopt(self, report: RunReport, budget: Budget, known: set[str]) -> list[Operation]:
        """Register the batches open claims left unregistered; returns them, to check now.

        Names in `known` were just read from the ledger and cost no second read. Stops
        (and says so in `report`) when the budget is spent; a failed query or listing ends
        adoption for this run, one batch's failure skips its claim; either leaves the
        claims open for the next run.
        """
        now = self._clock()
        claims = self._open_claims(now, report)
        watermark = self._legacy_watermark()
        if claims is None or (not claims and watermark is None):
            return []  # nothing the ledger waits for: no listing at all
        floors = [claim.open_since for claim in claims]
        if watermark is not None:
            floors.append(watermark)
        floor = max(min(floors) - self._margin, now - ORPHAN_WINDOW)
        listing = self._list({claim.tag for claim in claims}, floor, watermark, now, report, budget)
        adopted, failed = self._register_found(listing, known, report, budget)
        if listing.complete and not report.stopped_early:
            self._close([claim for claim in claims if claim.tag not in failed])
            if watermark is not None and WATERMARK not in failed:
                self._retire_watermark()
        return adopted

    def _open_claims(self, now: datetime, report: RunReport) -> list[OpenClaim] | None:
        """The claims to look for now; None (logged, counted) when the query failed."""
        try:
            return self._ledger.submissions.open_claims(now - self._margin, self._limit)
        except LedgerError as exc:
            report.add(errors=1)
            logs.event(
                log,
                logging.ERROR,
                "reading the open submissions failed; adoption skipped this run",
                operation="submissions",
                reason=str(exc),
            )
            return None

    def _list(
        self,
        tags: set[str],
        floor: datetime,
        watermark: datetime | None,
        now: datetime,
        report: RunReport,
        budget: Budget,
    ) -> Listing:
        """Gemini's batches, newest first, to the end of the page where they pass `floor`
        (to the end when they are not in that order): the open tags' batches, and with a
        watermark every tagged batch created since it minus the margin (not mid-create).

        A fetched page is read whole (it costs no call), so the first page alone shows an
        order that is not newest first, even when its first batch is past the floor."""
        listing = Listing()
        ordered, oldest, past_floor, read = True, None, False, 0
        batches = self._gemini.list_batches(page_size=LIST_PAGE)  # lazy: a page at a time
        while not (ordered and past_floor and read % LIST_PAGE == 0):
            if budget.spent():
                report.stop("adopt", None)
                listing.complete = False
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
                    operation="batches",
                    reason=str(exc),
                )
                listing.complete = False
                break
            read += 1
            created = batch.create_time
            if created is not None:
                if ordered and oldest is not None and created > oldest + ORDER_TOLERANCE:
                    ordered = False
                    logs.event(
                        log,
                        logging.WARNING,
                        f"Gemini listed batch {batch.name} after an older one; "
                        "adoption lists every batch this run",
                        operation=batch.name,
                        created=created.isoformat(),
                        listed_after=oldest.isoformat(),
                    )
                oldest = created if oldest is None else min(oldest, created)
                # Newest first: every batch after this page is older still.
                past_floor = past_floor or created < floor
            if not batch.name or (created is not None and created < now - ORPHAN_WINDOW):
                continue  # past Gemini's expiry: never adopted
            if batch.display_name in tags:
                listing.by_tag[batch.display_name].append(batch)
            elif watermark is not None and _since(
                batch, watermark - self._margin, now, self._margin
            ):
                listing.since_watermark.append(batch)
        return listing

    def _register_found(
        self, listing: Listing, known: set[str], report: RunReport, budget: Budget
    ) -> tuple[list[Operation], set[str]]:
        """Register what the listing found, each tag's batches oldest first (the oldest
        wins an undecided claim, as `Submitter` decides). Returns the adopted operations and
        the tags (or `WATERMARK`) one of whose batches could not be decided this run."""
        adopted: list[Operation] = []
        failed: set[str] = set()
        groups = [(tag, found) for tag, found in listing.by_tag.items()]
        groups.append((WATERMARK, listing.since_watermark))
        for tag, found in groups:
            for batch in sorted(found, key=_created):
                if budget.spent():
                    report.stop("adopt", None)
                    return adopted, failed
                if batch.name in known:
                    continue  # read from the ledger moments ago
                outcome = self._register_one(batch, report)
                if outcome is _FAILED:
                    failed.add(tag)
                elif outcome is not None:
                    report.add(adopted=1)
                    adopted.append(outcome)
        return adopted, failed

    def _register_one(self, batch: BatchSummary, report: RunReport) -> Any:
        """The adopted operation, None when there was nothing to adopt, `_FAILED` when it
        must be examined again next run."""
        try:
            if self._ledger.operations.get(batch.name) is not None:
                return None
            return register_orphan(self._ledger, self._gemini, batch)
        except IncompleteContext:  # alerted on by register_orphan
            report.add(errors=1)
            return _FAILED  # its rows may tell by the next run
        except (LedgerError, GeminiError) as exc:
            report.add(errors=1)
            logs.event(
                log,
                logging.ERROR,
                f"adopting orphan batch {batch.name} failed",
                operation=batch.name,
                display_name=batch.display_name,
                reason=str(exc),
            )
            return _FAILED

    def _close(self, claims: list[OpenClaim]) -> None:
        """Stop looking for these claims: the complete listing decided each of them."""
        for claim in claims:
            try:
                closed = self._ledger.submissions.close_open(claim)
            except LedgerError as exc:  # still open: looked for again next run
                logs.event(
                    log,
                    logging.WARNING,
                    f"closing the open submission {claim.tag} failed; it is looked for again",
                    operation=claim.tag,
                    reason=str(exc),
                )
                continue
            if closed:
                logs.event(
                    log,
                    logging.INFO,
                    f"submission {claim.tag}: every batch it may have made is known; closed",
                    operation=claim.tag,
                    open_since=claim.open_since.isoformat(),
                )

    def _legacy_watermark(self) -> datetime | None:
        """The old adoption's watermark, read once per process (None: none left)."""
        if not self._watermark_read:
            try:
                self._watermark = self._ledger.watermark.get()
                self._watermark_read = True
            except LedgerError as exc:  # read again next run; the open claims go on
                logs.event(
                    log,
                    logging.WARNING,
                    "reading the adoption watermark failed; read again next run",
                    operation="reconcile_state/adoption",
                    reason=str(exc),
                )
        return self._watermark

    def _retire_watermark(self) -> None:
        """Its last listing is done: delete it (a failed delete: that listing once more)."""
        try:
            self._ledger.watermark.clear()
        except LedgerError as exc:
            logs.event(
                log,
                logging.WARNING,
                "deleting the adoption watermark failed; its listing runs once more",
                operation="reconcile_state/adoption",
                reason=str(exc),
            )
            return
        self._watermark = None


# The group of batches the watermark's listing found (no open tag names them).
WATERMARK = "reconcile_state/adoption"
_FAILED = object()


def _created(batch: BatchSummary) -> tuple[bool, datetime | None, str]:
    return (batch.create_time is None, batch.create_time, batch.name)


def _since(batch: BatchSummary, floor: datetime, now: datetime, margin: timedelta) -> bool:
    """A tagged batch the watermark's listing examines: created since `floor`, and old
    enough that its creator is done with it."""
    created = batch.create_time
    return (
        batch.display_name.startswith(kinds.TAG_PREFIX)
        and created is not None
        and floor <= created <= now - margin
    )


def _generation(ledger: AdoptionLedger, parsed: kinds.ParsedTag) -> dict[str, Any]:
    """register_winner's arguments for an orphan re-run batch: it becomes the push's check
    run's current operation, a pending previous one superseded (docs, "Re-run"); none for
    any other batch, or a push whose submission has no winner (nothing to take over)."""
    find = parsed.kind.generation_of
    push = find(parsed.key) if find is not None else None
    stored = ledger.submissions.get(push) if push else None
    if push is None or stored is None or not stored.operation:
        return {}
    return {"generation_of": push, "superseded_outbox": lambda name: [cancel_item(name)]}


def _claimed_context(key: str, batch: BatchSummary, gemini: GeminiGateway) -> dict[str, Any]:
    """A kind with no adopter: nothing beyond what its submission's claim recorded."""
    return {}


def register_orphan(
    ledger: AdoptionLedger, gemini: GeminiGateway, batch: BatchSummary
) -> Operation | None:
    """Register the orphan `batch` as the kind its tag names (shared/kinds.py); None if not;
    `IncompleteContext` when its context cannot be rebuilt yet.

    The push's submission decides first (docs/architecture.md, "One winner per push"): a
    batch that is not the push's winner is superseded and cancelled, never adopted; the
    winner is registered with the kind's adopter context (what the batch itself tells)
    merged under the submission's own (what its claim recorded: the files it submits and
    refuses), whatever the submission holds. A context still lacking a field the kind
    `needs` is never registered half: it is alerted on (`adoption_incomplete`) and
    examined again next run. A kind nobody registered (a `hookledger submit --kind X`
    batch) is adopted with the generic behaviour; a kind with no `adopt` is adopted from
    its claim's context alone (the handler's, as `submit` stored it), and without a claim,
    or with a tag its kind cannot read, is logged and left alone.
    """
    parsed = kinds.parse_tag(batch.display_name)
    submission = ledger.submissions.get(batch.display_name) if parsed is not None else None
    adopt = parsed.kind.adopt if parsed is not None else None
    if adopt is None and submission is not None and submission.context:
        adopt = _claimed_context  # the claim kept what the handler submitted
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
