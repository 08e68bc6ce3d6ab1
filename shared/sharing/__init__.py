"""Shared batches: many items (e.g. pushes) in one Gemini batch, each settled once.

- `Sharing` (here): how a kind's items share, set by the app from its settings;
- shared/ledger/groups.py: the groups in Firestore (join, seal, requests);
- join.py: an item's way in (`Submitter.join`); seal.py: the one sealer's way out;
- kind.py: the core's kind of a group's batch; members.py: its fan-out, item by item.

docs/architecture.md, "Shared batches", tells the whole story. This module stays light:
apps import `Sharing` through shared/api at import time.
"""

from __future__ import annotations

from dataclasses import dataclass

# The `reason` of an item that fails without a batch (its kind's write-back sees it in
# `result.error`): Gemini refused its request, or refused the deployment past the hold.
REQUEST_REFUSED = "request_refused"
DEPLOYMENT_REFUSED = "deployment_refused"


@dataclass(frozen=True)
class Sharing:
    """How a kind's items share batches: a group is sealed at `max_requests` requests or
    `max_bytes` of prompts, or `window_s` after it opened, whichever comes first. An item
    larger than either limit gets a group of its own. `shards` groups are open at once,
    an item joining the one its key hashes to: each join writes its group's document, and
    Firestore sustains about one write a second to one document."""

    max_requests: int
    window_s: float
    max_bytes: int = 16_000_000  # under Gemini's 20 MB inline limit (larger: an input file)
    shards: int = 1

    def __post_init__(self) -> None:
        if self.max_requests < 1 or self.window_s < 0 or self.max_bytes < 1 or self.shards < 1:
            raise ValueError(
                "sharing needs max_requests ≥ 1, window_s ≥ 0, max_bytes ≥ 1 and shards ≥ 1, "
                f"got {self}"
            )
