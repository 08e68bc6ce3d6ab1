"""`shared.tasks` as tools outside the repository import it (docs/architecture.md,
"Contracts"): the Cloud Tasks queue lives in shared/handoff/tasks.py."""

from shared.handoff.tasks import (
    TASKS_POLICY,
    EnqueueError,
    EnqueueResult,
    QueueSetupError,
    TaskQueue,
    TasksError,
    ensure_queue,
    make_client,
    task_id_for,
)

__all__ = [
    "TASKS_POLICY",
    "EnqueueError",
    "EnqueueResult",
    "QueueSetupError",
    "TaskQueue",
    "TasksError",
    "ensure_queue",
    "make_client",
    "task_id_for",
]
