"""Shared batches at settlement: the core's kind of a group's batch, and each item's
part of it (docs/architecture.md, "Shared batches").

The group's batch is an operation of the kind `hookledger-group` (no app owns it; its
context holds the group's id, its items' operations `members` and every request's key in
request order, `{item index}/{item's key}`, so rows that echo no key are placed, and an
orphan group batch adopted by reconcile has all it needs from the group's own claim). It
settles once (its status, no write-back); before that commit its rows are stored, one
document per item (`keep_rows`, shared/ledger/group_rows.py), so an item never needs
Gemini's copy, which is gone after 48 h. Its outbox holds one `hookledger-members` item
per page of items; delivering one settles each item of the page through the one
settlement path from its stored rows, each in its own commit with its kind's write-back
and outbox (`deliver_members`, registered by shared/settlement/settler.py with the
`Settler` it uses): a batch of thousands of rows never needs one commit, and an item
settled already is `already_settled`, never settled twice. An item fails without a batch
with `REQUEST_REFUSED` or `DEPLOYMENT_REFUSED` (shared/kinds.py) as its reason.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from shared import logs
from shared.crashpoints import crash_point
from shared.errors import PermanentError, TransientError
from shared.gemini import BatchStatus, GeminiNotFound, Row
from shared.kinds import (
    DEPLOYMENT_REFUSED,
    REQUEST_REFUSED,
    DeliveryServices,
    OperationKind,
    context_keys,
    register,
)
from shared.ledger.group_rows import row_fields
from shared.ledger.groups import GROUP_TAG, group_tag, split_member_key
from shared.ledger.records import CANCELLED, EXPIRED, FAILED

if TYPE_CHECKING:
    from shared.gemini import BatchStatus, BatchSummary, GeminiGateway
    from shared.ledger import Operation, OutboxItem
    from shared.ledger.groups import Group
    from shared.ledger.protocols import SettleLedger

log = logs.get_logger("sharing")

SettlerOf = Callable[[DeliveryServices], Any]
"""`settler_of(services)`: the `Settler` a page of items settles with."""

GROUP_KIND = "hookledger-group"
MEMBERS = "hookledger-members"

# Items settled by one outbox item: one read of the batch for this many items' commits.
MEMBERS_PER_ITEM = 50


def member_items(record: Operation) -> list[dict[str, Any]]:
    """The group operation's outbox: its items, a page per outbox item."""
    members = [str(name) for name in record.context.get("members") or []]
    return [
        {
            "kind": MEMBERS,
            "group": record.context.get("group"),
            "first": first,
            "members": members[first : first + MEMBERS_PER_ITEM],
        }
        for first in range(0, len(members), MEMBERS_PER_ITEM)
    ]


def slice_rows(batch: BatchStatus, index: int, name: str) -> BatchStatus:
    """The item at `index`'s part of its group's batch: its rows, keyed by its own keys."""
    rows: list[Row] = []
    for row in batch.rows:
        split = split_member_key(row.key) if row.key else None
        if split is not None and split[0] == index:
            rows.append(replace(row, key=split[1]))
    # Gemini's counts are the group's: an item's rows cannot be checked against them.
    return replace(batch, name=name, rows=tuple(rows), stats=None)


def keep_rows(ledger: SettleLedger, record: Operation, batch: BatchStatus) -> int:
    """Store the ended group batch's rows per item of `record` (its context's `members`),
    before the commit that settles it; how many documents were written."""
    items: dict[int, list[Any]] = {}
    for name in record.context.get("members") or []:
        items[_index_of(str(name))] = []
    for row in batch.rows:
        split = split_member_key(row.key) if row.key else None
        if split is not None and split[0] in items:
            items[split[0]].append(replace(row, key=split[1]))
    stored = ledger.group_rows.store(record.name, batch.state, batch.ended_at, items)
    crash_point("group.rows_kept")
    return stored


def stored_status(
    ledger: SettleLedger, batch_op: Operation, index: int, name: str
) -> BatchStatus | None:
    """Item `index`'s part of the ended batch `batch_op` as stored (`keep_rows`), as the
    item `name`'s status; None when its rows were not stored."""

    stored = ledger.group_rows.item(batch_op.name, index)
    if stored is None:
        return None
    known = Row.__dataclass_fields__
    rows = tuple(Row(**row_fields(row, known)) for row in stored.rows)
    return BatchStatus(name=name, state=stored.state, rows=rows, ended_at=stored.ended_at)


def item_status(
    ledger: SettleLedger,
    record: Operation,
    group_status: Callable[[Operation], BatchStatus],
    gone: Callable[[Exception], BatchStatus],
) -> BatchStatus:
    """An item's status through its group: failed with the reason when its request or its
    part was refused; still running while its part has no batch, or its part's batch
    runs (the part's own check polls Gemini: an item never does, however old); as its
    part's batch ended when that was not a success; else its rows of that batch. A 404
    for a batch whose operation settled is the item's own to confirm (`gone(exc)`)."""
    assert record.group is not None
    index = _index(record)
    group = ledger.groups.get(record.group)
    part = group.part_of(index) if group is not None else None
    failure = group.failure_of(index) if group is not None else None
    if group is not None and failure is not None:
        error = {"message": failure, "reason": _failure_reason(group, index)}
        return BatchStatus(name=record.name, state="JOB_STATE_FAILED", error=error)
    decided = part.operation if part is not None else None
    if decided is None:
        tag = group.part_tag(part) if group is not None and part is not None else None
        submission = ledger.submissions.get(tag or group_tag(record.group))
        decided = submission.operation if submission is not None else None
    batch_op = ledger.operations.get(decided) if decided else None
    if batch_op is None or batch_op.pending:
        return BatchStatus(name=record.name, state="JOB_STATE_PENDING")
    try:
        return ended_part(ledger, batch_op, index, record.name, lambda: group_status(batch_op))
    except GeminiNotFound as exc:
        return gone(exc)


def ended_part(
    ledger: SettleLedger,
    batch_op: Operation,
    index: int,
    name: str,
    read_batch: Callable[[], BatchStatus],
) -> BatchStatus:
    """Item `index`'s part of the settled batch `batch_op`, as the item `name`'s status: as
    the batch ended when that was not a success, else its stored rows, else (a batch settled
    before rows were kept) its rows of `read_batch()`, Gemini's copy while it lasts."""
    ended = _settled_status(batch_op)
    if ended is not None:
        return replace(ended, name=name)
    stored = stored_status(ledger, batch_op, index, name)
    if stored is not None:
        return stored
    return slice_rows(read_batch(), index, name)


def _failure_reason(group: Group, index: int) -> str:
    return REQUEST_REFUSED if index in group.refused else DEPLOYMENT_REFUSED


def _index(record: Operation) -> int:
    return _index_of(record.name)


def _index_of(name: str) -> int:
    index = name.rpartition(".")[2]
    if not index.isdigit():
        raise PermanentError(f"operation {name}: not an item of a shared batch")
    return int(index)


# A group that did not succeed needs no second read: its items end as it did.
_ENDED: dict[str, str] = {
    FAILED: "JOB_STATE_FAILED",
    CANCELLED: "JOB_STATE_CANCELLED",
    EXPIRED: "JOB_STATE_EXPIRED",
}


def _settled_status(group: Operation) -> BatchStatus | None:
    state = _ENDED.get(group.status)
    if state is None:
        return None
    error = group.error if isinstance(group.error, Mapping) else {"message": str(group.error)}
    return BatchStatus(name=group.name, state=state, error=dict(error))


def deliver_members(item: OutboxItem, services: DeliveryServices, settler_of: SettlerOf) -> None:
    """Settle the page of items the outbox item names, from one read of the group's batch,
    with the `Settler` `settler_of(services)` gives (shared/settlement/settler.py)."""
    payload = item.payload if isinstance(item.payload, Mapping) else {}
    names = payload.get("members")
    if not isinstance(names, Sequence) or isinstance(names, str):
        raise PermanentError(f"outbox item {item.idempotency_key}: not a {MEMBERS} payload")
    ledger: Any = services.ledger
    group = ledger.operations.get(item.operation)
    if group is None:
        raise PermanentError(f"outbox item {item.idempotency_key}: {item.operation} is gone")
    settler = settler_of(services)
    fetched: list[BatchStatus] = []

    def read_once() -> BatchStatus:
        """Gemini's copy, read once for the whole page (a batch settled before rows were kept)."""
        if not fetched:
            try:
                fetched.append(settler.group_status(group))
            except GeminiNotFound as exc:  # later; each item's own check decides `gone`
                raise TransientError(f"{group.name}: Gemini answered 404 ({exc})") from exc
        return fetched[0]

    def status_of(record: Operation) -> BatchStatus:
        return ended_part(ledger, group, _index(record), record.name, read_once)

    by = group.settled_by or "reconcile"
    failed: list[str] = []
    for name in names:
        record = ledger.operations.get(str(name))
        if record is None or not record.pending:
            continue
        try:
            settler.settle(record.name, by, record, batch=status_of(record))
        except Exception as exc:  # one item's failure holds back no other item
            failed.append(record.name)
            logs.event(
                log,
                logging.ERROR,
                f"settling item {record.name} of group batch {group.name} failed",
                operation=record.name,
                group=group.name,
                reason=f"{type(exc).__name__}: {exc}",
            )
    if failed:
        raise TransientError(f"{group.name}: items not settled yet: {', '.join(failed)}")


def _adopt(key: str, batch: BatchSummary, gemini: GeminiGateway) -> dict[str, Any]:
    # The group's id is the tag's key; members and keys come from the group's claim.
    return {"group": key}


def _outbox(record: Operation, batch: BatchStatus) -> list[dict[str, Any]]:
    return member_items(record)


GROUP = register(
    OperationKind(
        name=GROUP_KIND,
        tag=GROUP_TAG,
        adopt=_adopt,
        outbox=_outbox,
        request_keys=context_keys("keys"),
        needs=("group", "members", "keys"),
        description="a shared batch: many items' requests, settled then fanned out per item",
    )
)
