"""The emulator's state on disk (`--data-dir`), so tasks survive a restart like the real queue.

The real queue is durable: a task exists until it completes, exhausts its retries or is
deleted. With a data dir the store writes every change here before the call that made
it returns (CreateTask answers only once the task is committed), and reads it all back
at start. Without one, `Journal` (the no-op base) keeps everything in memory only.

What is kept: queues (settings, state, purge time), tasks (request, schedule time,
dispatch/response/execution counts, first and last attempt, previous answer), name
tombstones until they expire, and small named values (the OIDC signing key, the manual
clock). What is not: attempts in flight. A task dispatched when the process died has
its dispatch committed but no answer, so it is due again at start (at-least-once):

    dispatch committed ──▶ request sent ──▶ SIGKILL ──▶ restart: dispatched again

Crash safety comes from SQLite (stdlib `sqlite3`): each change is one transaction in
WAL mode, so a SIGKILL at any moment leaves the last committed state readable.
`synchronous=NORMAL` survives a process crash; only a power cut may lose the last
commits, which a development emulator need not survive. One process per data dir:
an exclusive `flock` on `DIR/lock`, which the kernel releases when the process dies.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import fcntl
import json
import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from local.cloudtasks_emulator.model import (
    Attempt,
    QueueRecord,
    RatePolicy,
    RetryPolicy,
    TaskRecord,
    parse_task,
)

SCHEMA_VERSION = "1"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS queues (name TEXT PRIMARY KEY, record TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS tasks (
    name TEXT PRIMARY KEY, queue TEXT NOT NULL, record TEXT NOT NULL, body BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS tombstones (
    name TEXT PRIMARY KEY, queue TEXT NOT NULL, expiry REAL NOT NULL
);
"""


class JournalError(OSError):
    """The data dir cannot be used (locked by another emulator, unreadable, newer schema)."""


class Journal:
    """Keeps nothing: the emulator without `--data-dir`. Every write is a no-op."""

    durable = False

    @contextlib.contextmanager
    def atomic(self) -> Iterator[None]:
        """Group the writes inside into one commit (nested groups join the outer one)."""
        yield

    def load(self, now: float) -> dict[str, QueueRecord]:
        """Every stored queue with its tasks and its tombstones still running at `now`."""
        return {}

    def put_queue(self, queue: QueueRecord) -> None:
        """Store a queue's settings, state and purge time (not its tasks)."""

    def drop_queue(self, name: str) -> None:
        """Forget a queue, its tasks and its tombstones."""

    def put_task(self, task: TaskRecord) -> None:
        """Store a task as it is now; a tombstone of the same name is dropped with it."""

    def retire(self, queue: str, names: Sequence[str], expiry: float) -> None:
        """Remove tasks and keep their names taken until `expiry` (epoch seconds)."""

    def get_meta(self, key: str) -> bytes | None:
        return None

    def put_meta(self, key: str, value: bytes) -> None:
        """Store a small named value (without a data dir: forgotten)."""

    def close(self) -> None:
        """Release the data dir."""


class SqliteJournal(Journal):
    """`DIR/state.sqlite3`, owned by this process alone. Thread-safe (one lock)."""

    durable = True

    def __init__(self, data_dir: Path) -> None:
        """Open (creating) the store in `data_dir`; raises `JournalError` naming the path."""
        self.path = Path(data_dir) / "state.sqlite3"
        self._lock = threading.RLock()
        self._depth = 0
        self._db: sqlite3.Connection | None = None
        self._lock_fd = -1
        try:
            Path(data_dir).mkdir(parents=True, exist_ok=True, mode=0o700)
            self._lock_fd = os.open(Path(data_dir) / "lock", os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise JournalError(f"cannot use data dir {data_dir}: {exc}") from exc
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(self._lock_fd)
            raise JournalError(f"data dir {data_dir} is in use by another emulator") from exc
        try:
            db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self._db = db
            os.chmod(self.path, 0o600)  # it holds the OIDC signing key
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.executescript(_SCHEMA)
            stored = self.get_meta("schema")
            if stored is None:
                self.put_meta("schema", SCHEMA_VERSION.encode())
            elif stored.decode() != SCHEMA_VERSION:
                raise JournalError(
                    f"{self.path}: schema {stored.decode()} is not {SCHEMA_VERSION}; "
                    "use another --data-dir"
                )
        except sqlite3.Error as exc:
            self.close()
            raise JournalError(f"cannot open {self.path}: {exc}") from exc
        except JournalError:
            self.close()
            raise

    @contextlib.contextmanager
    def atomic(self) -> Iterator[None]:
        with self._lock:
            outermost = self._depth == 0
            if outermost:
                self._run("BEGIN IMMEDIATE")
            self._depth += 1
            try:
                yield
            except BaseException:
                self._depth -= 1
                if outermost:
                    self._run("ROLLBACK")
                raise
            self._depth -= 1
            if outermost:
                self._run("COMMIT")

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:  # e.g. an attempt answered after stop(): a restart re-sends it
            raise JournalError(f"{self.path}: closed")
        return self._db

    def _run(self, statement: str) -> None:
        try:
            self._conn().execute(statement)
        except sqlite3.Error as exc:
            raise JournalError(f"{self.path}: {statement} failed: {exc}") from exc

    def _write(self, what: str, statements: Sequence[tuple[str, tuple[Any, ...]]]) -> None:
        try:
            with self.atomic():
                for sql, params in statements:
                    self._conn().execute(sql, params)
        except sqlite3.Error as exc:
            raise JournalError(f"{self.path}: cannot store {what}: {exc}") from exc

    def _run_one(self, sql: str, params: tuple[Any, ...]) -> None:
        self._write("a clean-up", [(sql, params)])

    def load(self, now: float) -> dict[str, QueueRecord]:
        with self._lock:
            queues = {
                name: _queue_from_json(record)
                for name, record in self._conn().execute("SELECT name, record FROM queues")
            }
            for queue_name, record, body in self._conn().execute(
                "SELECT queue, record, body FROM tasks"
            ):
                if queue_name in queues:
                    task = _task_from_json(record, bytes(body))
                    queues[queue_name].tasks[task.name] = task
            self._run_one("DELETE FROM tombstones WHERE expiry <= ?", (now,))
            for name, queue_name, expiry in self._conn().execute(
                "SELECT name, queue, expiry FROM tombstones"
            ):
                if queue_name in queues:
                    queues[queue_name].tombstones[name] = float(expiry)
        return queues

    def put_queue(self, queue: QueueRecord) -> None:
        sql = "INSERT OR REPLACE INTO queues (name, record) VALUES (?, ?)"
        self._write(f"queue {queue.name}", [(sql, (queue.name, _queue_to_json(queue)))])

    def drop_queue(self, name: str) -> None:
        self._write(
            f"the deletion of queue {name}",
            [
                ("DELETE FROM queues WHERE name = ?", (name,)),
                ("DELETE FROM tasks WHERE queue = ?", (name,)),
                ("DELETE FROM tombstones WHERE queue = ?", (name,)),
            ],
        )

    def put_task(self, task: TaskRecord) -> None:
        queue, _ = parse_task(task.name)
        self._write(
            f"task {task.name}",
            [
                ("DELETE FROM tombstones WHERE name = ?", (task.name,)),
                (
                    "INSERT OR REPLACE INTO tasks (name, queue, record, body) VALUES (?, ?, ?, ?)",
                    (task.name, queue, _task_to_json(task), task.body),
                ),
            ],
        )

    def retire(self, queue: str, names: Sequence[str], expiry: float) -> None:
        statements: list[tuple[str, tuple[Any, ...]]] = []
        for name in names:
            statements.append(("DELETE FROM tasks WHERE name = ?", (name,)))
            statements.append(
                (
                    "INSERT OR REPLACE INTO tombstones (name, queue, expiry) VALUES (?, ?, ?)",
                    (name, queue, expiry),
                )
            )
        what = f"the removal of task {names[0]}" if len(names) == 1 else f"a purge of {queue}"
        self._write(what, statements)

    def get_meta(self, key: str) -> bytes | None:
        with self._lock:
            row = self._conn().execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else bytes(row[0])

    def put_meta(self, key: str, value: bytes) -> None:
        sql = "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)"
        self._write(f"meta {key}", [(sql, (key, value))])

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
            if self._lock_fd >= 0:
                os.close(self._lock_fd)  # releases the flock
                self._lock_fd = -1


# ---- records <-> JSON ------------------------------------------------------------------------


def _queue_to_json(queue: QueueRecord) -> str:
    return json.dumps(
        {
            "name": queue.name,
            "state": queue.state,
            "retry": dataclasses.asdict(queue.retry),
            "rate": dataclasses.asdict(queue.rate),
            "purge_time": queue.purge_time,
            "http_target": base64.b64encode(queue.http_target).decode("ascii"),
            "logging_config": base64.b64encode(queue.logging_config).decode("ascii"),
        }
    )


def _queue_from_json(text: str) -> QueueRecord:
    data = json.loads(text)
    return QueueRecord(
        name=data["name"],
        state=data["state"],
        retry=RetryPolicy(**data["retry"]),
        rate=RatePolicy(**data["rate"]),
        purge_time=data["purge_time"],
        http_target=base64.b64decode(data["http_target"]),
        logging_config=base64.b64decode(data["logging_config"]),
    )


def _task_to_json(task: TaskRecord) -> str:
    data = dataclasses.asdict(task)
    del data["body"], data["running"]  # the body has its own column; running is live state
    return json.dumps(data)


def _task_from_json(text: str, body: bytes) -> TaskRecord:
    data = json.loads(text)
    data["retry"] = RetryPolicy(**data["retry"]) if data["retry"] else None
    for key in ("first_attempt", "last_attempt"):
        data[key] = Attempt(**data[key]) if data[key] else None
    return TaskRecord(body=body, **data)
