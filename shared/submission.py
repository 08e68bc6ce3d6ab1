"""Exactly-once submission: one Gemini job per submission tag, whoever runs it and when.

Creating a batch is not idempotent, Gemini takes no request id, and one event can be run
by overlapping attempts (Cloud Tasks' at-least-once delivery, a timed-out attempt still
running, a replay). The submission (`ledger.submissions`, keyed by the batch's tag) makes
a second batch rare, and the winner rule makes one that slips through harmless
(docs/architecture.md, "One winner per push"):

    claim ─ (held by a live lease: retry) ─ (stale: list; a tagged batch → it wins;
          none → take over, conditionally) ─ (too little lease left: release, retry)
          ─ create ─ register_winner: ONE commit, the operation and the winner together
                      └ lost (another batch won): recorded `superseded`, cancelled

The batch's `display_name` carries the tag, which is also how reconcile adopts an orphan.
Any app's handler uses it through `shared.api` (`Submitter`); the kind decides what the
winner records with it (`start_items`: outbox items committed with the winner).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from shared import logs
from shared.clock import Clock, system_clock
from shared.crashpoints import crash_point
from shared.errors import TransientError
from shared.events import Attempt, Done
from shared.kinds import BACKGROUND_PRIORITY, kind_items
from shared.kinds import get as registered_kind
from shared.settlement.cancel import cancel_item, supersede

if TYPE_CHECKING:
    from shared.gemini import BatchSummary, GeminiGateway
    from shared.ledger import DeliveryEnd, OutboxItem
    from shared.ledger.protocols import PushLedger
    from shared.ledger.recordtypes import Submission
    from shared.ledger.submissions import Claimed

log = logs.get_logger("submission")

# A run with no worker lease (a direct call) holds the submission's claim this long.
UNLEASED_CLAIM = timedelta(minutes=10)
# The create is sent only with at least this much lease left: the call's own timeout
# and a margin (`Config.create_budget_s`, 35 s by default), so it ends before anyone may
# take over.
CREATE_BUDGET = timedelta(seconds=35)

StartItems = Callable[[Mapping[str, Any], str, str], Sequence[Mapping[str, Any]]]
"""`start_items(context, name, tag)`: outbox items recorded with the winner's commit."""


class ClaimBusy(TransientError):
    """Another attempt holds the submission's live claim: retry later, nothing is wrong."""


@dataclass(frozen=True)
class SubmitDeps:
    """What a submission needs: the ledger, Gemini, the clock, and the kind's choices."""

    ledger: PushLedger
    gemini: GeminiGateway
    kind: str
    clock: Clock = system_clock
    create_budget: timedelta = CREATE_BUDGET
    start_items: StartItems | None = None
    # Delivers the items recorded with the winner right after its commit (None: the sweep).
    deliver: Callable[[OutboxItem], None] | None = None
    describe: str = field(default="submission", compare=False)
    # Gemini's `batch.priority` of the batch created; None: the kind's (shared/kinds.py,
    # INTERACTIVE_PRIORITY for an interactive kind, else BACKGROUND_PRIORITY).
    priority: int | None = None

    def batch_priority(self) -> int:
        """Gemini's `batch.priority` the submission's batch is created with."""
        return registered_kind(self.kind).priority if self.priority is None else self.priority

    @property
    def interactive(self) -> bool:
        """A person waits for this batch (its priority is above background work): it is
        created at once, never joined to a shared one (shared/sharing/submitter.py)."""
        return self.batch_priority() > BACKGROUND_PRIORITY

    def create_options(self) -> dict[str, Any]:
        """`create_batch`'s keyword for the priority; none for background work, so any
        gateway takes that call as it always has."""
        priority = self.batch_priority()
        return {} if priority == BACKGROUND_PRIORITY else {"priority": priority}


class Submitter:
    """One attempt's way through a submission: claim, list, take over, register.

        run = Submitter(deps, tag, event.delivery_id, event.run, event.claimed)
        decided = run.decided_before_fetch()      # with a claim taken at the record
        ...fetch inputs (run.release() on failure)...
        said = run.submit(requests, context, model=..., end=event.end)

    `submit` is the whole protocol in one call; the steps it takes stay public for the rare
    caller that needs another order: `claim(context)` (None: create now), `create(...)`, or
    by hand the create (`release()` on failure) and `register(name, context, end)`. Joining
    a shared batch is a layer above: shared/sharing/submitter.py's `Submitter`.
    """

    def __init__(
        self,
        deps: SubmitDeps,
        tag: str,
        delivery_id: str,
        attempt: Attempt,
        claimed: Claimed | None = None,
        generation_of: str | None = None,
    ) -> None:
        self._deps, self._tag, self._delivery_id, self._attempt = deps, tag, delivery_id, attempt
        # A re-run of another submission: the tag whose current operation the winner becomes.
        self._generation_of = generation_of
        self._submissions = deps.ledger.submissions
        self._claimed = claimed  # taken with the delivery's record, if the worker did
        from shared.ledger.submissions import Claim

        self._holds = claimed is not None and claimed.state is Claim.OWNED
        # The operation this run saw the submission decided on (its claim, or a lost register).
        self._decided_as: str | None = None

    @property
    def tag(self) -> str:
        return self._tag

    @property
    def deps(self) -> SubmitDeps:
        return self._deps

    @property
    def attempt(self) -> Attempt:
        return self._attempt

    @property
    def delivery_id(self) -> str:
        return self._delivery_id

    def submit(
        self,
        requests: Sequence[tuple[str, str]],
        context: dict[str, Any],
        *,
        model: str,
        generation_config: Mapping[str, Any] | None = None,
        end: DeliveryEnd | None = None,
    ) -> Submitted:
        """Claim, then create the batch, releasing the claim if the create fails, and
        register it with `end` in one commit: one batch per tag however many attempts run.
        What happened; the create's own errors. (With a kind's sharing, the `Submitter` of
        shared/sharing/submitter.py joins instead.)"""
        decided = self.claim(context)
        if decided is not None:
            return Submitted(decided, self.decided_operation(), False)
        return self.create(requests, context, model=model,
                           generation_config=generation_config, end=end)  # fmt: skip

    def create(
        self,
        requests: Sequence[tuple[str, str]],
        context: dict[str, Any],
        *,
        model: str,
        generation_config: Mapping[str, Any] | None = None,
        end: DeliveryEnd | None = None,
    ) -> Submitted:
        """After `claim(context)` returned None: create the batch (the claim given back if
        that fails), with its priority (`SubmitDeps.batch_priority`), and register it."""
        try:
            crash_point("push.before_create")
            name = self._deps.gemini.create_batch(
                model, requests, display_name=self._tag, generation_config=generation_config,
                **self._deps.create_options(),
            )  # fmt: skip
        except Exception as exc:
            self.release(created_nothing=_refused_outright(exc))  # the next attempt creates
            raise
        crash_point("push.after_create")
        lost = self.register(name, context, end)
        if lost is not None:
            return Submitted(lost, self.decided_operation(), False)
        return Submitted(f"submitted {name} ({len(requests)} request(s))", name, True)

    def decided_operation(self) -> str | None:
        """The operation the submission decided on: as this run saw it, else as the ledger
        holds it now."""
        if self._decided_as is not None:
            return self._decided_as
        stored = self._submissions.get(self._tag)
        return stored.operation if stored is not None and stored.operation else None

    def start_items(self, context: Mapping[str, Any], name: str) -> list[Mapping[str, Any]]:
        """The kind's items recorded with this submission's operation `name`."""
        return self._start_items(context, name)

    def deliver_started(self, name: str) -> None:
        """Deliver what was recorded with the operation `name` (its start items), if any."""
        if self._deps.start_items is not None:
            self._deliver(name)

    def decided_before_fetch(self) -> str | None:
        """With a claim taken at the record: what was decided already (no fetch needed), or
        `TransientError` while another attempt holds it. None: go on and fetch."""
        return None if self._claimed is None else self._decided_or_busy(self._claimed)

    def _decided_or_busy(self, claimed: Claimed) -> str | None:
        from shared.ledger.submissions import Claim

        state, stored = claimed
        if state is Claim.DECIDED:
            assert stored is not None and stored.operation
            self._decided_as = stored.operation
            return self._decided(stored.operation)
        if state is Claim.BUSY:
            assert stored is not None
            raise ClaimBusy(
                f"{self._tag}: delivery {stored.claimed_by} (attempt {stored.attempt}) "
                f"is submitting this until {stored.lease_until}"
            )
        return None

    def _lease_until(self, now: datetime) -> datetime:
        return self._attempt.expires_at or now + UNLEASED_CLAIM

    def claim(self, context: dict[str, Any]) -> str | None:
        """None when this attempt may create the batch now; else what happened instead.

        Raises `TransientError` while another attempt holds a live claim, or when too
        little of this attempt's lease is left to send the create.
        """
        from shared.ledger.submissions import Claim

        now = self._deps.clock()
        holder = {"delivery_id": self._delivery_id, "attempt": self._attempt.id}
        claimed = self._claimed
        if claimed is None:
            claimed = self._submissions.claim(
                self._tag, **holder, lease_until=self._lease_until(now), now=now, context=context
            )
        crash_point("push.submission.claimed")
        while True:
            state, stored = claimed
            self._holds = state is Claim.OWNED
            if state in (Claim.DECIDED, Claim.BUSY):
                return self._decided_or_busy(claimed)
            now = self._deps.clock()
            if state is Claim.STALE:
                assert stored is not None
                # A vacant claim has no batch to find: none was created under it.
                found = [] if stored.vacant else tagged_batches(self._deps.gemini, stored)
                if found:
                    return self._settle_found(found, context)
                claimed = self._submissions.take_over(
                    stored, **holder, lease_until=self._lease_until(now), now=now
                )
                continue
            if stored is not None and dict(stored.context) != context:
                # Claimed with the record, before the fetch: the batch's adopter must find
                # the context this run submits (docs, "One winner per push").
                claimed = self._submissions.store_context(
                    self._tag, context, attempt=self._attempt.id, now=now
                )
                continue
            # OWNED, by the conditional write just made: nothing runs between it and the
            # create but this check, so the create ends before anyone may take over.
            if self._lease_until(now) - now >= self._deps.create_budget:
                return None
            self.release(created_nothing=True)  # no create was sent
            raise TransientError(
                f"{self._tag}: too little of attempt {self._attempt.id}'s lease is left "
                "to create the batch; the next attempt will"
            )

    def register(
        self, name: str, context: dict[str, Any], end: DeliveryEnd | None = None
    ) -> str | None:
        """Register `name` as the winner, with `end` (the delivery's `done`) in the same
        commit; if another batch won, supersede `name`. A failed registration releases
        the claim. None when `name` won; else what happened."""
        items = self._start_items(context, name)
        try:
            winner = self._submissions.register_winner(
                self._tag, name, self._deps.kind, context, end=end, outbox=items,
                **self._generation(),
            )  # fmt: skip
        except Exception:
            self.release()  # the next attempt lists, finds this batch and registers it at once
            raise
        if winner.won and winner.superseded_by is not None:
            # A newer generation is current already: ours was recorded superseded.
            crash_point("rerun.superseded")
            self._deliver(name)
            return f"{name} superseded by the newer re-run {winner.superseded_by}, cancelled"
        if winner.won:
            crash_point("push.registered")
            if items:
                self._deliver(name)
            return None
        self._decided_as = winner.operation
        return self._supersede(name, winner.operation, context)

    def _start_items(self, context: Mapping[str, Any], name: str) -> list[Mapping[str, Any]]:
        start = self._deps.start_items
        return kind_items(start(context, name, self._tag), context) if start is not None else []

    def _deliver(self, name: str) -> None:
        """Deliver what was recorded with the winner; a failure is logged and left to the
        outbox sweep: the submission itself is done."""
        from shared.ledger import LedgerError

        if self._deps.deliver is None:
            return
        try:
            self._deps.ledger.outbox.deliver(name, self._deps.deliver)
        except LedgerError as exc:
            logs.event(
                log,
                logging.WARNING,
                "delivering the outbox items after registration failed; the sweep will retry",
                operation=name,
                delivery_id=self._delivery_id,
                reason=str(exc),
            )

    def release(self, *, created_nothing: bool = False) -> None:
        """End this attempt's claim early; a failure only means waiting for the lease.
        `created_nothing`: no create was sent, or Gemini refused it outright (a 4xx or a
        429): the next holder may then create without listing Gemini's batches first."""
        from shared.ledger import LedgerError

        if not self._holds:
            return
        self._holds = False
        try:
            self._submissions.release(
                self._tag,
                attempt=self._attempt.id,
                now=self._deps.clock(),
                created_nothing=created_nothing,
            )
        except LedgerError as exc:
            logs.event(
                log,
                logging.WARNING,
                f"releasing the claim on {self._tag} failed; it ends with its lease",
                delivery_id=self._delivery_id,
                submission=self._tag,
                reason=str(exc),
            )

    def _decided(self, operation: str) -> str:
        if self._deps.ledger.operations.get(operation) is None:
            # Its record expired: settled long ago; never revive the batch.
            return f"{self._tag} was submitted as {operation}, whose record has expired"
        return self.decided_said(operation)

    def decided_said(self, operation: str) -> str:
        """What a run finding the submission decided as `operation` answers (and does: the
        sharing `Submitter` seals a due group here)."""
        return f"already submitted as {operation}"

    def _settle_found(self, found: list[BatchSummary], context: dict[str, Any]) -> str:
        """An earlier attempt's batches: the oldest becomes the winner (with this run's
        context), the rest superseded."""
        items = self._start_items(context, found[0].name)
        winner = self._submissions.register_winner(
            self._tag, found[0].name, self._deps.kind, context, outbox=items, **self._generation()
        )
        if winner.won and winner.operation == found[0].name and items:
            self._deliver(winner.operation)
        for batch in found:
            if batch.name != winner.operation:
                self._supersede(batch.name, winner.operation, None)
        self._decided_as = winner.operation
        return f"already submitted as {winner.operation}"

    def _generation(self) -> dict[str, Any]:
        """register_winner's arguments making a re-run's winner the current operation of
        `generation_of`, a pending previous one superseded and cancelled (none otherwise)."""
        if self._generation_of is None:
            return {}
        return {"generation_of": self._generation_of, "superseded_outbox": _cancel_previous}

    def _supersede(self, name: str, winner: str, context: dict[str, Any] | None) -> str:
        supersede(self._deps.ledger, self._deps.gemini, name, self._deps.kind, winner=winner,
                  context=context)  # fmt: skip
        return f"{name} superseded by {winner} (one batch per submission), cancelled"


@dataclass(frozen=True)
class Submitted(Done):
    """`submit`'s outcome, a `Done` a handler returns as it is: `detail` says what
    happened, `operation` is the submission's operation (None if its record is gone),
    `created` whether this call created the batch or joined a group."""

    operation: str | None = None
    created: bool = False


def tagged_batches(gemini: GeminiGateway, stored: Submission) -> list[BatchSummary]:
    """Every batch tagged for the submission `stored`, oldest first: the listing read back
    to just before its claim first opened (its holders made nothing earlier), not all of
    Gemini's batches."""
    from shared.gemini.listing import CLOCK_SKEW, since

    opened = stored.open_since or stored.claimed_at
    floor = opened - CLOCK_SKEW if opened is not None else None
    listing = since(gemini.list_batches(), floor)
    found = [b for b in listing if b.display_name == stored.tag]
    return sorted(found, key=lambda b: (b.create_time is None, b.create_time, b.name))


def _refused_outright(exc: Exception) -> bool:
    """Gemini answered the create with a refusal (a 4xx, a 429): no batch was made, so the
    next holder may create without listing first. A timeout or a 5xx may have made one."""
    from shared.gemini.errors import GeminiRateLimited, GeminiRejected

    return isinstance(exc, GeminiRejected | GeminiRateLimited)


def _cancel_previous(name: str) -> list[dict[str, Any]]:
    return [cancel_item(name)]
