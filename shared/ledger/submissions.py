"""Submissions: the create-once guard of actions that are not idempotent (creating a batch).

A `submissions` document is claimed before the action and holds its result afterwards;
the review pipeline's use of it is described in shared/review.py. The claim is ONE
`create`, so of two racing callers exactly one owns the submission::

    A: create(tag) → ok (None: A owns it)     B: create(tag) → ALREADY_EXISTS
                                              B: read → Submission(claimed_by=A) → B waits
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from google.api_core import exceptions as gexc

from shared.ledger.commits import Commits
from shared.ledger.errors import ContentionError, InvalidArgument, StoreUnavailable
from shared.ledger.ids import check_time, submission_id
from shared.ledger.records import SUBMISSIONS, Submission, submission_from


class Submissions:
    """The `submissions` collection."""

    def __init__(self, commits: Commits) -> None:
        self._commits = commits

    def _ref(self, tag: str) -> Any:
        return self._commits.collection(SUBMISSIONS).document(submission_id(tag))

    def claim(self, tag: str, delivery_id: str, now: datetime) -> Submission | None:
        """Create the submission for `tag`; None when created (the caller owns it).

        Otherwise returns the stored submission, unchanged.
        """
        if not isinstance(delivery_id, str) or not delivery_id:
            raise InvalidArgument(f"submission {tag}: delivery id must be a non-empty string")
        check_time(now, "claimed_at")
        ref = self._ref(tag)
        claim = {"tag": tag, "operation": None, "claimed_by": delivery_id, "claimed_at": now}
        try:
            ref.create(claim, timeout=self._commits.timeout_s)
            return None
        except gexc.AlreadyExists:
            pass
        except gexc.GoogleAPIError as exc:
            raise StoreUnavailable(f"submission {tag}: claim failed: {exc}") from exc
        snapshot = self._commits.read(ref, f"submission {tag}")
        if not snapshot.exists:  # deleted between the create and the read
            raise ContentionError(f"submission {tag} vanished while claiming")
        return submission_from(snapshot.to_dict() or {}, tag)

    def get(self, tag: str) -> Submission | None:
        snapshot = self._commits.read(self._ref(tag), f"submission {tag}")
        return submission_from(snapshot.to_dict() or {}, tag) if snapshot.exists else None

    def update(
        self,
        tag: str,
        *,
        operation: str | None = None,
        claimed_by: str | None = None,
        claimed_at: datetime | None = None,
    ) -> None:
        """Merge the given fields (only those not None) into the submission of `tag`."""
        fields: dict[str, Any] = {"tag": tag}
        if operation is not None:
            if not isinstance(operation, str) or not operation:
                raise InvalidArgument(f"submission {tag}: operation must be a non-empty string")
            fields["operation"] = operation
        if claimed_by is not None:
            if not isinstance(claimed_by, str) or not claimed_by:
                raise InvalidArgument(f"submission {tag}: claimed_by must be a non-empty string")
            fields["claimed_by"] = claimed_by
        if claimed_at is not None:
            check_time(claimed_at, "claimed_at")
            fields["claimed_at"] = claimed_at
        try:
            self._ref(tag).set(fields, merge=True, timeout=self._commits.timeout_s)
        except gexc.GoogleAPIError as exc:
            raise StoreUnavailable(f"submission {tag}: update failed: {exc}") from exc
