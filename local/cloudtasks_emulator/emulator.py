"""Wires the store, the dispatcher, the gRPC server and the key server into one object.

With a `data_dir` the state survives a restart (see `journal`): queues, tasks,
tombstones, the OIDC signing key (tokens minted before a restart still verify) and a
manual clock's time (it never goes back). Without one, each start is empty and makes a
new signing key, as before. `rotate_signing_key` keeps the state but not the key: a new
key replaces the stored one and is the only one published, as after a real rotation
whose old key is gone; tasks queued before the restart are signed with the new key:

    old key A stored ──▶ tasks queued ──▶ restart (rotate) ──▶ JWKS {B}; tokens name B
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import grpc

from local.cloudtasks_emulator.clock import ManualClock
from local.cloudtasks_emulator.dispatcher import Dispatcher
from local.cloudtasks_emulator.journal import Journal, SqliteJournal
from local.cloudtasks_emulator.model import (
    DEFAULT_RATE,
    DEFAULT_RETRY,
    ApiError,
    QueueRecord,
    parse_queue,
)
from local.cloudtasks_emulator.oidc import KeyServer, TokenMinter
from local.cloudtasks_emulator.server import CloudTasksService, build_server
from local.cloudtasks_emulator.store import RUNNING, Store

_KEY, _CLOCK = "oidc_private_key", "manual_clock"


def _print(line: str) -> None:
    print(line, flush=True)
    sys.stdout.flush()


class Emulator:
    """Start with `start()`, stop with `stop()`; `grpc_port`/`jwks_url` say where it listens."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 8123,
        http_port: int = 8124,
        *,
        tombstone_s: float = 3600.0,
        time_scale: float = 1.0,
        queues: Sequence[str] = (),
        log: Callable[[str], None] = _print,
        clock: ManualClock | None = None,
        data_dir: Path | None = None,
        rotate_signing_key: bool = False,
    ) -> None:
        """`clock`: a manual clock for the store (tests); None reads the wall clock.
        `data_dir`: keep the state there (None: in memory only). `rotate_signing_key`:
        make a new signing key even if the data dir holds one, and store it there.
        Raises `JournalError` when the data dir is unusable, `ApiError` for a malformed
        queue name."""
        self.log = log
        self.journal = SqliteJournal(data_dir) if data_dir is not None else Journal()
        if clock is not None:
            self._resume_clock(clock)
        self.store = Store(
            tombstone_s=tombstone_s,
            time_scale=time_scale,
            now=clock or time.time,
            journal=self.journal,
        )
        if clock is not None:
            clock.on_advance(self._wake_dispatcher)
        kept = None if rotate_signing_key else self.journal.get_meta(_KEY)
        self.minter = TokenMinter(private_pem=kept)
        if kept is None:
            self.journal.put_meta(_KEY, self.minter.private_pem)
        if rotate_signing_key:
            log(f"signing key rotated: kid={self.minter.kid}")
        self.keys = KeyServer(self.minter, host, http_port, clock, log=log)
        self.dispatcher = Dispatcher(self.store, self.minter, log)
        self.grpc = build_server(
            CloudTasksService(self.store, self.dispatcher), f"{host}:{port}", log
        )
        self.host, self.grpc_port = host, port
        for name in queues:
            location, _ = parse_queue(name)
            record = QueueRecord(name=name, state=RUNNING, retry=DEFAULT_RETRY, rate=DEFAULT_RATE)
            try:
                self.store.create_queue(location, record)
            except ApiError as exc:
                if exc.code != grpc.StatusCode.ALREADY_EXISTS or not self.journal.durable:
                    raise
                # Kept from the previous run, with whatever state it had then.

    def _resume_clock(self, clock: ManualClock) -> None:
        """A manual clock starts no earlier than it stood when the data dir was last used."""
        saved = self.journal.get_meta(_CLOCK)
        if saved is not None and float(saved) > clock():
            clock.advance(float(saved) - clock())
        clock.on_advance(lambda: self.journal.put_meta(_CLOCK, repr(clock()).encode()))

    def _wake_dispatcher(self) -> None:
        # The dispatcher sleeps until the next due time as it saw it; a jump makes tasks due now.
        with self.store.cond:
            self.store.cond.notify_all()

    @property
    def jwks_url(self) -> str:
        return self.keys.jwks_url

    def start(self) -> None:
        self.keys.start()
        self.dispatcher.start()
        self.grpc.start()

    def stop(self) -> None:
        self.grpc.stop(grace=1).wait(2)
        self.dispatcher.stop()
        self.keys.stop()
        with self.store.cond:  # no write is half done
            self.journal.close()
