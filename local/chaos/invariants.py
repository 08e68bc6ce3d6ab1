"""Invariants over the whole Firestore database, read through the ledger (paged).

After a scenario is quiet, `check` returns one line per violation (empty: all hold):
- no operation left pending, each settled once (`settled_at`/`settled_by` set, and at most
  one `operation settled` log line for it across every worker and reconcile process);
- one operation per push (no second batch), ending with exactly the push's reviews;
- one review per (repo, sha, path), written once (created == last updated) in its
  settling commit (its `operation` is the settled one; with no later write to the
  operation, the same commit time);
- no review for an operation still pending;
- no delivery left `queued` or `dead`;
- as a GitHub App (`check_runs` given: the simulator's runs of the chaos repository):
  exactly one check run "hookledger review" per push, carrying the push's `external_id`
  (its submission id, from the operation's check-run outbox item), `completed` with a
  conclusion; no outbox item given up.
`wait_quiet` polls cheap counts until the database is quiet (every outbox item of the
pushes' operations delivered too, and, given `tasks_left`, no task left in the queue) or
a deadline passes.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from google.cloud import firestore

from apps.review.check_runs import CHECK_RUN
from apps.review.checks import CHECK_NAME
from apps.review.results import REVIEWS
from local.chaos.load import FULL_REPO, Push
from shared.ledger import PENDING, Delivery, Ledger, LedgerError, Operation
from shared.sharing.kind import GROUP_KIND

PAGE = 200


def all_operations(ledger: Ledger) -> Iterator[Operation]:
    last: Operation | None = None
    while True:
        page = ledger.queries.list_operations(limit=PAGE, start_after=last)
        yield from page
        if len(page) < PAGE:
            return
        last = page[-1]


def all_deliveries(ledger: Ledger) -> Iterator[Delivery]:
    last: Delivery | None = None
    while True:
        page = ledger.deliveries.listing(limit=PAGE, start_after=last)
        yield from page
        if len(page) < PAGE:
            return
        last = page[-1]


def all_reviews(client: firestore.Client) -> list[Any]:
    """Every review snapshot (the ledger lists reviews per operation only; see the report)."""
    return list(client.collection(REVIEWS).stream(timeout=30))


def settle_log_counts(lines: Iterable[str]) -> Counter[str]:
    """How many `operation settled` lines name each operation."""
    counts: Counter[str] = Counter()
    for line in lines:
        if '"operation settled"' not in line:
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if entry.get("message") == "operation settled":
            counts[str(entry.get("operation"))] += 1
    return counts


@dataclass(frozen=True)
class Census:
    operations: int
    reviews: int
    deliveries: int


def check(
    ledger: Ledger,
    client: firestore.Client,
    pushes: Iterable[Push],
    settle_lines: Iterable[str],
    check_runs: list[dict[str, Any]] | None = None,
) -> tuple[list[str], Census]:
    """Violations of the invariants (see the module docstring), and what was counted;
    `check_runs`: the simulator's check runs of the chaos repository (App mode), else None."""
    problems: list[str] = []
    operations = {op.name: op for op in all_operations(ledger)}
    by_sha: dict[str, list[Operation]] = {}
    logged = settle_log_counts(settle_lines)
    for op in operations.values():
        by_sha.setdefault(str(op.context.get("sha")), []).append(op)
        if op.status == PENDING:
            problems.append(f"operation {op.name} still pending")
            continue
        if op.settled_at is None or op.settled_by is None:
            problems.append(f"operation {op.name} is {op.status} without settled_at/settled_by")
        if logged[op.name] > 1:
            problems.append(f"operation {op.name} settled {logged[op.name]} times (log lines)")
    reviews = all_reviews(client)
    reviews_by_op: dict[str, set[tuple[str, str, str]]] = {}
    for snapshot in reviews:
        problems += review_problems(snapshot, operations)
        doc = snapshot.to_dict() or {}
        key = (str(doc.get("repo")), str(doc.get("sha")), str(doc.get("path")))
        reviews_by_op.setdefault(str(doc.get("operation")), set()).add(key)
    for push in pushes:
        found = by_sha.get(push.sha, [])
        if len(found) != 1:
            problems.append(f"push {push.sha[:10]}: {len(found)} operations, expected 1")
            continue
        if check_runs is not None:
            problems += check_run_problems(push, found[0], check_runs)
        want = {(FULL_REPO, push.sha, path) for path in push.paths}
        got = reviews_by_op.get(found[0].name, set())
        if got != want:
            problems.append(
                f"push {push.sha[:10]} ({found[0].name}): reviews {sorted(p for *_, p in got)}, "
                f"expected {sorted(push.paths)}"
            )
    deliveries = 0
    for delivery in all_deliveries(ledger):
        deliveries += 1
        if delivery.status in ("queued", "dead"):
            problems.append(
                f"delivery {delivery.source}:{delivery.delivery_id} left {delivery.status}"
                f" ({delivery.last_error or 'no error'})"
            )
    # The pushes' operations: a shared batch's own (its group's) is counted by its scenario.
    pushes_ops = sum(1 for op in operations.values() if op.kind != GROUP_KIND)
    return problems, Census(pushes_ops, len(reviews), deliveries)


def check_run_problems(push: Push, op: Operation, check_runs: list[dict[str, Any]]) -> list[str]:
    """One completed check run per push, found by the external_id its outbox items carry."""
    where = f"push {push.sha[:10]} ({op.name})"
    items = [
        i for i in op.outbox if isinstance(i.payload, dict) and i.payload.get("kind") == CHECK_RUN
    ]
    problems = [
        f"{where}: check-run item {i.payload.get('role')} given up ({i.given_up_reason})"
        for i in items
        if i.given_up_at is not None
    ]
    external_ids = {str(i.payload.get("external_id")) for i in items}
    if len(external_ids) != 1:
        return [*problems, f"{where}: check-run items carry external_ids {sorted(external_ids)}"]
    [external_id] = external_ids
    runs = [r for r in check_runs if r.get("head_sha") == push.sha and r.get("name") == CHECK_NAME]
    if len(runs) != 1:
        ids = [(r.get("id"), r.get("external_id"), r.get("status")) for r in runs]
        states = "; ".join(_item_state(i) for i in items)
        return [*problems, f"{where}: {len(runs)} check runs, expected 1: {ids} (items: {states})"]
    [run] = runs
    if run.get("external_id") != external_id:
        problems.append(f"{where}: check run {run.get('id')} carries {run.get('external_id')}")
    if run.get("status") != "completed" or not run.get("conclusion"):
        problems.append(
            f"{where}: check run {run.get('id')} is {run.get('status')}"
            f" (conclusion {run.get('conclusion')})"
        )
    return problems


def _item_state(item: Any) -> str:
    """One outbox item in a violation's words: enough to tell why it never landed."""
    role = item.payload.get("role") if isinstance(item.payload, dict) else None
    if item.delivered_at is not None:
        return f"{role} delivered"
    return (
        f"{role} open: {item.attempts} attempts, next {item.next_attempt_at}, claimed until "
        f"{item.claimed_until}, last error {item.last_error!r}"
    )


def review_problems(snapshot: Any, operations: dict[str, Operation]) -> list[str]:
    doc = snapshot.to_dict() or {}
    where = f"review {doc.get('repo')}@{str(doc.get('sha'))[:10]}:{doc.get('path')}"
    op = operations.get(str(doc.get("operation")))
    if op is None:
        return [f"{where}: written by unknown operation {doc.get('operation')}"]
    if op.status == PENDING:
        return [f"{where}: operation {op.name} is still pending"]
    if op.context.get("sha") != doc.get("sha"):
        return [f"{where}: operation {op.name} reviews sha {op.context.get('sha')}"]
    problems = []
    if snapshot.create_time != snapshot.update_time:
        problems.append(f"{where}: rewritten after creation (by {op.name})")
    # With no outbox, nothing writes the operation after its settling commit.
    same_commit = op.update_time is None or snapshot.update_time == op.update_time
    if op.writeback_done and not op.outbox and not same_commit:
        problems.append(
            f"{where}: committed at {snapshot.update_time}, {op.name} settled at {op.update_time}"
        )
    return problems


def quiet(
    ledger: Ledger, pushes: Iterable[Push], tasks_left: Callable[[], bool | None] | None = None
) -> bool:
    """No task left in the queue (when `tasks_left` can say: a retry still scheduled runs
    later), no pending operation, no queued delivery, and every push's operation is settled
    with its outbox (the check run, a comment) delivered or given up."""
    if tasks_left is not None and tasks_left() is not False:
        return False
    if ledger.queries.count_operations(status=PENDING) or ledger.deliveries.count(status="queued"):
        return False
    for push in pushes:
        op = ledger.queries.find_operation("context.sha", push.sha)
        if op is None or op.pending or any(item.open for item in op.outbox):
            return False
    return True


def wait_quiet(
    ledger: Ledger,
    pushes: list[Push],
    deadline_s: float,
    clock: Callable[[], float] = time.monotonic,
    tasks_left: Callable[[], bool | None] | None = None,
) -> bool:
    """Poll `quiet` every 0.5 s until it holds (True) or `deadline_s` passes (False)."""
    give_up = clock() + deadline_s
    while True:
        try:
            if quiet(ledger, pushes, tasks_left):
                return True
        except LedgerError:
            pass  # a frozen or restarting store: ask again
        if clock() >= give_up:
            return False
        time.sleep(0.5)
