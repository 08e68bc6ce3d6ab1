"""Assertions about a stack's end state, with messages that name what is wrong."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from hookledger.sending import Sent
from hookledger.testing.waiting import wait_for
from shared.ledger.opnames import decode
from shared.ledger.records import DEAD, DELIVERIES, FINISHED_DELIVERY_STATUSES, PENDING, QUEUED

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


def assert_nothing_pending(
    stack: Stack,
    *,
    allow_dead: Iterable[str | Sent] = (),
    allow_given_up: Iterable[str] = (),
) -> None:
    """Nothing left undone or failed for good; the message lists every offender:

    - an operation still pending;
    - an outbox item open (neither delivered nor given up), or GIVEN UP (its reason);
    - a delivery record queued (waiting or running), or DEAD (its last error): the
      delivery's own record and each app's `deliveries/{source}:{id}#{app}`;
    - a task left in the queue (after at most QUEUE_DRAIN_S for the last answers to
      reach Cloud Tasks).

    A test that expects a failure says which: `allow_dead` takes delivery ids as sent (or
    the `Sent`: the delivery's records and its apps'), or `"{id}#{app}"` for one app's;
    `allow_given_up` takes operation names (each of its items) or items' idempotency keys.
    An allowance that matches nothing dead or given up fails too, so a typo cannot pass.
    """
    dead_ok = {a.delivery_id if isinstance(a, Sent) else str(a) for a in allow_dead}
    given_up_ok = {str(a) for a in allow_given_up}
    used: set[str] = set()
    problems = []
    for op in stack.operations():
        name = op["name"]
        if op["status"] == PENDING:
            problems.append(f"operation {name} ({op['kind']}) is pending")
        for item in op["outbox"]:
            key = item["idempotency_key"]
            what = f"operation {name}: outbox item {key} ({_kind(item)})"
            if item.get("given_up_at") is not None:
                allowed = given_up_ok & {name, key}
                used |= allowed
                if not allowed:
                    problems.append(f"{what} was given up: {item.get('given_up_reason')}")
            elif item.get("delivered_at") is None:
                problems.append(f"{what} is open{_item_state(item)}")
    for doc_id, delivery in sorted(stack.documents(DELIVERIES).items()):
        status = delivery.get("status")
        where = f"deliveries/{doc_id} ({delivery.get('event')})"
        error = delivery.get("last_error")
        if status == DEAD:
            delivery_id = decode(doc_id.partition(":")[2])
            allowed = dead_ok & {delivery_id, delivery_id.partition("#")[0]}
            used |= allowed
            if not allowed:
                problems.append(f"{where} is dead: {error}")
        elif status == QUEUED:
            problems.append(
                f"{where} is queued{_running(delivery)}"
                + (f", last error: {error}" if error else "")
            )
    unused = sorted((dead_ok | given_up_ok) - used)
    if unused:
        problems.append(f"allowed to be dead or given up, but nothing of it is: {unused}")
    if problems:
        raise AssertionError("something is pending or failed:\n  " + "\n  ".join(problems))

    def drained() -> bool | None:
        return True if not _unfinished_tasks(stack) else None

    wait_for(
        drained,
        timeout_s=QUEUE_DRAIN_S,
        what=lambda: f"the Cloud Tasks queue to empty; tasks left: {_unfinished_tasks(stack)}",
    )


def _kind(item: dict[str, Any]) -> str:
    payload = item.get("payload")
    kind = payload.get("kind") if isinstance(payload, dict) else None
    return f"kind {kind}" if kind else "no kind"


def _item_state(item: dict[str, Any]) -> str:
    """`: attempts 2, last error …, leased until …` for what an open item has."""
    parts = [
        f"{label} {item[field]}"
        for field, label in (
            ("attempts", "attempts"),
            ("last_error", "last error"),
            ("leased_until", "leased until"),
            ("next_attempt_at", "next attempt at"),
        )
        if item.get(field)
    ]
    return f": {', '.join(parts)}" if parts else ""


def _running(delivery: dict[str, Any]) -> str:
    """` (running: attempt …)` while an attempt's lease on a queued delivery is live."""
    lease = delivery.get("lease") or {}
    until = lease.get("until")
    if isinstance(until, datetime) and until > datetime.now(UTC):
        return f" (running: attempt {lease.get('attempt')} until {until})"
    return ""


def _unfinished_tasks(stack: Stack) -> list[str]:
    """The queued tasks, less a later check of a delivery that is already finished (the
    worker's fan-out looks again `FANOUT_CHECK_S` after it deferred; that task finds the
    delivery done and does nothing)."""
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
