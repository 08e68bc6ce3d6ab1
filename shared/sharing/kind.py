"""The core's kind for a group's batch: settled once, then fanned out to its items.

Registered by the core like `gemini-cancel` (shared/settlement/kinds.py loads it): no app
owns it and no app may take its name or tag. Its context holds the group's id, its items'
operations (`members`) and every request's key in request order (`keys`, each
`{item index}/{item's key}`), so rows that echo no key are still placed, and an orphan
group batch adopted by reconcile has all it needs from the group's own claim.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from shared.ledger.groups import GROUP_TAG
from shared.settlement.kinds import OperationKind, context_keys, register
from shared.sharing.members import member_items

if TYPE_CHECKING:
    from shared.gemini import BatchStatus, BatchSummary, GeminiGateway
    from shared.ledger import Operation

GROUP_KIND = "hookledger-group"


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
