"""Submissions: one create-once action per push (a Gemini batch), owned per attempt.

Creating a batch is not idempotent and Gemini takes no request id, so the ledger makes a
second batch rare and then harmless (docs/architecture.md, "One winner per push"). A
`submissions/{tag}` document holds:

- the claim: `attempt` (one run of one delivery) holds it until `lease_until`;
- the winner: `operation`, set once, in the same commit that registers it pending;
- the push's own `context`, so whoever registers the winner registers the real one;
- while a batch may exist that the ledger does not know, the open marks: `adopt_after`
  (the last holder's lease end: its create ended before it) and `open_since` (when the
  first of those holders claimed: no such batch is older). Set by every claim and
  takeover, moved to now by a release; cleared by the winner's commit, or by reconcile's
  adoption once a complete listing found no unknown batch with the tag
  (shared/reconcile/adoption.py). A claim taken over keeps them through its winner's
  commit: an earlier holder's batch may still show in the listing, to be superseded.
  A document from before the marks existed has none, and is looked for once more by the
  adoption watermark's last listing (adoption.py), or again once an attempt takes it over.

Every change is ONE conditional write: a `create`, or an update on condition the document
is unchanged since it was read. Timeline of the overlap it closes (A's lease expired while
A's create was in flight; B retries)::

    A: claim (lease left ≥ create budget) ─ create ──────────▶ B_A ── register_winner
    B:            A leased → BUSY (retry) … A's lease over ─ list: B_A? ─┐
          found  → register_winner(B_A)                                     │
          absent → take over ("unchanged since read") ─ create B_B ─────────┘
    register_winner: operation set only while empty → the second is `superseded`, cancelled

Reconcile asks `open_claims(before)` for the claims whose batch it must look for:

    claim/take over ─ create ✗ (crash) ·········· adopt_after + margin ─ open_claims ∋ it
    adoption lists newest first down to open_since - margin ─ batch found → register_winner
                                                             ─ none      → close_open
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from enum import StrEnum
from typing import Any, NamedTuple

from google.api_core import exceptions as gexc
from google.cloud import firestore

from shared.ledger.commits import REFUSED, Commits, Conflict, Seen
from shared.ledger.deliveries import Deliveries
from shared.ledger.errors import ContentionError, InvalidArgument, StoreUnavailable
from shared.ledger.generations import ORDER, next_generation, superseded_fields
from shared.ledger.ids import check_limit, check_time, submission_id
from shared.ledger.operations import Operations
from shared.ledger.records import (
    SUBMISSIONS,
    SUPERSEDED,
    DeliveryEnd,
    Submission,
    submission_from,
)
from shared.retry import find_cause

# The open marks (module docstring): an indexed range on `adopt_after` finds the open claims.
ADOPT_AFTER = "adopt_after"
OPEN_SINCE = "open_since"
_CLOSED = {ADOPT_AFTER: firestore.DELETE_FIELD, OPEN_SINCE: firestore.DELETE_FIELD}


class Claim(StrEnum):
    """Where a push's submission stands for one attempt."""

    OWNED = "owned"  # this attempt holds the claim: it may create the batch
    DECIDED = "decided"  # the push has its winning batch: `submission.operation`
    BUSY = "busy"  # another attempt's lease is live: retry later
    STALE = "stale"  # no winner, and no live lease but maybe ours: list before taking over


class Claimed(NamedTuple):
    state: Claim
    submission: Submission | None


class Winner(NamedTuple):
    """`register_winner`'s answer: `operation` is the push's winner; `won` when it is ours.

    `superseded_by`: ours won its own submission but a newer generation shows already, so
    it was registered superseded by that one (`generations.py`)."""

    won: bool
    operation: str
    superseded_by: str | None = None


class OpenClaim(NamedTuple):
    """A submission whose batch the ledger may not know (`Submissions.open_claims`)."""

    tag: str
    open_since: datetime  # no batch of these claims was created before this
    adopt_after: datetime  # the last holder's lease end: every create of theirs ended


class Submissions:
    """The `submissions` collection, and the winner rule that spans it and `operations`."""

    def __init__(self, commits: Commits, operations: Operations, deliveries: Deliveries) -> None:
        self._commits = commits
        self._operations = operations
        self._deliveries = deliveries

    def _ref(self, tag: str) -> Any:
        return self._commits.collection(SUBMISSIONS).document(submission_id(tag))

    def claim(
        self,
        tag: str,
        *,
        delivery_id: str,
        attempt: str,
        lease_until: datetime,
        now: datetime,
        context: Mapping[str, Any] | None = None,
    ) -> Claimed:
        """Create the submission for this attempt (OWNED), or say where the stored one stands."""
        ref, claim = self.new_claim(
            tag,
            delivery_id=delivery_id,
            attempt=attempt,
            lease_until=lease_until,
            now=now,
            context=context,
        )
        try:
            ref.create(claim, timeout=self._commits.timeout_s)
            return Claimed(Claim.OWNED, submission_from(claim, tag))
        except gexc.AlreadyExists:
            pass
        except gexc.GoogleAPIError as exc:
            raise StoreUnavailable(f"submission {tag}: claim failed: {exc}") from exc
        return self.standing(tag, attempt, now)

    def new_claim(
        self,
        tag: str,
        *,
        delivery_id: str,
        attempt: str,
        lease_until: datetime,
        now: datetime,
        context: Mapping[str, Any] | None = None,
    ) -> tuple[Any, dict[str, Any]]:
        """(ref, fields) of the submission as `claim` creates it; bad input raises here."""
        _check_holder(tag, delivery_id, attempt)
        check_time(now, "claimed_at")
        check_time(lease_until, "lease_until")
        claim = {
            "tag": tag,
            "operation": None,
            "claimed_by": delivery_id,
            "attempt": attempt,
            "claimed_at": now,
            "lease_until": lease_until,
            "context": dict(context or {}),
            OPEN_SINCE: now,
            ADOPT_AFTER: lease_until,
        }
        return self._ref(tag), claim

    def standing(self, tag: str, attempt: str, now: datetime) -> Claimed:
        """Where a submission whose create found it there stands for `attempt`."""
        stored = self.get(tag)
        if stored is None:  # deleted (TTL) between the create and the read
            raise ContentionError(f"submission {tag} vanished while claiming")
        return Claimed(_standing(stored, attempt, now), stored)

    def take_over(
        self,
        stale: Submission,
        *,
        delivery_id: str,
        attempt: str,
        lease_until: datetime,
        now: datetime,
    ) -> Claimed:
        """Hold a STALE claim, on condition nobody changed it since `stale` was read.

        Call only after a full listing found no batch with the tag, or on a `vacant`
        claim. Refused: where the submission stands now (another attempt took it over, or
        a winner was set). The claim is open again until its winner (`open_since` kept
        from the earlier holders: a batch of theirs may still show; a vacant claim's
        holders made none, so it opens afresh).
        """
        _check_holder(stale.tag, delivery_id, attempt)
        check_time(lease_until, "lease_until")
        since = now if stale.vacant else stale.open_since or stale.claimed_at or now
        update = {
            "claimed_by": delivery_id,
            "attempt": attempt,
            "claimed_at": now,
            "lease_until": lease_until,
            OPEN_SINCE: since,
            ADOPT_AFTER: lease_until,
            "vacant": firestore.DELETE_FIELD,
        }
        return self._conditional(stale, update, attempt, now)

    def store_context(
        self, tag: str, context: Mapping[str, Any], *, attempt: str, now: datetime
    ) -> Claimed:
        """Replace the claim's context with `context` while `attempt` holds it (what its
        run will submit, so an adopter of its batch finds it), on condition nobody changed
        the submission since it was read; else where the submission stands."""
        stored = self.get(tag)
        if stored is None:  # deleted (TTL) under a live claim
            raise ContentionError(f"submission {tag} vanished while claimed")
        if stored.operation or stored.attempt != attempt:
            return Claimed(_standing(stored, attempt, now), stored)
        return self._conditional(stored, {"context": dict(context)}, attempt, now)

    def release(
        self, tag: str, *, attempt: str, now: datetime, created_nothing: bool = False
    ) -> bool:
        """End `attempt`'s lease early (its create failed); False if it no longer holds it.
        Adoption may look for its batch from now on (a create that failed may have landed).

        `created_nothing`: Gemini refused the create outright (a 4xx, a 429), or none was
        sent. If no earlier holder may have created either, the claim becomes `vacant`:
        its open marks are cleared and the next holder takes it without a listing."""
        stored = self.get(tag)
        if stored is None or stored.operation or stored.attempt != attempt:
            return False
        update: dict[str, Any]
        if created_nothing and stored.open_since is not None and not _taken_over(stored):
            update = {"lease_until": now, "vacant": True, **_CLOSED}
        else:
            update = {"lease_until": now, ADOPT_AFTER: now, OPEN_SINCE: stored.open_since or now}
        state, _ = self._conditional(stored, update, attempt, now)
        return state is not Claim.DECIDED

    def register_winner(
        self,
        tag: str,
        name: str,
        kind: str,
        context: Mapping[str, Any] | None,
        *,
        fallback_context: Mapping[str, Any] | None = None,
        end: DeliveryEnd | None = None,
        outbox: Sequence[Mapping[str, Any]] = (),
        generation_of: str | None = None,
        superseded_outbox: Callable[[str], Sequence[Mapping[str, Any]]] = lambda _: (),
    ) -> Winner:
        """Register `name` pending as the push's batch if the push has none yet, in ONE commit.

        The operation is created and the submission's `operation` set together, on condition
        the submission is unchanged since it was read with no winner (or, when nobody ever
        claimed the push, by creating the submission decided): of two batches of one push,
        exactly one wins, and a later run of the push finds it. `context` None means the
        push's own (stored on the submission), else `fallback_context` (an adopted orphan).
        `end`, the registering attempt's end of its delivery, is written in the same commit
        when this call wins and the attempt still holds its lease (`end.applied`).
        `outbox`: items recorded on the new pending operation in that commit, due at once
        (the caller delivers them next; the outbox sweep if it dies first). They are not
        added to an operation that already exists (an adopted orphan registered before).
        `generation_of`: `tag` is a re-run of that push's check run; the same commit makes
        `name` its current operation and supersedes a pending previous one, recording
        `superseded_outbox(previous)` on it (`generations.py`).
        """
        ref = self._ref(tag)

        def attempt() -> Winner:
            snapshot = self._commits.read(ref, f"submission {tag}")
            stored = None
            if snapshot.exists:
                stored = submission_from(snapshot.to_dict() or {}, tag, snapshot.update_time)
                if stored.operation:
                    return Winner(stored.operation == name, stored.operation)
            existing = self._operations.get(name)
            if existing is not None and existing.status == SUPERSEDED:
                return Winner(False, existing.superseded_by or "")
            own = stored.context if stored is not None else None
            # The push's own context over the adopter's (a claim taken with the record holds
            # only repo and sha; the adopter's paths come from the batch's rows).
            merged = {**(fallback_context or {}), **(own or {})}
            chosen = context if context is not None else (merged or None)
            doc_id, data = self._operations.pending_fields(
                name, kind, chosen, submission=tag, outbox=outbox
            )
            decided = {"operation": name, "lease_until": None, "decided_at": data["submitted_at"]}
            if stored is not None and not _taken_over(stored):
                decided.update(_CLOSED)  # nothing else may show: no other holder ever created
            op_ref = self._operations.collection().document(doc_id)
            staged = self._deliveries.stage_end(end) if end is not None else None
            nxt = None
            if generation_of is not None:
                order = (chosen or {}).get(ORDER)
                nxt = next_generation(
                    self._commits,
                    generation_of,
                    self._operations,
                    order if isinstance(order, str) else None,
                )
                if nxt.newer is not None:  # an older press: never shown, cancelled now
                    now = data["submitted_at"]
                    data.update(superseded_fields(nxt.newer, now, superseded_outbox(name)))

            def body(txn: Any) -> None:
                if existing is None:
                    txn.create(op_ref, data)
                if stored is None:  # nobody claimed the push (an orphan): decide it here
                    txn.create(ref, {"tag": tag, "context": dict(chosen or {}), **decided})
                else:
                    txn.update(ref, decided, option=self._commits.unchanged_since(snapshot))
                if nxt is not None and nxt.newer is None:
                    now = data["submitted_at"]
                    nxt.write(self._commits, txn, name, now, superseded_outbox(nxt.previous))

            try:
                self._commits.commit(body, ref, snapshot, also=staged)
            except Conflict:
                raise
            except Exception as exc:
                # Refused on the push's submission or the previous operation: re-read.
                if nxt is not None and find_cause(exc, REFUSED) and nxt.changed(self._commits):
                    raise Conflict(str(exc)) from exc
                raise
            if end is not None:
                end.applied = staged is not None
            if existing is None:
                self._operations.log_registered(name, kind)
            return Winner(True, name, nxt.newer if nxt is not None else None)

        return self._commits.retrying(tag, attempt)

    def open_claims(self, before: datetime, limit: int) -> list[OpenClaim]:
        """Up to `limit` submissions whose batch the ledger may not know and whose last
        holder's lease ended before `before`, the longest ended first (one query).

        Only documents with the open marks: see the module docstring for older ones."""
        check_time(before, "before")
        check_limit(limit)
        query = (
            self._commits.collection(SUBMISSIONS)
            .where(filter=firestore.FieldFilter(ADOPT_AFTER, "<", before))
            .order_by(ADOPT_AFTER)
            .limit(limit)
        )
        found = []
        for snapshot in self._commits.stream(query, "open_claims"):
            data = snapshot.to_dict() or {}
            tag, since, after = data.get("tag"), data.get(OPEN_SINCE), data.get(ADOPT_AFTER)
            if isinstance(tag, str) and tag and isinstance(after, datetime):
                found.append(OpenClaim(tag, since if isinstance(since, datetime) else after, after))
        return found

    def close_open(self, claim: OpenClaim) -> bool:
        """Clear `claim`'s open marks: a complete listing begun after its `adopt_after`
        found no batch the ledger does not know. On condition no attempt claimed, took
        over or released it since (`adopt_after` unchanged); False when one did (it stays
        open) or the document is gone."""
        ref = self._ref(claim.tag)

        def attempt_once() -> bool:
            snapshot = self._commits.read(ref, f"submission {claim.tag}")
            if not snapshot.exists or (snapshot.to_dict() or {}).get(ADOPT_AFTER) != (
                claim.adopt_after
            ):
                return False
            self._commits.update_if_unchanged(ref, snapshot, _CLOSED)
            return True

        return self._commits.retrying(claim.tag, attempt_once)  # a Conflict re-reads

    def get(self, tag: str) -> Submission | None:
        snapshot = self._commits.read(self._ref(tag), f"submission {tag}")
        if not snapshot.exists:
            return None
        return submission_from(snapshot.to_dict() or {}, tag, snapshot.update_time)

    def _conditional(
        self, seen: Submission, update: dict[str, Any], attempt: str, now: datetime
    ) -> Claimed:
        """Apply `update` if the submission is unchanged since `seen`; else where it stands."""
        ref = self._ref(seen.tag)
        read = Seen(ref.id, seen.update_time)

        def attempt_once() -> Claimed:
            try:
                self._commits.update_if_unchanged(ref, read, update)
            except Conflict:  # somebody wrote first: say where it stands now
                stored = self.get(seen.tag)
                if stored is None:
                    raise ContentionError(
                        f"submission {seen.tag} vanished while claiming"
                    ) from None
                return Claimed(_standing(stored, attempt, now), stored)
            return Claimed(Claim.OWNED, _applied(seen, update))

        return self._commits.retrying(seen.tag, attempt_once)  # backs off on ABORTED only


def _applied(seen: Submission, update: Mapping[str, Any]) -> Submission:
    """`seen` as `update` left it (without reading it again)."""
    known: dict[str, Any] = {
        k: (None if v is firestore.DELETE_FIELD else v)
        for k, v in update.items()
        if k in Submission.__dataclass_fields__
    }
    if "vacant" in known:
        known["vacant"] = known["vacant"] is True
    return replace(seen, update_time=None, **known)


def closed_marks(data: Mapping[str, Any]) -> dict[str, Any]:
    """What a decision's commit writes of the open marks of the stored `data`: their
    deletion, unless the claim changed holders (an earlier one's batch may still show)."""
    since, claimed = data.get(OPEN_SINCE), data.get("claimed_at")
    taken = isinstance(since, datetime) and isinstance(claimed, datetime) and claimed > since
    return {} if taken else dict(_CLOSED)


def _taken_over(stored: Submission) -> bool:
    """True when the claim changed holders since it opened: an earlier holder may have
    created a batch that no listing has shown yet (a document without marks: False)."""
    since, claimed = stored.open_since, stored.claimed_at
    return isinstance(since, datetime) and isinstance(claimed, datetime) and claimed > since


def _standing(stored: Submission, attempt: str, now: datetime) -> Claim:
    if stored.operation:
        return Claim.DECIDED
    if stored.attempt != attempt and stored.leased(now):
        return Claim.BUSY
    return Claim.STALE  # expired, unleased, or ours from a run that may have created


def _check_holder(tag: str, delivery_id: str, attempt: str) -> None:
    for what, value in (("delivery id", delivery_id), ("attempt", attempt)):
        if not isinstance(value, str) or not value:
            raise InvalidArgument(f"submission {tag}: {what} must be a non-empty string")
