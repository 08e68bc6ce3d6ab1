"""Installations: `installations/{id}`, one per GitHub App installation the worker heard of.

The worker records each `installation` and `installation_repositories` event here
(shared/handlers/builtin.py), and a push from an installation recorded deleted or
suspended, or from a repository it no longer covers, is ignored before anything is
fetched (by an app that checks it, e.g. apps/*/installations.py). Fields (docs/architecture.md,
"installations/{id}"):

    installation_id, account        GitHub's id and the account's login
    status, status_order            active | suspended | deleted, and the order (below) of
                                    the event that set it
    repository_selection,           all | selected, the order of the event that set it, and
    selection_order,                whether `repositories` lists every repository covered
    repositories_complete           (a selected installation's `created` list): then a
                                    repository missing from it is not covered
    repositories                    [{full_name, covered, order}]: each repository an event
                                    named, covered or removed, and the order that last said so
    order                           the newest event applied (its account login is kept)
    recent_orders                   the orders of the last `MAX_RECENT` events that changed it
    updated_at, delivery_id         when the ledger last changed the document, and the
                                    delivery whose event did

ORDER. GitHub may deliver these events out of order and more than once, so each value is
a register that an event changes only when the event's order is newer than the one stored:

    order = (installation.updated_at, received_at, delivery_id)

`installation.updated_at` is the payload's own time: every event carries a snapshot of the
installation, so a later event never carries an earlier `updated_at`. It has whole seconds
and GitHub does not move it for every change (its published `added` example carries the
`created` time), so ties fall to `received_at`, the ingress's stamp when the delivery
reached us (sealed in the envelope; for a delivery the GitHub sweep recovered, GitHub's
`delivered_at` of its first attempt, shared/recovery/handoff.py, so an event recovered
late still sorts before a later one taken live), then to the delivery id, so two events
always compare.
A duplicate has its original's order and changes nothing; so does an operator's replay of
an event that changed the installation (`hookledger deliveries replay` seals a new
`received_at`): its delivery id finds its original order in `recent_orders`. A replay of
one that changed nothing is ordered as received at the replay. A body sent again under a
NEW delivery id (GitHub signs the body, not the id) would carry a new `received_at` and
win every tie: the commit that records an event's delivery marks its body
(shared/ledger/deliveries.py, with no TTL for these events), and an event whose body
another delivery marked changes nothing; the worker records it a duplicate. Each
repository is a register of its own, so deltas naming different repositories commute;
status, selection and repositories never overwrite one another. `deleted` is final
whatever its order: GitHub never reuses an installation id. Timeline of the stale event
this closes::

    GitHub:  suspend (updated_at t1) ──── unsuspend (t2)
    worker:          unsuspend (t2): active ──── suspend (t1) arrives late: t1 < t2, no change

The rules are `merged`, a pure function: the Firestore part below reads, merges and
commits on "unchanged since the read" (a racing writer re-reads and merges again); the
in-memory double (tests/memory_ledger.py) merges under its lock.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NamedTuple, Protocol

from google.cloud import firestore

from shared.clock import Clock
from shared.ledger.commits import Commits
from shared.ledger.deliveries import Deliveries
from shared.ledger.errors import InvalidArgument
from shared.ledger.ids import check_limit, check_time, installation_doc_id
from shared.ledger.records import (
    ACTIVE,
    DELETED,
    INSTALLATION_STATUSES,
    INSTALLATIONS,
    SELECTED_REPOSITORIES,
    SUSPENDED,
    DeliveryEnd,
)
from shared.logs import event as log_event
from shared.logs import get_logger

log = get_logger("ledger")

# Each entry of `repositories` takes ~150 bytes: this many stay far below Firestore's 1 MiB.
MAX_REPOSITORIES = 5000
# How many changing events' orders are remembered, so that their replays change nothing.
MAX_RECENT = 50


class InstallationFacts(Protocol):
    """What one `installation` / `installation_repositories` event says (shared/github/
    installations.py, `InstallationEvent`, satisfies it)."""

    @property
    def installation_id(self) -> int: ...
    @property
    def account(self) -> str | None: ...
    @property
    def deleted(self) -> bool: ...
    @property
    def suspended(self) -> bool | None:
        """None: the event says nothing of it (an `installation_repositories` event)."""
        ...

    @property
    def repository_selection(self) -> str | None: ...
    @property
    def repositories(self) -> tuple[str, ...] | None:
        """Every repository the installation can access, when the event lists them."""
        ...

    @property
    def added(self) -> tuple[str, ...]: ...
    @property
    def removed(self) -> tuple[str, ...]: ...
    @property
    def updated_at(self) -> datetime | None: ...


@dataclass(frozen=True)
class RepositoryMark:
    """One repository an event named: covered or not, as of the event of order `order`."""

    full_name: str
    covered: bool
    order: str


@dataclass(frozen=True)
class Installation:
    """An `installations` document as stored (see the module docstring)."""

    installation_id: int
    account: str | None
    status: str
    repository_selection: str | None
    repositories_complete: bool
    marks: tuple[RepositoryMark, ...]
    updated_at: datetime | None
    delivery_id: str | None
    status_order: str = ""
    selection_order: str = ""
    order: str = ""

    @property
    def covered(self) -> tuple[str, ...]:
        """The full names of the repositories recorded as covered, sorted."""
        return tuple(mark.full_name for mark in self.marks if mark.covered)

    def mark(self, repo: str) -> RepositoryMark | None:
        wanted = repo.lower()  # GitHub compares owner and repository names case-insensitively
        return next((m for m in self.marks if m.full_name.lower() == wanted), None)

    def refusal(self, repo: str) -> str | None:
        """Why a push from `repo` through this installation is not for us; None: go on.

        Deleted or suspended: refused. A selected installation refuses a repository marked
        removed, and one its complete list does not name; one it knows nothing of is let
        through (the list may come from events after a `created` we never saw).
        """
        which = f"installation {self.installation_id}"
        if self.status == DELETED:
            return f"{which} was deleted"
        if self.status == SUSPENDED:
            return f"{which} is suspended"
        if self.repository_selection != SELECTED_REPOSITORIES:
            return None
        mark = self.mark(repo)
        if mark is not None:
            return None if mark.covered else f"{repo} was removed from {which}"
        if self.repositories_complete:
            return f"{repo} is not among the repositories {which} covers"
        return None

    def to_dict(self) -> dict[str, Any]:
        """Every stored field, with `repositories` as stored, for the CLI."""
        return {
            "installation_id": self.installation_id,
            "account": self.account,
            "status": self.status,
            "repository_selection": self.repository_selection,
            "repositories_complete": self.repositories_complete,
            "covered": list(self.covered),
            "repositories": [_mark_fields(m) for m in self.marks],
            "updated_at": self.updated_at,
            "delivery_id": self.delivery_id,
            "status_order": self.status_order,
            "selection_order": self.selection_order,
            "order": self.order,
        }


class Applied(NamedTuple):
    """`apply`'s answer: `changed` False for a duplicate, an older event, or any event after
    `deleted`; `installation` is the document as it now stands."""

    changed: bool
    installation: Installation


def order_of(updated_at: datetime | None, received_at: datetime, delivery_id: str) -> str:
    """An event's order as a string that sorts like (updated_at, received_at, delivery_id);
    without an `updated_at` (GitHub always sends one) `received_at` stands in for it."""
    return f"{_stamp(updated_at or received_at)} {_stamp(received_at)} {delivery_id}"


def merged(
    stored: Mapping[str, Any] | None,
    event: InstallationFacts,
    *,
    received_at: datetime,
    delivery_id: str,
) -> dict[str, Any] | None:
    """The document after `event`, or None when it changes nothing (module docstring).

    `updated_at` and `delivery_id` are the caller's to set on a changed document.
    """
    check_time(received_at, "received_at")
    installation_doc_id(event.installation_id)
    doc = dict(stored) if stored is not None else _fresh(event.installation_id)
    if doc["status"] == DELETED:
        return None
    recent = list(doc.get("recent_orders") or ())
    seen = [o for o in recent if o.split(" ", 2)[-1] == delivery_id]
    order = seen[-1] if seen else order_of(event.updated_at, received_at, delivery_id)
    if order > doc["order"] or not doc["account"]:
        doc["account"] = event.account or doc["account"]
    doc["order"] = max(order, doc["order"])
    if event.deleted:
        doc["status"], doc["status_order"] = DELETED, order
    elif event.suspended is not None and order > doc["status_order"]:
        doc["status"], doc["status_order"] = (SUSPENDED if event.suspended else ACTIVE), order
    selection = event.repository_selection
    full = event.repositories is not None and selection == SELECTED_REPOSITORIES
    if selection is not None and selection != doc["repository_selection"]:
        if order > doc["selection_order"]:
            doc["repository_selection"], doc["selection_order"] = selection, order
            doc["repositories_complete"] = full
    elif full and order > doc["selection_order"]:
        doc["repositories_complete"] = True  # a full list since the selection last changed
    doc["repositories"] = _marked(doc["repositories"], event, order, full)
    if stored is not None and all(doc[k] == stored.get(k) for k in doc):
        return None
    doc["recent_orders"] = [*recent, order][-MAX_RECENT:]
    return doc


def installation_from(data: Mapping[str, Any]) -> Installation:
    return Installation(
        installation_id=int(data["installation_id"]),
        account=data.get("account"),
        status=data.get("status") or ACTIVE,
        repository_selection=data.get("repository_selection"),
        repositories_complete=bool(data.get("repositories_complete")),
        marks=tuple(
            RepositoryMark(str(m["full_name"]), bool(m.get("covered")), str(m.get("order") or ""))
            for m in data.get("repositories") or ()
        ),
        updated_at=data.get("updated_at"),
        delivery_id=data.get("delivery_id"),
        status_order=data.get("status_order") or "",
        selection_order=data.get("selection_order") or "",
        order=data.get("order") or "",
    )


def log_applied(applied: Applied, delivery_id: str) -> None:
    stored = applied.installation
    log_event(
        log,
        logging.INFO,
        "installation recorded" if applied.changed else "installation unchanged",
        installation=stored.installation_id,
        status=stored.status,
        delivery_id=delivery_id,
    )


class Installations:
    """The `installations` collection."""

    def __init__(self, commits: Commits, clock: Clock, deliveries: Deliveries) -> None:
        self._commits = commits
        self._clock = clock
        self._deliveries = deliveries

    def collection(self) -> Any:
        return self._commits.collection(INSTALLATIONS)

    def get(self, installation_id: int) -> Installation | None:
        """The recorded installation, None when no event about it was recorded (1 read)."""
        doc_id = installation_doc_id(installation_id)
        snapshot = self._commits.read(self.collection().document(doc_id), f"installation {doc_id}")
        return installation_from(snapshot.to_dict() or {}) if snapshot.exists else None

    def apply(
        self,
        event: InstallationFacts,
        *,
        received_at: datetime,
        delivery_id: str,
        end: DeliveryEnd | None = None,
    ) -> Applied:
        """Record what `event` says, in ONE conditional commit; idempotent, and an event
        older than what is recorded changes nothing (module docstring).

        `end`, the delivery's mark, is written in the same commit when the event changed
        the installation (`end.applied`), with its body's marker when `end` creates the
        record; otherwise it is left to the worker. An event whose body another delivery id
        marked (a replay) changes nothing.
        """
        doc_id = installation_doc_id(event.installation_id)
        ref = self.collection().document(doc_id)
        subject = f"installation {doc_id}"

        def attempt() -> Applied:
            snapshot = self._commits.read(ref, subject)
            stored = snapshot.to_dict() if snapshot.exists else None
            doc = merged(stored, event, received_at=received_at, delivery_id=delivery_id)
            if doc is None:
                assert stored is not None  # a first event always changes something
                return Applied(False, installation_from(stored))
            _check_size(doc, doc_id)
            doc.update(updated_at=self._clock(), delivery_id=delivery_id)
            staged = self._deliveries.stage_end(end) if end is not None else None
            # A delivery this commit records: its body may be another id's, replayed (module doc).
            marker = self._deliveries.new_body_of(end) if end and staged and staged.create else None
            first = self._deliveries.body_holder(marker) if marker is not None else None
            if first is not None and first != delivery_id:
                return Applied(False, installation_from(stored or _fresh(event.installation_id)))

            def body(txn: Any) -> None:
                if stored is None:
                    txn.create(ref, doc)
                else:
                    txn.update(ref, doc, option=self._commits.unchanged_since(snapshot))
                if marker is not None and first is None:
                    txn.create(marker.ref, marker.fields)

            self._commits.commit(body, ref, snapshot, also=staged)
            if end is not None:
                end.applied = staged is not None
            return Applied(True, installation_from(doc))

        applied = self._commits.retrying(subject, attempt)
        log_applied(applied, delivery_id)
        return applied

    def listing(
        self, status: str | None = None, limit: int = 50, after: int | None = None
    ) -> list[Installation]:
        """Installations by id, one page; `status` filters, `after` is the last id shown."""
        check_limit(limit)
        if status is not None and status not in INSTALLATION_STATUSES:
            raise InvalidArgument(
                f"installation status must be one of {list(INSTALLATION_STATUSES)}, got {status!r}"
            )
        query = self.collection()
        if status is not None:
            query = query.where(filter=firestore.FieldFilter("status", "==", status))
        query = query.order_by("installation_id")
        if after is not None:
            query = query.start_after({"installation_id": after})
        snapshots = self._commits.stream(query.limit(limit), "list_installations")
        return [installation_from(s.to_dict() or {}) for s in snapshots]


def _fresh(installation_id: int) -> dict[str, Any]:
    """An installation no event was recorded for: active until an event says otherwise."""
    return {
        "installation_id": installation_id,
        "account": None,
        "status": ACTIVE,
        "status_order": "",
        "repository_selection": None,
        "selection_order": "",
        "repositories_complete": False,
        "repositories": [],
        "order": "",
        "recent_orders": [],
    }


def _marked(
    stored: Sequence[Mapping[str, Any]], event: InstallationFacts, order: str, full: bool
) -> list[dict[str, Any]]:
    """`repositories` after `event`: each repository it names marked covered or removed
    where its order is newer; a full list also unmarks the covered ones it leaves out."""
    marks = {str(m["full_name"]).lower(): dict(m) for m in stored}

    def mark(name: str, covered: bool) -> None:
        current = marks.get(name.lower())
        if current is None or order > current["order"]:
            marks[name.lower()] = {"full_name": name, "covered": covered, "order": order}

    if full:
        listed = {name.lower() for name in event.repositories or ()}
        for key, current in list(marks.items()):
            if key not in listed and current["covered"]:
                mark(current["full_name"], False)
        for name in event.repositories or ():
            mark(name, True)
    for name in event.added:
        mark(name, True)
    for name in event.removed:
        mark(name, False)
    return [marks[key] for key in sorted(marks)]


def _mark_fields(mark: RepositoryMark) -> dict[str, Any]:
    return {"full_name": mark.full_name, "covered": mark.covered, "order": mark.order}


def _check_size(doc: Mapping[str, Any], doc_id: str) -> None:
    if len(doc["repositories"]) > MAX_REPOSITORIES:
        raise InvalidArgument(
            f"installation {doc_id}: {len(doc['repositories'])} repositories, over the "
            f"{MAX_REPOSITORIES} one document holds"
        )


def _stamp(value: datetime) -> str:
    """Fixed width, so the order strings compare like the times."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
