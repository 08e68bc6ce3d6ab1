"""The `Submitter` an app's handler gets: shared/submission.py's steps and, for a kind that
shares batches, a join of its open group instead of a batch of its own.

A submission a person waits for (`SubmitDeps.interactive`: an interactive kind, or a
priority above background work) never joins: it creates its batch at once, whatever `sharing` says.

A run that finds its submission decided as an item of a group (`groups/{gid}.{n}`) seals
the group when it is due: that is how the run that opened a group, deferred to the end of
its window, comes back and seals it (join.py, `seal_if_due`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from shared import submission
from shared.sharing.join import group_of, join, seal_if_due
from shared.submission import Submitted

if TYPE_CHECKING:
    from shared.kinds import Sharing
    from shared.ledger import DeliveryEnd


class Submitter(submission.Submitter):
    """shared/submission.py's `Submitter`, which also joins shared batches."""

    def join(
        self,
        requests: Sequence[tuple[str, str]],
        context: dict[str, Any],
        *,
        model: str,
        sharing: Sharing,
        generation_config: Mapping[str, Any] | None = None,
        end: DeliveryEnd | None = None,
    ) -> str:
        """After `claim(context)` returned None: add this item's requests to its kind's
        open group instead of creating a batch of its own (join.py). The item's operation
        (`groups/{group}.{n}`) settles once its group's batch does, from its own rows.
        What happened; `Deferred` when this run must wait to seal the group. An
        interactive submission never joins: `ValueError` (use `submit` or `create`)."""
        if self.deps.interactive:
            priority = self.deps.batch_priority()
            raise ValueError(
                f"{self.tag}: a batch a person waits for (priority {priority}) is never shared: "
                "create it (submit without sharing, or create)"
            )
        return join(self, requests, context, model=model, sharing=sharing,
                    generation_config=generation_config, end=end).said  # fmt: skip

    def submit(
        self,
        requests: Sequence[tuple[str, str]],
        context: dict[str, Any],
        *,
        model: str,
        generation_config: Mapping[str, Any] | None = None,
        sharing: Sharing | None = None,
        end: DeliveryEnd | None = None,
    ) -> Submitted:
        """As shared/submission.py's, or with `sharing`: claim, then join the open group
        (`Deferred` from the run that must come back to seal it). An interactive
        submission creates its batch at once, `sharing` or not."""
        if sharing is None or self.deps.interactive:
            return super().submit(requests, context, model=model,
                                  generation_config=generation_config, end=end)  # fmt: skip
        decided = self.claim(context)
        if decided is not None:
            return Submitted(decided, self.decided_operation(), False)
        joined = join(self, requests, context, model=model, sharing=sharing,
                      generation_config=generation_config, end=end)  # fmt: skip
        return Submitted(joined.said, joined.operation, True)

    def decided_said(self, operation: str) -> str:
        if group_of(operation) is not None:  # an item of a shared batch: its group may be due
            return seal_if_due(self, operation)
        return super().decided_said(operation)
