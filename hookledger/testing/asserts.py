"""Assertions about a stack's end state, with messages that name what is wrong."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import TYPE_CHECKING

from hookledger.testing.waiting import wait_for
from shared.ledger.records import DELIVERIES, FINISHED_DELIVERY_STATUSES, PENDING, QUEUED

if TYPE_CHECKING:
    from hookledger.testing.stack import Stack

# Cloud Tasks drops a task once the worker's answer is in, just after its last commit.
QUEUE_DRAIN_S = 10.0


def assert_one_result_per_item(
    stack: Stack, collection: str, items: Iterable[str], *, field: str = "item"
) -> None:
    """Exactly one document of `collection` per item (its `field` holds the item), and
    none for anything else; the message names each item with none or several."""
    wanted = list(items)
    by_item: dict[str, list[str]] = defaultdict(list)
    for doc_id, fields in stack.documents(collection).items():
        by_item[str(fields.get(field))].append(doc_id)
    problems = [
        f"item {item!r} has {len(by_item.get(item, []))} results"
        + (f" ({', '.join(sorted(by_item[item]))})" if by_item.get(item) else "")
        for item in wanted
        if len(by_item.get(item, [])) != 1
    ]
    problems += [
        f"{collection}/{doc_id} is for {item!r}, which is not one of the items"
        for item, doc_ids in sorted(by_item.items())
        if item not in wanted
        for doc_id in doc_ids
    ]
    if problems:
        raise AssertionError(
            f"expected one {collection} document per item ({len(wanted)} items):\n  "
            + "\n  ".join(problems)
        )


def assert_nothing_pending(stack: Stack) -> None:
    """No pending operation, no open outbox item, no queued delivery, and (after at most
    QUEUE_DRAIN_S for the last answers to reach Cloud Tasks) no task left in the queue."""
    problems = []
    for op in stack.operations():
        if op["status"] == PENDING:
            problems.append(f"operation {op['name']} ({op['kind']}) is pending")
        open_items = [i for i, item in enumerate(op["outbox"]) if _open(item)]
        if open_items:
            problems.append(f"operation {op['name']} has open outbox items {open_items}")
    for doc_id, delivery in sorted(stack.documents(DELIVERIES).items()):
        if delivery.get("status") == QUEUED:
            error = delivery.get("last_error")
            problems.append(
                f"delivery {doc_id} ({delivery.get('event')}) is queued"
                + (f", last error: {error}" if error else "")
            )
    if problems:
        raise AssertionError("something is still pending:\n  " + "\n  ".join(problems))

    def drained() -> bool | None:
        return True if not _unfinished_tasks(stack) else None

    wait_for(
        drained,
        timeout_s=QUEUE_DRAIN_S,
        what=lambda: f"the Cloud Tasks queue to empty; tasks left: {_unfinished_tasks(stack)}",
    )


def _unfinished_tasks(stack: Stack) -> list[str]:
    """The queued tasks, less a later check of a delivery that is already finished (the
    worker's fan-out looks again `FANOUT_CHECK_S` after it deferred; that task finds the
    delivery done and does nothing)."""
    from shared.ledger.opnames import decode

    finished = {
        decode(doc_id.split(":", 1)[1])
        for doc_id, delivery in stack.documents(DELIVERIES).items()
        if ":" in doc_id and delivery.get("status") in FINISHED_DELIVERY_STATUSES
    }
    return [name for name in stack.queued_tasks() if _deferred_delivery(name) not in finished]


def _deferred_delivery(task_name: str) -> str | None:
    """The delivery id of a deferred delivery's task (shared/entrypoints/answers.py names it
    `{digest}-{source}_{delivery id}_deferred_…`), else None."""
    readable = task_name.rsplit("/", 1)[-1].partition("-")[2]
    head, deferred, _ = readable.partition("_deferred_")
    source, _, delivery_id = head.partition("_")
    return delivery_id if deferred and source in ("github", "gemini") and delivery_id else None


def _open(item: dict[str, object]) -> bool:
    """An outbox item still to deliver: neither delivered nor given up."""
    return not item.get("delivered_at") and not item.get("given_up_at")
