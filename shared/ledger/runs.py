"""Reconcile run records: `reconcile_runs/{id}`, one per finished run, for the console.

A run records what its `RunReport` counted, when it started and ended, and the names of
at most `MAX_EXAMINED_NAMES` operations it examined (so an operation's timeline can show
the runs that checked it). Records expire with the ledger's retention (TTL `expire_at`).
Listing is newest first by `finished_at`, one page at a time; nothing scans.

`reconcile_state/adoption` holds one field, `listed_at`: when the last complete listing of
Gemini's batches began, left by the adoption that listed every batch. Adoption now looks
only for open claims (shared/reconcile/adoption.py); it reads this document once per
process, makes one last listing from it, and deletes it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from google.api_core import exceptions as gexc
from google.cloud import firestore

from shared.ledger.commits import Commits
from shared.ledger.errors import InvalidArgument, StoreUnavailable
from shared.ledger.ids import check_limit, run_doc_id

RECONCILE_RUNS = "reconcile_runs"
RECONCILE_STATE = "reconcile_state"
ADOPTION_STATE_ID = "adoption"
MAX_EXAMINED_NAMES = 100


@dataclass(frozen=True)
class ReconcileRun:
    """One recorded run; `counts` is the run's `RunReport.to_dict()` (numbers and flags)."""

    run_id: str
    started_at: datetime
    finished_at: datetime
    counts: dict[str, Any]
    examined_ops: tuple[str, ...] = ()
    budget_s: float | None = None


def run_from(data: Mapping[str, Any], run_id: str) -> ReconcileRun:
    return ReconcileRun(
        run_id=run_id,
        started_at=data["started_at"],
        finished_at=data["finished_at"],
        counts=dict(data.get("counts") or {}),
        examined_ops=tuple(data.get("examined_ops") or ()),
        budget_s=data.get("budget_s"),
    )


class Runs:
    """The `reconcile_runs` collection."""

    def __init__(self, commits: Commits, *, retention: timedelta) -> None:
        self._commits = commits
        self._retention = retention

    def collection(self) -> Any:
        return self._commits.collection(RECONCILE_RUNS)

    def record(
        self,
        started_at: datetime,
        finished_at: datetime,
        counts: Mapping[str, Any],
        examined_ops: Sequence[str] = (),
        budget_s: float | None = None,
    ) -> str:
        """Store one run; returns its id. Only JSON-like counts are kept (no objects)."""
        if finished_at < started_at:
            raise InvalidArgument(f"reconcile run ends ({finished_at}) before it starts")
        kept = {
            key: value
            for key, value in counts.items()
            if isinstance(value, bool | int | float | str) or value is None
        }
        run_id = run_doc_id(finished_at)
        data = {
            "started_at": started_at,
            "finished_at": finished_at,
            "counts": kept,
            "examined_ops": list(examined_ops)[:MAX_EXAMINED_NAMES],
            "budget_s": budget_s,
            "expire_at": finished_at + self._retention,
        }
        try:
            self.collection().document(run_id).set(data, timeout=self._commits.timeout_s)
        except gexc.GoogleAPIError as exc:
            raise StoreUnavailable(f"reconcile run {run_id}: record failed: {exc}") from exc
        return run_id

    def recent(
        self, limit: int = 20, after: tuple[datetime, str] | None = None
    ) -> list[ReconcileRun]:
        """Runs, newest finished first, one page; `after` = (finished_at, run_id) of the last."""
        check_limit(limit)
        descending = firestore.Query.DESCENDING
        query = (
            self.collection()
            .order_by("finished_at", direction=descending)
            .order_by("__name__", direction=descending)
        )
        if after is not None:
            query = query.start_after(
                {"finished_at": after[0], "__name__": self.collection().document(after[1])}
            )
        snapshots = self._commits.stream(query.limit(limit), "list_reconcile_runs")
        return [run_from(s.to_dict() or {}, s.id) for s in snapshots]

    def for_operation(self, name: str, limit: int = 20) -> list[ReconcileRun]:
        """Recorded runs that examined `name` (at most `limit`), newest first.

        An array-contains filter alone (no order): served by the automatic single-field
        index, so the newest-first order is applied to this bounded page in memory.
        """
        check_limit(limit)
        query = self.collection().where(
            filter=firestore.FieldFilter("examined_ops", "array_contains", name)
        )
        snapshots = self._commits.stream(query.limit(limit), "reconcile_runs_for_operation")
        runs = [run_from(s.to_dict() or {}, s.id) for s in snapshots]
        return sorted(runs, key=lambda run: run.finished_at, reverse=True)


class AdoptionWatermark:
    """The `reconcile_state/adoption` document: the watermark of the adoption that listed
    every batch (before the open marks on submissions). Only read now, for the one last
    listing that looks for the orphans of claims made before the marks existed
    (shared/reconcile/adoption.py), then cleared."""

    def __init__(self, commits: Commits) -> None:
        self._commits = commits

    def _ref(self) -> Any:
        return self._commits.collection(RECONCILE_STATE).document(ADOPTION_STATE_ID)

    def get(self) -> datetime | None:
        """When the last complete listing began; None if none is recorded (1 read)."""
        try:
            snapshot = self._ref().get(timeout=self._commits.timeout_s)
        except gexc.GoogleAPIError as exc:
            raise StoreUnavailable(
                f"{RECONCILE_STATE}/{ADOPTION_STATE_ID}: read failed: {exc}"
            ) from exc
        listed_at = (snapshot.to_dict() or {}).get("listed_at") if snapshot.exists else None
        return listed_at if isinstance(listed_at, datetime) else None

    def clear(self) -> None:
        """Delete the watermark: its last listing is done (1 write; idempotent)."""
        try:
            self._ref().delete(timeout=self._commits.timeout_s)
        except gexc.GoogleAPIError as exc:
            raise StoreUnavailable(
                f"{RECONCILE_STATE}/{ADOPTION_STATE_ID}: delete failed: {exc}"
            ) from exc
