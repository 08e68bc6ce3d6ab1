"""Deliveries: one `deliveries/{source}:{id}` document per webhook delivery (dedupe, replay).

Each worker attempt takes a LEASE on its delivery when it records it (`record(...,
attempt=…, lease_for=…)`): one conditional write that creates the document, or updates it
on "unchanged since the read" while the stored lease is absent, expired or this
attempt's own. A second attempt while the first one's lease is live gets `busy` and must
not run (docs/architecture.md, "Delivery lease")::

    A records, takes lease A (until t0+lease)    Cloud Tasks gives up on A at its deadline
    A runs the handler …                         B (the retry) reads lease A, live → busy, 503
    A marks done, lease released                 C (a later retry) reads done → duplicate
    … or A hangs past its lease:                 D takes the expired lease → lease D, runs
    A's late mark: A no longer holds it          → refused, `done` by D stays `done`

Statuses never move backwards: `mark` leaves a finished delivery (done, ignored, dead,
unresolved) as it is, and so does a mark by an attempt that lost its lease. Only
`reopen` (an operator's replay) puts a finished delivery back to `queued`.

REPLAYS. GitHub signs the body, not `X-GitHub-Delivery`: a captured body re-sent under a
fresh id verifies. So the commit that first records a GitHub delivery also creates
`bodies/{source}:{sha256 of the exact body}` naming it (`expire_at`: the deliveries'
retention; none for an installation event, see records.py). A new delivery id whose body is
already marked by another id is recorded `ignored`, naming that id, logged at WARNING, and
returned finished with `Recorded.duplicate_of`: the worker answers `duplicate` and runs
nothing (docs/architecture.md, "Replays"). The same id again is a redelivery, as above::

    d-1 recorded + bodies/github:<sha> → d-1      (one commit, no read)
    … an hour on: the ingress's task name is free; d-2 carries d-1's body
    d-2: create refused (the body is marked) → d-2 absent → the marker names d-1
         → d-2 recorded `ignored` ("a replay of d-1"), no lease, no handler

The marks and the end staged into another commit are the `DeliveryMarks` mixin's
(delivery_marks.py), the reads and listings the `DeliveryReads` mixin's (delivery_reads.py):
`Deliveries` has every method of both.
"""

from __future__ import annotations

import hashlib
import logging
import re
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from google.api_core import exceptions as gexc

from shared import tracing
from shared.clock import Clock
from shared.ledger.commits import Commits
from shared.ledger.delivery_marks import DeliveryMarks
from shared.ledger.delivery_reads import DeliveryReads
from shared.ledger.errors import ContentionError, InvalidArgument, StoreUnavailable
from shared.ledger.ids import delivery_id
from shared.ledger.records import (
    BODIES,
    BODY_DEDUPED_SOURCES,
    DELIVERIES,
    IGNORED,
    LEASE,
    QUEUED,
    UNEXPIRING_BODY_EVENTS,
    DeliveryEnd,
    DeliveryLease,
    Recorded,
    delivery_from,
)
from shared.logs import event as log_event
from shared.logs import get_logger

log = get_logger("ledger")

# A Firestore document holds 1 MiB; leave room for the rest.
MAX_PAYLOAD_BYTES = 900_000
_SHA256 = re.compile(r"[0-9a-f]{64}")


class BodyMark(NamedTuple):
    """A body's marker as the first record of a delivery carrying it creates it: `ref`
    (`bodies/{source}:{digest}`), and its fields (the delivery id, and `expire_at`)."""

    ref: Any
    digest: str
    fields: dict[str, Any]


def body_digest(source: str, payload: Any, body_sha256: str | None = None) -> str | None:
    """The SHA-256 (hex) of a delivery's exact body, for a source that signs the body but
    not the id (GitHub): `body_sha256` when given (a stored body: the envelope sealed
    its digest), else that of `payload`'s bytes. None: no dedupe by body (another source, or
    neither bytes nor a digest)."""
    if source not in BODY_DEDUPED_SOURCES:
        return None
    if body_sha256 is not None:
        if not isinstance(body_sha256, str) or not _SHA256.fullmatch(body_sha256):
            raise InvalidArgument(
                f"body_sha256 must be 64 lower-case hex digits, got {body_sha256!r}"
            )
        return body_sha256
    return hashlib.sha256(payload).hexdigest() if isinstance(payload, bytes) else None


class Deliveries(DeliveryMarks, DeliveryReads):
    """The `deliveries` collection."""

    def __init__(self, commits: Commits, clock: Clock, *, retention: Any) -> None:
        self._commits = commits
        self._clock = clock
        self._retention = retention

    def collection(self) -> Any:
        return self._commits.collection(DELIVERIES)

    def record(
        self,
        source: str,
        delivery_id_: str,
        event: str,
        payload: Any = None,
        payload_ref: str | None = None,
        *,
        attempt: str | None = None,
        lease_for: timedelta | None = None,
        body_sha256: str | None = None,
    ) -> Recorded:
        """Create the delivery as `queued` if absent; a redelivery returns the stored one.

        With `attempt` (and `lease_for`, how long it may run), the attempt also takes the
        lease, unless the delivery is finished (returned as stored, no lease) or another
        attempt's lease is live (`busy`). A GitHub delivery marks its body in the same
        commit (`payload`'s bytes, or `body_sha256` for a claim-checked one); a new id whose
        body another id marked is recorded `ignored` instead, with `duplicate_of`. See the
        module docstring.
        """
        ref, data = self.new_record(
            source, delivery_id_, event, payload, payload_ref, attempt=attempt, lease_for=lease_for
        )
        body = self.new_body(
            source, delivery_id_, event, payload, body_sha256=body_sha256, now=data["received_at"]
        )
        if self._create(ref, data, body):
            return Recorded(True, delivery_from(data, ref.id))
        if attempt is None or lease_for is None:
            snapshot = self._commits.read(ref, ref.id)
            if snapshot.exists:
                return Recorded(False, delivery_from(snapshot.to_dict() or {}, ref.id))
        else:
            recorded = self._take_lease(ref, ref.id, attempt, lease_for)
            if recorded is not None:
                return recorded
        if body is None:  # expired by TTL between create and read
            raise ContentionError(f"delivery {ref.id} vanished while recording")
        return self._recorded_over_marked_body(ref, data, body)

    def _create(self, ref: Any, data: dict[str, Any], body: BodyMark | None) -> bool:
        """Create the delivery, and its body's marker in the same commit; False when either
        exists. A redelivery finds it there: an answer, not a failure, so caught in the span."""
        with tracing.span("firestore.commit", subject=ref.id) as span:
            try:
                if body is None:
                    ref.create(data, timeout=self._commits.timeout_s)
                else:
                    batch = self._commits.client.batch()
                    batch.create(ref, data)
                    batch.create(body.ref, body.fields)
                    batch.commit(timeout=self._commits.timeout_s)
                created = True
            except gexc.AlreadyExists:
                created = False
            except gexc.GoogleAPIError as exc:
                raise StoreUnavailable(f"delivery {ref.id}: record failed: {exc}") from exc
            span.set(created=created)
        return created

    def _recorded_over_marked_body(
        self, ref: Any, data: dict[str, Any], body: BodyMark
    ) -> Recorded:
        """A new delivery whose body is marked already: by another id, a replay, recorded
        `ignored` naming that id; by this id (its record deleted since), recorded again."""
        first = self.body_holder(body)
        if first is None:  # expired by TTL between create and read
            raise ContentionError(f"delivery {ref.id}: its body's marker vanished while recording")
        ours = data["delivery_id"]
        created = dict(data)
        if first != ours:
            created.pop(LEASE, None)  # never run, so never leased
            created.update(
                status=IGNORED,
                attempts=1,
                last_error=f"a replay: the same signed body as delivery {first}, under a new id",
            )
        with tracing.span("firestore.commit", subject=ref.id):
            try:
                ref.create(created, timeout=self._commits.timeout_s)
            except gexc.AlreadyExists as exc:  # another run of this id recorded it meanwhile
                raise ContentionError(f"delivery {ref.id} was recorded meanwhile") from exc
            except gexc.GoogleAPIError as exc:
                raise StoreUnavailable(f"delivery {ref.id}: record failed: {exc}") from exc
        if first == ours:
            return Recorded(True, delivery_from(created, ref.id))
        log_event(
            log,
            logging.WARNING,
            f"{data['source']} delivery {ours} replays the body of delivery {first}: "
            "recorded ignored, not run",
            source=data["source"],
            delivery_id=ours,
            duplicate_of=first,
            event=data["event"],
            body_sha256=body.digest,
        )
        return Recorded(True, delivery_from(created, ref.id), duplicate_of=first)

    def new_body(
        self,
        source: str,
        delivery_id_: str,
        event: str,
        payload: Any = None,
        *,
        body_sha256: str | None = None,
        now: datetime,
    ) -> BodyMark | None:
        """The marker the first record of this delivery creates for its body, in the same
        commit; None when its source is not deduped by body (or there is no body to hash)."""
        digest = body_digest(source, payload, body_sha256)
        if digest is None:
            return None
        fields: dict[str, Any] = {"delivery_id": delivery_id_}
        if event not in UNEXPIRING_BODY_EVENTS:
            fields["expire_at"] = now + self._retention
        ref = self._commits.collection(BODIES).document(f"{source}:{digest}")
        return BodyMark(ref, digest, fields)

    def new_body_of(self, end: DeliveryEnd) -> BodyMark | None:
        """`new_body` for the record `end.new` creates (an unleased run's, in its handler's
        commit: `stage_end`); None without one."""
        if end.new is None:
            return None
        event, payload = str(end.new.get("event") or ""), end.new.get("payload")
        return self.new_body(
            end.source,
            end.delivery_id,
            event,
            payload,
            body_sha256=end.body_sha256,
            now=self._clock(),
        )

    def body_holder(self, body: BodyMark) -> str | None:
        """The delivery id that marked this body first; None when unmarked (one read)."""
        snapshot = self._commits.read(body.ref, body.ref.id)
        if not snapshot.exists:
            return None
        holder = (snapshot.to_dict() or {}).get("delivery_id")
        return str(holder) if holder else None

    def new_record(
        self,
        source: str,
        delivery_id_: str,
        event: str,
        payload: Any = None,
        payload_ref: str | None = None,
        *,
        attempt: str | None = None,
        lease_for: timedelta | None = None,
    ) -> tuple[Any, dict[str, Any]]:
        """(ref, fields) of the delivery as `record` creates it; bad input raises here."""
        doc_id = delivery_id(source, delivery_id_)
        if not isinstance(event, str) or not event:
            raise InvalidArgument(f"delivery {doc_id}: event must be a non-empty string")
        if isinstance(payload, str | bytes) and len(payload) > MAX_PAYLOAD_BYTES:
            raise InvalidArgument(
                f"delivery {doc_id}: payload of {len(payload)} bytes is too large for a "
                "document; store it elsewhere and pass payload_ref"
            )
        if (attempt is None) != (lease_for is None) or (
            lease_for is not None and lease_for <= timedelta(0)
        ):
            raise InvalidArgument(f"delivery {doc_id}: a lease needs an attempt and a duration > 0")
        if attempt is not None and (not isinstance(attempt, str) or not attempt):
            raise InvalidArgument(f"delivery {doc_id}: attempt must be a non-empty string")
        now = self._clock()
        data = {
            "source": source,
            "delivery_id": delivery_id_,
            "event": event,
            "status": QUEUED,
            "attempts": 0,
            "last_error": None,
            "received_at": now,
            "updated_at": now,
            "expire_at": now + self._retention,
            "payload": payload,
            "payload_ref": payload_ref,
        }
        if attempt is not None and lease_for is not None:
            data[LEASE] = DeliveryLease(attempt, now + lease_for).to_dict()
        return self.collection().document(doc_id), data

    def _take_lease(
        self, ref: Any, doc_id: str, attempt: str, lease_for: timedelta
    ) -> Recorded | None:
        """Take the lease of a delivery that exists: one update on "unchanged since read";
        None when there is none (expired by TTL, or only its body was marked: `record`)."""

        def take() -> Recorded | None:
            snapshot = self._commits.read(ref, doc_id)
            if not snapshot.exists:
                return None
            data = snapshot.to_dict() or {}
            stored = delivery_from(data, doc_id)
            if stored.finished:
                return Recorded(False, stored)
            now = self._clock()
            held = stored.lease
            if held is not None and held.attempt != attempt and held.live(now):
                return Recorded(False, stored, busy=True)
            lease = DeliveryLease(attempt, now + lease_for)
            self._commits.update_if_unchanged(ref, snapshot, {LEASE: lease.to_dict()})
            return Recorded(False, delivery_from({**data, LEASE: lease.to_dict()}, doc_id))

        return self._commits.retrying(doc_id, take)
