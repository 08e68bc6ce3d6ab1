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
  conclusion; no outbox item given up;
- with shared batches (`shared` given, as every chaos scenario runs): each push in exactly
  one group, its operation that group's item `groups/{gid}.{n}`; each push `succeeded`
  with every review "ok", but a push whose request Gemini refused (`shared.refused`):
  `failed` with reason `request_refused` and every review an error; every batch Gemini
  made (the simulator's) is a group part's registered batch, or recorded superseded.
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
from local.chaos.sharing import Stored, batch_name, part_of_tag, read_groups
from shared.ledger import PENDING, SUPERSEDED, Delivery, Ledger, LedgerError, Operation
from shared.settlement.groups import GROUP_KIND
from shared.sharing.seal import REQUEST_REFUSED

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
    groups: int = 0


@dataclass(frozen=True)
class Shared:
    """What a chaos run adds to the checks (bench/e2e.py gives none): the `batches` Gemini
    made (the simulator's listing) and the shas of the pushes whose request it refused."""

    batches: list[dict[str, Any]]
    refused: frozenset[str] = frozenset()


def check(
    ledger: Ledger,
    client: firestore.Client,
    pushes: Iterable[Push],
    settle_lines: Iterable[str],
    check_runs: list[dict[str, Any]] | None = None,
    shared: Shared | None = None,
) -> tuple[list[str], Census]:
    """Violations of the invariants (see the module docstring), and what was counted;
    `check_runs`: the simulator's check runs of the chaos repository (App mode), else None;
    `shared`: check the pushes as items of shared batches."""
    problems: list[str] = []
    pushes = list(pushes)
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
    statuses: dict[str, set[str]] = {}  # the review statuses of each push, by sha
    for snapshot in reviews:
        problems += review_problems(snapshot, operations)
        doc = snapshot.to_dict() or {}
        key = (str(doc.get("repo")), str(doc.get("sha")), str(doc.get("path")))
        reviews_by_op.setdefault(str(doc.get("operation")), set()).add(key)
        statuses.setdefault(str(doc.get("sha")), set()).add(str(doc.get("status")))
    stored = Stored({}, [])
    if shared is not None:
        stored = read_groups(client)
        problems += group_problems(stored, shared.batches, operations, pushes)
    items = {item.tag: item.operation for item in stored.items}
    for push in pushes:
        found = by_sha.get(push.sha, [])
        if len(found) != 1:
            problems.append(f"push {push.sha[:10]}: {len(found)} operations, expected 1")
            continue
        if check_runs is not None:
            problems += check_run_problems(push, found[0], check_runs)
        if shared is not None:
            refused = push.sha in shared.refused
            problems += item_problems(push, found[0], items.get(push.tag))
            problems += outcome_problems(push, found[0], statuses.get(push.sha, set()), refused)
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
    return problems, Census(pushes_ops, len(reviews), deliveries, len(stored.groups))


def group_problems(
    stored: Stored,
    batches: list[dict[str, Any]],
    operations: dict[str, Operation],
    pushes: list[Push],
) -> list[str]:
    """Each push in exactly one group; every batch Gemini made is the registered batch of
    the group part its display name names, or recorded superseded (a second sealer's)."""
    problems = []
    joined = Counter(item.tag for item in stored.items)
    for push in pushes:
        if joined[push.tag] != 1:
            problems.append(f"push {push.sha[:10]}: in {joined[push.tag]} groups, expected 1")
    for batch in batches:
        name, display_name = batch_name(str(batch["name"])), str(batch.get("display_name"))
        named = part_of_tag(display_name)
        group = stored.groups.get(named[0]) if named is not None else None
        if group is None:
            problems.append(f"batch {name} ({display_name}): no group's")
            continue
        part = next((p for p in group.parts if group.part_tag(p) == display_name), None)
        registered = part is not None and batch_name(part.operation or "") == name
        op = operations.get(name)
        if not registered and (op is None or op.status != SUPERSEDED):
            state = "unknown" if op is None else op.status
            problems.append(
                f"batch {name} ({display_name}): not its part's registered batch ({state})"
            )
    return problems


def item_problems(push: Push, op: Operation, item: str | None) -> list[str]:
    """The push's operation is its group's item (`groups/{gid}.{n}`, as the group lists it)."""
    if op.group is None or item != op.name:
        return [f"push {push.sha[:10]}: operation {op.name}, its group lists {item}"]
    return []


def outcome_problems(push: Push, op: Operation, statuses: set[str], refused: bool) -> list[str]:
    """Reviewed (`succeeded`, every review "ok"), or, for a push whose request Gemini
    refused, `failed` with reason `request_refused` and every review an error."""
    where = f"push {push.sha[:10]} ({op.name})"
    if refused:
        reason = op.error.get("reason") if isinstance(op.error, dict) else None
        if op.status != "failed" or reason != REQUEST_REFUSED or statuses != {"error"}:
            return [f"{where}: {op.status} ({reason}), reviews {sorted(statuses)}; refused"]
        return []
    if op.status != "succeeded" or statuses != {"ok"}:
        return [f"{where}: {op.status} ({op.error}), reviews {sorted(statuses)}"]
    return []


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
        f"{role} open: {item.attempts} attempts, next {item.next_attempt_at}, leased until "
        f"{item.leased_until}, last error {item.last_error!r}"
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
