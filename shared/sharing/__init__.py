"""Shared batches: many items (e.g. pushes) in one Gemini batch, each settled once.

- `Sharing` (shared/kinds.py, re-exported here): how a kind's items share, declared on it;
- shared/ledger/groups.py: the groups in Firestore (join, seal, requests);
- join.py: an item's way in; seal.py: the one sealer's way out; submitter.py: the
  `Submitter` that joins when its kind shares (shared/submission.py's, plus `join`);
- shared/settlement/groups.py: the core's kind of a group's batch and its fan-out, item by
  item (`REQUEST_REFUSED`, `DEPLOYMENT_REFUSED`: shared/kinds.py, re-exported here).

docs/architecture.md, "Shared batches", tells the whole story. This module stays light:
apps import `Sharing` through shared/api at import time.
"""

from __future__ import annotations

from shared.kinds import DEPLOYMENT_REFUSED as DEPLOYMENT_REFUSED
from shared.kinds import REQUEST_REFUSED as REQUEST_REFUSED
from shared.kinds import Sharing as Sharing
