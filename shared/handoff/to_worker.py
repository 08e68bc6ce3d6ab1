"""Handing a verified delivery to the worker: seal its envelope, create its named task.

The ingress does it for every delivery it accepts; the GitHub recovery sweep does it for
a delivery it read back from GitHub (shared/recovery). One function, so both tasks carry
the same target, token and deadline.
"""

from __future__ import annotations

from shared.config import Config
from shared.handoff.envelope import Envelope, EnvelopeSealer
from shared.handoff.tasks import EnqueueResult, TaskQueue


def hand_to_worker(
    config: Config,
    sealer: EnvelopeSealer,
    queue: TaskQueue,
    envelope: Envelope,
    task_id: str,
    *,
    store_as: str | None = None,
    body_sha256: str | None = None,
) -> EnqueueResult:
    """Seal `envelope` and create task `task_id` posting it to the worker (`duplicate` when
    the name is taken); a large body is stored under `store_as` when given, and
    `body_sha256`, when the caller has it, spares hashing the body again. Raises
    `EnvelopeTooLarge`, `EnqueueError` or `PayloadError`."""
    sealed = sealer.seal(envelope, store_as=store_as, body_sha256=body_sha256)
    return queue.enqueue(
        config.worker_url,
        sealed,
        {"Content-Type": "application/json"},
        task_id=task_id,
        oidc_service_account=config.tasks_service_account or None,
        oidc_audience=config.worker_url,  # the worker checks this audience
        # Below the worker's timeout (docs/architecture.md, "Delivery lease").
        dispatch_deadline_s=config.task_dispatch_deadline_s,
    )
