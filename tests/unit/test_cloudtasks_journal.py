"""The emulator's store on a data dir: what a restart finds, and crash safety under SIGKILL.

A "restart" here is a new Store on the same directory; the crash test SIGKILLs a real
child process in the middle of its writes and then reads what it left.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from local.cloudtasks_emulator.clock import ManualClock
from local.cloudtasks_emulator.journal import JournalError, SqliteJournal
from local.cloudtasks_emulator.model import ApiError, QueueRecord, RetryPolicy, TaskRecord
from local.cloudtasks_emulator.store import PAUSED, RUNNING, Outcome, Store

REPO = Path(__file__).resolve().parents[2]
LOCATION = "projects/p/locations/l"
QUEUE = f"{LOCATION}/queues/q"


def task(name: str, **fields: object) -> TaskRecord:
    values: dict[str, object] = {
        "name": name,
        "url": "http://127.0.0.1:9/",
        "http_method": 1,
        "headers": {"Content-Type": "application/json"},
        "body": b'{"n": 1}',
        "oidc_email": "tasks@p.iam.gserviceaccount.com",
        "oidc_audience": None,
        "schedule_time": 0.0,
        "create_time": 0.0,
        "dispatch_deadline_s": 600.0,
        "retry": None,
        **fields,
    }
    return TaskRecord(**values)  # type: ignore[arg-type]


def open_store(data_dir: Path, clock: ManualClock) -> Store:
    return Store(tombstone_s=60, now=clock, journal=SqliteJournal(data_dir))


def test_a_new_store_on_the_same_dir_finds_queues_tasks_attempts_and_tombstones(
    tmp_path: Path,
) -> None:
    clock = ManualClock(start=1_000.0)
    store = open_store(tmp_path, clock)
    retry = RetryPolicy(max_attempts=5, min_backoff_s=2.0)
    store.create_queue(LOCATION, QueueRecord(name=QUEUE, state=RUNNING, retry=retry))
    store.create_task(QUEUE, task(f"{QUEUE}/tasks/failed-once", retry=retry))
    store.create_task(QUEUE, task(f"{QUEUE}/tasks/in-flight"))
    store.create_task(QUEUE, task(f"{QUEUE}/tasks/deleted"))
    store.delete_task(f"{QUEUE}/tasks/deleted")
    jobs, _ = store.take_due()
    failed = next(j for j in jobs if j.task_name.endswith("failed-once"))
    store.complete(failed, Outcome(503, 14, "HTTP status 503"))
    store.set_state(QUEUE, PAUSED)
    store.journal.close()  # the in-flight attempt never gets its answer

    again = open_store(tmp_path, clock)
    queue = again.get_queue(QUEUE)
    assert (queue.state, queue.retry) == (PAUSED, retry)
    retried = again.get_task(f"{QUEUE}/tasks/failed-once")
    assert (retried.dispatch_count, retried.response_count, retried.previous_response) == (
        1,
        1,
        503,
    )
    assert retried.schedule_time == 1_004.0  # 2 s backoff, doubled on a 503
    assert retried.body == b'{"n": 1}' and retried.retry == retry
    assert retried.last_attempt is not None and retried.last_attempt.status_code == 14
    in_flight = again.get_task(f"{QUEUE}/tasks/in-flight")
    assert (in_flight.dispatch_count, in_flight.running) == (1, 0)  # due again
    with pytest.raises(ApiError, match="too recently"):
        again.create_task(QUEUE, task(f"{QUEUE}/tasks/deleted"))
    again.set_state(QUEUE, RUNNING)
    assert [j.task_name for j in again.take_due()[0]] == [f"{QUEUE}/tasks/in-flight"]
    again.journal.close()


def test_an_expired_tombstone_is_gone_after_a_restart(tmp_path: Path) -> None:
    clock = ManualClock(start=1_000.0)
    store = open_store(tmp_path, clock)
    store.create_queue(LOCATION, QueueRecord(name=QUEUE, state=RUNNING))
    store.create_task(QUEUE, task(f"{QUEUE}/tasks/t"))
    store.delete_task(f"{QUEUE}/tasks/t")
    store.journal.close()
    clock.advance(61)
    again = open_store(tmp_path, clock)
    assert again.create_task(QUEUE, task(f"{QUEUE}/tasks/t")).name == f"{QUEUE}/tasks/t"
    again.journal.close()


def test_one_emulator_per_data_dir(tmp_path: Path) -> None:
    first = SqliteJournal(tmp_path)
    with pytest.raises(JournalError, match="in use"):
        SqliteJournal(tmp_path)
    first.close()
    SqliteJournal(tmp_path).close()  # free again once the owner is gone


_WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from local.cloudtasks_emulator.journal import SqliteJournal
    from local.cloudtasks_emulator.model import QueueRecord
    from local.cloudtasks_emulator.store import Store
    from tests.unit.test_cloudtasks_journal import LOCATION, QUEUE, task

    store = Store(journal=SqliteJournal(Path(sys.argv[1])))
    store.create_queue(LOCATION, QueueRecord(name=QUEUE, state=2))
    n = 0
    while True:
        store.create_task(QUEUE, task(f"{QUEUE}/tasks/t{n}"))
        if n % 2:
            store.delete_task(f"{QUEUE}/tasks/t{n}")
        n += 1
        if n == 50:
            print("50 committed", flush=True)
    """
)


def test_a_sigkill_in_the_middle_of_writes_leaves_a_readable_store(tmp_path: Path) -> None:
    writer = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(tmp_path)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        assert writer.stdout is not None
        assert writer.stdout.readline() == "50 committed\n"
        writer.send_signal(signal.SIGKILL)  # while it keeps writing
        writer.wait(timeout=10)
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait(timeout=10)
        if writer.stdout is not None:
            writer.stdout.close()
    journal = SqliteJournal(tmp_path)
    queues = journal.load(now=0.0)
    journal.close()
    tasks, tombstones = queues[QUEUE].tasks, queues[QUEUE].tombstones
    # Every create committed before "50 committed" is there, as a task or a tombstone.
    assert {f"{QUEUE}/tasks/t{n}" for n in range(50)} <= set(tasks) | set(tombstones)
    assert not set(tasks) & set(tombstones)
