"""GitHub deliveries the recovery sweep found failed: `github_recoveries/{guid}`, and the
sweep's checkpoint, `reconcile_state/github_deliveries` (docs/architecture.md, "Reconcile").

A recovery is opened once per event (`guid`) by a create, so overlapping sweeps open it
once; it stays `open` until the ledger records the delivery (`recovered`: the sweep
brought it back; `accepted`: the ingress had taken it, GitHub counted it failed only
because the answer came after its 10 s), until it turns out to be an event no app
starts on (`ignored`), or until GitHub's 3 days pass (`unrecoverable`). Each change is
written on condition the document is unchanged since it was read, so two sweeps never
both redeliver one event. Records expire with the ledger's retention (TTL `expire_at`).

The checkpoint is one small document: how far back the last complete listing went, the
position of a listing a run's budget stopped (resumed by the next run), and when GitHub
asked the sweep to wait until (`retry-after`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from google.api_core import exceptions as gexc
from google.cloud import firestore

from shared.ledger.commits import Commits
from shared.ledger.errors import InvalidArgument, StoreUnavailable
from shared.ledger.ids import check_limit
from shared.ledger.runs import RECONCILE_STATE
from shared.statuses import RecoveryStatus

GITHUB_RECOVERIES = "github_recoveries"
CHECKPOINT_ID = "github_deliveries"


OPEN = RecoveryStatus.OPEN
RECOVERY_STATUSES = tuple(RecoveryStatus)


@dataclass(frozen=True)
class Recovery:
    """One event GitHub failed to deliver, and what the sweep did about it."""

    guid: str
    event: str
    action: str | None
    github_delivery_id: int  # the newest failed attempt (the one to redeliver)
    repository_id: int | None
    installation_id: int | None
    failed_at: datetime  # that attempt's `delivered_at`
    found_at: datetime
    status: str
    via: str | None = None  # how it came back: redelivery | handoff
    redelivered_at: datetime | None = None
    handed_off_at: datetime | None = None
    # When GitHub first sent the event: the oldest `delivered_at` of its attempts the sweep
    # listed (a redelivery is an attempt of its own, sent later); None on older records.
    first_sent_at: datetime | None = None
    rehanded_at: datetime | None = None  # handed off again: no ledger record after a bound
    unrecorded_at: datetime | None = None  # when `github_recovery_unrecorded` was raised
    recovered_at: datetime | None = None  # when the ledger recorded the delivery
    after_s: float | None = None  # recovered_at - failed_at
    sweep_run: str | None = None  # the sweep run that redelivered or handed it off
    trace_id: str | None = None  # that run's trace
    alerted_at: datetime | None = None
    last_error: str | None = None
    update_time: Any = None  # the version read (for a conditional change), not stored

    @property
    def open(self) -> bool:
        return self.status == OPEN

    @property
    def sent_at(self) -> datetime:
        """When GitHub first sent the event, as far as the sweep saw: what orders it among
        live deliveries once recovered (`failed_at` on a record from before `first_sent_at`)."""
        return self.first_sent_at or self.failed_at

    def to_dict(self) -> dict[str, Any]:
        fields = dict(self.__dict__)
        fields.pop("update_time")
        return fields


@dataclass(frozen=True)
class ScanPosition:
    """A listing in progress: resume at `next_url`, stop at deliveries before `floor_at`."""

    next_url: str | None
    floor_at: datetime
    top_at: datetime | None  # the newest delivery it saw: the next listing's floor
    failures: int = 0  # runs in a row GitHub failed at `next_url`
    failed_only: bool = False  # it lists GitHub's failed deliveries only (`status=failure`)


@dataclass(frozen=True)
class Checkpoint:
    covered_to: datetime | None = None  # newest delivery of the last complete listing
    scan: ScanPosition | None = None
    resume_after: datetime | None = None  # GitHub asked for a wait until then
    listed_at: datetime | None = None  # when the last complete listing ended


class Recoveries:
    """`github_recoveries` and the sweep's checkpoint."""

    def __init__(self, commits: Commits, *, retention: timedelta) -> None:
        self._commits = commits
        self._retention = retention

    def collection(self) -> Any:
        return self._commits.collection(GITHUB_RECOVERIES)

    def _checkpoint_ref(self) -> Any:
        return self._commits.collection(RECONCILE_STATE).document(CHECKPOINT_ID)

    def checkpoint(self) -> Checkpoint:
        """The sweep's checkpoint (1 read); an empty one before the first run."""
        snapshot = self._commits.read(self._checkpoint_ref(), f"{RECONCILE_STATE}/{CHECKPOINT_ID}")
        if not snapshot.exists:
            return Checkpoint()
        data = snapshot.to_dict() or {}
        scan = data.get("scan")
        position = None
        if isinstance(scan, Mapping) and isinstance(scan.get("floor_at"), datetime):
            position = ScanPosition(
                scan.get("next_url"),
                scan["floor_at"],
                scan.get("top_at"),
                int(scan.get("failures") or 0),
                bool(scan.get("failed_only")),
            )
        return Checkpoint(
            covered_to=data.get("covered_to"),
            scan=position,
            resume_after=data.get("resume_after"),
            listed_at=data.get("listed_at"),
        )

    def save_checkpoint(self, checkpoint: Checkpoint, **run: Any) -> None:
        """Store `checkpoint` and what the run that reached it did (1 write).

        Last writer wins: an overlapping run may store an earlier position, which only
        makes the next run list more, never less."""
        scan = checkpoint.scan
        data = {
            "covered_to": checkpoint.covered_to,
            "scan": None if scan is None else dict(scan.__dict__),
            "resume_after": checkpoint.resume_after,
            "listed_at": checkpoint.listed_at,
            "last_run": dict(run),
        }
        where = f"{RECONCILE_STATE}/{CHECKPOINT_ID}"
        try:
            self._checkpoint_ref().set(data, timeout=self._commits.timeout_s)
        except gexc.GoogleAPIError as exc:
            raise StoreUnavailable(f"{where}: write failed: {exc}") from exc

    def open_once(self, recovery: Recovery) -> bool:
        """Create `recovery` (status `open`) unless one exists for its guid (1 write).

        True when this call created it."""
        if not recovery.open:
            raise InvalidArgument(f"recovery {recovery.guid}: opened as {recovery.status!r}")
        data = {**recovery.to_dict(), "expire_at": recovery.found_at + self._retention}
        ref = self.collection().document(_doc_id(recovery.guid))
        try:
            ref.create(data, timeout=self._commits.timeout_s)
        except gexc.AlreadyExists:
            return False
        except gexc.GoogleAPIError as exc:
            raise StoreUnavailable(f"recovery {recovery.guid}: create failed: {exc}") from exc
        return True

    def open_page(self, limit: int = 200, after: str | None = None) -> list[Recovery]:
        """Open recoveries, at most `limit` (one read each), by guid; `after`: the last
        guid of the previous page."""
        check_limit(limit)
        query = self.collection().where(filter=firestore.FieldFilter("status", "==", OPEN))
        if after is not None:
            query = query.order_by("__name__").start_after(
                {"__name__": self.collection().document(_doc_id(after))}
            )
        snapshots = self._commits.stream(query.limit(limit), "open_github_recoveries")
        return [recovery_from(s.to_dict() or {}, s.update_time) for s in snapshots]

    def change(self, recovery: Recovery, **fields: Any) -> Recovery | None:
        """Write `fields` on condition `recovery` is unchanged since it was read (1 write);
        the recovery as written, with its new version (no read needed to change it again).

        None when another sweep changed it first (it acts on it, not this one)."""
        check_change(recovery, fields)
        ref = self.collection().document(_doc_id(recovery.guid))
        option = self._commits.client.write_option(last_update_time=recovery.update_time)
        try:
            written = ref.update(fields, option=option, timeout=self._commits.timeout_s)
        except (gexc.FailedPrecondition, gexc.NotFound):
            return None
        except gexc.GoogleAPIError as exc:
            raise StoreUnavailable(f"recovery {recovery.guid}: update failed: {exc}") from exc
        return replace(recovery, **fields, update_time=written.update_time)

    def get_many(self, guids: Iterable[str]) -> dict[str, Recovery]:
        """The recoveries of those guids that have one (one batched read)."""
        refs = [self.collection().document(_doc_id(guid)) for guid in dict.fromkeys(guids)]
        if not refs:
            return {}
        try:
            snapshots = list(self._commits.client.get_all(refs, timeout=self._commits.timeout_s))
        except gexc.GoogleAPIError as exc:
            raise StoreUnavailable(f"{GITHUB_RECOVERIES}: read failed: {exc}") from exc
        found = [recovery_from(s.to_dict() or {}, s.update_time) for s in snapshots if s.exists]
        return {recovery.guid: recovery for recovery in found}

    def count(self, status: str | None = None) -> int:
        """How many recoveries there are (with `status`): a server-side count."""
        query = self.collection()
        if status is not None:
            if status not in RECOVERY_STATUSES:
                raise InvalidArgument(f"status must be one of {RECOVERY_STATUSES}, got {status!r}")
            query = query.where(filter=firestore.FieldFilter("status", "==", status))
        return self._commits.count(query, "github_recoveries")

    def recent(self, limit: int = 50) -> list[Recovery]:
        """The most recently found recoveries, newest first, one page."""
        check_limit(limit)
        query = self.collection().order_by("found_at", direction=firestore.Query.DESCENDING)
        snapshots = self._commits.stream(query.limit(limit), "recent_github_recoveries")
        return [recovery_from(s.to_dict() or {}, s.update_time) for s in snapshots]


def check_change(recovery: Recovery, fields: Mapping[str, Any]) -> None:
    """`InvalidArgument` unless `fields` may be written on `recovery` by `change`: known
    fields, a known status, and a version read to make the write conditional on."""
    unknown = set(fields) - (set(Recovery.__dataclass_fields__) - {"update_time"})
    if unknown or fields.get("status", OPEN) not in RECOVERY_STATUSES:
        raise InvalidArgument(f"recovery {recovery.guid}: cannot set {sorted(fields)}")
    if recovery.update_time is None:  # no version read: the write would be unconditional
        raise InvalidArgument(f"recovery {recovery.guid}: changed without a version read")


def _doc_id(guid: str) -> str:
    if not guid or "/" in guid or len(guid) > 200:
        raise InvalidArgument(f"not a usable delivery guid: {guid[:50]!r}")
    return guid


def recovery_from(data: Mapping[str, Any], update_time: Any = None) -> Recovery:
    names = set(Recovery.__dataclass_fields__) - {"update_time"}
    return Recovery(**{k: v for k, v in data.items() if k in names}, update_time=update_time)
