"""An attempt's answer that arrives after its queue was deleted and created again never
touches the new task of the same name (local/cloudtasks_emulator/store.py `complete`).

The test kit deletes and re-creates its queue between tests while a previous test's
attempt may still be answering; a new test may create a task with the same name at once.
"""

from __future__ import annotations

from local.cloudtasks_emulator.clock import ManualClock
from local.cloudtasks_emulator.model import QueueRecord
from local.cloudtasks_emulator.store import RUNNING, Outcome, Store
from tests.unit.test_cloudtasks_journal import LOCATION, QUEUE, task

NAME = f"{QUEUE}/tasks/same-body"


def test_an_answer_for_a_deleted_queues_task_leaves_the_new_task_of_that_name_alone() -> None:
    store = Store(tombstone_s=3600, now=ManualClock(start=1_000.0))
    store.create_queue(LOCATION, QueueRecord(name=QUEUE, state=RUNNING))
    store.create_task(QUEUE, task(NAME))
    (old_attempt,), _ = store.take_due()

    store.delete_queue(QUEUE)  # the attempt is still running at its target
    store.create_queue(LOCATION, QueueRecord(name=QUEUE, state=RUNNING))
    store.create_task(QUEUE, task(NAME))

    assert store.complete(old_attempt, Outcome(200, 0, "OK")) == "gone"
    waiting = store.get_task(NAME)
    assert (waiting.dispatch_count, waiting.response_count) == (0, 0)
    (new_attempt,), _ = store.take_due()
    assert store.complete(new_attempt, Outcome(200, 0, "OK")) == "done"
