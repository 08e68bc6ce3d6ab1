"""An item's way into a shared batch: join the open group with its requests, and see
the group sealed when this item is the one to (docs/architecture.md, "Shared batches").

    claim (the item's submission, as for a batch of its own) ─ join: ONE commit: the
        item's operation, its requests page (a larger item's pages are stored first), its
        submission decided, its lane of the group grown (and the delivery's `done`,
        unless this item must still see the group sealed)
    filled the group        → seal now (shared/sharing/seal.py)
    opened the group        → `Deferred` to its window's end; that run seals it
    joined before (a retry) → nothing joins twice; if its group is due, seal it
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from shared.crashpoints import crash_point
from shared.errors import Deferred
from shared.events.subject import SUBJECT_FIELD, Subject
from shared.statuses import GroupStatus

if TYPE_CHECKING:
    from shared.kinds import Sharing
    from shared.ledger import DeliveryEnd
    from shared.submission import Submitter


def join(
    run: Submitter,
    requests: Sequence[tuple[str, str]],
    context: Mapping[str, Any],
    *,
    model: str,
    sharing: Sharing,
    generation_config: Mapping[str, Any] | None = None,
    end: DeliveryEnd | None = None,
) -> Joined:
    """Join the item `run` holds the claim of to its kind's open group: what happened,
    and the item's operation. Raises `Deferred` when this run must wait to seal its group
    (see the module)."""
    # Here, not at the top: the ingress imports this module (shared.api) at cold start,
    # and any shared.ledger module loads Firestore's client.
    from shared.ledger.groups import JoinRequest

    deps = run.deps
    groups = deps.ledger.groups
    try:
        pages = groups.request_pages(run.tag, run.attempt.id, requests)
        if len(pages.ids) > 1:  # too large for the join's commit: stored before it
            groups.store_requests(run.tag, run.attempt.id, requests)
        joined = groups.join(
            JoinRequest(
                tag=run.tag,
                attempt=run.attempt.id,
                kind=deps.kind,
                model=model,
                generation_config=generation_config,
                sharing=sharing,
                pages=pages.ids,
                page_documents=pages.documents if len(pages.ids) == 1 else (),
                requests=len(requests),
                bytes=pages.bytes,
                key_bytes=sum(len(key.encode("utf-8", "surrogatepass")) + 8 for key, _ in requests),
                context=dict(context),
                start_items=lambda name: run.start_items(context, name),
                end=end,
                fair_key=fair_key(sharing, context),
            )
        )
    except Exception:
        run.release(created_nothing=True)  # a join creates no batch: the next one joins at once
        raise
    crash_point("group.item_joined")
    operation = joined.operation
    if joined.group is None:
        return Joined(seal_if_due(run, operation), operation)
    run.deliver_started(operation)
    group = joined.group
    said = f"joined group {group.gid} as {operation} ({len(requests)} request(s))"
    if joined.full or (joined.opened and sharing.window_s <= 0):
        return Joined(f"{said}; {_seal(run, group.gid)}", operation)
    if joined.opened:
        wait = (group.seal_at - deps.clock()).total_seconds()
        raise Deferred(f"{said}; it takes items until {group.seal_at.isoformat()}", after_s=wait)
    return Joined(said, operation)


def fair_key(sharing: Sharing, context: Mapping[str, Any]) -> str:
    """The key whose groups the item joins: its subject's installation or repository
    (`Sharing.fair_by`), "" when it names none or the kind mixes every item."""
    if not sharing.fair_by:
        return ""
    subject = Subject.of_stored(context.get(SUBJECT_FIELD)).stored()
    value = subject.get(f"{sharing.fair_by}_id", subject.get(sharing.fair_by))
    return "" if value is None else f"{sharing.fair_by}:{value}"


class Joined(NamedTuple):
    said: str
    operation: str  # the item's own, `groups/{group}.{n}`


def seal_if_due(run: Submitter, operation: str) -> str:
    """For an item decided already: seal its group if nobody has and it is due (a re-run
    of the item that opened it, at its window's end); else say where it stands."""
    gid = group_of(operation)
    if gid is None:
        return f"already submitted as {operation}"
    group = run.deps.ledger.groups.get(gid)
    if group is None or (group.due_at is None and group.status != GroupStatus.OPEN):
        return f"already joined as {operation}"
    return f"already joined as {operation}; {_seal(run, gid)}"


def group_of(operation: str) -> str | None:
    """The group id of an item's operation name (`groups/{gid}.{index}`), else None."""
    from shared.ledger.group_records import MEMBER_PREFIX  # the cold start, as in `join`

    if not operation.startswith(MEMBER_PREFIX):
        return None
    gid, dot, index = operation.removeprefix(MEMBER_PREFIX).rpartition(".")
    return gid if dot and gid and index.isdigit() else None


def _seal(run: Submitter, gid: str) -> str:
    from shared.sharing.seal import SealDeps, seal

    deps = run.deps
    sealer = SealDeps(
        ledger=deps.ledger,
        gemini=deps.gemini,
        clock=deps.clock,
        create_budget=deps.create_budget,
        deliver=deps.deliver,
    )
    return seal(sealer, gid, delivery_id=run.delivery_id, attempt=run.attempt)
