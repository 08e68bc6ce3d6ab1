"""Whether a push's GitHub App installation still wants it reviewed (docs/architecture.md,
"installations/{id}"): asked once per push, before anything is fetched.

A push from an installation recorded deleted or suspended, or from a repository that
installation no longer covers, is `Ignored` with the reason. A push with no `installation`
(a personal token's hook), or from an installation no event was recorded for yet, goes on
as before. `GITHUB_REPOSITORIES` is checked first, by the pipeline.
"""

from __future__ import annotations

import logging
from typing import Any

from shared import api
from shared.api import Ignored
from shared.api.github import installation_of
from shared.api.ledger import InstallationReads

log = api.get_logger("review")


def installation_refusal(
    payload: Any, repo: str, installations: InstallationReads, delivery_id: str
) -> Ignored | None:
    """`Ignored` (with why) when the push's installation refuses `repo`; else None (one
    read, none without an installation)."""
    number = installation_of(payload)
    if number is None:
        return None
    recorded = installations.get(number)
    reason = recorded.refusal(repo) if recorded is not None else None
    if reason is None:
        return None
    api.log_event(
        log,
        logging.INFO,
        f"push ignored: {reason}",
        delivery_id=delivery_id,
        repo=repo,
        installation=number,
    )
    return Ignored(reason)
